//! Following a collection (issue 12): a store (`.b2z`, `.b2d`) or directory of sources that
//! another writer changes while it is mounted. The tree opens the collection again, reloads
//! every leaf array laid out so far from it (their cached chunks kept where their bytes did
//! not change, as for single sources: `follow.rs`), shows members added since (as lazy leaf
//! directories, and new groups with them) and hides members removed since ([`Members`]),
//! and renders group attributes again.
//!
//! What is watched ([`watched`]): the zip file of a `.b2z`; the directories (root and
//! groups) and `embed.b2e` of a `.b2d` or a directory of sources, whose mtimes change when a
//! member file is added, removed or renamed in; and every leaf array laid out so far (its
//! own files, `follow.rs`). A member file rewritten in place before it was ever opened needs
//! no watching: its leaf opens the file as it is when first accessed.
//!
//! Subtleties:
//! - **Inode numbers never change.** A removed member's directory keeps its inode: it leaves
//!   the listing, lookups of its name fail with ENOENT, and descriptors opened before keep
//!   reading their version. A member added again under the same name shows in the same
//!   directory again. New members get inodes after every existing node.
//! - **Nested stores** (a `.b2d` or `.b2z` inside a directory of sources) are read-only. Local
//!   ones are not followed: their content stays as it was at the first access. A remote
//!   `.b2z` of a server's listed directory is followed ([`Collection::followed`]): when it
//!   changed there, its directory is **replaced** by a new one of the same name (a new inode,
//!   laid out from the store opened again; the old one leaves for good, and descriptors
//!   opened in it keep reading their version).
//! - A ctable member's columns are not arrays of the collection's leaves: they are not
//!   reloaded (their `meta/sizes` and chunk files stay as first laid out).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::Tree;
use super::collection::{LazyLeaf, LeafBuild, add_group};
use super::follow::Invalidation;
use super::layout::{Layout, NodeKind};
use crate::container::store::{Collection, Form, Group, Node};

/// Directory entries changed since the mount by another writer of the collection.
#[derive(Debug, Default)]
pub(crate) struct Members {
    /// Per directory: children added since the mount.
    added: HashMap<u64, Vec<u64>>,
    /// Children (leaf or group directories) whose member is gone.
    gone: HashSet<u64>,
    /// Directories of nested stores replaced by a new directory (also in `gone`, for good).
    replaced: HashSet<u64>,
}

/// The files and directories whose `stat` shows that another writer changed `collection`'s
/// membership (see the module doc).
pub(crate) fn watched(collection: &Collection) -> Vec<PathBuf> {
    let root = collection.path();
    match collection.form() {
        Form::Zip => vec![root.to_path_buf()],
        Form::Dir | Form::Frames => {
            let mut out = vec![root.to_path_buf()];
            if collection.form() == Form::Dir {
                out.push(root.join("embed.b2e"));
            }
            group_dirs(root, collection.root(), &mut out);
            out
        }
    }
}

/// The directories of the groups under `g` (those that are directories on disk).
fn group_dirs(root: &Path, g: &Group, out: &mut Vec<PathBuf>) {
    for child in &g.children {
        if let Node::Group(sub) = child {
            let dir = root.join(sub.key.trim_start_matches('/'));
            if dir.is_dir() {
                out.push(dir);
            }
            group_dirs(root, sub, out);
        }
    }
}

