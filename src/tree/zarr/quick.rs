//! The consolidated metadata of collection leaves not laid out yet: each leaf's Zarr
//! geometry and attributes come from its header, metalayers and vlmeta read directly
//! ([`crate::container::store::Leaf::open_head`]: one read of a small member's frame), not
//! from laying out its native tree (which opens it, renders `meta/`, `data/`, `array.npy` and
//! adds it to the reader), so the root `zarr.json` of a 10,000-member store is built in a
//! fraction of the time.
//!
//! Both ways compute the same thing from the same container functions: the NPY view
//! ([`Npy::for_array`], none for special objects, as the native tree's `array.npy`), its
//! [`Geom`], and the attributes `__attrs__` shows. A leaf that is a table, or that fails to
//! open for what it holds, is left to the native path (which lays it out, or logs why it
//! gives EIO); one that fails for an I/O reason is that leaf's failed attempt (its back-off
//! starts), not tried again by the native path at once.

use std::sync::Arc;

use serde_json::Value;

use super::super::collection::{LazyLeaf, leaf_failed};
use super::super::layout::NodeKind;
use super::{Geom, NO_NPY, meta};
use crate::container::npy::Npy;
use crate::container::store::{Node, special_kind};
use crate::container::{Container, ContainerError};
use crate::tree::Tree;

/// A leaf's Zarr geometry and attributes, or why it is left out of the view.
pub(super) type Quick = Result<(Arc<Geom>, Value), String>;

impl Tree {
    /// The lazy leaf of native directory `n` when it is one not laid out yet.
    pub(super) fn zarr_unbuilt_leaf(&self, n: u64) -> Option<&LazyLeaf> {
        match &self.node(n)?.kind {
            NodeKind::Leaf(lazy) if !lazy.built.tried() => Some(lazy),
            _ => None,
        }
    }

    /// The Zarr geometry and attributes of collection leaf `lazy` (not laid out) read from its
    /// header; `None` when the native path must decide (a table, a leaf that fails to open,
    /// a leaf no longer in the collection).
    pub(super) fn zarr_quick(&self, lazy: &LazyLeaf) -> Option<Quick> {
        // A leaf of the mounted collection is read as the collection is now (a `.b2z`
        // commit moves every member), as laying it out would.
        let now = match (self.mounted.collection(), lazy.top) {
            (Some(cell), true) => {
                let c = cell.get();
                match c.find(lazy.leaf.key()) {
                    Some(Node::Leaf(l)) => Some(l.clone()),
                    _ => return None,
                }
            }
            _ => None,
        };
        let leaf = now.as_ref().unwrap_or(&lazy.leaf);
        let array = match leaf.open_head() {
            Ok(Container::Array(array)) => array,
            // A failure of I/O (a remote store's hiccup) is the leaf's failed attempt: it
            // starts its back-off, as laying it out would, and is not tried again at once.
            Err(e @ ContainerError::Io { .. }) => {
                let why = crate::error::display_chain(&e);
                return Some(Err(leaf_failed(lazy, why, true).to_string()));
            }
            _ => return None,
        };
        let npy = match special_kind(&array) {
            Some(kind) => Err(format!("{}: a {kind} object", array.path().display())),
            None => Npy::for_array(&array).map_err(|e| e.to_string()),
        };
        let npy = match npy {
            Ok(npy) => npy,
            Err(e) => {
                log::info!("{e}: no array.npy");
                return Some(Err(NO_NPY.into()));
            }
        };
        let attrs = meta::parse_attrs(&super::super::view::json_file(array.attrs()));
        let shards = self.options.zarr_shards;
        Some(Geom::of(&npy).map(|g| (Arc::new(g.sharded(shards)), attrs)))
    }
}
