//! The chunk decoder (section 2.13): special and memcpyed chunks, blocks and streams, run
//! streams, dictionaries, VL blocks, the backward filter pipeline, and range decoding.
//!
//! Every size comes from the header and is checked against the buffer before use; nothing is
//! allocated beyond the declared `nbytes`, which is capped by the [`Decoder`]'s limit. Blocks
//! are found through their own bstart only (C writes them in completion order when threaded);
//! VL chunks are the one place where a neighbouring bstart gives a size.

use super::compressor::{MAX_DICT_SIZE, StreamDecoders};
use super::filter::Pipeline;
use super::header::{ChunkHeader, SpecialKind};
use super::streams::{Piece, decode_pieces};
use super::{Codec, CodecError};

mod budget;
mod filtered;
mod thread;
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

/// What a chunk's body is, after the header checks.
enum Body<'a> {
    /// No bytes at all.
    Empty,
    /// A repeated pattern (zeros, NaN, one value; uninit reads as zeros).
    Pattern(&'a [u8]),
    /// The raw bytes (MEMCPYED).
    Raw(&'a [u8]),
    /// Blocks of streams (regular or VL).
    Blocks(Blocks<'a>),
}

impl Body<'_> {
    /// [`Blocks::scratch_need`] of a decode of `n` bytes at `offset` (inside nbytes); 0 for
    /// bodies decoded without scratch.
    fn scratch_need(&self, offset: usize, n: usize) -> usize {
        match self {
            Body::Blocks(b) if n > 0 => b.scratch_need(offset, n),
            _ => 0,
        }
    }
}

/// A regular or VL chunk ready to decode block by block.
struct Blocks<'a> {
    hdr: ChunkHeader,
    /// The chunk cut to `cbytes`: no stream may reach past it.
    chunk: &'a [u8],
    codec: Codec,
    pipeline: Pipeline,
    dict: Option<&'a [u8]>,
    nblocks: usize,
    /// Block size (non-VL).
    bs: usize,
    /// Offset of the bstarts array.
    bstarts_at: usize,
    /// The decode is a small read's (at most two blocks): a block's streams may be decoded
    /// on two threads (`streams.rs`).
    small: bool,
}

impl Blocks<'_> {
    /// The most scratch a decode of `[offset, offset + n)` (inside nbytes, `n` > 0) may
    /// grow: a whole block for a block covered in part, a filtered block when the pipeline
    /// has work, block 0 when DELTA needs it apart (`blocks_range`); for VL chunks, whose
    /// block sizes are only read as they are decoded, twice nbytes at most.
    fn scratch_need(&self, offset: usize, n: usize) -> usize {
        let nbytes = self.hdr.nbytes;
        let filtered = !self.pipeline.is_noop_backward();
        if self.hdr.is_vl() {
            return nbytes.saturating_mul(1 + usize::from(filtered));
        }
        let (bs, end) = (self.bs.max(1), offset + n);
        let bs0 = bs.min(nbytes);
        let partial = offset % bs != 0 || (end % bs != 0 && end != nbytes);
        let block0 =
            self.pipeline.has_delta() && (end - 1) / bs > 0 && !(offset == 0 && end >= bs0);
        bs * usize::from(partial) + bs * usize::from(filtered) + bs0 * usize::from(block0)
    }
}

const ZEROS: [u8; 1] = [0];
const NAN_F32: [u8; 4] = 0x7fc0_0000u32.to_le_bytes();
const NAN_F64: [u8; 8] = 0x7ff8_0000_0000_0000u64.to_le_bytes();

fn read_i32(buf: &[u8], at: usize) -> Option<i32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn corrupt(block: usize, stream: usize, reason: String) -> CodecError {
    CodecError::Corrupt {
        block,
        stream,
        reason,
    }
}

