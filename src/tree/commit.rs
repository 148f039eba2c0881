//! When and how buffered edits reach the source: fsync, a close of a handle opened for
//! writing by the process that opened it, and release commit (`commit`); a refused or failed commit drops the buffer
//! (`drop_pending`); after a commit the arrays are reloaded, cached chunks dropped and
//! generated files rendered again (`reload.rs`); and what the kernel may keep cached ([`KernelCache`]).
//!
//! Subtleties:
//! - **Who commits at close** (issue 21): a FLUSH commits only when it comes from the process
//!   that opened the handle ([`super::Pid`]). A forked child or a program the descriptor was
//!   passed to closes its copy while the opener may be halfway through its writes: that close
//!   commits nothing, and the opener's own close still reports the commit's errors. fsync
//!   from any process commits; the release (last close) commits what is left.
//! - **What one commit covers.** A chunk file commits its chunk; `array.npy` commits every
//!   edited chunk of its array in one container commit (old or new after a crash, for all of
//!   them); `__attrs__` its attributes.
//! - **Shell redirections.** `cmd > data/N.bin` opens with `O_TRUNC` and closes a duplicate
//!   descriptor before writing: a buffer emptied that way is not committed by a flush, only
//!   by fsync or the last close; a created chunk file still empty is never committed; an
//!   empty `__attrs__` buffer is not committed (nor refused) by a flush either.
//! - **ctables**: a commit that changes a column's row count goes through
//!   [`crate::commit::Target::Column`] and every column is reloaded afterwards (`reload.rs`).
//! - **Other writers** (ESTALE): every array is reloaded and the cached chunks whose bytes
//!   changed are dropped (`follow.rs`); the edit is dropped, so a retry applies to what is
//!   stored now; the kernel's pages of the changed files are not kept at their next open.
//!   Every other edit still buffered then was made against the replaced version too: it is
//!   marked stale, and its own commit fails with ESTALE in turn (issue 21: it used to be
//!   committed over that writer's change). Such a commit reloads only when the source changed
//!   on disk again since (`follow_replaced`), so an edit made after the reload commits.
//! - **Refused `__attrs__`** content (not a JSON object) stays readable as written until the
//!   last handle is released (a shell's `>` flushes a duplicate descriptor before writing);
//!   then the stored attributes show again.

use std::collections::HashSet;

use super::edit::{BufState, ChunkBuf};
use super::layout::{AttrsOwner, FileKind, NodeKind};
use super::reload::Refreshed;
use super::{Entry, Mounted, Tree, TreeError, display_chain, view};
use crate::commit::{ChunkEdit, Committed, Committer, Edit, Target};
use crate::container::ContainerError;
use crate::reader::{ArrayId, ChunkId};

/// What [`Tree::follow_replaced`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Followed {
    /// The source changed on disk: reloaded.
    Reloaded,
    /// Nothing changed on disk since the reload that marked the edit stale.
    Unchanged,
    /// The reload failed (logged).
    Failed,
}

/// What asks for a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A `close(2)` of one descriptor (others may still follow).
    Close,
    /// fsync, the last close (release), a truncate without an open handle, a rename.
    Durable,
}

/// What the kernel may keep of its cached pages when a file is opened again.
#[derive(Debug, Default)]
pub(crate) struct KernelCache {
    /// Files whose content changed or whose buffered edit was dropped since they were last
    /// opened: their next open must not keep the kernel's pages.
    pub(super) stale: HashSet<u64>,
    /// Another writer changed more chunks than [`super::follow::MAX_CHUNK_INVALIDATIONS`]
    /// at once: no file keeps cached pages any more (they may hold what that writer
    /// replaced, at the same size).
    pub(super) foreign: bool,
}

impl Tree {
    /// Whether the kernel may keep its cached pages of `ino` when it is opened: not for a file
    /// whose content changed since its last open (a commit, another writer: issue 12), nor,
    /// on a read-write tree, for `__attrs__` files (a refused edit restores the stored
    /// content).
    pub fn keep_cache(&self, ino: u64) -> bool {
        if self.options.writable
            && let Ok(Entry::File(FileKind::Attrs(..))) = self.entry(ino)
        {
            return false;
        }
        if let Ok(
            Entry::Zarr(super::zarr::ZNode::RootJson | super::zarr::ZNode::Json(_))
            | Entry::Zarr2(_),
        ) = self.entry(ino)
        {
            // Generated on demand; the v2 view's chunk objects are not tracked by commits
            // and followers (`zarr/v2.rs`): never cached across opens.
            return false;
        }
        let mut k = self.kcache.lock();
        !k.foreign && !k.stale.remove(&ino)
    }

