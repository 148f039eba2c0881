//! [`Snapshot`]: one version of a live array (the opened array, a stamp per chunk, and what is
//! known of whether its bytes are still on disk), which a descriptor pins at open so that all
//! its reads see that one version.
//!
//! Subtleties and who handles them:
//! - **Stamps** ([`Stamps`]): a chunk keeps its stamp from one version to the next unless it
//!   changed, so the reader's caches (keyed by stamp) keep serving unchanged chunks after a
//!   commit, and a descriptor holding an old version hits that version's cached copies. After
//!   another writer's change, a chunk keeps its stamp only when its compressed bytes still
//!   match the print taken when it was read whole (`prints.rs`, [`Snapshot::print_now`]).
//! - **Bytes that are gone** ([`Trust`]): the mount's own commits only append to a frame file
//!   and rewrite its header, so an old version's chunks stay readable. Another writer may
//!   rewrite a frame in place (python-blosc2 `update_chunk` rewrites the file from the updated
//!   chunk on, measured with 4.14.1). A contiguous frame's read checks the file with one
//!   `fstat` after taking its bytes: a file that changed in a way the mount did not make fails
//!   the read (EIO, naming the chunk) rather than returning bytes of two versions. A frame
//!   replaced by rename keeps its old file open in the old version, which stays exact.
//! - Sparse frames, bcolz and remote sources keep one file per chunk (or ETag pinning) and are
//!   not checked here.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use parking_lot::Mutex;

use super::prints::{Print, Prints, print_of};
use super::store::ChunkStore;
use crate::container::{Array, ContainerError, FileState};

/// Stamps handed out so far (unique per process: a version never reuses one).
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

fn fresh_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// Above this many per-chunk stamps a version starts over with one stamp for all.
const MAX_CHANGED: usize = 1 << 16;

/// The stamps of one version's chunks: `base` unless `changed` says otherwise; and when
/// each stamp was handed out (issue 21: the chunk files' mtimes).
///
/// Times: a stamp handed out since the array was opened has its time in `times` (when the
/// change that made it was seen); the stamp of the version opened first has none (the
/// caller shows the source's own time). `listed` is when the chunk count last changed,
/// `latest` when anything last did. No allocation per untouched chunk: one entry per
/// distinct stamp in use, which is at most one per commit still visible.
#[derive(Debug, Clone)]
pub(crate) struct Stamps {
    base: u64,
    changed: Arc<HashMap<usize, u64>>,
    times: Arc<HashMap<u64, SystemTime>>,
    listed: Option<SystemTime>,
    latest: Option<SystemTime>,
}

impl Stamps {
    /// New stamps for every chunk (a version nothing is known to share bytes with), with
    /// no time of their own (the version the mount opened).
    pub(crate) fn fresh() -> Stamps {
        Stamps {
            base: fresh_stamp(),
            changed: Arc::default(),
            times: Arc::default(),
            listed: None,
            latest: None,
        }
    }

    fn get(&self, index: usize) -> u64 {
        self.changed.get(&index).copied().unwrap_or(self.base)
    }

    /// When chunk `index` last changed, if it did since the array was opened.
    pub(crate) fn time(&self, index: usize) -> Option<SystemTime> {
        self.times.get(&self.get(index)).copied()
    }

    /// When the chunk count last changed, if it did since the array was opened.
    pub(crate) fn listed(&self) -> Option<SystemTime> {
        self.listed
    }

    /// When any chunk last changed, if one did since the array was opened.
    pub(crate) fn latest(&self) -> Option<SystemTime> {
        self.latest
    }

    /// A time for a change seen now from `at`, later than every time these stamps hold
    /// (a clock or a source time that did not move still makes a change visible).
    fn after_latest(&self, at: SystemTime) -> SystemTime {
        match self.latest {
            Some(l) if at <= l => l + std::time::Duration::from_nanos(1),
            _ => at,
        }
    }

    /// The times of the stamps `base` and `changed` use, from `self.times` plus `new`.
    fn times_of(
        &self,
        base: u64,
        changed: &HashMap<usize, u64>,
        new: Option<(u64, SystemTime)>,
    ) -> Arc<HashMap<u64, SystemTime>> {
        let mut times: HashMap<u64, SystemTime> = HashMap::new();
        for s in changed.values().copied().chain([base]) {
            if let Some(t) = self.times.get(&s) {
                times.insert(s, *t);
            }
        }
        if let Some((s, t)) = new {
            times.insert(s, t);
        }
        Arc::new(times)
    }

