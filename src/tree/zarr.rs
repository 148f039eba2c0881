//! The Zarr view (issue 20): every mount also shows a Zarr v3 hierarchy in the directory
//! `zarr/` of its root, served from the same decoded chunks as `data/N.bin` and `array.npy`,
//! so any Zarr reader (zarr-python, xarray, Dask, TensorStore, zarrs) reads Blosc2 and bcolz
//! sources with no Blosc library and no copy. `docs/ZARR.md` is the user's contract.
//!
//! ```text
//! zarr/zarr.json           root group; attributes; consolidated metadata of everything
//! zarr/<array>/zarr.json   array: shape, data_type, chunk grid = the source's chunks, ...
//! zarr/<array>/c/i/j/...   chunk objects: the chunk's items in C order, padded to the chunk
//! zarr/<group>/zarr.json   a collection's group: attributes; consolidated metadata below it
//! ```
//!
//! What maps to what (the view mirrors the native tree; `names.rs` has the names):
//! - a single array: the root group holds one array named after the source's stem;
//! - a bcolz ctable: the root group (the table's attributes) holds one array per column,
//!   whose first dimension they share;
//! - a collection: its groups are groups and its leaves arrays, at the native paths (a ctable
//!   leaf is a group of columns).
//!
//! Where each concern lives: `ino.rs` (the inode plan: arithmetic, no allocation per node),
//! `geom.rs` (dtype, shape, chunk grid, and where an object's bytes are in the decoded chunk),
//! `meta.rs` (the `zarr.json` documents), `json.rs` (their text: how a float NaN is spelled),
//! `consolidated.rs` (the groups' documents with the consolidated metadata below them, kept
//! per generation), `quick.rs` (the metadata of collection leaves not laid out yet, from
//! their headers), `names.rs`, `read.rs` (listings and object bytes), `write.rs` (writes,
//! renames of temp files over chunk objects), `attrs.rs` (attribute edits: a new `zarr.json`
//! renamed over the old one), `resize.rs` (a new `zarr.json` with another first dimension),
//! `undo.rs` (removals of chunk objects, and their take-back when a resize is refused),
//! `follow.rs` (what the kernel must forget after another writer).
//!
//! Subtleties:
//! - **Lazy.** Nothing here runs at mount. A collection leaf is opened when a lookup goes
//!   into its Zarr directory, as for its native one; a group's `zarr.json` reads the header
//!   of every leaf below it (it holds their metadata; `quick.rs`, without laying the leaves
//!   out) when first read or `stat`ed, and is kept until something changes (a generation
//!   counter bumped by commits and reloads).
//! - **Geometry follows the NPY view** of each array ([`Geom::of`]), which commits and
//!   other writers' changes already keep current: `zarr.json`, the chunk tree and
//!   `array.npy` always agree. A read-only descriptor reads the version it opened.
//! - **Non-finite attributes** are zarr-python's bare `NaN`, `Infinity`, `-Infinity` in every
//!   `zarr.json`, or the strings `"NaN"`, ... under `-o zarr_strict_json` (strict JSON for
//!   TensorStore and other strict parsers; `Tree::zarr_non_finite`, `json.rs`); `attrs.rs`
//!   reads both back.
//! - **An array without a Zarr type** (records, `S`, ...) is left out; the reason is logged
//!   once and kept in the root's `user.b2fs.zarr_omitted` extended attribute.

mod attrs;
mod consolidated;
mod docs;
mod follow;
mod geom;
mod ino;
mod json;
mod meta;
mod names;
mod quick;
mod read;
mod resize;
mod undo;
mod write;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::layout::{FileKind, NodeKind};
use super::{Attr, EntryKind, ROOT_INO, Tree, TreeError};
use crate::container::npy::Npy;
use crate::reader::{ArrayId, ChunkId};
pub use geom::Geom;
pub use ino::{ZARR_BASE, ZNode, is_zarr};
pub(crate) use read::Listing;
pub use resize::MAX_NEW_CHUNKS;
pub(crate) use write::ZarrTarget;

