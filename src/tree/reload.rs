//! The one path for "the source changed: reload and propagate", after the mount's own commit
//! ([`Refreshed::Own`]) or another writer's change ([`Refreshed::Foreign`]): every array is
//! brought to the source as it is now (a single source's arrays reopened from their files; a
//! collection opened again and every leaf laid out so far reopened from it, since a `.b2z`
//! commit moves every member), then the change is propagated: the reader drops the cached
//! copies of the chunks whose stamps changed, the generated files (`meta/sizes`, `array.npy`,
//! `table.npy`, the Zarr view) are rendered again, and the kernel is told what not to keep.
//!
//! After another writer also: every edit still buffered is marked stale (it was made against
//! what that writer replaced: its commit fails with ESTALE), decoded blocks and pages of
//! every chunk are dropped, `__attrs__` files are rendered again, and a collection's members
//! added or removed are shown ([`Tree::reload`] returns the entries the kernel must forget).
//! A leaf that is gone or cannot be opened then keeps its version (logged); after the mount's
//! own commit that is an error.

use std::sync::Arc;

use super::follow::Invalidation;
use super::layout::{FileKind, NodeKind};
use super::{Tree, display_chain, view};
use crate::container::store::{Collection, Node};
use crate::container::{Container, ContainerError};
use crate::reader::{ArrayId, Change, ChunkId, ChunkStore, LiveArray, Snapshot};

/// What a reload of the arrays follows.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refreshed<'a> {
    /// The mount's own commit of these chunks of this array (other arrays: a table resize).
    Own(ArrayId, &'a [usize]),
    /// Another writer.
    Foreign,
}

impl<'a> Refreshed<'a> {
    /// A commit that edited no chunk (attributes).
    pub(crate) const NONE: Refreshed<'static> = Refreshed::Own(ArrayId(u32::MAX), &[]);

    /// The change of `array`'s chunks.
    pub(crate) fn of(self, array: ArrayId) -> Change<'a> {
        match self {
            Refreshed::Own(a, edited) if a == array => Change::Own(edited),
            Refreshed::Own(..) => Change::Own(&[]),
            Refreshed::Foreign => Change::Foreign,
        }
    }
}

/// Whether chunk `index` may hold other bytes in version `new` than in `old`: a new stamp, or
/// a chunk only one of them has.
pub(crate) fn changed(old: &Snapshot, new: &Snapshot, index: usize) -> bool {
    index >= old.nchunks().min(new.nchunks()) || old.stamp(index) != new.stamp(index)
}

impl Tree {
    /// Reloads every array after `change` and propagates it (see the module doc). `done`: an
    /// array its own commit reloaded already ([`crate::commit::Committed::Reloaded`]), with
    /// its version before that commit: it is propagated, not reopened again. Returns what
    /// the kernel must forget of a collection's membership.
    ///
    /// # Errors
    /// When the source (a collection: the collection) cannot be opened now; after the
    /// mount's own commit, when a leaf is gone or no longer an array.
    pub(crate) fn reload(
        &self,
        change: Refreshed<'_>,
        done: Option<(ArrayId, Arc<Snapshot>)>,
    ) -> Result<Vec<Invalidation>, ContainerError> {
        let foreign = matches!(change, Refreshed::Foreign);
        let fresh = match self.mounted.collection() {
            // A remote collection's new listing, or the local one opened again.
            Some(cell) => Some(match self.follow.take_relisted() {
                Some(listed) => listed,
                None => Collection::reopened(&cell.get())?,
            }),
            None => None,
        };
        if foreign {
            self.generated_stale();
            // Edits still buffered were made against what that writer replaced.
            let mut edits = self.edits.lock();
            edits.mark_stale();
        }
        for (array, live) in self.lives() {
            let old = match &done {
                Some((id, before)) if *id == array => before.clone(),
                _ => {
                    let old = live.snapshot();
                    let reopened = match &fresh {
                        None => live.reload(change.of(array)).map(|()| true)?,
                        Some(c) => self.reload_leaf(c, live, change.of(array))?,
                    };
                    if !reopened {
                        continue;
                    }
                    old
                }
            };
            let new = live.snapshot();
            self.reader
                .forget(|id| id.array == array && changed(&old, &new, id.index));
            if foreign {
                self.reader.forget_parts(|id| id.array == array);
                self.kernel_drops(array, &old, &new);
            }
            self.rerender_sizes(array);
        }
        self.table_npy_changed();
        let mut entries = Vec::new();
        if let (Some(cell), Some(fresh)) = (self.mounted.collection(), fresh) {
            let old = cell.get();
            cell.set(fresh.clone());
            if foreign {
                let _grow = self.grow.lock();
                let root = super::layout::ROOT_INO;
                self.follow_group(root, fresh.root(), Some(old.root()), &mut entries);
                // A leaf that failed to open may open in the changed source.
                self.forget_leaf_failures();
            } else {
                // The mount's own commit changed the watched files: not another writer.
                self.settle_outer(None);
            }
        }
        if foreign {
            // Issue 21: a reload after a stale commit showed the old attributes for good
            // (the follower saw nothing left to follow).
            self.rerender_attrs();
        }
        Ok(entries)
    }

