//! The chunk index: the decoded offsets (contiguous) or chunk ids (sparse), the special
//! offset codes, and the 32-byte special chunks C-Blosc2 synthesises for them.
//!
//! Knows nothing of files: bytes in, entries out; the codec decodes non-special index chunks.
//! Spec: `docs/format/CONTAINERS.md` 1.2 (nchunks rules) and 1.5 (index encodings, special values;
//! `fill_special` writes the index as one repeated-value special chunk, kept here as one value
//! so a huge nchunks costs no memory).

use super::header::FrameInfo;
use crate::codec::{CodecError, Decoder};
use crate::container::ChunkKind;
use crate::container::msgpack::Fault;

/// Largest nchunks a frame can have (nchunks x 8 must fit an int32).
pub const MAX_NCHUNKS: u64 = (i32::MAX as u64) / 8;
/// The decoded index may always use this many bytes, whatever the file size.
pub const INDEX_LIMIT_FLOOR: usize = 64 << 20;
/// Largest blocksize a chunk header may declare.
const MAX_BLOCKSIZE: usize = 536_866_816;

/// The decoded chunk index.
#[derive(Debug)]
pub(super) enum Index {
    /// One entry per chunk.
    Explicit(Vec<i64>),
    /// Every entry has this value (a special repeated-value or zeros index chunk).
    Repeated(i64),
}

/// What an index entry says about a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// Stored bytes: an offset into the chunk area (contiguous) or a chunk id (sparse).
    Stored(u64),
    /// A special chunk with no bytes.
    Special(ChunkKind),
}

/// Classifies an index entry (`docs/format/CONTAINERS.md` 1.5: bits 56, 58, 57 in that order).
pub(super) fn classify(entry: i64) -> Option<Slot> {
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

pub(super) fn le_i32(b: &[u8], at: usize) -> Option<i32> {
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

/// Decodes the index chunk found at the start of `region` (file offset `at`): derives
/// nchunks (docs/format/CONTAINERS.md 1.2), keeps a zeros / repeated-value special index as one value,
/// and decompresses anything else with the codec under `limit`.
pub(super) fn decode_index(
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

/// Failure while decoding the index chunk.
pub(super) enum IndexError {
    /// A structural fault.
    Fault(Fault),
    /// The codec rejected the index chunk.
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
