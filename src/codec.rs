//! The Blosc chunk codec: Blosc1 (version 2, 16-byte header) and Blosc2 (versions 3-6,
//! 32-byte extended header) chunks, decoded and encoded in pure Rust.
//!
//! This layer owns the chunk format only: headers, blocks and streams, run streams, special
//! chunks, the filter pipeline (shuffle, bitshuffle, delta, trunc_prec, bytedelta) and the
//! codecs (BloscLZ and LZ4/LZ4HC ours, zlib via flate2, zstd via zstd). It knows
//! nothing of frames, files or caches: bytes in, bytes out.
//!
//! Reference: `docs/format/CHUNK.md` (section numbers in comments refer to it).

pub mod compressor;
pub mod decode;
pub mod encode;
pub mod error;
pub mod filter;
pub mod header;
mod streams;
pub mod tune;

pub use decode::{
    Decoder, Seen, block_len, chunk_info, decompress, decompress_block_filtered, decompress_into,
    decompress_range, decompress_range_append, decompress_range_seen,
};
pub use encode::{
    Blocksize, CParams, ChunkFormat, SplitMode, compress, compress_repeated, compress_zeros,
};
pub use error::CodecError;
pub use header::{ChunkHeader, SpecialKind};

/// Maximum size of a Blosc2 extended header.
pub const MAX_OVERHEAD: usize = 32;
/// Size of a Blosc1 header.
pub const MIN_HEADER_LEN: usize = 16;
/// Largest `nbytes` any Blosc chunk can declare (`i32::MAX - 32`, as C-Blosc2's BLOSC2_MAX_BUFFERSIZE).
pub const MAX_BUFFERSIZE: usize = i32::MAX as usize - MAX_OVERHEAD;

/// A codec as the C API numbers it (`compcode`, header byte 0x16, frame header codec nibble).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// BloscLZ (compcode 0, format 0).
    BloscLz,
    /// LZ4 (compcode 1, format 1).
    Lz4,
    /// LZ4HC (compcode 2, format 1: same stream format as LZ4).
    Lz4Hc,
    /// Snappy (Blosc1 compcode 3, format 2). Recognised, never decoded: C-Blosc2 cannot either.
    Snappy,
    /// zlib (compcode 4, format 3).
    Zlib,
    /// Zstandard (compcode 5, format 4).
    Zstd,
}

impl Codec {
    /// The C API code (`BLOSC_BLOSCLZ` = 0 ... `BLOSC_ZSTD` = 5).
    pub fn compcode(self) -> u8 {
        match self {
            Codec::BloscLz => 0,
            Codec::Lz4 => 1,
            Codec::Lz4Hc => 2,
            Codec::Snappy => 3,
            Codec::Zlib => 4,
            Codec::Zstd => 5,
        }
    }

    /// Codec from its C API code; `None` for plugin/user codecs and unknown codes.
    pub fn from_compcode(code: u8) -> Option<Codec> {
        Some(match code {
            0 => Codec::BloscLz,
            1 => Codec::Lz4,
            2 => Codec::Lz4Hc,
            3 => Codec::Snappy,
            4 => Codec::Zlib,
            5 => Codec::Zstd,
            _ => return None,
        })
    }

    /// The stream format stored in chunk flags bits 5-7.
    pub fn format(self) -> u8 {
        match self {
            Codec::BloscLz => 0,
            Codec::Lz4 | Codec::Lz4Hc => 1,
            Codec::Snappy => 2,
            Codec::Zlib => 3,
            Codec::Zstd => 4,
        }
    }

    /// The name python-blosc2 and bcolz use (`blosclz`, `lz4`, `lz4hc`, `snappy`, `zlib`, `zstd`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::BloscLz => "blosclz",
            Codec::Lz4 => "lz4",
            Codec::Lz4Hc => "lz4hc",
            Codec::Snappy => "snappy",
            Codec::Zlib => "zlib",
            Codec::Zstd => "zstd",
        }
    }

    /// Codec from its name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Codec> {
        [
            Codec::BloscLz,
            Codec::Lz4,
            Codec::Lz4Hc,
            Codec::Snappy,
            Codec::Zlib,
            Codec::Zstd,
        ]
        .into_iter()
        .find(|c| c.name().eq_ignore_ascii_case(name))
    }
}

/// Filter ids as stored in the extended header's `filters` array (section 3.1).
pub mod filter_id {
    /// Empty slot.
    pub const NOFILTER: u8 = 0;
    /// Byte shuffle.
    pub const SHUFFLE: u8 = 1;
    /// Bit shuffle.
    pub const BITSHUFFLE: u8 = 2;
    /// XOR delta against block 0.
    pub const DELTA: u8 = 3;
    /// Precision truncation (lossy, nothing to undo).
    pub const TRUNC_PREC: u8 = 4;
    /// The first bytedelta, kept for reading old data (SIMD restart quirk).
    pub const BYTEDELTA_BUGGY: u8 = 34;
    /// Bytedelta.
    pub const BYTEDELTA: u8 = 35;
}
