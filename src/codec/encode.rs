//! The chunk encoder (sections 2.9-2.12): Blosc2 chunks as C-Blosc2 3.3.x writes them and
//! Blosc1 chunks as C-Blosc 1.x writes them.
//!
//! The encoder follows C's serial algorithm step by step (blocksize and split from
//! [`super::tune`], the memcpy decision, per-stream run detection, the codec call with C's
//! output limit, raw storage when a stream does not shrink, the memcpy fallback and the
//! all-zero collapse), so for BloscLZ and the shuffles the chunk is byte-identical to
//! C-Blosc2's `compress2` output with `nthreads = 1`, and for the other codecs the block and
//! stream structure is the same.
//!
//! Bytes C leaves uninitialised (the tail of a DELTA or TRUNC_PREC leftover block) are copied
//! from the input, so C decodes our chunks correctly.
//!
//! Use [`compress`] for one chunk, or an [`Encoder`] with [`Encoder::compress_into`] to reuse
//! codec state (hash tables, a zstd context) and buffers across chunks. [`CParams::default`]
//! gives python-blosc2's defaults; [`CParams::blosc1`] C-Blosc 1.x's.
//!
//! Invalid parameters are typed errors, checked before anything is written:
//!
//! | parameters | error |
//! | --- | --- |
//! | clevel > 9 | [`CodecError::InvalidClevel`] |
//! | typesize 0 or > 255 (both formats) | [`CodecError::InvalidTypesize`] |
//! | [`Blocksize::Explicit`] 0, not a multiple of the typesize, or > 536866816 | [`CodecError::InvalidBlocksize`] |
//! | Snappy (decode-only) | [`CodecError::UnsupportedCodec`] |
//! | unknown or decode-only filter ids | [`CodecError::UnsupportedFilter`] |
//! | a Blosc1 request for anything but one SHUFFLE or BITSHUFFLE, or with filters_meta | [`CodecError::NeedsBlosc2`] |
//! | DELTA after another filter, a TRUNC_PREC precision the typesize cannot take | [`CodecError::InvalidParams`] |
//! | input larger than [`MAX_BUFFERSIZE`](super::MAX_BUFFERSIZE) | [`CodecError::TooLarge`] |
//!
//! An unknown codec cannot be requested: [`Codec`] only names the known ones. Nothing panics.
//!
//! Deliberate differences from C: C-Blosc2 accepts typesize > 255 (it tunes the blocksize on
//! the real size and stores typesize 1, section 6.1) and a forced blocksize that is not a
//! multiple of the typesize (it then writes a header its own decoder rejects, section 6.2);
//! this encoder refuses both. To re-encode an existing chunk alike, pass its header's typesize
//! (1 for such large types) and [`Blocksize::explicit_or_auto`] of its header's blocksize.

use std::ops::Range;

use super::compressor::blosclz_encode::{BloscLzEncoder, Variant};
use super::compressor::lz4_encode::Lz4Encoder;
use super::filter::Pipeline;
use super::{Codec, CodecError, filter_id};

mod params;

pub use params::{Blocksize, CParams, ChunkFormat, MAX_BLOCKSIZE, SplitMode};
use params::{Plan, flag, plan, write_header};

/// Compresses `src` into one chunk.
pub fn compress(src: &[u8], params: &CParams) -> Result<Vec<u8>, CodecError> {
    Encoder::new().compress(src, params)
}

/// The chunk [`compress`] writes for `nbytes` zeros, in the time and memory of its output
/// (a chunk declaring 2 GiB of zeros is encoded from one block of them, not 2 GiB): blocks are
/// encoded independently, so every full block of zeros encodes to the same bytes, which are
/// encoded once and repeated.
pub fn compress_zeros(nbytes: usize, params: &CParams) -> Result<Vec<u8>, CodecError> {
    compress_repeated(&[0], nbytes, params)
}