    /// Marks the files showing chunk `id` (its chunk file and its array's `array.npy`) as
    /// changed for the kernel's cache.
    fn chunk_changed(&self, id: ChunkId) {
        let zarr = self.zarr_chunk_ino(id);
        let mut k = self.kcache.lock();
        k.stale.insert(self.inodes.chunk_ino(id));
        k.stale.extend(zarr);
        if let Some(npy) = self.arrays.get(id.array.index()).and_then(|f| f.npy) {
            k.stale.insert(npy);
        }
    }

    /// Crash tests without a kernel: the next commit of a frame or carray source (chunks or
    /// `__attrs__`) performs only `steps` durable steps (each write, fsync, rename or unlink
    /// counts one) and fails with EIO as if the daemon had died there. The files are left as
    /// that crash would leave them; drop the tree and open the source again, as a restarted
    /// daemon would (this tree's state no longer matches them).
    pub fn simulate_crash_after(&self, steps: usize) {
        self.committer.lock().crash_after(steps);
    }

    /// `fsync(2)` of file `ino`: commits its buffer; durable when this returns `Ok`.
    ///
    /// # Errors
    /// As [`Tree::flush`].
    pub fn fsync(&self, ino: u64, fh: u64) -> Result<(), TreeError> {
        if self.handles.is_writer(fh) {
            self.commit(ino, Reason::Durable)
        } else {
            Ok(())
        }
    }

    /// `close(2)` of a descriptor of file `ino` by this process ([`Tree::flush_by`] with
    /// [`super::Pid::current`]).
    ///
    /// # Errors
    /// As [`Tree::flush_by`].
    pub fn flush(&self, ino: u64, fh: u64) -> Result<(), TreeError> {
        self.flush_by(ino, fh, super::Pid::current())
    }

    /// `close(2)` of a descriptor of file `ino` by process `by` (may come several times, from
    /// every process holding a copy of the descriptor): when `fh` was opened for writing by
    /// `by`, commits the file's buffer if it has changes. A close by any other process (a
    /// forked child, a program the descriptor was passed to) commits nothing: the buffer may
    /// hold half of what the opener is writing; the opener's close, an fsync or the release
    /// commits it.
    ///
    /// # Errors
    /// [`TreeError::Refused`] for `__attrs__` content that is not a JSON object (the stored
    /// attributes are kept and the file shows them again); [`TreeError::Commit`] when the
    /// container layer refuses the edit (EINVAL) or fails (errno of [`TreeError::errno`]).
    ///
    /// A refused edit (EINVAL, EFBIG, EOPNOTSUPP) of a file that no other handle is writing is
    /// dropped here, as the release would drop it: the kernel sends the release after
    /// `close(2)` has returned, and a program that looks again right after a refused close
    /// must see the stored file.
    pub fn flush_by(&self, ino: u64, fh: u64, by: super::Pid) -> Result<(), TreeError> {
        let Some(opener) = self.handles.writer_opened_by(fh) else {
            return Ok(());
        };
        if opener != by {
            log::debug!(
                "inode {ino}: close by process {} of a descriptor process {} opened: nothing \
                 committed (the opener's close, fsync or the last close commits)",
                by.0,
                opener.0
            );
            return Ok(());
        }
        let res = self.commit(ino, Reason::Close);
        if let Err(e) = &res {
            let refused = matches!(e.errno(), libc::EINVAL | libc::EFBIG | libc::EOPNOTSUPP);
            if refused && !self.handles.other_writer(ino, Some(fh)) {
                self.drop_pending(ino);
            }
        }
        res
    }

