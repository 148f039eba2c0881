//! The per-array registry and what is mounted: one [`ArrayEntry`] per array (its writable
//! array and the inodes of the generated files that describe it) under the [`ArrayId`] the
//! reader serves its chunks by, added to both at once ([`Tree::add_array`]); and
//! [`Mounted`], one array, a ctable or a collection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Tree;
use super::layout::CollectionCell;
use crate::reader::{ArrayId, ChunkStore, LiveArray};

/// One array of the mount: what the tree keeps of it, in one registry entry under the
/// [`ArrayId`] the reader serves its chunks by (arrays are added to both at once,
/// [`Tree::add_array`], so ids always agree).
#[derive(Debug, Default, Clone)]
pub(crate) struct ArrayEntry {
    /// The array edits are committed to (`None`: synthetic, not writable).
    pub(crate) live: Option<Arc<LiveArray>>,
    /// Its `meta/sizes` inode.
    pub(crate) sizes: Option<u64>,
    /// Its `array.npy` inode.
    pub(crate) npy: Option<u64>,
}

/// What is mounted.
#[derive(Debug)]
pub(crate) enum Mounted {
    /// One array (a frame, a b2nd/caterva array, a bcolz carray).
    Single,
    /// A bcolz ctable at this path: the arrays are its columns.
    Table(PathBuf),
    /// A collection (a store, a directory of sources): the arrays are the leaves laid out so
    /// far. `cell` is replaced after commits; `path` does not change.
    Collection {
        /// The collection as it is now.
        cell: CollectionCell,
        /// Its path.
        path: PathBuf,
    },
}

impl Mounted {
    /// The ctable's path, for a ctable.
    pub(crate) fn table(&self) -> Option<&Path> {
        match self {
            Mounted::Table(p) => Some(p),
            _ => None,
        }
    }

    /// The collection, for a collection.
    pub(crate) fn collection(&self) -> Option<&CollectionCell> {
        match self {
            Mounted::Collection { cell, .. } => Some(cell),
            _ => None,
        }
    }

    /// The collection's path, for a collection.
    pub(crate) fn collection_path(&self) -> Option<&Path> {
        match self {
            Mounted::Collection { path, .. } => Some(path),
            _ => None,
        }
    }
}

impl Tree {
    /// Adds an array laid out while mounted (a collection leaf): its chunk store to the
    /// reader and its entry to the registry, under the same next id. The caller holds
    /// `grow`.
    pub(crate) fn add_array(&self, store: Arc<dyn ChunkStore>, entry: ArrayEntry) -> ArrayId {
        let id = self.reader.add(store);
        let at = self.arrays.push(entry);
        debug_assert_eq!(at, id.index(), "the registry and the reader disagree");
        id
    }

    /// The writable array behind `id`, if it has one.
    pub(crate) fn live(&self, id: ArrayId) -> Option<&Arc<LiveArray>> {
        self.arrays.get(id.index()).and_then(|e| e.live.as_ref())
    }

    /// Every array with a writable array behind it, by id.
    pub(crate) fn lives(&self) -> impl Iterator<Item = (ArrayId, &Arc<LiveArray>)> + '_ {
        self.arrays
            .iter()
            .enumerate()
            .filter_map(|(a, e)| Some((ArrayId(a as u32), e.live.as_ref()?)))
    }

    /// Every array's id.
    pub(crate) fn array_ids(&self) -> Vec<ArrayId> {
        (0..self.arrays.len()).map(|a| ArrayId(a as u32)).collect()
    }
}
