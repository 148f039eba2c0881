//! A chunk's body as the decoder sees it: what the header says it is ([`Body`]: empty, a
//! pattern, raw bytes, or blocks), the layout of a chunk of blocks ([`Blocks`]: its bstarts,
//! dictionary and filter pipeline, checked against the buffer), and one block decoded from
//! its streams (regular or VL). Range decoding over the blocks is `decode.rs`'s.

use super::{Codec, CodecError, Decoder, Seen, scratch_slice};
use crate::codec::compressor::{MAX_DICT_SIZE, StreamDecoders};
use crate::codec::filter::Pipeline;
use crate::codec::header::{ChunkHeader, SpecialKind};
use crate::codec::streams::{Piece, decode_pieces};

/// What a chunk's body is, after the header checks.
pub(super) enum Body<'a> {
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
    pub(super) fn scratch_need(&self, offset: usize, n: usize) -> usize {
        match self {
            Body::Blocks(b) if n > 0 => b.scratch_need(offset, n),
            _ => 0,
        }
    }
}

/// A regular or VL chunk ready to decode block by block.
pub(super) struct Blocks<'a> {
    pub(super) hdr: ChunkHeader,
    /// The chunk cut to `cbytes`: no stream may reach past it.
    pub(super) chunk: &'a [u8],
    pub(super) codec: Codec,
    pub(super) pipeline: Pipeline,
    pub(super) dict: Option<&'a [u8]>,
    pub(super) nblocks: usize,
    /// Block size (non-VL).
    pub(super) bs: usize,
    /// Offset of the bstarts array.
    pub(super) bstarts_at: usize,
    /// The decode is a small read's (at most two blocks): a block's streams may be decoded
    /// on two threads (`streams.rs`).
    pub(super) small: bool,
}

impl Blocks<'_> {
    /// The most scratch a decode of `[offset, offset + n)` (inside nbytes, `n` > 0) may
    /// grow: a whole block for a block covered in part, a filtered block when the pipeline
    /// has work, block 0 when DELTA needs it apart (`blocks_range`); for VL chunks, whose
    /// block sizes are only read as they are decoded, twice nbytes at most.
    pub(super) fn scratch_need(&self, offset: usize, n: usize) -> usize {
        let nbytes = self.hdr.nbytes;
        let filtered = !self.pipeline.is_noop_backward();
        if self.hdr.is_vl() {
            return nbytes.saturating_mul(1 + usize::from(filtered));
        }
        let (bs, end) = (self.bs.max(1), offset + n);
        let bs0 = bs.min(nbytes);
        let partial = !offset.is_multiple_of(bs) || (end % bs != 0 && end != nbytes);
        let block0 =
            self.pipeline.has_delta() && (end - 1) / bs > 0 && !(offset == 0 && end >= bs0);
        bs * usize::from(partial) + bs * usize::from(filtered) + bs0 * usize::from(block0)
    }
}

pub(super) const ZEROS: [u8; 1] = [0];
pub(super) const NAN_F32: [u8; 4] = 0x7fc0_0000u32.to_le_bytes();
pub(super) const NAN_F64: [u8; 8] = 0x7ff8_0000_0000_0000u64.to_le_bytes();

pub(super) fn read_i32(buf: &[u8], at: usize) -> Option<i32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

pub(super) fn corrupt(block: usize, stream: usize, reason: String) -> CodecError {
    CodecError::Corrupt {
        block,
        stream,
        reason,
    }
}

/// Fills `out` with `pattern` repeated, starting `phase` bytes into it.
pub(super) fn fill_pattern(out: &mut [u8], pattern: &[u8], phase: usize) {
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

impl Decoder {
    /// Header checks, limit, and the body's layout (sections 1.5, 2.1, 2.2, 5.2).
    pub(super) fn prepare<'a>(
        &self,
        chunk: &'a [u8],
    ) -> Result<(ChunkHeader, Body<'a>), CodecError> {
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
    pub(super) fn layout(hdr: ChunkHeader, chunk: &[u8]) -> Result<Blocks<'_>, CodecError> {
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
}

/// The bstart of block `j`, checked to lie inside the chunk.
pub(super) fn bstart(b: &Blocks<'_>, j: usize) -> Result<usize, CodecError> {
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
pub(super) fn vl_block<'a>(b: &Blocks<'a>, j: usize) -> Result<(&'a [u8], usize), CodecError> {
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
pub(super) fn decode_vl_block(
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
pub(super) fn decode_block(
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
pub(super) fn read_streams(
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
