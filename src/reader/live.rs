//! [`LiveArray`]: one array of the mount as it is now, swapped for the reopened array after
//! every commit and every change another writer made (then the chunks whose compressed bytes
//! still match their fingerprints, `prints.rs`, keep their stamps); and [`Committer`]: one
//! commit of decoded chunk edits (compressed with the parameters the existing chunks use) or
//! of attributes.
//!
//! Readers holding an old [`Snapshot`] keep reading that version (see `reader/version.rs`);
//! readers that pin after the swap see the new one.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock};

use super::prints::Prints;
use super::store::ChunkStore;
use super::version::{Snapshot, Stamps, Trust};
use crate::codec::encode::Encoder;
use crate::container::store::{Collection, Leaf, Node};
use crate::container::{self, Array, Container, ContainerError, FileState, write};

/// The state of `array`'s watched files now.
fn fingerprint(array: &Array) -> Vec<Option<FileState>> {
    array
        .watched_files()
        .iter()
        .map(|f| FileState::stat(f))
        .collect()
}

/// Leaf `key` of `collection`.
fn leaf_of<'c>(collection: &'c Collection, key: &str) -> Result<&'c Leaf, ContainerError> {
    match collection.find(key) {
        Some(Node::Leaf(l)) => Ok(l),
        _ => Err(ContainerError::Changed {
            path: collection.path().to_path_buf(),
            why: format!("{key} is no longer one of its leaves"),
        }),
    }
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

/// Issue 21: a contiguous frame is compacted after a commit of the mount when its dead space
/// (bytes no chunk, index or trailer of the current version uses) exceeds its live bytes plus
/// this much: the file stays within twice its live bytes, plus this, plus one commit's chunks.
pub const RECLAIM_SLACK: u64 = 1 << 20;

/// What [`LiveArray::reclaim`] knows of the source's space.
#[derive(Debug, Default)]
struct Reclaim {
    /// Live bytes when last measured (or the file's length when first seen, which is at
    /// least that): the file is measured again once it is twice that plus
    /// [`RECLAIM_SLACK`].
    baseline: Option<u64>,
    /// The mount's shared lock on the file a compaction renamed in.
    lock: Option<write::SourceLock>,
}

/// One array of the mounted source, replaceable after a commit or a change by another
/// writer: readers pin its current [`Snapshot`].
#[derive(Debug)]
pub struct LiveArray {
    path: PathBuf,
    snap: RwLock<Arc<Snapshot>>,
    /// The state of the watched files ([`Array::watched_files`]) taken before the current
    /// version was opened: a difference means another writer changed the source since.
    seen: Mutex<Vec<Option<FileState>>>,
    /// The key of the collection leaf it is (`None`: a source of its own).
    leaf: Option<String>,
    /// Prints of the chunks its versions read whole (`prints.rs`).
    prints: Arc<Prints>,
    /// Issue 21: the dead space of its frame, given back by compaction.
    reclaim: Mutex<Reclaim>,
}

impl LiveArray {
    /// Wraps an opened array.
    pub fn new(array: Array) -> LiveArray {
        let trust = Trust::of(&array);
        let prints = Prints::new();
        LiveArray {
            path: array.path().to_path_buf(),
            seen: Mutex::new(fingerprint(&array)),
            snap: RwLock::new(Arc::new(Snapshot::new(
                Arc::new(array),
                Stamps::fresh(),
                trust,
                prints.clone(),
            ))),
            leaf: None,
            prints,
            reclaim: Mutex::default(),
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
                *self.snap.write() = Arc::new(snap);
                return;
            }
        };
        let snap = Snapshot::new(Arc::new(array), stamps, trust, self.prints.clone());
        *self.snap.write() = Arc::new(snap);
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
    pub fn changed_on_disk(&self) -> bool {
        let files = self.get().watched_files();
        let now: Vec<Option<FileState>> = files.iter().map(|f| FileState::stat(f)).collect();
        now != *self.seen.lock()
    }

    /// Takes the watched files as they are now as seen, without reloading: the source is
    /// gone from a collection, and its version stays as it is.
    pub fn settle(&self) {
        *self.seen.lock() = fingerprint(&self.get());
    }

