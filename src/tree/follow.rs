//! Following the source (issue 12): when another process changes it (python-blosc2
//! update/append/resize/vlmeta, bcolz append, a file replaced by rename, a compacted copy
//! moved in), the tree notices, reloads every array (index, trailer, meta, attributes), drops
//! the cached copies of exactly the chunks whose compressed bytes changed (a chunk read whole
//! keeps its cached copy when its bytes still hash to the print taken then:
//! `reader/prints.rs`; chunks never read whole count as changed), renders the generated files
//! again, and lists what the kernel must forget ([`Invalidation`]: the changed, appended and
//! removed chunk files, every directory and generated file) for the fuser adapter to send.
//!
//! When: at each open (the arrays the opened file shows: a few `stat`s), at lookups (every
//! array, at most every [`LOOKUP_EVERY`]), and when the adapter's follower thread calls
//! [`Tree::follow_source`] (every second). A change is a difference in the `stat` (inode,
//! size, mtime) of the files [`crate::container::Array::watched_files`] names.
//!
//! Subtleties:
//! - **Descriptors opened before** keep their version ([`crate::reader::Snapshot`]): exact
//!   for a file replaced by rename (its old file stays open); for a frame rewritten in place,
//!   chunks they have not cached fail with EIO rather than mixing versions. Reads that fill
//!   the kernel's page cache (a mapping's faults) read the current version
//!   ([`Tree::read_shared`]): that cache is shared by every descriptor.
//! - **A source that cannot be read now** (half written, removed, not a container): the
//!   reload fails, one log line says why, the old version keeps serving what it can (cached
//!   chunks; reads of others fail with EIO), and reloads are retried, at most twice a second,
//!   until it opens again (one log line says so).
//! - **Uncommitted edits** hold the reload back: their commit finds the change and fails with
//!   ESTALE (then reloads, so a retry applies to what is stored now), as before issue 12.
//! - **Kernel notifications are sent by the adapter's thread**, never from a FUSE request
//!   (an entry invalidation waits for the directory lock a lookup in flight holds).
//! - **Beyond the arrays**: a ctable's root `__attrs__`, and a collection's membership and
//!   group attributes (`members.rs`), are watched as [`outer_files`].
//! - **Remote collections** have no files to `stat`: a Caterva2 directory is listed again
//!   by the follower thread every [`Collection::relist_every`], and a listing that names
//!   other datasets is reloaded like a local directory whose entries changed.
//! - **Remote questions run concurrently**: the follower thread asks every followed remote
//!   source (each opened array's object or prefix, a collection's [`Collection::followed`],
//!   the listing) at once, [`ASK_PARALLEL`] at a time, each given one `remote_timeout`: a
//!   round with the server down costs about one timeout, not one per source.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use super::layout::{AttrsOwner, CollectionCell, FileKind, NodeKind, ROOT_INO};
use super::members::{self, Members};
use super::reload::{Refreshed, changed};
use super::{Entry, Tree, chunk_name, display_chain, view};
use crate::container::store::Followed;
use crate::container::{Collection, Container, ContainerError, FileState};
use crate::reader::{ArrayId, ChunkStore, Snapshot};

/// Lookups check the source at most this often (an open always checks).
pub const LOOKUP_EVERY: Duration = Duration::from_millis(50);
/// After a failed reload, reloads are retried at most this often.
const RETRY_EVERY: Duration = Duration::from_millis(500);
/// Most questions to servers the follower thread asks at once.
pub(crate) const ASK_PARALLEL: usize = 8;
/// Most chunk files whose kernel caches one change invalidates one by one.
pub(crate) const MAX_CHUNK_INVALIDATIONS: usize = 1 << 16;

/// What the kernel must forget after the source changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidation {
    /// The cached data and attributes of this inode.
    Inode(u64),
    /// The directory entry `name` in directory `parent` (a chunk file that is gone).
    Entry {
        /// The directory's inode.
        parent: u64,
        /// The entry's name.
        name: String,
    },
}

