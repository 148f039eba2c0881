//! The `embed.b2e` EmbedStore of a `.b2z`/`.b2d` store (`docs/format/STORES.md` 1.4): its marker
//! metalayer (`b2tree`, `b2dict`, `b2embed`), its key map (vlmeta `estore_metadata`:
//! `embed_map` of `{offset, length}` byte ranges, or `{urlbase, path}` references for remote
//! arrays), the `_object_registry` a TreeStore keeps, and the bytes of one embedded value
//! (a byte range of the SChunk's decompressed stream: a complete in-memory cframe).
//!
//! Opening reads the estore frame's header, index and trailer (the map is in its vlmeta); a
//! value's chunks are decoded only when the value is read.

use serde_json::Value;

use crate::container::{Array, ContainerError};

/// Which upstream class wrote the store, from the metalayer of `embed.b2e`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// `b2tree`: a TreeStore (python-blosc2 4.1.0 and later).
    Tree,
    /// `b2dict`: a DictStore (4.1.0 and later).
    Dict,
    /// `b2embed`: an EmbedStore, and every DictStore/TreeStore written by 3.7.0 to 4.0.x.
    Embed,
}

impl Marker {
    /// The metalayer name.
    pub fn name(self) -> &'static str {
        match self {
            Marker::Tree => "b2tree",
            Marker::Dict => "b2dict",
            Marker::Embed => "b2embed",
        }
    }
}

/// One key of the embed map.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    /// `[offset, offset + len)` of the estore's decompressed bytes: a cframe.
    Range { offset: u64, len: u64 },
    /// Anything else (a remote `C2Array` reference `{urlbase, path}`), as stored.
    Reference(Value),
}

/// An opened `embed.b2e`.
#[derive(Debug)]
pub(crate) struct Estore {
    array: Array,
    marker: Option<Marker>,
    entries: Vec<(String, Entry)>,
}

/// The largest embedded value read into memory. Embedded values are small by default (below
/// the store's threshold: 0 since python-blosc2 4.4.1, 2^16 at most before), but
/// `DictStore(threshold=None)` embeds every in-memory array whatever its size; the value is
/// decoded as it grows, so this bounds memory actually decoded, never reserved up front.
const MAX_EMBEDDED: u64 = 1 << 30;

impl Estore {
    /// Reads the marker and the key map of the opened estore frame.
    pub(crate) fn new(array: Array) -> Result<Estore, ContainerError> {
        let marker = array
            .metalayers()
            .iter()
            .find_map(|m| match m.name.as_str() {
                "b2tree" => Some(Marker::Tree),
                "b2dict" => Some(Marker::Dict),
                "b2embed" => Some(Marker::Embed),
                _ => None,
            });
        let mut entries = Vec::new();
        let map = array
            .attrs()
            .get("estore_metadata")
            .and_then(|m| m.get("embed_map"));
        match map {
            None => {}
            Some(Value::Object(map)) => {
                for (key, v) in map {
                    let range = (
                        v.get("offset").and_then(Value::as_u64),
                        v.get("length").and_then(Value::as_u64),
                    );
                    let entry = match range {
                        (Some(offset), Some(len)) => Entry::Range { offset, len },
                        _ => Entry::Reference(v.clone()),
                    };
                    entries.push((key.clone(), entry));
                }
            }
            Some(_) => {
                return Err(ContainerError::Malformed {
                    path: array.path().to_path_buf(),
                    what: "embed.b2e vlmeta estore_metadata".into(),
                    offset: 0,
                    why: "embed_map is not a map".into(),
                });
            }
        }
        Ok(Estore {
            array,
            marker,
            entries,
        })
    }

    /// The estore's frame.
    pub(crate) fn array(&self) -> &Array {
        &self.array
    }

    pub(crate) fn marker(&self) -> Option<Marker> {
        self.marker
    }

    pub(crate) fn entries(&self) -> &[(String, Entry)] {
        &self.entries
    }