    /// The array as it is now.
    pub fn get(&self) -> Arc<Array> {
        self.snap.read().array().clone()
    }

    /// The version of the array as it is now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snap.read().clone()
    }

    /// Where the array lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reopens the array from disk and makes it current (after `change`).
    ///
    /// # Errors
    /// When the source no longer opens as a single array.
    pub fn reload(&self, change: Change<'_>) -> Result<(), ContainerError> {
        // Taken before the open: a change while it opens shows as a change later.
        let files = self.get().watched_files();
        let seen: Vec<Option<FileState>> = files.iter().map(|f| FileState::stat(f)).collect();
        match container::open(&self.path)? {
            Container::Array(a) => {
                self.install(a, change);
                *self.seen.lock() = seen;
                Ok(())
            }
            Container::Table(_) => Err(ContainerError::Unsupported {
                path: self.path.clone(),
                what: "reopening a column after a commit: it opened as a ctable".into(),
            }),
        }
    }

    /// Runs the mount's own commit `f` to the file of the current version: versions pinned
    /// by readers keep reading while it appends.
    fn committing<T>(&self, f: impl FnOnce(&Array) -> T) -> T {
        let snap = self.snapshot();
        snap.trust().begin_commit();
        let res = f(snap.array());
        // The file this version reads, as it is now (appended to, or left alone when the
        // commit renamed a new file in).
        snap.trust().end_commit(snap.array());
        res
    }

    /// Issue 21, bounded growth: after a commit of the mount, compacts the contiguous frame
    /// when its dead space passes its live bytes plus [`RECLAIM_SLACK`]
    /// ([`write::compact_mounted`]: a temp file renamed in; descriptors reading older
    /// versions keep the old file), then serves the new file with every stamp kept. The
    /// file is measured (one chunk header per chunk) only once it has grown to twice what
    /// was live when last measured, so the cost stays proportional to what commits wrote.
    /// Best effort: a failure is logged and leaves the source as it was. Collection leaves
    /// (committed through their store) are not compacted here.
    pub fn reclaim(&self) {
        if self.leaf.is_some() {
            return;
        }
        let array = self.get();
        let Some(len) = array.file_state().map(|s| s.len) else {
            return;
        };
        let mut r = self.reclaim.lock();
        let baseline = *r.baseline.get_or_insert(len);
        if len <= baseline.saturating_mul(2).saturating_add(RECLAIM_SLACK) {
            return;
        }
        let space = match write::space(&array) {
            Ok(Some(s)) => s,
            Ok(None) => return,
            Err(e) => {
                log::warn!("{}: cannot measure dead space: {e}", self.path.display());
                r.baseline = Some(len);
                return;
            }
        };
        r.baseline = Some(space.live);
        if space.len <= space.live.saturating_mul(2).saturating_add(RECLAIM_SLACK) {
            return;
        }
        match write::compact_mounted(&array) {
            Ok(lock) => {
                r.lock = Some(lock);
                if let Err(e) = self.reload(Change::Compacted) {
                    log::warn!(
                        "{}: compacted, but reopening it failed: {e}",
                        self.path.display()
                    );
                    return;
                }
                let now = self.get().file_state().map_or(0, |s| s.len);
                r.baseline = Some(now);
                log::info!(
                    "{}: compacted: {} bytes of dead space given back ({} -> {now} bytes, {} live)",
                    self.path.display(),
                    space.len.saturating_sub(now),
                    space.len,
                    space.live
                );
            }
            Err(e) => log::warn!(
                "{}: not compacted ({} bytes, {} live): {e}",
                self.path.display(),
                space.len,
                space.live
            ),
        }
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
}

/// The new decoded content of one chunk, as a commit takes it.
#[derive(Debug, Clone, Copy)]
pub struct ChunkEdit<'a> {
    /// Chunk index.
    pub index: usize,
    /// The whole decoded chunk as it should become (empty: remove the last chunk).
    pub data: &'a [u8],
    /// A chunk being created (`data/<nchunks>.bin`): an append (nothing while empty).
    pub append: bool,
}

