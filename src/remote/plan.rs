//! The request plan of a remote object, as a [`ByteSource`]:
//! - open: `GET bytes=0-65535` and `GET bytes=-262144` in parallel (one round trip; no HEAD,
//!   the size comes from `Content-Range`); the frame's header, index and trailer reads are
//!   served from those two buffers, and an index longer than the tail costs one exact GET;
//! - a read inside a stored chunk (the container says where chunks lie) fetches the whole
//!   compressed chunk in one GET into the extent cache, so the 32-byte header read and the
//!   body read that follow cost nothing more; anything else is one exact GET;
//! - two chunks read in order start a prefetch of the following ones, the window doubling
//!   (1, 2, 4, ... chunks) up to a byte cap (a quarter of the cache budget, at most 64 MiB),
//!   adjacent chunks merged into GETs of up to 8 MiB that run concurrently; reads a few chunks
//!   behind (other threads) leave it alone, any other jump resets it;
//! - every GET is conditional on the version seen at open; a 412 (or an answer with another
//!   ETag) marks the object changed, logged once naming it, and every later read fails; a
//!   followed object ([`RemoteObject::follow_every`]: one mounted alone) is also asked every
//!   so often for its first byte, unconditionally, and opened again when it changed;
//! - with a disk cache, an extent is looked up there before it is fetched (a prefetch leaves
//!   extents on disk to the read), and every extent fetched is stored there, keyed by the
//!   object's identity and the version seen at open.
//!
//! The parts: this file opens the object, follows it, serves exact reads and is the
//! [`ByteSource`]; `extents.rs` knows where the chunks lie and fetches, caches and prefetches
//! them.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use object_store::GetRange;
use parking_lot::RwLock;

use super::RemoteOptions;
use super::cache::{ExtentCache, Flight};
pub use super::client::RemoteStats;
use super::client::{Client, Got, Pin, RemoteError, RemoteErrorKind};
use super::disk::DiskCache;
use super::seq::Sequence;
use crate::container::{ByteSource, ByteView};
use extents::Extents;

/// The head fetched at open.
const HEAD_LEN: u64 = 64 << 10;
/// The tail fetched at open (index chunk and trailer of frames up to ~30,000 chunks).
const TAIL_LEN: u64 = 256 << 10;
/// The largest prefetch window, in bytes (also at most a quarter of the cache budget).
const WINDOW_MAX: u64 = 64 << 20;

/// An object opened for reading (see the module docs).
#[derive(Debug)]
pub struct RemoteObject {
    client: Client,
    len: u64,
    mtime: SystemTime,
    pin: Pin,
    head: Bytes,
    /// The tail buffer and its start offset.
    tail: (u64, Bytes),
    extents: RwLock<Extents>,
    /// The extent cache, maybe shared with the other objects of a server: this object's
    /// extents are keyed by `key_base` plus their offset.
    cache: Arc<ExtentCache>,
    key_base: u64,
    window_max: u64,
    seq: Mutex<Sequence>,
    changed: AtomicBool,
    /// The disk cache and this object's version in its keys.
    disk: Option<(Arc<DiskCache>, String)>,
    /// Following the object ([`RemoteObject::follow_every`]): off unless a mount asks.
    follow: Mutex<Option<Following>>,
}

/// How a followed remote source (an object here, a prefix in `prefix.rs`) is asked whether
/// it changed, and opened again.
#[derive(Debug)]
pub(super) struct Following {
    pub(super) every: Duration,
    last: Instant,
    pub(super) opts: RemoteOptions,
}

impl Following {
    /// Asked every `every` from now on; opened again with `opts`.
    pub(super) fn new(every: Duration, opts: &RemoteOptions) -> Following {
        Following {
            every,
            last: Instant::now(),
            opts: opts.clone(),
        }
    }