    /// The stamps of the next version, of `nchunks` chunks (the previous one had
    /// `old_n`), made at `at`: those `fresh` selects get a new stamp, the others keep theirs.
    pub(crate) fn next(
        &self,
        fresh: impl IntoIterator<Item = usize>,
        old_n: usize,
        nchunks: usize,
        at: SystemTime,
    ) -> Stamps {
        let at = self.after_latest(at);
        let listed = if old_n == nchunks {
            self.listed
        } else {
            Some(at)
        };
        let mut changed: HashMap<usize, u64> = self
            .changed
            .iter()
            .filter(|(i, _)| **i < nchunks)
            .map(|(&i, &s)| (i, s))
            .collect();
        let stamp = fresh_stamp();
        let mut any = false;
        for i in fresh {
            changed.insert(i, stamp);
            any = true;
        }
        if changed.len() > MAX_CHANGED {
            // Every chunk gets the new stamp (and time).
            let base = fresh_stamp();
            return Stamps {
                base,
                changed: Arc::default(),
                times: Arc::new(HashMap::from([(base, at)])),
                listed,
                latest: Some(at),
            };
        }
        let times = self.times_of(self.base, &changed, any.then_some((stamp, at)));
        Stamps {
            base: self.base,
            changed: Arc::new(changed),
            times,
            listed,
            latest: if any || listed != self.listed {
                Some(at)
            } else {
                self.latest
            },
        }
    }

    /// The stamps of a version another writer made, seen at `at`, of `nchunks` chunks (the
    /// previous one had `old_n`): chunks `keep` (whose bytes did not change) keep theirs
    /// (and their times), every other chunk gets a new one.
    pub(crate) fn keeping(
        &self,
        keep: &[usize],
        old_n: usize,
        nchunks: usize,
        at: SystemTime,
    ) -> Stamps {
        let at = self.after_latest(at);
        let changed: HashMap<usize, u64> = keep
            .iter()
            .take(MAX_CHANGED)
            .map(|&i| (i, self.get(i)))
            .collect();
        let base = fresh_stamp();
        let times = self.times_of(base, &changed, Some((base, at)));
        let listed = if old_n == nchunks {
            self.listed
        } else {
            Some(at)
        };
        // Every chunk kept, none added or removed: no chunk changed (an attributes edit).
        let same = changed.len() == nchunks && old_n == nchunks;
        Stamps {
            base,
            changed: Arc::new(changed),
            times,
            listed,
            latest: if same { self.latest } else { Some(at) },
        }
    }
}

/// What is known of the file the chunks of the versions sharing it are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TrustState {
    /// Every version sharing this has its bytes on disk while the file shows this state.
    Known(FileState),
    /// The mount's own commit runs: it only appends and rewrites the header.
    Committing,
    /// Another writer changed the file: chunks not cached are gone.
    Overwritten,
    /// Not checked (sparse frames, bcolz, remote sources).
    Unchecked,
}

/// Shared by the versions of one array read from one file, replaced when another writer
/// changes it.
#[derive(Debug)]
pub(crate) struct Trust(Mutex<TrustState>);

impl Trust {
    /// The trust of a freshly opened `array`.
    pub(crate) fn of(array: &Array) -> Arc<Trust> {
        Arc::new(Trust(Mutex::new(match array.file_state() {
            Some(s) => TrustState::Known(s),
            None => TrustState::Unchecked,
        })))
    }

    /// The mount's own commit to the file begins.
    pub(crate) fn begin_commit(&self) {
        let mut t = self.0.lock();
        if matches!(*t, TrustState::Known(_)) {
            *t = TrustState::Committing;
        }
    }

    /// The mount's own commit ended; the file is now as `array` (reopened, or the old one
    /// after a failure) shows it.
    pub(crate) fn end_commit(&self, array: &Array) {
        let mut t = self.0.lock();
        if *t == TrustState::Committing {
            *t = array
                .file_state()
                .map_or(TrustState::Unchecked, TrustState::Known);
        }
    }

    /// The file is now as `array` (just reopened after the mount's own commit) shows it.
    pub(crate) fn settle(&self, array: &Array) {
        let mut t = self.0.lock();
        if matches!(*t, TrustState::Known(_) | TrustState::Committing) {
            *t = array
                .file_state()
                .map_or(TrustState::Unchecked, TrustState::Known);
        }
    }

    /// Another writer changed the file in place: versions sharing this lose the chunks they
    /// have not cached.
    pub(crate) fn overwritten(&self) {
        let mut t = self.0.lock();
        if *t != TrustState::Unchecked {
            *t = TrustState::Overwritten;
        }
    }
}

/// One version of a live array. Reads through it return its bytes or an error.
#[derive(Debug)]
pub struct Snapshot {
    array: Arc<Array>,
    stamps: Stamps,
    trust: Arc<Trust>,
    /// Shared by every version of the live array.
    prints: Arc<Prints>,
}

impl Snapshot {
    pub(crate) fn new(
        array: Arc<Array>,
        stamps: Stamps,
        trust: Arc<Trust>,
        prints: Arc<Prints>,
    ) -> Snapshot {
        Snapshot {
            array,
            stamps,
            trust,
            prints,
        }
    }

    /// The opened array.
    pub fn array(&self) -> &Arc<Array> {
        &self.array
    }

    pub(crate) fn stamps(&self) -> &Stamps {
        &self.stamps
    }

    /// When chunk `index` last changed (a commit of the mount, or another writer's change
    /// the mount followed), if it did since the array was opened (issue 21: mtimes).
    pub fn chunk_time(&self, index: usize) -> Option<SystemTime> {
        self.stamps.time(index)
    }

