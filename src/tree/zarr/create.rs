//! New arrays through the view (read-write mounts of a local directory of sources): what
//! zarr-python's `create_array` and xarray's `to_zarr(mode="a")` with a new variable do, and
//! what this module owns:
//! - **Pending directories.** `mkdir NAME` in a group that can take a new array (the root or
//!   a subdirectory of a directory of sources) makes an empty directory held in memory
//!   ([`ZNode::Pending`]): listed, looked up, removable with `rmdir`, holding only temp files.
//! - **The array's `zarr.json`** (a temp file renamed to `zarr.json` in a pending directory)
//!   creates the source: the file `NAME` of the group's directory (the view shows a leaf under
//!   its file name, so no suffix is added: `NAME.b2nd` through Zarr gives `NAME.b2nd`), a
//!   b2nd python-blosc2 opens, of that shape, data type and chunk shape, a block shape of at
//!   most [`BLOCK_BYTES`], every chunk holding the fill value, the attributes as vlmeta
//!   (`dimension_names` kept as `_ARRAY_DIMENSIONS` when the attributes have none; xarray's
//!   `_FillValue` stored as the number it spells), made crash-safe by
//!   [`crate::container::write::create_array`]. The mount then follows the directory (the
//!   new member shows) and the pending directory stands for the array's directory.
//! - **What the writer declared**: its codecs (`bytes` little-endian, then at most one of
//!   `zstd`, `gzip`, `blosc`) and fill value are kept per array while the mount lives
//!   ([`Declared`]): a chunk object renamed in is decoded by them (an object of the raw size is
//!   raw), and a chunk object removed becomes the declared fill value, not zeros.
//! - Anything it cannot keep exactly (sharding, other codecs, a big-endian `bytes`, chunk
//!   grids other than `regular`, key encodings other than `default` with `/`, data types the
//!   view does not show, a fill value it cannot spell, a dimension of length 0, storage
//!   transformers, a group document) is refused with EPERM and a log line naming it, nothing
//!   left behind. `.b2z` and `.b2d` stores, one-source mounts, nested stores and the sharded
//!   view refuse `mkdir` (EPERM, logged); read-only mounts EROFS.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::super::layout::{NodeKind, ROOT_INO};
use super::super::{Attr, Tree, TreeError};
use super::{DirKind, ZNode, fill, geom, names};
use crate::container::store::Form;
use crate::container::write::{NewArray, create_array, create_store_array};
use crate::reader::ArrayId;

/// Most bytes of a new array's block (python-blosc2 picks blocks of this order).
pub const BLOCK_BYTES: u64 = 256 << 10;

/// The compressor a writer declared after the `bytes` codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compressor {
    None,
    Zstd,
    Gzip,
    Blosc,
}

