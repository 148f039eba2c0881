//! The disk cache of fetched compressed bytes (`-o cache_dir=DIR,cache_dir_size=SIZE`): the
//! chunk extents of remote objects (and the whole objects of a prefix), kept as files under
//! `DIR/b2fs-cache-v1/` so a remount, or another mount of the same objects, reads them with
//! no GET.
//!
//! - **Key**: the object's identity (its URL, with the S3 endpoint), its version (the ETag;
//!   without one, `Last-Modified` and the size, as the request pin does), and the byte range.
//!   A changed object has another version, so its old entries are never served; they age out.
//! - **Entry**: one file named by the xxh3-128 of the key, in one of 256 subdirectories: a
//!   header (magic, the key itself, the payload length and its xxh3-128), then the payload.
//!   A read checks all of it; an entry that fails (torn, truncated, bit rot, another key) is
//!   logged, deleted and fetched again.
//! - **Writes** are atomic: a temporary file in `tmp/`, renamed into place. Readers never see
//!   a partial entry; two mounts storing the same entry store the same bytes.
//! - **Size bound**: a byte count shared by every process using the directory, kept in the
//!   `lock` file and updated under `flock`. When a store takes it past the bound, the entries
//!   are listed and the least recently used (oldest modification time; a hit sets it to now)
//!   are deleted until 7/8 of the bound is left, and the count is set to what was measured, so
//!   a count gone wrong (a crash, a hand-made deletion) heals at the next eviction. An entry
//!   deleted while another mount reads it is still read whole (an open file), or is a miss.
//! - **The one `unsafe`** is the `flock(2)` of the count (std's `File::lock` needs Rust 1.89,
//!   above the crate's rust-version).
//! - **Never in the way**: stores run on blocking threads after the fetch has answered, at
//!   most [`PENDING_MAX`] bytes of them waiting (beyond that an extent is not stored); any
//!   failure of the cache (full disk, unwritable directory) is logged once and costs only a
//!   fetch.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::client::{RemoteError, RemoteErrorKind};
use super::pool::{BufPool, PoolBuf};

/// The directory under `cache_dir` this layout owns.
const LAYOUT: &str = "b2fs-cache-v1";
/// The first bytes of every entry.
const MAGIC: &[u8; 8] = b"b2fsDC1\n";
/// Magic, key length (u32), payload length (u64), payload xxh3-128.
const HEADER: usize = 8 + 4 + 8 + 16;
/// The longest key kept (longer URLs are not cached).
const MAX_KEY: usize = 4096;
/// The most bytes waiting to be stored.
pub(crate) const PENDING_MAX: usize = 64 << 20;
/// Temporary files older than this are leftovers of a crash (removed at eviction).
const STALE_TMP: Duration = Duration::from_secs(600);

/// Counters of a disk cache.
#[derive(Debug, Default)]
pub struct DiskStats {
    hits: AtomicU64,
    stored: AtomicU64,
    dropped: AtomicU64,
    evicted: AtomicU64,
    pending: AtomicUsize,
}

impl DiskStats {
    /// Entries read back and checked good.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
    /// Entries written.
    pub fn stored(&self) -> u64 {
        self.stored.load(Ordering::Relaxed)
    }
    /// Entries found bad and deleted.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
    /// Entries deleted to keep within the size bound.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }
    /// Bytes waiting to be stored.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }
}

/// A cache directory, shared by every object of the process that names it.
#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
    limit: u64,
    /// The `lock` file (flock across processes, the mutex within this one); it holds the
    /// shared byte count.
    lock: Mutex<File>,
    seq: AtomicU64,
    warned: AtomicBool,
    stats: DiskStats,
}

/// One entry's key and file.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    key: String,
    file: PathBuf,
}

/// The caches opened by this process, by directory.
fn opened() -> &'static Mutex<HashMap<PathBuf, Weak<DiskCache>>> {
    static OPENED: OnceLock<Mutex<HashMap<PathBuf, Weak<DiskCache>>>> = OnceLock::new();
    OPENED.get_or_init(Default::default)
}

fn config(why: String) -> RemoteError {
    RemoteError::new(RemoteErrorKind::Config, why)
}

