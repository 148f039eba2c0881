//! Page faults of a CTable's `table.npy` (`np.load(path, mmap_mode='r')`): the same
//! recognition of a mapped scan as `array.npy`'s (`faults.rs`: rows shorter than a page, so
//! from the third fault in a row at the page the one before expected), and the same offer
//! (`mapped.rs`: the pages up to the next fault's page before the answer, the megabyte after
//! it after the answer), but each range is assembled from every column's blocks: a page of
//! `table.npy` interleaves the records of all columns, so it is a copy, not a window of one
//! block. A mapped scan's fault asks the prefetch threads for the columns' blocks of the
//! next [`AHEAD_RANGES`] ranges, so they decode on the other core while the reader sums the
//! ranges before: of those, only the ones the scan's faults before did not ask for whole
//! (each range is asked once per scan).
//!
//! The other faults (a slice through the map) read their own rows as before
//! (`Tree::ctable_read`) and offer nothing ahead (measured: the next four pages offered when
//! the blocks decoded hold them made random slices no faster, BENCHMARKS.md, "Session 24:
//! table.npy mapped reads"); they note where they are, which is how a scan is recognised.
//!
//! A range that cannot be assembled (a column's block that does not decode, more blocks than
//! a range may decode) is not offered: the reader's fault there reads it, and gets EIO from a
//! damaged column as any read does. Pages are of the view as rendered now (they go to the
//! kernel's page cache, which every descriptor shares); nothing is offered on a read-write
//! tree (the rule of [`Tree::pages_near`]).

use std::ops::Range;
use std::sync::Arc;

use super::mapped::{AHEAD_RANGES, MAX_ASKED};
use super::{FAULT_MAX, FORWARD_MAX, Offered, PAGE};
use crate::reader::{ChunkId, Pieces, ReadData};
use crate::tree::ctable::{CTableView, ViewColumn};
use crate::tree::layout::FileKind;
use crate::tree::{Entry, Tree};

/// Physical rows `(first, count)` of the columns read at once, and the `(logical row,
/// physical row, rows)` runs of valid rows placed from them.
type Span = (u64, u64, Vec<(u64, u64, u64)>);

/// The spans the valid rows `segments` (in order, `(logical, physical, rows)`) are read in:
/// runs whose physical gap is at most `max_gap` rows share a span (the deleted rows between
/// them are read and skipped: one read instead of one per run); a longer gap starts a new
/// one (a deleted range is not read).
fn spans(segments: Vec<(u64, u64, u64)>, max_gap: u64) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    for s in segments {
        match out.last_mut() {
            Some((p0, n, segs)) if s.1 >= *p0 + *n && s.1 - (*p0 + *n) <= max_gap => {
                *n = s.1 + s.2 - *p0;
                segs.push(s);
            }
            _ => out.push((s.1, s.2, vec![s])),
        }
    }
    out
}

/// Bytes of `table.npy` assembled at a time for a mapped scan's range: a range offers its
/// pages up to the first such piece whose blocks cannot all be had.
const PIECE: u64 = 64 << 10;

/// Deleted rows between two runs of valid rows read in one span by a mapped range (a block of
/// python-blosc2's holds thousands of rows: gaps shorter than that are in blocks read anyway).
const MAX_GAP: u64 = 1024;

impl Tree {
    /// The rendered view of `table.npy` (inode `ino`) for a page-fault read of `size` bytes at
    /// `offset` that gets pages offered: none on a read-write tree, for reads that are not
    /// page-sized, of another file, or of a table that does not render.
    pub(super) fn ctable_fault_view(
        &self,
        ino: u64,
        offset: u64,
        size: u32,
    ) -> Option<Arc<CTableView>> {
        if self.options.writable
            || !offset.is_multiple_of(PAGE)
            || size == 0
            || u64::from(size) > FAULT_MAX
        {
            return None;
        }
        let Ok(Entry::File(FileKind::CTableNpy(file))) = self.entry(ino) else {
            return None;
        };
        self.ctable_view(ino, file).ok()
    }

