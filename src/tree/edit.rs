//! Buffered edits and the operations that make them: `write`, `truncate`, `create` of the next
//! chunk file, `unlink` of the last one.
//!
//! Chunk buffers are keyed by [`ChunkId`], not by the file that showed the chunk: a write
//! through `data/N.bin` and one through `array.npy` patch the same buffer, and each file reads
//! the other's edit at once. The buffers, their life and the bound on their memory are in
//! `edit/pending.rs` (the spill file's I/O, done with the edits lock released, in
//! `edit/pending/evict.rs`); the spill file that holds them past that bound in
//! `edit/spill.rs`; reads of edited chunks in `edit/reads.rs`.

mod pending;
mod reads;
mod spill;

pub(crate) use pending::{AttrsBuf, BufState, ChunkBuf, Edits, SpillHook};
pub use pending::{DEFAULT_EDIT_BUDGET, EditStats};

use super::layout::{AttrsOwner, FileKind};
use super::scratch::MAX_SCRATCH_BYTES;
use super::{Entry, Tree, TreeError, dir};
use crate::reader::{ArrayId, ChunkId, LiveArray};
use std::sync::Arc;

/// The most bytes an `__attrs__` buffer or a scratch file may hold (writes and truncations
/// past it are EFBIG): both live in memory, and without a bound one `truncate -s 1T` of
/// `__attrs__` asked for a terabyte (a capacity-overflow panic past `isize::MAX`; fuzz target
/// `tree_edit`, tests/data/fuzz-regressions/tree_edit/). Far above any attribute set the
/// formats hold in practice (each vlmetalayer is one compressed chunk).
pub(crate) const MAX_BUFFERED: usize = 64 << 20;

/// What a write to an inode changes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WriteTarget {
    Scratch,
    Attrs,
    Chunk(ChunkId),
    Npy(ArrayId),
    /// A chunk object or a `zarr.json` of the Zarr view (`zarr/write.rs`).
    Zarr(super::zarr::ZarrTarget),
}

impl Tree {
    /// Whether chunk file `id` is being created (a pending append).
    pub(crate) fn creating(&self, id: ChunkId) -> bool {
        self.options.writable && self.edits.lock().chunk(id).is_some_and(|c| c.creating)
    }

    /// Whether `ino` shows write permission: a writable tree's directories, chunk files,
    /// `__attrs__` and `array.npy` files, scratch files.
    pub(crate) fn writable_ino(&self, ino: u64) -> bool {
        if !self.options.writable {
            return false;
        }
        match self.entry(ino) {
            Ok(Entry::Dir(..) | Entry::Chunk(_) | Entry::Scratch) => true,
            Ok(Entry::File(kind)) => matches!(kind, FileKind::Attrs(..) | FileKind::Npy(..)),
            Ok(Entry::Zarr(z)) => !matches!(
                z,
                super::zarr::ZNode::RootJson | super::zarr::ZNode::Json(_)
            ),
            Ok(Entry::Zarr2(_)) | Err(_) => false,
        }
    }

    /// The writable array `id`, or [`TreeError::ReadOnly`] (logged with the reason) when the
    /// source cannot be written.
    pub(crate) fn writable_array(&self, id: ArrayId) -> Result<&Arc<LiveArray>, TreeError> {
        let live = self.live(id).ok_or(TreeError::ReadOnly)?;
        if let Some(why) = live.why_not_writable() {
            log::info!("not writable: {}", super::display_chain(&why));
            return Err(TreeError::ReadOnly);
        }
        Ok(live)
    }