impl DiskCache {
    /// The cache in `dir` bounded to `limit` bytes (made if absent), the same one for every
    /// caller of this process naming the same directory.
    ///
    /// # Errors
    /// `Config` when the directory cannot be made or its lock file opened.
    pub fn open(dir: &Path, limit: u64) -> Result<Arc<DiskCache>, RemoteError> {
        let root = dir.join(LAYOUT);
        std::fs::create_dir_all(root.join("tmp"))
            .map_err(|e| config(format!("cache_dir {}: {e}", dir.display())))?;
        let root = root.canonicalize().unwrap_or(root);
        let mut all = opened().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = all.get(&root).and_then(Weak::upgrade) {
            return Ok(c);
        }
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(root.join("lock"))
            .map_err(|e| config(format!("cache_dir {}: {e}", dir.display())))?;
        let c = Arc::new(DiskCache {
            dir: root.clone(),
            limit,
            lock: Mutex::new(lock),
            seq: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            stats: DiskStats::default(),
        });
        all.insert(root, Arc::downgrade(&c));
        Ok(c)
    }

    /// The counters.
    pub fn stats(&self) -> &DiskStats {
        &self.stats
    }

    /// The bound in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The entry of bytes `range` of version `version` of the object `object`; `None` for
    /// a key too long to keep.
    pub(crate) fn entry(&self, object: &str, version: &str, range: Range<u64>) -> Option<Entry> {
        let key = format!("{object}\n{version}\n{}-{}", range.start, range.end);
        if key.len() > MAX_KEY {
            return None;
        }
        let h = twox_hash::XxHash3_128::oneshot(key.as_bytes());
        let name = format!("{h:032x}");
        let file = self.dir.join(&name[..2]).join(&name);
        Some(Entry { key, file })
    }

    /// Whether `e` is on disk (not checked: a prefetch leaves such extents to the read).
    pub(crate) fn has(&self, e: &Entry) -> bool {
        e.file.is_file()
    }

    /// Logs a failure of the cache itself once (later ones at debug level).
    fn trouble(&self, what: std::fmt::Arguments<'_>) {
        if self.warned.swap(true, Ordering::Relaxed) {
            log::debug!("disk cache {}: {what}", self.dir.display());
        } else {
            log::warn!(
                "disk cache {}: {what} (remote reads go on without it; later failures are \
                 logged at debug level)",
                self.dir.display()
            );
        }
    }

    /// Drops a bad entry: logged, deleted.
    fn drop_bad(&self, e: &Entry, why: &str) {
        log::warn!(
            "disk cache: {} is bad ({why}): dropped, fetching it again",
            e.file.display()
        );
        self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        let _ = std::fs::remove_file(&e.file);
    }

    /// The payload of `e`, which must be `len` bytes, checked (into a buffer of `pool`);
    /// `None` when absent or bad (a bad one is dropped).
    pub(crate) fn get(&self, e: &Entry, len: usize, pool: Option<&Arc<BufPool>>) -> Option<Bytes> {
        let mut f = match File::open(&e.file) {
            Ok(f) => f,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
            Err(err) => {
                self.trouble(format_args!("{}: {err}", e.file.display()));
                return None;
            }
        };
        let want = (HEADER + e.key.len() + len) as u64;
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        if size != want {
            self.drop_bad(e, &format!("{size} bytes, not {want}"));
            return None;
        }
        let mut head = vec![0u8; HEADER + e.key.len()];
        if let Err(err) = f.read_exact(&mut head) {
            self.drop_bad(e, &err.to_string());
            return None;
        }
        let klen = u32::from_le_bytes(head[8..12].try_into().unwrap_or_default()) as usize;
        let plen = u64::from_le_bytes(head[12..20].try_into().unwrap_or_default());
        let hash = u128::from_le_bytes(head[20..36].try_into().unwrap_or_default());
        if &head[..8] != MAGIC
            || klen != e.key.len()
            || plen != len as u64
            || &head[HEADER..] != e.key.as_bytes()
        {
            self.drop_bad(e, "header or key does not match");
            return None;
        }
        let mut buf = match pool {
            Some(p) => p.take(len),
            None => PoolBuf::unpooled(len),
        };
        if let Err(err) = buf.fill_from(&mut f, len) {
            self.drop_bad(e, &err.to_string());
            return None;
        }
        if twox_hash::XxHash3_128::oneshot(buf.as_ref()) != hash {
            self.drop_bad(e, "checksum mismatch");
            return None;
        }
        // Recently used: eviction goes by modification time.
        let _ = f.set_modified(SystemTime::now());
        self.stats.hits.fetch_add(1, Ordering::Relaxed);
        Some(buf.freeze())
    }