/// Performs commits, one at a time (callers serialise them by holding it), reusing one
/// encoder.
#[derive(Debug, Default)]
pub struct Committer {
    encoder: Encoder,
    /// Crash tests: the next frame or carray commit performs only this many durable steps
    /// ([`write::commit_with_crash_after`]) and then fails as a crash there would.
    crash_after: Option<usize>,
}

impl Committer {
    /// A committer with a fresh encoder.
    pub fn new() -> Committer {
        Committer::default()
    }

    /// Crash tests: the next commit of chunks or attributes of a single array
    /// ([`Committer::commit_chunks`], [`Committer::commit_attrs`]) stops after `steps` durable
    /// steps, leaving the files as a crash there would, and fails with an I/O error when it
    /// was cut short. The caller must then abandon the array and reopen the source, as a
    /// restarted daemon would.
    pub fn crash_after(&mut self, steps: usize) {
        self.crash_after = Some(steps);
    }

    /// [`write::commit`], or its crash-test variant when [`Committer::crash_after`] asked.
    fn write(&mut self, array: &Array, edit: &write::Edit) -> Result<(), ContainerError> {
        let Some(steps) = self.crash_after.take() else {
            return write::commit(array, edit);
        };
        match write::commit_with_crash_after(array, edit, steps)? {
            true => Ok(()),
            false => Err(ContainerError::Io {
                path: array.path().to_path_buf(),
                source: std::io::Error::other(format!(
                    "simulated crash after {steps} durable steps of the commit"
                )),
            }),
        }
    }

