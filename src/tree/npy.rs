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
//!
//! The parts: this file reads and writes the two files; `near.rs` offers the pages after a
//! page fault of `array.npy` and asks for the blocks below it beforehand; `faults.rs`
//! remembers the latest faults (walk, scan, mapped scan); `mapped.rs` serves mapped scans,
//! `walk.rs` the rows ahead of a walk down a column, `ctable.rs` the faults of `table.npy`.

use std::sync::Arc;

use super::handle::Pinned;
use super::layout::{FileKind, NodeKind};
use super::{Entry, Tree, TreeError};
use crate::container::ndim::Run;
use crate::container::npy::{Npy, TableNpy};
use crate::reader::{ArrayId, BandStream, ChunkId, Pieces, ReadData, ReadHint};
pub use faults::Leads;
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

/// Smallest read of `array.npy` served band by band ([`BandStream`]) when it continues its
/// descriptor's reads (or starts them): below it, a page fault's or a seek-and-read's.
const BAND_READ_MIN: u32 = 512 << 10;

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
        // A scan of an N-dim array through a read-only descriptor (`np.load`, `cp`): band
        // by band. (A 1-D array's reads are windows of its chunks, zero-copy below.)
        if let Some(p) = pinned
            && npy.shape().len() >= 2
            && size >= BAND_READ_MIN
            && hint.stream >= u64::from(size)
            && BandStream::serves(npy.layout(), &w.data, hint.stream <= u64::from(size))
            && let Some(store) = p.store(array)
            && let Some(data) = self
                .reader
                .band_read(
                    &p.bands,
                    || BandStream::new(store.clone(), array, npy.clone()),
                    w.data.clone(),
                    hint.stream > u64::from(size),
                )
                .map_err(|source| TreeError::Container { ino, source })?
        {
            if w.header.is_empty() {
                return Ok(data);
            }
            // The first read of a `cp` or `cat`: the header, then the first bands.
            let mut out = crate::reader::Reused::take(w.out_len);
            out[..w.header.len()].copy_from_slice(&npy.header()[w.header.clone()]);
            out[w.data_dst..w.data_dst + data.len()].copy_from_slice(&data);
            return Ok(ReadData::Reused(out));
        }
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
mod near;
#[cfg(test)]
mod tests;
mod walk;
