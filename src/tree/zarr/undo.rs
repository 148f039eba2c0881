//! Chunk removals a refused resize takes back. zarr-python's `resize` removes the chunk
//! objects that lie wholly outside the new shape, each `unlink` zeroing and committing its
//! chunk (`write.rs`), and only then renames the new `zarr.json` over the old one. When that
//! rename is refused (another axis, a table's column, too many chunks: `resize.rs`), the
//! zeros would stay although the resize never happened. So each removal keeps the chunk's
//! content from before it, for a short while and within a bound, and a refused shape change
//! of the same array commits back, in one commit, the removed chunks that lie outside the
//! shape it asked for: the source is as it was before the writer began.
//!
//! Taken back only while the removals are the last commits to the array (its version is the
//! one the last removal made, and no other commit touched its chunks: a write in between
//! ends the chain, and so does a removal's commit failing), with no pause longer than
//! [`UNDO_WINDOW`] between them or after the last; a chunk removed twice in a chain is put
//! back as it was before its last removal (zeros, when an earlier removal zeroed it on
//! purpose). Removals run one at a time (`Tree::zarr_unlink` holds a turn from the
//! content's copy to its commit's end). Within [`MAX_UNDO_BYTES`] and
//! [`MAX_UNDO_CHUNKS`] (the oldest go first: those can no longer be taken back, and the
//! log says so when a refusal wanted them). Expired chains go at the next commit or reload
//! of any array, so the memory they hold is the daemon's only that long.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::Tree;
use crate::commit::ChunkEdit;
use crate::reader::{ArrayId, ChunkId, Snapshot};

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
    /// Each removed chunk with its decoded content before its last removal.
    chunks: Vec<(usize, Vec<u8>)>,
    /// Whether chunks of this chain were dropped for the bounds.
    dropped: bool,
}

/// The chains of removals (few arrays at a time: a chain ends at the next other commit).
#[derive(Debug, Default)]
pub(crate) struct Unlinked {
    chains: Vec<Chain>,
    /// The chunk whose removal is being committed now: any other commit to the chunks of an
    /// array ends its chain ([`Tree::zarr_chunk_committed`]).
    current: Option<ChunkId>,
}

impl Unlinked {
    fn bytes(&self) -> usize {
        self.chains
            .iter()
            .flat_map(|c| &c.chunks)
            .map(|(_, d)| d.len())
            .sum()
    }

    fn count(&self) -> usize {
        self.chains.iter().map(|c| c.chunks.len()).sum()
    }

    /// Drops the chains whose last removal is older than [`UNDO_WINDOW`], but the one whose
    /// removal is being committed now (a slow commit, a large `.b2z` rebuilt, is no pause).
    pub(crate) fn expire(&mut self) {
        if !self.chains.is_empty() {
            let busy = self.current.map(|c| c.array);
            self.chains
                .retain(|c| Some(c.array) == busy || c.at.elapsed() < UNDO_WINDOW);
        }
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

/// Whether version `now` is the one `after` names.
fn same_version(after: &Weak<Snapshot>, now: &Arc<Snapshot>) -> bool {
    std::ptr::eq(after.as_ptr(), Arc::as_ptr(now))
}

impl Tree {
    /// Before chunk object `id`'s removal is committed: `content`, what it read just before
    /// (its buffer before the zeros), kept so that a refused resize can take the removal
    /// back (starting a new chain when the array changed otherwise since the last removal).
    /// Nothing is kept when it is larger than the bound or a shard of the sharded view
    /// (never taken back), and the array's chain ends. Call [`Tree::zarr_unlink_ends`]
    /// after its commit, both under the removal turn.
    pub(super) fn zarr_unlink_begins(&self, id: ChunkId, content: Vec<u8>) {
        let Some(live) = self.live(id.array) else {
            return;
        };
        let before = live.snapshot();
        let sharded = self.zarr_sharded(id.array);
        let content = (!sharded && content.len() <= MAX_UNDO_BYTES).then_some(content);
        let mut u = self.zarr.unlinked.lock();
        u.expire();
        u.chains
            .retain(|c| c.array != id.array || same_version(&c.after, &before));
        u.current = Some(id);
        let Some(content) = content else {
            u.chains.retain(|c| c.array != id.array);
            return;
        };
        match u.chains.iter_mut().find(|c| c.array == id.array) {
            Some(c) => {
                // Removed before in this chain: what it holds now is what this removal
                // replaces (zeros, when the earlier one was meant).
                c.chunks.retain(|(i, _)| *i != id.index);
                c.chunks.push((id.index, content));
            }
            None => u.chains.push(Chain {
                array: id.array,
                after: Weak::new(),
                at: Instant::now(),
                chunks: vec![(id.index, content)],
                dropped: false,
            }),
        }
        u.bound();
    }

    /// After chunk object `id`'s removal: `committed`, the chain goes on from the version
    /// it made; else it ends.
    pub(super) fn zarr_unlink_ends(&self, id: ChunkId, committed: bool) {
        let now = self.live(id.array).map(|l| l.snapshot());
        let mut u = self.zarr.unlinked.lock();
        u.current = None;
        match (committed, now) {
            (true, Some(now)) => {
                if let Some(c) = u.chains.iter_mut().find(|c| c.array == id.array) {
                    c.after = Arc::downgrade(&now);
                    c.at = Instant::now();
                }
            }
            _ => u.chains.retain(|c| c.array != id.array),
        }
    }

    /// A commit changed chunk `id`: unless it is the removal being committed, the chain of
    /// its array ends (what it would put back is no longer what the removals replaced).
    pub(crate) fn zarr_chunk_committed(&self, id: ChunkId) {
        let mut u = self.zarr.unlinked.lock();
        if u.chains.is_empty() || u.current == Some(id) {
            return;
        }
        u.chains.retain(|c| c.array != id.array);
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
        let chain = {
            let mut u = self.zarr.unlinked.lock();
            let Some(at) = u.chains.iter().position(|c| c.array == array) else {
                return 0;
            };
            u.chains.remove(at)
        };
        let Some(live) = self.live(array) else {
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
        let back: Vec<(usize, Vec<u8>)> = chain
            .chunks
            .into_iter()
            .filter(|(i, _)| outside(*i))
            .collect();
        if back.is_empty() {
            return 0;
        }
        let mut committer = self.committer.lock();
        let still = same_version(&chain.after, &live.snapshot())
            && chain.at.elapsed() < UNDO_WINDOW
            && !self.edits.lock().chunk_ids().any(|c| c.array == array);
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
                data,
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

/// Whether a refused `zarr.json` rename asked for another shape, and which.
pub(super) fn wanted_shape(new: &serde_json::Value, shown: &serde_json::Value) -> Option<Vec<u64>> {
    let (Value::Object(new), Value::Object(shown)) = (new, shown) else {
        return None;
    };
    let wanted = super::resize::shape_of(new)?;
    (Some(&wanted) != super::resize::shape_of(shown).as_ref()).then_some(wanted)
}
