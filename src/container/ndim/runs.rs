//! The C-order byte layout of a b2nd array over its chunk grid: which stretches of which
//! decoded chunks assemble a window of the array's unpadded C-order bytes (what `arr[...]`
//! returns), which chunks an item window touches, and the chunk "slabs" a scan crosses.
//!
//! Pure arithmetic on [`Grid`]; no allocation per run. A decoded chunk is padded to the full
//! (block-rounded) chunk shape with blocks in C order of the block grid (see [`Grid`]), so one
//! item row of the array is, inside one chunk, a sequence of stretches of the last axis, one
//! per block; padding (past the chunk shape or the array shape) is never part of a run.

use std::ops::Range;

use super::{Grid, MAX_DIM};

/// A piece of a window: `len` bytes at byte `src` of decoded chunk `chunk` go to byte `dst` of
/// the window (relative to the window's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Chunk number.
    pub chunk: u64,
    /// Byte offset inside the decoded (padded) chunk.
    pub src: u64,
    /// Length in bytes (never 0).
    pub len: u64,
    /// Byte offset in the window.
    pub dst: u64,
}

/// The runs of a byte window of a b2nd array's C-order data, in window order; see
/// [`Grid::runs`]. Adjacent stretches that are also adjacent in the same decoded chunk are
/// merged into one run (a 1-D array gives one run per chunk).
#[derive(Debug, Clone)]
pub struct NdRuns<'g> {
    grid: &'g Grid,
    itemsize: u64,
    /// Window start (absolute data byte).
    start: u64,
    /// Next absolute data byte to cover.
    pos: u64,
    end: u64,
    /// Element index of the item holding byte `pos`.
    idx: [u64; MAX_DIM],
    items_per_block: u64,
    /// The current item row's share of the chunk number, block number and in-block item
    /// position (the dimensions before the last, scaled by the last one's extent).
    row_chunk: u64,
    row_block: u64,
    row_inner: u64,
    /// Along the last axis: chunk coordinate, offset inside the chunk, block coordinate
    /// inside the chunk, offset inside the block. Stepped without divisions inside a row.
    last_chunk: u64,
    last_in_chunk: u64,
    last_block: u64,
    last_in_block: u64,
    pending: Option<Run>,
}

impl Grid {
    /// Array shape in items.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Chunk shape (unpadded).
    pub fn chunkshape(&self) -> &[u64] {
        &self.chunkshape
    }

    /// Block shape.
    pub fn blockshape(&self) -> &[u64] {
        &self.blockshape
    }

    /// Items in the array (`prod shape`; 1 for a 0-d array). Saturates (a [`Grid`] whose
    /// item count overflows cannot be read anyway: its chunks do not fit either).
    pub fn items(&self) -> u64 {
        self.shape.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// The runs that assemble bytes `[start, start + len)` of the array's C-order data for
    /// items of `itemsize` bytes (clipped to the data). Decoded chunks are
    /// `items_per_chunk * itemsize` bytes.
    pub fn runs(&self, itemsize: u64, start: u64, len: u64) -> NdRuns<'_> {
        let total = self.items().saturating_mul(itemsize);
        let start = start.min(total);
        let end = start.saturating_add(len).min(total);
        let mut runs = NdRuns {
            grid: self,
            itemsize,
            start,
            pos: start,
            end,
            idx: [0u64; MAX_DIM],
            items_per_block: self.blockshape.iter().product(),
            row_chunk: 0,
            row_block: 0,
            row_inner: 0,
            last_chunk: 0,
            last_in_chunk: 0,
            last_block: 0,
            last_in_block: 0,
            pending: None,
        };
        if let Some(item) = start.checked_div(itemsize).filter(|_| start < end) {
            self.unravel(item, &mut runs.idx);
            runs.enter_row();
        }
        runs
    }

    /// C-order unravel of item number `item` into `idx[..ndim]` (no bounds check).
    fn unravel(&self, mut item: u64, idx: &mut [u64; MAX_DIM]) {
        for d in (0..self.ndim()).rev() {
            let n = self.shape[d].max(1);
            idx[d] = item % n;
            item /= n;
        }
    }

