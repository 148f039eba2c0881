//! `array.npy` and `table.npy`: an array (or a ctable's rows) as one NPY file, its bytes
//! assembled from the decoded chunks they live in, through the reader's caches; writes split
//! into edits of the same chunk buffers `data/N.bin` edits.
//!
//! Geometry is the container layer's ([`crate::container::npy`]): a byte window of the data
//! part becomes runs `(chunk, offset in the decoded chunk, length, offset in the window)`.
//!
//! Subtleties:
//! - **Small windows** (a page fault of an `mmap` reader, a seek-and-read): each run is read
//!   through the reader's small-read path, which decodes only the block it falls in and keeps
//!   it. **Large or sequential windows** take whole chunks from the cache, each once per read.
//!   Either way the runs are assembled by the reader ([`crate::reader::ChunkReader::gather`]);
//!   this module adds the edit buffers and picks the path from the handle's
//!   [`ReadHint::scan`].
//! - **Prefetch by slab.** A scan in file order of an N-dim array needs, for every item row,
//!   all the chunks of one row of the chunk grid (a slab): the read asks for the next slab's
//!   chunks, no more than the cache holds beside the current slab.
//! - **One read, one chunk version.** A window is assembled under no lock; an edit buffer, when
//!   a chunk has one, is copied under the edits lock, so the file always shows what the chunk
//!   files show.
//! - **Writes** patch chunk buffers; the header may be rewritten only with identical bytes and
//!   the size never changes (numpy's `open_memmap(mode='r+')` writes neither).

use std::sync::Arc;

use super::handle::Pinned;
use super::layout::{FileKind, NodeKind};
use super::{Entry, Tree, TreeError};
use crate::container::ndim::Run;
use crate::container::npy::{Npy, TableNpy};
use crate::reader::{ArrayId, ChunkId, ChunkStore, Pieces, ReadData, ReadHint};
pub use faults::Leads;
use faults::Reach;
pub(super) use faults::RecentFaults;

/// The kernel's page ([`super::PAGE`]), as a file offset: the pages [`Tree::pages_near`]
/// offers.
const PAGE: u64 = super::PAGE as u64;

/// Largest read taken for a page fault by [`Tree::pages_near`].
const FAULT_MAX: u64 = 64 << 10;

/// Most pages below a page fault offered after it: a 64-row window (an image patch, a
/// training sample) then faults once, not twice (BENCHMARKS.md, "Session 16: windows").
const NEAR_PAGES: u64 = 64;

/// Most blocks decoded for the pages below a page fault (its 64 rows below lie in 5 blocks
/// of python-blosc2's 16 rows for 2-D float64 arrays: its own and 4 more).
const BELOW_DECODES: usize = 4;

/// The same two for a fault of a reader going through the file in order (its file's latest
/// fault lies less than a row before it, and that one's did too, or it walked down a column:
/// a mapped scan, `np.load(mmap_mode='r').sum()`; the second fault of a row after a window's
/// first is its second page column, all of whose rows below it reads):
/// such a reader faults on the other columns of the rows before it comes back to this one,
/// and the forward pages of its later faults overlap the rows below (measured: 64 rows
/// there stored more pages twice and made the mapped sum 5% slower).
const SCAN_PAGES: u64 = 32;
const SCAN_DECODES: usize = 2;

/// Most bytes after a page fault offered after it.
const FORWARD_MAX: u64 = 1 << 20;

/// Faults of a walk down a column whose blocks a fault of it asks for ahead, on top of its
/// own: the next two (each one's row and the rows below it). The rows a walking fault stores
/// ahead of the reader (`walk.rs`) are the next fault's, whose blocks the fault before asked
/// for: they are decoded by then (measured: strips 1.05x with one fault ahead, and the rows
/// ahead stored only as far as decoded, BENCHMARKS.md, "Session 19: column walks").
const WALK_AHEAD: u64 = 2;

