//! A remote prefix (`s3://bucket/dir/`: a sparse frame's directory, a bcolz carray or ctable
//! root, a `.b2d` store) as a [`ByteTree`] of its objects. The request plan:
//! - open: one listing of everything under the prefix (S3 ListObjectsV2, one request per
//!   1,000 keys), which gives every object's size and ETag; then every small object that is
//!   not chunk data nor a store's leaf frame (`chunks.b2frame`, `meta/sizes`, `meta/storage`,
//!   `__attrs__`, `__rootdirs__`, `embed.b2e`, ...) is fetched in parallel (at most 32
//!   GETs in flight), so the container's open reads them from memory: a mount costs the
//!   listing plus one parallel round;
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
//!
//! The parts: this file opens the prefix and reads its objects (the cache, the disk cache,
//! GETs and the prefetch of chunk objects read in order), as a [`ByteTree`] of
//! [`ByteSource`]s; `listing.rs` what a listing says (the objects, the chunk objects' reading
//! order, chunk data vs metadata, whether two listings are the same); `follow.rs` following
//! the prefix (listed again when due, opened again when it moved).

mod follow;
mod listing;
mod sources;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use object_store::GetRange;

use super::RemoteOptions;
use super::cache::{Begin, ExtentCache, Flight};
use super::client::{Client, RemoteError, RemoteErrorKind, RemoteStats};
use super::disk::{DiskCache, Entry};
use super::plan::Following;
use super::seq::Sequence;
use crate::container::{ByteSource, ByteTree, ByteView, Relist};
use listing::{Chunks, Listed, is_chunk_data, listed, sorted_under};

/// Objects up to this size that are not chunk data are fetched at open.
const WARM_MAX: u64 = 1 << 20;
/// The most of those GETs in flight at once.
const WARM_AT_ONCE: usize = 32;
/// The largest prefetch window, in bytes (also at most a quarter of the cache budget).
const WINDOW_MAX: u64 = 64 << 20;

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
    /// this one within [`follow::SHARE_NEXT`].
    next: Mutex<Option<(Instant, Arc<RemotePrefix>)>>,
    /// The options it was opened with (its single objects are opened with them).
    opts: RemoteOptions,
    /// The number of the next object opened as a single object ([`RemotePrefix::open_single`]):
    /// its keys in the shared cache, above every object number.
    singles: std::sync::atomic::AtomicU64,
}

/// Locks `m`, whatever a panicking holder left.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
        opts: opts.clone(),
        singles: std::sync::atomic::AtomicU64::new(1),
    });
    if let Some(before) = before {
        prefix.seed_from(before);
    }
    let listed = prefix.client.stats.requests();
    // At most WARM_AT_ONCE GETs in flight: a prefix of many small files must not open as
    // many connections at once.
    let mut in_flight: std::collections::VecDeque<(usize, Arc<Flight>)> =
        std::collections::VecDeque::new();
    let mut warmed = 0usize;
    let wait = |(i, f): (usize, Arc<Flight>)| {
        if let Err(e) = f.wait(prefix.client.deadline) {
            log::debug!("{}: early fetch failed: {e}", prefix.objects[i].url);
        }
    };
    for i in 0..prefix.objects.len() {
        let o = &prefix.objects[i];
        if is_chunk_data(&o.rel) || o.size == 0 || o.size > WARM_MAX {
            continue;
        }
        let Begin::Lead(f) = prefix.cache.begin(i as u64) else {
            continue;
        };
        if let Some(b) = prefix.read_disk(i) {
            prefix.cache.finish(i as u64, &f, Ok(b));
            continue;
        }
        if in_flight.len() >= WARM_AT_ONCE {
            wait(in_flight.pop_front().expect("not empty"));
        }
        prefix.spawn_whole(i, Arc::clone(&f));
        in_flight.push_back((i, f));
        warmed += 1;
    }
    in_flight.into_iter().for_each(wait);
    log::info!(
        "{root_url}/: {} objects listed with {listed} requests, {} metadata objects fetched \
         with {} more, in {:.1} ms",
        prefix.objects.len(),
        warmed,
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

    /// Object `rel` as a byte source of its own, read as a single object mounted alone is
    /// (head and tail GETs now, then cached extents and the prefetch of chunks read in order,
    /// in this prefix's cache under keys above every object number; its changes are followed
    /// by the prefix's listing): a collection's leaf frame or store. One the open fetched whole (small, and not
    /// named as chunk data) is read from the cache instead, with no request.
    ///
    /// # Errors
    /// No such object, or the head and tail GETs failed.
    pub(crate) fn open_single(
        self: &Arc<Self>,
        rel: &str,
    ) -> Result<Arc<dyn ByteSource>, RemoteError> {
        let i = self.find(rel).ok_or_else(|| {
            RemoteError::new(RemoteErrorKind::NotFound, format!("no object {rel}"))
        })?;
        if self.cache.present(i as u64) {
            return Ok(Arc::new(Object(Arc::clone(self), i)));
        }
        let o = &self.objects[i];
        let client = self.client.for_object(rel, &o.url, o.path.clone());
        let n = self.singles.fetch_add(1, Ordering::Relaxed);
        let object =
            super::plan::open_with(client, &self.opts, Some((Arc::clone(&self.cache), n)))?;
        // Not followed on its own: the prefix's listing sees its ETag change.
        Ok(object.byte_source())
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

    /// A collection's leaf (a `.b2d` store's frame): read as a single object mounted alone
    /// ([`RemotePrefix::open_single`]), unless the open fetched it whole already.
    fn open_file(&self, rel: &str) -> std::io::Result<Arc<dyn ByteSource>> {
        self.0.open_single(rel).map_err(RemoteError::into_io)
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
