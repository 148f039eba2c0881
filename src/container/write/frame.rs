//! Commits to Blosc2 frames: contiguous frames by shadow append, sparse frames by fresh chunk
//! files and a renamed `chunks.b2frame`.
//!
//! Knows nothing of FUSE or of chunk data (chunk headers only). Spec: `docs/format/CONTAINERS.md`
//! 1.2-1.6 (header fields, metalayer section, index, trailer), 2 (sparse frames), 3.2 (variable
//! mode), 4.1 (vlmeta encoding), 4.3 (the b2nd shape int64), 6.2 and 6.3 (commit orders).
//!
//! A commit is laid out whole before its first write ([`layout::layout`]: every refusal leaves
//! the file as it was), its trailer built ([`bytes::vlmeta_layers`], [`bytes::trailer`]), and
//! only then written in the order of its kind of frame.
//!
//! The parts: this file holds the entry ([`commit`]) and the freshness check the commits and
//! compaction share; `layout.rs` validates the edit's sizes, decides fixed vs variable mode and
//! maps each chunk slot to its index entry (re-encoding special chunks where variable mode
//! needs it); `bytes.rs` builds the bytes both kinds of frame write besides chunks (special
//! index entries, the memcpyed index chunk, the trailer and its vlmetalayers, the old header
//! read and patched in place); `contiguous.rs` the shadow-append commit of a contiguous frame
//! and its undo; `sparse.rs` the commit of a sparse frame by fresh chunk files and a renamed
//! `chunks.b2frame`.

mod bytes;
mod contiguous;
mod layout;
mod sparse;

use serde_json::Value;

use super::io::Io;
use super::{Edit, changed};
use crate::container::frame::Frame;
use crate::container::{Array, ContainerError, SourceKind};

pub(super) use bytes::{index_chunk, trailer};

/// Refuses when the source changed since `array` was opened (its view would be stale).
/// Whether `attrs` can become `array`'s vlmetalayers (a JSON object, at most
/// [`super::MAX_WRITE_VLMETALAYERS`], names within 31 bytes, values python-blosc2's encoding
/// holds): what a commit of them would refuse, without writing anything.
pub(super) fn check_vlmeta(array: &Array, attrs: &Value) -> Result<(), ContainerError> {
    bytes::vlmeta_layers(array, Some(attrs)).map(|_| ())
}

pub(super) fn check_fresh(array: &Array) -> Result<(), ContainerError> {
    if array.changed_on_disk()? {
        return Err(changed(
            array.path(),
            "the frame header, length or mtime differ",
        ));
    }
    Ok(())
}

/// Commits `edit` to the frame `f` of `array` (contiguous or sparse).
pub(super) fn commit(
    array: &Array,
    f: &Frame,
    edit: &Edit,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let l = layout::layout(array, f, edit)?;
    let layers = bytes::vlmeta_layers(array, edit.attrs.as_ref())?;
    let trailer = trailer(&layers);
    match array.kind {
        SourceKind::Sframe => sparse::commit_sparse(array, f, &l, &layers, &trailer, io),
        _ => contiguous::commit_contiguous(array, f, &l, &layers, &trailer, io),
    }
}
