//! Mapped scans of `array.npy` (`np.load(mmap_mode='r').sum()`, of any number of
//! dimensions): a page fault at the page right after the range of pages the file's previous
//! fault offered. Such a scan takes
//! blocks, not whole chunks: the next range's blocks are asked for at each fault (they
//! decode on the prefetch threads while the reader sums the range before), and the range
//! offered is made of windows of those blocks, which the page stores hand to one `writev`
//! without copying them. Blocks recycle their buffers within the block cache, where whole
//! chunks of a slab-by-slab scan need two slabs of fresh memory (BENCHMARKS.md, "Session 18:
//! mapped scans").

use std::sync::Arc;

use super::{FORWARD_MAX, Offered, PAGE, data_at};
use crate::container::npy::Npy;
use crate::reader::{ArrayId, ChunkId, ChunkStore, Pieces, ReadData};
use crate::tree::Tree;

/// Ranges of [`FORWARD_MAX`] whose blocks a fault of a mapped scan asks for, from its own
/// page on: the range up to the next fault's page and the one after it, which this fault
/// offers, were asked for by the faults before; this fault asks for the ranges after those,
/// so that both cores decode ahead while the reader sums and the pages are stored (measured:
/// 3 ranges, 1.26x session 18's main; 6, with room for their blocks in the prefetch queue,
/// 1.18x 3 ranges with 8 jobs queued at most, the cores busy 95% of the scan instead of 75%:
/// BENCHMARKS.md, "Session 23: mapped scans").
pub(super) const AHEAD_RANGES: u64 = 6;

/// Most windows a range offered is made of (one `writev` takes 1,024).
const MAX_PARTS: usize = 900;

/// Most blocks a fault asks for (the prefetch queue drops what does not fit; a block not
/// asked for is asked again by the next fault, or decoded when its range is offered).
pub(super) const MAX_ASKED: usize = 64;

impl Tree {
    /// For a fault of a mapped scan of `array` (shown by `npy`, read through `store`) at
    /// `offset`: asks the prefetch threads for the blocks of the range this fault offers and
    /// of the next ones, in file order (those cached or being decoded are not asked again).
    pub(super) fn mapped_ahead(
        &self,
        store: &Arc<dyn ChunkStore>,
        array: ArrayId,
        npy: &Npy,
        offset: u64,
    ) {
        let end = (offset + AHEAD_RANGES * FORWARD_MAX).min(npy.len());
        let own = data_at(npy, array, offset);
        let w = npy.window(offset, end.saturating_sub(offset) as usize);
        // (A fault in the header's page asks for the data after it.)
        if w.data.end <= w.data.start {
            return;
        }
        // One pass over the runs of those bytes, a page at a time within each run (so that
        // every block a run spans is asked for), in file order.
        let wants = npy
            .layout()
            .runs(w.data.start, w.data.end - w.data.start)
            .flat_map(|run| {
                let id = ChunkId::new(array, run.chunk as usize);
                (run.src..run.src.saturating_add(run.len))
                    .step_by(PAGE as usize)
                    .map(move |at| (id, at as usize))
            });
        self.reader.prefetch_blocks(store, own, wants, MAX_ASKED);
    }

    /// [`Tree::pages_near`] for the fault of a mapped scan of `array.npy` (inode `ino`,
    /// shown by `npy`, of `array` read through `store`) at `offset`, read up to `read_end`:
    /// the pages up to the next fault's page, `FORWARD_MAX` on (most of them offered by the
    /// fault before), to store before the answer; and the range after that page, to store
    /// after it, while the reader sums the pages before. Leaving that one page out is what
    /// tells where the reader is: its fault there is the next step.
    pub(super) fn mapped_pages(
        &self,
        (ino, offset, read_end): (u64, u64, u64),
        (store, array): (&dyn ChunkStore, ArrayId),
        npy: &Npy,
    ) -> Offered {
        self.mapped_offer((ino, offset, read_end), npy.len(), |span| {
            self.mapped_forward((store, array), npy, span)
        })
    }