    /// Replaces leaf array `live` by its leaf in `fresh`, the collection opened again, after
    /// `change`; returns whether it did. After another writer, a leaf gone, no longer an
    /// array or not readable now keeps its version and stops being watched.
    fn reload_leaf(
        &self,
        fresh: &crate::container::Collection,
        live: &LiveArray,
        change: Change<'_>,
    ) -> Result<bool, ContainerError> {
        let foreign = matches!(change, Change::Foreign);
        let Some(key) = live.leaf_key() else {
            // A leaf of a nested store: it keeps its version (a store replaced on its server
            // shows as a new directory, `members.rs`), and its change is taken as seen.
            if foreign && live.changed_on_disk() {
                live.settle();
            }
            return Ok(false);
        };
        let opened = match fresh.find(key) {
            Some(Node::Leaf(leaf)) => leaf.open_owned(),
            _ if foreign => {
                live.settle();
                return Ok(false);
            }
            _ => {
                return Err(ContainerError::Changed {
                    path: fresh.path().to_path_buf(),
                    why: format!("{key} is no longer one of its leaves"),
                });
            }
        };
        match opened {
            Ok(Container::Array(array)) => {
                live.replace(array, change);
                Ok(true)
            }
            Ok(Container::Table(_)) if foreign => {
                live.settle();
                Ok(false)
            }
            Ok(Container::Table(t)) => Err(ContainerError::Changed {
                path: t.path,
                why: format!("{key} is now a table"),
            }),
            Err(e) if foreign => {
                log::warn!(
                    "{}: {key}: changed and cannot be opened now: {}; serving what is cached",
                    fresh.path().display(),
                    display_chain(&e)
                );
                live.settle();
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// After another writer: the kernel's pages of every directory and generated file are
    /// not kept at their next open.
    pub(crate) fn generated_stale(&self) {
        let mut k = self.kcache.lock();
        k.stale.extend(1..=self.nodes.len() as u64);
    }

    /// After another writer: the kernel's pages of the chunk files of `array` whose stamps
    /// changed from `old` to `new` are not kept at their next open.
    pub(crate) fn kernel_drops(&self, array: ArrayId, old: &Snapshot, new: &Snapshot) {
        let n = old.nchunks().max(new.nchunks());
        if n > super::follow::MAX_CHUNK_INVALIDATIONS {
            self.kcache.lock().foreign = true;
            return;
        }
        let zarr = |index| self.zarr_chunk_ino(ChunkId::new(array, index));
        let mut k = self.kcache.lock();
        for index in (0..n).filter(|&i| changed(old, new, i)) {
            k.stale
                .insert(self.inodes.chunk_ino(ChunkId::new(array, index)));
            k.stale.extend(zarr(index));
        }
    }

    /// Renders `meta/sizes` of `array` again from its (just reopened) source; its
    /// `array.npy` may have changed size too.
    pub(crate) fn rerender_sizes(&self, array: ArrayId) {
        self.zarr_changed();
        let Some(entry) = self.arrays.get(array.index()) else {
            return;
        };
        let Some(live) = &entry.live else {
            return;
        };
        if let Some(ino) = entry.sizes
            && let Some(NodeKind::File(FileKind::Sizes(_, content))) =
                self.node(ino).map(|n| &n.kind)
        {
            match view::sizes(&live.get()) {
                Ok(v) => content.set(view::json_file(&v)),
                Err(e) => log::warn!("meta/sizes not updated: {}", display_chain(&e)),
            }
            self.kcache.lock().stale.insert(ino);
        }
        if let Some(npy) = entry.npy {
            self.npy_changed(array);
            self.kcache.lock().stale.insert(npy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_commit_names_its_chunks_only_for_its_array() {
        let edited = [1, 4];
        let own = Refreshed::Own(ArrayId(2), &edited);
        assert!(matches!(own.of(ArrayId(2)), Change::Own(c) if c == [1, 4]));
        assert!(matches!(own.of(ArrayId(0)), Change::Own([])));
        assert!(matches!(Refreshed::NONE.of(ArrayId(0)), Change::Own([])));
        assert!(matches!(Refreshed::Foreign.of(ArrayId(0)), Change::Foreign));
    }
}
