//! Collections in the tree: a python-blosc2 store (`.b2z`, `.b2d`) or a directory of sources
//! mounts as one directory per group (with its `__attrs__`) and one directory per leaf, each
//! holding the single-source tree of what the leaf is (`__attrs__`, `array.npy`, `meta/`,
//! `data/`; a ctable's tree for a bcolz ctable in a directory of sources).
//!
//! Rules (the container layer's [`crate::container::store`] says what a leaf and a group
//! are):
//! - Mounting opens no leaf: each leaf is a directory ([`LazyLeaf`]) whose subtree (its
//!   arrays, their `__attrs__`, `meta/`, `data/`, `array.npy`) is laid out on the first lookup
//!   in it or listing of it, reading the leaf's header, index and trailer then (no chunk).
//!   `stat` of the leaf directory does not open it (its link count is 1, "unknown"). The
//!   subtree's nodes and arrays are numbered after everything that exists, under the tree's
//!   `grow` lock, so inode numbers handed out never change. A group's `__attrs__` opens its
//!   `__vlmeta__` carrier on first read or `stat`.
//! - A leaf that fails to open shows as a directory whose lookups and listing fail with EIO,
//!   with a log line naming the store and the key; every other leaf works.
//! - Leaves commit through the collection ([`crate::commit::Target::Leaf`]): a
//!   `.b2d` leaf or a file of a directory of sources is a frame committed as a single source;
//!   a `.b2z` member is committed by writing a new zip beside the old one and renaming it
//!   over it. After any commit the collection is opened again and every leaf reloaded from
//!   it (a `.b2z` commit moves members).
//! - Group attributes are stored in the group's `__vlmeta__` carrier; a group without one
//!   (DictStores, plain directories) refuses edits (EINVAL).
//! - Leaves of a store nested in a directory of sources, and ctables inside a collection,
//!   are read-only (EROFS).
//! - A group holding a python-blosc2 CTable (a leaf `_meta`, a leaf `_valid_rows`, a group
//!   `_cols`) also shows a read-only `table.npy` of its valid rows, laid out on first access
//!   (`super::ctable`); its subtree is shown as for any group.

use std::sync::{Arc, OnceLock};

use super::ctable::CTableFile;
use super::inode::{ARRAY_STRIDE, CHUNK_BASE, MAX_GROWING_ARRAYS};
use super::layout::{
    AttrsOwner, CollectionCell, FileKind, Generated, Layout, NodeKind, Owner, ROOT_INO,
};
use super::view::{self, Adding};
use super::{ArrayEntry, Tree, TreeError, display_chain};
use crate::container::store::{Collection, Group, Leaf, Node};
use crate::container::{Container, ContainerError};

/// A collection leaf's directory before and after its first access.
#[derive(Debug)]
pub struct LazyLeaf {
    pub(super) leaf: Arc<Leaf>,
    /// A leaf of the mounted collection itself (its edits commit), not of a nested store.
    pub(super) top: bool,
    /// Its children once laid out, or why it cannot be shown.
    pub(super) built: OnceLock<Result<Vec<u64>, Arc<str>>>,
}

/// The layout of `collection`.
///
/// # Errors
/// When the metadata of an opened leaf cannot be rendered.
pub fn layout(collection: Collection) -> Result<Layout, ContainerError> {
    let collection = Arc::new(collection);
    let mut layout = Layout::new(Owner::of(collection.path()));
    layout.set_collection(collection.clone());
    let cell = layout.collection.clone();
    add_group(&mut layout, ROOT_INO, collection.root(), cell.as_ref())?;
    Ok(layout)
}

