//! Blosc2 frames, contiguous (a `.b2frame`/`.b2nd` file) and sparse (a directory with
//! `chunks.b2frame` and one `%08X.chunk` file per stored chunk): header, fixed metalayers,
//! chunk index, trailer with vlmetalayers, and access to each chunk's compressed bytes.
//!
//! This module does not decode chunk *data* and knows nothing of FUSE or caches; it calls the
//! codec only for the index chunk and the vlmetalayer contents, which are Blosc2 chunks.
//!
//! Spec: `shared/seeds/002_…txt` (CFrame) and `CONTAINER_NOTES.md` sections 1 and 2, which
//! correct the seed where real bytes differ: chunk offsets are relative to the **end** of the
//! header; the frame header stores the C API compcode (not the chunk compformat); the trailer
//! version is a fixint and its vlmetalayers are not wrapped in a bin32; nchunks is derived
//! (section 1.2); special offsets `0x81…`/`0x82…`/`0x84…` carry no bytes; `fill_special`
//! writes the index as one repeated-value special chunk.
//!
//! Open path (section 1.7; opening reads only these bytes, never chunk data):
//! 1. the 87-byte header prefix at the frame start F (magic, lengths, flags, exact markers);
//! 2. the 23-byte trailer tail at F + frame_len − 23 (`ce` + trailer_len);
//! 3. the rest of the header (metalayer section) up to header_len;
//! 4. the index chunk (if nbytes > 0) at F + header_len + cbytes (sparse: F + header_len),
//!    decoded into one `i64` per chunk, or kept as one value when it is a special chunk;
//!    every regular offset is bound-checked against cbytes (sparse: a u32 chunk id);
//! 5. the trailer, whose vlmetalayer chunks are decompressed and mapped to JSON.
//!
//! Invariants: a file longer than frame_len is fine (bytes after the frame are ignored); every
//! allocation is bounded by the real file size, except the decoded index, which is bounded by
//! [`INDEX_LIMIT_FLOOR`] or 64 × the file size, whichever is larger.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::msgpack::{Cursor, Fault};
use super::source::{IoStats, Source};
use super::{ChunkKind, ContainerError, Metalayer, attrs};
use crate::codec::{CodecError, Decoder};

/// Length of the fixed header prefix.
pub const HEADER_PREFIX_LEN: usize = 87;
/// Length of the fixed trailer tail (`ce` + trailer_len + fingerprint).
pub const TRAILER_TAIL_LEN: usize = 23;
/// The first 11 bytes of every frame: fixarray(14), fixstr(8) `b2frame\0`, int32 marker.
pub const MAGIC: [u8; 11] = *b"\x9e\xa8b2frame\x00\xd2";
/// Largest nchunks a frame can have (nchunks × 8 must fit an int32).
pub const MAX_NCHUNKS: u64 = (i32::MAX as u64) / 8;
/// The decoded index and vlmetalayers may always use this many bytes, whatever the file size.
pub const INDEX_LIMIT_FLOOR: usize = 64 << 20;
/// Most metalayers a header may have.
pub const MAX_METALAYERS: usize = 16;
/// Most vlmetalayers a trailer may have (C-Blosc2 reader limit; writers stop at 16).
pub const MAX_VLMETALAYERS: usize = 8192;
/// Largest blocksize a chunk header may declare.
const MAX_BLOCKSIZE: usize = 536_866_816;

/// Every field of a frame header, plus where the index and trailer were found. What `b2fs
/// info` prints.
///
/// The codec, clevel, filters, nthreads and blocksize fields are the defaults of whoever last
/// wrote the frame, not how its chunks are encoded (`CONTAINER_NOTES.md` 1.2): each chunk's
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
    /// Other flags (byte 28): splitmode − 1 in bits 0-1.
    pub other_flags: u8,
    /// Uncompressed bytes of all chunks.
    pub nbytes: u64,
    /// Length of the chunk area (sparse: sum of the chunk files).
    pub cbytes: u64,
    /// Element size.
    pub typesize: u32,
    /// Default blocksize (0 = automatic).
    pub blocksize: i32,
    /// Chunk size: > 0 fixed, 0 variable, −1 not initialised.
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
    /// Length of the index region as read (frame_len − trailer_len − index start).
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