    /// Forgets the buffered edit of `ino` after a failed or refused commit: chunk buffers are
    /// dropped (the kernel's pages of them are stale from now on), an `__attrs__` buffer too
    /// (the file shows the stored attributes again).
    pub(crate) fn drop_pending(&self, ino: u64) {
        let dropped: Vec<ChunkId> = {
            let mut edits = self.edits.lock();
            edits.attrs.remove(&ino);
            let which: Vec<ChunkId> = match self.chunk_of(ino) {
                Some(id) => vec![id],
                None => match self.npy_array_of(ino) {
                    Some(array) => edits.chunk_ids().filter(|id| id.array == array).collect(),
                    None => Vec::new(),
                },
            };
            which
                .into_iter()
                .filter(|id| edits.remove_chunk(*id))
                .collect()
        };
        for id in dropped {
            self.chunk_changed(id);
        }
    }

    /// The array whose `array.npy` is `ino`.
    fn npy_array_of(&self, ino: u64) -> Option<ArrayId> {
        match self.node(ino).map(|n| &n.kind) {
            Some(NodeKind::File(FileKind::Npy(array, _))) => Some(*array),
            _ => None,
        }
    }

    /// Commits the buffers of `ino` if they have changes (`reason`: what asks).
    pub(crate) fn commit(&self, ino: u64, reason: Reason) -> Result<(), TreeError> {
        // A scratch file is never stored; one renamed over a file is gone, its content
        // committed by the rename, and a descriptor of it may still be closed or synced
        // (TensorStore closes its temp file after renaming it over the chunk object).
        let scratch = ino >= super::inode::SCRATCH_BASE && !super::zarr::is_zarr(ino);
        if !self.options.writable || scratch {
            return Ok(());
        }
        let mut committer = self.committer.lock();
        let (array, which): (ArrayId, Vec<ChunkId>) = match self.entry(ino)? {
            Entry::Chunk(id) => (id.array, vec![id]),
            Entry::Zarr(_) => match self.zarr_chunk_of(ino) {
                Some(id) => (id.array, vec![id]),
                None => return Ok(()),
            },
            Entry::File(FileKind::Npy(array, _)) => {
                let edits = self.edits.lock();
                let ids = edits.chunk_ids().filter(|id| id.array == *array);
                (*array, ids.collect())
            }
            Entry::File(FileKind::Attrs(owner, _)) => {
                let owner = owner.clone();
                if reason == Reason::Close && self.attrs_emptied(ino) {
                    return Ok(());
                }
                return self.commit_attrs(ino, &owner, &mut committer);
            }
            _ => return Ok(()),
        };
        let bufs: Vec<(usize, ChunkBuf)> = {
            let edits = self.edits.lock();
            which
                .iter()
                // Shared references (`Arc`), not copies: a writer copies on write.
                .filter_map(|id| Some((id.index, edits.chunk(*id)?.clone())))
                .filter(|(_, c)| c.dirty())
                // Still empty (a shell's `>` closes a duplicate first): wait for the data.
                .filter(|(_, c)| {
                    !(c.is_empty()
                        && (c.creating
                            || (c.state == BufState::EmptiedByTrunc && reason == Reason::Close)))
                })
                .collect()
        };
        if bufs.is_empty() {
            return Ok(());
        }
        let res = match self.replaced_base(array, &bufs) {
            Some(source) => {
                self.follow_replaced(false);
                Err(TreeError::Commit { ino, source })
            }
            None => self.commit_chunk_bufs(ino, array, &bufs, &mut committer),
        };
        let mut edits = self.edits.lock();
        let stale = res.as_ref().is_err_and(|e| e.errno() == libc::ESTALE);
        if res.is_ok() || stale {
            edits.note_stored();
        }
        for (index, c) in &bufs {
            let id = ChunkId::new(array, *index);
            let same = edits.chunk(id).is_some_and(|now| now.version == c.version);
            match &res {
                Ok(()) if same => {
                    edits.remove_chunk(id);
                }
                Ok(()) => {
                    if let Some(now) = edits.chunk_mut(id) {
                        now.creating = false;
                    }
                }
                // Made against content another writer has replaced: dropped.
                Err(_) if stale => {
                    if edits.remove_chunk(id) {
                        self.chunk_changed(id);
                    }
                }
                Err(_) => {}
            }
        }
        // Spilled regions only this commit still held are given back.
        edits.release(bufs.into_iter().map(|(_, c)| c).collect());
        res
    }

