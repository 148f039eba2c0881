//! The group tree of a store, built from its keys (`/a/b`): groups are the path prefixes, a
//! `<group>/__vlmeta__` key is its group's attribute carrier, and a key that would be both a
//! group and a leaf, or that has an empty, `.` or `..` component, is left out with a log line.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::{Group, Leaf, Location, Node, Shared};

/// Builds the group tree of `keyed` leaves (`/a/b` keys); `__vlmeta__` leaves become their
/// group's carrier.
pub(super) fn build_tree(
    path: &Path,
    mut keyed: Vec<(String, Location)>,
    shared: &Arc<Shared>,
) -> Group {
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut root = Group {
        name: String::new(),
        key: "/".into(),
        children: Vec::new(),
        carrier: None,
    };
    for (key, location) in keyed {
        let parts: Vec<&str> = key.split('/').skip(1).collect();
        if parts
            .iter()
            .any(|p| p.is_empty() || *p == "." || *p == "..")
        {
            log::warn!("{}: key {key:?} left out (bad path)", path.display());
            continue;
        }
        let Some((last, dirs)) = parts.split_last() else {
            continue;
        };
        let leaf = |name: &str| {
            Arc::new(Leaf {
                name: name.to_string(),
                key: key.clone(),
                location: location.clone(),
                shared: Arc::clone(shared),
                cell: OnceLock::new(),
            })
        };
        if !insert(&mut root, dirs, last, &leaf) {
            log::warn!(
                "{}: key {key:?} left out (it is both a group and a leaf)",
                path.display()
            );
        }
    }
    sort_group(&mut root);
    root
}

/// Inserts leaf `last` under the group path `dirs`; false on a group/leaf clash.
fn insert(g: &mut Group, dirs: &[&str], last: &str, leaf: &dyn Fn(&str) -> Arc<Leaf>) -> bool {
    let Some(g) = group_at(g, dirs) else {
        return false;
    };
    if last == "__vlmeta__" {
        g.carrier = Some(leaf(last));
        return true;
    }
    if g.children.iter().any(|c| c.name() == last) {
        return false;
    }
    g.children.push(Node::Leaf(leaf(last)));
    true
}

/// Adds `node` to the group at `/`-separated `dir` under `root` (made if absent; `""`: the
/// root itself), keeping children sorted; false when a leaf is in the way or the name is
/// taken.
pub(super) fn add_node(root: &mut Group, dir: &str, node: Node) -> bool {
    let dirs: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    let Some(g) = group_at(root, &dirs) else {
        return false;
    };
    if g.children.iter().any(|c| c.name() == node.name()) {
        return false;
    }
    g.children.push(node);
    g.children.sort_by(|a, b| a.name().cmp(b.name()));
    true
}

/// The group at path `dirs` under `g`, made if absent; `None` when a leaf is in the way.
fn group_at<'a>(g: &'a mut Group, dirs: &[&str]) -> Option<&'a mut Group> {
    let Some((first, rest)) = dirs.split_first() else {
        return Some(g);
    };
    let pos = g.children.iter().position(|c| c.name() == *first);
    let i = match pos {
        Some(i) => i,
        None => {
            let key = if g.key == "/" {
                format!("/{first}")
            } else {
                format!("{}/{first}", g.key)
            };
            g.children.push(Node::Group(Group {
                name: (*first).to_string(),
                key,
                children: Vec::new(),
                carrier: None,
            }));
            g.children.len() - 1
        }
    };
    match &mut g.children[i] {
        Node::Group(sub) => group_at(sub, rest),
        _ => None,
    }
}

fn sort_group(g: &mut Group) {
    g.children.sort_by(|a, b| a.name().cmp(b.name()));
    for c in &mut g.children {
        if let Node::Group(sub) = c {
            sort_group(sub);
        }
    }
}
