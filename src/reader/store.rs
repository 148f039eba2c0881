//! [`ChunkStore`]: what the reader needs from a source to serve its chunks: the number of
//! chunks, each chunk's uncompressed size, and its compressed bytes.
//!
//! [`crate::container::Array`] and [`super::LiveArray`] implement it; tests and benchmarks can
//! supply synthetic stores (for example a million-chunk source) without writing files. The
//! store never decodes: the reader calls the codec, so decoding policy (whole chunk, range,
//! cache) lives in one place.

use std::borrow::Cow;
use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;

use crate::container::{Array, ChunkKind, ContainerError};

/// A sequence of Blosc chunks (one array). `Sync`: worker threads share
/// it.
pub trait ChunkStore: Send + Sync + Debug {
    /// Where the source lives (for log lines and error messages).
    fn path(&self) -> &Path;

    /// Number of chunks.
    fn nchunks(&self) -> usize;

    /// The version of chunk `index`'s bytes: two reads of one chunk with equal stamps see
    /// equal bytes (the reader's cache key, [`super::ChunkKey`]). 0 for stores that never
    /// change.
    fn stamp(&self, index: usize) -> u64 {
        let _ = index;
        0
    }

    /// This store as it is now, fixed (a live array's current [`super::Snapshot`]), for a
    /// descriptor to read one version through; `None` when the store never changes.
    fn pin(&self) -> Option<Arc<dyn ChunkStore>> {
        None
    }

    /// Uncompressed size of chunk `index` in bytes (the size of its file).
    ///
    /// # Errors
    /// When the size cannot be determined (index out of range, unreadable header).
    fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError>;

    /// How chunk `index` is stored, without decoding it (a special chunk of zeros or of
    /// uninitialised bytes has nothing to decode); [`ChunkKind::Regular`] by default, for a
    /// store that cannot tell without reading the chunk.
    ///
    /// # Errors
    /// When its header cannot be read.
    fn chunk_kind(&self, index: usize) -> Result<ChunkKind, ContainerError> {
        let _ = index;
        Ok(ChunkKind::Regular)
    }

    /// The complete compressed Blosc chunk `index`.
    ///
    /// # Errors
    /// When the bytes cannot be read.
    fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError>;

    /// The complete compressed chunk `index` read into `buf[..n]`, returning `n`. `buf` may
    /// be longer than `n` and is only ever grown: callers reuse one buffer for every chunk.
    ///
    /// # Errors
    /// When the bytes cannot be read.
    fn chunk_bytes_into(&self, index: usize, buf: &mut Vec<u8>) -> Result<usize, ContainerError> {
        Ok(crate::container::copy_into(buf, &self.chunk_bytes(index)?))
    }

    /// Calls `f` with the complete compressed chunk `index` without copying it, when the store
    /// has it in memory (a mapped frame); `Ok(false)` and `f` not called otherwise (use
    /// [`ChunkStore::chunk_bytes_into`]). `partial`: `f` reads only a few of the chunk's
    /// pages (a range decode). `f` returns the chunk's fingerprint (`prints.rs`) when it took
    /// it while decoding (asked by [`ChunkStore::wants_print`]): a store that keeps prints
    /// records that one instead of hashing the bytes again.
    ///
    /// # Errors
    /// When the bytes are not a well-formed chunk entry, or the source shrank while `f` ran.
    fn with_mapped_chunk(
        &self,
        index: usize,
        partial: bool,
        f: &mut dyn FnMut(&[u8]) -> Option<u128>,
    ) -> Result<bool, ContainerError> {
        let _ = (index, partial, f);
        Ok(false)
    }

    /// Whether the store keeps fingerprints and has none for chunk `index` in its version
    /// yet: a whole-chunk decode through [`ChunkStore::with_mapped_chunk`] then takes the
    /// print block by block as it decodes (`prints.rs`).
    fn wants_print(&self, index: usize) -> bool {
        let _ = index;
        false
    }

    /// Reads `buf.len()` bytes of chunk `index`'s compressed bytes starting at `offset`
    /// (relative to the chunk start), without reading the rest of the chunk. `Ok(false)` when
    /// this store cannot read part of a chunk (the caller then uses [`ChunkStore::chunk_bytes`]).
    /// `known`: the chunk's `cbytes`, when the caller read them from its header in this
    /// version of the store earlier (the store may then skip reading the header again to
    /// check the window).
    ///
    /// # Errors
    /// When the read fails.
    fn chunk_read_at(
        &self,
        index: usize,
        offset: u64,
        buf: &mut [u8],
        known: Option<u64>,
    ) -> Result<bool, ContainerError> {
        let _ = (index, offset, buf, known);
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

    fn chunk_kind(&self, index: usize) -> Result<ChunkKind, ContainerError> {
        Array::chunk_kind(self, index)
    }

    fn chunk_bytes_into(&self, index: usize, buf: &mut Vec<u8>) -> Result<usize, ContainerError> {
        Array::chunk_bytes_into(self, index, buf)
    }

    fn with_mapped_chunk(
        &self,
        index: usize,
        partial: bool,
        f: &mut dyn FnMut(&[u8]) -> Option<u128>,
    ) -> Result<bool, ContainerError> {
        Array::with_mapped_chunk(self, index, partial, &mut |c| {
            f(c);
        })
    }

    fn chunk_read_at(
        &self,
        index: usize,
        offset: u64,
        buf: &mut [u8],
        known: Option<u64>,
    ) -> Result<bool, ContainerError> {
        Array::chunk_read_at(self, index, offset, buf, known)
    }
}
