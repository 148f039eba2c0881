//! Commits: the mount's write path, beside the [`crate::reader`] (which only reads). One
//! entry, [`Committer::commit`]: a [`Target`] (a single array, a ctable column, a collection
//! leaf, a ctable's or a group's attributes) and an [`Edit`] (decoded chunk contents, or
//! attributes) make one crash-safe container commit ([`crate::container::write`]): old or
//! new after a crash, for every chunk of the edit.
//!
//! ```text
//! Committer::commit(Target, Edit)
//!   -> container_edit()        decoded chunks compressed with the parameters the existing
//!                              chunks use (one encoder reused by every commit), one at a
//!                              time, into a write::Spool: at most `spool_memory` compressed
//!                              bytes in memory, the rest in an unlinked file in the spool
//!                              directory, read back one chunk at a time as the commit writes
//!   -> container::write::*     the commit itself (frames, bcolz, ctable columns, stores)
//!   -> LiveArray::reload       a single array is reopened at once (inside its commit window,
//!                              so versions pinned by readers keep reading while it appends)
//!   -> reclaim()               issue 21: a contiguous frame's dead space given back
//! ```
//!
//! What is reloaded after the commit, besides a single array, is the caller's: a ctable commit
//! may resize every column, a `.b2z` commit moves every member ([`Committed`] says which).
//! Commits are serialised by the caller (the tree holds its committer lock for a whole
//! commit and the reload after it).
//!
//! The parts: this file holds the entry, the targets and the dispatch to the container
//! commits; `encode.rs` the chunk edits compressed into the commit's spool
//! (`container_edit`); `reclaim.rs` the dead space given back after a commit (`reclaim`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::codec::encode::Encoder;
use crate::container::store::{Collection, Leaf, Node};
use crate::container::{self, Array, Container, ContainerError, write};
use crate::reader::{Change, LiveArray};

mod encode;
mod reclaim;
#[cfg(test)]
mod tests;

pub use reclaim::RECLAIM_SLACK;
use reclaim::Reclaim;

/// Where the decoded bytes of a chunk edit come from: memory, or a file the caller keeps
/// them in. A commit asks for them one chunk at a time and compresses each before it asks
/// for the next, so chunks kept in a file (the mount's spilled edits) are never all in
/// memory at once.
pub trait ChunkBytes: std::fmt::Debug {
    /// The chunk's length in bytes.
    fn len(&self) -> usize;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The whole chunk.
    ///
    /// # Errors
    /// Reading it back failed.
    fn bytes(&self) -> std::io::Result<std::borrow::Cow<'_, [u8]>>;
    /// Whether every byte is zero, known without reading them ([`Zeros`]): the chunk is then
    /// encoded from one block of zeros ([`crate::codec::compress_zeros`]).
    fn all_zeros(&self) -> bool {
        false
    }
}

/// A chunk of this many zero bytes (the new chunks of a resize), encoded in the time and
/// memory of its compressed form.
#[derive(Debug, Clone, Copy)]
pub struct Zeros(pub usize);

impl ChunkBytes for Zeros {
    fn len(&self) -> usize {
        self.0
    }
    fn bytes(&self) -> std::io::Result<std::borrow::Cow<'_, [u8]>> {
        Ok(std::borrow::Cow::Owned(vec![0; self.0]))
    }
    fn all_zeros(&self) -> bool {
        true
    }
}

impl ChunkBytes for Vec<u8> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }
    fn bytes(&self) -> std::io::Result<std::borrow::Cow<'_, [u8]>> {
        Ok(std::borrow::Cow::Borrowed(self))
    }
}

impl<const N: usize> ChunkBytes for [u8; N] {
    fn len(&self) -> usize {
        N
    }
    fn bytes(&self) -> std::io::Result<std::borrow::Cow<'_, [u8]>> {
        Ok(std::borrow::Cow::Borrowed(self))
    }
}

/// The new decoded content of one chunk, as a commit takes it.
#[derive(Debug, Clone, Copy)]
pub struct ChunkEdit<'a> {
    /// Chunk index.
    pub index: usize,
    /// The whole decoded chunk as it should become (empty: remove the last chunk).
    pub data: &'a dyn ChunkBytes,
    /// A chunk being created (`data/<nchunks>.bin`): an append (nothing while empty).
    pub append: bool,
}

