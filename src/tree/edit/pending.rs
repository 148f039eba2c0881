//! The pending edits of a mount ([`Edits`]): chunk buffers keyed by [`ChunkId`], `__attrs__`
//! buffers keyed by inode, and the bound on the memory the chunk buffers hold.
//!
//! Issue: a `numpy.memmap(mode='r+')` of `array.npy` that writes one byte into every chunk
//! before its `flush`, or `dd conv=notrunc` over a whole array, buffers every chunk of the
//! array decoded: 50 GiB of pending edits were 50 GiB of the daemon's memory, and the OOM
//! kill that followed lost every one of them and took the mount down. The commit rules (one
//! version per open, `commit.rs`) need the edits kept until the commit; memory does not.
//!
//! The bound, as a storage engineer's page cache does it: the in-memory chunk buffers hold at
//! most `budget` bytes (`edit_budget=`, default [`DEFAULT_EDIT_BUDGET`]; their allocations,
//! not their lengths). A buffer that needs room (a chunk loaded for its first edit, a chunk
//! growing, a spilled chunk brought back) first makes it by evicting the least recently
//! edited buffers: a clean one (loaded, not changed) is dropped, as it can be decoded again
//! from the source; an edited one is written to the spill file (`spill.rs`) and served from
//! there. At least the buffer being edited stays in memory, so a chunk larger than the budget
//! can still be edited (the bound is then one chunk).
//!
//! A spilled chunk stays in the file until its commit or its drop: reads of it (the chunk
//! file, `array.npy`, the Zarr view) read the file; a write within its length patches the file
//! in place ([`Edits::patch_spilled`]), so a pass that writes every chunk once writes each
//! to the spill file at most once; a truncation cuts it in place ([`Edits::truncate_spilled`]);
//! growth brings it back into memory first (a truncation the map cannot do in place brings
//! back only the prefix it keeps). A commit reads spilled chunks back one at a time while
//! compressing ([`crate::commit::ChunkBytes`]).
//!
//! Why spill rather than commit early or refuse: committing an `array.npy` edit in pieces
//! would break "one version per open" (a crash would leave half of it), and refusing writes
//! past a bound would make a plain `dd` of a large array fail. Spilled bytes are exactly as
//! uncommitted as bytes in memory: both vanish with the daemon, neither touches the source.
//! When the spill file cannot be written (`ENOSPC`, `EIO`), the write that needed the room
//! fails with that errno and every earlier edit is still there, in memory or in the file.
//!
//! Commits and writers: a commit takes its chunks as shared references (`Arc`) and compresses
//! them outside the edits lock. A write to a buffer a commit holds copies it first (a chunk in
//! memory is copied on write; a spilled one is brought back into memory), so the commit
//! stores the version it took and the write is not lost. Such a copy, and the decoded copy
//! of a chunk loaded outside the lock before room is made for it, are the only bytes outside
//! the budget: one chunk per writing thread; and a buffer spilled while a commit holds it
//! stays in memory until that commit ends (it compresses what it took).
//!
//! ## The spill file's I/O is outside the edits lock
//!
//! The edits lock guards the map and every change of a buffer's state, and every read of an
//! edited chunk on a writable mount takes it; a spill writes whole chunks, and a spilled
//! chunk is read back whole at a commit or a length change. None of that I/O is done with the
//! lock held (`evict.rs`): each holder takes what it needs under the lock (an `Arc` of the
//! bytes or of the slot), drops the lock for the I/O, and takes it again to act on the
//! result only if the buffer is still what it took. A buffer is in one of three states:
//!
//! - `Mem`: bytes in memory, in the eviction order. Readers copy them under the lock. A write
//!   or a truncation changes them in place (a copy first when another holder has them). A
//!   commit takes an `Arc` of them. A drop frees them. An eviction pass drops a clean one and
//!   marks an edited one `Spilling`.
//! - `Spilling`: bytes in memory that one pass is writing to a slot reserved for them, with
//!   the lock released; out of the eviction order. Readers copy the memory, as for `Mem`: it
//!   is what counts. A write or a truncation takes the buffer back to `Mem` (a copy: the pass
//!   holds the bytes), and the pass discards its slot when it ends. A commit takes an `Arc` of
//!   the memory and stores that. A drop (a commit done, a failed last close) frees it, and the
//!   pass discards its slot. A second pass skips it (its memory counts as freed already).
//! - `Spilled`: a slot of the spill file. Readers take an `Arc` of the slot under the lock,
//!   read with the lock released and give it back under it: while anyone besides the map
//!   holds a slot, nobody changes its bytes. A write within its length patches it in place,
//!   and a truncation cuts it in place, when the map alone holds the slot; otherwise, and for
//!   growth, the writer brings it back: it takes an `Arc`, reads (only the prefix a truncation
//!   keeps) with the lock released, and switches the buffer to `Mem` only if the same slot is
//!   still there (else it looks again). A commit takes an `Arc` of the slot and reads it back
//!   outside the lock. A drop gives the slot back (its region is freed by its last holder).
//!   Passes skip it.
//!
//! An eviction pass (`evict::make_room`): under the lock, it picks the least recently edited
//! buffers (clean ones are dropped at once, edited ones marked `Spilling` with a ticket and
//! given a reserved slot); lock released, it writes each to its slot; under the lock again,
//! each buffer still `Spilling` with its ticket becomes `Spilled` (its memory freed), and any
//! other (taken back by a writer, dropped, committed and dropped, spilled again by another
//! pass) gives the pass's slot back. A write that fails puts the buffer back in memory at its
//! place in the eviction order and fails the write that needed the room. So readers of other
//! chunks, and of the chunk being spilled (its memory is still authoritative), never wait for
//! the spill file, and a write to a buffer being spilled is never lost: it lands in memory and
//! the pass's copy is discarded. Buffers being spilled still count in `memory` but not against
//! the room a second pass makes (`in_flight`), so memory passes the budget by at most the
//! spills in flight (each pass writes what its writer needs) until they finish. A write that
//! takes back a buffer being spilled copies it (the pass still holds the bytes it writes):
//! until that pass finishes, its copy is allocated but counted in neither `memory` nor
//! `in_flight`, so the process holds up to one more chunk per such write than `memory` says.
//!
//! Patches of a spilled chunk ([`Edits::patch_spilled`], a write within its length: one
//! FUSE write, at most 1 MiB) are still written with the lock held, as a change of the
//! slot's bytes no holder may see half-made.
//!
//! A buffer's life:
//!
//! ```text
//!   (none) --first write/truncate--> Edited --commit ok, no newer write--> (none)
//!   (none) --create data/<n>.bin---> Edited + creating (an append when committed)
//!   Edited --O_TRUNC open----------> EmptiedByTrunc (a flush does not commit it: a shell's
//!                                    `>` closes a duplicate descriptor before writing)
//!   any    --refused commit, failed last close-> (none), the file's kernel pages marked
//!                                    stale (a failed fsync or close keeps it: EIO, a spill
//!                                    read-back error included, and the next fsync retries)
//!   any    --another writer's change followed-> stale: its commit fails with ESTALE
//!   in memory --past the budget----> spilling --written--> spilled (same state)
//!   spilling --edited, or its write failed--> in memory (that spill is discarded)
//!   spilled --growth-----------------> in memory (a truncation cuts it in place)
//! ```

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use super::spill::{Slot, SpillFile};
use crate::reader::ChunkId;
use crate::tree::TreeError;

