//! bcolz (bcolz-zipline 1.13) directories: carrays (`meta/sizes`, `meta/storage`, `__attrs__`,
//! `data/__N.blp`) and ctables (`__rootdirs__` plus one carray directory per column directly
//! under the root), and the never-shipped 2012 `blsk` proposal layout (`blsk.rs`, read-only).
//!
//! This module does not decode chunk data: it returns the Blosc1 chunk inside each `.blp`
//! file (after the 16-byte bloscpack `blpk` header) and the sizes the metadata implies.
//!
//! Spec: the bcolz persistence document (seed 003 of `docs/format/README.md`) and
//! `docs/format/CONTAINERS.md` section 5, which corrects the seed: ctable columns live in
//! `root/<name>/` (not `root/data/`), `storage` also has `cname` and `quantize`, `shuffle` is
//! an int, and the last partial chunk is stored as a **smaller** chunk (`__K.blp` holds
//! `len % chunklen` items). The 2012 carray persistence note (seed 004) describes the `blsk`
//! layout, read through `blsk.rs` as `docs/BLSK.md` defines it.
//!
//! Invariants: nchunks = ceil(len / chunklen) (object dtype: len); chunk sizes come from the
//! metadata (`chunklen x atomsize`, the leftover for the last chunk), not from the chunk files,
//! so listing sizes reads no chunk data; a leftover slot whose chunk decodes to more bytes than
//! that (bcolz reads only the first items) is valid, and only the first `chunk_nbytes` bytes
//! are data. The `.blp` header is not validated (bcolz does not either).
//!
//! The parts: this file opens a carray (`Carray`: its metadata, what another writer
//! changes); `chunks.rs` its chunk files; `ctable.rs` ctable roots; `json.rs` the JSON
//! metadata files; `dtype.rs` dtype strings; `blsk.rs` the 2012 layout and its detection.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;

use super::ContainerError;
use super::files::Files;
use super::source::IoStats;
use crate::codec::MAX_BUFFERSIZE;
use json::{field, non_negative, read_json_in};

pub(crate) mod blsk;
pub(crate) mod chunks;
pub(super) mod ctable;
mod dtype;
mod json;

pub use dtype::{DtypeInfo, dtype_info};

/// Length of the bloscpack header before the Blosc1 chunk in each `.blp` file.
pub const BLP_HEADER_LEN: usize = 16;

/// Largest JSON metadata file read (`meta/sizes`, `meta/storage`, `__attrs__`,
/// `__rootdirs__`); real ones are a few hundred bytes.
pub const MAX_JSON_LEN: u64 = 16 << 20;

/// An opened carray directory.
#[derive(Debug)]
pub(crate) struct Carray {
    root: PathBuf,
    /// Where its files are opened from.
    pub(crate) files: Files,
    stats: Arc<IoStats>,
    sizes: Value,
    storage: Value,
    attrs: Value,
    attrs_file: bool,
    shape: Vec<u64>,
    chunklen: u64,
    dtype: String,
    /// `None` for object (and unparseable) dtypes: chunk sizes then come from chunk headers.
    dtype_info: Option<DtypeInfo>,
    /// Bytes per row (itemsize x prod shape[1..]); 0 when unknown.
    atomsize: u64,
    nchunks: usize,
    mtime: SystemTime,
    /// Chunk locations of a `blsk` root (`None`: one `data/__N.blp` file per chunk).
    blsk: Option<Vec<blsk::Chunk>>,
}

impl Carray {
    /// Opens the carray directory `root`, its files read through `files`.
    pub(crate) fn open_in(
        files: &Files,
        root: &Path,
        stats: Arc<IoStats>,
    ) -> Result<Carray, ContainerError> {
        let sizes_path = root.join("meta/sizes");
        let storage_path = root.join("meta/storage");
        let sizes = read_json_in(files, &sizes_path, &stats)?;
        let storage = read_json_in(files, &storage_path, &stats)?;
        let attrs_path = root.join("__attrs__");
        let attrs_file = files.exists(&attrs_path);
        let attrs = if attrs_file {
            read_json_in(files, &attrs_path, &stats)?
        } else {
            Value::Object(Default::default())
        };
        let shape_v = field(&sizes, "shape", &sizes_path)?;
        let shape = shape_v
            .as_array()
            .filter(|a| !a.is_empty())
            .ok_or_else(|| ContainerError::Malformed {
                path: sizes_path.clone(),
                what: "shape".into(),
                offset: 0,
                why: format!("{shape_v} is not a non-empty list"),
            })?
            .iter()
            .enumerate()
            .map(|(i, v)| non_negative(v, &format!("shape[{i}]"), &sizes_path))
            .collect::<Result<Vec<u64>, _>>()?;
        let chunklen = non_negative(
            field(&storage, "chunklen", &storage_path)?,
            "chunklen",
            &storage_path,
        )?;
        if chunklen == 0 {
            return Err(ContainerError::Malformed {
                path: storage_path,
                what: "chunklen".into(),
                offset: 0,
                why: "chunklen is 0".into(),
            });
        }
        let dtype_v = field(&storage, "dtype", &storage_path)?;
        let dtype = dtype_v
            .as_str()
            .ok_or_else(|| ContainerError::Malformed {
                path: storage_path.clone(),
                what: "dtype".into(),
                offset: 0,
                why: format!("{dtype_v} is not a string"),
            })?
            .to_string();
        let info = dtype_info(&dtype);
        let object = matches!(dtype.as_str(), "object" | "O" | "|O");
        if info.is_none() && !object {
            return Err(ContainerError::Unsupported {
                path: storage_path,
                what: format!("dtype {dtype:?}"),
            });
        }
        let overflow = |what: &str| ContainerError::Malformed {
            path: sizes_path.clone(),
            what: what.into(),
            offset: 0,
            why: "size overflows".into(),
        };
        let atomsize = match info {
            Some(i) => shape[1..]
                .iter()
                .try_fold(i.itemsize as u64, |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| overflow("shape"))?,
            None => 0,
        };
        let len = shape[0];
        let nchunks = if object { len } else { len.div_ceil(chunklen) };
        // Bytes per chunk and in total must fit; nchunks must be addressable.
        let chunk_bytes = chunklen
            .checked_mul(atomsize)
            .filter(|_| len.checked_mul(atomsize).is_some())
            .ok_or_else(|| overflow("chunklen"))?;
        // Each chunk is one Blosc1 chunk, which holds at most MAX_BUFFERSIZE bytes; readers
        // size their buffers from chunklen x row size, so a larger product is refused here.
        if chunk_bytes > MAX_BUFFERSIZE as u64 {
            return Err(ContainerError::Malformed {
                path: storage_path,
                what: "chunklen".into(),
                offset: 0,
                why: format!(
                    "chunklen {chunklen} x {atomsize}-byte rows is {chunk_bytes} bytes, over the \
                     {MAX_BUFFERSIZE}-byte maximum of a Blosc chunk"
                ),
            });
        }
        let nchunks = usize::try_from(nchunks).map_err(|_| overflow("shape[0]"))?;
        let mtime = files.mtime(&sizes_path);
        Ok(Carray {
            root: root.to_path_buf(),
            files: files.clone(),
            stats,
            sizes,
            storage,
            attrs,
            attrs_file,
            shape,
            chunklen,
            dtype,
            dtype_info: info,
            atomsize,
            nchunks,
            mtime,
            blsk: None,
        })
    }