    /// Stores `bytes` as `e` on a blocking thread of the current runtime (here when there is
    /// none), unless too many bytes already wait to be stored.
    pub(crate) fn put_later(self: &Arc<Self>, e: Entry, bytes: Bytes) {
        let n = bytes.len();
        let pending = &self.stats.pending;
        if pending.fetch_add(n, Ordering::AcqRel) + n > PENDING_MAX {
            pending.fetch_sub(n, Ordering::AcqRel);
            log::debug!(
                "disk cache: {} bytes waiting, not storing more",
                PENDING_MAX
            );
            return;
        }
        let me = Arc::clone(self);
        let job = move || {
            me.store(&e, &bytes);
            me.stats.pending.fetch_sub(n, Ordering::AcqRel);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(job)),
            Err(_) => job(),
        }
    }

    /// Writes `bytes` as entry `e` (temporary file, then rename), counts it, and evicts
    /// when the bound is passed.
    pub(crate) fn store(&self, e: &Entry, bytes: &[u8]) {
        let size = (HEADER + e.key.len() + bytes.len()) as u64;
        if size > self.limit / 2 {
            return;
        }
        if std::fs::metadata(&e.file).is_ok_and(|m| m.len() == size) {
            return;
        }
        let tmp = self.dir.join("tmp").join(format!(
            "{}.{}",
            std::process::id(),
            self.seq.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = File::create(&tmp)?;
            let mut head = Vec::with_capacity(HEADER + e.key.len());
            head.extend_from_slice(MAGIC);
            head.extend_from_slice(&(e.key.len() as u32).to_le_bytes());
            head.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            head.extend_from_slice(&twox_hash::XxHash3_128::oneshot(bytes).to_le_bytes());
            head.extend_from_slice(e.key.as_bytes());
            f.write_all(&head)?;
            f.write_all(bytes)?;
            drop(f);
            if let Some(parent) = e.file.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::rename(&tmp, &e.file)
        })();
        if let Err(err) = written {
            let _ = std::fs::remove_file(&tmp);
            self.trouble(format_args!("cannot store {}: {err}", e.file.display()));
            return;
        }
        self.stats.stored.fetch_add(1, Ordering::Relaxed);
        if let Err(err) = self.count(size) {
            self.trouble(format_args!("cannot count its size: {err}"));
        }
    }

    /// Adds `size` to the shared byte count; evicts when it passes the bound.
    fn count(&self, size: u64) -> std::io::Result<()> {
        let lock = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let _flock = Flock::new(&lock)?;
        let mut buf = [0u8; 8];
        let total = match lock.read_at(&mut buf, 0)? {
            8 => u64::from_le_bytes(buf).saturating_add(size),
            // A new directory (or a count never written): measure it (the new entry too).
            _ => self.measure()?.iter().map(|f| f.1).sum(),
        };
        let total = if total > self.limit {
            self.evict()?
        } else {
            total
        };
        lock.write_all_at(&total.to_le_bytes(), 0)
    }

    /// Every entry: `(path, bytes, modification time)`; removes stale temporary files.
    fn measure(&self) -> std::io::Result<Vec<(PathBuf, u64, SystemTime)>> {
        let mut out = Vec::new();
        for sub in std::fs::read_dir(&self.dir)? {
            let sub = sub?;
            let name = sub.file_name();
            let name = name.to_string_lossy();
            let is_tmp = name == "tmp";
            if !(is_tmp || (name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()))) {
                continue;
            }
            let Ok(files) = std::fs::read_dir(sub.path()) else {
                continue;
            };
            for f in files.flatten() {
                let Ok(m) = f.metadata() else { continue };
                let mtime = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                if is_tmp {
                    if mtime.elapsed().is_ok_and(|age| age > STALE_TMP) {
                        let _ = std::fs::remove_file(f.path());
                    }
                    continue;
                }
                if m.is_file() {
                    out.push((f.path(), m.len(), mtime));
                }
            }
        }
        Ok(out)
    }

    /// Deletes the least recently used entries until 7/8 of the bound is left; returns the
    /// bytes left. The caller holds the lock.
    fn evict(&self) -> std::io::Result<u64> {
        let mut all = self.measure()?;
        let mut total: u64 = all.iter().map(|f| f.1).sum();
        let low = self.limit / 8 * 7;
        if total <= self.limit {
            return Ok(total);
        }
        all.sort_by_key(|f| f.2);
        let mut n = 0u64;
        for (path, size, _) in all {
            if total <= low {
                break;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    total -= size;
                    n += 1;
                }
                // Evicted by another mount meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => total -= size,
                Err(e) => return Err(e),
            }
        }
        self.stats.evicted.fetch_add(n, Ordering::Relaxed);
        log::debug!(
            "disk cache {}: evicted {n} entries, {total} bytes left",
            self.dir.display()
        );
        Ok(total)
    }
}

