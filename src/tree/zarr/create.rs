//! New arrays and groups through the view (read-write mounts of a local directory of sources
//! or `.b2d` store): what
//! zarr-python's `create_array` and xarray's `to_zarr(mode="a")` with a new variable do, and
//! what this module owns:
//! - **Pending directories.** `mkdir NAME` in a group that can take a new array (the root or
//!   a subdirectory of a directory of sources) makes an empty directory held in memory
//!   ([`ZNode::Pending`]): listed, looked up, removable with `rmdir`, holding only temp files.
//! - **The array's `zarr.json`** (a temp file renamed to `zarr.json` in a pending directory)
//!   creates the source: the file `NAME.b2nd` of the group's directory (which the view names
//!   `NAME`, after its stem: `hierarchy.rs`; in a `.b2d` store the key `NAME`), a
//!   b2nd python-blosc2 opens, of that shape, data type and chunk shape, a block shape of at
//!   most 256 KiB (`declared.rs`), every chunk holding the fill value, the attributes as vlmeta
//!   (`dimension_names` kept as `_ARRAY_DIMENSIONS` when the attributes have none; xarray's
//!   `_FillValue` stored as the number it spells), made crash-safe by
//!   [`crate::container::write::create_array`]. The mount then follows the directory (the
//!   new member shows) and the pending directory stands for the array's directory.
//! - **What the writer declared**: its codecs (`bytes` little-endian, then at most one of
//!   `zstd`, `gzip`, `blosc`) and fill value are kept per array while the mount lives
//!   ([`Declared`]): a chunk object renamed in is decoded by them (an object of the raw size is
//!   raw unless it decodes to the chunk), and a chunk object removed becomes the declared
//!   fill value, not zeros; dropped when another writer replaces the array by one of another
//!   data type or chunk shape.
//! - Anything it cannot keep exactly (sharding, other codecs, a big-endian `bytes`, chunk
//!   grids other than `regular`, key encodings other than `default` with `/`, data types the
//!   view does not show, a fill value it cannot spell, a dimension of length 0, storage
//!   transformers) is refused with EPERM and a log line naming it, nothing
//!   left behind. `.b2z` stores, one-source mounts, nested stores and the sharded
//!   view refuse `mkdir` (EPERM, logged); read-only mounts EROFS. The name must be free in
//!   the view and on disk: neither `NAME` nor `NAME.b2nd` may exist in the directory, nor
//!   another file of stem `NAME` (EEXIST).
//! - **A group's `zarr.json`** (`create_group`) in a pending directory of a directory of
//!   sources makes the subdirectory `NAME` (a group there), when it has no attributes (such a
//!   directory has no place for them: EPERM); in a `.b2d` store EPERM.
//! - What a writer's document declares and how it is read: `declared.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::super::layout::{NodeKind, ROOT_INO};
use super::super::{Attr, Tree, TreeError};
use super::declared::{Compressor, Declared, decode_object, new_array, with_dims};
use super::geom::DataType;
use super::{DirKind, ZNode, names};
use crate::container::store::Form;
use crate::container::write::{create_array, create_store_array};
use crate::reader::ArrayId;

/// A directory made by `mkdir` in the view, before and after its array exists.
#[derive(Debug)]
struct PendingDir {
    /// The native directory of its group.
    group: u64,
    /// The Zarr inode of its group's directory.
    parent: u64,
    name: String,
    /// The native directory of the array made in it.
    made: Option<u64>,
}

/// The view's pending directories and declared encodings.
#[derive(Debug, Default)]
pub(super) struct Creating {
    next: u64,
    dirs: HashMap<u64, PendingDir>,
    /// With the data type and chunk shape of the array it was declared for: another
    /// writer may replace the file by one of another type under the same name (and id).
    declared: HashMap<ArrayId, (Arc<Declared>, DataType, Vec<u64>)>,
}

/// Most directories made by `mkdir` held at once with no array in them.
const MAX_PENDING: usize = 4096;

/// A refusal of a creation (logged).
fn refused(path: &str, why: &str) -> TreeError {
    log::warn!("{path}: a new array through the Zarr view: {why}: refused (EPERM)");
    TreeError::NotPermitted(format!("a new array through the Zarr view: {why}"))
}

