//! Collections in the tree: a python-blosc2 store (`.b2z`, `.b2d`) or a directory of sources
//! mounts as one directory per group (with its `__attrs__`) and one directory per leaf, each
//! holding the single-source tree of what the leaf is (`__attrs__`, `array.npy`, `meta/`,
//! `data/`; a ctable's tree for a bcolz ctable in a directory of sources).
//!
//! Rules (the container layer's [`crate::container::store`] says what a leaf and a group
//! are):
//! - Every leaf is opened when the tree is built (its header, index and trailer; no chunk).
//!   A leaf that fails to open shows as a directory whose listing fails with EIO, with a log
//!   line naming the store and the key; every other leaf works.
//! - Leaves commit through the collection ([`crate::reader::Committer::commit_leaf`]): a
//!   `.b2d` leaf or a file of a directory of sources is a frame committed as a single source;
//!   a `.b2z` member is committed by writing a new zip beside the old one and renaming it
//!   over it. After any commit the collection is opened again and every leaf reloaded from
//!   it (a `.b2z` commit moves members).
//! - Group attributes are stored in the group's `__vlmeta__` carrier; a group without one
//!   (DictStores, plain directories) refuses edits (EINVAL).
//! - Leaves of a store nested in a directory of sources, and ctables inside a collection,
//!   are read-only (EROFS).

use std::sync::Arc;

use super::commit::Refreshed;
use super::layout::{AttrsOwner, FileKind, Generated, Layout, Owner, ROOT_INO};
use super::view::{self, Adding};
use super::{Tree, display_chain};
use crate::container::store::{self, Collection, Group, Node, Opened};
use crate::container::{Container, ContainerError};
use crate::reader::ArrayId;

/// The layout of `collection`.
///
/// # Errors
/// When the metadata of an opened leaf cannot be rendered.
pub fn layout(collection: Collection) -> Result<Layout, ContainerError> {
    let collection = Arc::new(collection);
    let mut layout = Layout::new(Owner::of(collection.path()));
    layout.set_collection(collection.clone());
    add_group(&mut layout, ROOT_INO, collection.root(), true)?;
    Ok(layout)
}

/// Adds group `g`'s `__attrs__` and children under directory `dir`; `top`: a group of the
/// mounted collection itself (not of a nested store), whose leaves and attributes commit.
fn add_group(layout: &mut Layout, dir: u64, g: &Group, top: bool) -> Result<(), ContainerError> {
    let attrs = match g.attrs() {
        Ok(v) => v,
        Err(e) => {
            log::warn!("group {}: attributes not readable: {e}", g.key);
            serde_json::Value::Object(Default::default())
        }
    };
    let owner = if top {
        AttrsOwner::Group(g.key.clone())
    } else {
        AttrsOwner::ReadOnly
    };
    layout.generated(
        dir,
        "__attrs__",
        FileKind::Attrs(owner, Generated::new(view::json_file(&attrs))),
    );
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
            }
            Node::Store(nested) => {
                let sub_dir = layout.dir(dir, name);
                add_group(layout, sub_dir, nested.root(), false)?;
            }
            Node::Leaf(leaf) => match leaf.open_owned() {
                Ok(Container::Array(array)) => {
                    let leaf_dir = layout.dir(dir, name);
                    let how = if top {
                        Adding::Leaf(leaf.key().to_owned())
                    } else {
                        Adding::ReadOnly
                    };
                    view::add_array_as(layout, leaf_dir, array, how)?;
                }
                Ok(Container::Table(table)) => {
                    let leaf_dir = layout.dir(dir, name);
                    view::add_table(layout, leaf_dir, table, false)?;
                }
                Err(e) => {
                    let why = display_chain(&e);
                    log::warn!(
                        "{}: {}: cannot open, its directory gives EIO: {why}",
                        leaf.store_path().display(),
                        leaf.key()
                    );
                    layout.unreadable_dir(dir, name, &why);
                }
            },
        }
    }
    Ok(())
}

impl Tree {
    /// After a commit to the mounted collection: opens it again and reloads every leaf array
    /// from it (a `.b2z` commit rewrites the zip, so every member may have moved), and renders
    /// their generated files again.
    pub(crate) fn refresh_collection(&self, change: Refreshed<'_>) -> Result<(), ContainerError> {
        let Some(cell) = &self.collection else {
            return Ok(());
        };
        let path = cell.read().path().to_path_buf();
        let fresh = match store::open_any(&path)? {
            Opened::Collection(c) => c,
            Opened::Single(_) => {
                return Err(ContainerError::Changed {
                    path,
                    why: "it no longer opens as a collection".into(),
                });
            }
        };
        for (a, live) in self.live.iter().enumerate() {
            let Some(live) = live else { continue };
            let Some(key) = live.leaf_key() else { continue };
            let array = match fresh.find(key) {
                Some(Node::Leaf(leaf)) => match leaf.open_owned()? {
                    Container::Array(array) => array,
                    Container::Table(t) => {
                        return Err(ContainerError::Changed {
                            path: t.path,
                            why: format!("{key} is now a table"),
                        });
                    }
                },
                _ => {
                    return Err(ContainerError::Changed {
                        path: path.clone(),
                        why: format!("{key} is no longer one of its leaves"),
                    });
                }
            };
            live.replace(array, change.of(ArrayId(a as u32)));
            self.rerender_sizes(ArrayId(a as u32));
        }
        *cell.write() = Arc::new(fresh);
        Ok(())
    }
}