/// What a commit writes to.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A single array (a frame, a b2nd/caterva array, a bcolz carray), or a ctable column's
    /// attributes: committed, then reloaded at once.
    Array(&'a LiveArray),
    /// Chunks of a column of the ctable at `table`: a change of its row count resizes every
    /// column ([`write::commit_column`]); the caller reloads every column.
    Column {
        /// The ctable's directory.
        table: &'a Path,
        /// The column.
        live: &'a LiveArray,
    },
    /// Leaf `key` of `collection` ([`write::commit_member`]: a `.b2z` member is committed by
    /// a new zip renamed over the old one); the caller reopens the collection.
    Leaf {
        /// The collection as the mount knows it now.
        collection: &'a Collection,
        /// The leaf's key.
        key: &'a str,
        /// The leaf's array.
        live: &'a LiveArray,
    },
    /// The root attributes of the ctable at this path.
    Table(&'a Path),
    /// The attributes of group `key` of `collection` (its `__vlmeta__` carrier).
    Group {
        /// The collection as the mount knows it now.
        collection: &'a Collection,
        /// The group's key.
        key: &'a str,
    },
}

/// What a commit changes.
#[derive(Debug, Clone)]
pub enum Edit<'a> {
    /// Chunks, all in one commit.
    Chunks(&'a [ChunkEdit<'a>]),
    /// A 1-D source resized to `len` items along its first axis by `chunks` (the chunks past
    /// its new end emptied, new ones appended, the new last one rewritten), all in one commit;
    /// a b2nd/caterva array's shape becomes `len` ([`write::Edit::shape0`]), whatever its
    /// padded chunks hold.
    Resize {
        /// The chunk edits.
        chunks: &'a [ChunkEdit<'a>],
        /// The new first dimension.
        len: u64,
        /// New attributes (a JSON object) committed with the resize, in the same commit.
        attrs: Option<serde_json::Value>,
    },
    /// The attributes (a JSON object).
    Attrs(serde_json::Value),
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// Nothing was to be done (chunk files being created, still empty).
    Nothing,
    /// Written; the target ([`Target::Array`]) is reloaded already.
    Reloaded,
    /// Written; what shows the target must be reloaded by the caller.
    Written,
}

/// What the commits of a [`Committer`] held (the mount root's `commit_*` attributes).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    /// The bound on the compressed bytes one commit holds in memory.
    pub memory: usize,
    /// The most compressed bytes one commit held in memory (the chunk being compressed or
    /// written besides, and the decoded edits the caller holds, not counted).
    pub peak_bytes: usize,
    /// Compressed chunks commits kept in their spool file, so far.
    pub spilled_chunks: u64,
    /// Their bytes.
    pub spilled_bytes: u64,
}

/// Performs commits, one at a time (callers serialise them by holding it), reusing one
/// encoder.
#[derive(Debug)]
pub struct Committer {
    encoder: Encoder,
    /// The bound on the compressed bytes of one commit kept in memory ([`write::Spool`]).
    spool_memory: usize,
    /// Where a commit's spool file is made past it.
    spool_dir: PathBuf,
    /// Tests: a spool's writes and reads back fail with these errnos (0: they work).
    spool_fail: (i32, i32),
    /// Shared with the mount's attribute reads, which must not wait for a running commit.
    stats: std::sync::Arc<parking_lot::Mutex<CommitStats>>,
    /// Crash tests: the next frame or carray commit performs only this many durable steps
    /// ([`write::commit_with_crash_after`]) and then fails as a crash there would.
    crash_after: Option<usize>,
    /// Tests: giving a file back its mtime, when a commit is undone, fails with this errno.
    time_fail: Option<i32>,
    /// Per single-array source (by path): its dead space, given back by compaction.
    reclaim: HashMap<PathBuf, Reclaim>,
}

impl Default for Committer {
    fn default() -> Committer {
        Committer {
            encoder: Encoder::default(),
            spool_memory: write::DEFAULT_SPOOL_MEMORY,
            spool_dir: std::env::temp_dir(),
            spool_fail: (0, 0),
            stats: std::sync::Arc::new(parking_lot::Mutex::new(CommitStats {
                memory: write::DEFAULT_SPOOL_MEMORY,
                ..CommitStats::default()
            })),
            crash_after: None,
            time_fail: None,
            reclaim: HashMap::new(),
        }
    }
}

/// The answer to a commit of `live` that failed with `e`. One undone whose file could not
/// be given back its mtime ([`ContainerError::Restored`]) left the file byte-identical to the
/// version `live` holds, in a state the mount takes as its own ([`LiveArray::adopt`]): else
/// its next commit would take the moved mtime for another writer's change and drop the
/// pending edits (ESTALE). Logged; the commit's own failure is the answer.
fn adopt_undone(live: &LiveArray, e: ContainerError) -> ContainerError {
    let ContainerError::Restored {
        path,
        left,
        why,
        source,
    } = e
    else {
        return e;
    };
    let path = path.display();
    match live.adopt(*left) {
        Ok(true) => log::warn!(
            "{path}: a failed commit was undone but its modification time could not be given back ({why}); the pending edits are kept"
        ),
        Ok(false) => log::warn!(
            "{path}: a failed commit was undone but its modification time could not be given back ({why}), and the file changed again since: another writer's change"
        ),
        Err(r) => log::warn!(
            "{path}: a failed commit was undone but its modification time could not be given back ({why}), and reopening it failed: {}",
            crate::error::display_chain(&r)
        ),
    }
    *source
}

