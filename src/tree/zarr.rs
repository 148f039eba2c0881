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
//! Where each concern lives: this file (the view's state, each array's geometry, the
//! documents of arrays), `hierarchy.rs` (which native directories are groups and arrays,
//! their names, paths and members), `lookup.rs` (existence, attributes and lookups of the
//! view's inodes), `ino.rs` (the inode plan: arithmetic, no allocation per node),
//! `geom.rs` (dtype, shape, chunk grid, and where an object's bytes are in the decoded chunk),
//! `meta.rs` (the `zarr.json` documents), `json.rs` (their text: how a float NaN is spelled),
//! `fill.rs` (xarray's spelling of a `_FillValue` attribute, shown and mapped back),
//! `consolidated.rs` (the groups' documents with the consolidated metadata below them, kept
//! per generation), `quick.rs` (the metadata of collection leaves not laid out yet, from
//! their headers), `names.rs`, `read.rs` (listings and object bytes), `write.rs` (writes,
//! renames of temp files over chunk objects), `attrs.rs` (attribute edits: a new `zarr.json`
//! renamed over the old one), `resize.rs` (a new `zarr.json` with another first dimension),
//! `undo.rs` (removals of chunk objects, and their take-back when a resize is refused),
//! `follow.rs` (what the kernel must forget after another writer), `create.rs` (new arrays:
//! `mkdir`, their first `zarr.json`, the codecs and fill value their writers declared),
//! `v2.rs` (the read-only Zarr v2 view `zarr2/` of the same hierarchy, for v2-only readers).
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
mod create;
mod declared;
mod docs;
mod fill;
mod follow;
mod geom;
mod hierarchy;
mod ino;
mod json;
mod lookup;
mod meta;
mod names;
mod pending;
mod quick;
mod read;
mod resize;
mod undo;
mod v2;
mod write;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::layout::{FileKind, NodeKind};
use super::{Attr, ROOT_INO, Tree, TreeError};
use crate::container::npy::Npy;
use crate::reader::ArrayId;
pub use geom::Geom;
pub use ino::{ZARR_BASE, ZNode, is_zarr};
pub(crate) use read::Listing;
pub use resize::MAX_NEW_CHUNKS;
pub(crate) use v2::V2;
pub(crate) use write::ZarrTarget;

/// Why an array without an NPY view (a special object, an unknown dtype) has no Zarr
/// geometry.
const NO_NPY: &str = "it has no NPY view (see the log for why)";

/// An array's Zarr geometry, or why it has none.
type GeomOf = Result<Arc<Geom>, String>;

/// The Zarr names of a directory's members that differ from their native names (by inode),
/// with the children they were made for.
type MemberNames = (Vec<u64>, Arc<HashMap<u64, String>>);

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
    /// Per group directory of a directory of sources: its members named after their stem
    /// (`hierarchy.rs`), with the children they were named for.
    member_names: Mutex<HashMap<u64, MemberNames>>,
    /// `zarr.json` inodes emptied by a writer (`O_TRUNC`, `ftruncate` to 0), with the byte
    /// ranges written back since (`zarr/write.rs`): the last writer's release checks that
    /// the whole file was.
    rewrites: Mutex<HashMap<u64, Vec<std::ops::Range<u64>>>>,
    /// Chunk objects removed lately, kept until a refused resize takes them back (`undo.rs`).
    unlinked: Mutex<undo::Unlinked>,
    /// Directories made by `mkdir` for new arrays, and what their writers declared
    /// (`create.rs`).
    creating: Mutex<create::Creating>,
    /// Set at the first `mkdir` through the view: until then lookups and listings do not
    /// look for pending directories (`pending.rs`).
    pending_seen: std::sync::atomic::AtomicBool,
    /// Tests: run by the next resize before it takes the committer ([`Tree::on_zarr_resize`]).
    resize_hook: Mutex<Option<super::TestHook>>,
    /// The Zarr v2 view (`zarr2/`, `v2.rs`).
    v2: v2::State,
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
        *self.zarr.resize_hook.lock() = Some(super::TestHook::new(hook));
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
        self.zarr
            .name
            .get_or_init(|| self.view_dir_name(names::VIEW, names::VIEW_MOVED, "Zarr view"))
    }

    /// The name a view's directory takes in the root: `view` unless a member has it, else
    /// `moved` (or `moved_1`, ...), with a warning naming the `what` that moved.
    pub(crate) fn view_dir_name(&self, view: &str, moved: &str, what: &str) -> String {
        let root = self.node(ROOT_INO);
        let taken = |name: &str| match root.map(|n| &n.kind) {
            Some(NodeKind::Dir { children, .. }) => children
                .iter()
                .any(|&c| self.node(c).is_some_and(|n| n.name == name)),
            _ => false,
        };
        let name = names::view_name(view, moved, &taken);
        if name != view {
            log::warn!("the root has a member called {view:?}: the {what} is {name:?}");
        }
        name
    }

    /// The inode of the view's directory.
    pub(crate) fn zarr_root_ino(&self) -> u64 {
        ZNode::Root.ino().unwrap_or(ZARR_BASE)
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

    /// The `zarr.json` object of the array in native directory `n`, of geometry `g`.
    fn zarr_array_json(&self, n: u64, g: &Geom) -> Result<Value, TreeError> {
        Ok(self.zarr_array_json_with(n, g, &self.zarr_attrs(n)?))
    }

    /// [`Tree::zarr_array_json`] with the array's attributes `attrs` known.
    fn zarr_array_json_with(&self, n: u64, g: &Geom, attrs: &Value) -> Value {
        meta::array(g, attrs, &self.zarr_dimension_names(n, g, attrs))
    }

    /// The dimension names of the array in native directory `n`, of geometry `g` and
    /// attributes `attrs` (`names::dimension_names`; a ctable's columns share the first).
    fn zarr_dimension_names(&self, n: u64, g: &Geom, attrs: &Value) -> Vec<String> {
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
        names::dimension_names(&name, g.ndim(), attrs, first.as_deref())
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
}
