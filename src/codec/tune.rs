//! Blocksize selection and the split decision, as C-Blosc2 3.3.x and C-Blosc 1.x make them
//! (sections 2.10-2.12).
//!
//! Everything here is a pure function of the compression parameters and the input size, so
//! the encoder picks the same blocks and streams as the C libraries and its compression ratio
//! is comparable (and, for BloscLZ, byte-identical).

use super::Codec;
use super::encode::{Blocksize, SplitMode};
use super::filter_id;

/// The parameters the tuner looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuneInput<'a> {
    /// Codec.
    pub codec: Codec,
    /// Compression level 0..9.
    pub clevel: u8,
    /// Element size, 1..=255 (the encoder refuses others before tuning; C-Blosc2 tunes larger
    /// types with their real size and stores 1, section 6.1).
    pub typesize: usize,
    /// Filter ids per slot (only SHUFFLE's presence matters, for Blosc2).
    pub filters: &'a [u8; 6],
    /// Split mode.
    pub splitmode: SplitMode,
    /// Requested blocksize. The tuner models C, whose forced blocksize 0 means automatic:
    /// `Explicit(0)` is tuned like `Auto` (the encoder refuses it before tuning).
    pub blocksize: Blocksize,
    /// Uncompressed size of the chunk.
    pub nbytes: usize,
}

/// What the tuner decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Block size actually used (and written to the header).
    pub blocksize: usize,
    /// Whether full blocks are split into `typesize` streams (header bit 0x10 clear).
    pub split: bool,
}

/// `HCR` codecs of stune: the high-compression-ratio ones get bigger blocks.
fn is_hcr(codec: Codec) -> bool {
    matches!(codec, Codec::Lz4Hc | Codec::Zlib | Codec::Zstd)
}

/// The automatic blocksize before the split adjustment (section 2.10 step 3, shared by 1.x).
fn base_blocksize(nbytes: usize, codec: Codec, clevel: u8) -> usize {
    const L1: usize = 32 * 1024;
    if nbytes < L1 {
        return nbytes;
    }
    let hcr = is_hcr(codec);
    let mut bs = L1;
    if hcr {
        bs *= 2;
    }
    match clevel {
        0 => bs /= 4,
        1 => bs /= 2,
        2 => {}
        3 => bs *= 2,
        4 | 5 => bs *= 4,
        6..=8 => bs *= 8,
        _ => {
            bs *= 8;
            if hcr {
                bs *= 2;
            }
        }
    }
    bs
}

/// C-Blosc2 3.3.x split decision (section 2.11) for a given blocksize and typesize.
pub fn split_blosc2(
    splitmode: SplitMode,
    codec: Codec,
    clevel: u8,
    filters: &[u8; 6],
    typesize: usize,
    blocksize: usize,
) -> bool {
    match splitmode {
        SplitMode::Always => true,
        SplitMode::Never => false,
        SplitMode::Auto | SplitMode::ForwardCompat => {
            let codec_ok = match codec {
                Codec::BloscLz | Codec::Lz4 => true,
                Codec::Zstd => clevel <= 5,
                Codec::Lz4Hc | Codec::Zlib | Codec::Snappy => false,
            };
            let shuffle = filters.contains(&filter_id::SHUFFLE);
            codec_ok && shuffle && typesize > 0 && typesize <= 16 && blocksize / typesize >= 32
        }
    }
}

/// C-Blosc 1.x split decision (`split_block`, section 2.12) for a given blocksize.
pub fn split_blosc1(splitmode: SplitMode, codec: Codec, typesize: usize, blocksize: usize) -> bool {
    let sizes_ok = typesize > 0 && typesize <= 16 && blocksize / typesize >= 128;
    match splitmode {
        SplitMode::Always => true,
        SplitMode::Never => false,
        SplitMode::Auto => matches!(codec, Codec::BloscLz | Codec::Snappy) && sizes_ok,
        SplitMode::ForwardCompat => codec != Codec::Zstd && sizes_ok,
    }
}

/// Rounds `bs` to what the C tuners finally use: at most `nbytes`, and a multiple of the
/// typesize when larger than it.
fn finish(bs: usize, nbytes: usize, typesize: usize) -> usize {
    let mut bs = bs.min(nbytes);
    if typesize > 0 && bs > typesize {
        bs -= bs % typesize;
    }
    bs
}

/// The forced blocksize C would see (0 = automatic).
fn forced(b: Blocksize) -> usize {
    match b {
        Blocksize::Auto => 0,
        Blocksize::Explicit(f) => f,
    }
}