/// Adds group `g`'s `__attrs__` and children under directory `dir`; `top`: the cell of the
/// mounted collection when `g` is one of its groups (not of a nested store): its leaves and
/// attributes commit, and are looked up in the collection as it is when first accessed.
pub(super) fn add_group(
    layout: &mut Layout,
    dir: u64,
    g: &Group,
    top: Option<&CollectionCell>,
) -> Result<(), ContainerError> {
    let owner = if top.is_some() {
        AttrsOwner::Group(g.key.clone())
    } else {
        AttrsOwner::ReadOnly
    };
    let attrs = match g.carrier() {
        None => Generated::new(view::json_file(&serde_json::json!({}))),
        Some(carrier) => {
            let (carrier, key) = (carrier.clone(), g.key.clone());
            let cell = top.cloned();
            Generated::lazy(move || {
                // A commit may have moved the carrier (a rebuilt zip): take today's.
                let now = cell.as_ref().and_then(|c| {
                    let c = c.get();
                    c.group(&key).and_then(|g| g.carrier().cloned())
                });
                let carrier = now.unwrap_or_else(|| carrier.clone());
                match carrier.array() {
                    Ok(a) => Ok(view::json_file(a.attrs())),
                    // Not `{}`: that would say the group has no attributes, and an edit
                    // would then replace the ones the carrier holds.
                    Err(e) => {
                        let why = format!(
                            "{}: group {}: __attrs__ gives EIO: its carrier {} cannot be \
                             read: {}",
                            carrier.store_path().display(),
                            if key.is_empty() { "/" } else { &key },
                            carrier.key(),
                            super::display_chain(&*e)
                        );
                        log::warn!("{why}");
                        Err(why.into())
                    }
                }
            })
        }
    };
    layout.generated(dir, "__attrs__", FileKind::Attrs(owner, attrs));
    // A CTable's group: its `_meta`, `_valid_rows` and `_cols` inodes, for `table.npy`.
    let ctable = super::ctable::is_ctable_group(
        g.children
            .iter()
            .map(|c| (c.name(), matches!(c, Node::Leaf(_)))),
    ) && g.child("table.npy").is_none();
    let (mut meta, mut valid, mut cols) = (None, None, None);
    for child in &g.children {
        let name = child.name();
        if !view::valid_name(name) || name == "__attrs__" {
            log::warn!(
                "group {}: {name:?} is not a valid file name; not shown",
                g.key
            );
            continue;
        }
        match child {
            Node::Group(sub) => {
                let sub_dir = layout.dir(dir, name);
                add_group(layout, sub_dir, sub, top)?;
                if name == "_cols" {
                    cols = Some(sub_dir);
                }
            }
            Node::Store(nested) => {
                let sub_dir = layout.dir(dir, name);
                add_group(layout, sub_dir, nested.root(), None)?;
            }
            Node::Leaf(leaf) => {
                let lazy = LazyLeaf {
                    leaf: leaf.clone(),
                    top: top.is_some(),
                    built: OnceLock::new(),
                };
                let ino = layout.lazy_leaf(dir, name, lazy);
                match name {
                    "_meta" => meta = Some(ino),
                    "_valid_rows" => valid = Some(ino),
                    _ => {}
                }
            }
        }
    }
    if let (true, Some(meta), Some(valid), Some(cols)) = (ctable, meta, valid, cols) {
        let file = CTableFile::new(g.key.clone(), meta, valid, cols);
        layout.generated(dir, "table.npy", FileKind::CTableNpy(Box::new(file)));
    }
    Ok(())
}

/// Lays out the content of leaf directory `at` in `sub` (opening `leaf`, which is `lazy`'s
/// leaf as the collection holds it now).
fn lay_out_leaf(
    sub: &mut Layout,
    at: u64,
    lazy: &LazyLeaf,
    leaf: &Leaf,
) -> Result<(), ContainerError> {
    match leaf.open_owned()? {
        Container::Array(array) => {
            let how = if lazy.top {
                Adding::Leaf(lazy.leaf.key().to_owned())
            } else {
                Adding::ReadOnly
            };
            view::add_array_as(sub, at, array, how)
        }
        Container::Table(table) => view::add_table(sub, at, table, false),
    }
}

