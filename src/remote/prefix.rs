//! A remote prefix (`s3://bucket/dir/`: a sparse frame's directory, a bcolz carray or ctable
//! root, a `.b2d` store) as a [`ByteTree`] of its objects. The request plan:
//! - open: one listing of everything under the prefix (S3 ListObjectsV2, one request per
//!   1,000 keys), which gives every object's size and ETag; then every small object that is
//!   not chunk data nor a store's leaf frame (`chunks.b2frame`, `meta/sizes`, `meta/storage`,
//!   `__attrs__`, `__rootdirs__`, `embed.b2e`, ...) is fetched in parallel, so the
//!   container's open reads them from memory: a mount costs the listing plus one parallel
//!   round;
//! - a read of an object fetches the whole object in one GET into the compressed-bytes cache
//!   (keyed by the object's number in the listing), so a chunk file's header read and body
//!   read cost one request; an object larger than the cache budget is read by exact ranges;
//! - chunk objects read in order (by directory, then chunk number) prefetch the next ones of
//!   the same directory, one GET each and concurrently, the window doubling up to a byte cap
//!   (a quarter of the cache budget, at most 64 MiB), as an object's chunks do;
//! - every GET carries `If-Match` with the ETag the listing gave (else `If-Unmodified-Since`);
//!   a 412 marks the tree changed, logged once naming the object, and every later read fails;
//! - with a disk cache, an object is looked up there (by its URL and listed version) before
//!   it is fetched whole, and stored there once fetched; a remount costs the listing only;
//! - followed ([`RemotePrefix::follow_every`], `remote_recheck`): the follower thread lists
//!   the prefix again when that is due (one listing, no GET, given one attempt's
//!   `remote_timeout`); other names, sizes or ETags mark it moved, and the mount opens it
//!   again ([`ByteTree::reopen`]: one new prefix, listed and warmed once, shared by every
//!   array opened from this one, which starts with the old one's cached bytes of the objects
//!   listed as before). Readers of the old version keep reading the objects whose
//!   ETag still matches; the others fail with EIO (a 412), never with the new bytes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use object_store::GetRange;
use object_store::path::Path as StorePath;

use super::RemoteOptions;
use super::cache::{Begin, ExtentCache, Flight};
use super::client::{Client, Pin, RemoteError, RemoteErrorKind, RemoteStats};
use super::disk::{DiskCache, Entry};
use super::plan::{Following, before_asking};
use super::seq::Sequence;
use crate::container::{ByteSource, ByteTree, ByteView, Relist};

/// The most objects a prefix may hold (a million-chunk sparse frame).
const MAX_OBJECTS: usize = 1 << 20;
/// Objects up to this size that are not chunk data are fetched at open.
const WARM_MAX: u64 = 1 << 20;
/// How long a prefix opened again is handed to the next arrays reopened from the old one (one
/// reload reopens every array of the mount within it); later, it is opened again (a reload
/// that failed on a half-uploaded version must not get that listing back for good).
const SHARE_NEXT: Duration = Duration::from_secs(1);
/// The largest prefetch window, in bytes (also at most a quarter of the cache budget).
const WINDOW_MAX: u64 = 64 << 20;

/// One listed object.
#[derive(Debug)]
struct Listed {
    /// Its name relative to the prefix (`meta/sizes`).
    rel: String,
    path: StorePath,
    url: String,
    size: u64,
    mtime: SystemTime,
    pin: Pin,
}

/// The chunk objects in reading order: by directory, then by chunk number (`__10.blp` after
/// `__9.blp`, which the listing's name order puts before `__2.blp`).
#[derive(Debug, Default)]
struct Chunks {
    /// Object numbers, in reading order.
    order: Vec<usize>,
    /// Each object's position in `order` (`usize::MAX`: not a numbered chunk object).
    pos: Vec<usize>,
    /// The directory (one array's chunks) of each position, numbered.
    group: Vec<u32>,
}