    /// Whether this is a read-only `blsk` root (seed 004, `docs/BLSK.md`).
    pub(crate) fn is_blsk(&self) -> bool {
        self.blsk.is_some()
    }

    /// `meta/sizes` as parsed.
    pub(crate) fn sizes(&self) -> &Value {
        &self.sizes
    }

    /// `meta/storage` as parsed.
    pub(crate) fn storage(&self) -> &Value {
        &self.storage
    }

    /// `__attrs__` as parsed (`{}` when the file is missing).
    pub(crate) fn attrs(&self) -> &Value {
        &self.attrs
    }

    /// Whether `__attrs__` exists (bcolz-zipline cannot open a carray without it, so a
    /// writer must create it before writing back).
    pub(crate) fn has_attrs_file(&self) -> bool {
        self.attrs_file
    }

    /// Shape.
    pub(crate) fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Rows per chunk: `storage.chunklen`, or 1 for object dtype (one pickled element per
    /// chunk file, whatever chunklen says).
    pub(crate) fn chunklen(&self) -> u64 {
        if self.dtype_info.is_some() {
            self.chunklen
        } else {
            1
        }
    }

    /// The dtype string as stored.
    pub(crate) fn dtype(&self) -> &str {
        &self.dtype
    }

    /// Element size (0 for object dtype).
    pub(crate) fn itemsize(&self) -> usize {
        self.dtype_info.map_or(0, |i| i.itemsize)
    }

    /// Number of chunks.
    pub(crate) fn nchunks(&self) -> usize {
        self.nchunks
    }

    /// Nominal chunk size (chunklen x atomsize; 0 for object dtype).
    pub(crate) fn chunksize(&self) -> u64 {
        self.chunklen * self.atomsize
    }

    /// Uncompressed bytes (len x atomsize); object dtype: `sizes.nbytes`.
    pub(crate) fn nbytes(&self) -> u64 {
        if self.dtype_info.is_some() {
            self.shape[0] * self.atomsize
        } else {
            self.sizes
                .get("nbytes")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        }
    }

    /// `sizes.cbytes` as bcolz reports it (bookkeeping only).
    pub(crate) fn cbytes(&self) -> u64 {
        self.sizes
            .get("cbytes")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// Whether `meta/sizes` (bcolz's commit point) or `meta/storage` / `__attrs__` changed
    /// since open: different content, or the file appeared or disappeared. Rewriting a full
    /// chunk file in place does not touch them (bcolz has no multi-file commit, see
    /// `docs/format/CONTAINERS.md` 6.4).
    pub(crate) fn changed_on_disk(&self) -> bool {
        if self.is_blsk() {
            return false;
        }
        let same = |file: &str, parsed: &Value, present: bool| {
            let path = self.root.join(file);
            match read_json_in(&self.files, &path, &self.stats) {
                Ok(v) => present && &v == parsed,
                Err(_) => !present && !self.files.exists(&path),
            }
        };
        !(same("meta/sizes", &self.sizes, true)
            && same("meta/storage", &self.storage, true)
            && same("__attrs__", &self.attrs, self.attrs_file))
    }

    /// The files another writer changes when it changes the carray: `meta/sizes` (its commit
    /// point), `meta/storage`, `__attrs__` (none for blsk, which is never written).
    pub(crate) fn watched_files(&self) -> Vec<PathBuf> {
        if self.is_blsk() {
            return Vec::new();
        }
        ["meta/sizes", "meta/storage", "__attrs__"]
            .iter()
            .map(|f| self.root.join(f))
            .collect()
    }

    /// Modification time of `meta/sizes` (bcolz's commit point).
    pub(crate) fn mtime(&self) -> SystemTime {
        self.mtime
    }
}

#[cfg(test)]
mod tests;