/// Fills `out` with `pattern` repeated, starting `phase` bytes into it.
fn fill_pattern(out: &mut [u8], pattern: &[u8], phase: usize) {
    let p = pattern.len();
    if p == 1 {
        out.fill(pattern[0]);
        return;
    }
    let first = out.len().min(p);
    for (i, b) in out[..first].iter_mut().enumerate() {
        *b = pattern[(phase + i) % p];
    }
    // The filled prefix is a whole number of periods until the last copy.
    let mut filled = first;
    while filled < out.len() {
        let n = filled.min(out.len() - filled);
        out.copy_within(0..n, filled);
        filled += n;
    }
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

    /// Header checks, limit, and the body's layout (sections 1.5, 2.1, 2.2, 5.2).
    fn prepare<'a>(&self, chunk: &'a [u8]) -> Result<(ChunkHeader, Body<'a>), CodecError> {
        let hdr = ChunkHeader::parse(chunk)?;
        if hdr.nbytes > self.limit {
            return Err(CodecError::TooLarge {
                nbytes: hdr.nbytes,
                limit: self.limit,
            });
        }
        if hdr.is_lazy() && hdr.special() == SpecialKind::None {
            return Err(CodecError::UnsupportedChunk {
                what: "lazy chunk (block data not in the buffer)",
            });
        }
        let chunk = chunk.get(..hdr.cbytes).ok_or(CodecError::Truncated {
            what: "chunk (cbytes)",
            needed: hdr.cbytes,
            available: chunk.len(),
        })?;
        let body_bytes = chunk.get(hdr.header_len()..).unwrap_or_default();
        let body = match hdr.special() {
            SpecialKind::Zeros | SpecialKind::Uninit => Body::Pattern(&ZEROS),
            SpecialKind::Nan if hdr.typesize == 4 => Body::Pattern(&NAN_F32),
            SpecialKind::Nan => Body::Pattern(&NAN_F64),
            SpecialKind::Value if hdr.nbytes == 0 => Body::Empty,
            SpecialKind::Value => Body::Pattern(body_bytes),
            SpecialKind::None if hdr.nbytes == 0 => Body::Empty,
            SpecialKind::None if hdr.memcpyed() => Body::Raw(body_bytes),
            SpecialKind::None if hdr.is_instrumented() => {
                return Err(CodecError::UnsupportedChunk {
                    what: "instrumentation records instead of data",
                });
            }
            SpecialKind::None => Body::Blocks(Self::layout(hdr.clone(), chunk)?),
        };
        Ok((hdr, body))
    }

    /// The bstarts array and the dictionary of a regular or VL chunk.
    fn layout(hdr: ChunkHeader, chunk: &[u8]) -> Result<Blocks<'_>, CodecError> {
        let codec = hdr.codec()?;
        let pipeline = Pipeline::new(
            hdr.filters,
            hdr.filters_meta,
            usize::from(hdr.typesize),
            hdr.version,
        )?;
        let nblocks = hdr.nblocks();
        let bstarts_at = hdr.header_len();
        let bstarts_end = nblocks
            .checked_mul(4)
            .and_then(|n| n.checked_add(bstarts_at))
            .filter(|&end| end <= chunk.len())
            .ok_or(CodecError::Truncated {
                what: "bstarts",
                needed: nblocks.saturating_mul(4).saturating_add(bstarts_at),
                available: chunk.len(),
            })?;
        let dict = if hdr.use_dict() {
            let dsize = read_i32(chunk, bstarts_end).ok_or(CodecError::Truncated {
                what: "dictionary size",
                needed: bstarts_end + 4,
                available: chunk.len(),
            })?;
            let dsize = usize::try_from(dsize)
                .ok()
                .filter(|&d| d > 0 && d <= MAX_DICT_SIZE)
                .ok_or_else(|| CodecError::BadHeader {
                    what: format!("dictionary size {dsize} outside 1..={MAX_DICT_SIZE}"),
                })?;
            let start = bstarts_end + 4;
            Some(
                chunk
                    .get(start..start + dsize)
                    .ok_or(CodecError::Truncated {
                        what: "dictionary",
                        needed: start + dsize,
                        available: chunk.len(),
                    })?,
            )
        } else {
            None
        };
        Ok(Blocks {
            bs: hdr.block_size(),
            hdr,
            chunk,
            codec,
            pipeline,
            dict,
            nblocks,
            bstarts_at,
            small: false,
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

/// The bstart of block `j`, checked to lie inside the chunk.
fn bstart(b: &Blocks<'_>, j: usize) -> Result<usize, CodecError> {
    let raw = read_i32(b.chunk, b.bstarts_at + 4 * j).ok_or(CodecError::Truncated {
        what: "bstarts",
        needed: b.bstarts_at + 4 * (j + 1),
        available: b.chunk.len(),
    })?;
    usize::try_from(raw)
        .ok()
        .filter(|&s| s > 0 && s < b.chunk.len())
        .ok_or_else(|| {
            corrupt(
                j,
                0,
                format!("bstart {raw} outside the chunk ({} bytes)", b.chunk.len()),
            )
        })
}

/// Block `j` of a VL chunk: its payload (up to the next bstart or cbytes) and its
/// uncompressed size.
fn vl_block<'a>(b: &Blocks<'a>, j: usize) -> Result<(&'a [u8], usize), CodecError> {
    let start = bstart(b, j)?;
    let next = if j + 1 < b.nblocks {
        bstart(b, j + 1)?
    } else {
        b.chunk.len()
    };
    let usize_raw = read_i32(b.chunk, start)
        .filter(|_| start + 4 <= next)
        .ok_or_else(|| {
            corrupt(
                j,
                0,
                format!("VL block at offset {start} has no room for its size (next at {next})"),
            )
        })?;
    let usize_j = usize::try_from(usize_raw)
        .ok()
        .filter(|&u| u > 0)
        .ok_or_else(|| corrupt(j, 0, format!("VL block size {usize_raw} is not positive")))?;
    Ok((&b.chunk[start + 4..next], usize_j))
}

/// Decodes VL block `j` (one stream, raw when the payload has the block's size) into `dst`.
fn decode_vl_block(
    streams: &mut StreamDecoders,
    filtered: &mut Vec<u8>,
    b: &Blocks<'_>,
    j: usize,
    payload: &[u8],
    dst: &mut [u8],
) -> Result<(), CodecError> {
    let noop = b.pipeline.is_noop_backward();
    let target = if noop {
        &mut *dst
    } else {
        scratch_slice(filtered, dst.len())
    };
    if payload.len() == target.len() {
        target.copy_from_slice(payload);
    } else {
        streams
            .decode(b.codec, payload, target, b.dict)
            .map_err(|reason| corrupt(j, 0, reason))?;
    }
    if !noop {
        // Each VL block was filtered as if it were block 0.
        let src = &mut filtered[..dst.len()];
        b.pipeline.backward(src, dst, None)?;
    }
    Ok(())
}

/// Decodes block `j` of a regular chunk into `dst` (its full size): the streams straight into
/// `dst` when the pipeline has nothing to undo, else into `filtered` and back through the
/// pipeline. `block0` is the decoded block 0 (DELTA reference) for `j > 0`.
fn decode_block(
    streams: &mut StreamDecoders,
    filtered: &mut Vec<u8>,
    b: &Blocks<'_>,
    j: usize,
    dst: &mut [u8],
    block0: Option<&[u8]>,
    seen: Seen<'_>,
) -> Result<(), CodecError> {
    if b.pipeline.is_noop_backward() {
        return read_streams(streams, b, j, dst, seen);
    }
    let src = scratch_slice(filtered, dst.len());
    read_streams(streams, b, j, src, seen)?;
    b.pipeline.backward(src, dst, block0)
}

/// Reads the streams of block `j` into `out` (the filtered block, section 2.3): each stream
/// is checked and located first, then decoded (`streams.rs`: on two threads for a small
/// read's block, `b.small`).
fn read_streams(
    streams: &mut StreamDecoders,
    b: &Blocks<'_>,
    j: usize,
    out: &mut [u8],
    seen: Seen<'_>,
) -> Result<(), CodecError> {
    let chunk = b.chunk;
    let bsize = out.len();
    let leftover = bsize < b.bs;
    let nstreams = b.hdr.nstreams(b.bs, leftover);
    let neblock = bsize / nstreams;
    if neblock == 0 || neblock * nstreams != bsize {
        return Err(corrupt(
            j,
            0,
            format!("block of {bsize} bytes does not split into {nstreams} streams"),
        ));
    }
    let first = bstart(b, j)?;
    let mut pos = first;
    let mut pieces = Vec::with_capacity(nstreams);
    let mut starts = Vec::with_capacity(nstreams);
    for s in 0..nstreams {
        let csize = read_i32(chunk, pos).ok_or_else(|| {
            corrupt(
                j,
                s,
                format!("stream size at offset {pos} is past the chunk end"),
            )
        })?;
        pos += 4;
        starts.push(pos);
        if csize == 0 {
            pieces.push(Piece::Zeros);
        } else if csize < 0 {
            let token = chunk.get(pos).copied();
            if csize < -255 || token != Some(1) {
                return Err(corrupt(
                    j,
                    s,
                    format!("bad run stream (csize {csize}, token {token:?}) at offset {pos}"),
                ));
            }
            pos += 1;
            // -csize is 1..=255 here.
            pieces.push(Piece::Run(csize.unsigned_abs() as u8));
        } else {
            let csize = csize.unsigned_abs() as usize;
            if csize > neblock {
                return Err(corrupt(
                    j,
                    s,
                    format!("stream of {csize} bytes is longer than its {neblock}-byte block"),
                ));
            }
            let payload = chunk.get(pos..pos + csize).ok_or_else(|| {
                corrupt(
                    j,
                    s,
                    format!(
                        "stream of {csize} bytes at offset {pos} runs past the chunk end ({})",
                        chunk.len()
                    ),
                )
            })?;
            pieces.push(match csize == neblock {
                true => Piece::Raw(payload),
                false => Piece::Coded(payload),
            });
            pos += csize;
        }
    }
    decode_pieces(streams, b.codec, b.dict, &pieces, out, b.small).map_err(|(s, reason)| {
        let at = starts.get(s).copied().unwrap_or(0);
        corrupt(j, s, format!("{reason} (stream at offset {at})"))
    })?;
    seen(j, first..pos);
    Ok(())
}

#[cfg(test)]
mod tests;
