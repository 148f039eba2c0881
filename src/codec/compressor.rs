//! The codecs inside a stream (section 4): BloscLZ (ours), LZ4/LZ4HC, zlib and zstd adapters.

pub mod blosclz;
pub mod blosclz_encode;
