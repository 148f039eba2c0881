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

use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;

use super::ContainerError;
use super::files::Files;
use super::source::{IoStats, Source};
use crate::codec::MAX_BUFFERSIZE;

pub(crate) mod blsk;

/// Length of the bloscpack header before the Blosc1 chunk in each `.blp` file.
pub const BLP_HEADER_LEN: usize = 16;

/// Largest JSON metadata file read (`meta/sizes`, `meta/storage`, `__attrs__`,
/// `__rootdirs__`); real ones are a few hundred bytes.
pub const MAX_JSON_LEN: u64 = 16 << 20;

/// Size facts derived from a NumPy dtype string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DtypeInfo {
    /// `np.dtype(s).itemsize`.
    pub itemsize: usize,
    /// The typesize bcolz passes to Blosc: the itemsize, except `S` -> 1, `U` -> 4, and sizes
    /// over 255 -> 1.
    pub blosc_typesize: usize,
}

/// Parses the dtype strings bcolz writes (`str(numpy_dtype)`: `int32`, `float64`, `bool`,
/// `|S3`, `<U3`, `datetime64[ns]`, `>i4`, ...). `None` for `object`, structured dtypes and
/// anything unknown.
pub fn dtype_info(s: &str) -> Option<DtypeInfo> {
    let s = s.trim();
    let named = |n: usize| {
        Some(DtypeInfo {
            itemsize: n,
            blosc_typesize: n,
        })
    };
    let base = s.split('[').next().unwrap_or(s);
    match base {
        "bool" | "int8" | "uint8" => return named(1),
        "int16" | "uint16" | "float16" => return named(2),
        "int32" | "uint32" | "float32" => return named(4),
        "int64" | "uint64" | "float64" | "complex64" | "datetime64" | "timedelta64" => {
            return named(8);
        }
        "complex128" | "float128" | "longdouble" => return named(16),
        "complex256" | "clongdouble" => return named(32),
        _ => {}
    }
    let t = base.trim_start_matches(['<', '>', '|', '=']);
    let mut chars = t.chars();
    let kind = chars.next()?;
    let digits = chars.as_str();
    let n: usize = if digits.is_empty() {
        match kind {
            '?' | 'b' | 'B' => 1,
            _ => return None,
        }
    } else {
        digits.parse().ok()?
    };
    let (itemsize, ts) = match kind {
        'b' | '?' | 'i' | 'u' | 'f' | 'c' | 'M' | 'm' => (n, n),
        'S' | 'a' => (n, 1),
        'U' => (n.checked_mul(4)?, 4),
        'V' => (n, n),
        _ => return None,
    };
    Some(DtypeInfo {
        itemsize,
        blosc_typesize: if ts > 255 { 1 } else { ts },
    })
}

/// Converts a serde_json error into a file offset (from its line and column).
fn json_offset(text: &[u8], e: &serde_json::Error) -> u64 {
    let mut line = 1usize;
    let mut off = 0usize;
    for (i, &b) in text.iter().enumerate() {
        if line == e.line() {
            off = i;
            break;
        }
        if b == b'\n' {
            line += 1;
            off = i + 1;
        }
    }
    (off + e.column().saturating_sub(1)) as u64
}

/// Reads and parses a JSON metadata file opened through `files` (whole file; bounded by its
/// real size).
fn read_json_in(files: &Files, path: &Path, stats: &Arc<IoStats>) -> Result<Value, ContainerError> {
    let src = files.open(path, Arc::clone(stats))?;
    if src.len() > MAX_JSON_LEN {
        return Err(ContainerError::Malformed {
            path: path.to_path_buf(),
            what: "json".into(),
            offset: 0,
            why: format!(
                "{} bytes, more than the {MAX_JSON_LEN} a metadata file may have",
                src.len()
            ),
        });
    }
    let len = usize::try_from(src.len()).unwrap_or(usize::MAX);
    let text = src.read_at(0, len, "json")?;
    serde_json::from_slice(&text).map_err(|e| ContainerError::Malformed {
        path: path.to_path_buf(),
        what: "json".into(),
        offset: json_offset(&text, &e),
        why: e.to_string(),
    })
}

fn field<'v>(obj: &'v Value, key: &str, path: &Path) -> Result<&'v Value, ContainerError> {
    obj.get(key).ok_or_else(|| ContainerError::Malformed {
        path: path.to_path_buf(),
        what: key.to_string(),
        offset: 0,
        why: format!("missing field {key:?}"),
    })
}

