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
//! | input larger than [`MAX_BUFFERSIZE`] | [`CodecError::TooLarge`] |
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
use super::tune::{self, TuneInput, Tuning};
use super::{ChunkHeader, Codec, CodecError, MAX_BUFFERSIZE, filter_id};

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

/// How the encoder chooses the block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Blocksize {
    /// The C libraries' automatic choice (section 2.10 for Blosc2, 2.12 for Blosc1).
    #[default]
    Auto,
    /// Blocks of this many bytes: a positive multiple of the typesize, at most 536866816 (the
    /// largest blocksize a header may declare); anything else is
    /// [`CodecError::InvalidBlocksize`]. A value above the input size is capped to it (then
    /// rounded down to whole elements, as C does).
    ///
    /// Blosc2 uses the value as given and writes it to the header. Blosc1 treats it as C-Blosc
    /// 1.x treats `blosc_set_blocksize`: raised to at least 128 and, when the block is split,
    /// scaled by the typesize within 64 KiB..1 MiB (section 2.12); the header holds the value
    /// used.
    Explicit(usize),
}

impl Blocksize {
    /// `Explicit(blocksize)` when the encoder takes that value with `typesize` (a positive
    /// multiple of it, at most [`MAX_BLOCKSIZE`]), `Auto` otherwise.
    ///
    /// Meant for re-using the blocksize of an existing chunk's header: other values occur there
    /// only in chunks smaller than one element (always memcpyed, where the blocksize does not
    /// matter) and in chunks C-Blosc2 wrote with a forced blocksize that is not a multiple of
    /// the typesize (which no decoder reads, section 6.2).
    pub fn explicit_or_auto(blocksize: usize, typesize: usize) -> Blocksize {
        if valid_explicit(blocksize, typesize) {
            Blocksize::Explicit(blocksize)
        } else {
            Blocksize::Auto
        }
    }
}

/// Whether [`Blocksize::Explicit`]`(blocksize)` is valid with `typesize`.
fn valid_explicit(blocksize: usize, typesize: usize) -> bool {
    blocksize > 0 && typesize > 0 && blocksize % typesize == 0 && blocksize <= MAX_BLOCKSIZE
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
    /// Element size in bytes, 1..=255 (the header stores it in one byte). To compress a type
    /// larger than 255 bytes, pass 1, as C-Blosc2 stores it.
    pub typesize: usize,
    /// Filter ids per slot (Blosc1: at most one, SHUFFLE or BITSHUFFLE, in any slot).
    pub filters: [u8; 6],
    /// Filter parameters per slot.
    pub filters_meta: [u8; 6],
    /// Split mode.
    pub splitmode: SplitMode,
    /// Block size: automatic or explicit.
    pub blocksize: Blocksize,
    /// Whether special chunks may be written (Blosc2 only): an all-zero result becomes a
    /// 32-byte zeros chunk (as C-Blosc2's `compress2` always does), and an input made only of
    /// canonical NaNs (typesize 4 or 8) a 32-byte NaN chunk.
    pub allow_special: bool,
}

impl Default for CParams {
    /// python-blosc2's defaults: Blosc2, zstd, clevel 1, typesize 8, SHUFFLE in slot 5,
    /// automatic split and blocksize, special chunks allowed.
    fn default() -> Self {
        CParams {
            format: ChunkFormat::Blosc2,
            codec: Codec::Zstd,
            clevel: 1,
            typesize: 8,
            filters: [0, 0, 0, 0, 0, filter_id::SHUFFLE],
            filters_meta: [0; 6],
            splitmode: SplitMode::Auto,
            blocksize: Blocksize::Auto,
            allow_special: true,
        }
    }
}

impl CParams {
    /// Blosc2 parameters with one codec, level, typesize and filter in slot 5 (0 for none).
    pub fn blosc2(codec: Codec, clevel: u8, typesize: usize, filter: u8) -> Self {
        CParams {
            codec,
            clevel,
            typesize,
            filters: [0, 0, 0, 0, 0, filter],
            ..CParams::default()
        }
    }

    /// Blosc1 parameters (C-Blosc 1.x defaults: forward-compatible split, automatic
    /// blocksize) with `filter` SHUFFLE, BITSHUFFLE or 0.
    pub fn blosc1(codec: Codec, clevel: u8, typesize: usize, filter: u8) -> Self {
        CParams {
            format: ChunkFormat::Blosc1,
            codec,
            clevel,
            typesize,
            filters: [0, 0, 0, 0, 0, filter],
            splitmode: SplitMode::ForwardCompat,
            allow_special: false,
            ..CParams::default()
        }
    }
}

/// Compresses `src` into one chunk.
pub fn compress(src: &[u8], params: &CParams) -> Result<Vec<u8>, CodecError> {
    Encoder::new().compress(src, params)
}

