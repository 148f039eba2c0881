//! The 2012 `blsk` carray persistence proposal (seed 004), read-only, as `docs/BLSK.md`
//! defines it where the proposal is silent: `meta/nrows` (YAML integer), `meta/storage` and
//! `meta/attributes` (YAML mappings, parsed with `serde_norway` into JSON), superchunk files
//! `data/__N__.bin` (N from 1) of a 16-byte little-endian header (`blsk`, version 1, reserved,
//! typesize u32, nchunks u32), an index of u64 absolute chunk offsets, and Blosc1 chunks.
//! A nested dtype (a mapping) keeps one such directory per column under `data/`.
//!
//! Opening reads the YAML files and every superchunk's header and index, never chunk data.
//! The result is a [`Carray`] whose chunks are located in superchunk files, so everything
//! that reads a bcolz carray reads it; writing is refused (`write.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};

use super::{Carray, MAX_JSON_LEN, dtype_info};
use crate::container::source::{IoStats, Source};
use crate::container::{Array, Container, ContainerError, Table};

/// Where one Blosc1 chunk of a blsk carray lies.
#[derive(Debug, Clone)]
pub(crate) struct Chunk {
    /// The superchunk file (shared by its chunks: an index entry of 8 bytes costs 32 here).
    pub(crate) file: Arc<Path>,
    /// Offset of the chunk in the file.
    pub(crate) offset: u64,
    /// Bytes up to the next chunk (or the end of the file): the chunk plus its free space.
    pub(crate) room: u64,
}

/// An opened blsk root.
#[derive(Debug)]
enum Opened {
    /// A plain dtype: one array.
    Flat(Box<Carray>),
    /// A nested dtype: `(attrs, columns in dtype order)`.
    Nested(Value, Vec<(String, Carray)>),
}

const HEADER_LEN: u64 = 16;

fn mal(path: &Path, what: &str, offset: u64, why: impl Into<String>) -> ContainerError {
    ContainerError::Malformed {
        path: path.to_path_buf(),
        what: what.into(),
        offset,
        why: why.into(),
    }
}

fn read_yaml(path: &Path, stats: &Arc<IoStats>) -> Result<Value, ContainerError> {
    let src = Source::open(path, Arc::clone(stats))?;
    if src.len() > MAX_JSON_LEN {
        return Err(mal(path, "YAML file", 0, format!("{} bytes", src.len())));
    }
    let bytes = src.read_at(0, src.len() as usize, "YAML file")?;
    serde_norway::from_slice::<Value>(&bytes).map_err(|e| {
        let at = e.location().map_or(0, |l| l.index() as u64);
        mal(path, "YAML", at, e.to_string().replace('\n', " "))
    })
}

/// A shape given as a YAML list or as the note's string `"(300, 200)"`.
fn dims(v: &Value, path: &Path, what: &str) -> Result<Vec<u64>, ContainerError> {
    let bad = || {
        mal(
            path,
            what,
            0,
            format!("{v} is not a list of non-negative integers"),
        )
    };
    match v {
        Value::Array(a) => a.iter().map(|d| d.as_u64().ok_or_else(bad)).collect(),
        Value::String(s) => s
            .trim()
            .trim_start_matches(['(', '['])
            .trim_end_matches([')', ']'])
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| p.parse::<u64>().map_err(|_| bad()))
            .collect(),
        Value::Number(n) => n.as_u64().map(|d| vec![d]).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// Opens the blsk root `root` as an array (flat dtype) or a table (nested dtype).
pub(crate) fn open_container(
    root: &Path,
    stats: Arc<IoStats>,
) -> Result<Container, ContainerError> {
    Ok(match open(root, &stats)? {
        Opened::Flat(c) => Container::Array(Array::from_carray(root.to_path_buf(), *c, stats)),
        Opened::Nested(attrs, cols) => Container::Table(Table {
            path: root.to_path_buf(),
            attrs,
            columns: cols
                .into_iter()
                .map(|(name, c)| {
                    let p = root.join("data").join(&name);
                    (name, Array::from_carray(p, c, Arc::clone(&stats)))
                })
                .collect(),
        }),
    })
}

/// Whether `root` looks like the 2012 `blsk` proposal (seed 004): `meta/nrows`, `__N__.bin`
/// superchunk files, or a file starting with `blsk` (among the first 16 entries of `data/` or
/// the root). Returns what was found. Meant for directories that are nothing else.
pub(crate) fn blsk_evidence(root: &Path) -> Option<String> {
    if root.join("meta/nrows").is_file() {
        return Some("meta/nrows (2012 blsk proposal layout)".into());
    }
    for dir in [root.join("data"), root.to_path_buf()] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        // Names first; the magic of at most a few files (this runs only for directories that
        // are nothing else b2fs knows).
        for (n, e) in entries.flatten().take(4096).enumerate() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let is_bin = name.starts_with("__") && name.ends_with("__.bin");
            let path = e.path();
            let magic = n < 16
                && path.is_file()
                && std::fs::File::open(&path)
                    .and_then(|mut f| {
                        let mut m = [0u8; 4];
                        std::io::Read::read_exact(&mut f, &mut m).map(|_| m)
                    })
                    .is_ok_and(|m| &m == b"blsk");
            if is_bin || magic {
                return Some(format!(
                    "{} (2012 blsk superchunk proposal, never shipped by bcolz)",
                    path.display()
                ));
            }
        }
    }
    None
}

