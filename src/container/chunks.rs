//! An [`Array`]'s chunks: their sizes and kinds (from the header or index, without reading
//! chunk data), their compressed bytes (copied, into a reused buffer, straight from the
//! mapping, or a window of them) and their parsed headers, each checked against the chunk
//! count and answered by the frame or bcolz reader.

use std::borrow::Cow;

use super::{Array, ChunkKind, ContainerError, Inner};
use crate::codec::ChunkHeader;

/// The most damaged chunk headers [`Array::first_regular_header`] passes over.
pub const MAX_DAMAGED_HEADERS: usize = 16;

impl Array {
    fn check_index(&self, index: usize) -> Result<(), ContainerError> {
        if index < self.nchunks() {
            Ok(())
        } else {
            Err(ContainerError::NoSuchChunk {
                path: self.path.clone(),
                index,
                nchunks: self.nchunks(),
            })
        }
    }

    /// Uncompressed size of chunk `index`, without reading chunk data when the size is known
    /// from the header/index (variable-size frames read the 32-byte chunk header).
    ///
    /// For a bcolz leftover chunk this is the leftover size; the stored chunk may decode to
    /// more bytes, of which only the first `chunk_nbytes` are data.
    ///
    /// # Errors
    ///
    /// [`ContainerError::NoSuchChunk`], or a read/format failure of the chunk header.
    pub fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError> {
        self.check_index(index)?;
        match &self.inner {
            Inner::Frame(f) => f.chunk_nbytes(index),
            Inner::Bcolz(c) => c.chunk_nbytes(index),
        }
    }

    /// How chunk `index` is stored, without decompressing it (stored frame chunks: reads the
    /// 32-byte header, so a regular chunk holding a special value is reported as such).
    ///
    /// # Errors
    ///
    /// [`ContainerError::NoSuchChunk`], or a read failure of the chunk header.
    pub fn chunk_kind(&self, index: usize) -> Result<ChunkKind, ContainerError> {
        self.check_index(index)?;
        match &self.inner {
            Inner::Frame(f) => f.chunk_kind(index),
            Inner::Bcolz(_) => Ok(ChunkKind::Regular),
        }
    }

    /// The compressed bytes of chunk `index`: a complete Blosc chunk (for special offsets a
    /// synthesised 32-byte special chunk; for bcolz the Blosc1 chunk after the `blpk` prefix).
    ///
    /// # Errors
    ///
    /// [`ContainerError::NoSuchChunk`]; [`ContainerError::Malformed`] when the chunk's cbytes
    /// does not fit the chunk area or file; [`ContainerError::Io`].
    pub fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError> {
        self.check_index(index)?;
        match &self.inner {
            Inner::Frame(f) => f.chunk_bytes(index).map(Cow::Owned),
            Inner::Bcolz(c) => c.chunk_bytes(index).map(Cow::Owned),
        }
    }

    /// The same bytes as [`Array::chunk_bytes`], read into `buf[..n]` (returns `n`). `buf` is
    /// only grown, never cleared or shrunk, so a reused buffer saves the allocation and the
    /// zeroing of a fresh one for every chunk (bytes past `n` are stale).
    ///
    /// # Errors
    /// As [`Array::chunk_bytes`].
    pub fn chunk_bytes_into(
        &self,
        index: usize,
        buf: &mut Vec<u8>,
    ) -> Result<usize, ContainerError> {
        self.check_index(index)?;
        match &self.inner {
            Inner::Frame(f) => f.chunk_bytes_into(index, buf),
            Inner::Bcolz(c) => Ok(copy_into(buf, &c.chunk_bytes(index)?)),
        }
    }

