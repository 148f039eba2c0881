//! The free functions: each decodes with its thread's own [`Decoder`], kept between calls.

use std::ops::Range;

use super::{Decoder, THREAD_SCRATCH_KEEP};
use crate::codec::CodecError;

/// Decodes a whole chunk into a new vector of `nbytes` bytes.
///
/// The free functions use a per-thread [`Decoder`] (so its zstd context and scratch buffers
/// are reused between calls) with the format's own limit on `nbytes`; use a [`Decoder`] of
/// your own for a tighter limit.
pub fn decompress(chunk: &[u8]) -> Result<Vec<u8>, CodecError> {
    with_thread_decoder(|d| d.decompress(chunk))
}

/// Decodes a whole chunk into `out`, which must be exactly `nbytes` long. Returns `nbytes`.
pub fn decompress_into(chunk: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
    with_thread_decoder(|d| d.decompress_into(chunk, out))
}

/// Decodes the bytes `[offset, offset + out.len())` of the chunk's uncompressed content into
/// `out`, decompressing only the blocks that overlap the range (plus block 0 for DELTA).
/// Returns the number of bytes written (short at the end of the chunk).
pub fn decompress_range(chunk: &[u8], offset: usize, out: &mut [u8]) -> Result<usize, CodecError> {
    with_thread_decoder(|d| d.decompress_range(chunk, offset, out))
}

/// [`decompress_range`] that also tells `seen` of each block of a regular chunk it decoded,
/// on the decoding thread, right after the block's streams were read (while they are still
/// in the CPU's cache): the block's number and the bytes of `chunk` its streams took, from
/// its bstart to the end of its last stream. Special, memcpyed and VL chunks tell nothing.
pub fn decompress_range_seen(
    chunk: &[u8],
    offset: usize,
    out: &mut [u8],
    seen: Seen<'_>,
) -> Result<usize, CodecError> {
    with_thread_decoder(|d| d.decompress_range_seen(chunk, offset, out, seen))
}

/// Appends the bytes `[offset, offset + len)` of the chunk's uncompressed content (clipped to
/// its end) to `out`, decompressing only the blocks that overlap the range; returns how many.
/// The bytes `out` grows by are allocated under the decoders' scratch budget together with
/// the decode's own scratch (`budget.rs`), and held under it until they are decoded: a
/// caller that reads a long value in block-sized steps (an embedded store value, whose
/// chunks may declare blocks of up to 512 MiB) does not allocate a step outside it. On an
/// error `out` keeps its length.
pub fn decompress_range_append(
    chunk: &[u8],
    offset: usize,
    len: usize,
    out: &mut Vec<u8>,
) -> Result<usize, CodecError> {
    with_thread_decoder(|d| d.decompress_range_append(chunk, offset, len, out))
}

/// What [`decompress_range_seen`] calls for each block it decoded: its number and the
/// bytes of the chunk its streams took.
pub type Seen<'f> = &'f mut dyn FnMut(usize, Range<usize>);

thread_local! {
    static THREAD_DECODER: std::cell::RefCell<Decoder> = std::cell::RefCell::new(Decoder::new());
}

pub(super) fn with_thread_decoder<R>(f: impl FnOnce(&mut Decoder) -> R) -> R {
    THREAD_DECODER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut dec) => {
            let r = f(&mut dec);
            dec.shrink_scratch(THREAD_SCRATCH_KEEP);
            r
        }
        // Not reachable (decoding calls nothing back), but never panic over it.
        Err(_) => f(&mut Decoder::new()),
    })
}