    /// Whether its interval has passed since it was last asked.
    pub(super) fn is_due(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    /// When due, counts a question as asked now and gives its patience: one attempt's
    /// `remote_timeout`, not a read's retries (a server that does not answer must not hold
    /// the follower's round, or the kernel invalidations it sends, for a read's deadline).
    pub(super) fn ask(&mut self) -> Option<Duration> {
        if !self.is_due() {
            return None;
        }
        self.last = Instant::now();
        Some(self.opts.timeout)
    }
}

/// What a followed source's `poll_changed(ask)` knows before asking its server, from its
/// following state `f` (`None`: not followed) and whether a change is `known` already:
/// `Err(answer)` when it needs no question (not followed: no change; known: a change; not
/// asked for, or not due: no change), else `Ok(patience)` for one question, counted as asked.
pub(super) fn before_asking(
    f: Option<&mut Following>,
    known: bool,
    ask: bool,
) -> Result<Duration, bool> {
    let f = f.ok_or(false)?;
    if known {
        return Err(true);
    }
    if !ask {
        return Err(false);
    }
    f.ask().ok_or(false)
}

/// The version of an object in disk cache keys: its ETag, else its Last-Modified and size.
pub(crate) fn version(meta: &object_store::ObjectMeta) -> String {
    match &meta.e_tag {
        Some(e) => format!("etag {e}"),
        None => format!(
            "modified {} size {}",
            meta.last_modified.timestamp_millis(),
            meta.size
        ),
    }
}

/// The disk cache `opts` names, if any (a cache that cannot be opened is logged and left
/// out: reads go on without it).
pub(crate) fn disk_cache(opts: &RemoteOptions) -> Option<Arc<DiskCache>> {
    let dir = opts.cache_dir.as_ref()?;
    match DiskCache::open(dir, opts.cache_dir_size) {
        Ok(c) => Some(c),
        Err(e) => {
            log::warn!("{e}: no disk cache");
            None
        }
    }
}

/// Opens the object at `url`: two GETs in parallel (see the module docs).
///
/// # Errors
/// The class and reason of the failure (missing object, refused access, unreachable
/// endpoint, a server without range support).
pub fn open(url: &str, opts: &RemoteOptions) -> Result<Arc<RemoteObject>, RemoteError> {
    open_with(Client::new(url, opts)?, opts, None)
}

/// Objects sharing one extent cache are told apart by this many low bits of its keys: the
/// offset (an object that does not fit gets a cache of its own).
pub(crate) const SHARED_KEY_BITS: u32 = 44;

/// [`open`] through `client`; `shared`: an extent cache shared with other objects, and this
/// object's number among them.
pub(crate) fn open_with(
    client: Client,
    opts: &RemoteOptions,
    shared: Option<(Arc<ExtentCache>, u64)>,
) -> Result<Arc<RemoteObject>, RemoteError> {
    let url = client.url.clone();
    let t0 = Instant::now();
    let none = Pin::default();
    let head = client.get(GetRange::Bounded(0..HEAD_LEN), &none);
    let tail = client.get(GetRange::Suffix(TAIL_LEN), &none);
    let (head, tail) = client.rt.block_on(async {
        let h = client.rt.spawn(head);
        let t = client.rt.spawn(tail);
        (h.await, t.await)
    });
    let joined = |r: Result<Result<Got, RemoteError>, tokio::task::JoinError>| {
        r.map_err(|e| RemoteError::new(RemoteErrorKind::Network, e.to_string()))?
    };
    let head = joined(head)?;
    let tail = joined(tail)?;
    let len = head.meta.size;
    if tail.meta.size != len || tail.meta.e_tag != head.meta.e_tag {
        return Err(RemoteError::new(
            RemoteErrorKind::Changed,
            "the object changed while it was being opened",
        ));
    }
    let mtime = SystemTime::UNIX_EPOCH
        + std::time::Duration::from_millis(
            u64::try_from(head.meta.last_modified.timestamp_millis()).unwrap_or(0),
        );
    log::info!(
        "{url}: {len} bytes, ETag {}, opened with 2 requests ({} bytes) in {:.1} ms",
        head.meta.e_tag.as_deref().unwrap_or("none"),
        head.parts
            .iter()
            .chain(&tail.parts)
            .map(Bytes::len)
            .sum::<usize>(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let window_max = WINDOW_MAX.min(opts.cache_bytes as u64 / 4);
    let (head_bytes, tail_bytes) = (head.bytes(), tail.bytes());
    let disk = disk_cache(opts).map(|d| (d, version(&head.meta)));
    let (cache, key_base) = match shared {
        Some((c, n)) if len < 1 << SHARED_KEY_BITS && n < 1 << (64 - SHARED_KEY_BITS) => {
            (c, n << SHARED_KEY_BITS)
        }
        _ => (Arc::new(ExtentCache::new(opts.cache_bytes)), 0),
    };
    Ok(Arc::new(RemoteObject {
        disk,
        cache,
        key_base,
        pin: Pin {
            etag: head.meta.e_tag.clone(),
            meta: Some(head.meta),
        },
        len,
        mtime,
        head: head_bytes,
        tail: (tail.range.start, tail_bytes),
        extents: RwLock::new(Extents::default()),
        window_max,
        seq: Mutex::new(Sequence::default()),
        changed: AtomicBool::new(false),
        client,
        follow: Mutex::new(None),
    }))
}

impl RemoteObject {
    /// This object as the byte source a container reads
    /// ([`crate::container::open_bytes`]).
    pub fn byte_source(self: &Arc<Self>) -> Arc<dyn ByteSource> {
        Arc::new(Shared(Arc::clone(self)))
    }

    /// The request counters.
    pub fn stats(&self) -> &RemoteStats {
        &self.client.stats
    }

    /// The disk cache's counters, when there is one.
    pub fn disk_stats(&self) -> Option<&super::DiskStats> {
        self.disk.as_ref().map(|(d, _)| d.stats())
    }

    /// Compressed bytes held by the extent cache now.
    pub fn cached_bytes(&self) -> usize {
        self.cache.used()
    }

    /// Follows the object: [`ByteSource::poll_changed`] asks the server every `every`
    /// whether it still holds the version opened (one GET of its first byte), and
    /// [`ByteSource::reopen`] opens it again with `opts` (a single-source mount; a Caterva2
    /// directory's datasets are followed too, and opened again through the directory).
    pub fn follow_every(&self, every: Duration, opts: &RemoteOptions) {
        *self.following() = Some(Following::new(every, opts));
    }

    /// Whether the follower has a question due for the server ([`ByteSource::asks_now`]).
    fn asks_now(&self) -> bool {
        !self.changed.load(Ordering::Relaxed)
            && self.following().as_ref().is_some_and(Following::is_due)
    }

    fn following(&self) -> std::sync::MutexGuard<'_, Option<Following>> {
        self.follow.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the followed object changed on the server: known from a refused read or an
    /// earlier question, or, with `ask`, asked now when its interval has passed (a failed
    /// question is not a change); false for an object that is not followed. The question
    /// gets one attempt's time ([`Following::ask`]).
    fn poll_changed(&self, ask: bool) -> bool {
        let known = self.changed.load(Ordering::Relaxed);
        let patience = match before_asking(self.following().as_mut(), known, ask) {
            Ok(patience) => patience,
            Err(answer) => return answer,
        };
        let url = &self.client.url;
        let question = self.client.get(GetRange::Bounded(0..1), &Pin::default());
        let got = self
            .client
            .rt
            .block_on(async { tokio::time::timeout(patience, question).await });
        let meta = match got {
            Ok(Ok(g)) => g.meta,
            Ok(Err(e)) => {
                log::debug!("{url}: could not ask whether it changed: {e}");
                return false;
            }
            Err(_) => {
                log::debug!(
                    "{url}: could not ask whether it changed: no answer within {:.1} s",
                    patience.as_secs_f64()
                );
                return false;
            }
        };
        let was = self.pin.meta.as_ref();
        let same = match (&self.pin.etag, &meta.e_tag) {
            (Some(a), Some(b)) => a == b,
            _ => was.is_some_and(|w| w.last_modified == meta.last_modified),
        } && meta.size == self.len;
        if !same && !self.changed.swap(true, Ordering::Relaxed) {
            log::info!(
                "{url}: changed on the server (ETag {}, was {}; {} bytes, were {}): the \
                 mount opens it again",
                meta.e_tag.as_deref().unwrap_or("none"),
                self.pin.etag.as_deref().unwrap_or("none"),
                meta.size,
                self.len
            );
        }
        !same
    }

    /// The object opened again as the server holds it now, followed as this one is; `None`
    /// when this one is not followed.
    fn reopen(&self) -> Option<Result<Arc<RemoteObject>, RemoteError>> {
        let (every, opts) = {
            let f = self.following();
            let f = f.as_ref()?;
            (f.every, f.opts.clone())
        };
        Some(open_with(self.client.clone(), &opts, None).inspect(|o| {
            o.follow_every(every, &opts);
        }))
    }

    /// A failed GET: a 412 marks the object changed (logged once); returned as an I/O error.
    fn failed(&self, e: RemoteError, what: &Range<u64>) -> std::io::Error {
        let url = &self.client.url;
        if e.kind == RemoteErrorKind::Changed {
            let then = if self.following().is_some() {
                "the mount opens it again; reads of this version fail with EIO"
            } else {
                "every read fails with EIO; remount to read the new version"
            };
            if !self.changed.swap(true, Ordering::Relaxed) {
                log::error!(
                    "{url}: the object changed since it was opened (ETag {} no longer \
                     matches): {then}",
                    self.pin.etag.as_deref().unwrap_or("none")
                );
            }
        } else {
            log::warn!("{url}: GET bytes {}..{} failed: {e}", what.start, what.end);
        }
        RemoteError::new(e.kind, format!("{url}: {e}")).into_io()
    }

    /// An EIO-class error once the object is known to have changed.
    fn check_unchanged(&self) -> std::io::Result<()> {
        if self.changed.load(Ordering::Relaxed) {
            return Err(RemoteError::new(
                RemoteErrorKind::Changed,
                format!(
                    "{}: the object changed since it was opened",
                    self.client.url
                ),
            )
            .into_io());
        }
        Ok(())
    }

    /// The `len` bytes at `offset` when they lie inside one chunk extent that fits the
    /// cache: a view of the extent's buffer (cached, awaited, or fetched now).
    fn cached_extent(&self, offset: u64, len: usize) -> std::io::Result<Option<Bytes>> {
        let end = offset + len as u64;
        let found = self.extents.read().find(offset);
        let Some((i, r)) = found else {
            return Ok(None);
        };
        if end > r.end || (r.end - r.start) as usize > self.cache.budget() {
            return Ok(None);
        }
        let b = self.extent(i, r.clone())?;
        let rel = (offset - r.start) as usize;
        Ok((rel + len <= b.len()).then(|| b.slice(rel..rel + len)))
    }

    /// One exact GET, waited for with a deadline, not cached.
    fn exact(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let range = offset..offset + buf.len() as u64;
        let fut = self.client.get(GetRange::Bounded(range.clone()), &self.pin);
        let flight = Arc::new(Flight::default());
        let f2 = Arc::clone(&flight);
        self.client.rt.spawn(async move {
            f2.complete(fut.await.map(|g| g.bytes()));
        });
        let b = flight
            .wait(self.client.deadline + std::time::Duration::from_secs(1))
            .map_err(|e| self.failed(e, &range))?;
        if b.len() != buf.len() {
            return Err(self.failed(
                RemoteError::new(RemoteErrorKind::Protocol, "short range"),
                &range,
            ));
        }
        buf.copy_from_slice(&b);
        Ok(())
    }
}

/// The [`ByteSource`] of a shared [`RemoteObject`] (the container holds one of these).
#[derive(Debug, Clone)]
struct Shared(Arc<RemoteObject>);

fn copy_from(buf: &mut [u8], at: u64, offset: u64, from: &Bytes) -> bool {
    let Some(rel) = offset.checked_sub(at) else {
        return false;
    };
    let Ok(rel) = usize::try_from(rel) else {
        return false;
    };
    match from.get(rel..rel + buf.len()) {
        Some(src) => {
            buf.copy_from_slice(src);
            true
        }
        None => false,
    }
}

impl ByteSource for Shared {
    fn name(&self) -> &str {
        &self.0.client.url
    }

    fn len(&self) -> u64 {
        self.0.len
    }

    fn mtime(&self) -> SystemTime {
        self.0.mtime
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let o = &self.0;
        o.check_unchanged()?;
        if copy_from(buf, 0, offset, &o.head) || copy_from(buf, o.tail.0, offset, &o.tail.1) {
            return Ok(());
        }
        if let Some(b) = o.cached_extent(offset, buf.len())? {
            buf.copy_from_slice(&b);
            return Ok(());
        }
        o.exact(offset, buf)
    }

    fn view(&self, offset: u64, len: usize) -> Option<std::io::Result<ByteView>> {
        let o = &self.0;
        if let Err(e) = o.check_unchanged() {
            return Some(Err(e));
        }
        match o.cached_extent(offset, len) {
            Ok(Some(b)) => Some(Ok(Box::new(b))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn chunk_extents(&self, starts: Vec<u64>, end: u64) {
        self.0.extents.write().merge(Extents::of_frame(starts, end));
    }

    fn changed(&self) -> bool {
        self.0.changed.load(Ordering::Relaxed)
    }

    fn poll_changed(&self, ask: bool) -> bool {
        self.0.poll_changed(ask)
    }

    fn asks_now(&self) -> bool {
        self.0.asks_now()
    }

    fn reopen(&self) -> Option<std::io::Result<Arc<dyn ByteSource>>> {
        let o = self.0.reopen()?;
        Some(o.map(|o| o.byte_source()).map_err(RemoteError::into_io))
    }
}

mod extents;
#[cfg(test)]
mod tests;
