//! What the kernel must forget of the view after another writer changed the source (the
//! [`crate::tree::Invalidation`]s `follow.rs` sends): every `zarr.json`, the chunk objects
//! whose chunks changed, and an array's `c` entry when its chunk count changed (the chunk
//! tree below it may have other names and shape now).

use super::{Tree, ZNode};
use crate::reader::{ArrayId, ChunkId, ChunkStore, Snapshot};
use crate::tree::Invalidation;
use crate::tree::layout::NodeKind;
use crate::tree::reload::changed;

impl Tree {
    /// The invalidations of array `array` (shown by native directory `dir`) after it changed
    /// from `old` to `new` (`all`: every chunk object, after a failed reload).
    pub(crate) fn zarr_invalidations(
        &self,
        array: ArrayId,
        dir: u64,
        (old, new): (&Snapshot, &Snapshot),
        all: bool,
    ) -> Vec<Invalidation> {
        let mut out = Vec::new();
        let (old_n, new_n) = (old.nchunks(), new.nchunks());
        let n = old_n
            .max(new_n)
            .min(super::super::follow::MAX_CHUNK_INVALIDATIONS);
        for index in (0..n).filter(|&i| all || changed(old, new, i)) {
            out.extend(
                self.zarr_chunk_ino(ChunkId::new(array, index))
                    .map(Invalidation::Inode),
            );
        }
        if let (Some(d), Some(j)) = (ZNode::Dir(dir).ino(), ZNode::Json(dir).ino()) {
            out.push(Invalidation::Inode(d));
            out.push(Invalidation::Inode(j));
            if old_n != new_n {
                out.push(Invalidation::Entry {
                    parent: d,
                    name: "c".into(),
                });
            }
        }
        out
    }

    /// The invalidations of the view's directories and `zarr.json` files.
    pub(crate) fn zarr_meta_invalidations(&self) -> Vec<Invalidation> {
        let mut out: Vec<Invalidation> = [ZNode::Root, ZNode::RootJson]
            .into_iter()
            .filter_map(ZNode::ino)
            .map(Invalidation::Inode)
            .collect();
        for n in self.zarr_mirrored_dirs() {
            out.extend(
                [ZNode::Dir(n), ZNode::Json(n)]
                    .into_iter()
                    .filter_map(ZNode::ino)
                    .map(Invalidation::Inode),
            );
        }
        out
    }

    /// The native directories the Zarr views mirror as groups or arrays (every directory but
    /// the data directories, collection leaves included), by inode.
    pub(crate) fn zarr_mirrored_dirs(&self) -> impl Iterator<Item = u64> + '_ {
        self.nodes.iter().enumerate().filter_map(|(i, node)| {
            matches!(
                node.kind,
                NodeKind::Dir { data: None, .. } | NodeKind::Leaf(_)
            )
            .then_some(i as u64 + 1)
        })
    }
}