    /// [`Tree::fault_ahead`] of `table.npy` (inode `ino`, rendered as `view`) at `offset`:
    /// notes the fault and, when it continues a mapped scan, asks the prefetch threads for
    /// the columns' blocks of the range it offers and of the next ones, range by range.
    pub(super) fn ctable_fault_ahead(&self, ino: u64, offset: u64, view: &CTableView) {
        let (mapped, asked_to) = {
            let mut faults = self.faults.lock();
            faults.note(ino, offset, 0);
            (faults.mapped(ino, offset), faults.asked_to(ino, offset))
        };
        if !mapped {
            return;
        }
        let t = &view.npy;
        let end = (offset + AHEAD_RANGES * FORWARD_MAX).min(t.len());
        // Per range and column: the prefetch queue takes MAX_ASKED blocks, nearest first.
        let per = (MAX_ASKED / view.columns.len().max(1)).max(1);
        // The faults before asked for everything up to `asked_to`: only what is past it.
        let mut at = asked_to.clamp(offset, end.max(offset));
        let (mut whole_to, mut bytes) = (at, 0);
        while at < end {
            let to = (at + FORWARD_MAX).min(end);
            let mut whole = true;
            for (p0, count, _) in self.ctable_spans(view, at..to) {
                for (c, geo) in view.columns.iter().zip(t.columns()) {
                    let (from, len) = (p0 * geo.atom, count * geo.atom);
                    let wants = c.npy.layout().runs(from, len).flat_map(|run| {
                        let id = ChunkId::new(c.array, run.chunk as usize);
                        (run.src..run.src.saturating_add(run.len))
                            .step_by(PAGE as usize)
                            .map(move |at| (id, at as usize))
                    });
                    whole &= self.reader.prefetch_blocks(&c.store(), None, wants, per);
                }
            }
            bytes += to - at;
            // A range not asked whole (the queue's share was full) is asked again by the
            // next fault, with those after it.
            if whole && whole_to == at {
                whole_to = to;
            }
            at = to;
        }
        self.faults.lock().asked((ino, offset), whole_to, bytes);
    }

    /// Bytes of `table.npy` files whose columns' blocks mapped scans asked the prefetch
    /// threads for so far: about the file's length per scan (each range asked once).
    pub fn ctable_ahead_bytes(&self) -> u64 {
        self.faults.lock().asked_bytes()
    }

    /// [`Tree::pages_near`] of `table.npy` (inode `ino`, rendered as `view`) for a fault at
    /// `offset` read up to `read_end`: a mapped scan's ranges ([`Tree::mapped_offer`]); for
    /// another fault nothing, but where it is noted.
    pub(super) fn ctable_pages_near(
        &self,
        (ino, offset, read_end): (u64, u64, u64),
        view: &CTableView,
    ) -> Offered {
        let len = view.npy.len();
        if !self.faults.lock().mapped(ino, offset) {
            self.faults
                .lock()
                .forwarded(ino, offset, read_end, read_end);
            return Default::default();
        }
        self.mapped_offer((ino, offset, read_end), len, |span| {
            // Piece by piece, up to the first that cannot be had (more blocks than a range
            // may decode here, a block that does not decode).
            let mut decodes = MAX_ASKED;
            let mut bytes = vec![0u8; (span.end - span.start) as usize];
            let mut at = span.start;
            while at < span.end {
                let to = (at + PIECE).min(span.end);
                let into = &mut bytes[(at - span.start) as usize..(to - span.start) as usize];
                if self.ctable_assemble(view, at, into, &mut decodes).is_none() {
                    break;
                }
                at = to;
            }
            bytes.truncate((at - span.start) as usize);
            Pieces::from(ReadData::Owned(bytes))
        })
    }