mod evict;
pub(crate) use evict::{edit_in_memory, make_room};

/// The default bound on the memory of pending chunk edits: 1 GiB (the daemon lowers it to a
/// quarter of the machine's memory on a smaller machine).
pub const DEFAULT_EDIT_BUDGET: usize = 1 << 30;

/// Where a chunk buffer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BufState {
    /// Loaded, not changed.
    Clean,
    /// Changed: to be committed.
    Edited,
    /// Emptied by an `O_TRUNC` open and not written since: only fsync and the last close
    /// commit that.
    EmptiedByTrunc,
}

/// Where a chunk buffer's bytes are.
#[derive(Debug, Clone)]
enum Body {
    /// In memory (shared with a commit in progress, which copies on write).
    Mem(Arc<Vec<u8>>),
    /// In memory, and being written to the spill file by the eviction pass holding this
    /// ticket with the lock released: the memory is what counts (`evict.rs`).
    Spilling(Arc<Vec<u8>>, u64),
    /// In the spill file.
    Spilled(Arc<Slot>),
}

/// The pending content of one chunk.
#[derive(Debug, Clone)]
pub(crate) struct ChunkBuf {
    /// The whole decompressed chunk as it should become.
    body: Body,
    pub(crate) state: BufState,
    /// A chunk being created (`data/<nchunks>.bin`), committed as an append.
    pub(crate) creating: bool,
    /// Bumped by every change, so a commit only cleans what it stored.
    pub(crate) version: u64,
    /// Made against a version another writer has since replaced (the mount followed that
    /// change while this edit was buffered): its commit fails with ESTALE and drops it.
    pub(crate) stale: bool,
    /// When it was last edited (its key in [`Edits`]' eviction order), while in memory.
    used: u64,
}