/// The chunk [`compress`] writes for `nbytes` bytes of `item` repeated (a fill value: `nbytes`
/// a multiple of its length), in the time and memory of its output when every block starts
/// at an item (the block size a multiple of the item's length: each full block then encodes
/// to the same bytes, encoded once and repeated, as [`compress_zeros`]); otherwise built
/// whole and compressed.
///
/// # Errors
/// As [`compress`]; [`CodecError::InvalidParams`] for an empty `item` or `nbytes` that is
/// not a multiple of its length.
pub fn compress_repeated(
    item: &[u8],
    nbytes: usize,
    params: &CParams,
) -> Result<Vec<u8>, CodecError> {
    if item.is_empty() || !nbytes.is_multiple_of(item.len()) {
        return Err(CodecError::InvalidParams(format!(
            "{nbytes} bytes of an item of {} bytes",
            item.len()
        )));
    }
    let blocksize = plan(nbytes, params)?.tuning.blocksize;
    let one = blocksize.min(nbytes);
    if !one.is_multiple_of(item.len()) {
        return compress(&item.repeat(nbytes / item.len()), params);
    }
    let block = item.repeat(one / item.len());
    let mut out = Vec::new();
    Encoder::new().compress_source(Source::Repeated(&block, nbytes), params, &mut out)?;
    Ok(out)
}

/// What [`Encoder::compress_source`] encodes.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// This many bytes of one repeated pattern, from a buffer of one block of it (or of all
    /// of it, when shorter), a whole number of the pattern's periods: every block, starting
    /// at a multiple of the block size, starts at the pattern's start.
    Repeated(&'a [u8], usize),
}

impl Source<'_> {
    /// Bytes it stands for.
    fn len(&self) -> usize {
        match *self {
            Source::Bytes(b) => b.len(),
            Source::Repeated(_, n) => n,
        }
    }

    /// Its first block (all of it, for bytes).
    fn first(&self) -> &[u8] {
        match *self {
            Source::Bytes(b) | Source::Repeated(b, _) => b,
        }
    }
}

/// Special-value kinds in blosc2_flags (section 2.7).
const SPECIAL_ZEROS: u8 = 1 << 4;
const SPECIAL_NAN: u8 = 2 << 4;

/// A reusable chunk encoder: keeps codec state (BloscLZ and LZ4 hash tables, a zstd context,
/// a zlib stream) and scratch buffers between calls.
pub struct Encoder {
    codecs: Codecs,
    filtered: Vec<u8>,
    scratch: Vec<u8>,
    cbuf: Vec<u8>,
}

/// The codec states of an [`Encoder`].
struct Codecs {
    blosclz: BloscLzEncoder,
    lz4: Lz4Encoder,
    zstd: Option<(i32, zstd::bulk::Compressor<'static>)>,
    zlib: Option<(u8, flate2::Compress)>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").finish_non_exhaustive()
    }
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

fn put_i32(out: &mut [u8], pos: usize, v: usize) {
    out[pos..pos + 4].copy_from_slice(&(v as u32).to_le_bytes());
}

/// Whether every byte of `s` equals `s[0]` (`s` non-empty).
fn is_run(s: &[u8]) -> bool {
    let Some(&v) = s.first() else {
        return false;
    };
    let pat = u64::from_ne_bytes([v; 8]);
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        if u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])) != pat {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| b == v)
}

/// Whether `src` is all canonical NaNs of `typesize` 4 or 8 (what a NaN special chunk decodes to).
fn is_all_nan(src: &[u8], typesize: usize) -> bool {
    let pat: &[u8] = match typesize {
        4 => &[0x00, 0x00, 0xc0, 0x7f],
        8 => &[0, 0, 0, 0, 0, 0, 0xf8, 0x7f],
        _ => return false,
    };
    !src.is_empty()
        && src.len().is_multiple_of(typesize)
        && src.chunks_exact(typesize).all(|c| c == pat)
}

/// zstd level for a Blosc clevel (section 4.4).
fn zstd_level(clevel: u8) -> i32 {
    if clevel >= 9 {
        22
    } else {
        2 * clevel as i32 - 1
    }
}

impl Encoder {
    /// A new encoder.
    pub fn new() -> Self {
        Encoder {
            codecs: Codecs {
                blosclz: BloscLzEncoder::new(),
                lz4: Lz4Encoder::new(),
                zstd: None,
                zlib: None,
            },
            filtered: Vec::new(),
            scratch: Vec::new(),
            cbuf: Vec::new(),
        }
    }