/// The chunk [`compress`] writes for `nbytes` zeros, in the time and memory of its output
/// (a chunk declaring 2 GiB of zeros is encoded from one block of them, not 2 GiB): blocks are
/// encoded independently, so every full block of zeros encodes to the same bytes, which are
/// encoded once and repeated.
pub fn compress_zeros(nbytes: usize, params: &CParams) -> Result<Vec<u8>, CodecError> {
    let blocksize = plan(nbytes, params)?.tuning.blocksize;
    let zeros = vec![0u8; blocksize.min(nbytes)];
    let mut out = Vec::new();
    Encoder::new().compress_source(Source::Zeros(&zeros, nbytes), params, &mut out)?;
    Ok(out)
}

/// What [`Encoder::compress_source`] encodes.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// This many zeros, from a buffer of at least one block of them.
    Zeros(&'a [u8], usize),
}

impl Source<'_> {
    /// Bytes it stands for.
    fn len(&self) -> usize {
        match *self {
            Source::Bytes(b) => b.len(),
            Source::Zeros(_, n) => n,
        }
    }
}

/// Largest blocksize C-Blosc2's reader accepts in a header (section 1.5), and so the largest
/// [`Blocksize::Explicit`] value.
pub const MAX_BLOCKSIZE: usize = 536_866_816;