impl Committer {
    /// A committer with a fresh encoder, keeping up to [`write::DEFAULT_SPOOL_MEMORY`] of a
    /// commit's compressed chunks in memory, the rest in a file in `$TMPDIR`.
    pub fn new() -> Committer {
        Committer::default()
    }

    /// Keeps at most `bytes` of a commit's compressed chunks in memory; the rest wait in an
    /// unlinked file made in `dir` (a mount: the smaller of its `edit_budget=` and
    /// [`write::DEFAULT_SPOOL_MEMORY`], in its `spill_dir=`).
    pub fn set_spool(&mut self, bytes: usize, dir: PathBuf) {
        self.spool_memory = bytes;
        self.spool_dir = dir;
        self.stats.lock().memory = bytes;
    }

    /// A committer for a mount whose pending edits may hold `edit_budget` bytes: a commit
    /// keeps at most the smaller of that and [`write::DEFAULT_SPOOL_MEMORY`] of its
    /// compressed chunks in memory, the rest in a file in `dir` (the mount's `spill_dir=`).
    pub fn with_edit_budget(edit_budget: usize, dir: PathBuf) -> Committer {
        let mut c = Committer::new();
        c.set_spool(edit_budget.min(write::DEFAULT_SPOOL_MEMORY), dir);
        c
    }

    /// Tests: writes to a commit's spool file fail with errno `write`, reads back of it with
    /// `read` (0: they work).
    pub fn fail_spool(&mut self, write: i32, read: i32) {
        self.spool_fail = (write, read);
    }

    /// Tests: when a contiguous frame's commit is undone (it failed before its commit point),
    /// giving the file back its modification time fails with `errno` (0: it works), as for a
    /// file of another owner.
    pub fn fail_time_reset(&mut self, errno: i32) {
        self.time_fail = (errno != 0).then_some(errno);
    }

    /// What the commits so far held.
    pub fn stats(&self) -> CommitStats {
        *self.stats.lock()
    }

    /// [`Committer::stats`] as they change, readable while a commit runs (the committer
    /// itself is held for a whole commit).
    pub fn stats_handle(&self) -> std::sync::Arc<parking_lot::Mutex<CommitStats>> {
        self.stats.clone()
    }

    /// Crash tests: the next commit to a [`Target::Array`] stops after `steps` durable steps,
    /// leaving the files as a crash there would, and fails with an I/O error when it was cut
    /// short. The caller must then abandon the array and reopen the source, as a restarted
    /// daemon would.
    pub fn crash_after(&mut self, steps: usize) {
        self.crash_after = Some(steps);
    }

    /// Commits `edit` to `target` (see the module doc).
    ///
    /// # Errors
    /// [`ContainerError::Changed`] when the source changed on disk since the mount read it
    /// (another writer) or a leaf or table is gone; [`ContainerError::Refused`] for an edit
    /// the source cannot take (a chunk of the wrong size, emptying a chunk that is not the
    /// last, chunks of attributes-only targets); what the container layer or the encoder
    /// report.
    pub fn commit(
        &mut self,
        target: Target<'_>,
        edit: Edit<'_>,
    ) -> Result<Committed, ContainerError> {
        let edited: Vec<usize> = match edit {
            Edit::Chunks(chunks) | Edit::Resize { chunks, .. } => {
                chunks.iter().map(|c| c.index).collect()
            }
            Edit::Attrs(_) => Vec::new(),
        };
        let container_edit = match edit {
            Edit::Chunks(chunks) | Edit::Resize { chunks, .. } => {
                let Some(live) = target.live() else {
                    return Err(ContainerError::Refused {
                        path: target.path(),
                        why: "chunks of something that holds only attributes".into(),
                    });
                };
                let array = live.get();
                let mut e = match (self.container_edit(&array, chunks)?, &edit) {
                    (Some(e), _) => e,
                    // A resize with no chunk to change still goes to the container with its
                    // shape (b2nd) and attributes, which refuses or commits them (an edit of
                    // neither, a plain frame's or bcolz's same length, still does nothing).
                    (None, Edit::Resize { .. }) => write::Edit::default(),
                    (None, _) => return Ok(Committed::Nothing),
                };
                if let Edit::Resize { len, attrs, .. } = edit {
                    e.shape0 = array.nd_meta().is_some().then_some(len);
                    e.attrs = attrs;
                }
                e
            }
            Edit::Attrs(attrs) => write::Edit {
                attrs: Some(attrs),
                ..Default::default()
            },
        };
        let spool = container_edit.spool.clone();
        let res = self.commit_to(target, container_edit, &edited);
        self.account(spool.as_ref().map(|s| s.lock()).as_deref());
        res
    }