    /// Calls `f(lo, hi)` for each box (`lo[d] <= i[d] < hi[d]`) of a decomposition of the
    /// C-order item interval `[first, end)` into at most `2 * ndim - 1` boxes, in order.
    pub fn for_each_box(&self, first: u64, end: u64, f: &mut dyn FnMut(&[u64], &[u64])) {
        let end = end.min(self.items());
        if first >= end {
            return;
        }
        if self.ndim() == 0 {
            f(&[], &[]);
            return;
        }
        let mut lo = [0u64; MAX_DIM];
        let mut hi = [0u64; MAX_DIM];
        self.decompose(first, end, 0, &mut lo, &mut hi, f);
    }

    fn decompose(
        &self,
        a: u64,
        b: u64,
        d: usize,
        lo: &mut [u64; MAX_DIM],
        hi: &mut [u64; MAX_DIM],
        f: &mut dyn FnMut(&[u64], &[u64]),
    ) {
        let nd = self.ndim();
        if a >= b {
            return;
        }
        if d + 1 == nd {
            (lo[d], hi[d]) = (a, b);
            f(&lo[..nd], &hi[..nd]);
            return;
        }
        // Items per index of dimension d (non-zero: the interval is not empty).
        let p: u64 = self.shape[d + 1..].iter().product();
        let (mut i0, r0, i1, r1) = (a / p, a % p, b / p, b % p);
        if i0 == i1 {
            (lo[d], hi[d]) = (i0, i0 + 1);
            self.decompose(r0, r1, d + 1, lo, hi, f);
            return;
        }
        if r0 != 0 {
            (lo[d], hi[d]) = (i0, i0 + 1);
            self.decompose(r0, p, d + 1, lo, hi, f);
            i0 += 1;
        }
        if i1 > i0 {
            (lo[d], hi[d]) = (i0, i1);
            for e in d + 1..nd {
                (lo[e], hi[e]) = (0, self.shape[e]);
            }
            f(&lo[..nd], &hi[..nd]);
        }
        if r1 != 0 {
            (lo[d], hi[d]) = (i1, i1 + 1);
            self.decompose(0, r1, d + 1, lo, hi, f);
        }
    }

    /// The chunks holding any item of the C-order item interval `[first, end)`, ascending and
    /// without repeats.
    pub fn chunks_of_items(&self, first: u64, end: u64) -> Vec<u64> {
        let nd = self.ndim();
        let mut out = Vec::new();
        self.for_each_box(first, end, &mut |lo, hi| {
            let mut c_lo = [0u64; MAX_DIM];
            let mut c_hi = [0u64; MAX_DIM];
            for d in 0..nd {
                c_lo[d] = lo[d] / self.chunkshape[d];
                c_hi[d] = (hi[d] - 1) / self.chunkshape[d];
            }
            // Odometer over the chunk coordinates of the box, in C order.
            let mut c = c_lo;
            loop {
                out.push(super::ravel(&c[..nd], &self.chunk_grid));
                let mut d = nd;
                loop {
                    if d == 0 {
                        return;
                    }
                    d -= 1;
                    if c[d] < c_hi[d] {
                        c[d] += 1;
                        break;
                    }
                    c[d] = c_lo[d];
                }
            }
        });
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The slab holding item `item`: the chunks of its row of the chunk grid along the first
    /// axis (a contiguous range of chunk numbers, all crossed by every item row in it) and the
    /// C-order item interval the slab covers. `None` past the last item.
    pub fn slab_of_item(&self, item: u64) -> Option<(Range<u64>, Range<u64>)> {
        if item >= self.items() {
            return None;
        }
        if self.ndim() == 0 {
            return Some((0..1, 0..1));
        }
        let row_items: u64 = self.shape[1..].iter().product();
        let per_slab: u64 = self.chunk_grid[1..].iter().product();
        let c0 = item / row_items / self.chunkshape[0];
        let first_row = c0 * self.chunkshape[0];
        let end_row = (first_row + self.chunkshape[0]).min(self.shape[0]);
        Some((
            c0 * per_slab..(c0 + 1) * per_slab,
            first_row * row_items..end_row * row_items,
        ))
    }

    /// The band holding item `item`: the item rows along the first axis that one row of
    /// blocks of its chunk row covers (from a block's first row to the next block's, cut at
    /// the chunk's and the array's end), as the C-order item interval they make. Every block
    /// of a chunk any of those rows crosses lies wholly inside the band, so a scan in file
    /// order decodes each block once by going band by band. `None` past the last item, or
    /// for an array of no dimension.
    pub fn band_of_item(&self, item: u64) -> Option<Range<u64>> {
        if item >= self.items() || self.ndim() == 0 {
            return None;
        }
        let row_items: u64 = self.shape[1..].iter().product();
        let row = item / row_items;
        let (cs, bs) = (self.chunkshape[0], self.blockshape[0]);
        let chunk_start = row / cs * cs;
        let first = chunk_start + (row - chunk_start) / bs * bs;
        let end = (first + bs).min(chunk_start + cs).min(self.shape[0]);
        Some(first * row_items..end * row_items)
    }
}

impl NdRuns<'_> {
    /// Recomputes the row prefix and the last-axis state from `idx` (O(ndim) divisions, once
    /// per item row). Only called while the window is not empty, so no extent is 0.
    fn enter_row(&mut self) {
        let g = self.grid;
        let Some(l) = g.ndim().checked_sub(1) else {
            return;
        };
        let (mut c, mut b, mut e) = (0u64, 0u64, 0u64);
        for d in 0..l {
            let (cs, bs, i) = (g.chunkshape[d], g.blockshape[d], self.idx[d]);
            let r = i % cs;
            c = c * g.chunk_grid[d] + i / cs;
            b = b * g.block_grid[d] + r / bs;
            e = e * bs + r % bs;
        }
        self.row_chunk = c * g.chunk_grid[l];
        self.row_block = b * g.block_grid[l];
        self.row_inner = e * g.blockshape[l];
        let (cs, bs, i) = (g.chunkshape[l], g.blockshape[l], self.idx[l]);
        self.last_chunk = i / cs;
        self.last_in_chunk = i % cs;
        self.last_block = self.last_in_chunk / bs;
        self.last_in_block = self.last_in_chunk % bs;
    }