/// What the writer of a new array declared that the view does not show: how its chunk
/// objects are encoded, and its fill value.
#[derive(Debug)]
pub(super) struct Declared {
    compressor: Compressor,
    /// The document's `codecs` and `fill_value` members as written: a later document of
    /// the same writer (xarray rewrites it to set attributes) may hold them.
    members: [(&'static str, Value); 2],
    /// One item of the fill value.
    pub(super) fill: Vec<u8>,
}

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
    declared: HashMap<ArrayId, Arc<Declared>>,
}

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
        if let Some(why) = names::refused(name).or((name == "c").then_some("\"c\" is a key")) {
            return Err(refused(&path, why));
        }
        let ino = {
            let mut c = self.zarr.creating.lock();
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
        if !self.options.writable {
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
        self.zarr.creating.lock().declared.get(&array).cloned()
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
        if data.len() as u64 == want || compressor == Compressor::None {
            return Ok(data.into());
        }
        decode(compressor, data, want as usize)
            .map(Into::into)
            .map_err(|why| {
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
        let (spec, declared) = new_array(&doc).map_err(|why| refused(&path, &why))?;
        let folder = self
            .zarr_group_dir(group)
            .ok_or_else(|| refused(&path, "the group's directory is gone"))?;
        // A `.b2d` key is a `<key>.b2nd` file; a directory of sources shows file names.
        let store = self
            .mounted
            .collection()
            .map(|c| c.get().path().to_path_buf());
        let store = store.filter(|_| {
            self.mounted
                .collection()
                .is_some_and(|c| c.get().form() == Form::Dir)
        });
        let file = match store {
            Some(_) => folder.join(format!("{name}.b2nd")),
            None => folder.join(&name),
        };
        let taken = |p: &std::path::Path| std::fs::symlink_metadata(p).is_ok();
        if taken(&file) || taken(&folder.join(&name)) {
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
        let made = self
            .node(group)
            .and_then(|node| self.zarr_native(group, node).ok())
            .and_then(|children| {
                children
                    .into_iter()
                    .find(|&c| self.node(c).is_some_and(|x| x.name == name))
            });
        let Some(made) = made else {
            log::warn!(
                "{path}: {} was made but the mount does not show it yet (it shows at the next \
                 look at the source)",
                file.display()
            );
            self.zarr.creating.lock().dirs.remove(&k);
            return Ok(());
        };
        if let Ok(DirKind::Array(a)) = self.zarr_dir_kind(made) {
            self.zarr
                .creating
                .lock()
                .declared
                .insert(a, Arc::new(declared));
        }
        if let Some(d) = self.zarr.creating.lock().dirs.get_mut(&k) {
            d.made = Some(made);
        }
        log::info!("{path}: the new array {} made", file.display());
        Ok(())
    }
}

/// What the Zarr array metadata `doc` asks for, as a new b2nd and what its writer declared.
///
/// # Errors
/// Why it cannot be kept exactly.
fn new_array(doc: &Value) -> Result<(NewArray, Declared), String> {
    let get = |k: &str| doc.get(k);
    if get("zarr_format") != Some(&Value::from(3)) {
        return Err("not a Zarr v3 document".into());
    }
    match get("node_type").and_then(Value::as_str) {
        Some("array") => {}
        Some("group") => return Err("a new group (only arrays are made)".into()),
        _ => return Err("no node_type".into()),
    }
    let dims = |v: Option<&Value>, what: &str| -> Result<Vec<u64>, String> {
        let list = v.and_then(Value::as_array).ok_or(format!("no {what}"))?;
        list.iter()
            .map(|x| x.as_u64().ok_or(format!("{what}: {x} is no length")))
            .collect()
    };
    let shape = dims(get("shape"), "shape")?;
    let grid = get("chunk_grid").ok_or("no chunk_grid")?;
    if grid.get("name").and_then(Value::as_str) != Some("regular") {
        return Err(format!("chunk grid {grid} (only \"regular\" is kept)"));
    }
    let chunks = dims(
        grid.get("configuration").and_then(|c| c.get("chunk_shape")),
        "chunk_shape",
    )?;
    if shape.is_empty() || chunks.len() != shape.len() {
        return Err(format!(
            "shape {shape:?} with chunks {chunks:?} (0-d arrays are not made)"
        ));
    }
    if shape.contains(&0) || chunks.contains(&0) {
        return Err(format!(
            "a zero length in shape {shape:?} or chunks {chunks:?}"
        ));
    }
    let keys = get("chunk_key_encoding").ok_or("no chunk_key_encoding")?;
    let sep = keys
        .get("configuration")
        .and_then(|c| c.get("separator"))
        .and_then(Value::as_str)
        .unwrap_or("/");
    if keys.get("name").and_then(Value::as_str) != Some("default") || sep != "/" {
        return Err(format!(
            "chunk key encoding {keys} (the view's keys are \"default\" with \"/\")"
        ));
    }
    match get("storage_transformers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.is_empty() => {}
        Some(t) => return Err(format!("storage transformers {t}")),
    }
    let (typestr, dtype) = numpy_type(get("data_type").ok_or("no data_type")?)?;
    let itemsize = dtype.itemsize as usize;
    let compressor = codecs(get("codecs").ok_or("no codecs")?)?;
    let fill = fill_item(
        get("fill_value").unwrap_or(&Value::Null),
        &typestr,
        itemsize,
    )?;
    let attrs = match get("attributes") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(a) => return Err(format!("attributes {a} are no JSON object")),
    };
    if attrs.keys().any(|k| k.len() > 31) {
        return Err("an attribute name longer than 31 bytes".into());
    }
    let attrs = with_dims(attrs, get("dimension_names"), Some(shape.len()));
    let empty = Value::Object(Map::new());
    let attrs = fill::written(attrs, &empty, &empty, &dtype);
    let blocks = block_shape(&chunks, itemsize as u64);
    let spec = NewArray {
        shape,
        chunkshape: chunks,
        blockshape: blocks,
        dtype: typestr,
        itemsize,
        fill: fill.clone(),
        attrs: (!attrs.is_empty()).then_some(Value::Object(attrs)),
    };
    let members = [
        ("codecs", get("codecs").cloned().unwrap_or(Value::Null)),
        (
            "fill_value",
            get("fill_value").cloned().unwrap_or(Value::Null),
        ),
    ];
    Ok((
        spec,
        Declared {
            compressor,
            members,
            fill,
        },
    ))
}

/// `attrs` with `dimension_names` (a document's member: a list of strings, of `ndim` when
/// given) as `_ARRAY_DIMENSIONS` when they hold neither, as the view shows them back.
fn with_dims(
    mut attrs: Map<String, Value>,
    names: Option<&Value>,
    ndim: Option<usize>,
) -> Map<String, Value> {
    if let Some(Value::Array(names)) = names {
        let all: Option<Vec<&str>> = names.iter().map(Value::as_str).collect();
        if let Some(all) = all.filter(|a| ndim.is_none_or(|n| a.len() == n)) {
            if !attrs.contains_key("_ARRAY_DIMENSIONS") && !attrs.contains_key("dimension_names") {
                attrs.insert("_ARRAY_DIMENSIONS".into(), Value::from(all));
            }
        }
    }
    attrs
}

/// The NumPy type string of Zarr `data_type` `v` among the view's types, with the view's
/// [`geom::DataType`] of it (the one that shows it back the same).
fn numpy_type(v: &Value) -> Result<(String, geom::DataType), String> {
    let typestr = match v {
        Value::String(s) => match s.as_str() {
            "bool" => "|b1".to_owned(),
            "int8" => "|i1".into(),
            "uint8" => "|u1".into(),
            "int16" => "<i2".into(),
            "int32" => "<i4".into(),
            "int64" => "<i8".into(),
            "uint16" => "<u2".into(),
            "uint32" => "<u4".into(),
            "uint64" => "<u8".into(),
            "float16" => "<f2".into(),
            "float32" => "<f4".into(),
            "float64" => "<f8".into(),
            "complex64" => "<c8".into(),
            "complex128" => "<c16".into(),
            _ => return Err(format!("data type {v} (not one the view shows)")),
        },
        Value::Object(o) => {
            let conf = o.get("configuration");
            let get = |k: &str| conf.and_then(|c| c.get(k));
            match o.get("name").and_then(Value::as_str) {
                Some(kind @ ("numpy.datetime64" | "numpy.timedelta64")) => {
                    let unit = get("unit").and_then(Value::as_str).unwrap_or("");
                    let scale = get("scale_factor").and_then(Value::as_u64).unwrap_or(1);
                    let letter = if kind == "numpy.datetime64" { 'M' } else { 'm' };
                    match scale {
                        1 => format!("<{letter}8[{unit}]"),
                        n => format!("<{letter}8[{n}{unit}]"),
                    }
                }
                Some("fixed_length_utf32") => {
                    let bytes = get("length_bytes").and_then(Value::as_u64).unwrap_or(0);
                    format!("<U{}", bytes / 4)
                }
                _ => return Err(format!("data type {v} (not one the view shows)")),
            }
        }
        _ => return Err(format!("data type {v}")),
    };
    let (dtype, extra) = geom::data_type(&typestr).map_err(|e| format!("data type {v}: {e}"))?;
    if extra.is_some() || dtype.json != *v || dtype.itemsize == 0 {
        return Err(format!("data type {v} (the view would show another)"));
    }
    Ok((typestr, dtype))
}

/// The compressor of codec chain `v`: `bytes` (little-endian, or no endian for 1-byte
/// types), then at most one of `zstd`, `gzip`, `blosc`.
fn codecs(v: &Value) -> Result<Compressor, String> {
    let list = v.as_array().ok_or("codecs is no list")?;
    let name = |c: &Value| c.get("name").and_then(Value::as_str).map(str::to_owned);
    let Some(first) = list.first() else {
        return Err("no codecs".into());
    };
    if name(first).as_deref() != Some("bytes") {
        return Err(format!(
            "codec {first} first (only \"bytes\" then a compressor is kept)"
        ));
    }
    let endian = first
        .get("configuration")
        .and_then(|c| c.get("endian"))
        .and_then(Value::as_str);
    if endian.is_some_and(|e| e != "little") {
        return Err(format!("the bytes codec's endian {endian:?} (only little)"));
    }
    match list.get(1..).unwrap_or(&[]) {
        [] => Ok(Compressor::None),
        [c] => match name(c).as_deref() {
            Some("zstd") => Ok(Compressor::Zstd),
            Some("gzip") => Ok(Compressor::Gzip),
            Some("blosc") => Ok(Compressor::Blosc),
            _ => Err(format!("codec {c} (zstd, gzip and blosc are decoded)")),
        },
        more => Err(format!(
            "{} codecs after bytes (one compressor is decoded)",
            more.len()
        )),
    }
}

/// `data` decoded by `c` to exactly `want` bytes (never more allocated).
fn decode(c: Compressor, data: &[u8], want: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let out = match c {
        Compressor::None => return Err("not raw".into()),
        Compressor::Zstd => {
            let mut d = zstd::stream::read::Decoder::new(data).map_err(|e| e.to_string())?;
            let mut out = Vec::with_capacity(want);
            (&mut d)
                .take(want as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| e.to_string())?;
            out
        }
        Compressor::Gzip => {
            let mut out = Vec::with_capacity(want);
            flate2::read::GzDecoder::new(data)
                .take(want as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| e.to_string())?;
            out
        }
        Compressor::Blosc => {
            // The header says how much it decodes to: checked before anything is allocated.
            let h = crate::codec::chunk_info(data).map_err(|e| e.to_string())?;
            if h.nbytes != want {
                return Err(format!("a Blosc chunk of {} bytes, not {want}", h.nbytes));
            }
            crate::codec::decompress(data).map_err(|e| e.to_string())?
        }
    };
    match out.len() == want {
        true => Ok(out),
        false => Err(format!("{} bytes, not {want}", out.len())),
    }
}

/// One item of Zarr fill value `v` of NumPy type `typestr` (`itemsize` bytes, little-endian).
fn fill_item(v: &Value, typestr: &str, itemsize: usize) -> Result<Vec<u8>, String> {
    let kind = typestr.as_bytes().get(1).copied().unwrap_or(b' ');
    let bad = || Err(format!("fill value {v} for {typestr}"));
    let float = |v: &Value| -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => match s.as_str() {
                "NaN" => Some(f64::NAN),
                "Infinity" => Some(f64::INFINITY),
                "-Infinity" => Some(f64::NEG_INFINITY),
                _ => None,
            },
            _ => None,
        }
    };
    let float_bytes = |f: f64| -> Option<Vec<u8>> {
        match itemsize {
            8 => Some(f.to_le_bytes().to_vec()),
            4 if (f as f32) as f64 == f || f.is_nan() => Some((f as f32).to_le_bytes().to_vec()),
            2 => half(f).map(|h| h.to_le_bytes().to_vec()),
            _ => None,
        }
    };
    let out = match (kind, v) {
        (b'b', Value::Bool(b)) => Some(vec![u8::from(*b)]),
        (b'i' | b'M' | b'm', Value::Number(n)) => n
            .as_i64()
            .map(|x| x.to_le_bytes()[..itemsize].to_vec())
            .filter(|b| {
                let back = sign_extend(b);
                n.as_i64() == Some(back)
            }),
        (b'M' | b'm', Value::String(s)) if s == "NaT" => Some(i64::MIN.to_le_bytes().to_vec()),
        (b'u', Value::Number(n)) => n
            .as_u64()
            .filter(|&x| itemsize == 8 || x < 1u64 << (8 * itemsize))
            .map(|x| x.to_le_bytes()[..itemsize].to_vec()),
        (b'f', _) => float(v).and_then(float_bytes),
        (b'c', Value::Array(p)) if p.len() == 2 => {
            let half_size = itemsize / 2;
            let part = |x: &Value| {
                float(x).and_then(|f| match half_size {
                    8 => Some(f.to_le_bytes().to_vec()),
                    4 if (f as f32) as f64 == f || f.is_nan() => {
                        Some((f as f32).to_le_bytes().to_vec())
                    }
                    _ => None,
                })
            };
            part(&p[0]).zip(part(&p[1])).map(|(mut a, b)| {
                a.extend(b);
                a
            })
        }
        (b'U', Value::String(s)) if s.is_empty() => Some(vec![0; itemsize]),
        _ => None,
    };
    match out {
        Some(b) if b.len() == itemsize => Ok(b),
        _ => bad(),
    }
}

/// Little-endian signed bytes `b` (1 to 8) as an `i64`.
fn sign_extend(b: &[u8]) -> i64 {
    let mut full = [0u8; 8];
    full[..b.len()].copy_from_slice(b);
    let shift = 64 - 8 * b.len() as u32;
    (i64::from_le_bytes(full) << shift) >> shift
}

/// `f` as a float16, when it is exactly one of the values kept (zero, NaN, infinities).
fn half(f: f64) -> Option<u16> {
    match f {
        _ if f.is_nan() => Some(0x7e00),
        f64::INFINITY => Some(0x7c00),
        f64::NEG_INFINITY => Some(0xfc00),
        _ if f == 0.0 && f.is_sign_negative() => Some(0x8000),
        _ if f == 0.0 => Some(0),
        _ => None,
    }
}

/// A block shape for chunks `chunks` of `itemsize`-byte items: slabs of the chunk along its
/// first axes (python-blosc2's kind), of at most [`BLOCK_BYTES`].
fn block_shape(chunks: &[u64], itemsize: u64) -> Vec<u64> {
    let mut block = chunks.to_vec();
    for d in 0..block.len() {
        let rest: u64 = block[d + 1..]
            .iter()
            .product::<u64>()
            .saturating_mul(itemsize);
        if rest.saturating_mul(block[d]) <= BLOCK_BYTES {
            break;
        }
        block[d] = (BLOCK_BYTES / rest.max(1)).clamp(1, block[d]);
        if rest.saturating_mul(block[d]) <= BLOCK_BYTES {
            break;
        }
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(dtype: &str, fill: Value, codecs: Value) -> Value {
        json!({"zarr_format": 3, "node_type": "array", "shape": [10, 6], "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 3]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill, "codecs": codecs, "attributes": {"_FillValue": "AAAAAAAA+H8="},
            "dimension_names": ["x", "y"], "storage_transformers": []})
    }

    #[test]
    fn what_zarr_python_and_xarray_declare_is_kept_and_the_rest_refused() {
        let zstd = json!([{"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "zstd", "configuration": {"level": 0, "checksum": false}}]);
        let (spec, d) = new_array(&doc("float64", json!("NaN"), zstd.clone())).unwrap();
        assert_eq!(spec.dtype, "<f8");
        assert_eq!(d.compressor, Compressor::Zstd);
        assert!(f64::from_le_bytes(d.fill.clone().try_into().unwrap()).is_nan());
        let attrs = spec.attrs.unwrap();
        assert_eq!(attrs["_ARRAY_DIMENSIONS"], json!(["x", "y"]));
        assert_eq!(attrs["_FillValue"], json!({"__float__": "nan"}));
        assert_eq!(spec.blockshape, vec![4, 3]);
        let (spec, _) = new_array(&doc("int16", json!(-7), zstd.clone())).unwrap();
        assert_eq!(spec.fill, (-7i16).to_le_bytes().to_vec());
        for (dtype, fill, codecs) in [
            ("int8", json!(300), zstd.clone()),
            ("float16", json!(1.5), zstd.clone()),
            ("float64", json!(0), json!([{"name": "sharding_indexed"}])),
            (
                "float64",
                json!(0),
                json!([{"name": "bytes", "configuration": {"endian": "big"}}]),
            ),
            (
                "float64",
                json!(0),
                json!([{"name": "bytes"}, {"name": "crc32c"}]),
            ),
            ("string", json!(""), zstd.clone()),
        ] {
            assert!(new_array(&doc(dtype, fill, codecs)).is_err(), "{dtype}");
        }
        let mut group = doc("int8", json!(0), zstd);
        group["node_type"] = json!("group");
        assert!(new_array(&group).is_err());
    }

    #[test]
    fn blocks_are_slabs_within_the_bound() {
        assert_eq!(block_shape(&[1000, 1000], 8), vec![32, 1000]);
        assert_eq!(block_shape(&[10, 6], 8), vec![10, 6]);
        assert_eq!(block_shape(&[4, 100_000], 8), vec![1, 32768]);
    }

    #[test]
    fn declared_codecs_decode_to_the_raw_size_only() {
        let raw: Vec<u8> = (0..4096u32).flat_map(|x| x.to_le_bytes()).collect();
        let z = zstd::bulk::compress(&raw, 3).unwrap();
        assert_eq!(decode(Compressor::Zstd, &z, raw.len()).unwrap(), raw);
        assert!(decode(Compressor::Zstd, &z, raw.len() - 1).is_err());
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut g, &raw).unwrap();
        let g = g.finish().unwrap();
        assert_eq!(decode(Compressor::Gzip, &g, raw.len()).unwrap(), raw);
        assert!(decode(Compressor::Gzip, b"junk", 4).is_err());
    }
}