/// Page faults in a row down one column (each at most [`NEAR_PAGES`] + 1 rows below the one
/// before) from which a reader counts as walking down it: a window of up to 130 rows
/// faults at most twice.
const WALK_FAULTS: u32 = 3;

/// Page faults of `array.npy` files remembered to tell walks down a column.
const RECENT_FAULTS: usize = 16;

/// Pages offered after a page fault, `(offset, bytes)`: those to store before the fault is
/// answered, and those to store after it ([`Tree::pages_near`]).
pub type Offered = (Vec<(u64, Pieces)>, Vec<(u64, Pieces)>);

/// The bytes from one row of `array.npy` (shown by `npy`) to the next: 0 for 1-D arrays.
fn row_stride(npy: &Npy) -> u64 {
    let shape = npy.shape();
    let rows: u64 = match shape.len() {
        0 | 1 => 0,
        n => shape[..n - 1].iter().product(),
    };
    npy.layout().data_len().checked_div(rows).unwrap_or(0)
}

/// The page holding the byte `rows` rows of `stride` bytes below byte `offset`; `None` past
/// what a file offset can hold.
fn page_below(offset: u64, rows: u64, stride: u64) -> Option<u64> {
    let at = rows.checked_mul(stride)?.checked_add(offset)?;
    Some(at / PAGE * PAGE)
}

/// The page offsets of `array.npy` (shown by `npy`) below the page at `offset`: the same
/// columns of the next `rows` rows (none for 1-D arrays or rows shorter than a page), within
/// the file.
fn below_pages(npy: &Npy, offset: u64, rows: u64) -> impl Iterator<Item = u64> + '_ {
    let stride = row_stride(npy);
    let n = if stride < PAGE { 0 } else { rows };
    (1..=n)
        .map_while(move |k| page_below(offset, k, stride))
        .take_while(|&at| at < npy.len())
}

/// Where byte `at` of `array.npy` (shown by `npy`, of `array`) lies: its chunk and its offset
/// in the decoded chunk; `None` in the header or past the end.
fn data_at(npy: &Npy, array: ArrayId, at: u64) -> Option<(ChunkId, usize)> {
    let w = npy.window(at, 1);
    if !w.header.is_empty() || w.out_len == 0 {
        return None;
    }
    let run = npy.layout().runs(w.data.start, 1).next()?;
    Some((ChunkId::new(array, run.chunk as usize), run.src as usize))
}

impl Tree {
    /// The NPY view of `array`.
    pub(super) fn npy_view(&self, array: ArrayId) -> Option<Arc<Npy>> {
        let ino = self.arrays.get(array.index()).and_then(|f| f.npy)?;
        match self.node(ino).map(|n| &n.kind) {
            Some(NodeKind::File(FileKind::Npy(_, cell))) => Some(cell.get()),
            _ => None,
        }
    }

    /// The size of `array.npy` of `array`.
    pub(crate) fn npy_size(&self, array: ArrayId) -> u64 {
        self.npy_view(array).map_or(0, |n| n.len())
    }

    /// Renders the NPY view of `array` again from its (just reopened) source.
    pub(crate) fn npy_changed(&self, array: ArrayId) {
        let Some(ino) = self.arrays.get(array.index()).and_then(|f| f.npy) else {
            return;
        };
        let Some(live) = self.live(array) else {
            return;
        };
        if let Some(NodeKind::File(FileKind::Npy(_, cell))) = self.node(ino).map(|n| &n.kind) {
            match Npy::for_array(&live.get()) {
                Ok(npy) => cell.set(npy),
                Err(e) => log::warn!("array.npy not updated: {e}"),
            }
        }
    }