    /// [`Committer::commit`] of the container edit `container_edit` (of chunks `edited`).
    fn commit_to(
        &mut self,
        target: Target<'_>,
        container_edit: write::Edit,
        edited: &[usize],
    ) -> Result<Committed, ContainerError> {
        match target {
            Target::Array(live) => self.commit_array(live, &container_edit, edited),
            // A column's attributes are its own carray's.
            Target::Column { live, .. } if container_edit.attrs_only() => {
                self.commit_array(live, &container_edit, edited)
            }
            Target::Column { live, .. } if container_edit.attrs.is_some() => {
                Err(ContainerError::Refused {
                    path: live.path().to_path_buf(),
                    why: "a ctable column's attributes are committed on their own, not with its chunks"
                        .into(),
                })
            }
            Target::Column { table, live } => {
                if live.get().changed_on_disk()? {
                    return Err(ContainerError::Changed {
                        path: live.path().to_path_buf(),
                        why: "meta/sizes, meta/storage or __attrs__ differ".into(),
                    });
                }
                let table = open_table(table)?;
                let column = table
                    .columns
                    .iter()
                    .position(|(_, a)| a.path() == live.path())
                    .ok_or_else(|| ContainerError::Changed {
                        path: table.path.clone(),
                        why: format!("{} is no longer one of its columns", live.path().display()),
                    })?;
                write::commit_column(&table, column, &container_edit)?;
                Ok(Committed::Written)
            }
            Target::Leaf {
                collection,
                key,
                live,
            } => {
                let leaf = leaf_of(collection, key)?;
                match container_edit.attrs_only() {
                    true => write::commit_member(collection, leaf, &container_edit)?,
                    false => {
                        live.committing(|_| {
                            write::commit_member(collection, leaf, &container_edit)
                        })?;
                    }
                }
                Ok(Committed::Written)
            }
            Target::Table(path) => {
                let attrs = container_edit.attrs.unwrap_or_default();
                write::commit_table_attrs(&open_table(path)?, &attrs)?;
                Ok(Committed::Written)
            }
            Target::Group { collection, key } => {
                let attrs = container_edit.attrs.unwrap_or_default();
                write::commit_group_attrs(collection, key, &attrs)?;
                Ok(Committed::Written)
            }
        }
    }

    /// Commits `edit` (of chunks `edited`) to the single array `live`, reloads it inside the
    /// commit window (versions pinned by readers keep reading while it appends), then gives
    /// back dead space.
    fn commit_array(
        &mut self,
        live: &LiveArray,
        edit: &write::Edit,
        edited: &[usize],
    ) -> Result<Committed, ContainerError> {
        live.committing(|array| {
            if let Err(e) = self.write(array, edit) {
                return Err(adopt_undone(live, e));
            }
            live.reload(Change::Own(edited))
        })?;
        self.reclaim(live);
        Ok(Committed::Reloaded)
    }

    /// [`write::commit`], or its crash-test variant when [`Committer::crash_after`] asked.
    fn write(&mut self, array: &Array, edit: &write::Edit) -> Result<(), ContainerError> {
        let Some(steps) = self.crash_after.take() else {
            return match self.time_fail {
                Some(errno) => write::commit_failing_time_reset(array, edit, errno),
                None => write::commit(array, edit),
            };
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
}

impl<'a> Target<'a> {
    /// The array whose chunks the target holds, if it holds chunks.
    fn live(&self) -> Option<&'a LiveArray> {
        match *self {
            Target::Array(live) | Target::Column { live, .. } | Target::Leaf { live, .. } => {
                Some(live)
            }
            Target::Table(_) | Target::Group { .. } => None,
        }
    }

    /// Where it lives, for errors.
    fn path(&self) -> PathBuf {
        match *self {
            Target::Array(live) | Target::Column { live, .. } | Target::Leaf { live, .. } => {
                live.path().to_path_buf()
            }
            Target::Table(path) => path.to_path_buf(),
            Target::Group { collection, .. } => collection.path().to_path_buf(),
        }
    }
}

/// The ctable at `path`, opened now.
fn open_table(path: &Path) -> Result<container::Table, ContainerError> {
    match container::open(path)? {
        Container::Table(t) => Ok(t),
        Container::Array(_) => Err(ContainerError::Changed {
            path: path.to_path_buf(),
            why: "it no longer opens as a ctable".into(),
        }),
    }
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