/// Blocksize and split as C-Blosc2 3.3.x chooses them (sections 2.10 and 2.11), except that
/// a forced blocksize is written as used (rounded down to whole elements when C would round),
/// where C writes the unrounded value (section 6.2).
pub fn tune_blosc2(p: &TuneInput<'_>) -> Tuning {
    let ts = p.typesize.max(1);
    let n = p.nbytes;
    let forced = forced(p.blocksize);
    let blocksize = if n < ts {
        // Such chunks are always memcpyed; C still records a forced value (capped to a
        // non-zero nbytes) in the header.
        match (forced, n) {
            (0, _) => 1,
            (f, 0) => f,
            (f, n) => f.min(n),
        }
    } else if forced > 0 {
        finish(forced, n, ts)
    } else {
        let mut bs = base_blocksize(n, p.codec, p.clevel);
        let split_n = split_blosc2(p.splitmode, p.codec, p.clevel, p.filters, ts, n);
        if p.clevel > 0 && split_n {
            bs = match p.clevel {
                1..=3 => 32 * 1024,
                4..=6 => 64 * 1024,
                7 => 128 * 1024,
                8 => 256 * 1024,
                _ => 512 * 1024,
            };
            bs = bs.saturating_mul(ts).clamp(32 * 1024, 4 * 1024 * 1024);
        }
        finish(bs, n, ts)
    };
    let split = split_blosc2(p.splitmode, p.codec, p.clevel, p.filters, ts, blocksize);
    Tuning { blocksize, split }
}

/// Largest forced blocksize C-Blosc 1.x accepts (`(INT_MAX - 255*4) / 3`).
const BLOSC1_MAX_FORCED: usize = (i32::MAX as usize - 255 * 4) / 3;

/// Blocksize and split as C-Blosc 1.x chooses them (section 2.12). `typesize` must be 1..=255.
pub fn tune_blosc1(p: &TuneInput<'_>) -> Tuning {
    let ts = p.typesize.max(1);
    let n = p.nbytes;
    let blocksize = if n < ts {
        1
    } else {
        let forced = forced(p.blocksize);
        let mut bs = if forced > 0 {
            forced.clamp(128, BLOSC1_MAX_FORCED)
        } else {
            base_blocksize(n, p.codec, p.clevel)
        };
        if p.clevel > 0 && split_blosc1(p.splitmode, p.codec, ts, bs) {
            bs = bs
                .min(256 * 1024)
                .saturating_mul(ts)
                .clamp(64 * 1024, 1024 * 1024);
        }
        finish(bs, n, ts)
    };
    let split = split_blosc1(p.splitmode, p.codec, ts, blocksize);
    Tuning { blocksize, split }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inp(codec: Codec, clevel: u8, ts: usize, filters: &[u8; 6], n: usize) -> TuneInput<'_> {
        TuneInput {
            codec,
            clevel,
            typesize: ts,
            filters,
            splitmode: SplitMode::Auto,
            blocksize: Blocksize::Auto,
            nbytes: n,
        }
    }

    const SHUF: [u8; 6] = [0, 0, 0, 0, 0, filter_id::SHUFFLE];

    #[test]
    fn worked_examples() {
        // 1.6: arange(16384, int32), LZ4 clevel 5 shuffle: one 65536-byte block, split.
        let t = tune_blosc2(&inp(Codec::Lz4, 5, 4, &SHUF, 65536));
        assert_eq!(
            t,
            Tuning {
                blocksize: 65536,
                split: true
            }
        );
        // 2.3: 10000 bytes zstd clevel 5 typesize 1 no filter: not split.
        let t = tune_blosc2(&inp(Codec::Zstd, 5, 1, &[0; 6], 10000));
        assert_eq!(
            t,
            Tuning {
                blocksize: 10000,
                split: false
            }
        );
        // 2.7: zeros(10000) float64, zstd 1, shuffle: 80000 bytes, split.
        let t = tune_blosc2(&inp(Codec::Zstd, 1, 8, &SHUF, 80000));
        assert_eq!(
            t,
            Tuning {
                blocksize: 80000,
                split: true
            }
        );
        // 6.5: 33 bytes typesize 4 -> blocksize 32.
        let t = tune_blosc2(&inp(Codec::BloscLz, 5, 4, &SHUF, 33));
        assert_eq!(t.blocksize, 32);
        // 1.6 Blosc1: arange(50000,int32), blosclz 5 shuffle -> one 200000-byte block.
        let t = tune_blosc1(&inp(Codec::BloscLz, 5, 4, &SHUF, 200000));
        assert_eq!(
            t,
            Tuning {
                blocksize: 200000,
                split: true
            }
        );
        // 2.12: forced 4096 with typesize 4 on 12321 bytes -> 12320.
        let mut i = inp(Codec::BloscLz, 5, 4, &SHUF, 12321);
        i.splitmode = SplitMode::ForwardCompat;
        i.blocksize = Blocksize::Explicit(4096);
        assert_eq!(tune_blosc1(&i).blocksize, 12320);
    }

    #[test]
    fn tiny_inputs() {
        let t = tune_blosc2(&inp(Codec::BloscLz, 5, 8, &SHUF, 0));
        assert_eq!(t.blocksize, 1);
        let t = tune_blosc2(&inp(Codec::BloscLz, 5, 8, &SHUF, 7));
        assert_eq!(t.blocksize, 1);
        let t = tune_blosc1(&inp(Codec::BloscLz, 5, 8, &SHUF, 0));
        assert_eq!(t.blocksize, 1);
    }
}