    /// Up to `size` bytes of `array.npy` (inode `ino`) of `array` from `offset`.
    pub(crate) fn npy_read(
        &self,
        ino: u64,
        array: ArrayId,
        offset: u64,
        size: u32,
        hint: ReadHint,
        pinned: Option<&Pinned>,
    ) -> Result<ReadData, TreeError> {
        // A read-only descriptor reads the version it opened, without anyone's buffers.
        let npy = match pinned.and_then(|p| p.npy.clone()) {
            Some(npy) => npy,
            None => self.npy_view(array).ok_or(TreeError::NotFound)?,
        };
        let store = self.version_of(pinned, array);
        let buffers = pinned.is_none();
        let w = npy.window(offset, size as usize);
        if w.out_len == 0 {
            return Ok(ReadData::Owned(Vec::new()));
        }
        let data_len = w.data.end - w.data.start;
        // A window inside one run of one chunk (1-D arrays, bcolz): zero-copy from the cache.
        if w.header.is_empty() {
            let mut runs = npy.layout().runs(w.data.start, data_len);
            if let (Some(run), None) = (runs.next(), runs.next()) {
                let id = ChunkId::new(array, run.chunk as usize);
                if !(buffers && self.has_edit(id)) {
                    let scan = hint.scan(npy.len());
                    let hint = if scan { hint } else { ReadHint::RANDOM };
                    let data = self
                        .reader
                        .read_in(store.as_ref(), id, run.src, run.len as u32, hint, || false)
                        .map_err(|source| TreeError::Container { ino, source })?;
                    if data.len() as u64 == run.len {
                        if scan {
                            self.npy_prefetch(array, &npy, w.data.end);
                        }
                        return Ok(data);
                    }
                }
            }
        }
        // Every byte is written below: the header's, then the runs', which tile the data.
        let mut out = crate::reader::Reused::take(w.out_len);
        out[..w.header.len()].copy_from_slice(&npy.header()[w.header.clone()]);
        if data_len > 0 {
            let runs = npy.layout().runs(w.data.start, data_len);
            // Not a scan (an mmap reader's page faults and the readahead around them, a
            // seek-and-read): each run takes the block it falls in, unless its chunk is
            // cached. A scan takes whole chunks.
            let scan = hint.scan(npy.len());
            let into = &mut out[w.data_dst..];
            self.fill_runs(ino, (store.as_ref(), array, buffers), runs, !scan, into)?;
            if scan {
                self.npy_prefetch(array, &npy, w.data.end);
            }
        }
        Ok(ReadData::Reused(out))
    }