/// A vlmetalayer of the trailer.
#[derive(Debug, Clone, PartialEq)]
pub struct Vlmetalayer {
    /// Its name.
    pub name: String,
    /// The stored Blosc2 chunk.
    pub chunk: Vec<u8>,
    /// The decompressed content (msgpack for python-blosc2 writers).
    pub content: Vec<u8>,
    /// The content mapped to JSON ([`attrs::content_to_json`]).
    pub json: Value,
}

/// The decoded chunk index.
#[derive(Debug)]
enum Index {
    /// One entry per chunk.
    Explicit(Vec<i64>),
    /// Every entry has this value (a special repeated-value or zeros index chunk).
    Repeated(i64),
}

/// What an index entry says about a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Stored bytes: an offset into the chunk area (contiguous) or a chunk id (sparse).
    Stored(u64),
    /// A special chunk with no bytes.
    Special(ChunkKind),
}

/// Classifies an index entry (`CONTAINER_NOTES.md` 1.5: bits 56, 58, 57 in that order).
fn classify(entry: i64) -> Option<Slot> {
    if entry >= 0 {
        return Some(Slot::Stored(entry as u64));
    }
    let top = (entry as u64 >> 56) as u8;
    if top & 0x01 != 0 {
        Some(Slot::Special(ChunkKind::Zeros))
    } else if top & 0x04 != 0 {
        Some(Slot::Special(ChunkKind::Uninit))
    } else if top & 0x02 != 0 {
        Some(Slot::Special(ChunkKind::Nan))
    } else {
        None
    }
}

/// The special kind of a Blosc2 chunk header (byte 31 bits 4-6), or `Regular`.
pub(crate) fn header_kind(header: &[u8]) -> ChunkKind {
    let extended = header.get(2).is_some_and(|f| f & 0x05 == 0x05);
    let special = header.get(31).map_or(0, |b| (b >> 4) & 7);
    match (extended, special) {
        (true, 1) => ChunkKind::Zeros,
        (true, 2) => ChunkKind::Nan,
        (true, 3) => ChunkKind::Value,
        (true, 4) => ChunkKind::Uninit,
        _ => ChunkKind::Regular,
    }
}

