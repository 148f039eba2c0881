//! The projection rules: which entries a mounted source shows, and what its metadata files
//! say. This is the one policy a reviewer will look for; everything else serves it.
//!
//! ```text
//! __attrs__            JSON object: the frame's vlmeta (python-blosc2 attrs) / bcolz __attrs__
//! meta/sizes           JSON: {"shape", "nbytes", "cbytes", "nchunks"}
//! meta/storage         JSON: dtype, chunkshape (frames) or chunklen (bcolz), blockshape,
//!                      typesize, chunksize, blocksize, cparams
//! meta/metalayers/NAME JSON: each fixed metalayer, decoded
//! data/NNNNNNNN.bin    chunk N decompressed (8-digit zero-padded decimal)
//! ```
//!
//! A bcolz ctable shows its `__attrs__` and one such tree per column, named after the column,
//! in `__rootdirs__` order. For bcolz the on-disk `meta/sizes` and `meta/storage` keys are
//! kept as bcolz wrote them and the keys above are added where missing.
//!
//! Rules for the numbers:
//! - `nbytes` is the source's uncompressed size (b2nd includes chunk padding); `shape` is the
//!   N-dim shape where the source has one, else `[nbytes / typesize]`.
//! - `cparams` is read from the first regular chunk's header ("as the chunks say": the frame
//!   header's codec fields are only the last writer's defaults). The chunk header has no
//!   clevel, so `clevel` comes from the frame header's codec_flags high nibble or the bcolz
//!   storage cparams, and `clevel_source` says which. Without a regular chunk (empty or all
//!   special) `cparams` holds only what the source header says.
//! - `cparams.codec` and `cparams.filter_names` are python-blosc2's names (`ZSTD`,
//!   `SHUFFLE`: `cparams.codec.name`, `[f.name for f in cparams.filters]`), beside the ids
//!   `codec_id` and `filters`.
//! - `meta/metalayers/b2nd` and `caterva` are objects with named fields (version, ndim, shape,
//!   chunkshape, blockshape, and for b2nd dtype_format and dtype), not the stored array.
//!
//! Every JSON file ends with a newline.

use serde_json::{Map, Value, json};

use super::layout::{AttrsOwner, FileKind, Generated, Layout, NpyCell, Owner, ROOT_INO, TableCell};
use super::names::{codec_name, filter_name};
use crate::container::npy::{Npy, TableNpy};
use crate::container::{Array, Container, ContainerError, SourceKind, Table};
use crate::reader::LiveArray;

/// Builds the layout of `container`.
///
/// # Errors
/// When metadata needed for the JSON files cannot be read (a chunk header, a bcolz meta file).
pub fn layout(container: Container) -> Result<Layout, ContainerError> {
    match container {
        Container::Array(array) => {
            let mut layout = Layout::new(Owner::of(array.path()));
            add_array(&mut layout, ROOT_INO, array)?;
            Ok(layout)
        }
        Container::Table(table) => table_layout(table),
    }
}

fn table_layout(table: Table) -> Result<Layout, ContainerError> {
    let mut layout = Layout::new(Owner::of(&table.path));
    layout.set_table(table.path.clone());
    add_table(&mut layout, ROOT_INO, table, true)?;
    Ok(layout)
}

/// Adds a ctable under directory `dir`: `__attrs__`, one directory per column, `table.npy`.
/// `writable`: the tree's own ctable (its columns commit together); else read-only.
pub(crate) fn add_table(
    layout: &mut Layout,
    dir: u64,
    table: Table,
    writable: bool,
) -> Result<(), ContainerError> {
    let table_npy = TableNpy::for_table(&table);
    let Table {
        path,
        attrs,
        columns,
    } = table;
    let owner = if writable {
        AttrsOwner::Table(path.clone())
    } else {
        AttrsOwner::ReadOnly
    };
    layout.generated(
        dir,
        "__attrs__",
        FileKind::Attrs(owner, Generated::new(json_file(&attrs))),
    );
    let ncolumns = columns.len();
    let mut ids = Vec::with_capacity(ncolumns);
    for (name, column) in columns {
        if !valid_name(&name) {
            log::warn!(
                "{}: column {name:?} is not a valid file name; not shown",
                path.display()
            );
            continue;
        }
        let col_dir = layout.dir(dir, &name);
        let how = if writable {
            Adding::Writable
        } else {
            Adding::ReadOnly
        };
        add_array_as(layout, col_dir, column, how)?;
        ids.extend(layout.last_array());
    }
    match table_npy {
        Ok(npy) if ids.len() == ncolumns => {
            layout.generated(
                dir,
                "table.npy",
                FileKind::TableNpy(TableCell::new(npy), ids),
            );
        }
        Ok(_) => log::info!("{}: no table.npy (a column is not shown)", path.display()),
        Err(e) => log::info!("{e}: no table.npy"),
    }
    Ok(())
}