    /// Why buffers `bufs` of `array` cannot be committed because another writer replaced
    /// what they were made against (issue 21): one of them was buffered when the mount
    /// followed such a change, or the source changed since the mount last read it (checked
    /// here, before any refusal, for frames and carrays; the container layer checks again).
    /// Such an edit is dropped with ESTALE, whatever else is wrong with it: committing it
    /// would put back, around its own bytes, what that writer replaced.
    fn replaced_base(&self, array: ArrayId, bufs: &[(usize, ChunkBuf)]) -> Option<ContainerError> {
        let live = self.live(array)?;
        let why = if bufs.iter().any(|(_, c)| c.stale) {
            "the edit was made against chunks another writer has replaced since"
        } else if self.mounted.collection().is_none() && live.changed_on_disk() {
            "the source changed on disk since the mount read it"
        } else {
            return None;
        };
        Some(ContainerError::Changed {
            path: live.path().to_path_buf(),
            why: why.into(),
        })
    }

    /// After a commit failed with ESTALE: when the source changed on disk since the mount last
    /// read it (`changed`: the container layer found so), the mount follows it now, so a retry
    /// applies to what is stored. When it did not (the edit was marked stale at an earlier
    /// reload that followed that change), nothing is reloaded (issue 21): a reload marks every
    /// buffered edit stale, and edits made since that reload, from the current version, would
    /// fail with ESTALE though no other writer touched the source again.
    fn follow_replaced(&self, changed: bool) -> Followed {
        let changed = changed
            || self.mounted.collection().is_some()
            || self.lives().any(|(_, l)| l.changed_on_disk());
        if !changed {
            return Followed::Unchanged;
        }
        match self.reload(Refreshed::Foreign, None) {
            Ok(_) => Followed::Reloaded,
            Err(e) => {
                log::warn!("reload after a stale edit failed: {}", display_chain(&e));
                Followed::Failed
            }
        }
    }

    /// Commits chunk buffers `bufs` of `array` (for inode `ino`) in one commit, then shows the
    /// result: arrays reloaded, cached copies of changed chunks dropped, `meta/sizes` rendered
    /// again. When the source changed on disk (another writer), every array is reloaded and
    /// its cached chunks dropped, so later edits apply to what is stored now; the edit itself
    /// fails with ESTALE.
    pub(crate) fn commit_chunk_bufs(
        &self,
        ino: u64,
        array: ArrayId,
        bufs: &[(usize, ChunkBuf)],
        committer: &mut Committer,
    ) -> Result<(), TreeError> {
        let edits: Vec<ChunkEdit<'_>> = bufs
            .iter()
            .map(|(index, c)| ChunkEdit {
                index: *index,
                data: c,
                append: c.creating,
            })
            .collect();
        self.commit_chunk_edits(ino, array, &edits, None, committer)
    }