impl ChunkBuf {
    fn with(data: Vec<u8>, state: BufState, creating: bool) -> ChunkBuf {
        ChunkBuf {
            body: Body::Mem(Arc::new(data)),
            state,
            creating,
            version: 0,
            stale: false,
            used: 0,
        }
    }

    /// A buffer holding the stored chunk.
    pub(crate) fn loaded(data: Vec<u8>) -> ChunkBuf {
        ChunkBuf::with(data, BufState::Clean, false)
    }

    /// An empty buffer for a chunk file being created.
    pub(crate) fn creating() -> ChunkBuf {
        ChunkBuf::with(Vec::new(), BufState::Edited, true)
    }

    /// The edit that removes the last chunk.
    pub(crate) fn removal() -> ChunkBuf {
        ChunkBuf::with(Vec::new(), BufState::Edited, false)
    }

    /// Whether it has something to commit.
    pub(crate) fn dirty(&self) -> bool {
        self.state != BufState::Clean
    }

    /// Its length.
    pub(crate) fn len(&self) -> usize {
        match &self.body {
            Body::Mem(v) | Body::Spilling(v, _) => v.len(),
            Body::Spilled(s) => s.len(),
        }
    }

    /// Whether it is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether its bytes are in the spill file.
    pub(crate) fn spilled(&self) -> bool {
        matches!(self.body, Body::Spilled(_))
    }

    /// Copies bytes `[src, src + out.len())` into `out`: `Ok(false)` when they are not all
    /// within the buffer.
    fn copy_to(&self, src: usize, out: &mut [u8]) -> io::Result<bool> {
        let Some(end) = src.checked_add(out.len()).filter(|&e| e <= self.len()) else {
            return Ok(false);
        };
        match &self.body {
            Body::Mem(v) | Body::Spilling(v, _) => out.copy_from_slice(&v[src..end]),
            Body::Spilled(s) => s.read_at(src, out)?,
        }
        Ok(true)
    }
}

impl crate::commit::ChunkBytes for ChunkBuf {
    fn len(&self) -> usize {
        ChunkBuf::len(self)
    }
    fn bytes(&self) -> io::Result<std::borrow::Cow<'_, [u8]>> {
        match &self.body {
            Body::Mem(v) | Body::Spilling(v, _) => Ok(std::borrow::Cow::Borrowed(v.as_slice())),
            Body::Spilled(s) => s.load().map(std::borrow::Cow::Owned),
        }
    }
}

/// The content of an `__attrs__` file being edited. It lives only while it differs from what
/// is stored: a commit or a refusal removes it, so the file shows its stored content again,
/// which a reload after another writer's change renders anew (issue 21: a buffer kept after
/// its commit showed the mount's last text over that writer's attributes).
#[derive(Debug, Clone)]
pub(crate) struct AttrsBuf {
    /// The bytes readers see.
    pub(crate) data: Vec<u8>,
    /// Whether they differ from what is stored.
    pub(crate) dirty: bool,
    /// Bumped by every change.
    pub(crate) version: u64,
    /// Made against attributes another writer has since replaced (as [`ChunkBuf::stale`]).
    pub(crate) stale: bool,
}