/// The files whose `stat` shows a change no array watches: a ctable's root `__attrs__`; a
/// collection's zip file, or its directories and `embed.b2e` (`members.rs`).
pub(crate) fn outer_files(
    table: Option<&Path>,
    collection: Option<&CollectionCell>,
) -> Vec<PathBuf> {
    match (table, collection) {
        (Some(t), _) => vec![t.join("__attrs__")],
        (None, Some(c)) => c.with(members::watched),
        (None, None) => Vec::new(),
    }
}

/// [`outer_files`] and their state when the tree last read them.
#[derive(Debug, Default)]
struct Outer {
    files: Vec<PathBuf>,
    seen: Vec<Option<FileState>>,
}

impl Outer {
    fn now(&self) -> Vec<Option<FileState>> {
        self.files.iter().map(|f| FileState::stat(f)).collect()
    }
}

/// The follower's shared state: invalidations waiting to be sent, whether the last reload
/// failed, the files watched beyond the arrays, and a collection's member changes.
#[derive(Debug, Default)]
pub struct Follow {
    pending: Mutex<Vec<Invalidation>>,
    wake: Condvar,
    broken: AtomicBool,
    last_try: Mutex<Option<Instant>>,
    last_lookup_check: Mutex<Option<Instant>>,
    outer: Mutex<Outer>,
    pub(crate) members: RwLock<Members>,
    /// A remote collection's listing: when it was last read, whether the last read failed,
    /// and the collection it showed when that differs from the mounted one, waiting for the
    /// reload.
    last_relist: Mutex<Option<Instant>>,
    relist_failed: AtomicBool,
    relisted: Mutex<Option<Arc<Collection>>>,
    /// Set when the tree is dropped: [`Follow::wait`] then returns at once, so the thread
    /// that follows the source (and what it holds: the page pusher and its descriptor of the
    /// FUSE device) ends with the mount, not up to a wait later. A check of the source in
    /// progress holds the tree until it ends (a remote source's questions: up to
    /// `remote_timeout` each).
    closed: AtomicBool,
}

impl Follow {
    /// Watching `files` beyond the arrays ([`outer_files`]), as they are now.
    pub(crate) fn watching(files: Vec<PathBuf>) -> Follow {
        let outer = Outer {
            seen: files.iter().map(|f| FileState::stat(f)).collect(),
            files,
        };
        Follow {
            outer: Mutex::new(outer),
            ..Follow::default()
        }
    }

    fn outer_changed(&self) -> bool {
        if self.relisted.lock().is_some() {
            return true;
        }
        let o = self.outer.lock();
        o.now() != o.seen
    }

    /// The collection a new listing showed, if one waits for the reload.
    pub(crate) fn take_relisted(&self) -> Option<Arc<Collection>> {
        self.relisted.lock().take()
    }

    /// The invalidations to send now, waiting up to `timeout` for some (not at all once the
    /// tree is gone: [`Follow::is_closed`]).
    pub fn wait(&self, timeout: Duration) -> Vec<Invalidation> {
        let mut p = self.pending.lock();
        if p.is_empty() && !self.is_closed() {
            let _ = self.wake.wait_for(&mut p, timeout);
        }
        std::mem::take(&mut *p)
    }

    /// Whether the tree this follows has been dropped (the mount is gone).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Marks the tree gone and wakes a [`Follow::wait`] in progress.
    pub(crate) fn close(&self) {
        // Under the lock: a waiter between its check and its sleep would miss the wake-up.
        let _p = self.pending.lock();
        self.closed.store(true, Ordering::Release);
        self.wake.notify_all();
    }

    fn push(&self, inv: Vec<Invalidation>) {
        if inv.is_empty() {
            return;
        }
        self.pending.lock().extend(inv);
        self.wake.notify_all();
    }
}

/// One question the follower asks a server.
type Question<'a> = Box<dyn FnOnce() + Send + 'a>;