/// The names zarr-python probes for Zarr v2 metadata: answered ENOENT at once, without
/// opening anything.
const V2_PROBES: &[&str] = &[".zarray", ".zattrs", ".zgroup", ".zmetadata"];

/// Why an array without an NPY view (a special object, an unknown dtype) has no Zarr
/// geometry.
const NO_NPY: &str = "it has no NPY view (see the log for why)";

/// An array's Zarr geometry, or why it has none.
type GeomOf = Result<Arc<Geom>, String>;

/// The view's state in a tree.
#[derive(Debug, Default)]
pub(crate) struct ZarrState {
    /// The view directory's name in the root (fixed at the first look).
    name: std::sync::OnceLock<String>,
    /// The single-array source's array name (its stem), once known.
    stem: std::sync::OnceLock<String>,
    /// Bumped whenever metadata may have changed (commits, reloads).
    generation: AtomicU64,
    /// Group `zarr.json` documents (with their consolidated metadata) by inode, with the
    /// generation each was built in (`consolidated.rs`), within a byte budget (`docs.rs`).
    group_json: Mutex<docs::DocCache>,
    /// Per array: the geometry of its NPY view of that moment.
    geoms: Mutex<HashMap<ArrayId, (Arc<Npy>, GeomOf)>>,
    /// Arrays left out, by Zarr path, with the reason.
    omitted: Mutex<BTreeMap<String, String>>,
    /// `zarr.json` inodes emptied by a writer (`O_TRUNC`, `ftruncate` to 0), with the byte
    /// ranges written back since (`zarr/write.rs`): the last writer's release checks that
    /// the whole file was.
    rewrites: Mutex<HashMap<u64, Vec<std::ops::Range<u64>>>>,
    /// Chunk objects removed lately, kept until a refused resize takes them back (`undo.rs`).
    unlinked: Mutex<undo::Unlinked>,
    /// Tests: run by the next resize before it takes the committer ([`Tree::on_zarr_resize`]).
    resize_hook: Mutex<Option<ResizeHook>>,
}

/// What [`Tree::on_zarr_resize`] runs.
struct ResizeHook(Box<dyn FnOnce(&Tree) + Send>);

impl std::fmt::Debug for ResizeHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResizeHook")
    }
}

/// What a Zarr directory mirroring a native directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirKind {
    /// A group (a collection's group, a ctable, a ctable leaf).
    Group,
    /// An array.
    Array(ArrayId),
}

impl Tree {
    /// The metadata of the view may have changed (a commit, a reload): the root `zarr.json`
    /// is built again when next asked for.
    pub(crate) fn zarr_changed(&self) {
        self.zarr.generation.fetch_add(1, Ordering::Relaxed);
        // Removed chunks past the time a refused resize may take them back go.
        self.zarr.unlinked.lock().expire();
    }

    /// Tests: `hook` runs once, in the next resize through the view (a `zarr.json` renamed
    /// over an array's with another shape), after the view's document was read and before the
    /// resize takes the committer: a test changes the array there, as another writer may.
    pub fn on_zarr_resize(&self, hook: Box<dyn FnOnce(&Tree) + Send>) {
        *self.zarr.resize_hook.lock() = Some(ResizeHook(hook));
    }

    /// Tests: the group documents of the Zarr view are kept within `bytes` (default 64 MiB);
    /// the least recently read past it are built again when read.
    pub fn set_zarr_doc_budget(&self, bytes: usize) {
        self.zarr.group_json.lock().set_budget(bytes);
    }

    /// The group documents of the Zarr view kept now: (bytes, documents, documents dropped
    /// to stay within the budget so far).
    pub fn zarr_doc_usage(&self) -> (usize, usize, u64) {
        self.zarr.group_json.lock().usage()
    }

    /// Tests: the Zarr view's documents are built again at their next read, as after a
    /// commit.
    pub fn zarr_rebuild_documents(&self) {
        self.zarr_changed();
    }

