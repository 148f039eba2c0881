//! New arrays and groups through the view (read-write mounts of a local directory of sources
//! or `.b2d` store): what
//! zarr-python's `create_array` and xarray's `to_zarr(mode="a")` with a new variable do, and
//! what this module owns:
//! - **Pending directories** (`mkdir`, `rmdir`, nested ones, their parents made first, their
//!   temp files): `pending.rs`.
//! - **The array's `zarr.json`** (a temp file renamed, or linked, to `zarr.json` in a pending
//!   directory; one at a time)
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
//!   another file of stem `NAME` (EEXIST), checked again under a `.b2d` store's lock.
//! - **Errors after the effect**: the reply says what the disk holds. A creation that fails
//!   leaves nothing of it (a failed fsync after the link undoes the link); one that made a
//!   durable array or group succeeds (a temp file left or a lock counter not bumped is only
//!   logged). Parents made for it (`pending.rs`) stay: each is a directory its writer asked for.
//! - **A group's `zarr.json`** (`create_group`) in a pending directory of a directory of
//!   sources makes the subdirectory `NAME` (a group there), when it has no attributes (such a
//!   directory has no place for them: EPERM); in a `.b2d` store EPERM.
//! - What a writer's document declares and how it is read: `declared.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::super::layout::{NodeKind, ROOT_INO};
use super::super::{Tree, TreeError};
use super::declared::{Compressor, Declared, decode_object, new_array, with_dims};
use super::geom::DataType;
use super::pending::PendingDir;
use super::{DirKind, ZNode};
use crate::container::store::Form;
use crate::container::write::{create_array, create_group_dir, create_store_array};
use crate::reader::ArrayId;

/// The view's pending directories and declared encodings.
#[derive(Debug, Default)]
pub(super) struct Creating {
    pub(super) next: u64,
    pub(super) dirs: HashMap<u64, PendingDir>,
    /// The pending directories by the inode of their parent and their name (`pending.rs`).
    pub(super) named: super::pending::Named,
    /// The pending directory each native directory made through the view answers to.
    pub(super) alias: HashMap<u64, u64>,
    /// With the data type and chunk shape of the array it was declared for: another
    /// writer may replace the file by one of another type under the same name (and id).
    declared: HashMap<ArrayId, (Arc<Declared>, DataType, Vec<u64>)>,
    /// Tests: run by the next new array after the view's checks of its name, before the
    /// source is written ([`Tree::on_zarr_create`]).
    hook: Option<super::super::TestHook>,
    /// Tests: run by the next `mkdir` after it looked at its parent, before it records the
    /// new directory ([`Tree::on_zarr_mkdir`]).
    pub(super) mkdir_hook: Option<super::super::TestHook>,
    /// Held while a `zarr.json` makes an array or group (and its parents).
    pub(super) serial: Arc<parking_lot::Mutex<()>>,
}

/// A refusal of a creation (logged).
pub(super) fn refused(path: &str, why: &str) -> TreeError {
    log::warn!("{path}: a new array through the Zarr view: {why}: refused (EPERM)");
    TreeError::NotPermitted(format!("a new array through the Zarr view: {why}"))
}

impl Tree {
    /// Tests: `hook` runs once, in the next new array made through the view (its `zarr.json`
    /// renamed into a pending directory), after the view checked its name and before the
    /// source is written: a test takes the name there, as another writer may.
    pub fn on_zarr_create(&self, hook: Box<dyn FnOnce(&Tree) + Send>) {
        self.zarr.creating.lock().hook = Some(super::super::TestHook::new(hook));
    }