    /// Compresses `src` into a new chunk.
    pub fn compress(&mut self, src: &[u8], params: &CParams) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        self.compress_into(src, params, &mut out)?;
        out.shrink_to_fit();
        Ok(out)
    }

    /// Compresses `src` into `out` (cleared first; its capacity is reused). Returns the chunk
    /// size.
    pub fn compress_into(
        &mut self,
        src: &[u8],
        params: &CParams,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        self.compress_source(Source::Bytes(src), params, out)
    }

    /// [`Encoder::compress_into`] of `source`: bytes, or zeros without a buffer of all of them
    /// ([`compress_zeros`]).
    fn compress_source(
        &mut self,
        source: Source<'_>,
        params: &CParams,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        let nbytes = source.len();
        let plan = plan(nbytes, params)?;
        let hlen = plan.hlen;
        let mut header = [0u8; 32];
        write_header(&mut header, &plan, params, nbytes);

        if plan.blosc2 && params.allow_special && !plan.memcpyed {
            let lossy = plan.filters.contains(&filter_id::TRUNC_PREC);
            // A repeated block is all NaN when the whole is.
            if !lossy && is_all_nan(source.first(), plan.typesize) {
                header[2] = 0x05;
                header[16..31].fill(0);
                header[31] = SPECIAL_NAN;
                put_i32(&mut header, 12, hlen);
                out.clear();
                out.extend_from_slice(&header[..hlen]);
                return Ok(hlen);
            }
        }

        if !plan.memcpyed {
            out.clear();
            out.reserve(plan.destsize);
            out.extend_from_slice(&header[..hlen]);
            if let Some(len) = self.compress_blocks(source, &plan, out)? {
                return Ok(len);
            }
        }
        // MEMCPYED, decided up front or as the fallback (flags otherwise unchanged).
        header[2] |= flag::MEMCPYED;
        put_i32(&mut header, 12, hlen + nbytes);
        out.clear();
        out.reserve(hlen + nbytes);
        out.extend_from_slice(&header[..hlen]);
        match source {
            Source::Bytes(src) => out.extend_from_slice(src),
            Source::Repeated(block, n) => {
                let mut left = n;
                while left > 0 {
                    let take = left.min(block.len());
                    out.extend_from_slice(&block[..take]);
                    left -= take;
                }
            }
        }
        Ok(out.len())
    }

    /// Writes bstarts and streams after the header already in `out` (`destsize` bytes).
    /// Returns the chunk size, or `None` when the chunk does not fit (C's give-up, leading to
    /// the memcpy fallback).
    fn compress_blocks(
        &mut self,
        source: Source<'_>,
        plan: &Plan,
        out: &mut Vec<u8>,
    ) -> Result<Option<usize>, CodecError> {
        let params = &plan.params;
        let hlen = plan.hlen;
        let (src, nbytes, zeros) = match source {
            Source::Bytes(b) => (b, b.len(), false),
            Source::Repeated(z, n) => (z, n, true),
        };
        // Repeated: the bytes of the first full block and its stream counts, repeated.
        let mut first_full: Option<(Range<usize>, usize, usize)> = None;
        let delta = plan.filters.contains(&filter_id::DELTA);
        let bs = plan.tuning.blocksize;
        let nblocks = nbytes.div_ceil(bs);
        let leftover = nbytes % bs;
        let destsize = plan.destsize;
        let typesize = plan.typesize;
        let version = if plan.blosc2 { 5 } else { 2 };
        let pipeline = Pipeline::new(plan.filters, plan.filters_meta, typesize, version)?;
        let filtering = plan.filters.iter().zip(&plan.filters_meta).any(|(&f, &m)| {
            let group = if m != 0 { usize::from(m) } else { typesize };
            f != 0 && !(f == filter_id::SHUFFLE && group <= 1)
        });
        let bmax = bs.min(nbytes);
        if filtering && self.filtered.len() < bmax {
            self.filtered = vec![0; bmax];
            self.scratch = vec![0; bmax];
        }
        // Codec output goes to a cache-warm buffer first, then only the compressed bytes are
        // appended to `out` (which is never zero-filled).
        if self.cbuf.len() < bmax {
            self.cbuf = vec![0; bmax];
        }
        out.resize(hlen + 4 * nblocks, 0);
        let mut zero_streams = 0usize;
        let mut total_streams = 0usize;
        let variant = if plan.blosc2 {
            Variant::Blosc2
        } else {
            Variant::Blosc1 {
                split: plan.tuning.split,
            }
        };

        for j in 0..nblocks {
            let start = j * bs;
            let is_leftover = leftover > 0 && j == nblocks - 1;
            let bsize = if is_leftover { leftover } else { bs };
            let block = if zeros {
                &src[..bsize]
            } else {
                &src[start..start + bsize]
            };
            let bstart = out.len();
            put_i32(out, hlen + 4 * j, bstart);
            if let (false, Some((r, zs, ts))) = (is_leftover, &first_full) {
                if bstart + r.len() > destsize {
                    return Ok(None);
                }
                out.extend_from_within(r.clone());
                zero_streams += zs;
                total_streams += ts;
                continue;
            }
            let counts = (zero_streams, total_streams);

            let filtered: &[u8] = if filtering {
                let dst = &mut self.filtered[..bsize];
                pipeline.forward(block, dst, &mut self.scratch, &src[..bmax], j == 0)?;
                dst
            } else {
                block
            };

            let nstreams = if plan.tuning.split && !is_leftover {
                typesize
            } else {
                1
            };
            let neblock = bsize / nstreams;
            for s in 0..nstreams {
                let stream = &filtered[s * neblock..(s + 1) * neblock];
                total_streams += 1;
                let pos = out.len() + 4;
                if pos > destsize {
                    return Ok(None);
                }
                if plan.blosc2 && is_run(stream) {
                    let v = stream[0];
                    if v == 0 {
                        out.extend_from_slice(&0i32.to_le_bytes());
                        zero_streams += 1;
                    } else {
                        if pos + 1 > destsize {
                            return Ok(None);
                        }
                        out.extend_from_slice(&(-i32::from(v)).to_le_bytes());
                        out.push(0x01);
                    }
                    continue;
                }
                let maxout = neblock.min(destsize - pos);
                if maxout == 0 {
                    return Ok(None);
                }
                let c = self.codecs.compress(
                    params.codec,
                    params.clevel,
                    stream,
                    &mut self.cbuf[..maxout],
                    variant,
                );
                if c == 0 || c >= neblock {
                    if pos + neblock > destsize {
                        return Ok(None);
                    }
                    out.extend_from_slice(&(neblock as u32).to_le_bytes());
                    out.extend_from_slice(stream);
                } else {
                    out.extend_from_slice(&(c as u32).to_le_bytes());
                    out.extend_from_slice(&self.cbuf[..c]);
                }
            }
            // DELTA encodes the first block against itself and the others against it: the
            // second block's bytes are the ones repeated then.
            if zeros && !is_leftover && !(delta && j == 0) {
                let (zs, ts) = (zero_streams - counts.0, total_streams - counts.1);
                first_full = Some((bstart..out.len(), zs, ts));
            }
        }

        if plan.blosc2 && params.allow_special && zero_streams == total_streams && nbytes > 0 {
            out.truncate(hlen);
            out[31] |= SPECIAL_ZEROS;
            put_i32(out, 12, hlen);
            return Ok(Some(hlen));
        }
        let cbytes = out.len();
        put_i32(out, 12, cbytes);
        Ok(Some(cbytes))
    }
}