/// Opens the blsk root `root`.
fn open(root: &Path, stats: &Arc<IoStats>) -> Result<Opened, ContainerError> {
    let nrows_path = root.join("meta/nrows");
    let storage_path = root.join("meta/storage");
    let nrows = read_yaml(&nrows_path, stats)?
        .as_u64()
        .ok_or_else(|| mal(&nrows_path, "nrows", 0, "not a non-negative integer"))?;
    let storage = read_yaml(&storage_path, stats)?;
    let attrs_path = root.join("meta/attributes");
    let attrs = if attrs_path.is_file() {
        match read_yaml(&attrs_path, stats)? {
            Value::Null => json!({}),
            v @ Value::Object(_) => v,
            other => {
                return Err(mal(
                    &attrs_path,
                    "attributes",
                    0,
                    format!("{other} is not a mapping"),
                ));
            }
        }
    } else {
        json!({})
    };
    let get = |k: &str| storage.get(k);
    for (key, ok) in [("endianness", "little"), ("order", "C")] {
        if let Some(v) = get(key).filter(|v| v.as_str() != Some(ok)) {
            return Err(ContainerError::Unsupported {
                path: storage_path.clone(),
                what: format!("{key} {v} (only {ok} is read)"),
            });
        }
    }
    let mut shape = match get("shape") {
        Some(v) => dims(v, &storage_path, "shape")?,
        None => vec![nrows],
    };
    if shape.is_empty() {
        shape = vec![nrows];
    }
    if shape[0] != nrows {
        return Err(mal(
            &storage_path,
            "shape",
            0,
            format!("shape[0] {} differs from meta/nrows {nrows}", shape[0]),
        ));
    }
    let chunkshape = dims(
        get("chunkshape").ok_or_else(|| mal(&storage_path, "chunkshape", 0, "missing"))?,
        &storage_path,
        "chunkshape",
    )?;
    if chunkshape.len() != shape.len() || chunkshape[1..] != shape[1..] || chunkshape[0] == 0 {
        return Err(ContainerError::Unsupported {
            path: storage_path.clone(),
            what: format!(
                "chunkshape {chunkshape:?} for shape {shape:?} (only chunks of whole rows are \
                 defined, docs/BLSK.md)"
            ),
        });
    }
    let dtype = get("dtype").ok_or_else(|| mal(&storage_path, "dtype", 0, "missing"))?;
    let column = |dir: &Path, dtype: &str, attrs: Value| {
        column(dir, dtype, &shape, chunkshape[0], &storage, attrs, stats)
    };
    match dtype {
        Value::String(d) => column(&root.join("data"), d, attrs).map(|c| Opened::Flat(Box::new(c))),
        Value::Object(cols) => {
            let mut out = Vec::with_capacity(cols.len());
            for (name, d) in cols {
                let d = d.as_str().ok_or_else(|| {
                    mal(
                        &storage_path,
                        "dtype",
                        0,
                        format!("column {name}: {d} is not a string"),
                    )
                })?;
                if !super::ctable::column_name_ok(name) {
                    return Err(mal(
                        &storage_path,
                        "dtype",
                        0,
                        format!("bad column name {name:?}"),
                    ));
                }
                out.push((
                    name.clone(),
                    column(&root.join("data").join(name), d, json!({}))?,
                ));
            }
            Ok(Opened::Nested(attrs, out))
        }
        other => Err(mal(
            &storage_path,
            "dtype",
            0,
            format!("{other} is not a string or mapping"),
        )),
    }
}