    /// The native group directory where Zarr directory `z` can take a new array.
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (logged) where it cannot, saying why.
    pub(super) fn zarr_new_array_group(&self, z: ZNode, path: &str) -> Result<u64, TreeError> {
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

    /// `data`, renamed over chunk object `t` of `want` bytes of `array`: decoded by the codecs
    /// its writer declared, when it is not raw.
    ///
    /// # Errors
    /// [`TreeError::Refused`] (logged, with the object's path, made only then) when it does
    /// not decode to `want` bytes.
    pub(super) fn zarr_declared_decode<'a>(
        &self,
        array: ArrayId,
        want: u64,
        data: &'a [u8],
        t: u64,
    ) -> Result<std::borrow::Cow<'a, [u8]>, TreeError> {
        let declared = self.zarr_declared(array);
        let compressor = declared.map_or(Compressor::None, |d| d.compressor);
        decode_object(compressor, data, want as usize).map_err(|why| {
            log::warn!(
                "{}: a chunk object of {} bytes that its writer's codecs do not \
                     decode to {want} bytes ({why}): refused",
                self.path_of(t),
                data.len()
            );
            TreeError::Refused(format!("a chunk object that does not decode: {why}"))
        })
    }

    /// Temp file `from` renamed (or linked: `keep`, the temp file stays) to `zarr.json` in
    /// pending directory `k` (inode `dir`): creates the array or group it describes (see the
    /// module doc), after its pending parents (`pending.rs`). `Ok(false)`: `k` was made
    /// meanwhile (another `zarr.json` landed first), nothing done: the caller takes it as a
    /// rewrite of that member's.
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (logged) for what cannot be kept; [`TreeError::Exists`]
    /// when a file of that name appeared in the directory; I/O and commit errors.
    pub(super) fn zarr_create_from(
        &self,
        from: u64,
        dir: u64,
        k: u64,
        keep: bool,
    ) -> Result<bool, TreeError> {
        // One creation at a time: zarr-python writes the `zarr.json` of an array and of its
        // parents concurrently, and each may make the parents.
        let serial = self.zarr.creating.lock().serial.clone();
        let _one = serial.lock();
        if self.zarr_pending(k) != Some(ZNode::Pending(k)) {
            return Ok(false);
        }
        let path = format!("{}/zarr.json", self.zarr_path_of(dir));
        let data = self.scratch_data(from);
        let doc = super::attrs::parse_json_floats(&data, data.len().saturating_mul(2) + 4096)
            .map_err(|e| refused(&path, &format!("the content is not JSON ({e})")))?;
        let group_doc = doc.get("node_type").and_then(Value::as_str) == Some("group");
        // What the document asks for is checked before anything is made (the parents too).
        let array = match group_doc {
            true => {
                self.zarr_group_doc(&doc, &path)?;
                None
            }
            false => Some(new_array(&doc).map_err(|why| refused(&path, &why))?),
        };
        if self.has_pending_edits() {
            return Err(refused(
                &path,
                "the mount holds writes not committed yet (close or fsync them first)",
            ));
        }
        self.zarr_make_parents(k, &path)?;
        let (group, name) = {
            let c = self.zarr.creating.lock();
            let d = c.dirs.get(&k).ok_or(TreeError::NotFound)?;
            (d.group, d.name.clone())
        };
        match array {
            None => {
                if !self.zarr_make_group(k, dir, (group, &name), &path)? {
                    self.zarr.creating.lock().remove(k);
                }
            }
            Some((spec, declared)) => {
                self.zarr_create_array(k, dir, (group, &name), spec, declared, &path)?;
            }
        }
        if !keep {
            self.scratch.lock().files.remove(&from);
        }
        // A temp file created under a name the member shows now (`zarr.json` written in
        // place before this one was renamed over it, `c`) is replaced by it.
        self.drop_hidden_scratch(Some(dir));
        Ok(true)
    }

    /// The array `spec` (its writer's `declared` codecs) made as `name` in native group
    /// `group` for pending directory `k` (inode `dir`).
    fn zarr_create_array(
        &self,
        k: u64,
        dir: u64,
        (group, name): (u64, &str),
        spec: crate::container::write::NewArray,
        declared: Declared,
        path: &str,
    ) -> Result<(), TreeError> {
        let folder = self
            .zarr_group_dir(group)
            .ok_or_else(|| refused(path, "the group's directory is gone"))?;
        // A `.b2d` key is a `<key>.b2nd` file; a directory of sources names `<name>.b2nd`
        // after its stem, `<name>` (`hierarchy.rs`): the file is `<name>.b2nd` in both.
        let store = self
            .mounted
            .collection()
            .map(|c| c.get().path().to_path_buf())
            .filter(|_| self.zarr_mounted_form() == Some(Form::Dir));
        let file = folder.join(format!("{name}.b2nd"));
        let taken = |p: &std::path::Path| std::fs::symlink_metadata(p).is_ok();
        if taken(&file) || taken(&folder.join(name)) || self.zarr_stem_taken(group, name) {
            return Err(TreeError::Exists(name.to_owned()));
        }
        let hook = self.zarr.creating.lock().hook.take();
        if let Some(hook) = hook {
            hook.run(self);
        }
        // From here its name stands for the pending directory, even once the mount shows the
        // array before it is adopted below (`pending.rs`).
        self.zarr_making(k, true);
        let made = match &store {
            Some(store) => create_store_array(store, &file, &spec),
            None => create_array(&file, &spec),
        };
        if made.is_err() {
            self.zarr_making(k, false);
        }
        made.map_err(|source| {
            // Another writer took the name since the checks above (the link, or a key of the
            // store seen under its lock): nothing was made.
            if let crate::container::ContainerError::Io { source: e, .. } = &source
                && e.kind() == std::io::ErrorKind::AlreadyExists
            {
                log::warn!("{path}: {}: {e}: refused (EEXIST)", file.display());
                return TreeError::Exists(name.to_owned());
            }
            log::warn!(
                "{path}: the new array {} cannot be made: {}",
                file.display(),
                super::super::display_chain(&source)
            );
            TreeError::Container { ino: dir, source }
        })?;
        let made = self.zarr_show_made(k, group, name);
        let Some(made) = made else {
            log::warn!(
                "{path}: {} was made but the mount does not show it yet (it shows at the next \
                 look at the source)",
                file.display()
            );
            self.zarr.creating.lock().remove(k);
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

    /// The member `name` just made in native group `group` for pending directory `k`, shown
    /// and adopted ([`Tree::zarr_adopt`]): the mount follows the source; when edits buffered
    /// meanwhile hold that back (the view checked for none before it began, a write may have
    /// begun since), the collection's new members are shown alone. `None`: still not shown.
    fn zarr_show_made(&self, k: u64, group: u64, name: &str) -> Option<u64> {
        self.follow(&self.array_ids());
        self.zarr_adopt(k, group, name).or_else(|| {
            self.show_own_members();
            self.zarr_adopt(k, group, name)
        })
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

    /// Checks a group document `doc` landing as `path`: in a directory of sources, a Zarr v3
    /// group with no attributes (such a directory has no place for them).
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (logged) in a `.b2d` store, for attributes, for anything
    /// but a Zarr v3 group.
    fn zarr_group_doc(&self, doc: &Value, path: &str) -> Result<(), TreeError> {
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
            None | Some(Value::Null) => Ok(()),
            Some(Value::Object(m)) if m.is_empty() => Ok(()),
            Some(_) => Err(refused(
                path,
                "a new group with attributes (a directory of sources has no place for them)",
            )),
        }
    }

    /// Pending directory `k` (inode `dir`) named `name` in native group `group` made a group:
    /// the subdirectory `name`, fsynced. `Ok(false)` when it was made but the mount does not
    /// show it yet.
    ///
    /// # Errors
    /// [`TreeError::Exists`] when something lies at the name; I/O errors making the
    /// directory (nothing made then).
    pub(super) fn zarr_make_group(
        &self,
        k: u64,
        dir: u64,
        (group, name): (u64, &str),
        path: &str,
    ) -> Result<bool, TreeError> {
        let folder = self
            .zarr_group_dir(group)
            .ok_or_else(|| refused(path, "the group's directory is gone"))?;
        let at = folder.join(name);
        // Made and fsynced, or not made (a failed fsync removes it again). Its name stands for
        // the pending directory from here (`pending.rs`).
        self.zarr_making(k, true);
        let made = create_group_dir(&folder, name);
        if made.is_err() {
            self.zarr_making(k, false);
        }
        made.map_err(|e| match e {
            crate::container::ContainerError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                TreeError::Exists(name.to_owned())
            }
            source => TreeError::Container { ino: dir, source },
        })?;
        match self.zarr_show_made(k, group, name) {
            Some(_) => {
                log::info!("{path}: the new group {} made", at.display());
                Ok(true)
            }
            None => {
                log::warn!(
                    "{path}: {} was made but the mount does not show it yet",
                    at.display()
                );
                self.zarr_making(k, false);
                Ok(false)
            }
        }
    }
}
