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
        // the whole value) before it is decoded: outside the decoders' scratch budget.
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
            let filled = out.len();
            out.resize(filled + want, 0);
            let n = crate::codec::decompress_range(bytes, from, &mut out[filled..]).map_err(
                |source| ContainerError::Chunk {
                    path: a.path().to_path_buf(),
                    index: ci,
                    source,
                },
            )?;
            if n == 0 {
                return Err(bad(format!("chunk {ci} holds only {from} bytes")));
            }
            out.truncate(filled + n);
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