    /// The offer of a mapped scan's fault of a file of `len` bytes (inode `ino`) at `offset`,
    /// read up to `read_end` ([`Tree::mapped_pages`]; `table.npy`'s, `ctable.rs`), whose
    /// pages `forward` gives for a span: whole pages from its start, up to the first that
    /// cannot be had.
    pub(super) fn mapped_offer(
        &self,
        (ino, offset, read_end): (u64, u64, u64),
        len: u64,
        forward: impl Fn(std::ops::Range<u64>) -> Pieces,
    ) -> Offered {
        let (mut pages, mut later) = (Vec::new(), Vec::new());
        let before = self.faults.lock().offered_before(ino, offset);
        let next = (offset + FORWARD_MAX).min(len);
        // A fault's read of the last, partial page ends past the file (the kernel asks for
        // whole pages): never beyond `next` (`clamp` would panic with min > max).
        let from = before.max(read_end).min(next);
        let near = if from < next {
            forward(from..next)
        } else {
            Pieces::new()
        };
        let near_end = from + near.len() as u64;
        if !near.is_empty() {
            pages.push((from, near));
        }
        let (mut expected, mut offered) = (near_end, near_end);
        if near_end == next && next + PAGE < len {
            let end = (next + FORWARD_MAX).min(len);
            let ahead = forward(next + PAGE..end);
            if !ahead.is_empty() {
                (expected, offered) = (next, next + PAGE + ahead.len() as u64);
                later.push((next + PAGE, ahead));
            }
        }
        self.faults.lock().forwarded(ino, offset, expected, offered);
        (pages, later)
    }

    /// Bytes `span` of `array.npy` (shown by `npy`, of `array` read through `store`) as
    /// windows of the blocks (or chunks) they lie in, decoding those not cached (or waiting
    /// for their decode): the pages up to the first that cannot be had.
    pub(super) fn mapped_forward(
        &self,
        (store, array): (&dyn ChunkStore, ArrayId),
        npy: &Npy,
        span: std::ops::Range<u64>,
    ) -> Pieces {
        let mut out = Pieces::new();
        let len = (span.end - span.start) as usize;
        let w = npy.window(span.start, len);
        if !w.header.is_empty() || w.out_len != len {
            return out;
        }
        let mut held: Option<(usize, crate::reader::Bytes, usize)> = None;
        let mut decodes = MAX_ASKED;
        // A run may span many blocks (the rows of a 1-D array are one run per chunk): a
        // window of each block it lies in.
        'runs: for run in npy.layout().runs(w.data.start, w.data.end - w.data.start) {
            let id = ChunkId::new(array, run.chunk as usize);
            let (mut src, end) = (run.src as usize, (run.src + run.len) as usize);
            while src < end {
                let covers = |(c, b, at): &(usize, crate::reader::Bytes, usize)| {
                    *c == id.index && src >= *at && src < at + b.len()
                };
                if !held.as_ref().is_some_and(covers) {
                    // A range is at most MAX_PARTS windows, and decodes at most MAX_ASKED
                    // blocks itself (tiny blocks: the prefetch threads or the next fault
                    // do the rest).
                    if out.parts() >= MAX_PARTS {
                        break 'runs;
                    }
                    let got = self.covering_within(store, id, src, &mut decodes);
                    held = got.map(|(b, at)| (id.index, b, at));
                }
                match &held {
                    Some(h) if covers(h) && out.parts() < MAX_PARTS => {
                        let (from, to) = (src - h.2, (end - h.2).min(h.1.len()));
                        out.push(ReadData::Chunk(h.1.clone(), from..to));
                        src += to - from;
                    }
                    _ => break 'runs,
                }
            }
        }
        // Whole pages only (or up to the file's end).
        if out.len() < len {
            out.truncate(out.len() / PAGE as usize * PAGE as usize);
        }
        out
    }
}
