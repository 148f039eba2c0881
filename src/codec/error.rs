//! Errors of the chunk codec. Each variant carries the context the codec knows (block, stream,
//! offset, sizes); the container layer adds the chunk index and source path.

use thiserror::Error;

/// Why a chunk could not be decoded or encoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    /// The buffer ends before a structure that must be there.
    #[error("truncated chunk: {what} needs {needed} bytes, {available} available")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// A header field has a value the format does not allow.
    #[error("bad header: {what}")]
    BadHeader {
        /// Which field and why.
        what: String,
    },
    /// The chunk declares more bytes than the caller allows.
    #[error("chunk declares {nbytes} bytes, more than the limit of {limit}")]
    TooLarge {
        /// Declared uncompressed size.
        nbytes: usize,
        /// Caller-given limit.
        limit: usize,
    },
    /// The output buffer does not have the size the chunk decodes to.
    #[error("output buffer has {actual} bytes, chunk decodes to {expected}")]
    OutputSize {
        /// Size the chunk decodes to.
        expected: usize,
        /// Size of the buffer given.
        actual: usize,
    },
    /// A codec this build does not implement (plugins, user codecs, Snappy).
    #[error("unsupported codec id {id} ({name})")]
    UnsupportedCodec {
        /// The codec id (compcode, or format for Blosc1).
        id: u8,
        /// A human name for it.
        name: &'static str,
    },
    /// A filter this build does not implement (plugins, user filters, reserved ids).
    #[error("unsupported filter id {id} ({name}) in pipeline slot {slot}")]
    UnsupportedFilter {
        /// The filter id.
        id: u8,
        /// A human name for it.
        name: &'static str,
        /// Pipeline slot 0..5.
        slot: usize,
    },
    /// A block's data is corrupt.
    #[error("block {block}, stream {stream}: {reason}")]
    Corrupt {
        /// Block index.
        block: usize,
        /// Stream index inside the block.
        stream: usize,
        /// What is wrong.
        reason: String,
    },
    /// A chunk kind this decoder does not read (lazy chunks, instrumentation records).
    #[error("unsupported chunk: {what}")]
    UnsupportedChunk {
        /// What the chunk is.
        what: &'static str,
    },
    /// Invalid compression parameters not covered by a more specific variant (DELTA after
    /// another filter, a TRUNC_PREC precision the typesize cannot take).
    #[error("invalid compression parameters: {0}")]
    InvalidParams(String),
    /// A compression level above 9.
    #[error("invalid compression level {0}: must be 0..=9")]
    InvalidClevel(u8),
    /// A typesize of 0 or above 255 (the chunk header stores it in one byte). C-Blosc2 accepts
    /// larger types and stores typesize 1; this encoder refuses them.
    #[error("invalid typesize {0}: must be 1..=255")]
    InvalidTypesize(usize),
    /// An explicit blocksize that is 0, not a multiple of the typesize or larger than the
    /// largest blocksize a header may declare.
    #[error(
        "invalid explicit blocksize {blocksize} for typesize {typesize}: must be a multiple of \
         the typesize in 1..={max}"
    )]
    InvalidBlocksize {
        /// The requested blocksize.
        blocksize: usize,
        /// The typesize it must be a multiple of.
        typesize: usize,
        /// The largest blocksize accepted.
        max: usize,
    },
    /// A feature only Blosc2 chunks can carry, requested for a Blosc1 chunk.
    #[error(
        "{feature} needs a Blosc2 chunk (Blosc1 chunks take at most one SHUFFLE or BITSHUFFLE)"
    )]
    NeedsBlosc2 {
        /// The feature: a filter or filter combination, or filter parameters.
        feature: &'static str,
    },
    /// The data could not be compressed into the space available.
    #[error("compressed data does not fit in {capacity} bytes")]
    NoSpace {
        /// Output capacity.
        capacity: usize,
    },
}