    /// What writing to `ino` changes, after checking that it may be written.
    pub(crate) fn write_target(&self, ino: u64) -> Result<WriteTarget, TreeError> {
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        match self.entry(ino)? {
            Entry::Scratch => Ok(WriteTarget::Scratch),
            Entry::Zarr(z) => self.zarr_write_target(ino, z).map(WriteTarget::Zarr),
            // The Zarr v2 view is read-only on every mount.
            Entry::Zarr2(_) => Err(TreeError::ReadOnly),
            Entry::Dir(..) => Err(TreeError::IsADirectory(ino)),
            Entry::Chunk(id) => {
                self.writable_array(id.array)?;
                Ok(WriteTarget::Chunk(id))
            }
            Entry::File(FileKind::Attrs(AttrsOwner::Array(id), _)) => {
                self.writable_array(*id)?;
                Ok(WriteTarget::Attrs)
            }
            Entry::File(FileKind::Attrs(AttrsOwner::ReadOnly, _)) => Err(TreeError::ReadOnly),
            Entry::File(FileKind::Attrs(AttrsOwner::Group(_), stored)) => {
                if self.mounted.collection().is_none() {
                    return Err(TreeError::ReadOnly);
                }
                // Attributes that cannot be read are not replaced: an edit would overwrite
                // what the carrier holds with what the mount could not see (EIO).
                super::read::generated(stored)?;
                Ok(WriteTarget::Attrs)
            }
            Entry::File(FileKind::Attrs(AttrsOwner::Table(path), _)) => {
                let ro = std::fs::metadata(path).map_or(true, |m| m.permissions().readonly());
                if ro {
                    return Err(TreeError::ReadOnly);
                }
                Ok(WriteTarget::Attrs)
            }
            Entry::File(FileKind::Npy(id, _)) => {
                self.writable_array(*id)?;
                Ok(WriteTarget::Npy(*id))
            }
            Entry::File(FileKind::TableNpy(..) | FileKind::CTableNpy(_)) => {
                Err(TreeError::ReadOnly)
            }
            Entry::File(FileKind::Fixed(_) | FileKind::Sizes(..)) => Err(TreeError::MetadataFile),
        }
    }

    /// The most bytes chunk file `id` may hold: its chunk size for the last (or a new) chunk
    /// of a 1-D source (ctable columns included), else its stored size. Its callers have
    /// checked the source is writable ([`Tree::write_target`], at open for a handle).
    pub(crate) fn chunk_limit(&self, id: ChunkId) -> Result<usize, TreeError> {
        let live = self.live(id.array).ok_or(TreeError::ReadOnly)?;
        let array = live.get();
        let stored = if id.index < array.nchunks() {
            array
                .chunk_nbytes(id.index)
                .map_err(|source| TreeError::Container {
                    ino: self.inodes.chunk_ino(id),
                    source,
                })?
        } else {
            0
        };
        if id.index + 1 >= array.nchunks() && live.one_d() {
            Ok(array.chunksize().max(stored))
        } else {
            Ok(stored)
        }
    }

    /// Runs `f` on the buffer of chunk `id` (created from the stored chunk on first use) and
    /// the most bytes it may hold; marks it edited. When `f` fails on a buffer made for it
    /// (nothing edited yet), the buffer goes: issue 21, a write refused with EFBIG left an
    /// unedited copy of the chunk that held back following other writers for good and later
    /// showed (and became the base of) a version they had replaced.
    pub(crate) fn with_chunk_buffer<T>(
        &self,
        id: ChunkId,
        f: impl FnOnce(&mut Vec<u8>, usize) -> Result<T, TreeError>,
    ) -> Result<T, TreeError> {
        self.with_chunk_prefix(id, usize::MAX, f)
    }

