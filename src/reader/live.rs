//! [`LiveArray`]: one array of the mount as it is now, swapped for the reopened array after
//! every commit and every change another writer made (then the chunks whose compressed bytes
//! still match their fingerprints, `prints.rs`, keep their stamps). Commits themselves are
//! not the reader's: `crate::commit` writes, then calls [`LiveArray::committing`] and
//! [`LiveArray::reload`].
//!
//! Readers holding an old [`Snapshot`] keep reading that version (see `reader/version.rs`);
//! readers that pin after the swap see the new one.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use parking_lot::Mutex;

use super::prints::Prints;
use super::store::ChunkStore;
use super::swap::Swap;
use super::version::{Snapshot, Stamps, Trust};
use crate::container::{self, Array, Container, ContainerError, FileState, write};

/// The state of `array`'s watched files now.
fn fingerprint(array: &Array) -> Vec<Option<FileState>> {
    array
        .watched_files()
        .iter()
        .map(|f| FileState::stat(f))
        .collect()
}

/// Which chunks of a reopened array may hold other bytes than before.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// The mount's own commit: these chunks, and those from the old last one on (appended,
    /// removed, or a last chunk a table resize extended).
    Own(&'a [usize]),
    /// Another writer: any chunk; those whose compressed bytes still match the print taken
    /// when they were read whole keep their stamps (and their cached copies).
    Foreign,
    /// The mount's own compaction: the same chunks in a new file; every stamp (and time)
    /// is kept.
    Compacted,
}

/// One array of the mounted source, replaceable after a commit or a change by another
/// writer: readers pin its current [`Snapshot`].
#[derive(Debug)]
pub struct LiveArray {
    path: PathBuf,
    snap: Swap<Snapshot>,
    /// The state of the watched files ([`Array::watched_files`]) taken before the current
    /// version was opened: a difference means another writer changed the source since.
    seen: Mutex<Vec<Option<FileState>>>,
    /// The key of the collection leaf it is (`None`: a source of its own).
    leaf: Option<String>,
    /// Prints of the chunks its versions read whole (`prints.rs`).
    prints: Arc<Prints>,
    /// A remote source settled for good ([`LiveArray::settle`]: gone from its collection,
    /// or in a nested store replaced by a new one): no longer asked, and its known change
    /// no longer reloads the tree (until [`LiveArray::replace`] makes it current again).
    retired: AtomicBool,
}

impl LiveArray {
    /// Wraps an opened array.
    pub fn new(array: Array) -> LiveArray {
        let trust = Trust::of(&array);
        let prints = Prints::new();
        LiveArray {
            path: array.path().to_path_buf(),
            seen: Mutex::new(fingerprint(&array)),
            snap: Swap::new(Snapshot::new(
                Arc::new(array),
                Stamps::fresh(),
                trust,
                prints.clone(),
            )),
            leaf: None,
            prints,
            retired: AtomicBool::new(false),
        }
    }

    /// Wraps the array of the collection leaf `key`: commits go through the collection, and
    /// the tree reloads it from the reopened collection ([`LiveArray::replace`]).
    pub fn leaf(array: Array, key: String) -> LiveArray {
        LiveArray {
            leaf: Some(key),
            ..LiveArray::new(array)
        }
    }