    /// Collection leaf `n` opened after failed attempts: what the view left out of it (and
    /// the documents built while it failed) is made again at the next look.
    pub(crate) fn zarr_leaf_recovered(&self, n: u64) {
        let path = self.zarr_path(n);
        let below = format!("{path}/");
        self.zarr
            .omitted
            .lock()
            .retain(|k, _| *k != path && !k.starts_with(&below));
        self.zarr_changed();
    }

    /// The name of the view's directory in the root.
    pub(crate) fn zarr_name(&self) -> &str {
        self.zarr.name.get_or_init(|| {
            let root = self.node(ROOT_INO);
            let taken = |name: &str| match root.map(|n| &n.kind) {
                Some(NodeKind::Dir { children, .. }) => children
                    .iter()
                    .any(|&c| self.node(c).is_some_and(|n| n.name == name)),
                _ => false,
            };
            let name = names::view_name(&taken);
            if name != names::VIEW {
                log::warn!(
                    "the root has a member called {:?}: the Zarr view is {name:?}",
                    names::VIEW
                );
            }
            name
        })
    }

    /// The inode of the view's directory.
    pub(crate) fn zarr_root_ino(&self) -> u64 {
        ZNode::Root.ino().unwrap_or(ZARR_BASE)
    }

    /// Whether `node` stands for something that exists now.
    pub(crate) fn zarr_exists(&self, z: ZNode) -> bool {
        match z {
            ZNode::Root | ZNode::RootJson => true,
            ZNode::Dir(n) | ZNode::Json(n) => matches!(
                self.node(n).map(|n| &n.kind),
                Some(NodeKind::Dir { data: None, .. } | NodeKind::Leaf(_))
            ),
            ZNode::Chunks {
                array,
                level,
                index,
            } => {
                if array.index() >= self.reader.arrays() {
                    return false;
                }
                match self.zarr_geom(array, None) {
                    Ok(g) => usize::from(level) <= g.ndim() && index < g.prefixes(level.into()),
                    Err(_) => false,
                }
            }
        }
    }

    /// The Zarr geometry of `array`'s NPY view `npy` (`None`: the current one).
    pub(crate) fn zarr_geom(
        &self,
        array: ArrayId,
        npy: Option<Arc<Npy>>,
    ) -> Result<Arc<Geom>, String> {
        let npy = match npy.or_else(|| self.npy_view(array)) {
            Some(n) => n,
            None => return Err(NO_NPY.into()),
        };
        let mut geoms = self.zarr.geoms.lock();
        match geoms.get(&array) {
            Some((seen, g)) if Arc::ptr_eq(seen, &npy) => g.clone(),
            _ => {
                let shards = self.options.zarr_shards;
                let g = Geom::of(&npy).map(|g| Arc::new(g.sharded(shards)));
                geoms.insert(array, (npy, g.clone()));
                g
            }
        }
    }

    /// The children of native directory `n` (`node`); a collection leaf is laid out without
    /// following other writers first (lookups follow at most every 50 ms, the root
    /// `zarr.json` once before it opens every leaf).
    fn zarr_native(&self, n: u64, node: &'_ super::layout::Node) -> Result<Vec<u64>, TreeError> {
        match &node.kind {
            NodeKind::Leaf(_) if self.member_gone(n) => Err(TreeError::NotFound),
            NodeKind::Leaf(lazy) => self.leaf_children_as_is(n, lazy).map(<[u64]>::to_vec),
            _ => self.children(n, node).map(std::borrow::Cow::into_owned),
        }
    }