    /// [`Tree::with_chunk_buffer`] for an edit that keeps at most the first `prefix` bytes
    /// of the chunk (a truncation): a spilled buffer is brought back only that far.
    fn with_chunk_prefix<T>(
        &self,
        id: ChunkId,
        prefix: usize,
        mut f: impl FnOnce(&mut Vec<u8>, usize) -> Result<T, TreeError>,
    ) -> Result<T, TreeError> {
        let limit = self.chunk_limit(id)?;
        let mut edits = self.edits.lock();
        // Around again only when the buffer went (committed, dropped) while an eviction pass
        // or a read-back had the lock released: each time, some other thread's change landed.
        loop {
            if !edits.has_chunk(id) {
                let seen = edits.stored_generation();
                drop(edits);
                let bytes = self.base_of(id)?;
                edits = self.edits.lock();
                if !edits.has_chunk(id) {
                    // Room within the budget first (past it, older buffers spill, with the
                    // lock released). The buffer is edited under the lock it is inserted
                    // with (`edit_in_memory` makes a fresh buffer's room locked): released
                    // in between, another writer's `make_room` could drop it (clean buffers
                    // go first) and the two writers could decode their chunks again and
                    // again, each dropping the other's.
                    pending::make_room(&mut edits, bytes.capacity(), id)
                        .map_err(|e| edits.spill_error(e))?;
                    // A commit while the lock was released (the base's read, the pass's
                    // spill I/O) may have stored this chunk anew: that base is stale.
                    if !edits.has_chunk(id) && edits.stored_generation() != seen {
                        continue;
                    }
                    if !edits.has_chunk(id) {
                        edits.insert_chunk(id, ChunkBuf::loaded(bytes));
                    }
                }
            }
            match pending::edit_in_memory(&mut edits, id, limit, prefix, f) {
                Err(back) => f = back,
                Ok(Ok(out)) => {
                    let c = edits.chunk_mut(id).ok_or(TreeError::NotFound)?;
                    c.state = BufState::Edited;
                    c.version += 1;
                    return Ok(out);
                }
                Ok(Err(e)) => {
                    if edits.chunk(id).is_some_and(|c| c.state == BufState::Clean) {
                        edits.remove_chunk(id);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Patches chunk `id` with `patches` (offset in the chunk, bytes) in place when its buffer
    /// is in the spill file and they all lie within it (no read back into memory: a pass
    /// that writes every chunk of a large array keeps spilled chunks spilled); `None` when
    /// that does not apply (then [`Tree::with_chunk_buffer`]).
    pub(crate) fn patch_spilled(
        &self,
        id: ChunkId,
        patches: &[(usize, &[u8])],
    ) -> Option<Result<(), TreeError>> {
        self.edits.lock().patch_spilled(id, patches)
    }

    /// What the pending chunk edits of the mount hold now: memory, its budget, what is
    /// spilled (`user.b2fs.edit_*` on the mount root).
    pub fn edit_stats(&self) -> EditStats {
        self.edits.lock().stats()
    }

    /// Tests: spills fail with `errno` (`None`: they work again), as when the spill
    /// directory's file system is full (ENOSPC) or failing (EIO).
    pub fn fail_spills(&self, errno: Option<i32>) {
        self.edits.lock().fail_spills(errno);
    }

    /// Tests: reads of spilled chunks (reads of the files, read-backs at a commit or a length
    /// change) fail with `errno` (`None`: they work again), as when the spill directory's
    /// disk fails.
    pub fn fail_spill_reads(&self, errno: Option<i32>) {
        self.edits.lock().fail_spill_reads(errno);
    }

    /// Tests: `hook` is called with each chunk an eviction pass is about to write to the spill
    /// file, on the writing thread, with the edits lock released (a test blocks it there to
    /// check what other threads can do meanwhile); `None` removes it.
    pub fn on_spill_write(&self, hook: Option<Arc<dyn Fn(ChunkId) + Send + Sync>>) {
        self.edits.lock().set_spill_hook(hook.map(SpillHook));
    }

    /// Makes the spill file of pending edits past the budget in `dir` (`spill_dir=`; the
    /// default is `$TMPDIR`, else `/tmp`), and the spool file of a commit past its memory
    /// bound ([`crate::commit::Committer::with_edit_budget`]). Takes effect while nothing is
    /// spilled.
    pub fn set_spill_dir(&self, dir: std::path::PathBuf) {
        self.edits.lock().set_spill_dir(dir.clone());
        let mut c = self.committer.lock();
        let memory = c.stats().memory;
        c.set_spool(memory, dir);
    }

    /// What commits held: their bound on compressed chunks in memory, the most one held,
    /// and what went to their spool files (`user.b2fs.commit_*` on the mount root).
    pub fn commit_stats(&self) -> crate::commit::CommitStats {
        *self.commit_stats.lock()
    }

    /// Tests: writes to a commit's spool file fail with errno `write`, reads back of it with
    /// `read` (0: they work again), as when the spill directory's disk is full or failing.
    pub fn fail_commit_spool(&self, write: i32, read: i32) {
        self.committer.lock().fail_spool(write, read);
    }

    /// Tests: when a contiguous frame's commit is undone, giving the file back its
    /// modification time fails with `errno` (0: it works again), as for a file of another
    /// owner on a mount that may write it.
    pub fn fail_time_reset(&self, errno: i32) {
        self.committer.lock().fail_time_reset(errno);
    }

    /// The stored bytes of chunk `id`, the base of its buffer. Decoded outside the edits
    /// lock; the first writer's copy wins. A version another writer replaced meanwhile (issue
    /// 12): follow the source, then decode the new one.
    pub(crate) fn base_of(&self, id: ChunkId) -> Result<Vec<u8>, TreeError> {
        let bytes = match self.reader.chunk(id) {
            Err(crate::container::ContainerError::Changed { .. }) => {
                self.follow_source();
                self.reader.chunk(id)
            }
            res => res,
        }
        .map_err(|source| match source {
            // Still replaced (another writer is mid-change, or the reload was held back):
            // the edit has no base of the current version, as a commit against stale
            // content has none: ESTALE, and a retry after the change applies.
            crate::container::ContainerError::Changed { .. } => TreeError::StaleBase {
                ino: self.inodes.chunk_ino(id),
                source,
            },
            source => TreeError::Container {
                ino: self.inodes.chunk_ino(id),
                source,
            },
        })?;
        Ok(bytes.to_vec())
    }

    /// The most bytes a scratch file in directory `parent` may hold: [`MAX_BUFFERED`], or
    /// a chunk object of the array when `parent` is in its Zarr chunk tree (zarr-python
    /// writes a whole chunk object into a `.partial` file there, then renames it over the
    /// object; its size is the chunk's, uncompressed), but never more than
    /// [`MAX_SCRATCH_BYTES`], what all scratch files may hold together: the object's size
    /// comes from the source's header (its chunk shape), which a hostile source makes as
    /// large as it likes, and a `truncate` of the `.partial` file to that size allocated it
    /// (past the cap, EFBIG; a larger chunk object can still be written in place).
    fn scratch_limit(&self, parent: u64) -> usize {
        let object = match self.entry(parent) {
            Ok(Entry::Zarr(super::zarr::ZNode::Chunks { array, .. })) => {
                self.zarr_geom(array, None).ok().map(|g| g.object_len)
            }
            _ => None,
        };
        object.map_or(MAX_BUFFERED, |n| {
            usize::try_from(n)
                .unwrap_or(usize::MAX)
                .clamp(MAX_BUFFERED, MAX_SCRATCH_BYTES)
        })
    }

    /// Runs `f` on the buffer of file `ino` (what `target` says it is), which it will leave
    /// `new_len` bytes long (a scratch file must have room for that among the mount's).
    fn with_buffer<T>(
        &self,
        ino: u64,
        target: WriteTarget,
        new_len: usize,
        f: impl FnOnce(&mut Vec<u8>, usize) -> Result<T, TreeError>,
    ) -> Result<T, TreeError> {
        match target {
            WriteTarget::Scratch => {
                let parent = self.scratch.lock().files.get(&ino).map(|f| f.parent);
                let limit = self.scratch_limit(parent.ok_or(TreeError::NotFound)?);
                // Room held by files no name reaches (a member took theirs) is given back.
                if !self.scratch.lock().fits(ino, new_len, limit) {
                    self.drop_hidden_scratch(None);
                }
                let mut s = self.scratch.lock();
                s.room(ino, new_len, limit)?;
                let file = s.files.get_mut(&ino).ok_or(TreeError::NotFound)?;
                file.mtime = std::time::SystemTime::now();
                let out = f(&mut file.data, limit);
                s.fit(ino, limit);
                out
            }
            WriteTarget::Attrs => {
                let stored = match self.entry(ino)? {
                    Entry::File(FileKind::Attrs(_, stored)) => super::read::generated(stored)?,
                    _ => return Err(TreeError::MetadataFile),
                };
                let mut edits = self.edits.lock();
                let a = edits.attrs.entry(ino).or_insert_with(|| AttrsBuf {
                    data: stored.to_vec(),
                    dirty: false,
                    version: 0,
                    stale: false,
                });
                let out = f(&mut a.data, MAX_BUFFERED)?;
                a.dirty = true;
                a.version += 1;
                Ok(out)
            }
            WriteTarget::Chunk(id) => self.with_chunk_buffer(id, f),
            WriteTarget::Npy(_) => Err(TreeError::InvalidArgument("array.npy is not one buffer")),
            WriteTarget::Zarr(_) => Err(TreeError::InvalidArgument(
                "a Zarr chunk object is not one buffer",
            )),
        }
    }

    /// Replaces the content of `__attrs__` file `ino` with `data` and commits it at once (a
    /// temp file renamed over it, a Zarr attribute edit). A failed commit leaves no pending
    /// edit of the file behind.
    ///
    /// # Errors
    /// As [`Tree::write_target`]; the buffer's bound; commit errors.
    pub(crate) fn replace_attrs(&self, ino: u64, data: Vec<u8>) -> Result<(), TreeError> {
        self.write_target(ino)?;
        self.with_buffer(ino, WriteTarget::Attrs, data.len(), |buf, _| {
            *buf = data;
            Ok(())
        })?;
        let committed = self.commit(ino, super::commit::Reason::Durable);
        if committed.is_err() {
            self.edits.lock().attrs.remove(&ino);
        }
        committed
    }

    /// Writes `data` at `offset` of file `ino` through handle `fh`: patches the buffers it
    /// covers (committed on [`Tree::fsync`], [`Tree::flush`] or [`Tree::release`]). Returns
    /// the number of bytes written.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`] (read-only tree or source), [`TreeError::MetadataFile`],
    /// [`TreeError::TooBig`] past what the file may hold, [`TreeError::Refused`] for a write
    /// that changes `array.npy`'s header, [`TreeError::BadHandle`].
    pub fn write(&self, ino: u64, fh: u64, offset: u64, data: &[u8]) -> Result<u32, TreeError> {
        // What the handle writes was decided, and the source found writable, at open.
        let target = self
            .handles
            .write_target(fh, ino)
            .ok_or(TreeError::BadHandle(fh))?;
        // The file may have gone since (the last chunk removed): ENOENT, as at open.
        self.entry(ino)?;
        if let WriteTarget::Npy(array) = target {
            self.npy_write(ino, array, offset, data)?;
            return Ok(data.len() as u32);
        }
        if let WriteTarget::Zarr(id) = target {
            self.zarr_write(ino, id, offset, data)?;
            return Ok(data.len() as u32);
        }
        let start = usize::try_from(offset).map_err(|_| TreeError::TooBig("offset".into()))?;
        let end = start
            .checked_add(data.len())
            .ok_or_else(|| TreeError::TooBig("offset".into()))?;
        if let WriteTarget::Chunk(id) = target
            && let Some(done) = self.patch_spilled(id, &[(start, data)])
        {
            return done.map(|()| data.len() as u32);
        }
        self.with_buffer(ino, target, end, |buf, limit| {
            if end > limit {
                return Err(TreeError::TooBig(format!(
                    "writing up to byte {end}: this file holds at most {limit} bytes"
                )));
            }
            if buf.len() < end {
                // Doubling as a Vec does, but never past what the file may hold (a 64 MiB
                // scratch file written in small pieces reserved 128 MiB).
                if end > buf.capacity() {
                    let want = end.max(buf.capacity().saturating_mul(2)).min(limit);
                    buf.reserve_exact(want - buf.len());
                }
                buf.resize(end, 0);
            }
            buf[start..end].copy_from_slice(data);
            Ok(data.len() as u32)
        })
    }

    /// Sets the size of file `ino` (`truncate(2)`, `ftruncate(2)`, `O_TRUNC`). `__attrs__`:
    /// any size. A chunk file may grow (zero-filled) up to its chunk size when it is the last
    /// chunk of a 1-D source, and may be shrunk to be rewritten; at commit a chunk must have
    /// the size its slot needs (only the last chunk of a 1-D source may change size, and size
    /// 0 removes it). `array.npy` keeps its size. Without a handle open for writing
    /// (`truncate(2)`) the change is committed at once.
    ///
    /// # Errors
    /// As [`Tree::write`]; commit errors as [`Tree::flush`] (the buffer is then dropped).
    pub fn set_size(&self, ino: u64, size: u64) -> Result<(), TreeError> {
        let target = self.write_target(ino)?;
        if let WriteTarget::Npy(array) = target {
            return self.npy_set_size(array, size);
        }
        if let WriteTarget::Zarr(id) = target {
            return self.zarr_set_size(ino, id, size);
        }
        let size = usize::try_from(size).map_err(|_| TreeError::TooBig("size".into()))?;
        let resize = |buf: &mut Vec<u8>, limit| {
            if size > limit {
                return Err(TreeError::TooBig(format!(
                    "size {size}: this file holds at most {limit} bytes"
                )));
            }
            buf.resize(size, 0);
            Ok(())
        };
        match target {
            // A spilled chunk is cut in place, or brought back only as far as it is kept.
            WriteTarget::Chunk(id) => {
                if !self.edits.lock().truncate_spilled(id, size) {
                    self.with_chunk_prefix(id, size, resize)?;
                }
            }
            _ => self.with_buffer(ino, target, size, resize)?,
        }
        if self.handles.other_writer(ino, None) {
            return Ok(());
        }
        let res = self.commit(ino, super::commit::Reason::Durable);
        if res.is_err() {
            self.drop_pending(ino);
        }
        res
    }

    /// Creates `name` in directory `parent` and opens it for writing, for this process: only the next chunk
    /// file (`data/<nchunks>.bin`) of a 1-D source (ctable columns included: the append
    /// grows every column), which becomes an append when committed (nothing is appended if
    /// it stays empty), or a scratch file in the root or another directory with an
    /// `__attrs__` file (a leaf's or a group's). Returns its attributes and a handle.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotPermitted`] for any other name or place;
    /// [`TreeError::Refused`] for an N-dim array.
    pub fn create(&self, parent: u64, name: &str) -> Result<(super::Attr, u64), TreeError> {
        self.create_by(parent, name, super::Pid::current())
    }

    /// [`Tree::create`] for process `by` (the handle's opener, as [`Tree::open_by`]).
    ///
    /// # Errors
    /// As [`Tree::create`].
    pub fn create_by(
        &self,
        parent: u64,
        name: &str,
        by: super::Pid,
    ) -> Result<(super::Attr, u64), TreeError> {
        if name.len() > super::NAME_MAX {
            return Err(TreeError::NameTooLong);
        }
        let entry = self.entry(parent)?;
        if let Entry::Zarr(z) = entry {
            return self.zarr_create(parent, z, name, by);
        }
        if let Entry::Zarr2(_) = entry {
            return Err(TreeError::ReadOnly);
        }
        let Entry::Dir(_, data) = entry else {
            return Err(TreeError::NotADirectory(parent));
        };
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        let Some(array) = data else {
            if self.takes_scratch(parent) {
                return self.create_scratch(parent, name, by);
            }
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: only data/<nchunks>.bin, and scratch files in a directory \
                 with an __attrs__ file, can be created"
            )));
        };
        let live = self.writable_array(array)?;
        let n = live.get().nchunks();
        if dir::parse_chunk_name(name) != Some(n) {
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: the only new name is {}",
                dir::chunk_name(n)
            )));
        }
        if !live.one_d() {
            return Err(TreeError::Refused(
                "appending a chunk to an N-dim array (only 1-D sources can grow)".into(),
            ));
        }
        if n as u64 >= self.inodes.capacity(array) {
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: no inode numbers left for more chunks of this array"
            )));
        }
        let id = ChunkId::new(array, n);
        {
            let mut edits = self.edits.lock();
            if !edits.has_chunk(id) {
                edits.insert_chunk(id, ChunkBuf::creating());
            }
        }
        let ino = self.inodes.chunk_ino(id);
        let fh = self.open_by(ino, libc::O_WRONLY, by)?;
        Ok((self.getattr(ino)?, fh))
    }

    /// Removes `name` from `parent`: only the last chunk file of a 1-D source (committed at
    /// once as a truncation), a chunk file still being created, or a scratch file.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotFound`]; [`TreeError::NotPermitted`] for
    /// anything else; commit errors as [`Tree::flush`].
    pub fn unlink(&self, parent: u64, name: &str) -> Result<(), TreeError> {
        let ino = self.lookup(parent, name)?.ino;
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        let id = match self.entry(ino)? {
            Entry::Scratch => {
                let mut s = self.scratch.lock();
                s.files.remove(&ino);
                s.touch();
                return Ok(());
            }
            Entry::Chunk(id) => id,
            Entry::Zarr(z) => return self.zarr_unlink(ino, z),
            Entry::Zarr2(_) => return Err(TreeError::ReadOnly),
            _ => {
                return Err(TreeError::NotPermitted(format!(
                    "removing {name:?}: only the last chunk file can be removed"
                )));
            }
        };
        let live = self.writable_array(id.array)?;
        {
            let mut edits = self.edits.lock();
            if edits.chunk(id).is_some_and(|c| c.creating) {
                edits.remove_chunk(id);
                return Ok(());
            }
        }
        if id.index + 1 != live.get().nchunks() || !live.one_d() {
            return Err(TreeError::NotPermitted(format!(
                "removing {name:?}: only the last chunk of a 1-D source can be removed"
            )));
        }
        let mut committer = self.committer.lock();
        self.commit_chunk_bufs(
            ino,
            id.array,
            &[(id.index, ChunkBuf::removal())],
            &mut committer,
        )?;
        self.edits.lock().remove_chunk(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