/// An exclusive `flock` on a file, released when dropped.
struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    fn new(f: &'a File) -> std::io::Result<Flock<'a>> {
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock on a descriptor this borrow keeps open; no memory is passed.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Flock(f));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as in `Flock::new`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(c: &DiskCache) -> Vec<(PathBuf, u64, SystemTime)> {
        c.measure().unwrap()
    }

    #[test]
    fn entries_round_trip_and_bad_ones_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let c = DiskCache::open(dir.path(), 1 << 20).unwrap();
        let e = c.entry("http://h/x.b2nd", "\"etag1\"", 100..200).unwrap();
        assert!(c.get(&e, 100, None).is_none());
        c.store(&e, &[7u8; 100]);
        assert!(c.has(&e));
        assert_eq!(&c.get(&e, 100, None).unwrap()[..], &[7u8; 100]);
        // Another version or range of the same object is another entry.
        let v2 = c.entry("http://h/x.b2nd", "\"etag2\"", 100..200).unwrap();
        assert!(c.get(&v2, 100, None).is_none());
        // A flipped payload byte: detected, deleted.
        let mut raw = std::fs::read(&e.file).unwrap();
        let n = raw.len();
        raw[n - 3] ^= 1;
        std::fs::write(&e.file, &raw).unwrap();
        assert!(c.get(&e, 100, None).is_none());
        assert!(!c.has(&e), "dropped");
        assert_eq!(c.stats().dropped(), 1);
        // Truncated: same.
        c.store(&e, &[7u8; 100]);
        let f = OpenOptions::new().write(true).open(&e.file).unwrap();
        f.set_len(50).unwrap();
        assert!(c.get(&e, 100, None).is_none());
        assert_eq!(c.stats().dropped(), 2);
    }

    #[test]
    fn the_bound_holds_and_least_recently_used_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let c = DiskCache::open(dir.path(), 64 << 10).unwrap();
        let e = |i: u64| {
            c.entry("s3://b/k", "\"e\"", i * 4096..(i + 1) * 4096)
                .unwrap()
        };
        // Modification times are as coarse as the kernel's tick: space the stores.
        let store = |i: u64| {
            std::thread::sleep(Duration::from_millis(10));
            c.store(&e(i), &[i as u8; 4096]);
            let total: u64 = entries(&c).iter().map(|f| f.1).sum();
            assert!(total <= 64 << 10, "{total} bytes after entry {i}");
        };
        for i in 0..12 {
            store(i);
        }
        assert_eq!(c.stats().evicted(), 0, "12 entries fit");
        // Entry 0 read again: now the most recently used.
        std::thread::sleep(Duration::from_millis(10));
        assert!(c.get(&e(0), 4096, None).is_some());
        for i in 12..17 {
            store(i);
        }
        assert!(c.stats().evicted() > 0);
        assert!(c.has(&e(0)), "used recently: kept");
        assert!(!c.has(&e(1)), "old and unused: evicted");
        assert!(c.get(&e(16), 4096, None).is_some(), "the newest stays");
        // The same directory opened again in this process is the same cache.
        assert!(Arc::ptr_eq(
            &c,
            &DiskCache::open(dir.path(), 64 << 10).unwrap()
        ));
    }
}