    /// The collection leaf key, for a leaf.
    pub fn leaf_key(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    /// Makes `array` current (reopened after `change`).
    pub fn replace(&self, array: Array, change: Change<'_>) {
        *self.seen.lock() = fingerprint(&array);
        self.retired.store(false, Ordering::Relaxed);
        self.install(array, change);
    }

    fn install(&self, array: Array, change: Change<'_>) {
        let old = self.snapshot();
        let (old_n, new_n) = (old.array().nchunks(), array.nchunks());
        let same_file = match (old.array().file_state(), array.file_state()) {
            (Some(a), Some(b)) => a.id == b.id,
            _ => false,
        };
        let (stamps, trust) = match change {
            Change::Own(edited) => {
                // The last chunk may have been extended or cut (a ctable column resized with
                // another); not when the count and its size are as before (an attributes edit,
                // a rewrite of other chunks: issue 21, its time must not move).
                let last = new_n.checked_sub(1);
                let same_last = old_n == new_n
                    && last.is_some_and(|l| {
                        matches!(
                            (old.array().chunk_nbytes(l), array.chunk_nbytes(l)),
                            (Ok(a), Ok(b)) if a == b
                        )
                    });
                let tail = if same_last {
                    new_n..new_n
                } else {
                    old_n.min(new_n).saturating_sub(1)..new_n
                };
                let stamps = old.stamps().next(
                    edited.iter().copied().chain(tail),
                    old_n,
                    new_n,
                    SystemTime::now(),
                );
                let trust = if same_file {
                    old.trust().settle(&array);
                    old.trust().clone()
                } else {
                    Trust::of(&array)
                };
                (stamps, trust)
            }
            Change::Compacted => (old.stamps().clone(), Trust::of(&array)),
            Change::Foreign => {
                if same_file {
                    old.trust().overwritten();
                }
                let trust = Trust::of(&array);
                let array = Arc::new(array);
                let keep = self.unchanged(&old, &array, &trust);
                // The change happened when the source says it did (its mtime), or now when
                // that is unknown.
                let at = Some(array.mtime())
                    .filter(|t| *t != SystemTime::UNIX_EPOCH)
                    .unwrap_or_else(SystemTime::now);
                let snap = Snapshot::new(
                    array,
                    old.stamps().keeping(&keep, old_n, new_n, at),
                    trust,
                    self.prints.clone(),
                );
                self.snap.set(snap);
                return;
            }
        };
        let snap = Snapshot::new(Arc::new(array), stamps, trust, self.prints.clone());
        self.snap.set(snap);
    }

    /// The chunks of `old` that `array` (another writer's version, with `trust`) holds with
    /// the same compressed bytes: those with a print under their stamp in `old` whose bytes
    /// in `array` hash to it. Reads only those chunks' compressed bytes.
    fn unchanged(&self, old: &Snapshot, array: &Arc<Array>, trust: &Arc<Trust>) -> Vec<usize> {
        let n = old.array().nchunks().min(array.nchunks());
        let printed = self.prints.current(n, |i| old.stamp(i));
        if printed.is_empty() {
            return Vec::new();
        }
        let probe = Snapshot::new(array.clone(), Stamps::fresh(), trust.clone(), Prints::new());
        let mut keep = Vec::new();
        for (index, print) in printed {
            match probe.print_now(index) {
                Ok(now) if now == print => keep.push(index),
                // Changed, or changing again (the next look reloads): a new stamp.
                Ok(_) | Err(_) => {}
            }
        }
        keep.sort_unstable();
        keep
    }

    /// Whether the watched files differ from what the current version was opened from (a few
    /// `stat`s: another writer changed the source, or the mount's own commit runs now).
    ///
    /// A followed remote source has no files: what its byte tree (a prefix) or byte source
    /// knows ([`crate::container::ByteSource::poll_changed`]; the follower thread asks the
    /// server, [`LiveArray::ask_source`]); nothing once it is retired.
    pub fn changed_on_disk(&self) -> bool {
        let array = self.get();
        if let Some(tree) = array.byte_tree() {
            return !self.retired.load(Ordering::Relaxed) && tree.poll_changed(false);
        }
        if let Some(bytes) = array.byte_source() {
            return !self.retired.load(Ordering::Relaxed) && bytes.poll_changed(false);
        }
        let files = array.watched_files();
        let now: Vec<Option<FileState>> = files.iter().map(|f| FileState::stat(f)).collect();
        now != *self.seen.lock()
    }

    /// For the follower thread: lets a followed remote source ask its server whether it
    /// changed, when that is due (network I/O; [`LiveArray::changed_on_disk`] then tells).
    pub fn ask_source(&self) {
        if self.retired.load(Ordering::Relaxed) {
            return;
        }
        let array = self.get();
        if let Some(tree) = array.byte_tree() {
            tree.poll_changed(true);
        } else if let Some(bytes) = array.byte_source() {
            bytes.poll_changed(true);
        }
    }

    /// Whether [`LiveArray::ask_source`] would ask a server now (a followed remote source
    /// whose interval has passed): the follower asks only those.
    pub fn asks_now(&self) -> bool {
        let array = self.get();
        !self.retired.load(Ordering::Relaxed)
            && match array.byte_tree() {
                Some(tree) => tree.asks_now(),
                None => array.byte_source().is_some_and(|b| b.asks_now()),
            }
    }

    /// Takes the watched files as they are now as seen, without reloading: the source is
    /// gone from a collection, and its version stays as it is. A remote source is retired:
    /// its server is no longer asked about it.
    pub fn settle(&self) {
        let array = self.get();
        *self.seen.lock() = fingerprint(&array);
        if array.byte_tree().is_some() || array.byte_source().is_some() {
            self.retired.store(true, Ordering::Relaxed);
        }
    }

    /// The array as it is now.
    pub fn get(&self) -> Arc<Array> {
        self.snap.with(|s| s.array().clone())
    }

    /// The version of the array as it is now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snap.get()
    }