    /// The decompressed bytes `[offset, offset + len)` of the estore's stream.
    pub(crate) fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, ContainerError> {
        let a = &self.array;
        let bad = |why: String| ContainerError::Malformed {
            path: a.path().to_path_buf(),
            what: "embedded value".into(),
            offset,
            why,
        };
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= a.nbytes() && len <= MAX_EMBEDDED)
            .ok_or_else(|| {
                bad(format!(
                    "range of {len} bytes at {offset} is not inside the estore's {} bytes",
                    a.nbytes()
                ))
            })?;
        let cs = a.chunksize() as u64;
        if cs == 0 {
            return Err(bad("the estore has no fixed chunksize".into()));
        }
        // The value grows as its bytes are decoded, in steps of `STEP` (to the next block
        // boundary of the chunk, below): a declared length never sizes an allocation before
        // the bytes exist (fuzz target `store_open`). A step may allocate up to one block
        // of the chunk (a header's block size, at most 512 MiB, within `MAX_EMBEDDED` for
        // the whole value) before it is decoded; that allocation is held under the
        // decoders' scratch budget with the decode's own scratch until the step is decoded
        // (`decompress_range_append`), so that threads reading hostile values at once hold
        // at most the budget in steps not yet decoded.
        const STEP: u64 = 4 << 20;
        let mut out = Vec::with_capacity(len.min(STEP) as usize);
        let mut at = offset;
        let mut chunk: Option<(usize, Vec<u8>)> = None;
        while at < end {
            let ci = (at / cs) as usize;
            if chunk.as_ref().is_none_or(|(i, _)| *i != ci) {
                chunk = Some((ci, a.chunk_bytes(ci)?.into_owned()));
            }
            let Some((_, bytes)) = &chunk else { break };
            let from = at - ci as u64 * cs;
            // A step ends on a block boundary of the chunk (or at the end of the value): a
            // block decoded in part is decoded whole into the decoder's scratch, and a step
            // of 4 MiB inside a block of up to 512 MiB decoded that block again for every
            // step (quadratic time, and a block-sized scratch allocated and freed each
            // time). The value then grows by up to one block at a time, which the scratch
            // would have held anyway.
            let stop = (from + STEP)
                .next_multiple_of(block_unit(bytes))
                .min(cs)
                .min(from + (end - at));
            let (from, want) = (from as usize, (stop - from) as usize);
            let n = crate::codec::decompress_range_append(bytes, from, want, &mut out).map_err(
                |source| ContainerError::Chunk {
                    path: a.path().to_path_buf(),
                    index: ci,
                    source,
                },
            )?;
            if n == 0 {
                return Err(bad(format!("chunk {ci} holds only {from} bytes")));
            }
            at += n as u64;
        }
        Ok(out)
    }
}

/// The block size of the regular chunk `chunk`, whose range decodes need no scratch when they
/// start and end on its multiples; 1 for chunks that are decoded without blocks (special,
/// memcpyed), VL-block chunks and headers that do not parse (the decode then says why).
fn block_unit(chunk: &[u8]) -> u64 {
    use crate::codec::header::SpecialKind;
    match crate::codec::chunk_info(chunk) {
        Ok(h) if h.special() == SpecialKind::None && !h.memcpyed() && !h.is_vl() => {
            (h.block_size() as u64).max(1)
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode::take_largest_grant_here;
    use crate::codec::{Blocksize, CParams, Codec, compress};

    /// A contiguous frame of one chunk, `chunk`, holding `nbytes` (typesize 1), without
    /// metalayers or vlmeta: an estore's stream as `read` sees it.
    fn one_chunk_frame(chunk: &[u8], nbytes: usize) -> Vec<u8> {
        crate::container::test_frames::build_frame(
            1,
            nbytes as i32,
            nbytes as i64,
            chunk,
            &[0],
            &[],
            &[],
        )
    }

    /// An embedded value is decoded in block-sized steps; a step of a chunk with 32 MiB
    /// blocks (unfiltered: the decode itself needs no scratch) allocates 32 MiB of the value
    /// before it is decoded, and that allocation is held under the decoders' budget. Before,
    /// only the decode's own scratch was, and N threads reading values of a hostile estore
    /// (blocks of up to 512 MiB) each allocated a block outside it.
    #[test]
    fn a_block_sized_step_of_an_embedded_value_is_allocated_under_the_decode_budget() {
        let bs = 32 << 20;
        let data: Vec<u8> = (0..2 * bs).map(|i| (i / 4096 % 251) as u8).collect();
        let params = CParams {
            codec: Codec::Lz4,
            typesize: 1,
            filters: [0; 6],
            blocksize: Blocksize::Explicit(bs),
            allow_special: false,
            ..CParams::default()
        };
        let chunk = compress(&data, &params).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("embed.b2e");
        std::fs::write(&path, one_chunk_frame(&chunk, data.len())).unwrap();
        let estore = Estore::new(Array::open_frame_at(&path, 0).unwrap()).unwrap();
        assert!(estore.entries().is_empty());
        take_largest_grant_here();
        let value = estore.read(0, bs as u64).unwrap();
        assert!(value == data[..bs], "the first block, decoded");
        let granted = take_largest_grant_here();
        assert!(
            granted >= bs,
            "a step of {bs} bytes was allocated under a grant of {granted} bytes"
        );
        // A value across both blocks, starting inside the first: right bytes, and no step
        // allocated outside a grant.
        let at = bs - 12_345;
        let value = estore.read(at as u64, 20 << 20).unwrap();
        assert!(value == data[at..at + (20 << 20)]);
        assert!(take_largest_grant_here() >= bs);
        // Past the estore's bytes: refused before anything is allocated.
        assert!(estore.read(2 * bs as u64 - 10, 11).is_err());
    }
}