/// Adds `__attrs__`, `meta/` and `data/` for one array under directory `dir` (a source of its
/// own).
fn add_array(layout: &mut Layout, dir: u64, array: Array) -> Result<(), ContainerError> {
    add_array_as(layout, dir, array, Adding::Writable)
}

/// How an array joins a layout.
#[derive(Debug, Clone)]
pub(crate) enum Adding {
    /// A source of its own, committed by path.
    Writable,
    /// Leaf `key` of the layout's collection, committed through it.
    Leaf(String),
    /// Never written (a leaf of a nested store, a ctable column inside a collection).
    ReadOnly,
}

/// Adds `__attrs__`, `array.npy` (when the array has an item layout and is not a special
/// object), `meta/` and `data/` for one array under directory `dir`.
pub(crate) fn add_array_as(
    layout: &mut Layout,
    dir: u64,
    array: Array,
    how: Adding,
) -> Result<(), ContainerError> {
    let attrs = json_file(array.attrs());
    let sizes = json_file(&sizes(&array)?);
    let storage = json_file(&storage(&array)?);
    let metalayers: Vec<_> = array
        .metalayers()
        .iter()
        .map(|ml| {
            (
                ml.name.clone(),
                json_file(&metalayer_json(&ml.name, &ml.json)),
            )
        })
        .collect();
    let path = array.path().to_path_buf();
    let npy = match crate::container::store::special_kind(&array) {
        Some(kind) => Err(format!("{}: a {kind} object", path.display())),
        None => Npy::for_array(&array).map_err(|e| e.to_string()),
    };
    let id = match how {
        Adding::Writable => layout.array(array),
        Adding::Leaf(key) => layout.live_array(LiveArray::leaf(array, key)),
        Adding::ReadOnly => layout.store(std::sync::Arc::new(array)),
    };
    layout.generated(
        dir,
        "__attrs__",
        FileKind::Attrs(AttrsOwner::Array(id), Generated::new(attrs)),
    );
    match npy {
        Ok(npy) => {
            layout.generated(dir, "array.npy", FileKind::Npy(id, NpyCell::new(npy)));
        }
        Err(e) => log::info!("{e}: no array.npy"),
    }
    let meta = layout.dir(dir, "meta");
    layout.generated(meta, "sizes", FileKind::Sizes(id, Generated::new(sizes)));
    layout.file(meta, "storage", storage);
    let mls = layout.dir(meta, "metalayers");
    for (name, json) in metalayers {
        if valid_name(&name) {
            layout.file(mls, &name, json);
        } else {
            log::warn!(
                "{}: metalayer {name:?} is not a valid file name; not shown",
                path.display()
            );
        }
    }
    layout.data_dir(dir, "data", id);
    Ok(())
}

/// Field names of the `b2nd` and `caterva` metalayers, in their msgpack array's order.
const B2ND_FIELDS: &[&str] = &[
    "version",
    "ndim",
    "shape",
    "chunkshape",
    "blockshape",
    "dtype_format",
    "dtype",
];