impl Chunks {
    fn of(objects: &[Listed]) -> Chunks {
        let mut numbered: Vec<(&str, u64, usize)> = objects
            .iter()
            .enumerate()
            .filter_map(|(i, o)| chunk_number(&o.rel).map(|(dir, n)| (dir, n, i)))
            .collect();
        numbered.sort_unstable();
        let mut c = Chunks {
            pos: vec![usize::MAX; objects.len()],
            ..Chunks::default()
        };
        let mut g = 0u32;
        for (p, &(dir, _, i)) in numbered.iter().enumerate() {
            if p > 0 && numbered[p - 1].0 != dir {
                g += 1;
            }
            c.order.push(i);
            c.pos[i] = p;
            c.group.push(g);
        }
        c
    }
}

/// The directory and number of a chunk object: `DIR/0000002A.chunk` (hex, a sparse frame's)
/// or `DIR/__42.blp` (decimal, bcolz's).
fn chunk_number(rel: &str) -> Option<(&str, u64)> {
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let n = if let Some(hex) = name.strip_suffix(".chunk") {
        u64::from_str_radix(hex, 16).ok()?
    } else {
        crate::container::bcolz::chunk_file_index(name)? as u64
    };
    Some((dir, n))
}

/// The objects under a prefix (see the module docs).
#[derive(Debug)]
pub struct RemotePrefix {
    client: Client,
    root: PathBuf,
    /// Sorted by `rel`.
    objects: Vec<Listed>,
    chunks: Chunks,
    cache: Arc<ExtentCache>,
    /// The largest prefetch window, in bytes.
    window_max: u64,
    seq: Mutex<Sequence>,
    changed: AtomicBool,
    disk: Option<Arc<DiskCache>>,
    /// The URL it was opened from.
    url: String,
    /// Following it (off unless a mount asks).
    follow: Mutex<Option<Following>>,
    /// A listing since the open showed other objects (names, sizes or ETags).
    moved: AtomicBool,
    /// The prefix opened again after a change and when, shared by every array reopened from
    /// this one within [`SHARE_NEXT`].
    next: Mutex<Option<(Instant, Arc<RemotePrefix>)>>,
}

/// Locks `m`, whatever a panicking holder left.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The objects under the client's prefix, sorted by name, each page of the listing given
/// `patience`.
fn listed(client: &Client, root_url: &str, patience: Duration) -> Result<Vec<Listed>, RemoteError> {
    let metas = client.list_within(MAX_OBJECTS, patience)?;
    let base = client.path().as_ref().to_owned();
    let mut objects: Vec<Listed> = metas
        .into_iter()
        .filter_map(|m| {
            let rel = m
                .location
                .as_ref()
                .strip_prefix(base.as_str())?
                .strip_prefix('/')?
                .to_owned();
            let mtime = SystemTime::UNIX_EPOCH
                + Duration::from_millis(u64::try_from(m.last_modified.timestamp_millis()).ok()?);
            Some(Listed {
                url: format!("{root_url}/{rel}"),
                rel,
                path: m.location.clone(),
                size: m.size,
                mtime,
                pin: Pin {
                    etag: m.e_tag.clone(),
                    meta: Some(m),
                },
            })
        })
        .collect();
    objects.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(objects)
}

/// Whether two listings name the same versions: the same names and sizes, and the same
/// ETags (modification times when the server gives none).
fn same_listing(a: &[Listed], b: &[Listed]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.rel == y.rel
                && x.size == y.size
                && match (&x.pin.etag, &y.pin.etag) {
                    (Some(p), Some(q)) => p == q,
                    _ => x.mtime == y.mtime,
                }
        })
}

/// Whether the object named `rel` is fetched on demand, not at open: chunk data, or a leaf
/// frame of a `.b2d` store (opened when first used).
fn is_chunk_data(rel: &str) -> bool {
    [".chunk", ".blp", ".b2nd", ".b2f", ".b2b"]
        .iter()
        .any(|s| rel.ends_with(s))
}

/// Lists the prefix `url` (`s3://bucket/dir/` or without the last slash) and fetches its
/// small metadata objects (see the module docs). `NotFound` when nothing is under it.
///
/// # Errors
/// The class and reason of the failure.
pub fn open_prefix(url: &str, opts: &RemoteOptions) -> Result<Arc<RemotePrefix>, RemoteError> {
    open_prefix_after(url, opts, None)
}

