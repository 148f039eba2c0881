//! Assembly of a file from pieces of many chunks (`array.npy`, a re-laid-out Zarr chunk
//! object): a list of runs `(chunk, offset in the decoded chunk, length, offset in the
//! output)`, as the container layer's geometry gives them, copied out of the caches with each
//! chunk (or block) fetched once per group of consecutive runs it covers. Runs of chunks the
//! caller holds an edit of are filled by the caller ([`ChunkReader::gather`]'s `edited`).

use super::{ArrayId, Bytes, ChunkId, ChunkReader, ChunkStore, ReadHint};
use crate::container::ContainerError;
use crate::container::ndim::Run;

/// Fills a run of a chunk from a buffer the caller holds for it: `(chunk, offset in the
/// decoded chunk, destination)`; `None` when it holds none, `Some(false)` when its buffer is
/// shorter than the run.
pub type FromBuffer<'a> = &'a mut dyn FnMut(ChunkId, usize, &mut [u8]) -> Option<bool>;

/// The error of a chunk of `store` whose decoded bytes are shorter than a run of the file
/// assembled from it needs.
pub(super) fn short_chunk(store: &dyn ChunkStore, id: ChunkId) -> ContainerError {
    ContainerError::Malformed {
        path: store.path().to_path_buf(),
        offset: 0,
        what: format!("chunk {}", id.index),
        why: "its decoded bytes are shorter than its shape needs".into(),
    }
}

impl ChunkReader {
    /// Copies `runs` of chunks of `array` (the version `store`) into `out`: the block each
    /// run falls in when `small` (a page fault, a seek-and-read), else whole chunks (a scan);
    /// a chunk that decodes to more than the cache budget only ever for the run's span.
    /// `edited`, when given, fills a run from a buffer the caller holds for its chunk (an
    /// edit not yet committed) and says whether it did.
    ///
    /// # Errors
    /// A chunk that cannot be read, or whose decoded bytes are shorter than a run needs.
    pub fn gather(
        &self,
        (store, array): (&dyn ChunkStore, ArrayId),
        runs: impl Iterator<Item = Run>,
        small: bool,
        out: &mut [u8],
        mut edited: Option<FromBuffer<'_>>,
    ) -> Result<(), ContainerError> {
        let short = |id: ChunkId| short_chunk(store, id);
        // The chunk index, the decoded bytes held and where they start in that chunk.
        let mut held: Option<(usize, Bytes, usize)> = None;
        // Per chunk: whether it may be decoded whole (not over the cache budget).
        let mut whole: Option<(usize, bool)> = None;
        for run in runs {
            let id = ChunkId::new(array, run.chunk as usize);
            let (src, len, dst) = (run.src as usize, run.len as usize, run.dst as usize);
            let dst = &mut out[dst..dst + len];
            if let Some(fill) = edited.as_mut() {
                match fill(id, src, dst) {
                    Some(true) => continue,
                    Some(false) => return Err(short(id)),
                    None => {}
                }
            }
            let covers = |(k, bytes, at): &(usize, Bytes, usize)| {
                *k == id.index && src >= *at && src + len <= at + bytes.len()
            };
            if !held.as_ref().is_some_and(covers) {
                let fits = match whole {
                    Some((k, fits)) if k == id.index => fits,
                    _ => {
                        let fits = self.fits_whole(id);
                        whole = Some((id.index, fits));
                        fits
                    }
                };
                let (bytes, at) = if small || !fits {
                    self.covering(store, id, src)?
                } else {
                    (self.chunk_in(store, id)?, 0)
                };
                held = Some((id.index, bytes, at));
                if !held.as_ref().is_some_and(covers) {
                    held = Some(if fits {
                        // A run across blocks (or past a short chunk's end): the whole chunk.
                        (id.index, self.chunk_in(store, id)?, 0)
                    } else {
                        // A chunk over the cache budget is never whole: this run only.
                        let got =
                            self.read_in(store, id, run.src, len as u32, ReadHint::RANDOM, || {
                                false
                            })?;
                        (id.index, std::sync::Arc::new(got.to_vec()), src)
                    });
                }
            }
            let Some((_, bytes, at)) = &held else {
                continue;
            };
            let piece = bytes
                .get(src - at..src - at + len)
                .ok_or_else(|| short(id))?;
            dst.copy_from_slice(piece);
        }
        Ok(())
    }

    /// Whether chunk `id` may be decoded whole for a read: not when it decodes to more than
    /// the cache budget ([`ChunkReader::over_budget`]; a size that cannot be read is left to
    /// the decode to report).
    pub fn fits_whole(&self, id: ChunkId) -> bool {
        self.chunk_nbytes(id).map_or(true, |n| !self.over_budget(n))
    }
}