    /// The spans of physical rows the bytes `span` of `table.npy` (rendered as `view`) read.
    fn ctable_spans(&self, view: &CTableView, span: Range<u64>) -> Vec<Span> {
        let t = &view.npy;
        let w = t.window(span.start, (span.end - span.start) as usize);
        let rb = t.row_bytes();
        if w.data.end <= w.data.start || rb == 0 {
            return Vec::new();
        }
        let (r0, r1) = (w.data.start / rb, w.data.end.div_ceil(rb));
        spans(t.segments(r0, r1), MAX_GAP)
    }

    /// Fills `out` with the bytes of `table.npy` (rendered as `view`) from `offset`, each
    /// row's fields copied from the columns' blocks (from the caches, else decoded here or
    /// waited for while `*decodes` allows, counted down); `None` when a block cannot be had
    /// or `out` runs past the file's end.
    fn ctable_assemble(
        &self,
        view: &CTableView,
        offset: u64,
        out: &mut [u8],
        decodes: &mut usize,
    ) -> Option<()> {
        let t = &view.npy;
        let w = t.window(offset, out.len());
        if w.out_len != out.len() {
            return None;
        }
        out.get_mut(..w.header.len())?
            .copy_from_slice(t.header().get(w.header.clone())?);
        let rb = t.row_bytes();
        if w.data.end <= w.data.start || rb == 0 {
            return Some(());
        }
        let (r0, r1) = (w.data.start / rb, w.data.end.div_ceil(rb));
        let mut rows = vec![0u8; usize::try_from((r1 - r0) * rb).ok()?];
        let mut col = Vec::new();
        for (p0, count, segs) in spans(t.segments(r0, r1), MAX_GAP) {
            for (c, geo) in view.columns.iter().zip(t.columns()) {
                if geo.atom == 0 {
                    continue;
                }
                col.clear();
                col.resize(usize::try_from(count * geo.atom).ok()?, 0);
                self.ctable_column(c, (p0 * geo.atom, &mut col), decodes)?;
                place(&col, (p0, &segs), (r0, rb, geo.offset, geo.atom), &mut rows)?;
            }
        }
        let from = usize::try_from(w.data.start - r0 * rb).ok()?;
        let n = usize::try_from(w.data.end - w.data.start).ok()?;
        out.get_mut(w.data_dst..)?
            .copy_from_slice(rows.get(from..from + n)?);
        Some(())
    }

    /// Fills `out` with the bytes of column `c`'s array from byte `from`, block by block (the
    /// block each byte lies in, from the caches, else decoded here or waited for while
    /// `*decodes` allows, counted down): never a whole chunk for a run that crosses blocks,
    /// as the reader's gather takes. `None` when a block cannot be had (not decoded, more
    /// than `*decodes`, or a chunk shorter than its shape).
    fn ctable_column(
        &self,
        c: &ViewColumn,
        (from, out): (u64, &mut [u8]),
        decodes: &mut usize,
    ) -> Option<()> {
        let store = c.store();
        for run in c.npy.layout().runs(from, out.len() as u64) {
            let id = ChunkId::new(c.array, run.chunk as usize);
            let (mut src, mut dst) = (run.src as usize, run.dst as usize);
            let end = src.saturating_add(run.len as usize);
            while src < end {
                let (bytes, at) = self.covering_within(store.as_ref(), id, src, decodes)?;
                let to = end.min(at.saturating_add(bytes.len()));
                let a = src.checked_sub(at).filter(|_| to > src)?;
                let piece = bytes.get(a..a + (to - src))?;
                out.get_mut(dst..dst + piece.len())?.copy_from_slice(piece);
                dst += piece.len();
                src = to;
            }
        }
        Some(())
    }
}

