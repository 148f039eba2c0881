//! The new chunk list of an edit ([`plan`]: truncation, updates and appends applied to the
//! old chunk numbering, as [`Slot`]s) and the checks every commit shares before any
//! layout-specific rule: chunk indices, each new chunk's header and format, the chunk count
//! a frame index can hold, who may change the number of chunks or set [`Edit::shape0`].
//!
//! Knows chunk headers only (never chunk data) and writes nothing: every commit (frames,
//! bcolz carrays, ctable columns) calls [`plan`] first, then applies its own size rules
//! (`frame/layout.rs`, `bcolz.rs`, `table.rs`).

use std::path::Path;

use super::{Chunk, Edit, refused};
use crate::codec::{ChunkFormat, ChunkHeader, SpecialKind};
use crate::container::{Array, ChunkKind, ContainerError, Inner};

/// What the new chunk list of a 1-D edit looks like: for each new chunk, either an old chunk
/// kept as is or new bytes, plus the checks shared by every source kind.
#[derive(Debug)]
pub(super) enum Slot<'e> {
    /// Old chunk `i`, unchanged.
    Old(usize),
    /// New compressed bytes (read back when written) and their parsed header.
    New(&'e Chunk, ChunkHeader),
}

/// Applies truncate, updates and appends to the old chunk numbering (no size rules yet):
/// returns the new slot list. `format` is the chunk format the source needs. Every commit
/// goes through it (frames, bcolz carrays, ctable columns): the edit's checks that do not
/// depend on the layout are made here, [`Edit::shape0`] refused for a source that cannot
/// take it among them.
pub(super) fn plan<'e>(
    array: &Array,
    edit: &'e Edit,
    format: ChunkFormat,
) -> Result<Vec<Slot<'e>>, ContainerError> {
    let path = array.path();
    if edit.shape0.is_some() && !takes_shape0(array) {
        return Err(no_shape0(path));
    }
    if let (Some(n), Some(nd)) = (edit.shape0, array.nd_meta())
        && nd.shape.first() != Some(&n)
        && (nd.chunkshape.contains(&0) || nd.blockshape.contains(&0))
    {
        // python-blosc2 makes an empty array with chunks `(0,)`; no chunk grid can hold
        // another length (python-blosc2's `resize` refuses it too).
        return Err(refused(
            path,
            format!(
                "setting the first dimension to {n}: the chunk shape {:?} has a zero length",
                nd.chunkshape
            ),
        ));
    }
    let old_n = array.nchunks();
    let resizing = edit.truncate.is_some_and(|t| t != old_n) || !edit.appends.is_empty();
    if resizing {
        let one_d = match (&array.inner, array.nd_meta()) {
            (Inner::Bcolz(_), _) | (Inner::Frame(_), None) => true,
            // An N-dim array grows and shrinks by whole rows of its chunk grid along its
            // first axis (the chunks of a row are the last ones in C order), with its new
            // first dimension given: checked against the chunk count by the frame layout.
            (Inner::Frame(_), Some(nd)) => nd.shape.len() == 1 || edit.shape0.is_some(),
        };
        if !one_d {
            return Err(refused(
                path,
                format!(
                    "appending or truncating chunks of a {}-dimensional array (only 1-D sources can change their number of chunks)",
                    array.geometry().shape.len()
                ),
            ));
        }
    }
    let keep = match edit.truncate {
        Some(t) if t > old_n => {
            return Err(refused(
                path,
                format!("truncating to {t} chunks: the source has only {old_n}"),
            ));
        }
        Some(t) => t,
        None => old_n,
    };
    let mut slots: Vec<Slot<'e>> = (0..keep).map(Slot::Old).collect();
    let parse = |what: String, bytes: &'e Chunk| -> Result<ChunkHeader, ContainerError> {
        let h = ChunkHeader::parse(bytes.head())
            .map_err(|e| refused(path, format!("{what}: not a valid chunk: {e}")))?;
        let blosc2 = h.is_extended();
        let ok_format = match format {
            ChunkFormat::Blosc2 => blosc2 && h.version >= 3,
            ChunkFormat::Blosc1 => !blosc2 && h.version == 2,
        };
        if !ok_format {
            let want = match format {
                ChunkFormat::Blosc2 => "a Blosc2 chunk (32-byte header)",
                ChunkFormat::Blosc1 => "a Blosc1 chunk (version 2, 16-byte header)",
            };
            return Err(refused(
                path,
                format!(
                    "{what}: version {} flags 0x{:02x}, this source needs {want}",
                    h.version, h.flags
                ),
            ));
        }
        if h.cbytes != bytes.len() {
            return Err(refused(
                path,
                format!(
                    "{what}: header cbytes {} but {} bytes given",
                    h.cbytes,
                    bytes.len()
                ),
            ));
        }
        if h.is_vl() || h.is_lazy() {
            return Err(refused(
                path,
                format!("{what}: variable-length-block or lazy chunk"),
            ));
        }
        if h.nbytes == 0 {
            return Err(refused(path, format!("{what}: an empty chunk")));
        }
        Ok(h)
    };
    let mut seen = std::collections::HashSet::new();
    for (i, bytes) in &edit.updates {
        if *i >= keep {
            return Err(refused(
                path,
                format!("updating chunk {i}: the source has {keep} chunks after truncation"),
            ));
        }
        if !seen.insert(*i) {
            return Err(refused(path, format!("chunk {i} updated twice")));
        }
        let h = parse(format!("chunk {i}"), bytes)?;
        if let Some(s) = slots.get_mut(*i) {
            *s = Slot::New(bytes, h);
        }
    }
    for (k, bytes) in edit.appends.iter().enumerate() {
        let h = parse(format!("appended chunk {k}"), bytes)?;
        slots.push(Slot::New(bytes, h));
    }
    if slots.len() as u64 > crate::container::frame::MAX_NCHUNKS {
        return Err(refused(
            path,
            format!(
                "{} chunks: more than the {} a frame index can hold",
                slots.len(),
                crate::container::frame::MAX_NCHUNKS
            ),
        ));
    }
    if edit.attrs.as_ref().is_some_and(|a| !a.is_object()) {
        return Err(refused(path, "attrs: not a JSON object"));
    }
    Ok(slots)
}

/// Whether [`Edit::shape0`] can be set on `array`: a b2nd/caterva frame (a plain frame's
/// and a bcolz carray's length is what their chunks hold).
fn takes_shape0(array: &Array) -> bool {
    matches!(array.inner, Inner::Frame(_)) && array.nd_meta().is_some()
}

/// The refusal of an [`Edit::shape0`] by a source that cannot take it ([`takes_shape0`]).
pub(super) fn no_shape0(path: &Path) -> ContainerError {
    refused(
        path,
        "setting the first dimension of a source without a b2nd/caterva metalayer \
         (its length is what its chunks hold)",
    )
}

/// The special kind of a new Blosc2 chunk that is only its 32-byte header and stands for
/// zeros, NaN or uninitialised values (what a frame index can carry as a special offset).
pub(super) fn header_special(h: &ChunkHeader) -> Option<ChunkKind> {
    if h.cbytes != 32 {
        return None;
    }
    match h.special() {
        SpecialKind::Zeros => Some(ChunkKind::Zeros),
        SpecialKind::Nan => Some(ChunkKind::Nan),
        SpecialKind::Uninit => Some(ChunkKind::Uninit),
        SpecialKind::None | SpecialKind::Value => None,
    }
}