    /// The container edit `edits` of `array` stand for: updates, an append, the removal of
    /// the last chunk (an empty chunk that is the last); `None` when nothing is to be done
    /// (created chunk files still empty).
    fn edit(
        &mut self,
        path: &Path,
        array: &Array,
        edits: &[ChunkEdit<'_>],
    ) -> Result<Option<write::Edit>, ContainerError> {
        let nchunks = array.nchunks();
        let mut edit = write::Edit::default();
        let mut params = None;
        for chunk in edits {
            if chunk.data.is_empty() {
                if chunk.append {
                    continue;
                }
                if chunk.index + 1 != nchunks {
                    return Err(ContainerError::Refused {
                        path: path.to_path_buf(),
                        why: format!(
                            "emptying chunk {} (only the last chunk can be removed)",
                            chunk.index
                        ),
                    });
                }
                edit.truncate = Some(chunk.index);
                continue;
            }
            let params = match &params {
                Some(p) => p,
                None => params.insert(write::chunk_cparams(array)?),
            };
            let bytes =
                self.encoder
                    .compress(chunk.data, params)
                    .map_err(|e| ContainerError::Chunk {
                        path: path.to_path_buf(),
                        index: chunk.index,
                        source: e,
                    })?;
            // A created chunk file that exists by now (a ctable column grown by a commit of
            // another column while it was being written) replaces that chunk.
            if !chunk.append || chunk.index < nchunks {
                edit.updates.push((chunk.index, bytes));
            } else if chunk.index == nchunks + edit.appends.len() {
                edit.appends.push(bytes);
            } else {
                return Err(ContainerError::Refused {
                    path: path.to_path_buf(),
                    why: format!("appending chunk {}: the source has {nchunks}", chunk.index),
                });
            }
        }
        Ok((!edit.is_empty()).then_some(edit))
    }

    /// Commits `edits` to `live` in one commit (old or new after a crash, for all of them),
    /// then reloads it.
    ///
    /// # Errors
    /// What [`write::commit`] or the encoder report.
    pub fn commit_chunks(
        &mut self,
        live: &LiveArray,
        edits: &[ChunkEdit<'_>],
    ) -> Result<(), ContainerError> {
        let array = live.get();
        let Some(edit) = self.edit(&live.path, &array, edits)? else {
            return Ok(());
        };
        let edited: Vec<usize> = edits.iter().map(|e| e.index).collect();
        live.committing(|array| {
            self.write(array, &edit)?;
            live.reload(Change::Own(&edited))
        })?;
        live.reclaim();
        Ok(())
    }

    /// Commits `edits` of `live`, a column of the ctable at `table`, with
    /// [`write::commit_column`]: when they change the column's row count, every column of the
    /// table is resized with it. The caller reloads every column afterwards.
    ///
    /// # Errors
    /// [`ContainerError::Changed`] when the column changed on disk since `live` was loaded;
    /// what [`write::commit_column`] or the encoder report.
    pub fn commit_column(
        &mut self,
        table: &Path,
        live: &LiveArray,
        edits: &[ChunkEdit<'_>],
    ) -> Result<(), ContainerError> {
        let array = live.get();
        let Some(edit) = self.edit(&live.path, &array, edits)? else {
            return Ok(());
        };
        if array.changed_on_disk()? {
            return Err(ContainerError::Changed {
                path: live.path.clone(),
                why: "meta/sizes, meta/storage or __attrs__ differ".into(),
            });
        }
        let table = match container::open(table)? {
            Container::Table(t) => t,
            Container::Array(_) => {
                return Err(ContainerError::Changed {
                    path: table.to_path_buf(),
                    why: "it no longer opens as a ctable".into(),
                });
            }
        };
        let column = table
            .columns
            .iter()
            .position(|(_, a)| a.path() == live.path)
            .ok_or_else(|| ContainerError::Changed {
                path: table.path.clone(),
                why: format!("{} is no longer one of its columns", live.path.display()),
            })?;
        write::commit_column(&table, column, &edit)
    }

    /// Commits `edits` of `live`, the array of leaf `key` of `collection`, through
    /// [`write::commit_member`] (a `.b2z` member: a new zip beside the old one, renamed
    /// over it). The caller reopens the collection and reloads its leaves afterwards.
    ///
    /// # Errors
    /// As [`write::commit_member`]; [`ContainerError::Changed`] when the leaf is gone.
    pub fn commit_leaf(
        &mut self,
        collection: &Collection,
        key: &str,
        live: &LiveArray,
        edits: &[ChunkEdit<'_>],
    ) -> Result<(), ContainerError> {
        let array = live.get();
        let Some(edit) = self.edit(&live.path, &array, edits)? else {
            return Ok(());
        };
        live.committing(|_| write::commit_member(collection, leaf_of(collection, key)?, &edit))
    }

    /// Stores `attrs` as the attributes of leaf `key` of `collection`.
    ///
    /// # Errors
    /// As [`Committer::commit_leaf`].
    pub fn commit_leaf_attrs(
        &mut self,
        collection: &Collection,
        key: &str,
        attrs: serde_json::Value,
    ) -> Result<(), ContainerError> {
        let edit = write::Edit {
            attrs: Some(attrs),
            ..Default::default()
        };
        write::commit_member(collection, leaf_of(collection, key)?, &edit)
    }

    /// Stores `attrs` as the attributes of the group `key` of `collection`.
    ///
    /// # Errors
    /// As [`write::commit_group_attrs`].
    pub fn commit_group_attrs(
        &mut self,
        collection: &Collection,
        key: &str,
        attrs: &serde_json::Value,
    ) -> Result<(), ContainerError> {
        write::commit_group_attrs(collection, key, attrs)
    }

    /// Stores `attrs` (a JSON object) as the attributes of `live`, then reloads it.
    ///
    /// # Errors
    /// What [`write::commit`] reports.
    pub fn commit_attrs(
        &mut self,
        live: &LiveArray,
        attrs: serde_json::Value,
    ) -> Result<(), ContainerError> {
        let edit = write::Edit {
            attrs: Some(attrs),
            ..Default::default()
        };
        live.committing(|array| {
            self.write(array, &edit)?;
            live.reload(Change::Own(&[]))
        })?;
        live.reclaim();
        Ok(())
    }

    /// Stores `attrs` as the root attributes of the ctable at `table`.
    ///
    /// # Errors
    /// [`ContainerError::Changed`] when it no longer opens as a ctable; what
    /// [`write::commit_table_attrs`] reports.
    pub fn commit_table_attrs(
        &mut self,
        table: &Path,
        attrs: &serde_json::Value,
    ) -> Result<(), ContainerError> {
        match container::open(table)? {
            Container::Table(t) => write::commit_table_attrs(&t, attrs),
            Container::Array(_) => Err(ContainerError::Changed {
                path: table.to_path_buf(),
                why: "it no longer opens as a ctable".into(),
            }),
        }
    }
}
