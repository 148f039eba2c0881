//! The pages of `array.npy` offered to the kernel's page cache after a page fault of an
//! mmap reader ([`Tree::pages_near`]: the pages that follow in file order and the rows
//! below, as far as decoded blocks hold them), and the blocks asked for before the fault is
//! served ([`Tree::fault_ahead`], [`Tree::walk_ahead`]). What the latest faults say of the
//! reader is `faults.rs`'s; mapped scans are `mapped.rs`'s, walks `walk.rs`'s, `table.npy`
//! `ctable.rs`'s.

use std::sync::Arc;

use super::faults::Reach;
use super::{
    BELOW_DECODES, FAULT_MAX, FORWARD_MAX, NEAR_PAGES, Offered, PAGE, WALK_AHEAD, WALK_FAULTS,
    below_pages, data_at, page_below, row_stride,
};
use crate::container::npy::Npy;
use crate::reader::{ArrayId, ChunkId, ChunkStore, Pieces, ReadData};
use crate::tree::layout::FileKind;
use crate::tree::{Entry, Tree};

impl Tree {
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
        if self.options.writable
            || !offset.is_multiple_of(PAGE)
            || size == 0
            || u64::from(size) > FAULT_MAX
        {
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
    pub(super) fn page_of(
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
    pub(super) fn fault_view(
        &self,
        ino: u64,
        offset: u64,
        size: u32,
    ) -> Option<(ArrayId, Arc<Npy>)> {
        if self.options.writable
            || !offset.is_multiple_of(PAGE)
            || size == 0
            || u64::from(size) > FAULT_MAX
        {
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
    pub(super) fn walk_blocks(
        &self,
        store: &Arc<dyn ChunkStore>,
        array: ArrayId,
        npy: &Npy,
        offset: u64,
    ) {
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
    pub(super) fn cached_page(
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
    pub(super) fn covering_within(
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
}
