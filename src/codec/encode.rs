//! The chunk encoder (sections 2.9-2.12): Blosc2 chunks as C-Blosc2 3.3.x writes them and
//! Blosc1 chunks as C-Blosc 1.x writes them.

use super::{Codec, CodecError};

/// Which chunk format to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkFormat {
    /// Version 5, 32-byte extended header (frames).
    Blosc2,
    /// Version 2, 16-byte header (bcolz, C-Blosc 1.x).
    Blosc1,
}

/// Split mode (C-Blosc2 `BLOSC_*_SPLIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitMode {
    /// Always split blocks into typesize streams.
    Always,
    /// Never split.
    Never,
    /// Split when C-Blosc2's heuristics say so.
    Auto,
    /// Same as `Auto` in C-Blosc2 3.3.x; C-Blosc 1.x's default rule.
    ForwardCompat,
}

/// Compression parameters for one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CParams {
    /// Chunk format to write.
    pub format: ChunkFormat,
    /// Codec.
    pub codec: Codec,
    /// Compression level 0..9.
    pub clevel: u8,
    /// Element size in bytes (1.. ; > 255 is stored as 1 after blocksize selection).
    pub typesize: usize,
    /// Filter ids per slot (Blosc1: only SHUFFLE or BITSHUFFLE in slot 5).
    pub filters: [u8; 6],
    /// Filter parameters per slot.
    pub filters_meta: [u8; 6],
    /// Split mode.
    pub splitmode: SplitMode,
    /// Forced blocksize; 0 = automatic (C-Blosc2's choice).
    pub blocksize: usize,
    /// Whether an all-zero result may become a special zeros chunk (Blosc2 only).
    pub allow_special: bool,
}

/// Compresses `src` into one chunk.
pub fn compress(src: &[u8], params: &CParams) -> Result<Vec<u8>, CodecError> {
    let _ = (src, params);
    unimplemented!("owned by the encoder")
}