/// Places a column's bytes `col` (its physical rows from `p0`) into the records `rows`
/// (logical rows from `r0`, `rb` bytes each, the field at `offset`, `atom` bytes a row): the
/// valid rows `segs` (`(logical, physical, rows)`). `None` when they do not fit. Shared
/// with the ordinary reads of `table.npy` (`Tree::ctable_read`).
pub(in crate::tree) fn place(
    col: &[u8],
    (p0, segs): (u64, &[(u64, u64, u64)]),
    (r0, rb, offset, atom): (u64, u64, u64, u64),
    rows: &mut [u8],
) -> Option<()> {
    let a = usize::try_from(atom).ok()?;
    let rb = usize::try_from(rb).ok()?;
    for &(logical, phys, n) in segs {
        let from = usize::try_from((phys.checked_sub(p0)?).checked_mul(atom)?).ok()?;
        let src = col.get(from..from.checked_add(usize::try_from(n).ok()?.checked_mul(a)?)?)?;
        let first = usize::try_from((logical.checked_sub(r0)?) * rb as u64 + offset).ok()?;
        // The last record's field must fit: then every one before it does.
        let last = first + (src.len() / a.max(1)).saturating_sub(1) * rb;
        rows.get(last..last.checked_add(a)?)?;
        // A copy of a known width per row (a move, not a call), for the usual widths.
        match a {
            1 => scatter::<1>(src, &mut rows[first..], rb),
            2 => scatter::<2>(src, &mut rows[first..], rb),
            4 => scatter::<4>(src, &mut rows[first..], rb),
            8 => scatter::<8>(src, &mut rows[first..], rb),
            16 => scatter::<16>(src, &mut rows[first..], rb),
            _ => {
                for (i, item) in src.chunks_exact(a).enumerate() {
                    rows[first + i * rb..first + i * rb + a].copy_from_slice(item);
                }
            }
        }
    }
    Some(())
}

/// Copies the `A`-byte items of `src` to `dst` at every `rb` bytes from its start (the caller
/// checked that the last one fits).
fn scatter<const A: usize>(src: &[u8], dst: &mut [u8], rb: usize) {
    for (i, item) in src.chunks_exact(A).enumerate() {
        let at = i * rb;
        dst[at..at + A].copy_from_slice(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_close_together_share_a_span_and_a_deleted_range_does_not() {
        // (logical, physical, rows): a row deleted at 10, then 2,000 rows deleted at 31.
        let segs = vec![(0, 0, 10), (10, 11, 20), (30, 2031, 5)];
        let got = spans(segs, MAX_GAP);
        assert_eq!(
            got,
            vec![
                (0, 31, vec![(0, 0, 10), (10, 11, 20)]),
                (2031, 5, vec![(30, 2031, 5)]),
            ]
        );
        assert_eq!(spans(Vec::new(), MAX_GAP), Vec::<Span>::new());
        // A gap of exactly the bound is read through; one more is not.
        assert_eq!(spans(vec![(0, 0, 1), (1, 5, 1)], 4).len(), 1);
        assert_eq!(spans(vec![(0, 0, 1), (1, 6, 1)], 4).len(), 2);
    }

    #[test]
    fn a_columns_valid_rows_go_to_their_field_of_each_record() {
        // A column of 2-byte rows, physical rows 10..16 read; rows 12 and 13 deleted.
        let col: Vec<u8> = (10u8..16).flat_map(|r| [r, 100 + r]).collect();
        let segs = [(4, 10, 2), (6, 14, 2)];
        // Records of 5 bytes from logical row 4, the field at byte 1.
        let mut rows = vec![0u8; 4 * 5];
        place(&col, (10, &segs), (4, 5, 1, 2), &mut rows).unwrap();
        assert_eq!(
            rows,
            [
                0, 10, 110, 0, 0, 0, 11, 111, 0, 0, 0, 14, 114, 0, 0, 0, 15, 115, 0, 0
            ]
        );
        // Rows that do not fit: None, not a panic.
        let mut short = vec![0u8; 3 * 5];
        assert!(place(&col, (10, &segs), (4, 5, 1, 2), &mut short).is_none());
        assert!(place(&col[..6], (10, &segs), (4, 5, 1, 2), &mut rows).is_none());
    }
}