    /// After a page-fault read of `array.npy` (inode `ino`, handle `fh`) at `offset`
    /// (page-aligned, at most 64 KiB): pages an mmap reader needs next, as far as
    /// the blocks or chunks already decoded hold them, to be offered to the kernel's page
    /// cache (each saves a round trip):
    /// - the pages that follow in file order (up to `FORWARD_MAX`, 1 MiB; one contiguous range),
    ///   which a scan reads next; they count as read by `fh`, so its stream grows into a
    ///   scan as if it had asked for them;
    /// - the pages below it (the same columns of the next 64 rows of an N-dim array, 32 when
    ///   the fault continues a scan in file order: [`Tree::fault_ahead`] noted which), which
    ///   a reader going down a window or a column reads next: a 64-row window then faults
    ///   once instead of 64 times.
    ///
    /// Nothing on a read-write tree (pages of chunks with pending edits must not outlive
    /// them), for reads that are not page-sized, and for the header page.
    ///
    /// A page that lies in one decoded block (or chunk) is a window of it, not a copy.
    pub fn pages_near(&self, ino: u64, fh: u64, offset: u64, size: u32) -> Offered {
        let mut pages = Vec::new();
        let later = Vec::new();
        if self.options.writable || offset % PAGE != 0 || size == 0 || u64::from(size) > FAULT_MAX {
            return (pages, later);
        }
        let Ok(Entry::File(FileKind::Npy(array, _))) = self.entry(ino) else {
            return match self.ctable_fault_view(ino, offset, size) {
                Some(view) => {
                    self.ctable_pages_near((ino, offset, offset + u64::from(size)), &view)
                }
                None => (pages, later),
            };
        };
        let Some(npy) = self.npy_view(*array) else {
            return (pages, later);
        };
        // The version now: the pages go to the kernel's cache, which every descriptor shares
        // (and which the follower clears when the source changes).
        let store = self.reader.pinned(*array);
        let store = store.as_ref();
        let read_end = offset + u64::from(size);
        if self.faults.lock().mapped(ino, offset) {
            // A mapped scan (`mapped.rs`): windows of blocks, and no credit, so that the
            // handle's reads stay block reads; no pages below (the next ranges cover them).
            return self.mapped_pages((ino, offset, read_end), (store, *array), &npy);
        }
        let forward_end = {
            // Forward: page by page while the pieces are cached, then one range.
            let mut forward = Vec::new();
            let mut at = read_end;
            while at < npy.len() && at - read_end < FORWARD_MAX {
                let end = (at + PAGE).min(npy.len());
                if !self.cached_page((store, *array), &npy, at..end, &mut 0, &mut forward) {
                    break;
                }
                at = end;
            }
            let forward_end = read_end + forward.len() as u64;
            if !forward.is_empty() {
                self.handles.credit(fh, read_end, forward.len() as u64);
                pages.push((read_end, Pieces::from(ReadData::Owned(forward))));
            }
            forward_end
        };
        let (reach, led_to) = {
            let mut faults = self.faults.lock();
            faults.forwarded(ino, offset, forward_end, forward_end);
            (faults.reach(ino, offset), faults.led_to(ino, offset))
        };
        // The blocks below that no prefetch thread has started: decoded here, from the last,
        // rather than slept on (`ChunkReader::steal_blocks`).
        let wants = below_pages(&npy, offset, reach.rows)
            .filter(|&at| at >= forward_end && at > led_to)
            .filter_map(|at| data_at(&npy, *array, at));
        self.reader.steal_blocks(store, wants, reach.decodes);
        // Below: the same columns of the next rows, but those the walk's fault before offered
        // ahead (`walk.rs`). Rows whose pages are shifted against the fault's (a row length
        // that is no multiple of the page) may need a block beside the fault's.
        let mut decodes = reach.decodes;
        for at in below_pages(&npy, offset, reach.rows) {
            if at < forward_end || at <= led_to {
                continue;
            }
            let end = (at + PAGE).min(npy.len());
            let Some(page) = self.page_of((store, *array), &npy, at..end, &mut decodes) else {
                break;
            };
            pages.push((at, Pieces::from(page)));
        }
        (pages, later)
    }

    /// Bytes `span` of `array.npy` (at most a page) as [`Tree::cached_page`] finds them: a
    /// window of the block or chunk that holds them all when one does (no copy), else a copy.
    fn page_of(
        &self,
        (store, array): (&dyn ChunkStore, ArrayId),
        npy: &Npy,
        span: std::ops::Range<u64>,
        decodes: &mut usize,
    ) -> Option<ReadData> {
        let len = (span.end - span.start) as usize;
        let w = npy.window(span.start, len);
        if !w.header.is_empty() || w.out_len != len {
            return None;
        }
        let mut runs = npy.layout().runs(w.data.start, w.data.end - w.data.start);
        if let (Some(run), None) = (runs.next(), runs.next()) {
            let id = ChunkId::new(array, run.chunk as usize);
            let src = run.src as usize;
            let (bytes, start) = self.covering_within(store, id, src, decodes)?;
            let from = src.checked_sub(start)?;
            let to = from.checked_add(len)?;
            return (to <= bytes.len()).then(|| ReadData::Chunk(bytes, from..to));
        }
        let mut page = Vec::new();
        self.cached_page((store, array), npy, span, decodes, &mut page)
            .then_some(ReadData::Owned(page))
    }

    /// The array and NPY view of `array.npy` (inode `ino`) for a page-fault read of `size`
    /// bytes at `offset` that gets pages offered ([`Tree::pages_near`]): none on a read-write
    /// tree, for reads that are not page-sized, or of another file.
    fn fault_view(&self, ino: u64, offset: u64, size: u32) -> Option<(ArrayId, Arc<Npy>)> {
        if self.options.writable || offset % PAGE != 0 || size == 0 || u64::from(size) > FAULT_MAX {
            return None;
        }
        let Ok(Entry::File(FileKind::Npy(array, _))) = self.entry(ino) else {
            return None;
        };
        Some((*array, self.npy_view(*array)?))
    }