/// What the pending chunk edits hold now ([`crate::tree::Tree::edit_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EditStats {
    /// The bound on `memory` (`edit_budget=`).
    pub budget: usize,
    /// Bytes the chunk buffers in memory hold now.
    pub memory: usize,
    /// The most `memory` has been since the mount started.
    pub peak_memory: usize,
    /// Chunk buffers in the spill file now.
    pub spilled_chunks: usize,
    /// Bytes of the spill file in use now (page-rounded).
    pub spilled_bytes: u64,
    /// Buffers written to the spill file so far.
    pub spills: u64,
    /// Clean buffers dropped to make room so far.
    pub dropped_clean: u64,
    /// Reads of the spill file so far (each one `pread`: a commit's read-back of a chunk, a
    /// read of a spilled chunk's span).
    pub spill_reads: u64,
}

/// Tests: called with each chunk an eviction pass is about to write to the spill file, with
/// the edits lock released ([`crate::tree::Tree::on_spill_write`]).
#[derive(Clone)]
pub(crate) struct SpillHook(pub(crate) Arc<dyn Fn(ChunkId) + Send + Sync>);

impl std::fmt::Debug for SpillHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpillHook")
    }
}

/// All pending edits.
#[derive(Debug)]
pub(crate) struct Edits {
    chunks: HashMap<ChunkId, ChunkBuf>,
    pub(crate) attrs: HashMap<u64, AttrsBuf>,
    /// The buffers in memory by when they were last edited (least recent first).
    lru: BTreeMap<u64, ChunkId>,
    tick: u64,
    /// Bytes the buffers in memory hold (their allocations), those being spilled included.
    memory: usize,
    /// Bytes of `memory` that buffers being spilled hold (freed when their passes finish).
    in_flight: usize,
    budget: usize,
    spill: SpillFile,
    stats: EditStats,
    hook: Option<SpillHook>,
    /// Bumped (under the lock) by every commit that changed stored chunks: a base read with
    /// the lock released is stale when this moved meanwhile.
    stored: u64,
}

impl Default for Edits {
    fn default() -> Self {
        Edits::new(DEFAULT_EDIT_BUDGET, std::env::temp_dir())
    }
}

impl Edits {
    /// No edits; chunk buffers in memory bounded by `budget` bytes, spilled to a file in
    /// `spill_dir` past it.
    pub(crate) fn new(budget: usize, spill_dir: PathBuf) -> Edits {
        Edits {
            chunks: HashMap::new(),
            attrs: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            stored: 0,
            memory: 0,
            in_flight: 0,
            budget,
            spill: SpillFile::new(spill_dir),
            stats: EditStats::default(),
            hook: None,
        }
    }

    /// Moves the spill file to `dir` (only before anything was spilled: no-op after).
    pub(crate) fn set_spill_dir(&mut self, dir: PathBuf) {
        if self.spill.used() == 0 {
            self.spill = SpillFile::new(dir);
        }
    }

    /// [`spill_error`] for this mount's spill directory.
    pub(crate) fn spill_error(&self, e: io::Error) -> TreeError {
        spill_error(self.spill.dir(), e)
    }

    /// Tests: spills fail with `errno` (`None`: they work again).
    pub(crate) fn fail_spills(&mut self, errno: Option<i32>) {
        self.spill.fail_with(errno);
    }

    /// Tests: reads of spilled chunks fail with `errno` (`None`: they work again).
    pub(crate) fn fail_spill_reads(&mut self, errno: Option<i32>) {
        self.spill.fail_reads_with(errno);
    }

    /// Tests: `hook` is called with each chunk an eviction pass writes, before it writes it.
    pub(crate) fn set_spill_hook(&mut self, hook: Option<SpillHook>) {
        self.hook = hook;
    }

    /// What the chunk buffers hold now.
    pub(crate) fn stats(&self) -> EditStats {
        EditStats {
            budget: self.budget,
            memory: self.memory,
            spilled_chunks: self.chunks.values().filter(|c| c.spilled()).count(),
            spilled_bytes: self.spill.used(),
            spill_reads: self.spill.reads(),
            ..self.stats
        }
    }

    /// The buffer of chunk `id`.
    pub(crate) fn chunk(&self, id: ChunkId) -> Option<&ChunkBuf> {
        self.chunks.get(&id)
    }