/// [`open_prefix`] of a prefix opened before as `before`: the objects listed with the same
/// name, size and ETag (modification time when the server gives none) start with the bytes
/// `before` holds in memory, so a change of one object costs a GET of that object, not of
/// every object read again (the buffers are shared, not copied).
fn open_prefix_after(
    url: &str,
    opts: &RemoteOptions,
    before: Option<&RemotePrefix>,
) -> Result<Arc<RemotePrefix>, RemoteError> {
    let client = Client::new(url, opts)?;
    let t0 = Instant::now();
    let root_url = url.trim_end_matches('/').to_owned();
    let objects = listed(&client, &root_url, client.deadline)?;
    if objects.is_empty() {
        return Err(RemoteError::new(
            RemoteErrorKind::NotFound,
            "no object under the prefix",
        ));
    }
    let prefix = Arc::new(RemotePrefix {
        root: PathBuf::from(&root_url),
        chunks: Chunks::of(&objects),
        objects,
        cache: Arc::new(ExtentCache::new(opts.cache_bytes)),
        window_max: WINDOW_MAX.min(opts.cache_bytes as u64 / 4),
        seq: Mutex::new(Sequence::default()),
        changed: AtomicBool::new(false),
        disk: super::plan::disk_cache(opts),
        client,
        url: url.to_owned(),
        follow: Mutex::new(None),
        moved: AtomicBool::new(false),
        next: Mutex::new(None),
    });
    if let Some(before) = before {
        prefix.seed_from(before);
    }
    let listed = prefix.client.stats.requests();
    let warm: Vec<(usize, Arc<Flight>)> = (0..prefix.objects.len())
        .filter(|&i| {
            let o = &prefix.objects[i];
            !is_chunk_data(&o.rel) && o.size > 0 && o.size <= WARM_MAX
        })
        .filter_map(|i| match prefix.cache.begin(i as u64) {
            Begin::Lead(f) => {
                if let Some(b) = prefix.read_disk(i) {
                    prefix.cache.finish(i as u64, &f, Ok(b));
                    return None;
                }
                prefix.spawn_whole(i, Arc::clone(&f));
                Some((i, f))
            }
            _ => None,
        })
        .collect();
    for (i, f) in &warm {
        if let Err(e) = f.wait(prefix.client.deadline) {
            log::debug!("{}: early fetch failed: {e}", prefix.objects[*i].url);
        }
    }
    log::info!(
        "{root_url}/: {} objects listed with {listed} requests, {} metadata objects fetched \
         with {} more, in {:.1} ms",
        prefix.objects.len(),
        warm.len(),
        prefix.client.stats.requests() - listed,
        t0.elapsed().as_secs_f64() * 1e3
    );
    Ok(prefix)
}

impl RemotePrefix {
    /// This prefix as the byte tree a directory source is opened from
    /// ([`crate::container::open_tree`]).
    pub fn byte_tree(self: &Arc<Self>) -> Arc<dyn ByteTree> {
        Arc::new(SharedPrefix(Arc::clone(self)))
    }

    /// The request counters.
    pub fn stats(&self) -> &RemoteStats {
        &self.client.stats
    }

    /// Compressed bytes held by the cache now.
    pub fn cached_bytes(&self) -> usize {
        self.cache.used()
    }

