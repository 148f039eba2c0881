//! Which native directories the Zarr view shows, and as what: a group or an array
//! ([`DirKind`]), under which name and Zarr path, with which members (a name Zarr refuses and
//! an array without a Zarr type are left out, and recorded with the reason).
//!
//! Members keep their native names, but the sources of a mounted directory of sources,
//! which are named after their stem as a single source's array is (`temp.b2nd` -> `temp`,
//! so that xarray finds the coordinate `time` in `time.b2nd`), unless that stem is another
//! member's name or stem too (then each keeps its file name).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::super::layout::{Node, NodeKind};
use super::super::{ROOT_INO, Tree, TreeError};
use super::{DirKind, ZNode, names};
use crate::container::store::{Form, Location};
use crate::reader::ArrayId;

impl Tree {
    /// The children of native directory `n` (`node`); a collection leaf is laid out without
    /// following other writers first (lookups follow at most every 50 ms, the root
    /// `zarr.json` once before it opens every leaf).
    pub(super) fn zarr_native(&self, n: u64, node: &'_ Node) -> Result<Vec<u64>, TreeError> {
        match &node.kind {
            NodeKind::Leaf(_) if self.member_gone(n) => Err(TreeError::NotFound),
            NodeKind::Leaf(lazy) => self.leaf_children_as_is(n, lazy).map(<[u64]>::to_vec),
            _ => self.children(n, node).map(std::borrow::Cow::into_owned),
        }
    }

    /// Whether native directory `n` (already laid out) holds an array (its `data/`).
    pub(super) fn native_array(&self, children: &[u64]) -> Option<ArrayId> {
        children
            .iter()
            .find_map(|&c| match self.node(c).map(|n| &n.kind) {
                Some(NodeKind::Dir { data: Some(a), .. }) => Some(*a),
                _ => None,
            })
    }

    /// What the Zarr directory mirroring native directory `n` is (a collection leaf is laid
    /// out now).
    ///
    /// # Errors
    /// As the native directory's listing (EIO for a leaf that cannot be opened).
    pub(crate) fn zarr_dir_kind(&self, n: u64) -> Result<DirKind, TreeError> {
        let node = self.node(n).ok_or(TreeError::NotFound)?;
        let children = self.zarr_native(n, node)?;
        Ok(match self.native_array(&children) {
            Some(a) => DirKind::Array(a),
            None => DirKind::Group,
        })
    }

    /// Whether the mount's root is one array (the view's root group then holds just it).
    pub(super) fn root_is_array(&self) -> bool {
        matches!(self.zarr_dir_kind(ROOT_INO), Ok(DirKind::Array(_)))
    }

    /// The native name of directory `n` in the view (the root's: the source's stem).
    pub(crate) fn zarr_node_name(&self, n: u64) -> String {
        if n == ROOT_INO {
            return self
                .zarr
                .stem
                .get_or_init(|| {
                    let path = (self.reader.arrays() > 0)
                        .then(|| self.reader.store(ArrayId(0)).path().to_path_buf());
                    // Sparse frames and bcolz roots are directories, local or under a remote
                    // prefix (whose URL is no local directory).
                    let dir_kind = self.live(ArrayId(0)).is_some_and(|l| {
                        !matches!(l.get().kind(), crate::container::SourceKind::Cframe)
                    });
                    let is_dir = dir_kind || path.as_deref().is_some_and(std::path::Path::is_dir);
                    path.map_or_else(|| "array".into(), |p| names::stem(&p, is_dir))
                })
                .clone();
        }
        self.node(n)
            .map(|node| self.zarr_name_of(n, node))
            .unwrap_or_default()
    }

    /// The name of native node `c` (`node`) in its Zarr group: its native name, or for a
    /// source of a mounted directory of sources its stem when no other member of the
    /// directory has or takes that name.
    fn zarr_name_of(&self, c: u64, node: &Node) -> String {
        // Only a top-level leaf can be renamed (no `stat` here: `zarr_renamed` tells).
        if matches!(&node.kind, NodeKind::Leaf(lazy) if lazy.top)
            && let Some(name) = self.zarr_renamed_in(node.parent).get(&c)
        {
            return name.clone();
        }
        node.name.clone()
    }