impl Tree {
    /// The children of directory `ino` whose fixed children are `fixed`: with the members
    /// added since the mount, without those removed.
    pub(crate) fn members_of<'a>(&self, ino: u64, fixed: &'a [u64]) -> Cow<'a, [u64]> {
        if self.mounted.collection().is_none() {
            return Cow::Borrowed(fixed);
        }
        let m = self.follow.members.read();
        let added = m.added.get(&ino);
        if added.is_none() && !fixed.iter().any(|c| m.gone.contains(c)) {
            return Cow::Borrowed(fixed);
        }
        Cow::Owned(
            fixed
                .iter()
                .chain(added.into_iter().flatten())
                .copied()
                .filter(|c| !m.gone.contains(c))
                .collect(),
        )
    }

    /// Whether the member shown by directory `ino` was removed by another writer.
    pub(crate) fn member_gone(&self, ino: u64) -> bool {
        self.mounted.collection().is_some() && self.follow.members.read().gone.contains(&ino)
    }

    /// Brings the members shown in directory `dir` (group `g` of the reopened collection;
    /// `old`: the group as the collection showed it before) up to date, and those of its
    /// sub-groups; adds to `out` the entries the kernel must forget. The caller holds `grow`.
    pub(crate) fn follow_group(
        &self,
        dir: u64,
        g: &Group,
        old: Option<&Group>,
        out: &mut Vec<Invalidation>,
    ) {
        let fixed = match self.node(dir).map(|n| &n.kind) {
            Some(NodeKind::Dir { children, .. }) => children.clone(),
            _ => return,
        };
        let shown: Vec<u64> = {
            let m = self.follow.members.read();
            let added = m.added.get(&dir).cloned().unwrap_or_default();
            fixed.into_iter().chain(added).collect()
        };
        let mut names: HashMap<&str, u64> = HashMap::new();
        for &c in &shown {
            let Some(node) = self.node(c) else { continue };
            if !matches!(node.kind, NodeKind::Dir { .. } | NodeKind::Leaf(_))
                || self.follow.members.read().replaced.contains(&c)
            {
                continue;
            }
            names.insert(node.name.as_str(), c);
            let still = g
                .child(&node.name)
                .is_some_and(|n| same_kind(n, &node.kind));
            let mut m = self.follow.members.write();
            let changed = if still {
                m.gone.remove(&c)
            } else {
                m.gone.insert(c)
            };
            if changed {
                out.push(Invalidation::Entry {
                    parent: dir,
                    name: node.name.clone(),
                });
            }
        }
        for child in &g.children {
            let name = child.name();
            if !super::view::valid_name(name) || name == "__attrs__" {
                continue;
            }
            let before = old.and_then(|o| o.child(name));
            match (names.get(name), child) {
                (Some(&ino), Node::Group(sub)) => {
                    if matches!(self.node(ino).map(|n| &n.kind), Some(NodeKind::Dir { .. })) {
                        let before = match before {
                            Some(Node::Group(b)) => Some(b),
                            _ => None,
                        };
                        self.follow_group(ino, sub, before, out);
                    }
                }
                (Some(&ino), Node::Store(_)) if matches!(before, Some(Node::Store(b)) if b.source_changed()) =>
                {
                    // Changed on its server: a new directory of the same name.
                    if let Some(new) = self.add_member(dir, child) {
                        let mut m = self.follow.members.write();
                        m.gone.insert(ino);
                        m.replaced.insert(ino);
                        m.added.entry(dir).or_default().push(new);
                        out.push(Invalidation::Entry {
                            parent: dir,
                            name: name.to_owned(),
                        });
                    }
                }
                (Some(_), _) => {}
                (None, _) => {
                    if let Some(ino) = self.add_member(dir, child) {
                        self.follow
                            .members
                            .write()
                            .added
                            .entry(dir)
                            .or_default()
                            .push(ino);
                        out.push(Invalidation::Entry {
                            parent: dir,
                            name: name.to_owned(),
                        });
                    }
                }
            }
        }
    }

    /// Adds member `child` (a leaf, a group with everything under it, or a nested store)
    /// under directory `dir`, numbered after every node; returns its inode. The caller holds
    /// `grow`.
    fn add_member(&self, dir: u64, child: &Node) -> Option<u64> {
        let nodes = self.nodes.len() as u64;
        let arrays = u32::try_from(self.reader.arrays()).ok()?;
        let mut sub = Layout::subtree(dir, nodes, arrays, self.owner);
        let cell = self.mounted.collection()?;
        let made = match child {
            Node::Leaf(leaf) => Ok(sub.lazy_leaf(
                dir,
                child.name(),
                LazyLeaf {
                    leaf: leaf.clone(),
                    top: true,
                    built: LeafBuild::default(),
                },
            )),
            Node::Group(g) => {
                let d = sub.dir(dir, child.name());
                add_group(&mut sub, d, g, Some(cell)).map(|()| d)
            }
            Node::Store(nested) => {
                let d = sub.dir(dir, child.name());
                add_group(&mut sub, d, nested.root(), None).map(|()| d)
            }
        };
        let ino = match made {
            Ok(ino) => ino,
            Err(e) => {
                log::warn!("{}: not shown: {}", child.name(), super::display_chain(&e));
                return None;
            }
        };
        if nodes + sub.nodes.len() as u64 >= super::inode::CHUNK_BASE || !sub.stores.is_empty() {
            return None;
        }
        for node in sub.nodes.into_iter().skip(1) {
            self.nodes.push(node);
        }
        Some(ino)
    }
}

/// Whether collection node `n` is still shown by a tree node of kind `kind`.
fn same_kind(n: &Node, kind: &NodeKind) -> bool {
    match n {
        Node::Leaf(_) => matches!(kind, NodeKind::Leaf(_)),
        Node::Group(_) | Node::Store(_) => matches!(kind, NodeKind::Dir { .. }),
    }
}
