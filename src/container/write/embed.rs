//! Edits of values embedded in a store's `embed.b2e` (`docs/format/STORES.md` 1.4): an embedded
//! leaf, or a `__vlmeta__` carrier of a store written with `threshold > 0`, is a cframe inside
//! the EmbedStore's byte stream. It is edited the way python-blosc2's EmbedStore overwrites a
//! key (delete, then add at `current_offset`): the value's cframe is copied out to a private
//! scratch file, the edit is committed to it with the ordinary frame commit and the result
//! compacted (no dead space), then the new cframe is appended to the estore's stream and the
//! key's `embed_map` entry and `current_offset` point at it. The old bytes stay as a hole, as
//! upstream leaves them.
//!
//! The estore change is one frame edit of `embed.b2e` (the partial last chunk extended,
//! further chunks appended, the `estore_metadata` vlmeta replaced; every other vlmeta key
//! keeps its stored bytes), committed like any leaf: in place by the frame commit for a
//! `.b2d`, by rebuilding the zip for a `.b2z` (`store.rs`). So a crash leaves the old or the
//! new store, as for any other member.

use serde_json::{Value, json};

use super::io::Io;
use super::{Edit, chunk_cparams, io_err, unsupported};
use crate::codec;
use crate::container::store::Collection;
use crate::container::{Array, ContainerError};

/// The estore edit that stores `edit` applied to the embedded value `key` (at `offset`,
/// `len` bytes of the stream of `estore`, the store's opened `embed.b2e`); `None` when the
/// edit changes nothing.
pub(super) fn estore_edit(
    store: &Collection,
    estore: &Array,
    key: &str,
    (offset, len): (u64, u64),
    edit: &Edit,
) -> Result<Option<Edit>, ContainerError> {
    if edit.is_empty() {
        return Ok(None);
    }
    let path = store.path();
    // Where the stream ends now (the new cframe goes there), checked before any work.
    let end = stream_end(estore)?;
    let bytes = store.read_embedded(offset, len)?;
    let scratch = tempfile::Builder::new()
        .prefix("b2fs-embed-edit-")
        .tempdir()
        .map_err(|e| io_err(path, e))?;
    let file = scratch.path().join("value.b2frame");
    std::fs::write(&file, &bytes).map_err(|e| io_err(&file, e))?;
    let value = Array::open_frame_at(&file, 0)?;
    super::commit(&value, edit)?;
    drop(value);
    super::compact::compact(&file, &mut |_, _| {})?;
    let cframe = std::fs::read(&file).map_err(|e| io_err(&file, e))?;

    let mut attrs = estore.attrs().clone();
    let meta = attrs
        .get_mut("estore_metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| unsupported(path, "embed.b2e has no estore_metadata map"))?;
    let current = meta.get("current_offset").and_then(Value::as_u64);
    if current.is_some_and(|c| c > end) {
        return Err(unsupported(
            path,
            format!("embed.b2e: current_offset {current:?} is past its {end} bytes"),
        ));
    }
    let map = meta
        .get_mut("embed_map")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| unsupported(path, "embed.b2e has no embed_map"))?;
    let stored_key = [key, key.trim_start_matches('/')]
        .into_iter()
        .find(|k| map.contains_key(*k))
        .ok_or_else(|| unsupported(path, format!("{key} is not in embed.b2e's embed_map")))?
        .to_owned();
    map.insert(
        stored_key,
        json!({"offset": end, "length": cframe.len() as u64}),
    );
    meta.insert("current_offset".into(), json!(end + cframe.len() as u64));

    let mut out = Edit {
        attrs: Some(attrs),
        ..Edit::default()
    };
    append_bytes(estore, &cframe, &mut out)?;
    Ok(Some(out))
}

/// Where the estore's stream ends as its chunks hold it (every chunk but the last full, the
/// last at most full), which must be what its header says: the new cframe is appended after
/// the last chunk's bytes and the map must point there. A header claiming more (fuzz target
/// `tree_edit`, one byte of `nbytes` changed) made the map point past the appended value: the
/// edit reported success and the attributes read back as `{}`. Refused instead (EOPNOTSUPP),
/// nothing written.
fn stream_end(estore: &Array) -> Result<u64, ContainerError> {
    let path = estore.path();
    let cs = estore.chunksize() as u64;
    let held = match estore.nchunks().checked_sub(1) {
        None => Some(0),
        Some(last) => {
            let chunk = estore.chunk_bytes(last)?;
            let info = codec::chunk_info(&chunk).map_err(|source| ContainerError::Chunk {
                path: path.to_path_buf(),
                index: last,
                source,
            })?;
            let tail = info.nbytes as u64;
            (tail <= cs)
                .then(|| (last as u64).checked_mul(cs)?.checked_add(tail))
                .flatten()
        }
    };
    match held {
        Some(held) if held == estore.nbytes() => Ok(held),
        _ => Err(unsupported(
            path,
            format!(
                "embed.b2e: its header says {} bytes, its chunks hold {} (damaged; not edited)",
                estore.nbytes(),
                held.map_or_else(
                    || "more than its chunk size allows".into(),
                    |h| h.to_string()
                )
            ),
        )),
    }
}

/// Adds to `out` the chunk edits that append `bytes` to the decompressed stream of
/// `estore` (typesize 1, fixed chunksize): the partial last chunk filled first, then whole
/// chunks, then a partial one.
fn append_bytes(estore: &Array, bytes: &[u8], out: &mut Edit) -> Result<(), ContainerError> {
    let path = estore.path();
    let cs = estore.chunksize();
    if cs == 0 || estore.typesize() != 1 {
        return Err(unsupported(
            path,
            "embed.b2e is not a typesize-1 SChunk of fixed-size chunks",
        ));
    }
    let cparams = chunk_cparams(estore)?;
    let compress = |index: usize, data: &[u8]| {
        codec::compress(data, &cparams).map_err(|source| ContainerError::Chunk {
            path: path.to_path_buf(),
            index,
            source,
        })
    };
    let n = estore.nchunks();
    let mut rest = bytes;
    if n > 0 {
        let last = n - 1;
        let mut data = codec::decompress(&estore.chunk_bytes(last)?).map_err(|source| {
            ContainerError::Chunk {
                path: path.to_path_buf(),
                index: last,
                source,
            }
        })?;
        if data.len() < cs {
            let take = (cs - data.len()).min(rest.len());
            data.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            out.updates.push((last, compress(last, &data)?.into()));
        }
    }
    for (k, piece) in rest.chunks(cs).enumerate() {
        // In memory: the value's whole cframe is (a value small enough to be embedded).
        out.appends.push(compress(n + k, piece)?.into());
    }
    Ok(())
}

/// Commits `estore_edit` to the store's `embed.b2e`: in place for a `.b2d`, by rebuilding
/// the zip for a `.b2z`.
pub(super) fn commit_estore(
    store: &Collection,
    estore: &Array,
    edit: &Edit,
    io: &mut Io,
) -> Result<(), ContainerError> {
    match store.zip() {
        Some(zip) => {
            let index = zip
                .find("embed.b2e")
                .ok_or_else(|| unsupported(store.path(), "a zip store without embed.b2e"))?;
            super::store::commit_zip_member(zip, index, edit, io)
        }
        None => super::commit_io(estore, edit, io),
    }
}
