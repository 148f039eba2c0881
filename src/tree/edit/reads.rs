//! Reads of chunks that have a pending edit: a window of one chunk (a chunk file, a Zarr
//! chunk object laid out as the chunk) and the runs of many (`array.npy`, `table.npy`, a
//! re-laid-out Zarr chunk object, [`Tree::fill_runs`]).
//!
//! A buffer in memory is copied under the edits lock (a copy of the bytes asked for). A
//! spilled one is read with the lock released: the reader takes a holder of its slot under
//! the lock (while it holds it, nobody patches or cuts it: `edit/pending.rs`), reads, and
//! gives it back under the lock. A read of runs reads each spilled chunk once, over the span
//! its runs cover, and copies the runs from that: a 1 MiB read of `array.npy` across a spilled
//! 2-D chunk is one `pread` of it, not one per row; runs scattered over much more of a chunk
//! than they need are read one by one instead (still without the lock), so that a read does
//! not allocate a large chunk's worth for a few rows.

use std::collections::HashMap;
use std::sync::Arc;

use super::spill::Slot;
use crate::container::ndim::Run;
use crate::reader::{ArrayId, ChunkId, ChunkStore};
use crate::tree::{Tree, TreeError};

/// Most bytes a read of runs reads of one spilled chunk beyond those its runs need (times
/// four, plus this): a span that would be larger (runs scattered over a large chunk) is read
/// run by run instead, so one read never allocates much more than it returns.
const SPAN_SLACK: usize = 64 << 10;

/// A spilled chunk of `len` bytes held for the runs of one read (nobody patches or cuts it
/// while it is held): its bytes `[start, start + bytes.len())` read once when the runs are
/// close together, else read run by run.
struct Span {
    slot: Arc<Slot>,
    start: usize,
    bytes: Vec<u8>,
    len: usize,
}

impl Span {
    /// Copies chunk bytes `[src, src + dst.len())` into `dst`: `Ok(false)` when they are not
    /// all within the chunk.
    fn copy(&self, src: usize, dst: &mut [u8]) -> std::io::Result<bool> {
        let Some(end) = src.checked_add(dst.len()).filter(|&e| e <= self.len) else {
            return Ok(false);
        };
        let at = src.checked_sub(self.start);
        match at.and_then(|at| self.bytes.get(at..end - self.start)) {
            Some(piece) => dst.copy_from_slice(piece),
            None => self.slot.read_at(src, dst)?,
        }
        Ok(true)
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
            let copied = match spans.get(&id.index) {
                Some(span) => span.copy(src, dst),
                None => self.edits.lock().copy_chunk(id, src, dst)?,
            };
            match copied {
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
        let mut edits = self.edits.lock();
        for (_, span) in spans {
            edits.release_slot(span.slot);
        }
        match failed {
            Some(e) => Err(edits.spill_error(e)),
            None => res,
        }
    }

    /// For each chunk of `array` that `runs` touch and whose buffer is spilled now: its slot,
    /// held until the caller gives it back, and the span of it the runs cover, read with one
    /// `pread` while the edits lock is released (unless that span is much larger than what
    /// the runs need: then they read it run by run, still without the lock).
    ///
    /// # Errors
    /// The spill file could not be read (the slots are given back).
    fn spilled_spans(
        &self,
        array: ArrayId,
        runs: &[Run],
    ) -> Result<HashMap<usize, Span>, TreeError> {
        // Per chunk: the first and last byte the runs cover, and the bytes they need.
        type Cover = (usize, usize, usize);
        let mut cover: HashMap<usize, Cover> = HashMap::new();
        for r in runs {
            let (src, len) = (r.src as usize, r.len as usize);
            let end = src.saturating_add(len);
            let c = cover.entry(r.chunk as usize).or_insert((src, end, 0));
            *c = (c.0.min(src), c.1.max(end), c.2.saturating_add(len));
        }
        let held: Vec<(usize, Arc<Slot>, Cover)> = {
            let edits = self.edits.lock();
            cover
                .into_iter()
                .filter_map(|(c, cover)| {
                    let slot = edits.spilled_slot(ChunkId::new(array, c))?;
                    Some((c, slot, cover))
                })
                .collect()
        };
        let mut spans = HashMap::with_capacity(held.len());
        let mut failed = None;
        for (c, slot, (start, end, need)) in held {
            let len = slot.len();
            let end = end.min(len);
            let start = start.min(end);
            let close = end - start <= need.saturating_mul(4).saturating_add(SPAN_SLACK);
            let mut bytes = match close && failed.is_none() {
                true => vec![0; end - start],
                false => Vec::new(),
            };
            if !bytes.is_empty()
                && let Err(e) = slot.read_at(start, &mut bytes)
            {
                failed = Some(e);
                bytes = Vec::new();
            }
            spans.insert(
                c,
                Span {
                    slot,
                    start,
                    bytes,
                    len,
                },
            );
        }
        match failed {
            Some(e) => {
                let mut edits = self.edits.lock();
                for (_, span) in spans {
                    edits.release_slot(span.slot);
                }
                Err(edits.spill_error(e))
            }
            None => Ok(spans),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::spill::SpillFile;
    use super::*;

    #[test]
    fn a_span_copies_from_its_bytes_or_reads_the_slot_and_refuses_past_the_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = SpillFile::new(dir.path().to_path_buf());
        let chunk: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let slot = file.reserve(chunk.len()).unwrap();
        slot.fill(&chunk).unwrap();
        // Bytes 100..300 read ahead; the rest of the chunk only through the slot.
        let span = Span {
            slot: slot.clone(),
            start: 100,
            bytes: chunk[100..300].to_vec(),
            len: chunk.len(),
        };
        for (src, n) in [(100, 200), (150, 10), (0, 50), (290, 20), (900, 100)] {
            let mut dst = vec![0; n];
            assert!(span.copy(src, &mut dst).unwrap(), "{src}+{n}");
            assert_eq!(dst, chunk[src..src + n], "{src}+{n}");
        }
        assert!(!span.copy(990, &mut [0; 11]).unwrap());
        assert!(!span.copy(usize::MAX, &mut [0; 2]).unwrap());
        drop(span);
        file.release(slot);
    }
}