impl Codecs {
    /// One codec call into `dst` (C's `maxout` = `dst.len()`). 0 = does not fit / refused.
    fn compress(
        &mut self,
        codec: Codec,
        clevel: u8,
        src: &[u8],
        dst: &mut [u8],
        variant: Variant,
    ) -> usize {
        match codec {
            Codec::BloscLz => self.blosclz.compress(clevel, src, dst, variant),
            Codec::Lz4 => self.lz4.compress_fast(src, dst, 10 - clevel.min(9) as u32),
            Codec::Lz4Hc => self.lz4.compress_hc(src, dst, clevel),
            Codec::Zlib => {
                let z = match &mut self.zlib {
                    Some((level, z)) if *level == clevel => {
                        z.reset();
                        z
                    }
                    slot => {
                        let z =
                            flate2::Compress::new(flate2::Compression::new(clevel.into()), true);
                        &mut slot.insert((clevel, z)).1
                    }
                };
                match z.compress(src, dst, flate2::FlushCompress::Finish) {
                    Ok(flate2::Status::StreamEnd) => z.total_out() as usize,
                    _ => 0,
                }
            }
            Codec::Zstd => {
                let level = zstd_level(clevel);
                let cctx = match &mut self.zstd {
                    Some((l, c)) if *l == level => c,
                    slot => match zstd::bulk::Compressor::new(level) {
                        Ok(c) => &mut slot.insert((level, c)).1,
                        Err(_) => return 0,
                    },
                };
                cctx.compress_to_buffer(src, dst).unwrap_or(0)
            }
            Codec::Snappy => 0,
        }
    }
}
