//! The bytes a frame commit writes besides the chunks: special index entries, the memcpyed
//! index chunk, the trailer and the vlmetalayers it holds (the attributes, encoded as
//! python-blosc2 encodes them), and the old header read and patched in place (same length:
//! header_len never changes). Shared by the contiguous and the sparse commit, and by
//! compaction and a store's carrier (the index chunk, an empty trailer).
//!
//! Spec: `docs/format/CONTAINERS.md` 1.2-1.6 (header fields, metalayer section, index,
//! trailer), 4.1 (vlmeta encoding), 4.3 (the b2nd shape int64).

use std::os::unix::fs::FileExt;
use std::path::Path;

use serde_json::Value;

use super::layout::Layout;
use crate::codec::{CParams, Codec, compress, filter_id};
use crate::container::write::{MAX_WRITE_VLMETALAYERS, io_err, refused, unsupported};
use crate::container::{Array, ChunkKind, ContainerError, attrs};

/// Special index entries (`docs/format/CONTAINERS.md` 1.5).
pub(super) fn special_entry(kind: ChunkKind) -> Option<i64> {
    let top: u64 = match kind {
        ChunkKind::Zeros => 0x81,
        ChunkKind::Nan => 0x82,
        ChunkKind::Uninit => 0x84,
        ChunkKind::Regular | ChunkKind::Value => return None,
    };
    Some((top << 56) as i64)
}

/// A memcpyed Blosc2 chunk holding `data` (header `05 01 17 typesize`, filters all 0).
fn memcpyed_chunk(data: &[u8], typesize: u8) -> Vec<u8> {
    let n = data.len() as u32;
    let mut c = Vec::with_capacity(32 + data.len());
    c.extend_from_slice(&[5, 1, 0x17, typesize]);
    c.extend_from_slice(&n.to_le_bytes());
    c.extend_from_slice(&n.to_le_bytes());
    c.extend_from_slice(&(n + 32).to_le_bytes());
    c.resize(32, 0);
    c.extend_from_slice(data);
    c
}

/// The index chunk of `entries` (LE int64, typesize 8, memcpyed).
pub(in crate::container::write) fn index_chunk(entries: &[i64]) -> Vec<u8> {
    let raw: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
    memcpyed_chunk(&raw, 8)
}

/// A complete trailer holding `layers` (name, stored Blosc2 chunk) in order.
pub(in crate::container::write) fn trailer(layers: &[(String, Vec<u8>)]) -> Vec<u8> {
    let names: usize = layers.iter().map(|(n, _)| 6 + n.len()).sum();
    let n = layers.len() as u16;
    let mut t = vec![0x94, 0x01, 0x93, 0xcd];
    t.extend_from_slice(&((6 + names) as u16).to_be_bytes());
    t.push(0xde);
    t.extend_from_slice(&n.to_be_bytes());
    let mut patch = Vec::with_capacity(layers.len());
    for (name, _) in layers {
        t.push(0xa0 | name.len() as u8);
        t.extend_from_slice(name.as_bytes());
        t.push(0xd2);
        patch.push(t.len());
        t.extend_from_slice(&[0; 4]);
    }
    t.push(0xdc);
    t.extend_from_slice(&n.to_be_bytes());
    for ((_, chunk), at) in layers.iter().zip(patch) {
        let off = (t.len() as u32).to_be_bytes();
        t[at..at + 4].copy_from_slice(&off);
        t.push(0xc6);
        t.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        t.extend_from_slice(chunk);
    }
    let len = (t.len() + 23) as u32;
    t.push(0xce);
    t.extend_from_slice(&len.to_be_bytes());
    t.extend_from_slice(&[0xd8, 0x00]);
    t.extend_from_slice(&[0; 16]);
    t
}

