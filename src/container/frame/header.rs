//! The frame header (87-byte prefix, then the metalayer section), the trailer's vlmetalayer
//! section (same structure) and the trailer tail: exact-marker parsing, every field kept in
//! [`FrameInfo`].
//!
//! Knows nothing of chunks or the index. Spec: the frame format (seed 002 of
//! `docs/format/README.md`) and `docs/format/CONTAINERS.md` 1.2, 1.3 and 1.6 (the trailer
//! version is a fixint and its vlmetalayers are not wrapped in a bin32, unlike the seed says).

use crate::container::msgpack::{Cursor, Fault};

/// Length of the fixed header prefix.
pub const HEADER_PREFIX_LEN: usize = 87;
/// Length of the fixed trailer tail (`ce` + trailer_len + fingerprint).
pub const TRAILER_TAIL_LEN: usize = 23;
/// The first 11 bytes of every frame: fixarray(14), fixstr(8) `b2frame\0`, int32 marker.
pub const MAGIC: [u8; 11] = *b"\x9e\xa8b2frame\x00\xd2";
/// Most metalayers a header may have.
pub const MAX_METALAYERS: usize = 16;
/// Most vlmetalayers a trailer may have (C-Blosc2 reader limit; writers stop at 16).
pub const MAX_VLMETALAYERS: usize = 8192;

/// Every field of a frame header, plus where the index and trailer were found. What `b2fs
/// info` prints.
///
/// The codec, clevel, filters, nthreads and blocksize fields are the defaults of whoever last
/// wrote the frame, not how its chunks are encoded (`docs/format/CONTAINERS.md` 1.2): each chunk's
/// own header is the authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameInfo {
    /// File offset of the frame start F.
    pub start: u64,
    /// Header length (bytes 11..15).
    pub header_len: u64,
    /// Frame length (bytes 16..24).
    pub frame_len: u64,
    /// General flags (byte 25): version in bits 0-3, 0x40 variable chunks, 0x80 VL blocks.
    pub general_flags: u8,
    /// Frame type (byte 26): 0 contiguous, 1 sparse.
    pub frame_type: u8,
    /// Codec flags (byte 27): compcode in the low nibble, clevel in the high nibble.
    pub codec_flags: u8,
    /// Other flags (byte 28): splitmode - 1 in bits 0-1.
    pub other_flags: u8,
    /// Uncompressed bytes of all chunks.
    pub nbytes: u64,
    /// Length of the chunk area (sparse: sum of the chunk files).
    pub cbytes: u64,
    /// Element size.
    pub typesize: u32,
    /// Default blocksize (0 = automatic).
    pub blocksize: i32,
    /// Chunk size: > 0 fixed, 0 variable, -1 not initialised.
    pub chunksize: i32,
    /// Compression threads of the last writer.
    pub nthreads_compress: i16,
    /// Decompression threads of the last writer.
    pub nthreads_decompress: i16,
    /// Byte 68: `c3` (true) when the writer had vlmetalayers. Readers ignore it.
    pub has_vlmeta: bool,
    /// Default filter pipeline (bytes 71..77).
    pub filters: [u8; 6],
    /// Byte 77: the compcode (for every codec, as C-Blosc2 writes it).
    pub udcodec: u8,
    /// Byte 78: codec parameter.
    pub compcode_meta: u8,
    /// Filter parameters (bytes 79..85).
    pub filters_meta: [u8; 6],
    /// Byte 85: bit 0 use_dict.
    pub other_flags2: u8,
    /// Trailer length.
    pub trailer_len: u64,
    /// File offset of the index chunk (`None` when nbytes is 0).
    pub index_offset: Option<u64>,
    /// Length of the index region as read (frame_len - trailer_len - index start).
    pub index_len: u64,
}

impl FrameInfo {
    /// Frame format version (general_flags bits 0-3).
    pub fn version(&self) -> u8 {
        self.general_flags & 0x0f
    }

    /// Whether chunks have variable sizes (chunksize 0).
    pub fn variable_chunks(&self) -> bool {
        self.chunksize == 0
    }

    /// The default codec's C API compcode (byte 77 when the nibble says 6).
    pub fn compcode(&self) -> u8 {
        match self.codec_flags & 0x0f {
            6 => self.udcodec,
            c => c,
        }
    }

    /// The default compression level.
    pub fn clevel(&self) -> u8 {
        self.codec_flags >> 4
    }
}

/// The result of parsing the 87-byte prefix.
pub(super) struct Prefix {
    /// The parsed fields.
    pub(super) info: FrameInfo,
    /// nbytes as stored (checked non-negative).
    pub(super) nbytes: i64,
    /// cbytes as stored (checked non-negative).
    pub(super) cbytes: i64,
}

