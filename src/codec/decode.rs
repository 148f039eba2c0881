//! The chunk decoder (section 2.13): special and memcpyed chunks, blocks and streams, run
//! streams, dictionaries, VL blocks, the backward filter pipeline, and range decoding.

use super::{ChunkHeader, CodecError};

/// Parses and checks a chunk header (every field, section 1.5 checks).
pub fn chunk_info(chunk: &[u8]) -> Result<ChunkHeader, CodecError> {
    let _ = chunk;
    unimplemented!("owned by the decoder")
}

/// Decodes a whole chunk into a new vector of `nbytes` bytes.
pub fn decompress(chunk: &[u8]) -> Result<Vec<u8>, CodecError> {
    Decoder::new().decompress(chunk)
}

/// Decodes a whole chunk into `out`, which must be exactly `nbytes` long. Returns `nbytes`.
pub fn decompress_into(chunk: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    Decoder::new().decompress_into(chunk, out)
}

/// Decodes the bytes `[offset, offset + out.len())` of the chunk's uncompressed content into
/// `out`, decompressing only the blocks that overlap the range (plus block 0 for DELTA).
/// Returns the number of bytes written (short at the end of the chunk).
pub fn decompress_range(chunk: &[u8], offset: usize, out: &mut [u8]) -> Result<usize, CodecError> {
    Decoder::new().decompress_range(chunk, offset, out)
}

/// A reusable decoder: keeps its scratch buffers between calls and caps the size any chunk may
/// declare.
#[derive(Debug)]
pub struct Decoder {
    limit: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder with the format's own limit on `nbytes`.
    pub fn new() -> Self {
        Self::with_limit(super::MAX_BUFFERSIZE)
    }

    /// A decoder that refuses chunks declaring more than `limit` uncompressed bytes.
    pub fn with_limit(limit: usize) -> Self {
        Decoder { limit }
    }

    /// See [`decompress`].
    pub fn decompress(&mut self, chunk: &[u8]) -> Result<Vec<u8>, CodecError> {
        let _ = (chunk, self.limit);
        unimplemented!("owned by the decoder")
    }

    /// See [`decompress_into`].
    pub fn decompress_into(&mut self, chunk: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
        let _ = (chunk, out);
        unimplemented!("owned by the decoder")
    }

    /// See [`decompress_range`].
    pub fn decompress_range(
        &mut self,
        chunk: &[u8],
        offset: usize,
        out: &mut [u8],
    ) -> Result<usize, CodecError> {
        let _ = (chunk, offset, out);
        unimplemented!("owned by the decoder")
    }
}