    /// Steps past `n` items of the last axis (the stretch just emitted).
    fn advance(&mut self, n: u64) {
        let g = self.grid;
        let l = g.ndim() - 1;
        self.idx[l] += n;
        if self.idx[l] >= g.shape[l] {
            let mut d = l;
            while d > 0 && self.idx[d] >= g.shape[d] {
                self.idx[d] = 0;
                d -= 1;
                self.idx[d] += 1;
            }
            self.enter_row();
            return;
        }
        self.last_in_chunk += n;
        self.last_in_block += n;
        if self.last_in_chunk == g.chunkshape[l] {
            self.last_chunk += 1;
            self.last_in_chunk = 0;
            self.last_block = 0;
            self.last_in_block = 0;
        } else if self.last_in_block == g.blockshape[l] {
            self.last_block += 1;
            self.last_in_block = 0;
        }
    }

    /// The next stretch of the last axis, before merging.
    fn raw(&mut self) -> Option<Run> {
        if self.pos >= self.end {
            return None;
        }
        let g = self.grid;
        let nd = g.ndim();
        let isz = self.itemsize;
        // Only the first run can start inside an item (the others start where one ended).
        let byte_in = if self.pos == self.start {
            self.pos % isz
        } else {
            0
        };
        let (chunk, block, inner, n_items) = match nd.checked_sub(1) {
            None => (0, 0, 0, 1),
            Some(l) => (
                self.row_chunk + self.last_chunk,
                self.row_block + self.last_block,
                self.row_inner + self.last_in_block,
                (g.blockshape[l] - self.last_in_block)
                    .min(g.chunkshape[l] - self.last_in_chunk)
                    .min(g.shape[l] - self.idx[l]),
            ),
        };
        let src = (block * self.items_per_block + inner) * isz + byte_in;
        let len = (n_items * isz - byte_in).min(self.end - self.pos);
        let run = Run {
            chunk,
            src,
            len,
            dst: self.pos - self.start,
        };
        self.pos += len;
        if nd > 0 && self.pos < self.end {
            // The run ended on an item boundary: step past the items it covered.
            self.advance(n_items);
        }
        Some(run)
    }
}

impl Iterator for NdRuns<'_> {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        if self.itemsize == 0 {
            return None;
        }
        loop {
            match (self.raw(), self.pending.as_mut()) {
                (Some(r), Some(p)) if r.chunk == p.chunk && r.src == p.src + p.len => {
                    p.len += r.len;
                }
                (Some(r), _) => {
                    let out = self.pending.replace(r);
                    if out.is_some() {
                        return out;
                    }
                }
                (None, _) => return self.pending.take(),
            }
        }
    }
}
