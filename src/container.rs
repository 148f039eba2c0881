//! Sources on disk: contiguous and sparse Blosc2 frames, b2nd/caterva arrays, bcolz carray and
//! ctable directories. Opens a source (reading only its header, index and trailer), reports
//! geometry and metadata, and hands out each chunk's compressed bytes. Knows nothing of FUSE.
//!
//! Reference: `shared/spec/CONTAINER_NOTES.md`.

pub mod error;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use error::ContainerError;

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

/// Opens any supported source, detecting its kind from its content (not its extension).
pub fn open(path: &Path) -> Result<Container, ContainerError> {
    let _ = path;
    unimplemented!("owned by the container layer")
}

impl Array {
    /// Where the source lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What kind of source this is.
    pub fn kind(&self) -> SourceKind {
        unimplemented!()
    }

    /// Number of chunks.
    pub fn nchunks(&self) -> usize {
        unimplemented!()
    }

    /// Element size in bytes.
    pub fn typesize(&self) -> usize {
        unimplemented!()
    }

    /// Nominal uncompressed chunk size (frame header chunksize; bcolz chunklen x atomsize);
    /// 0 for variable-size frames.
    pub fn chunksize(&self) -> usize {
        unimplemented!()
    }

    /// Uncompressed bytes of the whole source (for b2nd including chunk padding).
    pub fn nbytes(&self) -> u64 {
        unimplemented!()
    }

    /// Compressed bytes as the source reports them.
    pub fn cbytes(&self) -> u64 {
        unimplemented!()
    }

    /// Uncompressed size of chunk `index`, without reading chunk data when the size is known
    /// from the header/index (variable-size frames read the 32-byte chunk header).
    pub fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError> {
        let _ = index;
        unimplemented!()
    }

    /// How chunk `index` is stored, without decompressing it.
    pub fn chunk_kind(&self, index: usize) -> Result<ChunkKind, ContainerError> {
        let _ = index;
        unimplemented!()
    }

    /// The compressed bytes of chunk `index`: a complete Blosc chunk (for special offsets a
    /// synthesised 32-byte special chunk; for bcolz the Blosc1 chunk after the `blpk` prefix).
    pub fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError> {
        let _ = index;
        unimplemented!()
    }

    /// Geometry (shape always; the rest where known).
    pub fn geometry(&self) -> &Geometry {
        unimplemented!()
    }

    /// Fixed metalayers, in header order (empty for bcolz).
    pub fn metalayers(&self) -> &[Metalayer] {
        unimplemented!()
    }

    /// The user attributes as a JSON object: frame vlmetalayers decoded from msgpack, or the
    /// bcolz `__attrs__` file.
    pub fn attrs(&self) -> &serde_json::Value {
        unimplemented!()
    }

    /// Modification time of the source.
    pub fn mtime(&self) -> SystemTime {
        unimplemented!()
    }
}