    /// [`Tree::zarr_renamed`] of group directory `dir` when the mount is a directory of
    /// sources; empty (nothing looked at) for any other mount. Fetched once per listing or
    /// lookup, not once per member.
    fn zarr_renamed_in(&self, dir: u64) -> Arc<HashMap<u64, String>> {
        if self.zarr_mounted_form() == Some(Form::Frames) {
            self.zarr_renamed(dir)
        } else {
            Arc::default()
        }
    }

    /// The form of the mounted collection (`None`: one source or a ctable).
    pub(super) fn zarr_mounted_form(&self) -> Option<Form> {
        self.mounted.collection().map(|c| c.get().form())
    }

    /// The stem a source of a mounted directory of sources (a top-level leaf of a collection
    /// of form [`Form::Frames`]: the caller checks the form) is named after when no other
    /// member takes it: its file name without the last suffix, a directory source's (sparse
    /// frame, bcolz root) whole name, as a single source's; `None` for every other node.
    pub(super) fn zarr_source_stem(&self, node: &Node) -> Option<String> {
        let NodeKind::Leaf(lazy) = &node.kind else {
            return None;
        };
        if !lazy.top {
            return None;
        }
        let is_dir = match lazy.leaf.location() {
            Location::Source(p) => p.is_dir(),
            Location::TreeDir(_) => true,
            _ => false,
        };
        Some(names::stem(Path::new(&node.name), is_dir))
    }

    /// The members of native directory `dir` (in a mounted directory of sources) whose Zarr
    /// name is not their native name, by inode: each source named after its stem, but where
    /// two members would share a name (two stems, or a stem and a native name), those keep
    /// their native names. Kept per directory while its children are the same (commits do
    /// not change it: no `stat` of every member after each).
    fn zarr_renamed(&self, dir: u64) -> Arc<HashMap<u64, String>> {
        let Some(node) = self.node(dir) else {
            return Arc::default();
        };
        let Ok(children) = self.children(dir, node) else {
            return Arc::default();
        };
        if let Some((kids, names)) = self.zarr.member_names.lock().get(&dir)
            && kids[..] == children[..]
        {
            return names.clone();
        }
        let mut native: HashSet<&str> = HashSet::new();
        let mut stems: Vec<(u64, String)> = Vec::new();
        for &c in children.iter() {
            let Some(child) = self.node(c) else { continue };
            native.insert(child.name.as_str());
            if let Some(stem) = self.zarr_source_stem(child)
                && stem != child.name
            {
                stems.push((c, stem));
            }
        }
        let mut taken: HashMap<&str, usize> = HashMap::new();
        for (_, stem) in &stems {
            *taken.entry(stem.as_str()).or_default() += 1;
        }
        let mut renamed = HashMap::new();
        for (c, stem) in &stems {
            if taken[stem.as_str()] == 1 && !native.contains(stem.as_str()) {
                renamed.insert(*c, stem.clone());
            } else if let Some(child) = self.node(*c) {
                log::debug!(
                    "zarr: {:?} keeps its file name in the Zarr view: its stem {stem:?} is \
                     another member's name too",
                    child.name
                );
            }
        }
        let renamed = Arc::new(renamed);
        self.zarr
            .member_names
            .lock()
            .insert(dir, (children.into_owned(), renamed.clone()));
        renamed
    }

    /// The Zarr path of native directory `n` (for messages and the consolidated keys).
    pub(super) fn zarr_path(&self, n: u64) -> String {
        let mut parts = Vec::new();
        let mut at = n;
        let root_array = self.root_is_array();
        while at != ROOT_INO {
            let Some(node) = self.node(at) else { break };
            parts.push(self.zarr_name_of(at, node));
            at = node.parent;
        }
        if root_array && n == ROOT_INO {
            parts.push(self.zarr_node_name(ROOT_INO));
        }
        parts.reverse();
        parts.join("/")
    }