    /// Before a page-fault read of `array.npy` (inode `ino`) at `offset` (as
    /// [`Tree::pages_near`] takes them): asks the reader to decode, on its prefetch threads,
    /// the blocks that the pages below the fault (the ones [`Tree::pages_near`] offers after
    /// it) fall in, at most as many as it would decode itself. The fault's own block decodes
    /// on the caller's thread meanwhile, so one fault uses both cores instead of decoding
    /// five blocks one after the other; then [`Tree::pages_near`] decodes on that thread,
    /// from the last, those no prefetch thread has started yet. Notes the fault, which decides
    /// how far below it the pages go (not as far when it continues a scan in file order, see
    /// `SCAN_PAGES`).
    ///
    /// Returns whether the fault continues a walk down a column (a tall strip, a window
    /// taller than two faults): it is at least the third fault in a row, each one within
    /// the rows below the one before (the tree remembers its latest faults). Such a fault
    /// also asks, right away, for the blocks of the walk's next two faults (`WALK_AHEAD`,
    /// [`Tree::walk_ahead`]): they decode on both cores while this fault's pages are stored
    /// and the reader walks through them, so the next fault finds its blocks decoded, and
    /// its rows can be stored ahead ([`Tree::walk_lead`]). The first two faults of a walk do
    /// not (a 64-row window faults once), so random windows do not decode rows they will
    /// not read.
    pub fn fault_ahead(&self, ino: u64, offset: u64, size: u32) -> bool {
        let Some((array, npy)) = self.fault_view(ino, offset, size) else {
            // A CTable's `table.npy` (`ctable.rs`): mapped scans, never walks.
            if let Some(view) = self.ctable_fault_view(ino, offset, size) {
                self.ctable_fault_ahead(ino, offset, &view);
            }
            return false;
        };
        let Some(own) = data_at(&npy, array, offset) else {
            return false;
        };
        let store = self.reader.pinned(array);
        let stride = row_stride(&npy);
        // Rows shorter than a page (a 1-D array): no walks and no pages below, but mapped
        // scans all the same (`RecentFaults::note`).
        let mut faults = self.faults.lock();
        let n = faults.note(ino, offset, stride);
        if faults.mapped(ino, offset) {
            drop(faults);
            self.mapped_ahead(&store, array, &npy, offset);
            return false;
        }
        let (walking, reach) = if stride >= PAGE {
            (n >= WALK_FAULTS, faults.reach(ino, offset))
        } else {
            (false, Reach::NEAR)
        };
        drop(faults);
        let wants = below_pages(&npy, offset, reach.rows).filter_map(|at| data_at(&npy, array, at));
        self.reader
            .prefetch_blocks(&store, Some(own), wants, reach.decodes);
        if walking {
            self.walk_blocks(&store, array, &npy, offset);
        }
        walking
    }

    /// For a page fault of `array.npy` (inode `ino`) at `offset` that continues a walk down a
    /// column ([`Tree::fault_ahead`] says so and calls this itself): asks the prefetch threads
    /// for the blocks the walk's next two faults (`WALK_AHEAD`) read (the row after the pages
    /// offered below this fault and the rows below it, and the same after those), for each
    /// at most as many as a fault asks for.
    /// Blocks cached or being decoded are not asked for again, so asking twice costs no
    /// decode.
    pub fn walk_ahead(&self, ino: u64, offset: u64, size: u32) {
        let Some((array, npy)) = self.fault_view(ino, offset, size) else {
            return;
        };
        let store = self.reader.pinned(array);
        self.walk_blocks(&store, array, &npy, offset);
    }

