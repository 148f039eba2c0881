//! Sources on disk: contiguous and sparse Blosc2 frames, b2nd/caterva arrays, bcolz carray and
//! ctable directories. Opens a source (reading only its header, index and trailer, or its JSON
//! metadata), reports geometry and metadata, and hands out each chunk's compressed bytes.
//!
//! It deliberately does not know FUSE, inodes or caches, and never decodes chunk data (it
//! calls the codec only for the frame index chunk and vlmetalayer contents, and to parse a
//! chunk header on request).
//!
//! Reference: `docs/format/CONTAINERS.md`, which corrects the upstream frame and bcolz
//! documents where real bytes differ (`docs/format/README.md` names them; see each
//! submodule's docs for the differences).
//!
//! Layout:
//! - [`source`]: positional reads with bounds checks and I/O counters (no mmap: see there),
//!   from a local file or a pluggable [`ByteSource`] (a remote object: [`open_bytes`]);
//! - `msgpack`: the exact-marker cursor for frame structures;
//! - `chunks`: an [`Array`]'s chunk access (sizes, kinds, compressed bytes, headers);
//! - [`frame`]: contiguous and sparse frames (header, metalayers, index, trailer);
//! - [`ndim`]: `b2nd`/`caterva` metalayers and the element-to-chunk mapping ([`Grid`]);
//! - [`bcolz`]: carray and ctable directories, and the read-only 2012 `blsk` layout;
//! - [`npy`]: the NPY file of an array or ctable (header bytes, and which stretches of which
//!   decoded chunks hold each byte of its C-order data);
//! - [`attrs`]: the documented reversible msgpack <-> JSON mapping of attributes;
//! - [`store`]: collections (`.b2z`/`.b2d` stores, directories of sources) as a tree of
//!   lazily opened leaves ([`open_any`]).
//!
//! Detection is by content, never by extension. A file starting with the frame magic is a
//! contiguous frame (with frame_type 1: the index of the sparse frame in its directory); a
//! file starting with `blsk` is refused (open its root). A directory with `__rootdirs__` is a
//! ctable, with `meta/nrows` a 2012 `blsk` root (`docs/BLSK.md`: an array, or a table for a
//! nested dtype), with `chunks.b2frame` a sparse frame, with `meta/sizes` + `meta/storage` a
//! carray; `__N__.bin` files or `blsk` magic without `meta/nrows` are refused.
//!
//! What each source reports, in one table:
//!
//! | | frames | bcolz carray |
//! | --- | --- | --- |
//! | `typesize` | header typesize | dtype itemsize |
//! | `chunksize` | header chunksize (0 variable) | chunklen x row size |
//! | `nbytes` / `cbytes` | header (cbytes includes dead space) | len x row size / `meta/sizes` cbytes |
//! | `geometry` | `b2nd`/`caterva` metalayer, else `[nbytes / typesize]` | `meta/sizes` shape, `[chunklen, ...]`, `storage.dtype` |
//! | `attrs` | vlmetalayers via [`attrs`] | `__attrs__` |
//! | chunk bytes | Blosc2 chunk (specials synthesised) | Blosc1 chunk after the `blpk` prefix |
//!
//! Invariants: opening reads only headers, indexes, trailers and metadata files; [`Array`]
//! is `Send + Sync` and all chunk access is `&self`; every structural failure is a
//! [`ContainerError`] naming the file, the offset or field, and the reason.

pub mod attrs;
pub mod bcolz;
mod chunks;
pub mod error;
pub mod files;
pub mod frame;
pub mod leftover;
mod mapped;
mod msgpack;
pub mod ndim;
pub mod npy;
pub mod source;
pub mod store;
/// Frames and chunks built by hand for unit tests: the integration tests' builder
/// (`tests/it/support/frames.rs`), one copy for both.
#[cfg(test)]
#[path = "../tests/it/support/frames.rs"]
#[allow(dead_code)]
pub(crate) mod test_frames;
pub mod write;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