    /// Records that the array at Zarr path `path` is left out of the view, for `why`.
    pub(super) fn zarr_omit(&self, path: String, why: &str) {
        let mut o = self.zarr.omitted.lock();
        if let std::collections::btree_map::Entry::Vacant(e) = o.entry(path) {
            log::warn!("zarr/{}: not in the Zarr view: {why}", e.key());
            e.insert(why.to_owned());
        }
    }

    /// The arrays left out of the view so far, as a JSON object `{path: why}`.
    pub(crate) fn zarr_omitted(&self) -> Vec<u8> {
        let o = self.zarr.omitted.lock();
        let m: Map<String, Value> = o
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        super::super::view::json_file(&Value::Object(m))
    }

    /// The Zarr children of group directory `n` (the root's when `n` is [`ROOT_INO`]): its
    /// native subdirectories whose names Zarr accepts, without the arrays known to have no
    /// Zarr type; collection leaves not opened yet are listed unopened.
    pub(super) fn zarr_group_children(&self, n: u64) -> Result<Vec<(String, ZNode)>, TreeError> {
        let node = self.node(n).ok_or(TreeError::NotFound)?;
        let children = self.zarr_native(n, node)?;
        let renamed = self.zarr_renamed_in(n);
        Ok(children
            .iter()
            .filter_map(|&c| self.zarr_member_in(c, None, &renamed))
            .collect())
    }

    /// Native child `c` of a group as a member of the Zarr group (named `name`, when given),
    /// or `None` when it is not one: not a directory, a name Zarr refuses, an array (already
    /// opened) with no Zarr type.
    pub(super) fn zarr_member(&self, c: u64, name: Option<&str>) -> Option<(String, ZNode)> {
        let parent = self.node(c)?.parent;
        self.zarr_member_in(c, name, &self.zarr_renamed_in(parent))
    }

    /// [`Tree::zarr_member`], with the Zarr names of `c`'s directory that differ from the
    /// native ones (`renamed`, [`Tree::zarr_renamed_in`]) fetched by the caller.
    fn zarr_member_in(
        &self,
        c: u64,
        name: Option<&str>,
        renamed: &HashMap<u64, String>,
    ) -> Option<(String, ZNode)> {
        let child = self.node(c)?;
        let zname = renamed.get(&c).unwrap_or(&child.name);
        if name.is_some_and(|n| n != zname) {
            return None;
        }
        let zname = zname.clone();
        let built = match &child.kind {
            NodeKind::Dir { data: None, .. } => true,
            // A leaf that failed to open is listed (its directory gives EIO), not tried
            // again by a listing (nor by a consolidation that lists: `consolidated.rs`).
            NodeKind::Leaf(lazy) => lazy.built.is_laid_out(),
            _ => return None,
        };
        if let Some(why) = names::refused(&zname) {
            self.zarr_omit(self.zarr_path(c), why);
            return None;
        }
        if built
            && let Ok(DirKind::Array(a)) = self.zarr_dir_kind(c)
            && let Err(why) = self.zarr_geom(a, None)
        {
            self.zarr_omit(self.zarr_path(c), &why);
            return None;
        }
        Some((zname, ZNode::Dir(c)))
    }

    /// The child `name` of Zarr group or array directory `z` (not of chunk-tree
    /// directories), found without listing the others.
    pub(super) fn zarr_child(&self, z: ZNode, name: &str) -> Result<Option<ZNode>, TreeError> {
        let group = match z {
            ZNode::Root if name == "zarr.json" => return Ok(Some(ZNode::RootJson)),
            ZNode::Dir(n) if name == "zarr.json" => return Ok(Some(ZNode::Json(n))),
            ZNode::Root if self.root_is_array() => {
                let found = self.zarr_children(z)?.into_iter().find(|(n, _)| n == name);
                return Ok(found.map(|(_, c)| c));
            }
            ZNode::Root => ROOT_INO,
            ZNode::Dir(n) => match self.zarr_dir_kind(n)? {
                DirKind::Group => n,
                DirKind::Array(_) => {
                    let found = self.zarr_children(z)?.into_iter().find(|(n, _)| n == name);
                    return Ok(found.map(|(_, c)| c));
                }
            },
            _ => return Err(TreeError::NotADirectory(z.ino().unwrap_or(0))),
        };
        let node = self.node(group).ok_or(TreeError::NotFound)?;
        let children = self.zarr_native(group, node)?;
        let renamed = self.zarr_renamed_in(group);
        Ok(children
            .iter()
            .find_map(|&c| self.zarr_member_in(c, Some(name), &renamed))
            .map(|(_, c)| c))
    }

