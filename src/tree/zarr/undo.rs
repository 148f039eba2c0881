//! Removals of chunk objects, and their take-back after a refused resize. zarr-python's
//! `resize` removes the chunk objects that lie wholly outside the new shape, then renames the
//! new `zarr.json` over the old one. Each removal commits its chunk as zeros (the fill value)
//! at once ([`Tree::zarr_remove`]). When the rename is refused (another axis, a table's
//! column, too many chunks: `resize.rs`), those zeros would stay although the resize never
//! happened. So each removal keeps the chunk's stored content from before it, for a short
//! while and within a bound, and a refused shape change of the same array commits back, in
//! one commit, the removed chunks that lie outside the shape it asked for: the source is as
//! it was before the writer began.
//!
//! A removal and a take-back each run under the mount's committer, as every commit and
//! reload does, so a chain of removals can be checked with the array's version alone: each
//! removal starts from the version the one before made, and a take-back finds the version the
//! last one made. Any other commit to the array (a write in between) or reload (another
//! writer) ends the chain, and so does a removal's commit failing; so does a pause longer
//! than [`UNDO_WINDOW`] between two removals or after the last. A chunk removed twice in a
//! chain is put back as it was before its last removal (zeros, when an earlier removal zeroed
//! it on purpose). Within [`MAX_UNDO_BYTES`] and [`MAX_UNDO_CHUNKS`] (the oldest go first:
//! those can no longer be taken back, and the log says so when a refusal wanted them; a
//! single chunk larger than [`MAX_UNDO_BYTES`] is not kept and ends its array's chain, with
//! no log line at the refusal).
//! Expired chains go at the next commit or reload of any array, so the memory they hold is
//! the daemon's only that long. Removals of the sharded view's shards are never taken back.
//!
//! A chunk that does not decode (damaged) is removed all the same: the commit needs only its
//! length (from its header or the source's index, else from the array's geometry), and
//! zeroing a damaged chunk is what its user wants. Its content cannot be kept, and its stored
//! bytes are not (a commit encodes decoded chunks, and they would bring back the damage, not
//! the data): a take-back leaves it at the fill value and the log names it; the chain goes on,
//! so the healthy chunks removed with it are put back.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::{Tree, TreeError};
use crate::commit::{ChunkEdit, Zeros};
use crate::container::ContainerError;
use crate::reader::{ArrayId, Bytes, ChunkId, Snapshot};

/// How long after the last removal of a chain its removals can be taken back, and the
/// longest pause between two removals of one chain: zarr-python removes the chunks and
/// renames the new `zarr.json` within milliseconds of each other.
pub const UNDO_WINDOW: Duration = Duration::from_secs(5);
/// The most bytes of removed chunks' content kept.
pub const MAX_UNDO_BYTES: usize = 64 << 20;
/// The most removed chunks kept.
pub const MAX_UNDO_CHUNKS: usize = 4096;

/// The removals of one array's chunk objects that can still be taken back.
#[derive(Debug)]
struct Chain {
    array: ArrayId,
    /// The version the last removal committed.
    after: Weak<Snapshot>,
    /// When the last removal was.
    at: Instant,
    /// Each removed chunk with its decoded content before its last removal; `None` for a
    /// chunk that did not decode then (damaged): its removal is not taken back.
    chunks: Vec<(usize, Option<Bytes>)>,
    /// Whether chunks of this chain were dropped for the bounds.
    dropped: bool,
}

impl Chain {
    /// Whether the chain goes on (or is taken back) from version `now`: the last removal
    /// made it, within [`UNDO_WINDOW`].
    fn goes_on_from(&self, now: &Arc<Snapshot>) -> bool {
        std::ptr::eq(self.after.as_ptr(), Arc::as_ptr(now)) && self.at.elapsed() < UNDO_WINDOW
    }
}

/// The chains of removals (few arrays at a time: a chain ends at the next other commit).
#[derive(Debug, Default)]
pub(crate) struct Unlinked {
    chains: Vec<Chain>,
}