/// The vlmetalayers after the edit: old stored chunks for keys whose value did not change,
/// python-blosc2's encoding (msgpack, a ZSTD clevel 5 Blosc2 chunk of typesize 1) for the rest.
pub(super) fn vlmeta_layers(
    array: &Array,
    new: Option<&Value>,
) -> Result<Vec<(String, Vec<u8>)>, ContainerError> {
    let path = array.path();
    let old = array.vlmetalayers();
    let layers: Vec<(String, Vec<u8>)> = match new {
        None => old
            .iter()
            .map(|v| (v.name.clone(), v.chunk.clone()))
            .collect(),
        Some(obj) => {
            let map = obj
                .as_object()
                .ok_or_else(|| refused(path, "attrs: not a JSON object"))?;
            let mut out = Vec::with_capacity(map.len());
            for (k, v) in map {
                if k.len() > 31 {
                    return Err(refused(
                        path,
                        format!("attribute name {k:?}: longer than 31 bytes"),
                    ));
                }
                if let Some(o) = old.iter().find(|o| &o.name == k && &o.json == v) {
                    out.push((k.clone(), o.chunk.clone()));
                    continue;
                }
                let packed = attrs::json_to_msgpack(v)
                    .map_err(|e| refused(path, format!("attribute {k:?}: {e}")))?;
                let params = CParams {
                    allow_special: false,
                    ..CParams::blosc2(Codec::Zstd, 5, 1, filter_id::SHUFFLE)
                };
                let chunk = compress(&packed, &params)
                    .map_err(|e| unsupported(path, format!("attribute {k:?}: {e}")))?;
                out.push((k.clone(), chunk));
            }
            out
        }
    };
    if layers.len() > MAX_WRITE_VLMETALAYERS {
        return Err(refused(
            path,
            format!(
                "{} vlmetalayers (attributes): C-Blosc2 writes at most {MAX_WRITE_VLMETALAYERS} and corrupts frames with more",
                layers.len()
            ),
        ));
    }
    Ok(layers)
}

/// The old header with the commit's fields patched in (same length: pitfall 1).
pub(super) fn patch_header(
    array: &Array,
    header: &mut [u8],
    l: &Layout<'_>,
    frame_len: u64,
    cbytes: u64,
    has_vlmeta: bool,
) -> Result<(), ContainerError> {
    let path = array.path();
    header[16..24].copy_from_slice(&frame_len.to_be_bytes());
    header[25] = l.general_flags;
    header[30..38].copy_from_slice(&l.nbytes.to_be_bytes());
    header[39..47].copy_from_slice(&cbytes.to_be_bytes());
    header[58..62].copy_from_slice(&l.chunksize.to_be_bytes());
    header[68] = if has_vlmeta { 0xc3 } else { 0xc2 };
    let Some(shape0) = l.shape0 else {
        return Ok(());
    };
    let bad = |why: &str| unsupported(path, format!("updating the array shape: {why}"));
    let mut patched = false;
    for m in ["b2nd", "caterva"] {
        if let Some(c) = metalayer_content(header, m) {
            // fixarray, version, ndim, fixarray(ndim), d3, int64 shape[0], ...
            let ok = header.get(c + 2).is_some_and(|&d| (1..16).contains(&d))
                && header.get(c + 3) == header.get(c + 2).map(|d| 0x90 | d).as_ref()
                && header.get(c + 4) == Some(&0xd3)
                && header.len() >= c + 13;
            if !ok {
                return Err(bad(
                    "the metalayer's shape does not start as b2nd and caterva write it",
                ));
            }
            header[c + 5..c + 13].copy_from_slice(&shape0.to_be_bytes());
            patched = true;
        }
    }
    if patched {
        Ok(())
    } else {
        Err(bad("no b2nd/caterva metalayer found in the header"))
    }
}

/// Position of the content of metalayer `name` in the header bytes (after its `c6` + len).
fn metalayer_content(h: &[u8], name: &str) -> Option<usize> {
    if h.get(91) != Some(&0xde) {
        return None;
    }
    let n = u16::from_be_bytes([*h.get(92)?, *h.get(93)?]);
    let mut pos = 94usize;
    for _ in 0..n {
        let len = usize::from(*h.get(pos)? & 0x1f);
        let nm = h.get(pos + 1..pos + 1 + len)?;
        pos += 1 + len;
        if *h.get(pos)? != 0xd2 {
            return None;
        }
        let off = i32::from_be_bytes(h.get(pos + 1..pos + 5)?.try_into().ok()?);
        pos += 5;
        if nm == name.as_bytes() {
            let off = usize::try_from(off).ok()?;
            return (*h.get(off)? == 0xc6).then_some(off + 5);
        }
    }
    None
}

/// The first `len` bytes of `file` (the frame's header).
pub(super) fn read_header(
    path: &Path,
    file: &std::fs::File,
    len: u64,
) -> Result<Vec<u8>, ContainerError> {
    let mut header = vec![0u8; len as usize];
    file.read_exact_at(&mut header, 0)
        .map_err(|e| io_err(path, e))?;
    Ok(header)
}