    /// [`Tree::walk_ahead`] of `array` (shown by `npy`, read through `store`).
    fn walk_blocks(&self, store: &Arc<dyn ChunkStore>, array: ArrayId, npy: &Npy, offset: u64) {
        let stride = row_stride(npy);
        if stride < PAGE {
            return;
        }
        for k in 1..=WALK_AHEAD {
            let next = page_below(offset, k * (NEAR_PAGES + 1), stride);
            let Some(next) = next.filter(|&at| at < npy.len()) else {
                return;
            };
            let wants = std::iter::once(next)
                .chain(below_pages(npy, next, NEAR_PAGES))
                .filter_map(|at| data_at(npy, array, at));
            self.reader
                .prefetch_blocks(store, None, wants, BELOW_DECODES);
        }
    }

    /// Appends bytes `span` of `array.npy` to `out`, when they lie in its data part and every
    /// run of them is in a cached chunk or block, or in one of at most `*decodes` more blocks
    /// (decoded here, and counted down); otherwise leaves `out` as it was and returns false.
    fn cached_page(
        &self,
        (store, array): (&dyn ChunkStore, ArrayId),
        npy: &Npy,
        span: std::ops::Range<u64>,
        decodes: &mut usize,
        out: &mut Vec<u8>,
    ) -> bool {
        let len = (span.end - span.start) as usize;
        let w = npy.window(span.start, len);
        if !w.header.is_empty() || w.out_len != len {
            return false;
        }
        let base = out.len();
        out.resize(base + len, 0);
        let mut fill = || -> Option<()> {
            for run in npy.layout().runs(w.data.start, w.data.end - w.data.start) {
                let id = ChunkId::new(array, run.chunk as usize);
                let (src, n, dst) = (run.src as usize, run.len as usize, run.dst as usize);
                let (bytes, start) = self.covering_within(store, id, src, decodes)?;
                let piece = bytes.get(src.checked_sub(start)?..src - start + n)?;
                out.get_mut(base + dst..base + dst + n)?
                    .copy_from_slice(piece);
            }
            Some(())
        };
        let ok = fill().is_some();
        if !ok {
            out.truncate(base);
        }
        ok
    }

    /// The decoded block (or chunk) of chunk `id` that byte `src` of it lies in, and where it
    /// starts in the chunk: from the caches, else decoded here (or waited for, when a prefetch
    /// thread is on it) while `*decodes` allows, counted down.
    fn covering_within(
        &self,
        store: &dyn ChunkStore,
        id: ChunkId,
        src: usize,
        decodes: &mut usize,
    ) -> Option<(crate::reader::Bytes, usize)> {
        if let Some(piece) = self.reader.covering_cached(store, id, src) {
            return Some(piece);
        }
        *decodes = decodes.checked_sub(1)?;
        self.reader.covering(store, id, src).ok()
    }

    /// Whether chunk `id` has an edit buffer.
    fn has_edit(&self, id: ChunkId) -> bool {
        self.options.writable && self.edits.lock().has_chunk(id)
    }

    /// After a sequential read of `array.npy` up to data byte `end`: asks for the next slab's
    /// chunks, as many as fit in the chunk cache beside the current slab (none when prefetch
    /// is off or the cache holds only the chunks being read).
    fn npy_prefetch(&self, array: ArrayId, npy: &Npy, end: u64) {
        if end == 0 {
            return;
        }
        let layout = npy.layout();
        let (Some(cur), Some(next)) = (layout.slab(end - 1), layout.next_slab(end - 1)) else {
            return;
        };
        let first = ChunkId::new(array, next.chunks.start as usize);
        let chunk = self.reader.chunk_nbytes(first).unwrap_or(0).max(1);
        if self.reader.prefetch_depth(chunk) == 0 {
            return;
        }
        let current = (cur.chunks.end - cur.chunks.start) as usize;
        let room = (self.reader.cache_budget() / chunk).saturating_sub(current);
        let ids = next
            .chunks
            .take(room)
            .map(|c| ChunkId::new(array, c as usize));
        self.reader.prefetch(ids);
    }