impl Unlinked {
    fn bytes(&self) -> usize {
        self.chains
            .iter()
            .flat_map(|c| &c.chunks)
            .filter_map(|(_, d)| d.as_ref().map(|d| d.len()))
            .sum()
    }

    fn count(&self) -> usize {
        self.chains.iter().map(|c| c.chunks.len()).sum()
    }

    /// Drops the chains whose last removal is older than [`UNDO_WINDOW`].
    pub(crate) fn expire(&mut self) {
        self.chains.retain(|c| c.at.elapsed() < UNDO_WINDOW);
    }

    /// Takes the chain of `array` out, if it has one.
    fn take(&mut self, array: ArrayId) -> Option<Chain> {
        self.expire();
        let at = self.chains.iter().position(|c| c.array == array)?;
        Some(self.chains.remove(at))
    }

    /// Drops the oldest kept chunks until the bounds hold.
    fn bound(&mut self) {
        while self.bytes() > MAX_UNDO_BYTES || self.count() > MAX_UNDO_CHUNKS {
            let Some(c) = self.chains.iter_mut().find(|c| !c.chunks.is_empty()) else {
                break;
            };
            c.chunks.remove(0);
            c.dropped = true;
        }
        self.chains.retain(|c| !c.chunks.is_empty() || c.dropped);
    }
}

impl Tree {
    /// Removes chunk object `ino`, chunk `id`: the chunk becomes zeros (the fill value),
    /// committed at once under the committer; a buffer of it (writes not committed) goes.
    /// Its stored content from before is kept for a refused resize to take back (see the
    /// module doc); a damaged chunk (it does not decode) is zeroed with nothing kept.
    ///
    /// # Errors
    /// [`TreeError::StaleBase`] (ESTALE) when another writer replaced the chunk and the mount
    /// had not followed yet (it follows now: a retry applies); read and commit errors.
    pub(super) fn zarr_remove(&self, ino: u64, id: ChunkId) -> Result<(), TreeError> {
        let live = self.writable_array(id.array)?;
        let mut committer = self.committer.lock();
        // The content is decoded only to be kept for a take-back: a shard's removal is never
        // taken back, and its length is all the commit needs.
        let sharded = self.zarr_sharded(id.array);
        let content = match sharded {
            true => self.reader.chunk_nbytes(id).map(|n| (n, Kept::Nothing)),
            false => match self.reader.chunk(id) {
                Ok(c) => Ok((c.len(), Kept::Content(c))),
                Err(e) if e.is_chunk_damage() => {
                    self.damaged_len(id, e).map(|n| (n, Kept::Damaged))
                }
                Err(e) => Err(e),
            },
        };
        let (len, content) = match content {
            Ok(c) => c,
            Err(source @ ContainerError::Changed { .. }) => {
                drop(committer);
                self.follow_source();
                return Err(TreeError::StaleBase { ino, source });
            }
            Err(source) => return Err(TreeError::Container { ino, source }),
        };
        let before = live.snapshot();
        // Out of the list while the commit runs (its reload expires chains).
        let chain = self.zarr.unlinked.lock().take(id.array);
        let chain = chain.filter(|c| c.goes_on_from(&before));
        let zeros = Zeros(len);
        // An array made through the view with another fill value (xarray's NaN for floats,
        // `create.rs`) reads as that fill where its writer removed a chunk.
        let filled: Option<Vec<u8>> = self
            .zarr_declared(id.array)
            .filter(|d| d.fill.iter().any(|&b| b != 0))
            .map(|d| d.fill.iter().copied().cycle().take(len).collect());
        let data: &dyn crate::commit::ChunkBytes = match &filled {
            Some(f) => f,
            None => &zeros,
        };
        let edit = [ChunkEdit {
            index: id.index,
            data,
            append: false,
        }];
        // Writes not committed when the object is removed go with it: dropped before the
        // commit, so that a write made after the commit (on the zeros) is never dropped. One
        // that raced in between was made on the old content: it is marked stale (its commit
        // fails with ESTALE) rather than kept to put that content back.
        self.drop_pending(ino);
        let res = self.commit_chunk_edits(ino, id.array, &edit, None, &mut committer);
        if let Some(raced) = self.edits.lock().chunk_mut(id) {
            raced.stale = true;
        }
        let content = match content {
            _ if res.is_err() => return res,
            Kept::Content(c) if c.len() <= MAX_UNDO_BYTES => Some(c),
            Kept::Damaged => None,
            Kept::Content(_) | Kept::Nothing => return res,
        };
        let mut chain = chain.unwrap_or_else(|| Chain {
            array: id.array,
            after: Weak::new(),
            at: Instant::now(),
            chunks: Vec::new(),
            dropped: false,
        });
        // Removed before in this chain: what it held now is what this removal replaced
        // (zeros, when the earlier one was meant).
        chain.chunks.retain(|(i, _)| *i != id.index);
        chain.chunks.push((id.index, content));
        chain.after = Arc::downgrade(&live.snapshot());
        chain.at = Instant::now();
        let mut u = self.zarr.unlinked.lock();
        u.chains.push(chain);
        u.bound();
        res
    }