    /// Number of objects listed.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether nothing was listed (never true for an opened prefix).
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Follows the prefix: [`ByteTree::poll_changed`] lists it again every `every` (see the
    /// module docs), and [`ByteTree::reopen`] opens it again with `opts`.
    pub fn follow_every(&self, every: Duration, opts: &RemoteOptions) {
        *lock(&self.follow) = Some(Following::new(every, opts));
    }

    /// Whether the follower has a listing due ([`ByteTree::asks_now`]).
    fn asks_now(&self) -> bool {
        !self.changed.load(Ordering::Relaxed)
            && !self.moved.load(Ordering::Relaxed)
            && lock(&self.follow).as_ref().is_some_and(Following::is_due)
    }

    /// Whether the followed prefix changed on the server: known from a refused read or an
    /// earlier listing, or, with `ask`, listed again now when its interval has passed (a
    /// listing that fails is no change); false when it is not followed. The listing gets
    /// one attempt's time (`remote_timeout`) per page, not a read's retries.
    fn poll_changed(&self, ask: bool) -> bool {
        let known = self.changed.load(Ordering::Relaxed) || self.moved.load(Ordering::Relaxed);
        let patience = match before_asking(lock(&self.follow).as_mut(), known, ask) {
            Ok(patience) => patience,
            Err(answer) => return answer,
        };
        let root = self.root.display();
        let now = match listed(&self.client, &root.to_string(), patience) {
            Ok(now) => now,
            Err(e) => {
                log::debug!("{root}/: could not list it again: {e}");
                return false;
            }
        };
        let same = same_listing(&self.objects, &now);
        if !same && !self.moved.swap(true, Ordering::Relaxed) {
            log::info!(
                "{root}/: changed on the server ({} objects listed, were {}): the mount opens \
                 it again",
                now.len(),
                self.objects.len()
            );
        }
        !same
    }

    /// The prefix opened again as the server holds it now, followed as this one is (one
    /// open shared by the callers within [`SHARE_NEXT`]); `None` when this one is not
    /// followed.
    fn reopen(&self) -> Option<Result<Arc<RemotePrefix>, RemoteError>> {
        let (every, opts) = {
            let f = lock(&self.follow);
            let f = f.as_ref()?;
            (f.every, f.opts.clone())
        };
        let mut next = lock(&self.next);
        if let Some((_, n)) = next.as_ref().filter(|(at, _)| at.elapsed() < SHARE_NEXT) {
            return Some(Ok(Arc::clone(n)));
        }
        let opened = open_prefix_after(&self.url, &opts, Some(self));
        if let Ok(p) = &opened {
            p.follow_every(every, &opts);
            *next = Some((Instant::now(), Arc::clone(p)));
        }
        Some(opened)
    }

    /// Seeds the cache with the bytes `before` holds of the objects this listing names as
    /// `before`'s did ([`open_prefix_after`]), least recently used first.
    fn seed_from(&self, before: &RemotePrefix) {
        for (key, bytes) in before.cache.extents() {
            let Some(old) = usize::try_from(key)
                .ok()
                .and_then(|i| before.objects.get(i))
            else {
                continue;
            };
            let Some(i) = self.find(&old.rel) else {
                continue;
            };
            if same_listing(
                std::slice::from_ref(old),
                std::slice::from_ref(&self.objects[i]),
            ) {
                self.cache.seed(i as u64, bytes);
            }
        }
    }

    fn find(&self, rel: &str) -> Option<usize> {
        self.objects
            .binary_search_by(|o| o.rel.as_str().cmp(rel))
            .ok()
    }

    /// The disk cache entry of object `i` (whole), if there is a disk cache.
    fn disk_entry(&self, i: usize) -> Option<(Arc<DiskCache>, Entry)> {
        let d = self.disk.as_ref()?;
        let o = &self.objects[i];
        let meta = o.pin.meta.as_ref()?;
        let id = format!("{}/{}", self.client.identity.trim_end_matches('/'), o.rel);
        let e = d.entry(&id, &super::plan::version(meta), 0..o.size)?;
        Some((Arc::clone(d), e))
    }

    /// Object `i` read whole from the disk cache, checked.
    fn read_disk(&self, i: usize) -> Option<Bytes> {
        let (d, e) = self.disk_entry(i)?;
        let len = usize::try_from(self.objects[i].size).ok()?;
        let b = d.get(&e, len, Some(&self.cache.pool()))?;
        self.client.stats.count_disk_hit();
        Some(b)
    }

    /// Starts a GET of the whole object `i` that completes `flight` (and stores it in the
    /// disk cache).
    fn spawn_whole(&self, i: usize, flight: Arc<Flight>) {
        let o = &self.objects[i];
        let split = Some((vec![o.size as usize], self.cache.pool()));
        let fut = self
            .client
            .get_at(&o.path, GetRange::Bounded(0..o.size), &o.pin, split);
        let cache = Arc::clone(&self.cache);
        let disk = self.disk_entry(i);
        self.client.rt.spawn(async move {
            let got = fut.await.map(|g| g.bytes());
            if let (Ok(b), Some((d, e))) = (&got, disk) {
                d.put_later(e, b.clone());
            }
            cache.finish(i as u64, &flight, got);
        });
    }

    /// A failed GET of object `i`: a 412 marks the tree changed (logged once).
    fn failed(&self, i: usize, e: RemoteError) -> std::io::Error {
        let url = &self.objects[i].url;
        if e.kind == RemoteErrorKind::Changed {
            let then = if lock(&self.follow).is_some() {
                "the mount opens the prefix again; reads of this version fail with EIO"
            } else {
                "every read fails with EIO; remount to read the new version"
            };
            if !self.changed.swap(true, Ordering::Relaxed) {
                log::error!(
                    "{url}: the object changed since the prefix was listed (ETag {} no longer \
                     matches): {then}",
                    self.objects[i].pin.etag.as_deref().unwrap_or("none")
                );
            }
        } else {
            log::warn!("{url}: GET failed: {e}");
        }
        RemoteError::new(e.kind, format!("{url}: {e}")).into_io()
    }

    fn wait(&self, i: usize, flight: &Flight) -> std::io::Result<Bytes> {
        flight
            .wait(self.client.deadline + Duration::from_secs(1))
            .map_err(|e| self.failed(i, e))
    }

    /// An EIO-class error once the tree is known to have changed.
    fn check_unchanged(&self) -> std::io::Result<()> {
        if self.changed.load(Ordering::Relaxed) {
            return Err(RemoteError::new(
                RemoteErrorKind::Changed,
                format!(
                    "{}: the prefix changed since it was listed",
                    self.root.display()
                ),
            )
            .into_io());
        }
        Ok(())
    }

    /// Whether object `i` is small enough to be fetched whole into the cache.
    fn cacheable(&self, i: usize) -> bool {
        usize::try_from(self.objects[i].size).is_ok_and(|s| s <= self.cache.budget())
    }

    /// Records a read of object `i`; two chunk objects read in order start fetching the next
    /// ones of the same directory (one GET each, concurrently), the window doubling up to
    /// its byte cap.
    fn note_sequential(&self, i: usize) {
        let c = &self.chunks;
        let Some(&p) = c.pos.get(i).filter(|&&p| p != usize::MAX) else {
            return;
        };
        let todo = self.seq.lock().unwrap_or_else(|e| e.into_inner()).read(
            p,
            c.order.len(),
            self.window_max,
            |q| self.objects[c.order[q]].size,
            |a, b| c.group[a] == c.group[b],
            |_| true,
        );
        for q in todo.unwrap_or_default() {
            let j = c.order[q];
            // On disk: left to the read, which finds it there.
            let on_disk = self.disk_entry(j).is_some_and(|(d, e)| d.has(&e));
            if !self.cacheable(j) || on_disk {
                continue;
            }
            if let Begin::Lead(f) = self.cache.begin(j as u64) {
                self.client.stats.count_prefetch();
                self.spawn_whole(j, f);
            }
        }
    }

    /// Object `i` whole (cached, awaited, or fetched now), checked to be its listed size;
    /// `None` when it is larger than the cache budget.
    fn whole(&self, i: usize) -> std::io::Result<Option<Bytes>> {
        let o = &self.objects[i];
        self.note_sequential(i);
        if !self.cacheable(i) {
            return Ok(None);
        }
        let whole = match self.cache.begin(i as u64) {
            Begin::Hit(b) => b,
            Begin::Wait(f) => self.wait(i, &f)?,
            Begin::Lead(f) => match self.read_disk(i) {
                Some(b) => {
                    self.cache.finish(i as u64, &f, Ok(b.clone()));
                    b
                }
                None => {
                    self.spawn_whole(i, Arc::clone(&f));
                    self.wait(i, &f)?
                }
            },
        };
        if whole.len() as u64 != o.size {
            let short = RemoteError::new(
                RemoteErrorKind::Protocol,
                format!("{} bytes, not the {} listed", whole.len(), o.size),
            );
            return Err(self.failed(i, short));
        }
        Ok(Some(whole))
    }

    /// The `len` bytes at `offset` of object `i` as a view of its cached buffer (`None`:
    /// the object is too large to cache).
    fn view(&self, i: usize, offset: u64, len: usize) -> std::io::Result<Option<Bytes>> {
        self.check_unchanged()?;
        let Some(whole) = self.whole(i)? else {
            return Ok(None);
        };
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        match at.checked_add(len).filter(|&end| end <= whole.len()) {
            Some(end) => Ok(Some(whole.slice(at..end))),
            None => {
                let short = RemoteError::new(
                    RemoteErrorKind::Protocol,
                    format!("a read past the end of the object ({} bytes)", whole.len()),
                );
                Err(self.failed(i, short))
            }
        }
    }

    /// Fills `buf` with the bytes at `offset` of object `i`.
    fn read(&self, i: usize, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.check_unchanged()?;
        if buf.is_empty() {
            return Ok(());
        }
        if let Some(b) = self.view(i, offset, buf.len())? {
            buf.copy_from_slice(&b);
            return Ok(());
        }
        let o = &self.objects[i];
        let range = offset..offset + buf.len() as u64;
        let fut = self
            .client
            .get_at(&o.path, GetRange::Bounded(range), &o.pin, None);
        let flight = Arc::new(Flight::default());
        let f2 = Arc::clone(&flight);
        self.client.rt.spawn(async move {
            f2.complete(fut.await.map(|g| g.bytes()));
        });
        let b = self.wait(i, &flight)?;
        if b.len() != buf.len() {
            let short = RemoteError::new(RemoteErrorKind::Protocol, "short range");
            return Err(self.failed(i, short));
        }
        buf.copy_from_slice(&b);
        Ok(())
    }
}

/// The items of `sorted` (sorted by `name`) whose name starts with `prefix`: one range, found
/// by two binary searches (the names before it sort below `prefix`, those after it above
/// every name it starts).
fn sorted_under<'a, T>(sorted: &'a [T], name: impl Fn(&T) -> &str, prefix: &str) -> &'a [T] {
    let start = sorted.partition_point(|o| name(o) < prefix);
    let end = sorted.partition_point(|o| name(o) < prefix || name(o).starts_with(prefix));
    &sorted[start..end]
}