    /// The named children of Zarr directory `z` (not of chunk-tree directories, which are
    /// listed by `Listing::Chunks`).
    pub(crate) fn zarr_children(&self, z: ZNode) -> Result<Vec<(String, ZNode)>, TreeError> {
        let json = "zarr.json".to_owned();
        match z {
            ZNode::Root => {
                let mut v = vec![(json, ZNode::RootJson)];
                if self.root_is_array() {
                    let a = ArrayId(0);
                    match self.zarr_geom(a, None) {
                        Ok(_) => v.push((self.zarr_node_name(ROOT_INO), ZNode::Dir(ROOT_INO))),
                        Err(why) => self.zarr_omit(self.zarr_node_name(ROOT_INO), &why),
                    }
                } else {
                    v.extend(self.zarr_group_children(ROOT_INO)?);
                    let pending = self.zarr_pending_in(self.zarr_root_ino(), &v);
                    v.extend(pending);
                }
                Ok(v)
            }
            ZNode::Dir(n) => match self.zarr_dir_kind(n)? {
                DirKind::Array(a) => {
                    self.zarr_geom(a, None).map_err(|_| TreeError::NotFound)?;
                    let c = ZNode::Chunks {
                        array: a,
                        level: 0,
                        index: 0,
                    };
                    Ok(vec![(json, ZNode::Json(n)), ("c".into(), c)])
                }
                DirKind::Group => {
                    let mut v = vec![(json, ZNode::Json(n))];
                    v.extend(self.zarr_group_children(n)?);
                    if let Some(ino) = z.ino() {
                        let pending = self.zarr_pending_in(ino, &v);
                        v.extend(pending);
                    }
                    Ok(v)
                }
            },
            _ => Err(TreeError::NotADirectory(z.ino().unwrap_or(0))),
        }
    }

    /// Whether native directory `n` is a ctable (its arrays share their first dimension).
    pub(super) fn zarr_is_table(&self, n: u64) -> bool {
        if n == ROOT_INO {
            return self.mounted.table().is_some();
        }
        matches!(self.node(n).map(|n| &n.kind), Some(NodeKind::Leaf(_)))
            && matches!(self.zarr_dir_kind(n), Ok(DirKind::Group))
    }

    /// The path of Zarr inode `ino` from the mount root, for messages.
    pub(crate) fn zarr_path_of(&self, ino: u64) -> String {
        let view = format!("/{}", self.zarr_name());
        let join = |n: u64, rest: &str| {
            let p = self.zarr_path(n);
            let p = if p.is_empty() { p } else { format!("/{p}") };
            format!("{view}{p}{rest}")
        };
        match ZNode::of(ino) {
            None if super::V2::of(ino).is_some() => self.zarr2_path_of(ino),
            Some(ZNode::Root) | None => view,
            Some(ZNode::RootJson) => format!("{view}/zarr.json"),
            Some(ZNode::Dir(n)) => join(n, ""),
            Some(ZNode::Json(n)) => join(n, "/zarr.json"),
            Some(ZNode::Pending(k)) => match self.zarr_pending(k) {
                Some(ZNode::Dir(n)) => join(n, ""),
                _ => self.zarr_pending_path(k),
            },
            Some(ZNode::Chunks {
                array,
                level,
                index,
            }) => {
                let data = super::super::events::data_dir_of(&self.nodes, array);
                let n = self.node(data).map_or(ROOT_INO, |x| x.parent);
                let mut key = Vec::new();
                if let Ok(g) = self.zarr_geom(array, None) {
                    let mut rest = index;
                    for d in (0..usize::from(level).min(g.ndim())).rev() {
                        let across = g.grid[d].max(1);
                        key.push((rest % across).to_string());
                        rest /= across;
                    }
                }
                key.push("c".into());
                key.reverse();
                join(n, &format!("/{}", key.join("/")))
            }
        }
    }
}