    /// Whether native directory `n` (already laid out) holds an array (its `data/`).
    fn native_array(&self, children: &[u64]) -> Option<ArrayId> {
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
    fn root_is_array(&self) -> bool {
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
        self.node(n).map(|n| n.name.clone()).unwrap_or_default()
    }

    /// The Zarr path of native directory `n` (for messages and the consolidated keys).
    fn zarr_path(&self, n: u64) -> String {
        let mut parts = Vec::new();
        let mut at = n;
        let root_array = self.root_is_array();
        while at != ROOT_INO {
            let Some(node) = self.node(at) else { break };
            parts.push(node.name.clone());
            at = node.parent;
        }
        if root_array && n == ROOT_INO {
            parts.push(self.zarr_node_name(ROOT_INO));
        }
        parts.reverse();
        parts.join("/")
    }

    /// Records that the array at Zarr path `path` is left out of the view, for `why`.
    fn zarr_omit(&self, path: String, why: &str) {
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
        super::view::json_file(&Value::Object(m))
    }

    /// The Zarr children of group directory `n` (the root's when `n` is [`ROOT_INO`]): its
    /// native subdirectories whose names Zarr accepts, without the arrays known to have no
    /// Zarr type; collection leaves not opened yet are listed unopened.
    fn zarr_group_children(&self, n: u64) -> Result<Vec<(String, ZNode)>, TreeError> {
        let node = self.node(n).ok_or(TreeError::NotFound)?;
        let children = self.zarr_native(n, node)?;
        Ok(children
            .iter()
            .filter_map(|&c| self.zarr_member(c, None))
            .collect())
    }

    /// Native child `c` of a group as a member of the Zarr group (named `name`, when given),
    /// or `None` when it is not one: not a directory, a name Zarr refuses, an array (already
    /// opened) with no Zarr type.
    fn zarr_member(&self, c: u64, name: Option<&str>) -> Option<(String, ZNode)> {
        let child = self.node(c)?;
        if name.is_some_and(|n| n != child.name) {
            return None;
        }
        let built = match &child.kind {
            NodeKind::Dir { data: None, .. } => true,
            // A leaf that failed to open is listed (its directory gives EIO), not tried
            // again by a listing (nor by a consolidation that lists: `consolidated.rs`).
            NodeKind::Leaf(lazy) => lazy.built.is_laid_out(),
            _ => return None,
        };
        if let Some(why) = names::refused(&child.name) {
            self.zarr_omit(self.zarr_path(c), why);
            return None;
        }
        if built {
            if let Ok(DirKind::Array(a)) = self.zarr_dir_kind(c) {
                if let Err(why) = self.zarr_geom(a, None) {
                    self.zarr_omit(self.zarr_path(c), &why);
                    return None;
                }
            }
        }
        Some((child.name.clone(), ZNode::Dir(c)))
    }

    /// The child `name` of Zarr group or array directory `z` (not of chunk-tree
    /// directories), found without listing the others.
    fn zarr_child(&self, z: ZNode, name: &str) -> Result<Option<ZNode>, TreeError> {
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
        Ok(children
            .iter()
            .find_map(|&c| self.zarr_member(c, Some(name)))
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
                    Ok(v)
                }
            },
            _ => Err(TreeError::NotADirectory(z.ino().unwrap_or(0))),
        }
    }

    /// The attributes of native directory `n` as its `__attrs__` file shows them (`{}`
    /// without one).
    ///
    /// # Errors
    /// EIO when its `__attrs__` cannot be read (a group's carrier that does not read): the
    /// metadata must not say the node has no attributes.
    fn zarr_attrs(&self, n: u64) -> Result<Value, TreeError> {
        let file = self.zarr_attrs_file(n).and_then(|c| self.node(c));
        match file.map(|f| &f.kind) {
            Some(NodeKind::File(FileKind::Attrs(_, stored))) => {
                Ok(meta::parse_attrs(&super::read::generated(stored)?))
            }
            _ => Ok(Value::Object(Map::new())),
        }
    }

    /// The `__attrs__` file of native directory `n` (a collection leaf laid out for it), if
    /// it has one.
    fn zarr_attrs_file(&self, n: u64) -> Option<u64> {
        let node = self.node(n)?;
        let children = self.zarr_native(n, node).ok()?;
        children.into_iter().find(|&c| {
            self.node(c).is_some_and(|child| {
                matches!(child.kind, NodeKind::File(FileKind::Attrs(..)))
                    && child.name == "__attrs__"
            })
        })
    }

    /// Whether native directory `n` is a ctable (its arrays share their first dimension).
    fn zarr_is_table(&self, n: u64) -> bool {
        if n == ROOT_INO {
            return self.mounted.table().is_some();
        }
        matches!(self.node(n).map(|n| &n.kind), Some(NodeKind::Leaf(_)))
            && matches!(self.zarr_dir_kind(n), Ok(DirKind::Group))
    }

    /// The `zarr.json` object of the array in native directory `n`, of geometry `g`.
    fn zarr_array_json(&self, n: u64, g: &Geom) -> Result<Value, TreeError> {
        Ok(self.zarr_array_json_with(n, g, &self.zarr_attrs(n)?))
    }

    /// [`Tree::zarr_array_json`] with the array's attributes `attrs` known.
    fn zarr_array_json_with(&self, n: u64, g: &Geom, attrs: &Value) -> Value {
        let name = self.zarr_node_name(n);
        let parent = self.node(n).map(|x| x.parent).filter(|_| n != ROOT_INO);
        let first = parent.filter(|&p| self.zarr_is_table(p)).map(|p| {
            let columns: Vec<String> = self
                .zarr_group_children(p)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            let refs: Vec<&str> = columns.iter().map(String::as_str).collect();
            names::row_dimension(&refs)
        });
        let dims = names::dimension_names(&name, g.ndim(), attrs, first.as_deref());
        meta::array(g, attrs, &dims)
    }

    /// The content of Zarr metadata file `z` now.
    pub(crate) fn zarr_json(&self, z: ZNode) -> Result<Arc<[u8]>, TreeError> {
        match z {
            ZNode::RootJson => self.zarr_root_json(),
            ZNode::Json(n) => match self.zarr_dir_kind(n)? {
                DirKind::Group => self.zarr_group_json(n),
                DirKind::Array(a) => {
                    let g = self.zarr_geom(a, None).map_err(|_| TreeError::NotFound)?;
                    Ok(self.zarr_json_file(&self.zarr_array_json(n, &g)?).into())
                }
            },
            _ => Err(TreeError::NotFound),
        }
    }

    /// How this view's `zarr.json` documents spell a NaN or infinite attribute: zarr-python's
    /// bare tokens, or strings under `-o zarr_strict_json`.
    pub(crate) fn zarr_non_finite(&self) -> json::NonFinite {
        match self.options.zarr_strict_json {
            true => json::NonFinite::Strings,
            false => json::NonFinite::Bare,
        }
    }

    /// The text of a `zarr.json` document of the view.
    fn zarr_json_file(&self, doc: &Value) -> Vec<u8> {
        json::zarr_json_file(doc, self.zarr_non_finite())
    }

    /// The chunk `ino` shows when it is a chunk object of the view.
    pub(crate) fn zarr_chunk_of(&self, ino: u64) -> Option<ChunkId> {
        match ZNode::of(ino)? {
            ZNode::Chunks {
                array,
                level,
                index,
            } => {
                let g = self.zarr_geom(array, None).ok()?;
                (usize::from(level) == g.ndim() && index < g.nchunks())
                    .then(|| ChunkId::new(array, index as usize))
            }
            _ => None,
        }
    }

    /// The inode of the chunk object that shows chunk `id` (`None`: the array has none).
    pub(crate) fn zarr_chunk_ino(&self, id: ChunkId) -> Option<u64> {
        let g = self.zarr_geom(id.array, None).ok()?;
        ZNode::Chunks {
            array: id.array,
            level: u8::try_from(g.ndim()).ok()?,
            index: id.index as u64,
        }
        .ino()
    }

    /// Whether Zarr node `z` (inode `ino`) is a directory.
    pub(crate) fn zarr_is_dir(&self, ino: u64, z: ZNode) -> bool {
        match z {
            ZNode::Root | ZNode::Dir(_) => true,
            ZNode::RootJson | ZNode::Json(_) => false,
            ZNode::Chunks { .. } => self.zarr_chunk_of(ino).is_none(),
        }
    }

    /// The attributes of Zarr inode `ino` (`z`).
    pub(crate) fn zarr_getattr(&self, ino: u64, z: ZNode) -> Result<Attr, TreeError> {
        if !self.zarr_exists(z) {
            return Err(TreeError::NotFound);
        }
        match z {
            ZNode::Root => Ok(self.dir_attr(ino, 2)),
            ZNode::Dir(n) => {
                // A collection leaf is not opened by a stat (1 = "count unknown").
                let nlink = match self.node(n).map(|x| &x.kind) {
                    Some(NodeKind::Leaf(l)) if !l.built.tried() => 1,
                    _ => 2,
                };
                Ok(self.dir_attr(ino, nlink))
            }
            // Size 0 for metadata that cannot be made (`zarr_size`): its open gives EIO.
            ZNode::RootJson | ZNode::Json(_) => {
                let len = self.zarr_size(z)?;
                Ok(self.attr(ino, EntryKind::File, len, 1))
            }
            ZNode::Chunks { array, level, .. } => {
                let g = self
                    .zarr_geom(array, None)
                    .map_err(|_| TreeError::NotFound)?;
                if usize::from(level) < g.ndim() {
                    Ok(self.dir_attr(ino, 2))
                } else {
                    let mut a = self.attr(ino, EntryKind::File, g.object_size(), 1);
                    if let Some(s) = &g.shard {
                        // Readers size their buffers from it (Python's `open` takes it as
                        // its buffer): an inner chunk's, so that a read of a few inner
                        // chunks asks for those, not for a whole megabyte of blocks.
                        a.blksize = s.inner_bytes.clamp(4096, u64::from(a.blksize)) as u32;
                    }
                    Ok(a)
                }
            }
        }
    }

    /// The entry `name` of Zarr directory `parent` (`z`).
    pub(crate) fn zarr_lookup(&self, parent: u64, z: ZNode, name: &str) -> Result<Attr, TreeError> {
        if V2_PROBES.contains(&name) || !self.zarr_exists(z) {
            return Err(TreeError::NotFound);
        }
        let child = match z {
            ZNode::Chunks {
                array,
                level,
                index,
            } => {
                let (g, level) = self.zarr_chunk_dir(parent, array, level)?;
                let i = read::parse_key(name).filter(|&i| i < g.grid[level]);
                match i {
                    Some(i) => ZNode::Chunks {
                        array,
                        level: (level + 1) as u8,
                        index: index * g.grid[level] + i,
                    },
                    None => return self.zarr_scratch_lookup(parent, name),
                }
            }
            ZNode::RootJson | ZNode::Json(_) => return Err(TreeError::NotADirectory(parent)),
            _ => match self.zarr_child(z, name)? {
                Some(child) => child,
                None => return self.zarr_scratch_lookup(parent, name),
            },
        };
        let ino = child.ino().ok_or(TreeError::NotFound)?;
        self.zarr_getattr(ino, child)
    }

    /// A temp file `name` of Zarr directory `parent`, if there is one.
    fn zarr_scratch_lookup(&self, parent: u64, name: &str) -> Result<Attr, TreeError> {
        let ino = self.scratch_in(parent, name).ok_or(TreeError::NotFound)?;
        self.getattr(ino)
    }
}

impl Tree {
    /// The path of Zarr inode `ino` from the mount root, for messages.
    pub(crate) fn zarr_path_of(&self, ino: u64) -> String {
        let view = format!("/{}", self.zarr_name());
        let join = |n: u64, rest: &str| {
            let p = self.zarr_path(n);
            let p = if p.is_empty() { p } else { format!("/{p}") };
            format!("{view}{p}{rest}")
        };
        match ZNode::of(ino) {
            Some(ZNode::Root) | None => view,
            Some(ZNode::RootJson) => format!("{view}/zarr.json"),
            Some(ZNode::Dir(n)) => join(n, ""),
            Some(ZNode::Json(n)) => join(n, "/zarr.json"),
            Some(ZNode::Chunks {
                array,
                level,
                index,
            }) => {
                let data = super::events::data_dir_of(&self.nodes, array);
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