pub use chunks::copy_into;
pub use error::ContainerError;
pub use files::{ByteTree, Relist, open_tree, open_tree_at};
pub use frame::{FrameInfo, Vlmetalayer};
pub use ndim::{Grid, NdMeta};
pub use source::{ByteSource, ByteView, FileState, IoStats};
pub use store::{Collection, Opened, open_any};

/// What kind of source an [`Array`] or [`Container`] was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A contiguous frame file (`.b2frame`, `.b2nd`).
    Cframe,
    /// A sparse frame directory (`chunks.b2frame` + `%08X.chunk` files).
    Sframe,
    /// A bcolz carray directory.
    BcolzCarray,
    /// A bcolz ctable directory (`__rootdirs__`).
    BcolzCtable,
}

/// How a chunk is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    /// Compressed (or memcpyed) data.
    Regular,
    /// All zeros (special offset or special chunk).
    Zeros,
    /// All NaN.
    Nan,
    /// Uninitialised (reads as zeros).
    Uninit,
    /// One value repeated (special chunk kind 3).
    Value,
}

/// N-dimensional geometry, where the source has it (b2nd/caterva metalayer, bcolz shape).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Geometry {
    /// Array shape in items.
    pub shape: Vec<u64>,
    /// Chunk shape (b2nd/caterva); for bcolz `[chunklen, shape[1:]...]`.
    pub chunkshape: Option<Vec<u64>>,
    /// Block shape (b2nd/caterva).
    pub blockshape: Option<Vec<u64>>,
    /// NumPy dtype string (`<f8`, `int32`, ...) where the source records one.
    pub dtype: Option<String>,
}

/// A fixed metalayer from the frame header.
#[derive(Debug, Clone, PartialEq)]
pub struct Metalayer {
    /// Its name (`b2nd`, `caterva`, user names).
    pub name: String,
    /// The stored msgpack bytes.
    pub raw: Vec<u8>,
    /// The content decoded to JSON (see the attrs mapping).
    pub json: serde_json::Value,
}

/// One array of chunks: a frame (contiguous or sparse) or a bcolz carray. `Sync`: worker threads
/// share it.
#[derive(Debug)]
pub struct Array {
    path: PathBuf,
    kind: SourceKind,
    inner: Inner,
    geometry: Geometry,
    nd: Option<Box<NdMeta>>,
    attrs: serde_json::Value,
    stats: Arc<IoStats>,
}

#[derive(Debug)]
enum Inner {
    Frame(Box<frame::Frame>),
    Bcolz(Box<bcolz::Carray>),
}

/// A bcolz ctable: its attributes and its columns in `__rootdirs__` order.
#[derive(Debug)]
pub struct Table {
    /// The ctable root directory.
    pub path: PathBuf,
    /// The root `__attrs__` as JSON.
    pub attrs: serde_json::Value,
    /// `(name, column)` in `__rootdirs__` order.
    pub columns: Vec<(String, Array)>,
}

/// An opened source.
#[derive(Debug)]
pub enum Container {
    /// A single array (frame or carray).
    Array(Array),
    /// A bcolz ctable.
    Table(Table),
}