/// Asks every question of `asks`, [`ASK_PARALLEL`] at once: a round costs about its
/// slowest question, not their sum. One question (or none) runs on the calling thread.
fn ask_all(asks: Vec<Question<'_>>) {
    if asks.len() <= 1 {
        asks.into_iter().for_each(|a| a());
        return;
    }
    let helpers = asks.len().min(ASK_PARALLEL) - 1;
    let queue = Mutex::new(asks.into_iter());
    let work = || {
        loop {
            let next = queue.lock().next();
            match next {
                Some(a) => a(),
                None => break,
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 0..helpers {
            // A thread that cannot be made leaves its share to the others (and the caller).
            let _ = std::thread::Builder::new()
                .name("b2fs-ask".into())
                .spawn_scoped(s, work);
        }
        work();
    });
}

impl Tree {
    /// The follower state, for the adapter's thread (waits without holding the tree).
    pub fn follower(&self) -> Arc<Follow> {
        self.follow.clone()
    }

    /// Checks every array's source and reloads the tree when another writer changed it (see
    /// the module doc); returns whether it did. The kernel invalidations it implies wait in
    /// [`Follow::wait`].
    ///
    /// A remote collection that asks for it ([`Collection::relist_every`]: a Caterva2
    /// directory) is also listed again here when that long has passed, so that datasets
    /// added to the server show and those removed leave, and a remote frame mounted alone
    /// asks its server whether it changed (`remote_recheck`): on the adapter's thread, never
    /// in a FUSE request (both wait for the network).
    pub fn follow_source(&self) -> bool {
        // Followed remote sources ask their servers here, off the file system's requests,
        // all at once (each within one `remote_timeout`).
        let mut asks: Vec<Question<'_>> = Vec::new();
        if let Some(cell) = self.mounted.collection() {
            if self.relist_due() {
                asks.push(Box::new(|| self.relist_if_due()));
            }
            for f in cell.get().followed().into_iter().filter(Followed::asks_now) {
                asks.push(Box::new(move || {
                    f.poll_changed(true);
                }));
            }
        }
        for (_, live) in self.lives().filter(|(_, l)| l.asks_now()) {
            asks.push(Box::new(move || live.ask_source()));
        }
        // Only questions due now: most rounds ask nothing and start no thread.
        ask_all(asks);
        let all: Vec<ArrayId> = self.array_ids();
        self.follow(&all)
    }

    /// At a lookup: what [`Tree::follow_source`] checks but the listing of a remote
    /// collection, at most every [`LOOKUP_EVERY`].
    pub(crate) fn follow_at_lookup(&self) {
        {
            let mut last = self.follow.last_lookup_check.lock();
            if last.is_some_and(|t| t.elapsed() < LOOKUP_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let all: Vec<ArrayId> = self.array_ids();
        self.follow(&all);
    }

    /// Lists a remote collection again when [`Collection::relist_every`] has passed since
    /// the last listing (the mount's counts as the first), and keeps what it shows when its
    /// names differ, for [`Tree::follow`] to reload. A listing that fails is logged once
    /// (and once when listing works again); the mount keeps showing what it showed.
    /// Whether [`Tree::relist_if_due`] would list the collection again now (or note its first
    /// round).
    fn relist_due(&self) -> bool {
        let every = self
            .mounted
            .collection()
            .and_then(|c| c.get().relist_every());
        let last = *self.follow.last_relist.lock();
        every.is_some_and(|every| last.is_none_or(|t| t.elapsed() >= every))
    }

    fn relist_if_due(&self) {
        let Some(cell) = self.mounted.collection() else {
            return;
        };
        let collection = cell.get();
        let Some(every) = collection.relist_every() else {
            return;
        };
        {
            let mut last = self.follow.last_relist.lock();
            match *last {
                None => {
                    *last = Some(Instant::now());
                    return;
                }
                Some(t) if t.elapsed() < every => return,
                Some(_) => *last = Some(Instant::now()),
            }
        }
        let source = self.source_name();
        match collection.relisted() {
            Ok(fresh) => {
                if self.follow.relist_failed.swap(false, Ordering::Relaxed) {
                    log::warn!("{source}: listed again");
                }
                if let Some(fresh) = fresh {
                    *self.follow.relisted.lock() = Some(Arc::new(fresh));
                }
            }
            Err(e) => {
                if !self.follow.relist_failed.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "{source}: cannot be listed again now: {}; showing what it listed \
                         before",
                        display_chain(&e)
                    );
                }
            }
        }
    }

    /// At an open of `ino`: the arrays it shows.
    pub(crate) fn follow_at_open(&self, ino: u64) {
        let arrays: Vec<ArrayId> = match self.entry(ino) {
            Ok(Entry::Chunk(id)) => vec![id.array],
            Ok(Entry::Zarr(super::zarr::ZNode::Chunks { array, .. })) => vec![array],
            // An array's `zarr.json` shows that array (a group's, what is below it: all).
            Ok(Entry::Zarr(super::zarr::ZNode::Json(n))) => match self.zarr_dir_kind(n) {
                Ok(super::zarr::DirKind::Array(a)) => vec![a],
                _ => self.array_ids(),
            },
            Ok(Entry::File(FileKind::Sizes(a, _) | FileKind::Npy(a, _))) => vec![*a],
            Ok(Entry::File(FileKind::Attrs(AttrsOwner::Array(a), _))) => vec![*a],
            Ok(Entry::File(FileKind::TableNpy(_, columns))) => columns.clone(),
            Ok(Entry::File(FileKind::CTableNpy(file))) => file
                .rendered()
                .map_or_else(Vec::new, |v| v.arrays().collect()),
            Ok(Entry::Zarr2(v)) => self.zarr2_arrays(v).unwrap_or_else(|| self.array_ids()),
            Ok(Entry::File(FileKind::Fixed(_)) | Entry::Scratch) => return,
            _ => self.array_ids(),
        };
        self.follow(&arrays);
    }

    /// Whether what holds the arrays changed: the watched files beyond them, a new listing,
    /// or a followed remote `.b2z` (what its object knows; the follower thread asks).
    fn outer_changed(&self) -> bool {
        self.follow.outer_changed()
            || self
                .mounted
                .collection()
                .is_some_and(|cell| cell.get().source_changed())
    }

    fn changed(&self, arrays: &[ArrayId]) -> bool {
        arrays
            .iter()
            .any(|a| self.live(*a).is_some_and(|l| l.changed_on_disk()))
    }

    pub(crate) fn follow(&self, arrays: &[ArrayId]) -> bool {
        if !self.outer_changed() && !self.changed(arrays) {
            return false;
        }
        if self.follow.broken.load(Ordering::Relaxed) {
            let mut last = self.follow.last_try.lock();
            if last.is_some_and(|t| t.elapsed() < RETRY_EVERY) {
                return false;
            }
            *last = Some(Instant::now());
        }
        if self.has_pending_edits() {
            return false;
        }
        // Serialised with commits: a commit of the mount's own edit also changes the files.
        let _committer = self.committer.lock();
        if (!self.outer_changed() && !self.changed(arrays)) || self.has_pending_edits() {
            return false;
        }
        let old = self.snapshots();
        let source = self.source_name();
        // Taken before the reload: a change while it runs shows at the next look.
        let seen = self.follow.outer.lock().now();
        let reloaded = self.reload(Refreshed::Foreign, None);
        let entries = match reloaded {
            Ok(entries) => entries,
            Err(e) => {
                if !self.follow.broken.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "{source}: changed on disk and cannot be read now: {}; serving what is \
                     cached (other reads fail with EIO) until it opens again",
                        display_chain(&e)
                    );
                }
                // What did reload shows: the kernel must forget what it cached of it.
                self.follow.push(self.invalidations(&old, true));
                return false;
            }
        };
        self.settle_outer(Some(seen));
        if self.follow.broken.swap(false, Ordering::Relaxed) {
            log::warn!("{source}: readable again: reloaded");
        } else {
            log::info!("{source}: changed by another writer: reloaded");
        }
        self.zarr_changed();
        let mut inv = self.invalidations(&old, false);
        inv.extend(entries);
        self.follow.push(inv);
        true
    }

    /// After the mount made a member of its collection itself (a new array or group through
    /// the Zarr view) while edits are buffered, which hold a reload back ([`Tree::follow`]):
    /// the collection is listed again and its new members shown, and nothing else is
    /// reloaded (a new member changes no array an edit is for). Returns whether it could.
    pub(crate) fn show_own_members(&self) -> bool {
        let Some(cell) = self.mounted.collection() else {
            return false;
        };
        // Serialised with commits and reloads, as a reload is.
        let _committer = self.committer.lock();
        // Taken before the listing: a change while it runs shows at the next look.
        let seen = self.follow.outer.lock().now();
        let old = cell.get();
        let fresh = match Collection::reopened(&old) {
            Ok(fresh) => fresh,
            Err(e) => {
                log::warn!(
                    "{}: cannot be listed again to show a new member: {}",
                    old.path().display(),
                    display_chain(&e)
                );
                return false;
            }
        };
        cell.set(fresh.clone());
        let mut entries = Vec::new();
        {
            let _grow = self.grow.lock();
            self.follow_group(ROOT_INO, fresh.root(), Some(old.root()), &mut entries);
        }
        self.settle_outer(Some(seen));
        self.zarr_changed();
        self.follow.push(entries);
        true
    }

    /// Whether the mount holds uncommitted edits: their commit must find the change and fail
    /// with ESTALE (an edit made against what another writer replaced is dropped, not applied
    /// over it), so the tree does not reload under them; that commit reloads.
    pub(crate) fn has_pending_edits(&self) -> bool {
        let edits = self.edits.lock();
        edits.has_chunks() || edits.attrs.values().any(|a| a.dirty)
    }

    /// The current version of every array.
    fn snapshots(&self) -> Vec<Option<Arc<Snapshot>>> {
        self.arrays
            .iter()
            .map(|e| e.live.as_ref().map(|l| l.snapshot()))
            .collect()
    }

    /// Takes the [`outer_files`] (listed again: a collection may have new groups) as seen,
    /// with the states `seen` taken before a reload, or as they are now (`None`: after the
    /// mount's own commit).
    pub(crate) fn settle_outer(&self, seen: Option<Vec<Option<FileState>>>) {
        let files = outer_files(self.mounted.table(), self.mounted.collection());
        let mut o = self.follow.outer.lock();
        let before: HashMap<PathBuf, Option<FileState>> = match seen {
            Some(seen) => o.files.iter().cloned().zip(seen).collect(),
            None => HashMap::new(),
        };
        o.seen = files
            .iter()
            .map(|f| before.get(f).copied().unwrap_or_else(|| FileState::stat(f)))
            .collect();
        o.files = files;
    }

    /// The source path for log lines.
    fn source_name(&self) -> String {
        let first = self.lives().map(|(_, l)| l).next();
        match (self.mounted.table(), self.mounted.collection_path(), first) {
            (Some(t), _, _) => t.display().to_string(),
            (None, Some(c), _) => c.display().to_string(),
            (None, None, Some(l)) => l.path().display().to_string(),
            (None, None, None) => "source".into(),
        }
    }

    /// The mounted ctable opened again as its source holds it now: from the byte tree its
    /// columns were (re)opened from (a followed remote prefix, listed again by their
    /// reload), else from disk; `None` when no ctable is mounted.
    pub(crate) fn open_table(&self) -> Option<Result<Container, ContainerError>> {
        let path = self.mounted.table()?;
        let tree = self.lives().find_map(|(_, l)| l.get().byte_tree().cloned());
        Some(match tree {
            Some(tree) => crate::container::open_tree_at(tree, path),
            None => crate::container::open(path),
        })
    }

    /// Renders the `__attrs__` of every array, of the ctable and of every group again from
    /// the reloaded source.
    pub(crate) fn rerender_attrs(&self) {
        let table = match self.open_table() {
            Some(Ok(Container::Table(t))) => Some(view::json_file(&t.attrs)),
            _ => None,
        };
        for node in self.nodes.iter() {
            let NodeKind::File(FileKind::Attrs(owner, stored)) = &node.kind else {
                continue;
            };
            match owner {
                AttrsOwner::Array(a) => {
                    if let Some(live) = self.live(*a) {
                        stored.set(view::json_file(live.get().attrs()));
                    }
                }
                AttrsOwner::Group(_) => stored.rerender(),
                AttrsOwner::Table(_) | AttrsOwner::ReadOnly => {
                    if let Some(t) = table.as_ref().filter(|_| node.parent == ROOT_INO) {
                        stored.set(t.clone());
                    }
                }
            }
        }
    }

    /// What the kernel must forget after the arrays changed from versions `old`: every
    /// directory and generated file, the chunk files whose stamps changed (`all`: every chunk
    /// file, after a failed reload), up to [`MAX_CHUNK_INVALIDATIONS`] per array, and the
    /// entries of chunk files that are gone.
    fn invalidations(&self, old: &[Option<Arc<Snapshot>>], all: bool) -> Vec<Invalidation> {
        let mut out: Vec<Invalidation> = (1..=self.nodes.len() as u64)
            .map(Invalidation::Inode)
            .collect();
        let new = self.snapshots();
        for (i, node) in self.nodes.iter().enumerate() {
            let NodeKind::Dir { data: Some(a), .. } = &node.kind else {
                continue;
            };
            let (Some(Some(old)), Some(Some(new))) = (old.get(a.index()), new.get(a.index()))
            else {
                continue;
            };
            let dir = i as u64 + 1;
            let (old_n, new_n) = (old.nchunks(), new.nchunks());
            for index in 0..old_n.max(new_n).min(MAX_CHUNK_INVALIDATIONS) {
                if all || changed(old, new, index) {
                    let id = crate::reader::ChunkId::new(*a, index);
                    out.push(Invalidation::Inode(self.inodes.chunk_ino(id)));
                }
            }
            for index in new_n..old_n {
                out.push(Invalidation::Entry {
                    parent: dir,
                    name: chunk_name(index),
                });
            }
            out.extend(self.zarr_invalidations(*a, node.parent, (old.as_ref(), new.as_ref()), all));
        }
        out.extend(self.zarr_meta_invalidations());
        out.extend(self.zarr2_invalidations());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::TreeOptions;
    use super::*;

    /// The follower thread waits in [`Follow::wait`] a second at a time; dropping the tree
    /// (unmounting) must wake it at once, or it keeps the page pusher and its descriptor of
    /// the FUSE device open after the mount is gone.
    #[test]
    fn dropping_the_tree_wakes_the_follower_at_once() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/frames/b2nd_1d_f8.b2nd");
        let tree = Tree::from_source(&src, TreeOptions::default()).unwrap();
        let follow = tree.follower();
        assert!(!follow.is_closed());
        let waiter = {
            let follow = follow.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                let got = follow.wait(Duration::from_secs(120));
                (t.elapsed(), got.len())
            })
        };
        // Let the waiter reach its sleep (a wake-up before it would be seen by its check).
        std::thread::sleep(Duration::from_millis(50));
        drop(tree);
        let (waited, got) = waiter.join().unwrap();
        assert!(follow.is_closed());
        assert_eq!(got, 0);
        assert!(
            waited < Duration::from_secs(60),
            "the follower slept {waited:?} after the drop"
        );
        // Once closed, it never sleeps again.
        let t = Instant::now();
        assert!(follow.wait(Duration::from_secs(120)).is_empty());
        assert!(t.elapsed() < Duration::from_secs(60));
    }
}