fn le_i32(b: &[u8], at: usize) -> Option<i32> {
    let s = b.get(at..at + 4)?;
    Some(i32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Builds the 32-byte special chunk C-Blosc2 synthesises for a special index entry.
pub(crate) fn special_chunk(
    kind: ChunkKind,
    nbytes: usize,
    typesize: u32,
    blocksize: i32,
) -> Vec<u8> {
    let code: u8 = match kind {
        ChunkKind::Zeros => 1,
        ChunkKind::Nan => 2,
        ChunkKind::Value => 3,
        ChunkKind::Uninit => 4,
        ChunkKind::Regular => 0,
    };
    let ts = u8::try_from(typesize).unwrap_or(1);
    let bs = match usize::try_from(blocksize) {
        Ok(b) if b > 0 && b <= nbytes => b,
        _ => nbytes.clamp(1, MAX_BLOCKSIZE),
    };
    let mut c = vec![0u8; 32];
    c[0] = 5;
    c[1] = 1;
    c[2] = 0x05;
    c[3] = ts;
    c[4..8].copy_from_slice(&(nbytes as u32).to_le_bytes());
    c[8..12].copy_from_slice(&(bs as u32).to_le_bytes());
    c[12..16].copy_from_slice(&32u32.to_le_bytes());
    c[31] = code << 4;
    c
}

/// An opened frame.
#[derive(Debug)]
pub(crate) struct Frame {
    src: Source,
    /// The sparse frame's directory (`None` for a contiguous frame).
    dir: Option<PathBuf>,
    stats: Arc<IoStats>,
    info: FrameInfo,
    nchunks: usize,
    index: Index,
    metalayers: Vec<Metalayer>,
    vlmeta: Vec<Vlmetalayer>,
}

/// The result of parsing the 87-byte prefix.
struct Prefix {
    info: FrameInfo,
    nbytes: i64,
    cbytes: i64,
}

fn parse_prefix(b: &[u8], start: u64) -> Result<Prefix, Fault> {
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

/// Parses the shared metalayer structure `93 cd SSSS de NNNN {name d2 off}* ...`, as found in
/// the header (`base` = frame start, offsets absolute from it) and in the trailer (`base` =
/// trailer start). `region` holds the bytes `[base, base + region.len())`; `pos` is where the
/// `93` byte sits. Returns `(name, content)` pairs.
fn parse_layers<'a>(
    region: &'a [u8],
    file_base: u64,
    pos: usize,
    max: usize,
    what: &str,
) -> Result<Vec<(String, &'a [u8], u64)>, Fault> {
    let mut c = Cursor::new(region, file_base);
    c.seek(pos);
    let _array = c.u8(what)?;
    c.expect(0xcd, what)?;
    let _idx_size = c.be_u16(what)?;
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

impl Frame {
    /// Opens the frame stored in `path` starting at byte `start`; `sparse_dir` is the sparse
    /// frame's directory when `path` is its `chunks.b2frame`.
    pub(crate) fn open(
        path: &Path,
        start: u64,
        sparse_dir: Option<&Path>,
        stats: Arc<IoStats>,
    ) -> Result<Frame, ContainerError> {
        let src = Source::open(path, Arc::clone(&stats))?;
        let mal = |f: Fault| ContainerError::Malformed {
            path: path.to_path_buf(),
            what: f.what,
            offset: f.offset,
            why: f.why,
        };
        let fault = |what: &str, offset: u64, why: String| mal(Fault::new(what, offset, why));

        // 1. Header prefix.
        let prefix = src.read_at(start, HEADER_PREFIX_LEN, "frame header")?;
        let Prefix {
            mut info,
            nbytes,
            cbytes,
        } = parse_prefix(&prefix, start).map_err(mal)?;
        let want_type = u8::from(sparse_dir.is_some());
        if info.frame_type != want_type {
            let kinds = ["contiguous", "sparse"];
            return Err(fault(
                "frame_type",
                start + 26,
                format!(
                    "frame type {} in a {} frame",
                    info.frame_type,
                    kinds[usize::from(want_type)]
                ),
            ));
        }
        let avail = src.len().saturating_sub(start);
        if info.frame_len > avail {
            return Err(fault(
                "frame_len",
                start + 16,
                format!(
                    "frame_len {} exceeds the {avail} bytes of the file after the frame start",
                    info.frame_len
                ),
            ));
        }
        let abs = |o: u64| start + o;

        // 2. Trailer tail.
        let tail_at = abs(info.frame_len - TRAILER_TAIL_LEN as u64);
        let tail = src.read_at(tail_at, TRAILER_TAIL_LEN, "trailer tail")?;
        let mut tc = Cursor::new(&tail, tail_at);
        tc.expect(0xce, "trailer_len").map_err(mal)?;
        let trailer_len = u64::from(tc.be_u32("trailer_len").map_err(mal)?);
        if trailer_len < 25 || trailer_len > info.frame_len - HEADER_PREFIX_LEN as u64 {
            return Err(fault(
                "trailer_len",
                tail_at + 1,
                format!("{trailer_len} outside [25, frame_len - 87]"),
            ));
        }
        info.trailer_len = trailer_len;

        // 3. Whole header, metalayers.
        let header = src.read_at(start, info.header_len as usize, "frame header")?;
        let metalayers = parse_layers(
            &header,
            start,
            HEADER_PREFIX_LEN,
            MAX_METALAYERS,
            "metalayer section",
        )
        .map_err(mal)?
        .into_iter()
        .map(|(name, raw, _)| Metalayer {
            json: attrs::content_to_json(raw),
            name,
            raw: raw.to_vec(),
        })
        .collect::<Vec<_>>();

        // 4. nchunks and the index.
        let data_end = info.frame_len - trailer_len;
        let limit = INDEX_LIMIT_FLOOR
            .max(usize::try_from(src.len().saturating_mul(64)).unwrap_or(usize::MAX));
        let (nchunks, index) = if nbytes == 0 {
            (0, Index::Explicit(Vec::new()))
        } else {
            if info.chunksize < 0 {
                return Err(fault(
                    "chunksize",
                    start + 58,
                    format!("chunksize {} with nbytes {nbytes}", info.chunksize),
                ));
            }
            let idx_start = if sparse_dir.is_some() {
                info.header_len
            } else {
                info.header_len
                    .checked_add(cbytes as u64)
                    .unwrap_or(u64::MAX)
            };
            if idx_start >= data_end {
                return Err(fault(
                    "cbytes",
                    start + 39,
                    format!(
                        "index would start at {idx_start}, at or after the trailer at {data_end}"
                    ),
                ));
            }
            let region_len = (data_end - idx_start) as usize;
            info.index_offset = Some(abs(idx_start));
            info.index_len = region_len as u64;
            let region = src.read_at(abs(idx_start), region_len, "index chunk")?;
            Self::decode_index(&region, &info, abs(idx_start), limit).map_err(|e| match e {
                IndexError::Fault(f) => mal(f),
                IndexError::Codec(source) => ContainerError::Chunk {
                    path: path.to_path_buf(),
                    index: usize::MAX,
                    source,
                },
            })?
        };
        // Bound-check stored entries.
        let check = |i: usize, e: i64| -> Result<(), ContainerError> {
            match classify(e) {
                None => Err(fault(
                    "index entry",
                    info.index_offset.unwrap_or(0),
                    format!("chunk {i}: invalid special value 0x{:016x}", e as u64),
                )),
                Some(Slot::Stored(o)) => {
                    let ok = if sparse_dir.is_some() {
                        o <= u64::from(u32::MAX)
                    } else {
                        o.checked_add(32).is_some_and(|end| end <= info.cbytes)
                    };
                    if ok {
                        Ok(())
                    } else {
                        Err(fault(
                            "index entry",
                            info.index_offset.unwrap_or(0),
                            format!(
                                "chunk {i}: offset {o} outside the chunk area of {} bytes",
                                info.cbytes
                            ),
                        ))
                    }
                }
                Some(Slot::Special(_)) => Ok(()),
            }
        };
        match &index {
            Index::Explicit(v) => {
                for (i, &e) in v.iter().enumerate() {
                    check(i, e)?;
                }
            }
            Index::Repeated(e) => {
                if nchunks > 0 {
                    check(0, *e)?;
                }
            }
        }

        // 5. Trailer.
        let t_start = if nbytes > 0 {
            data_end
        } else {
            info.header_len
        };
        let t_len = (info.frame_len - t_start) as usize;
        let trailer = src.read_at(abs(t_start), t_len, "trailer")?;
        let layers =
            parse_layers(&trailer, abs(t_start), 3, MAX_VLMETALAYERS, "trailer").map_err(mal)?;
        let mut vlmeta = Vec::with_capacity(layers.len());
        for (name, chunk, at) in layers {
            let content = Decoder::with_limit(limit)
                .decompress(chunk)
                .map_err(|source| ContainerError::Vlmeta {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    offset: at,
                    source,
                })?;
            vlmeta.push(Vlmetalayer {
                json: attrs::content_to_json(&content),
                name,
                chunk: chunk.to_vec(),
                content,
            });
        }

        Ok(Frame {
            src,
            dir: sparse_dir.map(Path::to_path_buf),
            stats,
            info,
            nchunks,
            index,
            metalayers,
            vlmeta,
        })
    }

    fn decode_index(
        region: &[u8],
        info: &FrameInfo,
        at: u64,
        limit: usize,
    ) -> Result<(usize, Index), IndexError> {
        let fault = |why: String| IndexError::Fault(Fault::new("index chunk", at, why));
        if region.len() < 32 {
            return Err(fault(format!(
                "{} bytes, too short for a Blosc2 chunk",
                region.len()
            )));
        }
        let idx_nbytes = le_i32(region, 4).unwrap_or(-1);
        let idx_cbytes = le_i32(region, 12).unwrap_or(-1);
        let idx_cbytes = usize::try_from(idx_cbytes)
            .ok()
            .filter(|&c| (32..=region.len()).contains(&c))
            .ok_or_else(|| {
                fault(format!(
                    "chunk cbytes {idx_cbytes} outside [32, {}]",
                    region.len()
                ))
            })?;
        let idx_nbytes = usize::try_from(idx_nbytes)
            .ok()
            .filter(|n| n % 8 == 0)
            .ok_or_else(|| fault(format!("index nbytes {idx_nbytes} is not a multiple of 8")))?;
        let nchunks = if info.chunksize > 0 {
            let n = info.nbytes.div_ceil(info.chunksize as u64);
            if n > MAX_NCHUNKS {
                return Err(fault(format!("{n} chunks exceed the format's maximum")));
            }
            if n as usize * 8 != idx_nbytes {
                return Err(fault(format!(
                    "index holds {} entries, nbytes/chunksize gives {n}",
                    idx_nbytes / 8
                )));
            }
            n as usize
        } else {
            idx_nbytes / 8
        };
        let chunk = &region[..idx_cbytes];
        let repeated = match header_kind(chunk) {
            ChunkKind::Zeros => Some(0),
            ChunkKind::Value if idx_cbytes == 40 => {
                let mut v = [0u8; 8];
                v.copy_from_slice(&chunk[32..40]);
                Some(i64::from_le_bytes(v))
            }
            ChunkKind::Nan | ChunkKind::Uninit => {
                return Err(fault(
                    "index chunk is a NaN/uninitialised special chunk".into(),
                ));
            }
            ChunkKind::Value | ChunkKind::Regular => None,
        };
        if let Some(v) = repeated {
            return Ok((nchunks, Index::Repeated(v)));
        }
        if idx_nbytes > limit {
            return Err(fault(format!(
                "index of {idx_nbytes} bytes exceeds the limit of {limit} for this file"
            )));
        }
        let bytes = Decoder::with_limit(limit)
            .decompress(chunk)
            .map_err(IndexError::Codec)?;
        if bytes.len() != nchunks * 8 {
            return Err(fault(format!(
                "index decompressed to {} bytes, expected {}",
                bytes.len(),
                nchunks * 8
            )));
        }
        let entries = bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect();
        Ok((nchunks, Index::Explicit(entries)))
    }

    /// The header fields.
    pub(crate) fn info(&self) -> &FrameInfo {
        &self.info
    }

    /// The file holding the header (the frame file or `chunks.b2frame`).
    pub(crate) fn source(&self) -> &Source {
        &self.src
    }

    /// Number of chunks.
    pub(crate) fn nchunks(&self) -> usize {
        self.nchunks
    }

    /// Fixed metalayers in header order.
    pub(crate) fn metalayers(&self) -> &[Metalayer] {
        &self.metalayers
    }

    /// Vlmetalayers in trailer order.
    pub(crate) fn vlmetalayers(&self) -> &[Vlmetalayer] {
        &self.vlmeta
    }

    /// The raw index entry of chunk `i` (no range check beyond the index itself).
    pub(crate) fn index_entry(&self, i: usize) -> Option<i64> {
        match &self.index {
            Index::Explicit(v) => v.get(i).copied(),
            Index::Repeated(e) => (i < self.nchunks).then_some(*e),
        }
    }

    fn no_such(&self, index: usize) -> ContainerError {
        ContainerError::NoSuchChunk {
            path: self.display_path(),
            index,
            nchunks: self.nchunks,
        }
    }

    fn display_path(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| self.src.path().to_path_buf())
    }

    fn slot(&self, i: usize) -> Result<Slot, ContainerError> {
        let e = self.index_entry(i).ok_or_else(|| self.no_such(i))?;
        // Entries were classified at open.
        classify(e).ok_or_else(|| self.no_such(i))
    }

    /// Uncompressed size implied by the header for chunk `i` in a fixed-size frame.
    fn fixed_nbytes(&self, i: usize) -> Option<usize> {
        let cs = u64::try_from(self.info.chunksize).ok().filter(|&c| c > 0)?;
        let before = cs.checked_mul(i as u64)?;
        let n = self.info.nbytes.checked_sub(before)?.min(cs);
        usize::try_from(n).ok()
    }

    fn sparse_chunk_path(&self, id: u64) -> PathBuf {
        let dir = self.dir.as_deref().unwrap_or(Path::new("."));
        dir.join(format!("{id:08X}.chunk"))
    }

    /// The first 32 bytes of stored chunk `i` (offset or id `o`).
    fn stored_header(&self, i: usize, o: u64) -> Result<Vec<u8>, ContainerError> {
        if self.dir.is_some() {
            let src = Source::open(&self.sparse_chunk_path(o), Arc::clone(&self.stats))?;
            src.read_at(0, 32, &format!("chunk {i} header"))
        } else {
            let at = self.info.start + self.info.header_len + o;
            self.src.read_at(at, 32, &format!("chunk {i} header"))
        }
    }

    /// Uncompressed size of chunk `i`: from the header for fixed-size frames, from the chunk's
    /// own header (32 bytes read) for variable-size frames.
    pub(crate) fn chunk_nbytes(&self, i: usize) -> Result<usize, ContainerError> {
        let slot = self.slot(i)?;
        if let Some(n) = self.fixed_nbytes(i) {
            return Ok(n);
        }
        match slot {
            Slot::Special(_) => Err(self.variable_special(i)),
            Slot::Stored(o) => {
                let h = self.stored_header(i, o)?;
                let n = le_i32(&h, 4).unwrap_or(-1);
                usize::try_from(n)
                    .map_err(|_| self.chunk_fault(i, o, format!("negative nbytes {n}")))
            }
        }
    }

    fn variable_special(&self, i: usize) -> ContainerError {
        ContainerError::Malformed {
            path: self.display_path(),
            what: format!("chunk {i}"),
            offset: self.info.index_offset.unwrap_or(0),
            why: "special chunk in a variable-size frame has no size (C-Blosc2 cannot read it either)"
                .into(),
        }
    }

    fn chunk_fault(&self, i: usize, o: u64, why: String) -> ContainerError {
        match &self.dir {
            Some(_) => ContainerError::Malformed {
                path: self.sparse_chunk_path(o),
                what: format!("chunk {i}"),
                offset: 0,
                why,
            },
            None => ContainerError::Malformed {
                path: self.src.path().to_path_buf(),
                what: format!("chunk {i}"),
                offset: self.info.start + self.info.header_len + o,
                why,
            },
        }
    }

    /// How chunk `i` is stored (reads the 32-byte header of stored chunks).
    pub(crate) fn chunk_kind(&self, i: usize) -> Result<ChunkKind, ContainerError> {
        match self.slot(i)? {
            Slot::Special(k) => Ok(k),
            Slot::Stored(o) => Ok(header_kind(&self.stored_header(i, o)?)),
        }
    }

    /// The 32-byte header of chunk `i` (synthesised for special entries).
    pub(crate) fn chunk_header_bytes(&self, i: usize) -> Result<Vec<u8>, ContainerError> {
        match self.slot(i)? {
            Slot::Special(k) => self.synthesise(i, k),
            Slot::Stored(o) => self.stored_header(i, o),
        }
    }

    fn synthesise(&self, i: usize, kind: ChunkKind) -> Result<Vec<u8>, ContainerError> {
        let n = self
            .fixed_nbytes(i)
            .ok_or_else(|| self.variable_special(i))?;
        Ok(special_chunk(
            kind,
            n,
            self.info.typesize,
            self.info.blocksize,
        ))
    }

    /// The complete compressed chunk `i`.
    pub(crate) fn chunk_bytes(&self, i: usize) -> Result<Vec<u8>, ContainerError> {
        let o = match self.slot(i)? {
            Slot::Special(k) => return self.synthesise(i, k),
            Slot::Stored(o) => o,
        };
        if self.dir.is_some() {
            let path = self.sparse_chunk_path(o);
            let src = Source::open(&path, Arc::clone(&self.stats))?;
            let len = usize::try_from(src.len()).unwrap_or(usize::MAX);
            return src.read_at(0, len, &format!("chunk {i}"));
        }
        let mut buf = self.stored_header(i, o)?;
        let cb = le_i32(&buf, 12).unwrap_or(-1);
        let room = self.info.cbytes - o;
        let cb = usize::try_from(cb)
            .ok()
            .filter(|&c| c >= 32 && c as u64 <= room)
            .ok_or_else(|| {
                self.chunk_fault(i, o, format!("chunk cbytes {cb} outside [32, {room}]"))
            })?;
        let at = self.info.start + self.info.header_len + o + 32;
        self.src
            .read_into(at, cb - 32, &format!("chunk {i}"), &mut buf)?;
        Ok(buf)
    }
}

/// Failure while decoding the index chunk.
enum IndexError {
    Fault(Fault),
    Codec(CodecError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_special_offsets() {
        assert_eq!(classify(0), Some(Slot::Stored(0)));
        assert_eq!(classify(116), Some(Slot::Stored(116)));
        let s = |top: u64| (top << 56) as i64;
        assert_eq!(classify(s(0x81)), Some(Slot::Special(ChunkKind::Zeros)));
        assert_eq!(classify(s(0x82)), Some(Slot::Special(ChunkKind::Nan)));
        assert_eq!(classify(s(0x84)), Some(Slot::Special(ChunkKind::Uninit)));
        assert_eq!(classify(s(0x85)), Some(Slot::Special(ChunkKind::Zeros)));
        assert_eq!(classify(s(0x80)), None);
        assert_eq!(classify(-1), Some(Slot::Special(ChunkKind::Zeros)));
    }

    #[test]
    fn special_chunk_layout() {
        let c = special_chunk(ChunkKind::Nan, 8000, 8, 0);
        assert_eq!(
            c,
            [
                5, 1, 5, 8, 0x40, 0x1f, 0, 0, 0x40, 0x1f, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 0, 0x20
            ]
        );
        assert_eq!(header_kind(&c), ChunkKind::Nan);
        assert_eq!(special_chunk(ChunkKind::Zeros, 10, 300, 4)[3], 1);
    }
}
