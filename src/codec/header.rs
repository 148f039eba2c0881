//! The chunk header: Blosc1's 16 bytes and Blosc2's 32-byte extended header (sections 1.1-1.5),
//! parsed with the reader checks C-Blosc2 does, and written back.
//!
//! [`ChunkHeader::parse`] only looks at the header bytes (16 or 32), so a container can check a
//! chunk's header before reading its body. Checks that need the whole chunk (cbytes against the
//! buffer, bstarts, streams) belong to the decoder.

#![warn(clippy::indexing_slicing)]

use super::{Codec, CodecError, MAX_OVERHEAD, MIN_HEADER_LEN, filter_id};

/// Largest blocksize a header may declare (C-Blosc2's `BLOSC2_MAXBLOCKSIZE`).
pub const MAX_BLOCKSIZE: usize = 536_866_816;

/// Flags byte: byte shuffle (Blosc1 headers; with bit 2 the extended-header marker).
pub const FLAG_SHUFFLE: u8 = 0x01;
/// Flags byte: the body is the raw input.
pub const FLAG_MEMCPYED: u8 = 0x02;
/// Flags byte: bit shuffle (Blosc1 headers; with bit 0 the extended-header marker).
pub const FLAG_BITSHUFFLE: u8 = 0x04;
/// Flags byte: delta filter present.
pub const FLAG_DELTA: u8 = 0x08;
/// Flags byte: every block is one stream.
pub const FLAG_DONT_SPLIT: u8 = 0x10;
/// Flags byte: both bits that mark a 32-byte extended header.
pub const FLAG_EXTENDED: u8 = 0x05;

/// blosc2_flags: a dictionary section follows the bstarts.
pub const B2FLAG_USEDICT: u8 = 0x01;
/// blosc2_flags: the writer ran on a big-endian host (ignored by readers).
pub const B2FLAG_BIGENDIAN: u8 = 0x02;
/// blosc2_flags: lazy chunk (header, bstarts and a trailer only).
pub const B2FLAG_LAZY: u8 = 0x08;
/// blosc2_flags: streams hold instrumentation records.
pub const B2FLAG_INSTR: u8 = 0x80;
/// flags2: variable-length blocks.
pub const FLAGS2_VL_BLOCKS: u8 = 0x01;

/// The special-value kind of a Blosc2 chunk (blosc2_flags bits 4-6, section 2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpecialKind {
    /// A regular chunk (or memcpyed).
    None,
    /// All zeros.
    Zeros,
    /// All NaN (typesize 4 or 8).
    Nan,
    /// One element repeated; the element follows the header.
    Value,
    /// Uninitialised contents (b2fs returns zeros).
    Uninit,
}

impl SpecialKind {
    /// The kind stored in bits 4-6 of blosc2_flags; `None` for the reserved values 5-7.
    pub fn from_bits(bits: u8) -> Option<SpecialKind> {
        Some(match bits {
            0 => SpecialKind::None,
            1 => SpecialKind::Zeros,
            2 => SpecialKind::Nan,
            3 => SpecialKind::Value,
            4 => SpecialKind::Uninit,
            _ => return None,
        })
    }

    /// The value of bits 4-6 of blosc2_flags for this kind.
    pub fn bits(self) -> u8 {
        match self {
            SpecialKind::None => 0,
            SpecialKind::Zeros => 1,
            SpecialKind::Nan => 2,
            SpecialKind::Value => 3,
            SpecialKind::Uninit => 4,
        }
    }
}

/// Every field of a chunk header, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Format version (2 = Blosc1, 3-6 = Blosc2).
    pub version: u8,
    /// Codec stream format version.
    pub versionlz: u8,
    /// Flags byte (section 1.2).
    pub flags: u8,
    /// Element size in bytes as stored (1..255).
    pub typesize: u8,
    /// Uncompressed size.
    pub nbytes: usize,
    /// Block size as stored (number of blocks for VL-block chunks).
    pub blocksize: usize,
    /// Total chunk size including the header.
    pub cbytes: usize,
    /// Filter ids per pipeline slot (Blosc1 headers: derived from the flags).
    pub filters: [u8; 6],
    /// Filter parameter per slot.
    pub filters_meta: [u8; 6],
    /// Codec id (header byte 0x16; for Blosc1 derived from the flags, 0xFF for the
    /// reserved formats 5-7).
    pub compcode: u8,
    /// Codec parameter (plugins).
    pub compcode_meta: u8,
    /// blosc2_flags2 (bit 0: VL blocks).
    pub flags2: u8,
    /// blosc2_flags (dict, lazy, special kind).
    pub blosc2_flags: u8,
}