/// A metalayer's JSON file: the `b2nd` and `caterva` arrays as objects with named fields
/// (`b2nd`: version, ndim, shape, chunkshape, blockshape, dtype_format, dtype; `caterva`: the
/// first five); other metalayers, and a b2nd/caterva layer of unexpected length, as decoded.
pub fn metalayer_json(name: &str, v: &Value) -> Value {
    let n = match name {
        "b2nd" => B2ND_FIELDS.len(),
        "caterva" => 5,
        _ => return v.clone(),
    };
    match v {
        Value::Array(items) if items.len() == n => Value::Object(
            B2ND_FIELDS
                .iter()
                .zip(items)
                .map(|(k, x)| ((*k).to_owned(), x.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// python-blosc2's names of a filter pipeline (`[f.name for f in cparams.filters]`).
fn filter_names(ids: &[u8]) -> Value {
    Value::from(ids.iter().map(|&f| filter_name(f)).collect::<Vec<_>>())
}

/// Whether `name` can be one path component.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
        && name.len() <= 255
}

/// JSON for people and parsers: objects one key per line (2-space indent), arrays without
/// nested containers on one line; a final newline.
pub fn json_file(v: &Value) -> Vec<u8> {
    json_file_spelled(v, AsIs)
}

/// [`json_file`] with some values written another way than JSON writes them, as `spelling`
/// says where each sits (the Zarr view's `zarr.json` documents spell float NaN and
/// infinities as Python's `json.dumps` does: `src/tree/zarr/json.rs`).
pub(crate) fn json_file_spelled(v: &Value, spelling: impl Spelling) -> Vec<u8> {
    let mut out = String::new();
    write_json(&mut out, v, 0, spelling);
    out.push('\n');
    out.into_bytes()
}

/// Where a value sits in a document written by [`json_file_spelled`], and what that means
/// for how it is written.
pub(crate) trait Spelling: Copy {
    /// The text written for `v` here instead of its JSON, if any.
    fn spell(self, v: &Value) -> Option<String>;
    /// The spelling of the value of member `key` of an object here.
    fn member(self, key: &str) -> Self;
    /// The spelling of an item of a list here.
    fn item(self) -> Self;
}

/// Every value as JSON writes it.
#[derive(Clone, Copy)]
struct AsIs;

impl Spelling for AsIs {
    fn spell(self, _: &Value) -> Option<String> {
        None
    }
    fn member(self, _: &str) -> Self {
        self
    }
    fn item(self) -> Self {
        self
    }
}

fn write_json(out: &mut String, v: &Value, depth: usize, spelling: impl Spelling) {
    let pad = |out: &mut String, d: usize| out.extend(std::iter::repeat_n("  ", d));
    if let Some(text) = spelling.spell(v) {
        out.push_str(&text);
        return;
    }
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push_str("{\n");
            for (i, (k, val)) in m.iter().enumerate() {
                pad(out, depth + 1);
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_json(out, val, depth + 1, spelling.member(k));
                out.push_str(if i + 1 < m.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push('}');
        }
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
            out.push_str("[\n");
            for (i, val) in a.iter().enumerate() {
                pad(out, depth + 1);
                write_json(out, val, depth + 1, spelling.item());
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push(']');
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(Value::to_string).collect();
            out.push('[');
            out.push_str(&items.join(", "));
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// `[nbytes / typesize]` for sources without an N-dim shape.
fn shape(array: &Array) -> Vec<u64> {
    let g = array.geometry();
    if g.shape.is_empty() && !is_ndim(array) {
        vec![array.nbytes() / array.typesize().max(1) as u64]
    } else {
        g.shape.clone()
    }
}

fn is_ndim(array: &Array) -> bool {
    array
        .metalayers()
        .iter()
        .any(|m| m.name == "b2nd" || m.name == "caterva")
        || matches!(
            array.kind(),
            SourceKind::BcolzCarray | SourceKind::BcolzCtable
        )
}

/// The `meta/sizes` object.
pub fn sizes(array: &Array) -> Result<Value, ContainerError> {
    let mut m = bcolz_meta(array, "sizes");
    put(&mut m, "shape", json!(shape(array)));
    put(&mut m, "nbytes", json!(array.nbytes()));
    put(&mut m, "cbytes", json!(array.cbytes()));
    put(&mut m, "nchunks", json!(array.nchunks()));
    Ok(Value::Object(m))
}

/// The `meta/storage` object.
pub fn storage(array: &Array) -> Result<Value, ContainerError> {
    let mut m = bcolz_meta(array, "storage");
    let g = array.geometry();
    put(&mut m, "dtype", json!(g.dtype));
    if is_bcolz(array) {
        let chunklen = g
            .chunkshape
            .as_ref()
            .and_then(|c| c.first().copied())
            .unwrap_or_else(|| (array.chunksize() / array.typesize().max(1)) as u64);
        put(&mut m, "chunklen", json!(chunklen));
    } else {
        let chunkshape = g
            .chunkshape
            .clone()
            .unwrap_or_else(|| vec![(array.chunksize() / array.typesize().max(1)) as u64]);
        put(&mut m, "chunkshape", json!(chunkshape));
    }
    put(&mut m, "blockshape", json!(g.blockshape));
    put(&mut m, "typesize", json!(array.typesize()));
    put(&mut m, "chunksize", json!(array.chunksize()));

    let header = array.first_regular_header()?;
    if let Some(h) = &header {
        put(&mut m, "blocksize", json!(h.blocksize));
    }
    let mut cparams = match m.remove("cparams") {
        Some(Value::Object(c)) => c,
        _ => Map::new(),
    };
    let frame = array.frame_info();
    match &header {
        Some(h) => {
            put(&mut cparams, "codec", json!(codec_name(h.compcode)));
            put(&mut cparams, "codec_id", json!(h.compcode));
            put(&mut cparams, "filters", json!(h.filters));
            put(&mut cparams, "filter_names", filter_names(&h.filters));
            put(&mut cparams, "filters_meta", json!(h.filters_meta));
            put(&mut cparams, "split", json!(h.flags & 0x10 == 0));
            put(&mut cparams, "cparams_source", json!("chunk header"));
        }
        None => {
            if let Some(f) = frame {
                put(&mut cparams, "codec", json!(codec_name(f.udcodec)));
                put(&mut cparams, "codec_id", json!(f.udcodec));
                put(&mut cparams, "filters", json!(f.filters));
                put(&mut cparams, "filter_names", filter_names(&f.filters));
                put(&mut cparams, "filters_meta", json!(f.filters_meta));
                put(&mut cparams, "cparams_source", json!("frame header"));
            }
        }
    }
    // Chunk headers record neither clevel nor splitmode: take them from the writer's record.
    if let Some(f) = frame {
        put(&mut cparams, "clevel", json!(f.codec_flags >> 4));
        put(&mut cparams, "clevel_source", json!("frame header"));
        put(
            &mut cparams,
            "splitmode",
            json!(splitmode_name(f.other_flags & 0x03)),
        );
        put(&mut cparams, "splitmode_source", json!("frame header"));
    } else {
        if cparams.contains_key("clevel") {
            put(&mut cparams, "clevel_source", json!("bcolz storage"));
        }
        if let Some(h) = &header {
            let mode = if h.flags & 0x10 != 0 {
                "NEVER_SPLIT"
            } else {
                "ALWAYS_SPLIT"
            };
            put(&mut cparams, "splitmode", json!(mode));
            put(&mut cparams, "splitmode_source", json!("chunk header"));
        }
    }
    m.insert("cparams".into(), Value::Object(cparams));
    Ok(Value::Object(m))
}

fn is_bcolz(array: &Array) -> bool {
    matches!(
        array.kind(),
        SourceKind::BcolzCarray | SourceKind::BcolzCtable
    )
}

/// python-blosc2's `SplitMode` name for the frame header's `other_flags & 3` (splitmode - 1).
fn splitmode_name(bits: u8) -> &'static str {
    match bits {
        0 => "ALWAYS_SPLIT",
        1 => "NEVER_SPLIT",
        2 => "AUTO_SPLIT",
        _ => "FORWARD_COMPAT_SPLIT",
    }
}

/// Inserts `key` unless the source's own metadata already has it.
fn put(m: &mut Map<String, Value>, key: &str, v: Value) {
    m.entry(key.to_owned()).or_insert(v);
}

/// The bcolz `meta/NAME` JSON object as stored (empty for frames).
fn bcolz_meta(array: &Array, name: &str) -> Map<String, Value> {
    let v = match name {
        "sizes" => array.bcolz_sizes(),
        _ => array.bcolz_storage(),
    };
    match v {
        Some(Value::Object(m)) => m.clone(),
        Some(_) | None => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_file_round_trips_and_keeps_scalar_arrays_on_one_line() {
        let v = json!({"shape": [400, 3], "nested": [[1, 2], {"a": null}], "e": {}, "s": "x\"y",
                       "f": 0.1, "empty": []});
        let text = String::from_utf8(json_file(&v)).unwrap();
        assert!(text.ends_with("}\n"));
        assert!(text.contains("\"shape\": [400, 3]"), "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
        assert_eq!(json_file(&json!([])), b"[]\n");
    }
}