fn non_negative(v: &Value, what: &str, path: &Path) -> Result<u64, ContainerError> {
    v.as_u64().ok_or_else(|| ContainerError::Malformed {
        path: path.to_path_buf(),
        what: what.to_string(),
        offset: 0,
        why: format!("{v} is not a non-negative integer"),
    })
}

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

    /// The file holding chunk `i`, the offset of the chunk in it and the bytes the chunk may
    /// occupy from there, opened.
    fn locate(&self, i: usize) -> Result<(PathBuf, Source, u64, usize), ContainerError> {
        if i >= self.nchunks {
            return Err(self.no_such(i));
        }
        if let Some(c) = self.blsk.as_ref().and_then(|b| b.get(i)) {
            let src = Source::open(&c.file, Arc::clone(&self.stats))?;
            let room = usize::try_from(c.room).unwrap_or(usize::MAX);
            return Ok((c.file.to_path_buf(), src, c.offset, room));
        }
        let path = self.chunk_path(i);
        let src = self.files.open(&path, Arc::clone(&self.stats))?;
        let room = usize::try_from(src.len())
            .unwrap_or(usize::MAX)
            .saturating_sub(BLP_HEADER_LEN);
        Ok((path, src, BLP_HEADER_LEN as u64, room))
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

    /// The chunks that have bytes to read, as sorted, disjoint runs of indices: a blsk root,
    /// every chunk (its superchunk indexes, read at open, locate each); otherwise the chunks
    /// whose file `data/__N.blp` exists, from one listing of `data/` (a missing `data/` has
    /// none). The cost is the files present, never the chunk count `meta/sizes` declares
    /// (a damaged `shape` may declare 1e15 chunks). Files named for an index past
    /// [`Carray::nchunks`] (leftovers of a longer carray) and other names are not chunks.
    ///
    /// # Errors
    /// [`ContainerError::Io`] when `data/` exists but cannot be listed.
    pub(crate) fn present_chunks(&self) -> Result<Vec<Range<usize>>, ContainerError> {
        if self.blsk.is_some() {
            return Ok(std::iter::once(0..self.nchunks).collect());
        }
        let data = self.root.join("data");
        let names = match self.files.list_dir(&data) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(ContainerError::Io { path: data, source }),
        };
        let mut present: Vec<usize> = names
            .iter()
            .filter_map(|n| chunk_file_index(n))
            .filter(|&i| i < self.nchunks)
            .collect();
        present.sort_unstable();
        present.dedup();
        let mut runs: Vec<Range<usize>> = Vec::new();
        for i in present {
            match runs.last_mut() {
                Some(r) if r.end == i => r.end += 1,
                _ => runs.push(i..i + 1),
            }
        }
        Ok(runs)
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

    /// Path of chunk file `i` (blsk: the superchunk file holding it).
    pub(crate) fn chunk_path(&self, i: usize) -> PathBuf {
        if let Some(c) = self.blsk.as_ref().and_then(|b| b.get(i)) {
            return c.file.to_path_buf();
        }
        self.root.join(format!("data/__{i}.blp"))
    }

    fn no_such(&self, index: usize) -> ContainerError {
        ContainerError::NoSuchChunk {
            path: self.root.clone(),
            index,
            nchunks: self.nchunks,
        }
    }

    /// Uncompressed size of chunk `i` (from the metadata; object dtype: the chunk header).
    pub(crate) fn chunk_nbytes(&self, i: usize) -> Result<usize, ContainerError> {
        if i >= self.nchunks {
            return Err(self.no_such(i));
        }
        if self.dtype_info.is_none() {
            let h = self.chunk_header_bytes(i)?;
            let n = i32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            return usize::try_from(n).map_err(|_| ContainerError::Malformed {
                path: self.chunk_path(i),
                what: "chunk nbytes".into(),
                offset: BLP_HEADER_LEN as u64 + 4,
                why: format!("negative nbytes {n}"),
            });
        }
        let rows = (self.shape[0] - i as u64 * self.chunklen).min(self.chunklen);
        usize::try_from(rows * self.atomsize).map_err(|_| self.no_such(i))
    }

    /// The 16-byte Blosc1 header of chunk `i`.
    pub(crate) fn chunk_header_bytes(&self, i: usize) -> Result<Vec<u8>, ContainerError> {
        let (_, src, base, _) = self.locate(i)?;
        src.read_at(base, 16, "blosc1 chunk header")
    }

    /// The Blosc1 chunk of chunk file `i` (bytes after its cbytes are ignored).
    pub(crate) fn chunk_bytes(&self, i: usize) -> Result<Vec<u8>, ContainerError> {
        let (path, src, base, room) = self.locate(i)?;
        // The Blosc1 header first; then exactly the chunk (bytes after its cbytes are
        // ignored, as bcolz does).
        let mut buf = src.read_at(base, 16.min(room), "blosc1 chunk header")?;
        let cb = blosc1_check(&path, &buf, room, base)?;
        src.read_into(base + 16, cb - 16, "blosc1 chunk", &mut buf)?;
        Ok(buf)
    }

    /// Reads `buf.len()` bytes of the Blosc1 chunk of file `i` at `offset` (relative to the
    /// chunk, i.e. after the `blpk` prefix): the same bytes as that window of
    /// [`Carray::chunk_bytes`], without reading the rest. A window outside the chunk's cbytes
    /// is an error.
    pub(crate) fn chunk_read_at(
        &self,
        i: usize,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<bool, ContainerError> {
        if i >= self.nchunks {
            return Err(self.no_such(i));
        }
        let (path, src, base, room) = self.locate(i)?;
        let mut head = [0u8; 16];
        let n = head.len().min(room);
        src.read_exact_at(base, &mut head[..n], &"blosc1 chunk header")?;
        let cb = blosc1_check(&path, &head[..n], room, base)? as u64;
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > cb)
        {
            return Err(ContainerError::ChunkWindow {
                path,
                index: i,
                offset,
                len: buf.len(),
                cbytes: cb,
            });
        }
        src.read_exact_at(base + offset, buf, &"blosc1 chunk")?;
        Ok(true)
    }
}