    /// [`Tree::commit_chunk_bufs`] of chunk edits `edits`; with `resize`, the commit is a
    /// resize of the source's first dimension to that many items ([`Edit::Resize`]), with
    /// the attributes it holds (a JSON object) in the same commit.
    pub(crate) fn commit_chunk_edits(
        &self,
        ino: u64,
        array: ArrayId,
        edits: &[ChunkEdit<'_>],
        resize: Option<(u64, Option<serde_json::Value>)>,
        committer: &mut Committer,
    ) -> Result<(), TreeError> {
        let live = self.writable_array(array)?;
        if self.mounted.table().is_some() {
            // A row-count change writes every column: each must be writable (else EROFS, as
            // for the edited one).
            for a in self.array_ids() {
                self.writable_array(a)?;
            }
        }
        let indexes: Vec<usize> = edits.iter().map(|e| e.index).collect();
        let before = live.snapshot();
        let collection = self.mounted.collection().map(|c| c.get());
        let target = match (&self.mounted, live.leaf_key(), &collection) {
            (Mounted::Collection { .. }, Some(key), Some(collection)) => Target::Leaf {
                collection,
                key,
                live,
            },
            (Mounted::Table(table), ..) => Target::Column { table, live },
            _ => Target::Array(live),
        };
        let edit = match resize {
            Some((len, attrs)) => Edit::Resize {
                chunks: edits,
                len,
                attrs,
            },
            None => Edit::Chunks(edits),
        };
        let res = committer.commit(target, edit);
        let stale = matches!(res, Err(ContainerError::Changed { .. }));
        let reloaded = match &res {
            Ok(Committed::Nothing) => return Ok(()),
            // Every column (a table commit may resize them all), every leaf (a `.b2z`
            // commit moves every member), or the array its commit reloaded.
            Ok(Committed::Written) => self.reload(Refreshed::Own(array, &indexes), None),
            Ok(Committed::Reloaded) => {
                self.reload(Refreshed::Own(array, &indexes), Some((array, before)))
            }
            // A stale view may be anywhere: every array.
            Err(_) if stale => self.reload(Refreshed::Foreign, None),
            Err(_) => Ok(Vec::new()),
        };
        if let Err(source) = reloaded {
            // After a stale commit to a collection the stale error is the answer.
            if !(stale && self.mounted.collection().is_some()) {
                return Err(TreeError::Commit { ino, source });
            }
        }
        if res.is_ok() {
            // A buffer whose base was decoded before this commit is not inserted after it
            // (`Tree::with_chunk_buffer`): chunk edits made here (a resize, a removal of a
            // Zarr chunk object) do not come through `Tree::commit`, which notes it too.
            self.edits.lock().note_stored();
            for &index in &indexes {
                self.chunk_changed(ChunkId::new(array, index));
            }
        }
        res.map(|_| ())
            .map_err(|source| TreeError::Commit { ino, source })
    }

    /// The answer to an `__attrs__` commit of `ino` (owned by `owner`; `stale`: its edit was
    /// marked stale) that failed with `e`: EINVAL is a refusal (the stored attributes are
    /// kept); after another writer (ESTALE) the file shows what is stored now and the edit is
    /// dropped (it would silently replace that writer's attributes).
    fn attrs_not_saved(
        &self,
        ino: u64,
        owner: &AttrsOwner,
        stale: bool,
        e: TreeError,
    ) -> Result<(), TreeError> {
        if e.errno() == libc::EINVAL {
            log::warn!(
                "inode {ino}: __attrs__ not saved, the stored attributes are kept: {}",
                display_chain(&e)
            );
            return Err(TreeError::Refused(format!(
                "__attrs__: {}",
                display_chain(&e)
            )));
        }
        if e.errno() == libc::ESTALE {
            log::warn!("inode {ino}: __attrs__ not saved: {}", display_chain(&e));
            match self.follow_replaced(!stale) {
                Followed::Reloaded => {
                    if let (AttrsOwner::Array(id), Ok(Entry::File(FileKind::Attrs(_, stored)))) =
                        (owner, self.entry(ino))
                        && let Some(live) = self.live(*id)
                    {
                        stored.set(view::json_file(live.get().attrs()));
                        self.edits.lock().attrs.remove(&ino);
                    }
                }
                // Already showing what is stored (the reload that marked it stale).
                Followed::Unchanged => {
                    self.edits.lock().attrs.remove(&ino);
                }
                Followed::Failed => {}
            }
        }
        Err(e)
    }

    /// Issue 15: whether the `__attrs__` buffer of `ino` is empty. A close does not commit
    /// it (as for chunks emptied by `O_TRUNC`): a shell's `echo '{...}' > __attrs__` closes a
    /// duplicate descriptor before writing, and refusing that close dropped the buffer, so the
    /// data then landed over the stored attributes and was refused in turn.
    fn attrs_emptied(&self, ino: u64) -> bool {
        let edits = self.edits.lock();
        edits
            .attrs
            .get(&ino)
            .is_some_and(|a| a.dirty && a.data.is_empty())
    }

    /// Commits the `__attrs__` buffer of `ino` (owned by `owner`) if it has changes.
    fn commit_attrs(
        &self,
        ino: u64,
        owner: &AttrsOwner,
        committer: &mut Committer,
    ) -> Result<(), TreeError> {
        let Some(a) = self
            .edits
            .lock()
            .attrs
            .get(&ino)
            .filter(|a| a.dirty)
            .cloned()
        else {
            return Ok(());
        };
        let refuse = |why: String| {
            log::warn!("inode {ino}: __attrs__ not saved, the stored attributes are kept: {why}");
            TreeError::Refused(format!("__attrs__: {why}"))
        };
        let value = parse_attrs(&a.data).map_err(refuse)?;
        let live_path = |id: &ArrayId| {
            let live = self.live(*id);
            live.map_or_else(Default::default, |l| l.path().to_path_buf())
        };
        let collection = self.mounted.collection().map(|c| c.get());
        let (target, after) = match (owner, &collection) {
            (AttrsOwner::Array(id), _) if a.stale => {
                let source = ContainerError::Changed {
                    path: live_path(id),
                    why: "the attributes were edited against a version another writer replaced"
                        .into(),
                };
                return self.attrs_not_saved(
                    ino,
                    owner,
                    a.stale,
                    TreeError::Commit { ino, source },
                );
            }
            (AttrsOwner::Array(id), Some(collection)) => {
                let live = self.writable_array(*id)?;
                match live.leaf_key() {
                    Some(key) => (
                        Target::Leaf {
                            collection,
                            key,
                            live,
                        },
                        Some(Refreshed::Own(*id, &[])),
                    ),
                    None => (Target::Array(live), None),
                }
            }
            (AttrsOwner::Array(id), None) => (Target::Array(self.writable_array(*id)?), None),
            (AttrsOwner::Table(path), _) => (Target::Table(path), None),
            (AttrsOwner::Group(key), Some(collection)) => {
                (Target::Group { collection, key }, Some(Refreshed::NONE))
            }
            (AttrsOwner::Group(_) | AttrsOwner::ReadOnly, _) => return Err(TreeError::ReadOnly),
        };
        let res = committer
            .commit(target, Edit::Attrs(value))
            .and_then(|_| match after {
                Some(change) => self.reload(change, None).map(|_| ()),
                None => Ok(()),
            });
        let stored = match self.entry(ino)? {
            Entry::File(FileKind::Attrs(_, stored)) => stored,
            _ => return Err(TreeError::MetadataFile),
        };
        if let Err(source) = res {
            return self.attrs_not_saved(ino, owner, a.stale, TreeError::Commit { ino, source });
        }
        // The file shows what was written (not a re-rendering of it).
        stored.set(a.data.clone());
        self.zarr_changed();
        if matches!(owner, AttrsOwner::Table(_)) {
            self.settle_outer(None); // the ctable's root `__attrs__`, written by the mount
        }
        let mut edits = self.edits.lock();
        if edits
            .attrs
            .get(&ino)
            .is_some_and(|now| now.version == a.version)
        {
            // Nothing newer: the file shows what is stored (and a reload renders it anew).
            edits.attrs.remove(&ino);
        }
        Ok(())
    }
}

/// Parses an `__attrs__` buffer: it must be a JSON object.
///
/// # Errors
/// A message saying why not.
pub(crate) fn parse_attrs(data: &[u8]) -> Result<serde_json::Value, String> {
    match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        Ok(_) => Err("the content is JSON but not an object".into()),
        Err(e) => Err(format!("the content is not JSON: {e}")),
    }
}

