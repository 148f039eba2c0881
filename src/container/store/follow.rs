//! Following remote collections: the remote sources the mount's follower asks whether they
//! changed ([`Collection::followed`]: a `.b2z` store's object, the prefix holding a `.b2d`
//! store, the `.b2z` stores of a remote server's listed directory), and such a collection
//! opened again after one of them changed ([`reopened_remote`]: a `.b2d` from its prefix
//! listed again; a listed directory listed again, its changed stores opened again).
//! Collections opened from a local path or one object are opened again by
//! [`Collection::reopened`] itself.

use std::sync::Arc;

use super::zip::ZipIndex;
use super::{Collection, Form, Group, Node, dir};
use crate::container::{ByteSource, ByteTree, ContainerError, Relist};

/// A remote source the mount's follower asks whether it changed.
#[derive(Debug, Clone)]
pub enum Followed {
    /// One object (a `.b2z` store's).
    Bytes(Arc<dyn ByteSource>),
    /// A tree of objects (the prefix holding a `.b2d` store).
    Tree(Arc<dyn ByteTree>),
}

impl Followed {
    /// Whether it changed: what is known, or asked now when `ask` and due
    /// ([`ByteSource::poll_changed`], [`ByteTree::poll_changed`]).
    pub fn poll_changed(&self, ask: bool) -> bool {
        match self {
            Followed::Bytes(b) => b.poll_changed(ask),
            Followed::Tree(t) => t.poll_changed(ask),
        }
    }

    /// Whether `poll_changed(true)` would ask its server now.
    pub fn asks_now(&self) -> bool {
        match self {
            Followed::Bytes(b) => b.asks_now(),
            Followed::Tree(t) => t.asks_now(),
        }
    }
}

impl Collection {
    /// The remote sources this collection follows (see the module doc); none for local
    /// collections. Sources that are not followed (`remote_recheck=0`) answer "unchanged".
    pub fn followed(&self) -> Vec<Followed> {
        let mut out = Vec::new();
        if let Some(b) = self.zip().and_then(ZipIndex::byte_source) {
            out.push(Followed::Bytes(Arc::clone(b)));
        }
        match (&self.shared.tree, self.form) {
            (Some(t), Form::Dir) => out.push(Followed::Tree(Arc::clone(t))),
            (Some(_), Form::Frames) => nested_stores(&self.root, &mut out),
            _ => {}
        }
        out
    }
}

/// The objects of the remote `.b2z` stores under group `g`.
fn nested_stores(g: &Group, out: &mut Vec<Followed>) {
    for c in &g.children {
        match c {
            Node::Group(sub) => nested_stores(sub, out),
            Node::Store(s) => {
                if let Some(b) = s.zip().and_then(ZipIndex::byte_source) {
                    out.push(Followed::Bytes(Arc::clone(b)));
                }
            }
            Node::Leaf(_) => {}
        }
    }
}

/// `this` opened again when it was opened from a remote tree: a `.b2d` store from its
/// prefix listed again; a server's listed directory is `this` itself unless one of its
/// `.b2z` stores changed, then the directory listed again (its changed stores opened again,
/// the others kept). `None` for collections opened from a path or one object.
///
/// # Errors
/// When the tree cannot be listed again now, or the `.b2d` no longer opens.
pub(super) fn reopened_remote(
    this: &Arc<Collection>,
) -> Result<Option<Arc<Collection>>, ContainerError> {
    let Some(tree) = &this.shared.tree else {
        return Ok(None);
    };
    let io = |source| ContainerError::Io {
        path: this.path.clone(),
        source,
    };
    match this.form {
        Form::Frames => {
            let mut stores = Vec::new();
            nested_stores(&this.root, &mut stores);
            if !stores.iter().any(|s| s.poll_changed(false)) {
                return Ok(Some(Arc::clone(this)));
            }
            match tree.reopen() {
                Some(Ok(Relist::Changed(tree, stores))) => {
                    Ok(Some(Arc::new(dir::open_listed(tree, stores))))
                }
                Some(Ok(Relist::Unchanged)) | None => Ok(Some(Arc::clone(this))),
                Some(Err(e)) => Err(io(e)),
            }
        }
        Form::Dir => {
            let now = match tree.reopen() {
                Some(Ok(Relist::Changed(t, _))) => t,
                Some(Ok(Relist::Unchanged)) | None => Arc::clone(tree),
                Some(Err(e)) => return Err(io(e)),
            };
            Ok(Some(Arc::new(dir::open_store_tree(now)?)))
        }
        Form::Zip => Ok(None),
    }
}