/// Flags byte bits (section 1.2).
mod flag {
    pub const SHUFFLE: u8 = 0x01;
    pub const MEMCPYED: u8 = 0x02;
    pub const BITSHUFFLE: u8 = 0x04;
    pub const DELTA: u8 = 0x08;
    pub const DONT_SPLIT: u8 = 0x10;
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

/// The validated, derived parameters of one call.
struct Plan {
    /// The caller's parameters.
    params: CParams,
    blosc2: bool,
    hlen: usize,
    /// Typesize as written in the header (and used by filters and split).
    typesize: usize,
    tuning: Tuning,
    flags: u8,
    memcpyed: bool,
    destsize: usize,
    /// Filter ids and parameters as written (BYTEDELTA's group size made explicit, as C does).
    filters: [u8; 6],
    filters_meta: [u8; 6],
}

fn invalid(msg: impl Into<String>) -> CodecError {
    CodecError::InvalidParams(msg.into())
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
    !src.is_empty() && src.len() % typesize == 0 && src.chunks_exact(typesize).all(|c| c == pat)
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

        if let (Source::Bytes(src), true) = (
            source,
            plan.blosc2 && params.allow_special && !plan.memcpyed,
        ) {
            let lossy = plan.filters.contains(&filter_id::TRUNC_PREC);
            if !lossy && is_all_nan(src, plan.typesize) {
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
            Source::Zeros(..) => out.resize(hlen + nbytes, 0),
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
            Source::Zeros(z, n) => (z, n, true),
        };
        // Zeros: the bytes of the first full block and its stream counts, repeated.
        let mut first_full: Option<(Range<usize>, usize, usize)> = None;
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
            if zeros && !is_leftover {
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

/// Validates `params` for an input of `nbytes` and derives everything the writer needs.
fn plan(nbytes: usize, params: &CParams) -> Result<Plan, CodecError> {
    let blosc2 = params.format == ChunkFormat::Blosc2;
    if params.clevel > 9 {
        return Err(CodecError::InvalidClevel(params.clevel));
    }
    let typesize = params.typesize;
    if !(1..=255).contains(&typesize) {
        return Err(CodecError::InvalidTypesize(typesize));
    }
    if let Blocksize::Explicit(bs) = params.blocksize {
        if !valid_explicit(bs, typesize) {
            return Err(CodecError::InvalidBlocksize {
                blocksize: bs,
                typesize,
                max: MAX_BLOCKSIZE,
            });
        }
    }
    if nbytes > MAX_BUFFERSIZE {
        return Err(CodecError::TooLarge {
            nbytes,
            limit: MAX_BUFFERSIZE,
        });
    }
    if params.codec == Codec::Snappy {
        return Err(CodecError::UnsupportedCodec {
            id: params.codec.compcode(),
            name: "snappy (decode only)",
        });
    }
    // Filters: known, encodable ids only.
    for (slot, &id) in params.filters.iter().enumerate() {
        match id {
            filter_id::NOFILTER
            | filter_id::SHUFFLE
            | filter_id::BITSHUFFLE
            | filter_id::DELTA
            | filter_id::TRUNC_PREC
            | filter_id::BYTEDELTA => {}
            other => {
                return Err(CodecError::UnsupportedFilter {
                    id: other,
                    name: if other == filter_id::BYTEDELTA_BUGGY {
                        "bytedelta (old, read-only)"
                    } else {
                        "unknown"
                    },
                    slot,
                });
            }
        }
    }
    let mut flags;
    if blosc2 {
        // DELTA in front of every other filter; TRUNC_PREC precisions the typesize can take.
        let mut seen_other = false;
        for (slot, (&id, &meta)) in params.filters.iter().zip(&params.filters_meta).enumerate() {
            match id {
                filter_id::NOFILTER => {}
                filter_id::DELTA if seen_other => {
                    return Err(invalid(format!(
                        "DELTA in slot {slot} after another filter (it must come first)"
                    )));
                }
                filter_id::DELTA => {}
                filter_id::TRUNC_PREC => {
                    super::filter::truncprec::zeroed_bits(typesize, meta)?;
                    seen_other = true;
                }
                _ => seen_other = true,
            }
        }
        flags = 0x05;
        if params.filters.contains(&filter_id::DELTA) {
            flags |= flag::DELTA;
        }
    } else {
        // At most one filter, SHUFFLE or BITSHUFFLE (in any slot), without parameters.
        let mut active = params
            .filters
            .iter()
            .zip(&params.filters_meta)
            .filter(|&(&id, _)| id != filter_id::NOFILTER);
        flags = match (active.next(), active.next()) {
            (None, _) => 0,
            (Some(_), Some(_)) => {
                return Err(CodecError::NeedsBlosc2 {
                    feature: "more than one filter",
                });
            }
            (Some((&id, &meta)), None) => {
                let bit = match id {
                    filter_id::SHUFFLE => flag::SHUFFLE,
                    filter_id::BITSHUFFLE => flag::BITSHUFFLE,
                    filter_id::DELTA => {
                        return Err(CodecError::NeedsBlosc2 {
                            feature: "the DELTA filter",
                        });
                    }
                    filter_id::TRUNC_PREC => {
                        return Err(CodecError::NeedsBlosc2 {
                            feature: "the TRUNC_PREC filter",
                        });
                    }
                    _ => {
                        return Err(CodecError::NeedsBlosc2 {
                            feature: "the BYTEDELTA filter",
                        });
                    }
                };
                if meta != 0 {
                    return Err(CodecError::NeedsBlosc2 {
                        feature: "filters_meta (a shuffle group size)",
                    });
                }
                bit
            }
        };
    }

    let input = TuneInput {
        codec: params.codec,
        clevel: params.clevel,
        typesize,
        filters: &params.filters,
        splitmode: params.splitmode,
        blocksize: params.blocksize,
        nbytes,
    };
    let (tuning, hlen) = if blosc2 {
        (tune::tune_blosc2(&input), 32)
    } else {
        (tune::tune_blosc1(&input), 16)
    };
    let destsize = nbytes + hlen;
    let nblocks = nbytes.div_ceil(tuning.blocksize.max(1));
    let mut memcpyed = params.clevel == 0 || nbytes < typesize;
    memcpyed |= if blosc2 { nbytes < 32 } else { nbytes < 128 };
    memcpyed |= hlen + 4 * nblocks > destsize;
    if blosc2 {
        if memcpyed {
            flags = 0x05 | flag::MEMCPYED;
        } else {
            flags |= (params.codec.format() << 5) | if tuning.split { 0 } else { flag::DONT_SPLIT };
        }
    } else {
        flags |= (params.codec.format() << 5) | if tuning.split { 0 } else { flag::DONT_SPLIT };
        if memcpyed {
            flags |= flag::MEMCPYED;
        }
    }
    // C-Blosc2 records BYTEDELTA's group size explicitly and drops the filter when that size
    // would be 1 with typesize 1 (a plain byte delta it does not apply).
    let mut filters = params.filters;
    let mut filters_meta = params.filters_meta;
    if blosc2 {
        for (f, m) in filters.iter_mut().zip(filters_meta.iter_mut()) {
            if *f == filter_id::BYTEDELTA && *m == 0 {
                if typesize == 1 {
                    *f = 0;
                } else {
                    *m = typesize as u8;
                }
            }
        }
    }
    Ok(Plan {
        params: params.clone(),
        filters,
        filters_meta,
        blosc2,
        hlen,
        typesize,
        tuning,
        flags,
        memcpyed,
        destsize,
    })
}

/// Writes the 16- or 32-byte header (cbytes is patched at the end).
fn write_header(out: &mut [u8], plan: &Plan, params: &CParams, nbytes: usize) {
    ChunkHeader {
        version: if plan.blosc2 { 5 } else { 2 },
        versionlz: 1,
        flags: plan.flags,
        typesize: plan.typesize as u8,
        nbytes,
        blocksize: plan.tuning.blocksize,
        cbytes: 0,
        filters: plan.filters,
        filters_meta: plan.filters_meta,
        compcode: params.codec.compcode(),
        compcode_meta: 0,
        flags2: 0,
        blosc2_flags: 0,
    }
    .write_to(out);
}