/// The chunk index a file of `data/` is named for (`__N.blp`, N written as [`Carray`] names
/// it: decimal without leading zeros), or `None`. The one parser of these names (remote
/// prefixes order their chunk objects by it too).
pub(crate) fn chunk_file_index(name: &str) -> Option<usize> {
    let n = name.strip_prefix("__")?.strip_suffix(".blp")?;
    let canonical = n == "0" || (!n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()));
    if canonical { n.parse().ok() } else { None }
}

/// The cbytes of the Blosc1 chunk whose 16-byte header is `head`, stored at offset `base` of
/// `path` with `room` bytes available, checked to fit; a chunk that is not Blosc1 is an error.
fn blosc1_check(path: &Path, head: &[u8], room: usize, base: u64) -> Result<usize, ContainerError> {
    let cb = head
        .get(12..16)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let cb = cb
        .and_then(|c| usize::try_from(c).ok())
        .filter(|&c| (16..=room).contains(&c))
        .ok_or_else(|| ContainerError::Malformed {
            path: path.to_path_buf(),
            what: "blosc1 chunk".into(),
            offset: base + 12,
            why: format!("chunk cbytes {cb:?} outside [16, {room}]"),
        })?;
    // C-Blosc 1.x reads only version-2 chunks (1 = pre-1.0); a Blosc2 chunk here is a
    // damaged carray (`docs/format/CONTAINERS.md` 5.1).
    let version = head.first().copied().unwrap_or(0);
    let flags = head.get(2).copied().unwrap_or(0);
    if !(1..=2).contains(&version) || flags & 0x05 == 0x05 {
        return Err(ContainerError::Malformed {
            path: path.to_path_buf(),
            what: "blosc1 chunk".into(),
            offset: base,
            why: format!(
                "chunk version {version} flags 0x{flags:02x}: not a Blosc1 chunk (bcolz cannot read Blosc2 chunks)"
            ),
        });
    }
    Ok(cb)
}

/// Validates a `__rootdirs__` column name: one plain path component.
fn column_name_ok(name: &str) -> bool {
    let mut comps = Path::new(name).components();
    matches!(comps.next(), Some(Component::Normal(_)))
        && comps.next().is_none()
        && !name.contains(['/', '\\', '\0'])
}

/// Opens a ctable root (its files read through `files`): `(attrs, [(name, column)])` in
/// `__rootdirs__` order.
pub(crate) fn open_ctable_in(
    files: &Files,
    root: &Path,
    stats: &Arc<IoStats>,
) -> Result<(Value, Vec<(String, Carray)>), ContainerError> {
    let rd_path = root.join("__rootdirs__");
    let rootdirs = read_json_in(files, &rd_path, stats)?;
    let names_v = field(&rootdirs, "names", &rd_path)?;
    let names = names_v
        .as_array()
        .ok_or_else(|| ContainerError::Malformed {
            path: rd_path.clone(),
            what: "names".into(),
            offset: 0,
            why: format!("{names_v} is not a list"),
        })?;
    let mut columns = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let name =
            n.as_str()
                .filter(|s| column_name_ok(s))
                .ok_or_else(|| ContainerError::Malformed {
                    path: rd_path.clone(),
                    what: format!("names[{i}]"),
                    offset: 0,
                    why: format!("{n} is not a plain column name"),
                })?;
        if columns.iter().any(|(c, _): &(String, Carray)| c == name) {
            return Err(ContainerError::Malformed {
                path: rd_path.clone(),
                what: format!("names[{i}]"),
                offset: 0,
                why: format!("column {name:?} listed twice"),
            });
        }
        let col = Carray::open_in(files, &root.join(name), Arc::clone(stats))?;
        columns.push((name.to_string(), col));
    }
    let attrs_path = root.join("__attrs__");
    let attrs = if files.exists(&attrs_path) {
        read_json_in(files, &attrs_path, stats)?
    } else {
        Value::Object(Default::default())
    };
    Ok((attrs, columns))
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

#[cfg(test)]
mod tests;