    /// A shape change to `wanted` of `array` (`path`) was refused: the removals of its chunk
    /// objects that lie wholly outside `wanted` are taken back in one commit, if they are
    /// still the array's last commits. Returns how many chunks were put back.
    pub(super) fn zarr_take_back_unlinks(
        &self,
        array: ArrayId,
        wanted: &[u64],
        path: &str,
    ) -> usize {
        let Some(live) = self.live(array) else {
            return 0;
        };
        let mut committer = self.committer.lock();
        let Some(chain) = self.zarr.unlinked.lock().take(array) else {
            return 0;
        };
        let Ok(geom) = self.zarr_geom(array, None) else {
            return 0;
        };
        if geom.shard.is_some() || wanted.len() != geom.shape.len() {
            return 0;
        }
        let grid = &geom.grid;
        // Wholly outside `wanted`: some coordinate's chunk starts at or past its length.
        let outside = |index: usize| {
            let mut rest = index as u64;
            let mut coords = vec![0u64; grid.len()];
            for d in (0..grid.len()).rev() {
                coords[d] = rest % grid[d].max(1);
                rest /= grid[d].max(1);
            }
            coords
                .iter()
                .zip(&geom.chunks)
                .zip(wanted)
                .any(|((k, c), w)| k * c >= *w)
        };
        let still = chain.goes_on_from(&live.snapshot())
            && !self.edits.lock().chunk_ids().any(|c| c.array == array);
        let (back, damaged): (Vec<_>, Vec<_>) = chain
            .chunks
            .into_iter()
            .filter(|(i, _)| outside(*i))
            .partition(|(_, d)| d.is_some());
        let back: Vec<(usize, Bytes)> = back
            .into_iter()
            .filter_map(|(i, d)| Some((i, d?)))
            .collect();
        if !damaged.is_empty() {
            let which: Vec<usize> = damaged.iter().map(|(i, _)| *i).collect();
            log::warn!(
                "{path}: the chunks {which:?} removed before the refused resize did not decode \
                 (damaged): they are not put back and hold the fill value"
            );
        }
        if back.is_empty() {
            return 0;
        }
        if !still {
            log::warn!(
                "{path}: the {} chunk objects removed before the refused resize cannot be put \
                 back (the array changed since, or it was too long ago): they hold the fill value",
                back.len()
            );
            return 0;
        }
        let edits: Vec<ChunkEdit<'_>> = back
            .iter()
            .map(|(index, data)| ChunkEdit {
                index: *index,
                data: &**data,
                append: false,
            })
            .collect();
        let ino = self.inodes.chunk_ino(ChunkId::new(array, 0));
        match self.commit_chunk_edits(ino, array, &edits, None, &mut committer) {
            Ok(()) => {
                let lost = if chain.dropped {
                    " (more were removed than can be kept: those hold the fill value)"
                } else {
                    ""
                };
                log::warn!(
                    "{path}: the resize was refused: the {} chunk objects removed before it \
                     (outside the shape it asked for) are put back{lost}",
                    back.len()
                );
                back.len()
            }
            Err(e) => {
                log::warn!(
                    "{path}: the chunk objects removed before the refused resize could not be \
                     put back: {e}"
                );
                0
            }
        }
    }
}

