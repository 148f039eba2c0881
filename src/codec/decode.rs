//! The chunk decoder (section 2.13): special and memcpyed chunks, blocks and streams, run
//! streams, dictionaries, VL blocks, the backward filter pipeline, and range decoding.
//!
//! Every size comes from the header and is checked against the buffer before use; nothing is
//! allocated beyond the declared `nbytes`, which is capped by the [`Decoder`]'s limit. Blocks
//! are found through their own bstart only (C writes them in completion order when threaded);
//! VL chunks are the one place where a neighbouring bstart gives a size.
//!
//! The parts: this file holds the [`Decoder`] and its range decoding over the blocks;
//! `blocks.rs` a chunk's body (its header checks and layout) and one block decoded from its
//! streams; `filtered.rs` a block decoded up to its filters; `budget.rs` the process-wide
//! budget of large scratch; `thread.rs` the per-thread decoder behind the free functions.

use super::compressor::StreamDecoders;
use super::header::ChunkHeader;
use super::{Codec, CodecError};

mod blocks;
mod budget;
mod filtered;
mod thread;
use blocks::{
    Blocks, Body, corrupt, decode_block, decode_vl_block, fill_pattern, read_streams, vl_block,
};
pub use budget::LARGE_SCRATCH;
#[cfg(test)]
pub(crate) use budget::take_largest_grant_here;
pub use filtered::{block_len, decompress_block_filtered};
pub use thread::{
    Seen, decompress, decompress_into, decompress_range, decompress_range_append,
    decompress_range_seen,
};

/// Parses and checks a chunk header (every field, section 1.5 checks). Needs only the header
/// bytes (16, or 32 for an extended header), not the whole chunk.
pub fn chunk_info(chunk: &[u8]) -> Result<ChunkHeader, CodecError> {
    ChunkHeader::parse(chunk)
}

/// Scratch the per-thread decoder keeps between calls; larger buffers (a hostile or huge
/// blocksize) are freed after the call.
const THREAD_SCRATCH_KEEP: usize = 16 << 20;

/// A reusable decoder: keeps its scratch buffers between calls and caps the size any chunk may
/// declare.
#[derive(Debug)]
pub struct Decoder {
    limit: usize,
    scratch: Scratch,
    streams: StreamDecoders,
}

/// Buffers reused between calls; each grows to the largest block seen and never shrinks.
#[derive(Default)]
struct Scratch {
    /// One filtered block: the streams land here when the pipeline has work to do.
    filtered: Vec<u8>,
    /// One decoded block, for range reads that cover a block only partly.
    block: Vec<u8>,
    /// Decoded block 0, the DELTA reference for range reads that do not hold it.
    block0: Vec<u8>,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Sizes only: the contents are megabytes of stale data.
        f.debug_struct("Scratch")
            .field("filtered", &self.filtered.len())
            .field("block", &self.block.len())
            .field("block0", &self.block0.len())
            .finish()
    }
}