/// Trims the columns of ctable `t` that are longer than its first (what a commit cut short
/// by a crash leaves, see [`crate::container::write::repair_table`]) before a read-write tree
/// serves it; logs what it did. Returns whether anything changed on disk.
pub(crate) fn repair_table(t: &crate::container::Table) -> bool {
    match crate::container::write::repair_table(t) {
        Ok(r) => {
            for (name, from, to) in &r.trimmed {
                log::warn!(
                    "{}: column {name:?} trimmed from {from} to {to} rows (rows of an \
                     interrupted commit; the first column says the table has {to})",
                    t.path.display()
                );
            }
            for (name, rows) in &r.short {
                log::warn!(
                    "{}: column {name:?} has {rows} rows, fewer than the first column: the \
                     table's row count cannot be changed through the mount",
                    t.path.display()
                );
            }
            !r.trimmed.is_empty()
        }
        Err(e) => {
            log::warn!("{}: not repaired: {}", t.path.display(), display_chain(&e));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attrs_must_be_a_json_object() {
        assert_eq!(
            parse_attrs(br#"{"a": [1, 2]}"#),
            Ok(serde_json::json!({"a": [1, 2]}))
        );
        assert!(parse_attrs(b"{}").is_ok());
        assert!(parse_attrs(b"[1]").unwrap_err().contains("not an object"));
        assert!(parse_attrs(b"").unwrap_err().contains("not JSON"));
        assert!(
            parse_attrs(b"{\"a\": 1} x")
                .unwrap_err()
                .contains("not JSON")
        );
    }
}