/// The [`ByteTree`] of a shared [`RemotePrefix`].
#[derive(Debug)]
struct SharedPrefix(Arc<RemotePrefix>);

impl ByteTree for SharedPrefix {
    fn root(&self) -> &Path {
        &self.0.root
    }

    fn file(&self, rel: &str) -> Option<Arc<dyn ByteSource>> {
        let i = self.0.find(rel)?;
        Some(Arc::new(Object(Arc::clone(&self.0), i)))
    }

    fn names(&self) -> Vec<String> {
        self.0.objects.iter().map(|o| o.rel.clone()).collect()
    }

    fn names_under(&self, prefix: &str) -> Vec<String> {
        // `objects` is sorted by name: the names under `prefix` are one range of it (a
        // ctable's every column lists its own `data/` without copying the others' chunks).
        sorted_under(&self.0.objects, |o| o.rel.as_str(), prefix)
            .iter()
            .map(|o| o.rel.clone())
            .collect()
    }

    fn is_dir(&self, rel: &str) -> bool {
        let dir = format!("{}/", rel.trim_end_matches('/'));
        !sorted_under(&self.0.objects, |o| o.rel.as_str(), &dir).is_empty()
    }

    fn poll_changed(&self, ask: bool) -> bool {
        self.0.poll_changed(ask)
    }

    fn asks_now(&self) -> bool {
        self.0.asks_now()
    }

    fn reopen(&self) -> Option<std::io::Result<Relist>> {
        let p = self.0.reopen()?;
        Some(
            p.map(|p| Relist::Changed(p.byte_tree(), Vec::new()))
                .map_err(RemoteError::into_io),
        )
    }
}

/// Object `.1` of a prefix, as a byte source.
#[derive(Debug)]
struct Object(Arc<RemotePrefix>, usize);

impl ByteSource for Object {
    fn name(&self) -> &str {
        &self.0.objects[self.1].url
    }

    fn len(&self) -> u64 {
        self.0.objects[self.1].size
    }

    fn mtime(&self) -> SystemTime {
        self.0.objects[self.1].mtime
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read(self.1, offset, buf)
    }

    fn view(&self, offset: u64, len: usize) -> Option<std::io::Result<ByteView>> {
        match self.0.view(self.1, offset, len) {
            Ok(Some(b)) => Some(Ok(Box::new(b))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
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
}

#[cfg(test)]
mod tests;
