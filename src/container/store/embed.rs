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

/// The largest embedded value read into memory (embedded values are small by design: below
/// the store's threshold).
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
        let mut out = Vec::with_capacity(len as usize);
        let mut at = offset;
        while at < end {
            let ci = (at / cs) as usize;
            let chunk = a.chunk_bytes(ci)?;
            let data =
                crate::codec::decompress(&chunk).map_err(|source| ContainerError::Chunk {
                    path: a.path().to_path_buf(),
                    index: ci,
                    source,
                })?;
            let from = (at - ci as u64 * cs) as usize;
            let to = ((end - ci as u64 * cs) as usize).min(data.len());
            if from >= to {
                return Err(bad(format!("chunk {ci} holds only {} bytes", data.len())));
            }
            out.extend_from_slice(&data[from..to]);
            at += (to - from) as u64;
        }
        Ok(out)
    }
}