/// What a removal keeps of the chunk it zeroes, for a take-back.
enum Kept {
    /// Its decoded content.
    Content(Bytes),
    /// Nothing: it did not decode. Its stored bytes are not kept either: a commit encodes
    /// decoded chunks only, and putting back bytes no reader can decode would give the
    /// source back its damage, not its data.
    Damaged,
    /// Nothing, and the chain ends (a shard's removal, which is never taken back).
    Nothing,
}

impl Tree {
    /// The decoded length of chunk `id`, which did not decode (`why`): from its header or
    /// the source's index when they still read, else from the array's geometry (what the
    /// view shows as its chunk object's size).
    fn damaged_len(&self, id: ChunkId, why: ContainerError) -> Result<usize, ContainerError> {
        match self.reader.chunk_nbytes(id) {
            Ok(n) => return Ok(n),
            Err(e) if !e.is_chunk_damage() => return Err(e),
            Err(_) => {}
        }
        let geom = self.zarr_geom(id.array, None).ok();
        geom.filter(|g| (id.index as u64) < g.nchunks())
            .and_then(|g| usize::try_from(g.chunk_len(id.index as u64)).ok())
            .ok_or(why)
    }
}

/// Whether a refused `zarr.json` rename asked for another shape, and which.
pub(super) fn wanted_shape(new: &serde_json::Value, shown: &serde_json::Value) -> Option<Vec<u64>> {
    let (Value::Object(new), Value::Object(shown)) = (new, shown) else {
        return None;
    };
    let wanted = super::resize::shape_of(new)?;
    (Some(&wanted) != super::resize::shape_of(shown).as_ref()).then_some(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(array: u32, chunks: usize, bytes: usize, ago: Duration) -> Chain {
        Chain {
            array: ArrayId(array),
            after: Weak::new(),
            at: Instant::now().checked_sub(ago).unwrap(),
            chunks: (0..chunks)
                .map(|i| (i, Some(Arc::new(vec![0; bytes]))))
                .collect(),
            dropped: false,
        }
    }

    /// Past either bound the oldest chunks go first (the older chain's, then the oldest of
    /// the next), and their chain says so; chains past the window go whole.
    #[test]
    fn the_oldest_removals_go_first_and_chains_expire() {
        let mut u = Unlinked::default();
        u.chains.push(chain(0, 2, 8, Duration::ZERO));
        u.chains.push(chain(1, MAX_UNDO_CHUNKS, 1, Duration::ZERO));
        u.bound();
        assert_eq!(u.count(), MAX_UNDO_CHUNKS);
        assert!(u.chains[0].chunks.is_empty() && u.chains[0].dropped);
        assert!(!u.chains[1].dropped);
        u.chains[1]
            .chunks
            .push((MAX_UNDO_CHUNKS, Some(Arc::new(vec![0; MAX_UNDO_BYTES]))));
        u.bound();
        assert_eq!(u.bytes(), MAX_UNDO_BYTES, "the newest chunk alone is kept");
        assert_eq!(u.chains[1].chunks.len(), 1);
        assert!(u.chains[1].dropped);
        u.chains.push(chain(2, 1, 1, UNDO_WINDOW));
        u.expire();
        assert!(u.chains.iter().all(|c| c.array != ArrayId(2)));
        assert!(u.take(ArrayId(1)).is_some());
        assert!(u.take(ArrayId(1)).is_none(), "taken out");
    }
}