impl Tree {
    /// `mkdir(2)` of `name` in `parent`: in the Zarr view of a read-write mount of a local
    /// directory of sources, a pending directory for a new array (see the module doc).
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::Exists`]; [`TreeError::NotPermitted`] (logged)
    /// anywhere else.
    pub fn mkdir(&self, parent: u64, name: &str) -> Result<Attr, TreeError> {
        if name.len() > super::super::NAME_MAX {
            return Err(TreeError::NameTooLong);
        }
        let z = match self.entry(parent)? {
            super::super::Entry::Zarr(z) => z,
            _ => return Err(self.refusal(parent, "mkdir")),
        };
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        if self.lookup(parent, name).is_ok() {
            return Err(TreeError::Exists(name.to_owned()));
        }
        let path = format!("{}/{name}", self.zarr_path_of(parent));
        let group = self.zarr_new_array_group(z, &path)?;
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(TreeError::InvalidArgument("name"));
        }
        let temp = crate::container::leftover::commit_temp_target(std::ffi::OsStr::new(name));
        let temp = temp.map(|_| "the name of a b2fs commit's temp file (mounts hide those)");
        if let Some(why) = names::refused(name).or(temp) {
            return Err(refused(&path, why));
        }
        // Kept by the inode of the group as the view names it (a group made through the view
        // is the same whether the kernel names it by its first inode or its own).
        let parent = z.ino().unwrap_or(parent);
        let ino = {
            let mut c = self.zarr.creating.lock();
            if c.dirs.values().filter(|d| d.made.is_none()).count() >= MAX_PENDING {
                log::warn!("{path}: {MAX_PENDING} empty directories made already: refused");
                return Err(TreeError::NoSpace(format!(
                    "{MAX_PENDING} empty directories made through the Zarr view are held \
                     already"
                )));
            }
            c.next += 1;
            let k = c.next;
            let ino = ZNode::Pending(k).ino().ok_or(TreeError::NoSpace(
                "no inode numbers left for new directories".into(),
            ))?;
            c.dirs.insert(
                k,
                PendingDir {
                    group,
                    parent,
                    name: name.to_owned(),
                    made: None,
                },
            );
            ino
        };
        log::info!("{path}: a new directory, held in memory until its zarr.json lands");
        Ok(self.dir_attr(ino, 2))
    }

    /// `rmdir(2)` of `name` in `parent`: only a pending directory of the view that holds
    /// nothing (no array made in it, no temp file).
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotFound`]; [`TreeError::NotPermitted`] for
    /// any other directory; [`TreeError::NotEmpty`] for one holding a temp file.
    pub fn rmdir(&self, parent: u64, name: &str) -> Result<(), TreeError> {
        let ino = self.lookup(parent, name)?.ino;
        if !self.options.writable || super::V2::of(ino).is_some() {
            return Err(TreeError::ReadOnly);
        }
        let pending = match ZNode::of(ino) {
            Some(ZNode::Pending(k)) => Some(k),
            _ => None,
        };
        let mut c = self.zarr.creating.lock();
        let k = pending
            .filter(|k| c.dirs.get(k).is_some_and(|d| d.made.is_none()))
            .ok_or_else(|| {
                TreeError::NotPermitted("removing a directory of the Zarr view".into())
            })?;
        if self.scratch.lock().files.values().any(|f| f.parent == ino) {
            return Err(TreeError::NotEmpty);
        }
        c.dirs.remove(&k);
        Ok(())
    }

    /// The native group directory where Zarr directory `z` can take a new array.
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (logged) where it cannot, saying why.
    fn zarr_new_array_group(&self, z: ZNode, path: &str) -> Result<u64, TreeError> {
        let n = match z {
            ZNode::Root if !self.root_is_array() && self.mounted.table().is_none() => ROOT_INO,
            ZNode::Dir(n)
                if matches!(self.zarr_dir_kind(n), Ok(DirKind::Group))
                    && !self.zarr_is_table(n)
                    && matches!(self.node(n).map(|x| &x.kind), Some(NodeKind::Dir { .. })) =>
            {
                n
            }
            _ => {
                return Err(refused(
                    path,
                    "only a group of a directory of sources takes new arrays (not an array, a \
                     table, a mount of one source)",
                ));
            }
        };
        if self.zarr_holds_ctable(n) {
            return Err(refused(
                path,
                "the group holds a python-blosc2 CTable (one more member would be no column)",
            ));
        }
        if self.options.zarr_shards {
            return Err(refused(
                path,
                "the sharded view (-o zarr_shards) would show it sharded, unlike its writer",
            ));
        }
        let Some(cell) = self.mounted.collection() else {
            return Err(refused(
                path,
                "the mount is one source, not a directory of sources",
            ));
        };
        if cell.get().form() == Form::Zip {
            return Err(refused(
                path,
                "a .b2z store takes no new array through Zarr (a zip, rewritten whole by \
                 every commit of a member)",
            ));
        }
        match self.zarr_group_dir(n) {
            Some(_) => Ok(n),
            None => Err(refused(
                path,
                "the group is no directory of the source (a nested store, or gone)",
            )),
        }
    }

    /// Whether native group `n` holds a python-blosc2 CTable (its `_meta`, `_valid_rows` and
    /// `_cols`: one more member would be no column of it).
    fn zarr_holds_ctable(&self, n: u64) -> bool {
        let Some(node) = self.node(n) else {
            return false;
        };
        let children = self.zarr_native(n, node).unwrap_or_default();
        let has = |name: &str| {
            children
                .iter()
                .any(|&c| self.node(c).is_some_and(|x| x.name == name))
        };
        has("_meta") && has("_valid_rows")
    }

    /// The directory on disk of native group `n` of the mounted directory of sources or
    /// `.b2d` store.
    fn zarr_group_dir(&self, n: u64) -> Option<std::path::PathBuf> {
        let cell = self.mounted.collection()?;
        let store = cell.get().form() == Form::Dir;
        let root = cell.get().path().to_path_buf();
        let rel = match n {
            ROOT_INO => String::new(),
            _ => self.zarr_path(n),
        };
        let dir = match rel.is_empty() {
            true => root,
            false => root.join(rel),
        };
        // A store nested in a directory of sources is read-only.
        (dir.is_dir() && (store || !dir.join("embed.b2e").exists())).then_some(dir)
    }

    /// Pending directory `k`: the Zarr node it stands for now (`Dir(n)` once its array is
    /// made), or `None` when it is gone.
    pub(crate) fn zarr_pending(&self, k: u64) -> Option<ZNode> {
        let made = self.zarr.creating.lock().dirs.get(&k).map(|d| d.made)?;
        Some(made.map_or(ZNode::Pending(k), ZNode::Dir))
    }

    /// The pending directory `name` of Zarr directory `parent` (inode), if any.
    pub(super) fn zarr_pending_named(&self, parent: u64, name: &str) -> Option<u64> {
        let c = self.zarr.creating.lock();
        c.dirs
            .iter()
            .find(|(_, d)| d.parent == parent && d.name == name && d.made.is_none())
            .and_then(|(&k, _)| ZNode::Pending(k).ino())
    }

    /// The pending directories (no array made yet) of Zarr directory `parent`.
    pub(super) fn zarr_pending_in(&self, parent: u64) -> Vec<(String, ZNode)> {
        let c = self.zarr.creating.lock();
        let mut v: Vec<(String, ZNode)> = c
            .dirs
            .iter()
            .filter(|(_, d)| d.parent == parent && d.made.is_none())
            .map(|(&k, d)| (d.name.clone(), ZNode::Pending(k)))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// The view's path of pending directory `k` (for messages).
    pub(super) fn zarr_pending_path(&self, k: u64) -> String {
        let (parent, name) = {
            let c = self.zarr.creating.lock();
            match c.dirs.get(&k) {
                Some(d) => (d.parent, d.name.clone()),
                None => return format!("/{}/?", self.zarr_name()),
            }
        };
        format!("{}/{name}", self.zarr_path_of(parent))
    }

    /// The parent (a Zarr inode) of pending directory `k`.
    pub(super) fn zarr_pending_parent(&self, k: u64) -> u64 {
        let c = self.zarr.creating.lock();
        c.dirs.get(&k).map_or(self.zarr_root_ino(), |d| d.parent)
    }

    /// What the writer of `array` declared, when it was made through the view.
    pub(super) fn zarr_declared(&self, array: ArrayId) -> Option<Arc<Declared>> {
        let (declared, dtype, chunks) = self.zarr.creating.lock().declared.get(&array)?.clone();
        // Another writer replaced the file by an array of another type or chunk shape: what
        // was declared for the old one (its codecs, its fill value) no longer applies.
        let same = self
            .zarr_geom(array, None)
            .is_ok_and(|g| g.dtype == dtype && g.chunks == chunks);
        if !same {
            if self.zarr.creating.lock().declared.remove(&array).is_some() {
                log::info!(
                    "zarr: array {} made through the view was replaced by another writer: \
                     its writer's codecs and fill value no longer apply",
                    array.0
                );
            }
            return None;
        }
        Some(declared)
    }

    /// The view's document `shown` of Zarr node `z`, with the members its writer declared in
    /// their place where `new` holds them as declared (an array made through the view): a
    /// document of that writer then differs in no other member than it does.
    pub(super) fn zarr_declared_shown(&self, z: ZNode, shown: Value, new: &Value) -> Value {
        let ZNode::Json(n) = z else { return shown };
        let Ok(DirKind::Array(a)) = self.zarr_dir_kind(n) else {
            return shown;
        };
        let Some(d) = self.zarr_declared(a) else {
            return shown;
        };
        let Value::Object(mut doc) = shown else {
            return shown;
        };
        for (k, v) in &d.members {
            if new.get(*k).is_some_and(|x| super::attrs::same_json(x, v)) {
                doc.insert((*k).to_owned(), v.clone());
            }
        }
        Value::Object(doc)
    }

    /// The new attributes `attrs` of Zarr node `z`, from document `doc`: for an array made
    /// through the view, with the document's `dimension_names` as `_ARRAY_DIMENSIONS` when
    /// they have neither (xarray rewrites the document with its attributes alone).
    pub(super) fn zarr_declared_dims(
        &self,
        z: ZNode,
        doc: &Map<String, Value>,
        attrs: Map<String, Value>,
    ) -> Map<String, Value> {
        let ZNode::Json(n) = z else { return attrs };
        match self.zarr_dir_kind(n) {
            Ok(DirKind::Array(a)) if self.zarr_declared(a).is_some() => {
                with_dims(attrs, doc.get("dimension_names"), None)
            }
            _ => attrs,
        }
    }

    /// `data`, renamed over a chunk object of `want` bytes of `array`: decoded by the codecs
    /// its writer declared, when it is not raw.
    ///
    /// # Errors
    /// [`TreeError::Refused`] (logged) when it does not decode to `want` bytes.
    pub(super) fn zarr_declared_decode<'a>(
        &self,
        array: ArrayId,
        want: u64,
        data: &'a [u8],
        path: &str,
    ) -> Result<std::borrow::Cow<'a, [u8]>, TreeError> {
        let declared = self.zarr_declared(array);
        let compressor = declared.map_or(Compressor::None, |d| d.compressor);
        decode_object(compressor, data, want as usize).map_err(|why| {
            log::warn!(
                "{path}: a chunk object of {} bytes that its writer's codecs do not \
                     decode to {want} bytes ({why}): refused",
                data.len()
            );
            TreeError::Refused(format!("a chunk object that does not decode: {why}"))
        })
    }

    /// Temp file `from`, renamed to `zarr.json` in pending directory `k` (inode `dir`):
    /// creates the array it describes (see the module doc).
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (logged) for what cannot be kept; [`TreeError::Exists`]
    /// when a file of that name appeared in the directory; I/O and commit errors.
    pub(super) fn zarr_create_array(&self, from: u64, dir: u64, k: u64) -> Result<(), TreeError> {
        let (group, name) = {
            let c = self.zarr.creating.lock();
            let d = c.dirs.get(&k).ok_or(TreeError::NotFound)?;
            (d.group, d.name.clone())
        };
        let path = format!("{}/zarr.json", self.zarr_path_of(dir));
        let data = self.scratch_data(from);
        let doc = super::attrs::parse_json_floats(&data, data.len().saturating_mul(2) + 4096)
            .map_err(|e| refused(&path, &format!("the content is not JSON ({e})")))?;
        if doc.get("node_type").and_then(Value::as_str) == Some("group") {
            return self.zarr_create_group(from, (dir, k), (group, &name), &doc, &path);
        }
        let (spec, declared) = new_array(&doc).map_err(|why| refused(&path, &why))?;
        let folder = self
            .zarr_group_dir(group)
            .ok_or_else(|| refused(&path, "the group's directory is gone"))?;
        // A `.b2d` key is a `<key>.b2nd` file; a directory of sources names `<name>.b2nd`
        // after its stem, `<name>` (`hierarchy.rs`): the file is `<name>.b2nd` in both.
        let store = self
            .mounted
            .collection()
            .map(|c| c.get().path().to_path_buf())
            .filter(|_| self.zarr_mounted_form() == Some(Form::Dir));
        let file = folder.join(format!("{name}.b2nd"));
        let taken = |p: &std::path::Path| std::fs::symlink_metadata(p).is_ok();
        if taken(&file) || taken(&folder.join(&name)) || self.zarr_stem_taken(group, &name) {
            return Err(TreeError::Exists(name));
        }
        if self.has_pending_edits() {
            return Err(refused(
                &path,
                "the mount holds writes not committed yet (close or fsync them first)",
            ));
        }
        let made = match &store {
            Some(store) => create_store_array(store, &file, &spec),
            None => create_array(&file, &spec),
        };
        made.map_err(|source| {
            log::warn!(
                "{path}: the new array {} cannot be made: {}",
                file.display(),
                super::super::display_chain(&source)
            );
            TreeError::Container { ino: dir, source }
        })?;
        self.scratch.lock().files.remove(&from);
        self.follow(&self.array_ids());
        let made = self.zarr_adopt(k, group, &name);
        let Some(made) = made else {
            log::warn!(
                "{path}: {} was made but the mount does not show it yet (it shows at the next \
                 look at the source)",
                file.display()
            );
            self.zarr.creating.lock().dirs.remove(&k);
            return Ok(());
        };
        if let Ok(DirKind::Array(a)) = self.zarr_dir_kind(made)
            && let Ok(g) = self.zarr_geom(a, None)
        {
            let mut c = self.zarr.creating.lock();
            let made_for = (Arc::new(declared), g.dtype.clone(), g.chunks.clone());
            c.declared.insert(a, made_for);
        }
        log::info!("{path}: the new array {} made", file.display());
        Ok(())
    }

    /// Whether a source of native group `group` has the stem `name` by the view's own rule
    /// ([`Tree::zarr_source_stem`]): a new `name.b2nd` beside it would share it, and each
    /// would keep its file name in the view, not the name the writer asked for.
    fn zarr_stem_taken(&self, group: u64, name: &str) -> bool {
        let Some(node) = self.node(group) else {
            return false;
        };
        let Ok(children) = self.zarr_native(group, node) else {
            return false;
        };
        children.iter().any(|&c| {
            self.node(c)
                .is_some_and(|x| self.zarr_source_stem(x).is_some_and(|s| s == name))
        })
    }

    /// The member of native group `group` the view names `name` (after the mount followed
    /// the source), set as what pending directory `k` stands for.
    fn zarr_adopt(&self, k: u64, group: u64, name: &str) -> Option<u64> {
        let made = self
            .node(group)
            .and_then(|node| self.zarr_native(group, node).ok())
            .and_then(|children| {
                children
                    .into_iter()
                    .find(|&c| self.zarr_member(c, Some(name)).is_some())
            })?;
        if let Some(d) = self.zarr.creating.lock().dirs.get_mut(&k) {
            d.made = Some(made);
        }
        Some(made)
    }

    /// A group document `doc` (temp file `from`) renamed to `zarr.json` in pending directory
    /// `k` (inode `dir`) named `name` in native group `group`: in a directory of sources, a new
    /// subdirectory (a group with no attributes: such a directory has no place for them).
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (logged) in a `.b2d` store, for attributes, for anything
    /// but a Zarr v3 group; I/O errors making the directory.
    fn zarr_create_group(
        &self,
        from: u64,
        (dir, k): (u64, u64),
        (group, name): (u64, &str),
        doc: &Value,
        path: &str,
    ) -> Result<(), TreeError> {
        if self.zarr_mounted_form() != Some(Form::Frames) {
            return Err(refused(
                path,
                "a new group in a .b2d store (only arrays are made)",
            ));
        }
        if doc.get("zarr_format") != Some(&Value::from(3)) {
            return Err(refused(path, "not a Zarr v3 document"));
        }
        match doc.get("attributes") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) if m.is_empty() => {}
            Some(_) => {
                return Err(refused(
                    path,
                    "a new group with attributes (a directory of sources has no place for them)",
                ));
            }
        }
        let folder = self
            .zarr_group_dir(group)
            .ok_or_else(|| refused(path, "the group's directory is gone"))?;
        let at = folder.join(name);
        let io = |e: std::io::Error| TreeError::Container {
            ino: dir,
            source: crate::container::ContainerError::Io {
                path: at.clone(),
                source: e,
            },
        };
        if self.has_pending_edits() {
            return Err(refused(
                path,
                "the mount holds writes not committed yet (close or fsync them first)",
            ));
        }
        std::fs::create_dir(&at).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => TreeError::Exists(name.to_owned()),
            _ => io(e),
        })?;
        std::fs::File::open(&folder)
            .and_then(|f| f.sync_all())
            .map_err(io)?;
        self.scratch.lock().files.remove(&from);
        self.follow(&self.array_ids());
        match self.zarr_adopt(k, group, name) {
            Some(_) => log::info!("{path}: the new group {} made", at.display()),
            None => {
                log::warn!(
                    "{path}: {} was made but the mount does not show it yet",
                    at.display()
                );
                self.zarr.creating.lock().dirs.remove(&k);
            }
        }
        Ok(())
    }
}