impl Tree {
    /// The children of leaf directory `ino` (`lazy`), laid out now if this is the first
    /// access.
    ///
    /// # Errors
    /// [`TreeError::Unavailable`] (EIO) when the leaf cannot be opened or shown.
    pub(crate) fn leaf_children<'a>(
        &'a self,
        ino: u64,
        lazy: &'a LazyLeaf,
    ) -> Result<&'a [u64], TreeError> {
        if lazy.top && lazy.built.get().is_none() {
            // The leaf is opened from the collection as the tree knows it: catch up with
            // another writer first (a `.b2z` rewritten since moves every member).
            self.follow_source();
        }
        self.leaf_children_as_is(ino, lazy)
    }

    /// [`Tree::leaf_children`] without catching up with other writers first (a caller that
    /// lays out many leaves, the Zarr view's consolidated metadata, follows once itself).
    pub(crate) fn leaf_children_as_is<'a>(
        &'a self,
        ino: u64,
        lazy: &'a LazyLeaf,
    ) -> Result<&'a [u64], TreeError> {
        let done = |r: &'a Result<Vec<u64>, Arc<str>>| match r {
            Ok(children) => Ok(children.as_slice()),
            Err(why) => Err(TreeError::Unavailable(why.to_string())),
        };
        if let Some(r) = lazy.built.get() {
            return done(r);
        }
        let _grow = self.grow.lock();
        if lazy.built.get().is_none() {
            let r = self.build_leaf(ino, lazy).map_err(|why| {
                log::warn!(
                    "{}: {}: cannot open, its directory gives EIO: {why}",
                    lazy.leaf.store_path().display(),
                    lazy.leaf.key()
                );
                Arc::<str>::from(why)
            });
            let _ = lazy.built.set(r);
        }
        match lazy.built.get() {
            Some(r) => done(r),
            None => Err(TreeError::Unavailable("leaf not laid out".into())),
        }
    }

    /// Opens leaf `lazy` and adds its subtree under directory `ino`: arrays to the reader,
    /// nodes after every existing one. The caller holds `grow`.
    fn build_leaf(&self, ino: u64, lazy: &LazyLeaf) -> Result<Vec<u64>, String> {
        let nodes = self.nodes.len() as u64;
        let arrays = u32::try_from(self.reader.arrays()).map_err(|e| e.to_string())?;
        let mut sub = Layout::subtree(ino, nodes, arrays, self.owner);
        // A leaf of the mounted collection is opened as the collection is now: a commit may
        // have rebuilt it (a `.b2z` commit moves every member). Nested stores are never
        // rewritten.
        let now = match (self.mounted.collection(), lazy.top) {
            (Some(cell), true) => {
                let c = cell.get();
                match c.find(lazy.leaf.key()) {
                    Some(Node::Leaf(l)) => Some(l.clone()),
                    _ => return Err("it is no longer one of the collection's leaves".into()),
                }
            }
            _ => None,
        };
        let leaf = now.as_deref().unwrap_or(&lazy.leaf);
        lay_out_leaf(&mut sub, ino, lazy, leaf).map_err(|e| display_chain(&e))?;
        let Layout {
            nodes: mut new_nodes,
            stores,
            live,
            ..
        } = sub;
        if nodes + new_nodes.len() as u64 >= CHUNK_BASE
            || u64::from(arrays) + stores.len() as u64 > MAX_GROWING_ARRAYS
        {
            return Err("the mount has no inode numbers left for it".into());
        }
        if let Some(s) = stores.iter().find(|s| s.nchunks() as u64 >= ARRAY_STRIDE) {
            return Err(format!(
                "{} has {} chunks, more than a collection leaf can show",
                s.path().display(),
                s.nchunks()
            ));
        }
        let mut entries: Vec<ArrayEntry> = live
            .into_iter()
            .map(|live| ArrayEntry {
                live,
                ..ArrayEntry::default()
            })
            .collect();
        for (i, node) in new_nodes.iter().enumerate().skip(1) {
            let file_ino = nodes + i as u64;
            let slot = match &node.kind {
                NodeKind::File(FileKind::Sizes(id, _) | FileKind::Npy(id, _)) => {
                    entries.get_mut(id.0.wrapping_sub(arrays) as usize)
                }
                _ => None,
            };
            match (slot, &node.kind) {
                (Some(f), NodeKind::File(FileKind::Sizes(..))) => f.sizes = Some(file_ino),
                (Some(f), _) => f.npy = Some(file_ino),
                (None, _) => {}
            }
        }
        for (store, entry) in stores.into_iter().zip(entries) {
            self.add_array(store, entry);
        }
        let children = match &mut new_nodes[0].kind {
            NodeKind::Dir { children, .. } => std::mem::take(children),
            _ => Vec::new(),
        };
        for node in new_nodes.into_iter().skip(1) {
            self.nodes.push(node);
        }
        Ok(children)
    }

    /// Leaves opened by the mounted collection so far (`None`: not a collection): a mount
    /// opens none; each leaf is opened on first access, and again after every commit that
    /// rewrites the collection.
    pub fn leaves_opened(&self) -> Option<usize> {
        self.mounted
            .collection()
            .map(|c| c.with(|c| c.leaves_opened()))
    }
}
