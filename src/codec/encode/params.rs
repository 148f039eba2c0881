//! Chunk parameters: what a caller asks for ([`CParams`], [`ChunkFormat`], [`SplitMode`],
//! [`Blocksize`]), their validation, and the [`Plan`] derived from them for one input (header
//! flags, block size and split from [`crate::codec::tune`], the memcpy decision) with the
//! header it writes. Every refusal listed in the parent module's table happens here, before a
//! byte is written.

use crate::codec::tune::{self, TuneInput, Tuning};
use crate::codec::{ChunkHeader, Codec, CodecError, MAX_BUFFERSIZE, filter_id};

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
    blocksize > 0
        && typesize > 0
        && blocksize.is_multiple_of(typesize)
        && blocksize <= MAX_BLOCKSIZE
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

/// Largest blocksize C-Blosc2's reader accepts in a header (section 1.5), and so the largest
/// [`Blocksize::Explicit`] value.
pub const MAX_BLOCKSIZE: usize = 536_866_816;

/// Flags byte bits (section 1.2).
pub(super) mod flag {
    pub const SHUFFLE: u8 = 0x01;
    pub const MEMCPYED: u8 = 0x02;
    pub const BITSHUFFLE: u8 = 0x04;
    pub const DELTA: u8 = 0x08;
    pub const DONT_SPLIT: u8 = 0x10;
}

/// The validated, derived parameters of one call.
pub(super) struct Plan {
    /// The caller's parameters.
    pub(super) params: CParams,
    pub(super) blosc2: bool,
    pub(super) hlen: usize,
    /// Typesize as written in the header (and used by filters and split).
    pub(super) typesize: usize,
    pub(super) tuning: Tuning,
    pub(super) flags: u8,
    pub(super) memcpyed: bool,
    pub(super) destsize: usize,
    /// Filter ids and parameters as written (BYTEDELTA's group size made explicit, as C does).
    pub(super) filters: [u8; 6],
    pub(super) filters_meta: [u8; 6],
}

fn invalid(msg: impl Into<String>) -> CodecError {
    CodecError::InvalidParams(msg.into())
}

/// Validates `params` for an input of `nbytes` and derives everything the writer needs.
pub(super) fn plan(nbytes: usize, params: &CParams) -> Result<Plan, CodecError> {
    let blosc2 = params.format == ChunkFormat::Blosc2;
    if params.clevel > 9 {
        return Err(CodecError::InvalidClevel(params.clevel));
    }
    let typesize = params.typesize;
    if !(1..=255).contains(&typesize) {
        return Err(CodecError::InvalidTypesize(typesize));
    }
    if let Blocksize::Explicit(bs) = params.blocksize
        && !valid_explicit(bs, typesize)
    {
        return Err(CodecError::InvalidBlocksize {
            blocksize: bs,
            typesize,
            max: MAX_BLOCKSIZE,
        });
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
                    crate::codec::filter::truncprec::zeroed_bits(typesize, meta)?;
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
pub(super) fn write_header(out: &mut [u8], plan: &Plan, params: &CParams, nbytes: usize) {
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
