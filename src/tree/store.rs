//! [`ChunkStore`]: what the tree needs from a source to serve `data/NNNNNNNN.bin` files: the
//! number of chunks, each chunk's uncompressed size, and its compressed bytes.
//!
//! [`crate::container::Array`] implements it; tests and benchmarks can supply synthetic stores
//! (for example a million-chunk source) without writing files. The store never decodes: the
//! tree calls the codec, so decoding policy (whole chunk, range, cache) lives in one place.

use std::borrow::Cow;
use std::fmt::Debug;
use std::path::Path;

use crate::container::{Array, ContainerError};

/// A sequence of Blosc chunks the tree exposes as one file each. `Sync`: worker threads share
/// it.
pub trait ChunkStore: Send + Sync + Debug {
    /// Where the source lives (for log lines and error messages).
    fn path(&self) -> &Path;

    /// Number of chunks.
    fn nchunks(&self) -> usize;

    /// Uncompressed size of chunk `index` in bytes (the size of its file).
    ///
    /// # Errors
    /// When the size cannot be determined (index out of range, unreadable header).
    fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError>;

    /// The complete compressed Blosc chunk `index`.
    ///
    /// # Errors
    /// When the bytes cannot be read.
    fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError>;

    /// Reads `buf.len()` bytes of chunk `index`'s compressed bytes starting at `offset`
    /// (relative to the chunk start), without reading the rest of the chunk. `Ok(false)` when
    /// this store cannot read part of a chunk (the caller then uses [`ChunkStore::chunk_bytes`]).
    ///
    /// # Errors
    /// When the read fails.
    fn chunk_read_at(
        &self,
        index: usize,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<bool, ContainerError> {
        let _ = (index, offset, buf);
        Ok(false)
    }
}

impl ChunkStore for Array {
    fn path(&self) -> &Path {
        Array::path(self)
    }

    fn nchunks(&self) -> usize {
        Array::nchunks(self)
    }

    fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError> {
        Array::chunk_nbytes(self, index)
    }

    fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError> {
        Array::chunk_bytes(self, index)
    }

    /// Contiguous frames only: the chunk's file position is `start + header_len + index
    /// entry`. A stopgap in the tree until the container layer offers partial chunk reads
    /// (C-Blosc2's "lazy chunks"); every other kind answers `Ok(false)`.
    fn chunk_read_at(
        &self,
        index: usize,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<bool, ContainerError> {
        use std::os::unix::fs::FileExt;
        if self.kind() != crate::container::SourceKind::Cframe {
            return Ok(false);
        }
        let (Some(info), Some(entry)) = (self.frame_info(), self.frame_index_entry(index)) else {
            return Ok(false);
        };
        let Ok(entry) = u64::try_from(entry) else {
            return Ok(false); // a special chunk: no bytes stored
        };
        let pos = info.start + info.header_len + entry + offset;
        let io = |source| ContainerError::Io {
            path: self.path().to_path_buf(),
            source,
        };
        OPEN.with(|cell| {
            let mut open = cell.borrow_mut();
            if open.as_ref().is_none_or(|(p, _)| p != self.path()) {
                let file = std::fs::File::open(self.path()).map_err(io)?;
                *open = Some((self.path().to_path_buf(), file));
            }
            let Some((_, file)) = open.as_ref() else {
                return Ok(false);
            };
            file.read_exact_at(buf, pos).map_err(io)?;
            Ok(true)
        })
    }
}

thread_local! {
    /// The source file partial reads last used on this thread, kept open between reads.
    static OPEN: std::cell::RefCell<Option<(std::path::PathBuf, std::fs::File)>> =
        const { std::cell::RefCell::new(None) };
}