    /// Writes `data` at `offset` of `array.npy` of `array`: patches the chunk buffers the
    /// window covers.
    pub(crate) fn npy_write(
        &self,
        ino: u64,
        array: ArrayId,
        offset: u64,
        data: &[u8],
    ) -> Result<(), TreeError> {
        let npy = self.npy_view(array).ok_or(TreeError::NotFound)?;
        let header = npy.header();
        let hlen = header.len() as u64;
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| TreeError::TooBig("offset".into()))?;
        if end > npy.len() {
            return Err(TreeError::TooBig(format!(
                "writing up to byte {end}: array.npy has {} bytes and keeps its size",
                npy.len()
            )));
        }
        if offset < hlen {
            let h = &header[offset as usize..end.min(hlen) as usize];
            if data[..h.len()] != *h {
                log::warn!("inode {ino}: a write would change the header of array.npy: refused");
                return Err(TreeError::Refused(
                    "array.npy: its header (dtype and shape) cannot be changed".into(),
                ));
            }
        }
        if end <= hlen {
            return Ok(());
        }
        let data_start = offset.max(hlen) - hlen;
        let skip = (data_start + hlen - offset) as usize;
        let data = &data[skip..];
        let runs: Vec<Run> = npy.layout().runs(data_start, data.len() as u64).collect();
        // All or nothing (issue 21): a chunk whose buffer is shorter than its shape (truncated
        // through its chunk file) refuses the write before any chunk is patched.
        for r in &runs {
            let id = ChunkId::new(array, r.chunk as usize);
            let have = match self.edits.lock().chunk_len(id) {
                Some(n) => n as u64,
                None => self.reader.chunk_nbytes(id).map_or(u64::MAX, |n| n as u64),
            };
            if have < r.src + r.len {
                return Err(TreeError::Refused(format!(
                    "array.npy: chunk {} is shorter than its shape",
                    r.chunk
                )));
            }
        }
        let mut i = 0;
        while i < runs.len() {
            let chunk = runs[i].chunk;
            let group = runs[i..].iter().take_while(|r| r.chunk == chunk).count();
            let id = ChunkId::new(array, chunk as usize);
            let group_runs = &runs[i..i + group];
            let patches: Vec<(usize, &[u8])> = group_runs
                .iter()
                .map(|r| {
                    (
                        r.src as usize,
                        &data[r.dst as usize..(r.dst + r.len) as usize],
                    )
                })
                .collect();
            if let Some(done) = self.patch_spilled(id, &patches) {
                done?;
                i += group;
                continue;
            }
            self.with_chunk_buffer(id, |buf, _| {
                for r in &runs[i..i + group] {
                    let (src, len, dst) = (r.src as usize, r.len as usize, r.dst as usize);
                    let slot = buf.get_mut(src..src + len).ok_or_else(|| {
                        TreeError::Refused(format!(
                            "array.npy: chunk {chunk} is shorter than its shape"
                        ))
                    })?;
                    slot.copy_from_slice(&data[dst..dst + len]);
                }
                Ok(())
            })?;
            i += group;
        }
        Ok(())
    }

    /// `truncate` of `array.npy`: only to its own size.
    pub(crate) fn npy_set_size(&self, array: ArrayId, size: u64) -> Result<(), TreeError> {
        let len = self.npy_size(array);
        if size == len {
            return Ok(());
        }
        Err(TreeError::Refused(format!(
            "array.npy keeps its size ({len} bytes), not {size}"
        )))
    }

    /// The ctable's `table.npy` view and its columns' arrays.
    fn table_view(&self, ino: u64) -> Option<(Arc<TableNpy>, &[ArrayId])> {
        match self.entry(ino) {
            Ok(Entry::File(FileKind::TableNpy(t, columns))) => Some((t.get(), columns)),
            _ => None,
        }
    }

    /// Renders `table.npy` again from the ctable as its source holds it now (after a commit or
    /// another writer changed its rows; a remote ctable from its prefix listed again).
    pub(crate) fn table_npy_changed(&self) {
        if self.mounted.table().is_none() {
            return;
        }
        for node in self.nodes.iter() {
            if let NodeKind::File(FileKind::TableNpy(cell, _)) = &node.kind {
                match self.open_table() {
                    Some(Ok(crate::container::Container::Table(t))) => {
                        match TableNpy::for_table(&t) {
                            Ok(npy) => cell.set(npy),
                            Err(e) => log::warn!("table.npy not updated: {e}"),
                        }
                    }
                    Some(Ok(_)) | None => log::warn!("table.npy not updated: no longer a ctable"),
                    Some(Err(e)) => {
                        log::warn!("table.npy not updated: {}", super::display_chain(&e))
                    }
                }
            }
        }
    }

    /// The size of `table.npy`.
    pub(crate) fn table_npy_size(&self, ino: u64) -> u64 {
        self.table_view(ino).map_or(0, |(t, _)| t.len())
    }

    /// Up to `size` bytes of `table.npy` (inode `ino`) from `offset`: each row's fields taken
    /// from the columns' chunks (whole chunks through the cache).
    pub(crate) fn table_npy_read(
        &self,
        ino: u64,
        offset: u64,
        size: u32,
        _hint: ReadHint,
        pinned: Option<&Pinned>,
    ) -> Result<ReadData, TreeError> {
        let (t, columns) = self.table_view(ino).ok_or(TreeError::NotFound)?;
        let t = pinned.and_then(|p| p.table.clone()).unwrap_or(t);
        let w = t.window(offset, size as usize);
        let mut out = vec![0u8; w.out_len];
        out[..w.header.len()].copy_from_slice(&t.header()[w.header.clone()]);
        if w.data.end > w.data.start {
            let out = &mut out[w.data_dst..];
            let mut held: Option<(ChunkId, crate::reader::Bytes)> = None;
            for p in t.pieces(w.data.start, w.data.end - w.data.start) {
                let array = *columns.get(p.column).ok_or(TreeError::NotFound)?;
                let id = ChunkId::new(array, p.chunk as usize);
                if !self.reader.fits_whole(id) {
                    // Only the rows' span of the chunk, through the reader's block reads.
                    let span = (p.rows - 1) * p.src_stride + p.len;
                    let span = u32::try_from(span).map_err(|_| TreeError::NotFound)?;
                    let store = self.version_of(pinned, array);
                    let got = self
                        .reader
                        .read_in(store.as_ref(), id, p.src, span, ReadHint::RANDOM, || false)
                        .map_err(|source| TreeError::Container { ino, source })?;
                    for row in 0..p.rows {
                        let src = (row * p.src_stride) as usize;
                        let dst = (p.dst + row * p.dst_stride) as usize;
                        let len = p.len as usize;
                        let piece = got.get(src..src + len).ok_or(TreeError::NotFound)?;
                        out[dst..dst + len].copy_from_slice(piece);
                    }
                    continue;
                }
                if held.as_ref().is_none_or(|(k, _)| *k != id) {
                    let store = self.version_of(pinned, array);
                    let bytes = self
                        .reader
                        .chunk_in(store.as_ref(), id)
                        .map_err(|source| TreeError::Container { ino, source })?;
                    held = Some((id, bytes));
                }
                let Some((_, bytes)) = &held else { continue };
                for row in 0..p.rows {
                    let src = (p.src + row * p.src_stride) as usize;
                    let dst = (p.dst + row * p.dst_stride) as usize;
                    let len = p.len as usize;
                    let piece = bytes.get(src..src + len).ok_or(TreeError::NotFound)?;
                    out[dst..dst + len].copy_from_slice(piece);
                }
            }
        }
        Ok(ReadData::Owned(out))
    }
}

mod ctable;
pub(super) use ctable::place as place_rows;
mod faults;
mod mapped;
#[cfg(test)]
mod tests;
mod walk;