pub(super) fn parse_prefix(b: &[u8], start: u64) -> Result<Prefix, Fault> {
    let mut c = Cursor::new(b, start);
    let magic = c.take(MAGIC.len(), "frame magic")?;
    if magic != MAGIC {
        return Err(Fault::new("frame magic", start, "not a Blosc2 frame"));
    }
    let header_len = c.be_i32("header_len")?;
    let frame_len = {
        c.expect(0xcf, "frame_len")?;
        c.be_i64("frame_len")?
    };
    c.expect(0xa4, "flags")?;
    let [general_flags, frame_type, codec_flags, other_flags] = c.array("flags")?;
    let nbytes = c.int64("nbytes")?;
    let cbytes = c.int64("cbytes")?;
    let typesize = c.int32("typesize")?;
    let blocksize = c.int32("blocksize")?;
    let chunksize = c.int32("chunksize")?;
    c.expect(0xd1, "nthreads_compress")?;
    let nthreads_compress = c.be_i16("nthreads_compress")?;
    c.expect(0xd1, "nthreads_decompress")?;
    let nthreads_decompress = c.be_i16("nthreads_decompress")?;
    let at = c.offset();
    let has_vlmeta = match c.u8("has_vlmetalayers")? {
        0xc2 => false,
        0xc3 => true,
        m => {
            return Err(Fault::new(
                "has_vlmetalayers",
                at,
                format!("expected msgpack bool, found 0x{m:02x}"),
            ));
        }
    };
    c.expect(0xd8, "filters")?;
    c.expect(0x06, "filters")?;
    let filters = c.array::<6>("filters")?;
    let [udcodec, compcode_meta] = c.array("udcodec")?;
    let filters_meta = c.array::<6>("filters_meta")?;
    let [other_flags2, _reserved] = c.array("other_flags2")?;

    let bad = |what: &str, off: u64, why: String| Fault::new(what, start + off, why);
    let header_len = u64::try_from(header_len)
        .ok()
        .filter(|&h| h >= HEADER_PREFIX_LEN as u64)
        .ok_or_else(|| bad("header_len", 11, format!("{header_len} is below 87")))?;
    let frame_len = u64::try_from(frame_len)
        .ok()
        .filter(|&f| f >= header_len + TRAILER_TAIL_LEN as u64)
        .ok_or_else(|| {
            bad(
                "frame_len",
                16,
                format!("{frame_len} is smaller than header_len {header_len} + trailer"),
            )
        })?;
    if general_flags & 0x0f > 3 {
        return Err(bad(
            "general_flags",
            25,
            format!("frame format version {} (> 3)", general_flags & 0x0f),
        ));
    }
    if nbytes < 0 {
        return Err(bad("nbytes", 30, format!("negative nbytes {nbytes}")));
    }
    if cbytes < 0 {
        return Err(bad("cbytes", 39, format!("negative cbytes {cbytes}")));
    }
    let typesize = u32::try_from(typesize)
        .ok()
        .filter(|&t| t > 0)
        .ok_or_else(|| bad("typesize", 48, format!("typesize {typesize} must be > 0")))?;
    Ok(Prefix {
        info: FrameInfo {
            start,
            header_len,
            frame_len,
            general_flags,
            frame_type,
            codec_flags,
            other_flags,
            nbytes: nbytes as u64,
            cbytes: cbytes as u64,
            typesize,
            blocksize,
            chunksize,
            nthreads_compress,
            nthreads_decompress,
            has_vlmeta,
            filters,
            udcodec,
            compcode_meta,
            filters_meta,
            other_flags2,
            trailer_len: 0,
            index_offset: None,
            index_len: 0,
        },
        nbytes,
        cbytes,
    })
}

/// A parsed metalayer entry: name, content, file offset of the content.
pub(super) type Layer<'a> = (String, &'a [u8], u64);

/// Parses the shared metalayer structure `93 cd SSSS de NNNN {name d2 off}* ...`, as found in
/// the header (`base` = frame start, offsets absolute from it) and in the trailer (`base` =
/// trailer start). `region` holds the bytes `[base, base + region.len())`; `pos` is where the
/// `93` byte sits. Returns `(name, content)` pairs.
pub(super) fn parse_layers<'a>(
    region: &'a [u8],
    file_base: u64,
    pos: usize,
    max: usize,
    what: &str,
) -> Result<Vec<Layer<'a>>, Fault> {
    let mut c = Cursor::new(region, file_base);
    c.seek(pos);
    // `93 cd SSSS`: fixarray(3) and the idx_size, which readers ignore; C-Blosc2 checks
    // neither (a trailer starting `90` was accepted, docs/format/CONTAINERS.md 1.6), so neither do we.
    c.take(4, what)?;
    c.expect(0xde, what)?;
    let at = c.offset();
    let n = usize::from(c.be_u16(what)?);
    if n > max {
        return Err(Fault::new(
            what,
            at,
            format!("{n} entries, more than the {max} allowed"),
        ));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name_at = c.offset();
        let name = c.fixstr(what)?;
        let name = std::str::from_utf8(name)
            .map_err(|_| Fault::new(what, name_at, "name is not UTF-8"))?
            .to_string();
        let off_at = c.offset();
        let off = c.int32(what)?;
        let target = usize::try_from(off).ok().filter(|&o| o < region.len());
        let Some(target) = target else {
            return Err(Fault::new(
                what,
                off_at,
                format!(
                    "offset {off} of {name:?} outside the {} bytes",
                    region.len()
                ),
            ));
        };
        let mut t = Cursor::new(region, file_base);
        t.seek(target);
        t.expect(0xc6, what)?;
        let len = t.be_u32(what)? as usize;
        let content_at = t.offset();
        let content = t.take(len, what)?;
        out.push((name, content, content_at));
    }
    Ok(out)
}