    /// When the chunk count last changed, if it did since the array was opened.
    pub fn listed_time(&self) -> Option<SystemTime> {
        self.stamps.listed()
    }

    /// When any chunk last changed, if one did since the array was opened.
    pub fn changed_time(&self) -> Option<SystemTime> {
        self.stamps.latest()
    }

    pub(crate) fn trust(&self) -> &Arc<Trust> {
        &self.trust
    }

    /// Records the print of chunk `index`'s whole compressed `bytes`, read and checked to be
    /// this version's.
    fn note(&self, index: usize, print: Print) {
        self.prints.record(index, self.stamps.get(index), print);
    }

    /// The print of chunk `index`'s compressed bytes as they are now in this version's
    /// source (checked as every read is), without recording it.
    ///
    /// # Errors
    /// When they cannot be read, or the source changed while they were.
    pub(crate) fn print_now(&self, index: usize) -> Result<Print, ContainerError> {
        let mut print = None;
        let mapped = self
            .array
            .with_mapped_chunk(index, false, &mut |c| print = Some(print_of(c)));
        let print = match (mapped, print) {
            (Ok(true), Some(p)) => p,
            (Err(e), _) => return Err(e),
            _ => print_of(&self.array.chunk_bytes(index)?),
        };
        self.verify(index)?;
        Ok(print)
    }

    /// Whether the bytes of chunk `index` just taken are this version's: called after taking
    /// them, so a change that began while they were read is seen.
    fn verify(&self, index: usize) -> Result<(), ContainerError> {
        let state = *self.trust.0.lock();
        let gone = |why: &str| ContainerError::Changed {
            path: self.array.path().to_path_buf(),
            why: format!(
                "chunk {index} of the version this file was opened with is gone ({why}); \
                 open the file again for the current version"
            ),
        };
        match state {
            TrustState::Unchecked | TrustState::Committing => Ok(()),
            TrustState::Overwritten => Err(gone("another writer rewrote the source")),
            TrustState::Known(s) => match self.array.file_state() {
                Some(now) if now != s => Err(gone("another writer is changing the source")),
                _ => Ok(()),
            },
        }
    }
}

impl ChunkStore for Snapshot {
    fn path(&self) -> &Path {
        self.array.path()
    }

    fn nchunks(&self) -> usize {
        self.array.nchunks()
    }

    fn stamp(&self, index: usize) -> u64 {
        self.stamps.get(index)
    }

    fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError> {
        // A header that does not read may be one another writer overwrote: say so.
        let n = self.array.chunk_nbytes(index);
        if n.is_err() {
            self.verify(index)?;
        }
        n
    }

    fn chunk_kind(&self, index: usize) -> Result<crate::container::ChunkKind, ContainerError> {
        let kind = self.array.chunk_kind(index);
        self.verify(index)?;
        kind
    }

    fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError> {
        let bytes = self.array.chunk_bytes(index);
        self.verify(index)?;
        let bytes = bytes?;
        if self.wants_print(index) {
            self.note(index, print_of(&bytes));
        }
        Ok(bytes)
    }

    fn chunk_bytes_into(&self, index: usize, buf: &mut Vec<u8>) -> Result<usize, ContainerError> {
        let n = self.array.chunk_bytes_into(index, buf);
        self.verify(index)?;
        let n = n?;
        if self.wants_print(index) {
            self.note(index, print_of(&buf[..n]));
        }
        Ok(n)
    }

    /// Whether chunk `index` of this version needs a print (none taken under its stamp yet).
    fn wants_print(&self, index: usize) -> bool {
        !self.prints.knows(index, self.stamps.get(index))
    }

    fn with_mapped_chunk(
        &self,
        index: usize,
        partial: bool,
        f: &mut dyn FnMut(&[u8]) -> Option<u128>,
    ) -> Result<bool, ContainerError> {
        // Checked on failure too: bytes another writer moved fail to parse, and the reason
        // to give is that.
        let wants = !partial && self.wants_print(index);
        let mut print = None;
        let mapped = self.array.with_mapped_chunk(index, partial, &mut |c| {
            // The print `f` took while decoding `c` block by block, else taken here.
            let took = f(c);
            if wants {
                print = Some(took.unwrap_or_else(|| print_of(c)));
            }
        });
        if !matches!(mapped, Ok(false)) {
            self.verify(index)?;
        }
        if let (Ok(true), Some(p)) = (&mapped, print) {
            self.note(index, p);
        }
        mapped
    }

    fn chunk_read_at(
        &self,
        index: usize,
        offset: u64,
        buf: &mut [u8],
        known: Option<u64>,
    ) -> Result<bool, ContainerError> {
        self.checked(index, self.array.chunk_read_at(index, offset, buf, known))
    }
}

impl Snapshot {
    /// `read`, a read of chunk `index`'s bytes just made, once [`Snapshot::verify`] passed
    /// (unless nothing was read).
    fn checked(
        &self,
        index: usize,
        read: Result<bool, ContainerError>,
    ) -> Result<bool, ContainerError> {
        if !matches!(read, Ok(false)) {
            self.verify(index)?;
        }
        read
    }
}