fn column(
    data: &Path,
    dtype: &str,
    shape: &[u64],
    chunklen: u64,
    storage: &Value,
    attrs: Value,
    stats: &Arc<IoStats>,
) -> Result<Carray, ContainerError> {
    let info = dtype_info(dtype).ok_or_else(|| ContainerError::Unsupported {
        path: data.to_path_buf(),
        what: format!("dtype {dtype:?}"),
    })?;
    let overflow = || mal(data, "shape", 0, "size overflows");
    let atomsize = shape[1..]
        .iter()
        .try_fold(info.itemsize as u64, |a, &d| a.checked_mul(d))
        .ok_or_else(overflow)?;
    let nrows = shape[0];
    nrows.checked_mul(atomsize).ok_or_else(overflow)?;
    chunklen.checked_mul(atomsize).ok_or_else(overflow)?;
    let want = usize::try_from(nrows.div_ceil(chunklen)).map_err(|_| overflow())?;
    let mut chunks = Vec::new();
    let mut mtime = SystemTime::UNIX_EPOCH;
    for n in 1.. {
        let file = data.join(format!("__{n}__.bin"));
        if !file.is_file() {
            break;
        }
        let src = Source::open(&file, Arc::clone(stats))?;
        mtime = mtime.max(src.mtime());
        superchunk(&src, info.itemsize, &mut chunks)?;
        if chunks.len() > want {
            break;
        }
    }
    if chunks.len() != want {
        return Err(mal(
            data,
            "superchunks",
            0,
            format!(
                "{} chunks in data/__N__.bin files, {want} expected for {nrows} rows of \
                 chunklen {chunklen}",
                chunks.len()
            ),
        ));
    }
    let nbytes = nrows * atomsize;
    let cbytes: u64 = chunks.iter().map(|c: &Chunk| c.room).sum();
    let root = data.parent().unwrap_or(data).to_path_buf();
    Ok(Carray {
        root,
        files: crate::container::files::Files::Local,
        stats: Arc::clone(stats),
        sizes: json!({"shape": shape, "nbytes": nbytes, "cbytes": cbytes}),
        storage: storage.clone(),
        attrs,
        attrs_file: false,
        shape: shape.to_vec(),
        chunklen,
        dtype: dtype.to_string(),
        dtype_info: Some(info),
        atomsize,
        nchunks: want,
        mtime,
        blsk: Some(chunks),
    })
}

/// Reads one superchunk's header and index, appending its chunks.
fn superchunk(src: &Source, itemsize: usize, out: &mut Vec<Chunk>) -> Result<(), ContainerError> {
    let path = src.path();
    let h = src.read_at(0, HEADER_LEN as usize, "blsk header")?;
    if &h[0..4] != b"blsk" {
        return Err(mal(
            path,
            "blsk magic",
            0,
            "the file does not start with blsk",
        ));
    }
    if h[4] != 1 {
        return Err(ContainerError::Unsupported {
            path: path.to_path_buf(),
            what: format!("blsk version {}", h[4]),
        });
    }
    let typesize = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if typesize as usize != itemsize {
        return Err(mal(
            path,
            "typesize",
            8,
            format!("{typesize}, the dtype's itemsize is {itemsize}"),
        ));
    }
    let n = u64::from(u32::from_le_bytes([h[12], h[13], h[14], h[15]]));
    let index_end = HEADER_LEN + 8 * n;
    if index_end > src.len() {
        return Err(mal(
            path,
            "nchunks",
            12,
            format!("{n} chunks do not fit the file"),
        ));
    }
    let index = src.read_at(HEADER_LEN, (8 * n) as usize, "blsk index")?;
    let offsets: Vec<u64> = index
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .collect();
    let file: Arc<Path> = Arc::from(path);
    for (k, &o) in offsets.iter().enumerate() {
        let next = offsets.get(k + 1).copied().unwrap_or(src.len());
        if o < index_end || next <= o || next > src.len() {
            return Err(mal(
                path,
                "blsk index",
                HEADER_LEN + 8 * k as u64,
                format!("chunk {k} offset {o} (next {next}, index ends at {index_end})"),
            ));
        }
        out.push(Chunk {
            file: Arc::clone(&file),
            offset: o,
            room: next - o,
        });
    }
    Ok(())
}
