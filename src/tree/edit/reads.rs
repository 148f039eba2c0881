//! Reads of chunks that have a pending edit: a window of one chunk (a chunk file, a Zarr
//! chunk object laid out as the chunk) and the runs of many (`array.npy`, `table.npy`, a
//! re-laid-out Zarr chunk object, [`Tree::fill_runs`]).
//!
//! A buffer in memory is copied under the edits lock (a copy of the bytes asked for). A
//! spilled one is read with the lock released: the reader takes a holder of its slot under
//! the lock (while it holds it, nobody patches or cuts it: `edit/pending.rs`), reads, and
//! gives it back under the lock. A read of runs reads each spilled chunk once, over the span
//! its runs cover, and copies the runs from that: a 1 MiB read of `array.npy` across a spilled
//! 2-D chunk is one `pread` of it, not one per row.

use std::collections::HashMap;
use std::sync::Arc;

use super::spill::Slot;
use crate::container::ndim::Run;
use crate::reader::{ArrayId, ChunkId, ChunkStore};
use crate::tree::{Tree, TreeError};

/// The bytes `[start, start + bytes.len())` of a spilled chunk of `len` bytes, read once for
/// the runs of one read.
struct Span {
    start: usize,
    bytes: Vec<u8>,
    len: usize,
}

impl Span {
    /// Copies chunk bytes `[src, src + dst.len())` into `dst`: `false` when they are not all
    /// within the chunk.
    fn copy(&self, src: usize, dst: &mut [u8]) -> bool {
        let Some(end) = src.checked_add(dst.len()).filter(|&e| e <= self.len) else {
            return false;
        };
        let at = src.checked_sub(self.start);
        match at.and_then(|at| self.bytes.get(at..end - self.start)) {
            Some(piece) => {
                dst.copy_from_slice(piece);
                true
            }
            None => false,
        }
    }
}

impl Tree {
    /// Bytes `[offset, offset + size)` of chunk `id`'s pending edit (cut at its end), if it
    /// has one: from memory, or read back from the spill file with the edits lock released.
    ///
    /// # Errors
    /// The spill file could not be read (`Edits::spill_error`).
    pub(crate) fn edited_window(
        &self,
        id: ChunkId,
        offset: u64,
        size: u32,
    ) -> Result<Option<Vec<u8>>, TreeError> {
        let slot = {
            let edits = self.edits.lock();
            match edits.spilled_slot(id) {
                Some(slot) => slot,
                None => {
                    return edits
                        .chunk_window(id, offset, size)
                        .transpose()
                        .map_err(|e| edits.spill_error(e));
                }
            }
        };
        let w = crate::reader::window(slot.len(), offset, size);
        let mut out = vec![0; w.len()];
        let res = if out.is_empty() {
            Ok(())
        } else {
            slot.read_at(w.start, &mut out)
        };
        let mut edits = self.edits.lock();
        edits.release_slot(slot);
        res.map(|()| Some(out)).map_err(|e| edits.spill_error(e))
    }

    /// Copies `runs` of chunks of `array` into `out` ([`crate::reader::ChunkReader::gather`]:
    /// the block each run falls in when `small`, else whole chunks), from edit buffers where
    /// a chunk has one and `buffers` says the reader sees them.
    pub(crate) fn fill_runs(
        &self,
        ino: u64,
        (store, array, buffers): (&dyn ChunkStore, ArrayId, bool),
        runs: impl Iterator<Item = Run>,
        small: bool,
        out: &mut [u8],
    ) -> Result<(), TreeError> {
        let container = |source| TreeError::Container { ino, source };
        // One look at the edits per read (a 1 MiB read of an N-dim array is hundreds of runs).
        let edited = buffers
            && self.options.writable
            && self.edits.lock().chunk_ids().any(|id| id.array == array);
        if !edited {
            return self
                .reader
                .gather((store, array), runs, small, out, None)
                .map_err(container);
        }
        let runs: Vec<Run> = runs.collect();
        let spans = self.spilled_spans(array, &runs)?;
        // A buffer spilled after that look is read under the lock (rare): its error fails the
        // read with its own errno.
        let mut failed: Option<std::io::Error> = None;
        let mut from_buffer = |id: ChunkId, src: usize, dst: &mut [u8]| {
            if let Some(span) = spans.get(&id.index) {
                return Some(span.copy(src, dst));
            }
            match self.edits.lock().copy_chunk(id, src, dst)? {
                Ok(within) => Some(within),
                Err(e) => {
                    failed = Some(e);
                    Some(false)
                }
            }
        };
        let res = self
            .reader
            .gather(
                (store, array),
                runs.into_iter(),
                small,
                out,
                Some(&mut from_buffer),
            )
            .map_err(container);
        match failed {
            Some(e) => Err(self.edits.lock().spill_error(e)),
            None => res,
        }
    }

    /// For each chunk of `array` that `runs` touch and whose buffer is spilled now: the span
    /// of it the runs cover, read with one `pread` per chunk while the edits lock is released.
    ///
    /// # Errors
    /// The spill file could not be read.
    fn spilled_spans(
        &self,
        array: ArrayId,
        runs: &[Run],
    ) -> Result<HashMap<usize, Span>, TreeError> {
        let mut cover: HashMap<usize, (usize, usize)> = HashMap::new();
        for r in runs {
            let (src, end) = (r.src as usize, (r.src + r.len) as usize);
            let c = cover.entry(r.chunk as usize).or_insert((src, end));
            *c = (c.0.min(src), c.1.max(end));
        }
        let held: Vec<(usize, Arc<Slot>, (usize, usize))> = {
            let edits = self.edits.lock();
            cover
                .into_iter()
                .filter_map(|(c, span)| {
                    let slot = edits.spilled_slot(ChunkId::new(array, c))?;
                    Some((c, slot, span))
                })
                .collect()
        };
        if held.is_empty() {
            return Ok(HashMap::new());
        }
        let mut spans = HashMap::with_capacity(held.len());
        let mut failed = None;
        for (c, slot, (start, end)) in &held {
            let len = slot.len();
            let end = (*end).min(len);
            let start = (*start).min(end);
            let mut bytes = vec![0; end - start];
            if !bytes.is_empty() {
                if let Err(e) = slot.read_at(start, &mut bytes) {
                    failed = Some(e);
                    break;
                }
            }
            spans.insert(*c, Span { start, bytes, len });
        }
        let mut edits = self.edits.lock();
        for (_, slot, _) in held {
            edits.release_slot(slot);
        }
        match failed {
            Some(e) => Err(edits.spill_error(e)),
            None => Ok(spans),
        }
    }
}