fn bad(what: impl Into<String>) -> CodecError {
    CodecError::BadHeader { what: what.into() }
}

/// Reads a little-endian i32 header field and refuses negative values.
fn read_size(le: [u8; 4], field: &'static str) -> Result<usize, CodecError> {
    let v = i32::from_le_bytes(le);
    usize::try_from(v).map_err(|_| bad(format!("{field} is negative ({v})")))
}

/// The name of a codec id that b2fs does not decode (plugins and user codecs, section 4.1).
pub fn codec_id_name(id: u8) -> &'static str {
    match id {
        3 => "snappy",
        32 => "ndlz",
        33 => "zfp_acc",
        34 => "zfp_prec",
        35 => "zfp_rate",
        36 => "openhtj2k",
        37 => "grok",
        38 => "openzl",
        39 => "j2k",
        40 => "htj2k",
        160..=255 => "user codec",
        _ => "unknown codec",
    }
}

impl ChunkHeader {
    /// Parses the header at the start of `buf` and applies the header-only reader checks of
    /// section 1.5. `buf` needs only the header (16 or 32 bytes); whether the body is there
    /// is the decoder's business.
    pub fn parse(buf: &[u8]) -> Result<ChunkHeader, CodecError> {
        let first: &[u8; MIN_HEADER_LEN] = buf
            .get(..MIN_HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(CodecError::Truncated {
                what: "chunk header",
                needed: MIN_HEADER_LEN,
                available: buf.len(),
            })?;
        let [
            version,
            versionlz,
            flags,
            typesize,
            n0,
            n1,
            n2,
            n3,
            b0,
            b1,
            b2,
            b3,
            c0,
            c1,
            c2,
            c3,
        ] = *first;
        let nbytes = read_size([n0, n1, n2, n3], "nbytes")?;
        let blocksize = read_size([b0, b1, b2, b3], "blocksize")?;
        let cbytes = read_size([c0, c1, c2, c3], "cbytes")?;
        let extended = flags & FLAG_EXTENDED == FLAG_EXTENDED;

        let hdr = if extended {
            let ext: &[u8; MAX_OVERHEAD] = buf
                .get(..MAX_OVERHEAD)
                .and_then(|s| s.try_into().ok())
                .ok_or(CodecError::Truncated {
                    what: "extended chunk header",
                    needed: MAX_OVERHEAD,
                    available: buf.len(),
                })?;
            let mut filters = [0u8; 6];
            let mut filters_meta = [0u8; 6];
            filters.copy_from_slice(&ext[0x10..0x16]);
            filters_meta.copy_from_slice(&ext[0x18..0x1E]);
            if version == 3 {
                // Blosc2 alpha chunks: the reader ignores the last slot (section 1.4).
                filters[5] = 0;
                filters_meta[5] = 0;
            }
            ChunkHeader {
                version,
                versionlz,
                flags,
                typesize,
                nbytes,
                blocksize,
                cbytes,
                filters,
                filters_meta,
                compcode: ext[0x16],
                compcode_meta: ext[0x17],
                flags2: ext[0x1E],
                blosc2_flags: ext[0x1F],
            }
        } else {
            let mut filters = [0u8; 6];
            if flags & FLAG_DELTA != 0 {
                filters[4] = filter_id::DELTA;
            }
            if flags & FLAG_SHUFFLE != 0 {
                filters[5] = filter_id::SHUFFLE;
            } else if flags & FLAG_BITSHUFFLE != 0 {
                filters[5] = filter_id::BITSHUFFLE;
            }
            let compcode = match flags >> 5 {
                0 => Codec::BloscLz.compcode(),
                1 => Codec::Lz4.compcode(),
                2 => Codec::Snappy.compcode(),
                3 => Codec::Zlib.compcode(),
                4 => Codec::Zstd.compcode(),
                _ => 0xFF,
            };
            ChunkHeader {
                version,
                versionlz,
                flags,
                typesize,
                nbytes,
                blocksize,
                cbytes,
                filters,
                filters_meta: [0; 6],
                compcode,
                compcode_meta: 0,
                flags2: 0,
                blosc2_flags: 0,
            }
        };
        hdr.check()?;
        Ok(hdr)
    }

    /// The header-only checks of section 1.5.
    fn check(&self) -> Result<(), CodecError> {
        let hlen = self.header_len();
        if self.cbytes < hlen {
            return Err(bad(format!(
                "cbytes {} is smaller than the {hlen}-byte header",
                self.cbytes
            )));
        }
        if self.typesize == 0 {
            return Err(bad("typesize is 0"));
        }
        if self.blocksize == 0 || self.blocksize > MAX_BLOCKSIZE {
            return Err(bad(format!(
                "blocksize {} outside 1..={MAX_BLOCKSIZE}",
                self.blocksize
            )));
        }
        if self.version > 6 && self.flags2 & !FLAGS2_VL_BLOCKS != 0 {
            return Err(bad(format!(
                "version {} with unknown flags2 bits {:#04x}",
                self.version, self.flags2
            )));
        }
        let special = SpecialKind::from_bits((self.blosc2_flags >> 4) & 7).ok_or_else(|| {
            bad(format!(
                "reserved special value kind {}",
                (self.blosc2_flags >> 4) & 7
            ))
        })?;
        let ts = usize::from(self.typesize);
        match special {
            SpecialKind::None => {}
            SpecialKind::Zeros => {}
            SpecialKind::Value => {
                let vsize = self.cbytes - MAX_OVERHEAD;
                if vsize == 0 {
                    return Err(bad("repeated-value chunk without a value"));
                }
                if !self.nbytes.is_multiple_of(vsize) {
                    return Err(bad(format!(
                        "repeated-value chunk: nbytes {} is not a multiple of the value size {vsize}",
                        self.nbytes
                    )));
                }
            }
            SpecialKind::Nan => {
                if ts != 4 && ts != 8 {
                    return Err(bad(format!("NaN chunk with typesize {ts} (needs 4 or 8)")));
                }
                if !self.nbytes.is_multiple_of(ts) {
                    return Err(bad(format!(
                        "NaN chunk: nbytes {} is not a multiple of typesize {ts}",
                        self.nbytes
                    )));
                }
            }
            SpecialKind::Uninit => {
                if !self.nbytes.is_multiple_of(ts) {
                    return Err(bad(format!(
                        "uninit chunk: nbytes {} is not a multiple of typesize {ts}",
                        self.nbytes
                    )));
                }
            }
        }
        if self.is_vl() {
            if special != SpecialKind::None {
                return Err(bad("VL-block chunk with a special value"));
            }
            if self.memcpyed() {
                return Err(bad("VL-block chunk marked memcpyed"));
            }
        } else if special == SpecialKind::None && self.memcpyed() {
            let expected = self.nbytes.checked_add(hlen);
            if expected != Some(self.cbytes) {
                return Err(bad(format!(
                    "memcpyed chunk: cbytes {} is not nbytes {} + {hlen}",
                    self.cbytes, self.nbytes
                )));
            }
        }
        Ok(())
    }

    /// Whether the header is the 32-byte extended one (`flags & 0x05 == 0x05`).
    pub fn is_extended(&self) -> bool {
        self.flags & FLAG_EXTENDED == FLAG_EXTENDED
    }

    /// Header length: 32 when extended, else 16.
    pub fn header_len(&self) -> usize {
        if self.is_extended() {
            MAX_OVERHEAD
        } else {
            MIN_HEADER_LEN
        }
    }

    /// Whether the chunk was written by C-Blosc 1.x (version <= 2): decides the split rule
    /// (section 2.4) and the bitshuffle rule (section 3.3).
    pub fn is_blosc1(&self) -> bool {
        self.version <= 2
    }

    /// The special-value kind (always `None` for 16-byte headers).
    pub fn special(&self) -> SpecialKind {
        if !self.is_extended() {
            return SpecialKind::None;
        }
        SpecialKind::from_bits((self.blosc2_flags >> 4) & 7).unwrap_or(SpecialKind::None)
    }

    /// Size of the element a repeated-value chunk stores after the header (`cbytes - 32`).
    pub fn special_value_size(&self) -> usize {
        self.cbytes.saturating_sub(MAX_OVERHEAD)
    }

    /// Whether the body is the raw input (MEMCPYED flag).
    pub fn memcpyed(&self) -> bool {
        self.flags & FLAG_MEMCPYED != 0
    }

    /// Whether every block is a single stream (DONT_SPLIT flag).
    pub fn dont_split(&self) -> bool {
        self.flags & FLAG_DONT_SPLIT != 0
    }

    /// Whether a dictionary section follows the bstarts.
    pub fn use_dict(&self) -> bool {
        self.is_extended() && self.blosc2_flags & B2FLAG_USEDICT != 0
    }

    /// Whether this is a VL-block chunk (flags2 bit 0).
    pub fn is_vl(&self) -> bool {
        self.is_extended() && self.flags2 & FLAGS2_VL_BLOCKS != 0
    }

    /// Whether this is a lazy chunk (no block data in the buffer).
    pub fn is_lazy(&self) -> bool {
        self.is_extended() && self.blosc2_flags & B2FLAG_LAZY != 0
    }

    /// Whether the streams hold instrumentation records instead of data.
    pub fn is_instrumented(&self) -> bool {
        self.is_extended() && self.blosc2_flags & B2FLAG_INSTR != 0
    }

    /// The codec format (flags bits 5-7).
    pub fn codec_format(&self) -> u8 {
        self.flags >> 5
    }

    /// The codec the streams use. Plugin and user codecs, Snappy, and the reserved formats
    /// are errors.
    pub fn codec(&self) -> Result<Codec, CodecError> {
        let unsupported = |id: u8| CodecError::UnsupportedCodec {
            id,
            name: codec_id_name(id),
        };
        match self.codec_format() {
            0 => Ok(Codec::BloscLz),
            1 if self.is_extended() && self.compcode == Codec::Lz4Hc.compcode() => Ok(Codec::Lz4Hc),
            1 => Ok(Codec::Lz4),
            2 => Err(unsupported(Codec::Snappy.compcode())),
            3 => Ok(Codec::Zlib),
            4 => Ok(Codec::Zstd),
            6 if self.is_extended() => match Codec::from_compcode(self.compcode) {
                Some(Codec::Snappy) | None => Err(unsupported(self.compcode)),
                Some(codec) => Ok(codec),
            },
            f => Err(bad(format!("reserved codec format {f} in the flags"))),
        }
    }

    /// Whether DELTA is in the pipeline (so block 0 must be decoded before the others).
    pub fn has_delta(&self) -> bool {
        self.filters.contains(&filter_id::DELTA)
    }

    /// The block size used for decoding: the header's value clamped to `nbytes` (section 1.5;
    /// VL chunks have no common block size and return 0).
    pub fn block_size(&self) -> usize {
        if self.is_vl() {
            0
        } else if self.nbytes > 0 {
            self.blocksize.min(self.nbytes)
        } else {
            self.blocksize
        }
    }

    /// Number of blocks (the blocksize field for VL chunks).
    pub fn nblocks(&self) -> usize {
        if self.is_vl() {
            self.blocksize
        } else {
            self.nbytes.div_ceil(self.block_size().max(1))
        }
    }

    /// Bytes in the short last block, 0 when every block is full (non-VL).
    pub fn leftover(&self) -> usize {
        if self.is_vl() {
            0
        } else {
            self.nbytes % self.block_size().max(1)
        }
    }

    /// Number of streams of a block of `bsize` bytes (section 2.4): the Blosc2 rule for
    /// versions >= 3, the C-Blosc 1.x rule for version 2. `leftover` says whether it is the
    /// short last block.
    pub fn nstreams(&self, bsize: usize, leftover: bool) -> usize {
        let ts = usize::from(self.typesize);
        if self.dont_split() || leftover || self.is_vl() {
            return 1;
        }
        if self.is_blosc1() && (ts > 16 || bsize / ts < 128) {
            return 1;
        }
        ts
    }

    /// Writes the header (16 bytes, or 32 when [`is_extended`](Self::is_extended)) into the
    /// start of `out`. For a 16-byte header the `filters`, `compcode` and following fields
    /// are not written: the flags carry them.
    ///
    /// # Panics
    ///
    /// If `out` is shorter than [`header_len`](Self::header_len), or a size does not fit an i32.
    // Writer side: `out` is the encoder's own buffer, not input-derived; a short one is a bug.
    #[allow(clippy::indexing_slicing)]
    pub fn write_to(&self, out: &mut [u8]) {
        let size = |v: usize| -> [u8; 4] {
            i32::try_from(v)
                .expect("chunk header size field exceeds i32::MAX")
                .to_le_bytes()
        };
        let hlen = self.header_len();
        let out = &mut out[..hlen];
        out[0] = self.version;
        out[1] = self.versionlz;
        out[2] = self.flags;
        out[3] = self.typesize;
        out[4..8].copy_from_slice(&size(self.nbytes));
        out[8..12].copy_from_slice(&size(self.blocksize));
        out[12..16].copy_from_slice(&size(self.cbytes));
        if hlen == MAX_OVERHEAD {
            out[0x10..0x16].copy_from_slice(&self.filters);
            out[0x16] = self.compcode;
            out[0x17] = self.compcode_meta;
            out[0x18..0x1E].copy_from_slice(&self.filters_meta);
            out[0x1E] = self.flags2;
            out[0x1F] = self.blosc2_flags;
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    #[test]
    fn blosc2_lz4_header() {
        let buf = hex("05 01 25 04 00 00 01 00 00 00 01 00 c4 02 00 00 \
             00 00 00 00 00 01 01 00 00 00 00 00 00 00 00 00");
        let h = ChunkHeader::parse(&buf).unwrap();
        assert_eq!(h.version, 5);
        assert_eq!(h.nbytes, 65536);
        assert_eq!(h.blocksize, 65536);
        assert_eq!(h.cbytes, 708);
        assert_eq!(h.filters, [0, 0, 0, 0, 0, 1]);
        assert_eq!(h.codec().unwrap(), Codec::Lz4);
        assert!(h.is_extended());
        assert_eq!(h.header_len(), 32);
        assert_eq!(h.nstreams(65536, false), 4);
        let mut out = [0u8; 32];
        h.write_to(&mut out);
        assert_eq!(&out[..], &buf[..]);
    }

    #[test]
    fn blosc1_header() {
        let buf = hex("02 01 01 04 40 0d 03 00 40 0d 03 00 34 08 00 00");
        let h = ChunkHeader::parse(&buf).unwrap();
        assert!(!h.is_extended());
        assert_eq!(h.filters, [0, 0, 0, 0, 0, filter_id::SHUFFLE]);
        assert_eq!(h.codec().unwrap(), Codec::BloscLz);
        assert_eq!(h.nbytes, 200000);
        assert_eq!(h.nstreams(200000, false), 4);
        // v2 rule: too few elements per stream means one stream.
        assert_eq!(h.nstreams(400, false), 1);
        let mut out = [0u8; 16];
        h.write_to(&mut out);
        assert_eq!(&out[..], &buf[..]);
    }

    #[test]
    fn special_value_header() {
        let mut buf = hex("05 01 05 08 40 1f 00 00 40 1f 00 00 28 00 00 00 \
             00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 30");
        let h = ChunkHeader::parse(&buf).unwrap();
        assert_eq!(h.special(), SpecialKind::Value);
        assert_eq!(h.special_value_size(), 8);
        buf[31] = 0x50;
        assert!(matches!(
            ChunkHeader::parse(&buf),
            Err(CodecError::BadHeader { .. })
        ));
    }

    #[test]
    fn refusals() {
        assert!(matches!(
            ChunkHeader::parse(&[2, 1, 1]),
            Err(CodecError::Truncated { .. })
        ));
        let ok = hex("02 01 01 04 40 0d 03 00 40 0d 03 00 34 08 00 00");
        for (i, v) in [(3usize, 0u8), (11, 0x80), (15, 0xff), (8, 0)] {
            let mut b = ok.clone();
            b[i] = v;
            if i == 8 {
                b[9] = 0;
                b[10] = 0;
            }
            assert!(ChunkHeader::parse(&b).is_err(), "byte {i} = {v}");
        }
        // Extended marker without the extended bytes.
        let mut b = ok.clone();
        b[2] = 0x05;
        assert!(matches!(
            ChunkHeader::parse(&b),
            Err(CodecError::Truncated { needed: 32, .. })
        ));
    }

    #[test]
    fn plugin_codec_is_named() {
        let mut buf = hex("05 01 c5 04 00 00 01 00 00 00 01 00 c4 02 00 00 \
             00 00 00 00 00 01 20 00 00 00 00 00 00 00 00 00");
        let h = ChunkHeader::parse(&buf).unwrap();
        assert_eq!(
            h.codec(),
            Err(CodecError::UnsupportedCodec {
                id: 32,
                name: "ndlz"
            })
        );
        buf[2] = 0x45;
        let h = ChunkHeader::parse(&buf).unwrap();
        assert!(matches!(
            h.codec(),
            Err(CodecError::UnsupportedCodec { id: 3, .. })
        ));
    }
}