/// Grows `buf` to at least `len` bytes (zero-filling only the growth) and returns its prefix.
fn scratch_slice(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buf.len() < len {
        buf.resize(len, 0);
    }
    &mut buf[..len]
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
        Decoder {
            limit,
            scratch: Scratch::default(),
            streams: StreamDecoders::new(),
        }
    }

    /// The largest `nbytes` this decoder accepts.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Frees every scratch buffer larger than `keep` bytes (they grow to the largest block
    /// decoded and are otherwise kept for the next call).
    pub fn shrink_scratch(&mut self, keep: usize) {
        for buf in [
            &mut self.scratch.filtered,
            &mut self.scratch.block,
            &mut self.scratch.block0,
        ] {
            if buf.capacity() > keep {
                *buf = Vec::new();
            }
        }
    }

    /// See [`decompress`].
    pub fn decompress(&mut self, chunk: &[u8]) -> Result<Vec<u8>, CodecError> {
        let (hdr, body) = self.prepare(chunk)?;
        let mut out = vec![0u8; hdr.nbytes];
        self.decode_range(&hdr, body, 0, &mut out, &mut |_, _| {})?;
        Ok(out)
    }

    /// See [`decompress_into`].
    pub fn decompress_into(&mut self, chunk: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
        let (hdr, body) = self.prepare(chunk)?;
        if out.len() != hdr.nbytes {
            return Err(CodecError::OutputSize {
                expected: hdr.nbytes,
                actual: out.len(),
            });
        }
        self.decode_range(&hdr, body, 0, out, &mut |_, _| {})
    }

    /// See [`decompress_range`].
    pub fn decompress_range(
        &mut self,
        chunk: &[u8],
        offset: usize,
        out: &mut [u8],
    ) -> Result<usize, CodecError> {
        self.decompress_range_seen(chunk, offset, out, &mut |_, _| {})
    }

    /// See [`decompress_range_seen`].
    pub fn decompress_range_seen(
        &mut self,
        chunk: &[u8],
        offset: usize,
        out: &mut [u8],
        seen: Seen<'_>,
    ) -> Result<usize, CodecError> {
        let (hdr, body) = self.prepare(chunk)?;
        self.decode_range(&hdr, body, offset, out, seen)
    }

    /// See [`decompress_range_append`].
    pub fn decompress_range_append(
        &mut self,
        chunk: &[u8],
        offset: usize,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        let (hdr, body) = self.prepare(chunk)?;
        let n = len.min(hdr.nbytes.saturating_sub(offset));
        let need = body.scratch_need(offset, n).saturating_add(n);
        let filled = out.len();
        budget::with_large_scratch(self, &budget::GLOBAL, need, |d| {
            out.resize(filled + n, 0);
            let res = d.decode_granted(&hdr, body, offset, &mut out[filled..], &mut |_, _| {});
            out.truncate(filled + *res.as_ref().unwrap_or(&0));
            res
        })
    }

    /// Decodes `[offset, offset + out.len())` (clipped to nbytes) of a prepared chunk, its
    /// large scratch held under the process-wide budget (`budget.rs`: why it is sized by the
    /// block, not by the range) and freed before the grant goes, on a return or a panic.
    fn decode_range(
        &mut self,
        hdr: &ChunkHeader,
        body: Body<'_>,
        offset: usize,
        out: &mut [u8],
        seen: Seen<'_>,
    ) -> Result<usize, CodecError> {
        let n = out.len().min(hdr.nbytes.saturating_sub(offset));
        let need = body.scratch_need(offset, n);
        budget::with_large_scratch(self, &budget::GLOBAL, need, |d| {
            d.decode_granted(hdr, body, offset, out, seen)
        })
    }

    /// [`Decoder::decode_range`] for a caller that holds the grant its scratch needs.
    fn decode_granted(
        &mut self,
        hdr: &ChunkHeader,
        body: Body<'_>,
        offset: usize,
        out: &mut [u8],
        seen: Seen<'_>,
    ) -> Result<usize, CodecError> {
        let nbytes = hdr.nbytes;
        if offset >= nbytes {
            return Ok(0);
        }
        let n = out.len().min(nbytes - offset);
        let out = &mut out[..n];
        match body {
            Body::Empty => {}
            Body::Pattern(p) => fill_pattern(out, p, offset % p.len().max(1)),
            Body::Raw(raw) => {
                let src = raw.get(offset..offset + n).ok_or(CodecError::Truncated {
                    what: "memcpyed data",
                    needed: hdr.header_len() + offset + n,
                    available: hdr.header_len() + raw.len(),
                })?;
                out.copy_from_slice(src);
            }
            Body::Blocks(mut b) => {
                b.small = n <= 2 * b.bs;
                if b.codec == Codec::Zstd {
                    self.streams
                        .prepare_zstd(b.dict)
                        .map_err(|reason| corrupt(0, 0, reason))?;
                }
                if b.hdr.is_vl() {
                    self.vl_range(&b, offset, out)?;
                } else {
                    self.blocks_range(&b, offset, out, seen)?;
                }
            }
        }
        Ok(n)
    }

    /// Range decode of a regular chunk: only the blocks overlapping the range, plus block 0
    /// when DELTA needs it as the reference.
    fn blocks_range(
        &mut self,
        b: &Blocks<'_>,
        offset: usize,
        out: &mut [u8],
        seen: Seen<'_>,
    ) -> Result<(), CodecError> {
        let Decoder {
            scratch, streams, ..
        } = self;
        let bs = b.bs;
        let nbytes = b.hdr.nbytes;
        let end = offset + out.len();
        let first = offset / bs;
        let last = (end - 1) / bs;
        let bs0 = bs.min(nbytes);
        let delta = b.pipeline.has_delta();
        // Block 0 is the DELTA reference: decode it where it lands if the range holds all of
        // it, else into its own buffer.
        let b0_in_out = offset == 0 && end >= bs0;
        if delta && last > 0 && !b0_in_out {
            let dst = scratch_slice(&mut scratch.block0, bs0);
            decode_block(streams, &mut scratch.filtered, b, 0, dst, None, seen)?;
        }
        for j in first..=last {
            let bstart = j * bs;
            let bend = (bstart + bs).min(nbytes);
            let lo = bstart.max(offset);
            let hi = bend.min(end);
            let whole = lo == bstart && hi == bend;
            if j > 0 && delta && b0_in_out {
                // Blocks after block 0 lie past it in `out`.
                let (head, tail) = out.split_at_mut(bs0);
                let block0: &[u8] = head;
                let (dst_lo, dst_hi) = (lo - bs0, hi - bs0);
                if whole {
                    let dst = &mut tail[dst_lo..dst_hi];
                    decode_block(
                        streams,
                        &mut scratch.filtered,
                        b,
                        j,
                        dst,
                        Some(block0),
                        seen,
                    )?;
                } else {
                    let tmp = scratch_slice(&mut scratch.block, bend - bstart);
                    decode_block(
                        streams,
                        &mut scratch.filtered,
                        b,
                        j,
                        tmp,
                        Some(block0),
                        seen,
                    )?;
                    tail[dst_lo..dst_hi].copy_from_slice(&tmp[lo - bstart..hi - bstart]);
                }
                continue;
            }
            let block0 = (j > 0 && delta).then(|| &scratch.block0[..bs0]);
            let (dst_lo, dst_hi) = (lo - offset, hi - offset);
            if whole {
                let dst = &mut out[dst_lo..dst_hi];
                decode_block(streams, &mut scratch.filtered, b, j, dst, block0, seen)?;
            } else if j == 0 && delta && last > 0 && !b0_in_out {
                // Already decoded as the reference.
                out[dst_lo..dst_hi].copy_from_slice(&scratch.block0[lo..hi]);
            } else {
                let tmp = scratch_slice(&mut scratch.block, bend - bstart);
                decode_block(streams, &mut scratch.filtered, b, j, tmp, block0, seen)?;
                out[dst_lo..dst_hi].copy_from_slice(&tmp[lo - bstart..hi - bstart]);
            }
        }
        Ok(())
    }

    /// Range decode of a VL-block chunk (section 2.8): block sizes come from each block's
    /// own size field, payload lengths from the next bstart.
    fn vl_range(
        &mut self,
        b: &Blocks<'_>,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), CodecError> {
        let Decoder {
            scratch, streams, ..
        } = self;
        let end = offset + out.len();
        let nbytes = b.hdr.nbytes;
        let mut ustart = 0usize;
        for j in 0..b.nblocks {
            let (payload, usize_j) = vl_block(b, j)?;
            let uend = ustart
                .checked_add(usize_j)
                .filter(|&e| e <= nbytes)
                .ok_or_else(|| {
                    corrupt(
                        j,
                        0,
                        format!("VL blocks add up to more than nbytes {nbytes}"),
                    )
                })?;
            if uend > offset && ustart < end {
                let lo = ustart.max(offset);
                let hi = uend.min(end);
                if lo == ustart && hi == uend {
                    let dst = &mut out[lo - offset..hi - offset];
                    decode_vl_block(streams, &mut scratch.filtered, b, j, payload, dst)?;
                } else {
                    let tmp = scratch_slice(&mut scratch.block, usize_j);
                    decode_vl_block(streams, &mut scratch.filtered, b, j, payload, tmp)?;
                    out[lo - offset..hi - offset].copy_from_slice(&tmp[lo - ustart..hi - ustart]);
                }
            }
            ustart = uend;
            if ustart >= end && end < nbytes {
                return Ok(());
            }
        }
        if ustart != nbytes {
            return Err(corrupt(
                b.nblocks.saturating_sub(1),
                0,
                format!("VL blocks add up to {ustart} bytes, header says nbytes {nbytes}"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