    /// The buffer of chunk `id`, to change its state (not its bytes).
    pub(crate) fn chunk_mut(&mut self, id: ChunkId) -> Option<&mut ChunkBuf> {
        self.chunks.get_mut(&id)
    }

    /// Whether chunk `id` has a buffer.
    /// How many commits have changed stored chunks (see [`Edits::note_stored`]).
    pub(crate) fn stored_generation(&self) -> u64 {
        self.stored
    }

    /// A commit changed stored chunks (or found them replaced by another writer).
    pub(crate) fn note_stored(&mut self) {
        self.stored = self.stored.wrapping_add(1);
    }

    pub(crate) fn has_chunk(&self, id: ChunkId) -> bool {
        self.chunks.contains_key(&id)
    }

    /// The chunks that have buffers.
    pub(crate) fn chunk_ids(&self) -> impl Iterator<Item = ChunkId> + '_ {
        self.chunks.keys().copied()
    }

    /// Whether any chunk has a buffer.
    pub(crate) fn has_chunks(&self) -> bool {
        !self.chunks.is_empty()
    }

    /// Marks every buffer as made against a version another writer replaced.
    pub(crate) fn mark_stale(&mut self) {
        self.chunks.values_mut().for_each(|c| c.stale = true);
        self.attrs.values_mut().for_each(|a| a.stale = true);
    }

    /// Adds `buf` as the buffer of `id` (replacing any). Its room was made by the caller
    /// (`evict::make_room`).
    pub(crate) fn insert_chunk(&mut self, id: ChunkId, mut buf: ChunkBuf) {
        self.remove_chunk(id);
        if let Body::Mem(v) = &buf.body {
            self.memory += v.capacity();
            self.stats.peak_memory = self.stats.peak_memory.max(self.memory);
            self.tick += 1;
            buf.used = self.tick;
            self.lru.insert(self.tick, id);
        }
        self.chunks.insert(id, buf);
    }

    /// Drops the buffer of `id`; returns whether there was one.
    pub(crate) fn remove_chunk(&mut self, id: ChunkId) -> bool {
        let Some(buf) = self.chunks.remove(&id) else {
            return false;
        };
        match buf.body {
            Body::Mem(v) => {
                self.memory -= v.capacity();
                self.lru.remove(&buf.used);
            }
            // Its pass finds it gone and gives its slot back.
            Body::Spilling(v, _) => {
                self.memory -= v.capacity();
                self.in_flight -= v.capacity();
            }
            Body::Spilled(slot) => self.spill.release(slot),
        }
        true
    }

    /// A commit is done with `bufs` (its shared references to buffers): spilled regions no
    /// buffer uses any more are given back.
    pub(crate) fn release(&mut self, bufs: Vec<ChunkBuf>) {
        for b in bufs {
            if let Body::Spilled(slot) = b.body {
                self.spill.release(slot);
            }
        }
    }

    /// The slot of chunk `id` when its buffer is spilled: a holder, to read outside the lock
    /// (while it holds it nobody changes its bytes); give it back with
    /// [`Edits::release_slot`].
    pub(crate) fn spilled_slot(&self, id: ChunkId) -> Option<Arc<Slot>> {
        match &self.chunks.get(&id)?.body {
            Body::Spilled(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// Gives back a holder of a slot ([`Edits::spilled_slot`]).
    pub(crate) fn release_slot(&mut self, slot: Arc<Slot>) {
        self.spill.release(slot);
    }

    /// Bytes `[offset, offset + size)` of chunk `id`'s buffer (cut at its end), if it has one.
    pub(crate) fn chunk_window(
        &self,
        id: ChunkId,
        offset: u64,
        size: u32,
    ) -> Option<io::Result<Vec<u8>>> {
        let c = self.chunks.get(&id)?;
        let w = crate::reader::window(c.len(), offset, size);
        let mut out = vec![0; w.len()];
        Some(c.copy_to(w.start, &mut out).map(|_| out))
    }

    /// Copies bytes `[src, src + dst.len())` of chunk `id`'s buffer into `dst`: `None` when it
    /// has none, `Some(Ok(false))` when the range is not all within it.
    pub(crate) fn copy_chunk(
        &self,
        id: ChunkId,
        src: usize,
        dst: &mut [u8],
    ) -> Option<io::Result<bool>> {
        Some(self.chunks.get(&id)?.copy_to(src, dst))
    }

    /// The size of chunk `id`'s buffer, if it has one.
    pub(crate) fn chunk_len(&self, id: ChunkId) -> Option<usize> {
        self.chunks.get(&id).map(ChunkBuf::len)
    }

    /// Bytes of the `__attrs__` buffer of `ino`, if it has one.
    pub(crate) fn attrs_window(&self, ino: u64, offset: u64, size: u32) -> Option<Vec<u8>> {
        let d = &self.attrs.get(&ino)?.data;
        Some(d[crate::reader::window(d.len(), offset, size)].to_vec())
    }

    /// The size of the `__attrs__` buffer of `ino`, if it has one.
    pub(crate) fn attrs_len(&self, ino: u64) -> Option<usize> {
        self.attrs.get(&ino).map(|a| a.data.len())
    }

    /// Marks the buffer of `id` as emptied by an `O_TRUNC` open.
    pub(crate) fn emptied_by_trunc(&mut self, id: Option<ChunkId>) {
        if let Some(c) = id.and_then(|id| self.chunks.get_mut(&id)) {
            c.state = BufState::EmptiedByTrunc;
        }
    }

    /// Drops the buffer of a chunk file being created that is still empty.
    pub(crate) fn drop_empty_creation(&mut self, id: Option<ChunkId>) {
        if let Some(id) = id
            && self
                .chunks
                .get(&id)
                .is_some_and(|c| c.creating && c.is_empty())
        {
            self.remove_chunk(id);
        }
    }

    /// Patches the spilled buffer of chunk `id` in place with `patches` (offset in the chunk,
    /// bytes), each within its length, and marks it edited: `None` (nothing done) when it is
    /// not spilled, a commit holds it, or a patch is out of its range.
    pub(crate) fn patch_spilled(
        &mut self,
        id: ChunkId,
        patches: &[(usize, &[u8])],
    ) -> Option<Result<(), TreeError>> {
        let buf = self.chunks.get_mut(&id)?;
        let Body::Spilled(slot) = &buf.body else {
            return None;
        };
        let fits =
            |&(at, d): &(usize, &[u8])| at.checked_add(d.len()).is_some_and(|e| e <= slot.len());
        if Arc::strong_count(slot) > 1 || !patches.iter().all(fits) {
            return None;
        }
        for &(at, d) in patches {
            if let Err(e) = self.spill.write_at(slot, at, d) {
                return Some(Err(spill_error(self.spill.dir(), e)));
            }
        }
        buf.state = BufState::Edited;
        buf.version += 1;
        Some(Ok(()))
    }

    /// Cuts the spilled buffer of chunk `id` to `len` bytes in place (nothing read or
    /// written) and marks it edited: `false` (nothing done) when it is not spilled, another
    /// holder has its slot (a commit, a reader), or `len` is longer than it is.
    pub(crate) fn truncate_spilled(&mut self, id: ChunkId, len: usize) -> bool {
        let Some(buf) = self.chunks.get_mut(&id) else {
            return false;
        };
        let Body::Spilled(slot) = &mut buf.body else {
            return false;
        };
        if len > slot.len() {
            return false;
        }
        let Some(slot) = Arc::get_mut(slot) else {
            return false;
        };
        slot.shrink(len);
        buf.state = BufState::Edited;
        buf.version += 1;
        true
    }
}

/// The answer to a write whose buffers could not be spilled or read back: ENOSPC (and
/// EDQUOT) as the file system said, anything else EIO; logged with the directory.
pub(crate) fn spill_error(dir: &std::path::Path, e: io::Error) -> TreeError {
    let why = format!(
        "pending edits past the mount's edit_budget: the spill file in {} failed: {e}",
        dir.display()
    );
    log::warn!("{why}");
    let errno = match e.raw_os_error() {
        Some(n @ (libc::ENOSPC | libc::EDQUOT)) => n,
        _ => libc::EIO,
    };
    TreeError::Spill { errno, why }
}

#[cfg(test)]
mod tests;