    /// Where the array lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reopens the array from disk and makes it current (after `change`).
    ///
    /// # Errors
    /// When the source no longer opens as a single array.
    /// A followed remote source is opened again through its byte source
    /// ([`crate::container::ByteSource::reopen`]).
    pub fn reload(&self, change: Change<'_>) -> Result<(), ContainerError> {
        self.reopen(change, None).map(|_| ())
    }

    /// After the mount's own commit was undone but left its file in state `left` (another
    /// mtime: [`ContainerError::Restored`]), byte-identical to the current version: reopens
    /// it and takes that state as the current version's, so the mount does not take its own
    /// undoing for another writer's change. Returns `false`, reopening nothing, when the
    /// file is no longer in that state (another writer changed it since: that change stays
    /// one).
    ///
    /// # Errors
    /// As [`LiveArray::reload`].
    pub fn adopt(&self, left: FileState) -> Result<bool, ContainerError> {
        self.reopen(Change::Own(&[]), Some(left))
    }

    /// [`LiveArray::reload`]; with `expect`, only when the one watched file is in that state.
    fn reopen(
        &self,
        change: Change<'_>,
        expect: Option<FileState>,
    ) -> Result<bool, ContainerError> {
        // Taken before the open: a change while it opens shows as a change later.
        let files = self.get().watched_files();
        let seen: Vec<Option<FileState>> = files.iter().map(|f| FileState::stat(f)).collect();
        if expect.is_some_and(|left| seen != [Some(left)]) {
            return Ok(false);
        }
        let io = |source| ContainerError::Io {
            path: self.path.clone(),
            source,
        };
        let array = self.get();
        let opened = if let Some(tree) = array.byte_tree() {
            // A prefix listed again (shared by the arrays of the tree: one listing).
            let now = match tree.reopen() {
                Some(Ok(container::Relist::Changed(now, _))) => now,
                Some(Err(e)) => return Err(io(e)),
                Some(Ok(container::Relist::Unchanged)) | None => Arc::clone(tree),
            };
            container::open_tree_at(now, &self.path)?
        } else {
            match array.byte_source().and_then(|b| b.reopen()) {
                Some(bytes) => container::open_bytes(bytes.map_err(io)?)?,
                None => container::open(&self.path)?,
            }
        };
        match opened {
            Container::Array(a) => {
                self.install(a, change);
                *self.seen.lock() = seen;
                Ok(true)
            }
            Container::Table(_) => Err(ContainerError::Unsupported {
                path: self.path.clone(),
                what: "reopening a column after a commit: it opened as a ctable".into(),
            }),
        }
    }

    /// Runs the mount's own commit `f` to the file of the current version (`crate::commit`):
    /// versions pinned by readers keep reading while it appends.
    pub fn committing<T>(&self, f: impl FnOnce(&Array) -> T) -> T {
        let snap = self.snapshot();
        snap.trust().begin_commit();
        let res = f(snap.array());
        // The file this version reads, as it is now (appended to, or left alone when the
        // commit renamed a new file in).
        snap.trust().end_commit(snap.array());
        res
    }

    /// Whether the array is 1-D (may gain or lose chunks): frames without an N-dim
    /// metalayer, 1-D b2nd/caterva arrays, bcolz carrays and columns.
    pub fn one_d(&self) -> bool {
        self.get().nd_meta().is_none_or(|nd| nd.shape.len() == 1)
    }

    /// Why the array cannot be written, if it cannot.
    pub fn why_not_writable(&self) -> Option<ContainerError> {
        match self.leaf {
            Some(_) => write::check_writable_member(&self.get()),
            None => write::check_writable(&self.get()),
        }
    }
}

impl ChunkStore for LiveArray {
    fn path(&self) -> &Path {
        &self.path
    }

    fn nchunks(&self) -> usize {
        self.get().nchunks()
    }

    fn stamp(&self, index: usize) -> u64 {
        self.snapshot().stamp(index)
    }

    fn pin(&self) -> Option<Arc<dyn ChunkStore>> {
        Some(self.snapshot())
    }

    fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError> {
        self.get().chunk_nbytes(index)
    }

    fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError> {
        Ok(Cow::Owned(self.snapshot().chunk_bytes(index)?.into_owned()))
    }

    fn chunk_kind(&self, index: usize) -> Result<crate::container::ChunkKind, ContainerError> {
        self.snapshot().chunk_kind(index)
    }
}