fn not_a_container(path: &Path, why: impl Into<String>) -> ContainerError {
    ContainerError::NotAContainer {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// Opens any supported source, detecting its kind from its content (not its extension).
///
/// # Errors
///
/// [`ContainerError::NotAContainer`] for anything unrecognised, [`ContainerError::Unsupported`]
/// for the 2012 `blsk` layout and unsupported dtypes, [`ContainerError::Malformed`] /
/// [`ContainerError::Chunk`] / [`ContainerError::Vlmeta`] for damaged sources,
/// [`ContainerError::Io`] for I/O failures.
pub fn open(path: &Path) -> Result<Container, ContainerError> {
    let meta = std::fs::metadata(path).map_err(|source| ContainerError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let stats = Arc::new(IoStats::default());
    if meta.is_file() {
        return open_file(path, stats).map(Container::Array);
    }
    if !meta.is_dir() {
        return Err(not_a_container(path, "neither a file nor a directory"));
    }
    // A ctable first, then a blsk root, then the other directory kinds.
    if !path.join("__rootdirs__").is_file() && path.join("meta/nrows").is_file() {
        return bcolz::blsk::open_container(path, stats);
    }
    if let Some(c) = files::open_dir(&files::Files::Local, path, &stats)? {
        return Ok(c);
    }
    if let Some(what) = bcolz::blsk::blsk_evidence(path) {
        return Err(ContainerError::Unsupported {
            path: path.to_path_buf(),
            what,
        });
    }
    Err(not_a_container(
        path,
        "directory has no chunks.b2frame, __rootdirs__ or meta/sizes + meta/storage",
    ))
}

/// Opens the contiguous frame (`.b2frame`, `.b2nd`) held by a byte source that is not a
/// local file (a remote object), detecting it by content like [`open`]. The array's path is
/// the byte source's name. Reads the same structures as opening a local frame, through the
/// byte source, and nothing is mapped.
///
/// # Errors
/// As [`open`]; [`ContainerError::NotAContainer`] for anything but a contiguous frame.
pub fn open_bytes(bytes: Arc<dyn ByteSource>) -> Result<Container, ContainerError> {
    let stats = Arc::new(IoStats::default());
    let src = source::Source::from_bytes(bytes, Arc::clone(&stats));
    let path = src.path().to_path_buf();
    let n = usize::try_from(src.len().min(32)).unwrap_or(32);
    let head = src.read_at(0, n, "file magic")?;
    if !head.starts_with(&frame::MAGIC) {
        return Err(not_a_container(&path, "no Blosc2 frame magic at offset 0"));
    }
    if head.get(26) == Some(&1) {
        return Err(not_a_container(
            &path,
            "the index of a sparse frame: its chunk files are not read from a remote source",
        ));
    }
    let f = frame::Frame::open_source(src, 0, None, Arc::clone(&stats))?;
    Array::from_frame(path, SourceKind::Cframe, f, stats).map(Container::Array)
}

fn open_file(path: &Path, stats: Arc<IoStats>) -> Result<Array, ContainerError> {
    let src = source::Source::open(path, Arc::clone(&stats))?;
    let n = usize::try_from(src.len().min(32)).unwrap_or(32);
    let head = src.read_at(0, n, "file magic")?;
    if head.starts_with(&frame::MAGIC) && head.get(26) == Some(&1) {
        // The index file of a sparse frame: open its directory.
        drop(src);
        let dir = path.parent().unwrap_or(Path::new("."));
        let f = frame::Frame::open(path, 0, Some(dir), Arc::clone(&stats))?;
        return Array::from_frame(dir.to_path_buf(), SourceKind::Sframe, f, stats);
    }
    if head.starts_with(&frame::MAGIC) {
        drop(src);
        let f = frame::Frame::open(path, 0, None, Arc::clone(&stats))?;
        return Array::from_frame(path.to_path_buf(), SourceKind::Cframe, f, stats);
    }
    if head.starts_with(b"blsk") {
        return Err(ContainerError::Unsupported {
            path: path.to_path_buf(),
            what: "a 2012 blsk superchunk file (proposal layout never shipped by bcolz)".into(),
        });
    }
    if head.starts_with(b"blpk") {
        return Err(not_a_container(
            path,
            "a single bcolz chunk file; open its carray directory instead",
        ));
    }
    Err(not_a_container(path, "no Blosc2 frame magic at offset 0"))
}

fn geometry_of(
    path: &Path,
    f: &frame::Frame,
) -> Result<(Geometry, Option<NdMeta>), ContainerError> {
    let info = f.info();
    let find = |name: &str| f.metalayers().iter().find(|m| m.name == name);
    let parsed = if let Some(m) = find("b2nd") {
        Some(ndim::parse_b2nd(&m.raw, 0))
    } else {
        find("caterva").map(|m| ndim::parse_caterva(&m.raw, 0))
    };
    match parsed {
        Some(Ok(nd)) => Ok((
            Geometry {
                shape: nd.shape.clone(),
                chunkshape: Some(nd.chunkshape.clone()),
                blockshape: Some(nd.blockshape.clone()),
                dtype: nd.dtype.clone(),
            },
            Some(nd),
        )),
        Some(Err(fault)) => Err(ContainerError::Malformed {
            path: path.to_path_buf(),
            what: fault.what,
            offset: fault.offset,
            why: format!("{} (offset inside the metalayer content)", fault.why),
        }),
        None => Ok((
            Geometry {
                shape: vec![info.nbytes / u64::from(info.typesize)],
                chunkshape: None,
                blockshape: None,
                dtype: None,
            },
            None,
        )),
    }
}

impl Array {
    /// Opens the contiguous frame that starts at byte `offset` of `path` (0 for a `.b2frame`
    /// file; a member offset for frames embedded in a bigger file such as a `.b2z` archive).
    ///
    /// # Errors
    ///
    /// As [`open`].
    pub fn open_frame_at(path: &Path, offset: u64) -> Result<Array, ContainerError> {
        let stats = Arc::new(IoStats::default());
        let f = frame::Frame::open(path, offset, None, Arc::clone(&stats))?;
        Array::from_frame(path.to_path_buf(), SourceKind::Cframe, f, stats)
    }

    /// [`Array::open_frame_at`] of a frame held by a byte source that is not a local file (a
    /// remote object, or a member of a remote `.b2z`); the array's path is the source's name.
    ///
    /// # Errors
    ///
    /// As [`open`].
    pub fn open_frame_bytes(
        bytes: Arc<dyn ByteSource>,
        offset: u64,
    ) -> Result<Array, ContainerError> {
        let stats = Arc::new(IoStats::default());
        let src = source::Source::from_bytes(bytes, Arc::clone(&stats));
        let path = src.path().to_path_buf();
        let f = frame::Frame::open_source(src, offset, None, Arc::clone(&stats))?;
        Array::from_frame(path, SourceKind::Cframe, f, stats)
    }

    fn from_frame(
        path: PathBuf,
        kind: SourceKind,
        f: frame::Frame,
        stats: Arc<IoStats>,
    ) -> Result<Array, ContainerError> {
        let (geometry, nd) = geometry_of(f.source().path(), &f)?;
        let attrs = serde_json::Value::Object(
            f.vlmetalayers()
                .iter()
                .map(|v| (v.name.clone(), v.json.clone()))
                .collect(),
        );
        Ok(Array {
            path,
            kind,
            inner: Inner::Frame(Box::new(f)),
            geometry,
            nd: nd.map(Box::new),
            attrs,
            stats,
        })
    }

    fn from_carray(path: PathBuf, c: bcolz::Carray, stats: Arc<IoStats>) -> Array {
        let shape = c.shape().to_vec();
        let mut chunkshape = vec![c.chunklen()];
        chunkshape.extend_from_slice(&shape[1..]);
        let geometry = Geometry {
            shape,
            chunkshape: Some(chunkshape),
            blockshape: None,
            dtype: Some(c.dtype().to_string()),
        };
        Array {
            path,
            kind: SourceKind::BcolzCarray,
            attrs: c.attrs().clone(),
            inner: Inner::Bcolz(Box::new(c)),
            geometry,
            nd: None,
            stats,
        }
    }

    /// Where the source lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What kind of source this is (a ctable's columns report [`SourceKind::BcolzCarray`]).
    pub fn kind(&self) -> SourceKind {
        self.kind
    }

    /// Number of chunks.
    pub fn nchunks(&self) -> usize {
        match &self.inner {
            Inner::Frame(f) => f.nchunks(),
            Inner::Bcolz(c) => c.nchunks(),
        }
    }

    /// Element size in bytes (frames: the header typesize; bcolz: the dtype's itemsize, 0 for
    /// object dtype).
    pub fn typesize(&self) -> usize {
        match &self.inner {
            Inner::Frame(f) => f.info().typesize as usize,
            Inner::Bcolz(c) => c.itemsize(),
        }
    }

    /// Nominal uncompressed chunk size (frame header chunksize; bcolz chunklen x atomsize);
    /// 0 for variable-size frames (and frames whose chunksize is not initialised).
    pub fn chunksize(&self) -> usize {
        match &self.inner {
            Inner::Frame(f) => usize::try_from(f.info().chunksize).unwrap_or(0),
            Inner::Bcolz(c) => usize::try_from(c.chunksize()).unwrap_or(usize::MAX),
        }
    }

    /// Uncompressed bytes of the whole source (for b2nd including chunk padding).
    pub fn nbytes(&self) -> u64 {
        match &self.inner {
            Inner::Frame(f) => f.info().nbytes,
            Inner::Bcolz(c) => c.nbytes(),
        }
    }

    /// Compressed bytes as the source reports them (frames: the header cbytes, i.e. the chunk
    /// area including dead space; bcolz: `meta/sizes` cbytes).
    pub fn cbytes(&self) -> u64 {
        match &self.inner {
            Inner::Frame(f) => f.info().cbytes,
            Inner::Bcolz(c) => c.cbytes(),
        }
    }

    /// Geometry (shape always; the rest where known).
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The decoded `b2nd`/`caterva` metalayer, if the frame has one.
    pub fn nd_meta(&self) -> Option<&NdMeta> {
        self.nd.as_deref()
    }

    /// The b2nd chunk grid (element-to-chunk mapping), if the frame has an N-dim metalayer
    /// with a valid geometry.
    pub fn grid(&self) -> Option<Grid> {
        let nd = self.nd.as_ref()?;
        Grid::new(&nd.shape, &nd.chunkshape, &nd.blockshape).ok()
    }

    /// Fixed metalayers, in header order (empty for bcolz).
    pub fn metalayers(&self) -> &[Metalayer] {
        match &self.inner {
            Inner::Frame(f) => f.metalayers(),
            Inner::Bcolz(_) => &[],
        }
    }

    /// The trailer's vlmetalayers with their stored chunks and decompressed contents, in
    /// trailer order (empty for bcolz).
    pub fn vlmetalayers(&self) -> &[Vlmetalayer] {
        match &self.inner {
            Inner::Frame(f) => f.vlmetalayers(),
            Inner::Bcolz(_) => &[],
        }
    }

    /// The user attributes as a JSON object: frame vlmetalayers decoded from msgpack (see
    /// [`attrs`] for the mapping), or the bcolz `__attrs__` file.
    pub fn attrs(&self) -> &serde_json::Value {
        &self.attrs
    }

    /// Every frame header field (frames only).
    pub fn frame_info(&self) -> Option<&FrameInfo> {
        match &self.inner {
            Inner::Frame(f) => Some(f.info()),
            Inner::Bcolz(_) => None,
        }
    }

    /// The raw chunk-index entry of chunk `index` (frames only): a byte offset relative to
    /// the end of the header (contiguous), a chunk id (sparse), or a negative special code
    /// (`0x81..` zeros, `0x82..` NaN, `0x84..` uninitialised). No I/O.
    pub fn frame_index_entry(&self, index: usize) -> Option<i64> {
        match &self.inner {
            Inner::Frame(f) => f.index_entry(index),
            Inner::Bcolz(_) => None,
        }
    }

    /// The one entry every chunk of a frame shares, when its index is a special repeated-value
    /// (or zeros) chunk (frames only; `None` for an explicit index). No I/O.
    pub fn frame_repeated_entry(&self) -> Option<i64> {
        match &self.inner {
            Inner::Frame(f) => f.repeated_entry(),
            Inner::Bcolz(_) => None,
        }
    }

    /// `meta/sizes` as parsed, keys in file order (bcolz only).
    pub fn bcolz_sizes(&self) -> Option<&serde_json::Value> {
        match &self.inner {
            Inner::Bcolz(c) => Some(c.sizes()),
            Inner::Frame(_) => None,
        }
    }

    /// `meta/storage` as parsed, keys in file order (bcolz only).
    pub fn bcolz_storage(&self) -> Option<&serde_json::Value> {
        match &self.inner {
            Inner::Bcolz(c) => Some(c.storage()),
            Inner::Frame(_) => None,
        }
    }

    /// The chunks that have stored bytes, as sorted, disjoint runs of indices (bcolz only;
    /// frames: `None`, every index entry is a slot). A bcolz chunk whose file `data/__N.blp`
    /// is missing is in no run. One listing of `data/`: the cost is the files present, not
    /// the chunk count `meta/sizes` declares.
    ///
    /// # Errors
    /// [`ContainerError::Io`] when `data/` cannot be listed.
    pub fn bcolz_present_chunks(&self) -> Option<Result<Vec<Range<usize>>, ContainerError>> {
        match &self.inner {
            Inner::Bcolz(c) => Some(c.present_chunks()),
            Inner::Frame(_) => None,
        }
    }

    /// The file chunk `index` is stored in (bcolz only: `data/__N.blp`, or a blsk root's
    /// superchunk file).
    pub fn bcolz_chunk_path(&self, index: usize) -> Option<PathBuf> {
        match &self.inner {
            Inner::Bcolz(c) => Some(c.chunk_path(index)),
            Inner::Frame(_) => None,
        }
    }

    /// Whether the carray has an `__attrs__` file (bcolz only; bcolz-zipline cannot open a
    /// carray without one, so write-back must create it).
    pub fn bcolz_has_attrs_file(&self) -> Option<bool> {
        match &self.inner {
            Inner::Bcolz(c) => Some(c.has_attrs_file()),
            Inner::Frame(_) => None,
        }
    }

    /// Whether the source changed on disk since it was opened (frames: file length, mtime or
    /// the 87-byte header prefix; bcolz: `meta/sizes`, `meta/storage` or `__attrs__`). A
    /// changed source should be reopened: cached geometry and index no longer apply. Never
    /// reads chunk data.
    ///
    /// # Errors
    ///
    /// [`ContainerError::Io`] / [`ContainerError::Malformed`] when the header cannot be read
    /// back although the file is still there.
    pub fn changed_on_disk(&self) -> Result<bool, ContainerError> {
        match &self.inner {
            Inner::Frame(f) => f.changed_on_disk(),
            Inner::Bcolz(c) => Ok(c.changed_on_disk()),
        }
    }

    /// The byte source of a frame read through one (a remote object), which the mount's
    /// follower asks whether it changed and opens again ([`ByteSource::poll_changed`],
    /// [`ByteSource::reopen`]); `None` for local files and bcolz.
    pub fn byte_source(&self) -> Option<&Arc<dyn ByteSource>> {
        match &self.inner {
            Inner::Frame(f) => f.source().byte_source(),
            Inner::Bcolz(_) => None,
        }
    }

    /// The files whose `stat` changes when another writer changes the array (frame file or
    /// `chunks.b2frame`; bcolz `meta/sizes`, `meta/storage`, `__attrs__`); none for remote
    /// sources. See [`FileState::stat`].
    pub fn watched_files(&self) -> Vec<PathBuf> {
        match &self.inner {
            Inner::Frame(f) => f.watched_files(),
            Inner::Bcolz(c) => c.watched_files(),
        }
    }

    /// The state of a contiguous frame's open file now (one `fstat`: which file, length,
    /// mtime): what tells whether another writer changed its bytes since a read began.
    /// `None` for sparse frames, bcolz and remote sources, whose chunks live in files of
    /// their own.
    pub fn file_state(&self) -> Option<FileState> {
        match &self.inner {
            Inner::Frame(f) if f.is_contiguous() => f.source().file_state(),
            _ => None,
        }
    }

    /// Reads issued for this array so far (shared with the other columns of a ctable).
    pub fn io_stats(&self) -> &IoStats {
        &self.stats
    }

    /// Modification time of the source (frame file; sparse: `chunks.b2frame`; bcolz:
    /// `meta/sizes`), as seen at open.
    pub fn mtime(&self) -> SystemTime {
        match &self.inner {
            Inner::Frame(f) => f.source().mtime(),
            Inner::Bcolz(c) => c.mtime(),
        }
    }
}