    /// Calls `f` with the complete compressed chunk `index` straight from a read-only mapping
    /// of the source, without copying it (the same bytes as [`Array::chunk_bytes`]).
    /// `Ok(false)`, `f` not called, when the chunk is not mapped: only stored chunks of
    /// contiguous frames are, up to the length the file had at open. `partial`: `f` reads
    /// only a few of the chunk's pages (a range decode).
    ///
    /// # Errors
    ///
    /// As [`Array::chunk_bytes`]; [`ContainerError::Malformed`] naming the chunk when the
    /// file shrank while `f` ran.
    pub fn with_mapped_chunk(
        &self,
        index: usize,
        partial: bool,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<bool, ContainerError> {
        self.check_index(index)?;
        match &self.inner {
            Inner::Frame(fr) => fr.with_mapped_chunk(index, partial, f),
            Inner::Bcolz(_) => Ok(false),
        }
    }

    /// Reads `buf.len()` bytes of chunk `index`'s compressed bytes starting at `offset`
    /// (relative to the chunk start), without reading the rest of the chunk: the same bytes as
    /// `chunk_bytes(index)[offset..offset + buf.len()]`. Contiguous frames read from the frame
    /// file, sparse frames from the chunk's file, bcolz from the `.blp` file after its 16-byte
    /// prefix. `Ok(false)` (and `buf` untouched) when the chunk has no stored bytes (a special
    /// index entry, whose chunk [`Array::chunk_bytes`] synthesises).
    ///
    /// `known`: chunk `index`'s `cbytes`, when the caller read them from its header in this
    /// array earlier: a contiguous frame then reads the window alone, checked against them,
    /// without reading the header again (`None`: the header is read).
    ///
    /// # Errors
    ///
    /// [`ContainerError::NoSuchChunk`]; [`ContainerError::ChunkWindow`] when the window is not
    /// inside the chunk's cbytes; [`ContainerError::Malformed`] when the chunk's header is;
    /// [`ContainerError::Io`].
    pub fn chunk_read_at(
        &self,
        index: usize,
        offset: u64,
        buf: &mut [u8],
        known: Option<u64>,
    ) -> Result<bool, ContainerError> {
        self.check_index(index)?;
        match &self.inner {
            Inner::Frame(f) => f.chunk_read_at(index, offset, buf, known),
            Inner::Bcolz(c) => c.chunk_read_at(index, offset, buf),
        }
    }

    /// The header of the first chunk stored as data (not special) whose header can be read:
    /// what the array's chunks are compressed with, for `meta/storage` and for new chunks. A
    /// chunk whose own header or extent is damaged, or whose file is missing (a sparse
    /// frame's, a bcolz carray's: [`ContainerError::is_chunk_damage`]), is passed over
    /// (reading it gives its own error), so that one damaged chunk never makes the whole
    /// array unreadable; `None` when no regular chunk has a readable header among the first
    /// `MAX_DAMAGED_HEADERS` (16) damaged ones (each is a read, over the network for a
    /// remote source).
    ///
    /// # Errors
    /// A failure to read the source itself (not a chunk's damage): I/O errors other than a
    /// missing chunk file, remote failures.
    pub fn first_regular_header(&self) -> Result<Option<ChunkHeader>, ContainerError> {
        let mut passed = 0;
        for index in 0..self.nchunks() {
            let err = match self.chunk_kind(index) {
                Ok(ChunkKind::Regular) => match self.chunk_header(index) {
                    Ok(h) => return Ok(Some(h)),
                    Err(e) => e,
                },
                Ok(_) => continue,
                Err(e) => e,
            };
            if !err.is_chunk_damage() {
                return Err(err);
            }
            passed += 1;
            if passed == MAX_DAMAGED_HEADERS {
                break;
            }
        }
        Ok(None)
    }

    /// The parsed header of chunk `index` (frames: the 32-byte Blosc2 header, synthesised for
    /// special offsets; bcolz: the 16-byte Blosc1 header). Reads only the header.
    ///
    /// # Errors
    ///
    /// As [`Array::chunk_kind`], plus [`ContainerError::Chunk`] when the codec rejects the
    /// header.
    pub fn chunk_header(&self, index: usize) -> Result<ChunkHeader, ContainerError> {
        self.check_index(index)?;
        let bytes = match &self.inner {
            Inner::Frame(f) => f.chunk_header_bytes(index)?,
            Inner::Bcolz(c) => c.chunk_header_bytes(index)?,
        };
        crate::codec::chunk_info(&bytes).map_err(|source| ContainerError::Chunk {
            path: self.path.clone(),
            index,
            source,
        })
    }
}

/// Copies `bytes` to the front of `buf`, which is grown when too short and never shrunk (the
/// reused-buffer form of a chunk read, see [`Array::chunk_bytes_into`]); returns
/// `bytes.len()`.
pub fn copy_into(buf: &mut Vec<u8>, bytes: &[u8]) -> usize {
    crate::mem::grow_discarding(buf, bytes.len());
    buf[..bytes.len()].copy_from_slice(bytes);
    bytes.len()
}
