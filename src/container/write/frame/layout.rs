//! The layout of a frame commit, settled before its first write: the edit's chunk sizes
//! checked against the frame's (a plain frame's replaced chunks keep their size, a b2nd
//! array's every chunk has one), fixed vs variable mode decided (3.2, pitfall 5), each chunk
//! slot mapped to its index entry (kept, or bytes to store), special chunks re-encoded as
//! regular ones where variable mode cannot hold them, and a 1-D b2nd/caterva shape's new
//! first dimension.
//!
//! Spec: `docs/format/CONTAINERS.md` 1.5 (special index entries), 3.2 (variable mode).

use std::borrow::Cow;

use super::bytes::special_entry;
use crate::codec::{CParams, ChunkFormat, compress};
use crate::container::frame::Frame;
use crate::container::write::{
    Chunk, Edit, Slot, Spool, chunk_cparams, header_special, io_err, no_shape0, plan, refused,
    unsupported,
};
use crate::container::{Array, ChunkKind, ContainerError, SourceKind};

/// Re-encodes 32-byte zeros/NaN/uninitialised special chunks as regular chunks with the
/// array's chunk parameters (looked up once): C-Blosc2 3.3 cannot read such a chunk stored in
/// a frame (seen as "Cannot inspect the first chunk in frame"), only as a special offset,
/// which variable-size frames cannot have.
/// Each re-encoded chunk waits in the edit's spool when it has one (within the commit's
/// bound, like the edit's own chunks), else in memory.
struct Reencoder<'a> {
    array: &'a Array,
    params: Option<CParams>,
    spool: Option<&'a parking_lot::Mutex<Spool>>,
}

impl Reencoder<'_> {
    fn regular(&mut self, chunk: &[u8]) -> Result<Chunk, ContainerError> {
        let bytes = self.encode(chunk)?;
        match self.spool {
            None => Ok(bytes.into()),
            Some(spool) => spool.lock().add(bytes).map_err(|e| {
                io_err(
                    self.array.path(),
                    std::io::Error::new(
                        e.kind(),
                        format!("keeping a re-encoded special chunk in the commit's spool: {e}"),
                    ),
                )
            }),
        }
    }

    fn encode(&mut self, chunk: &[u8]) -> Result<Vec<u8>, ContainerError> {
        let path = self.array.path();
        let why = |e: crate::codec::CodecError| {
            unsupported(path, format!("re-encoding a special chunk: {e}"))
        };
        let data = crate::codec::decompress(chunk).map_err(why)?;
        if self.params.is_none() {
            self.params = Some(CParams {
                allow_special: false,
                ..chunk_cparams(self.array)?
            });
        }
        match &self.params {
            Some(p) => compress(&data, p).map_err(why),
            None => Err(unsupported(
                path,
                "re-encoding a special chunk: no parameters",
            )),
        }
    }
}

/// The new content of each chunk slot of the frame.
pub(super) enum Entry<'e> {
    /// Keep this index entry (an offset/id of a stored chunk, or a special code).
    Keep(i64),
    /// Store these bytes (new, or a special chunk materialised for variable mode), read back
    /// from the edit's spool when the commit writes them.
    Store(Cow<'e, Chunk>),
}

/// Everything a frame commit writes besides the chunk bytes.
pub(super) struct Layout<'e> {
    pub(super) entries: Vec<Entry<'e>>,
    pub(super) nbytes: u64,
    pub(super) chunksize: i32,
    pub(super) general_flags: u8,
    /// New first dimension of a 1-D b2nd/caterva shape.
    pub(super) shape0: Option<u64>,
}

/// Validates sizes, decides fixed vs variable mode, and maps slots to index entries.
pub(super) fn layout<'e>(
    array: &Array,
    f: &Frame,
    edit: &'e Edit,
) -> Result<Layout<'e>, ContainerError> {
    let path = array.path();
    let info = f.info();
    let slots = plan(array, edit, ChunkFormat::Blosc2)?;
    let old_n = array.nchunks();
    let n = slots.len();
    let mut sizes = Vec::with_capacity(n);
    for (p, s) in slots.iter().enumerate() {
        let size = match s {
            Slot::Old(i) => array.chunk_nbytes(*i)?,
            Slot::New(_, h) => {
                // Plain frames: an updated chunk other than the last keeps its size (the old
                // last chunk may grow when chunks are appended after it: nothing follows it
                // whose items would move).
                if array.nd_meta().is_none() && p + 1 < old_n.min(n) {
                    let old = array.chunk_nbytes(p)?;
                    if h.nbytes != old {
                        return Err(refused(
                            path,
                            format!(
                                "chunk {p}: {} bytes uncompressed, the chunk it replaces has {old}",
                                h.nbytes
                            ),
                        ));
                    }
                }
                h.nbytes
            }
        };
        sizes.push(size as u64);
    }
    // A frame that has no chunks keeps none (an attributes-only edit of an empty SChunk,
    // such as a store's `__vlmeta__` carrier): nothing is truncated.
    if n == 0 && old_n > 0 && array.kind == SourceKind::Cframe {
        return Err(refused(
            path,
            "truncating a contiguous frame to 0 chunks (not possible crash-safely in place)",
        ));
    }
    let mut chunksize = info.chunksize;
    let nd = array.nd_meta();
    if nd.is_some() {
        for (p, s) in slots.iter().enumerate() {
            let Slot::New(_, h) = s else { continue };
            if chunksize <= 0 || h.nbytes as u64 != chunksize as u64 {
                return Err(refused(
                    path,
                    format!(
                        "chunk {p}: {} bytes uncompressed, every chunk of this array has {chunksize}",
                        h.nbytes
                    ),
                ));
            }
        }
    } else if chunksize != 0 && n > 0 {
        let c = if chunksize > 0 {
            chunksize as u64
        } else {
            sizes[0]
        };
        let fixed = sizes[..n - 1].iter().all(|&s| s == c) && sizes[n - 1] <= c;
        chunksize = if fixed { c as i32 } else { 0 };
    }
    let variable = chunksize == 0;
    let switching = variable && info.chunksize != 0;
    let general_flags = if switching {
        (info.general_flags & 0xb0) | 0x40 | 3
    } else {
        info.general_flags
    };
    let mut re = Reencoder {
        array,
        params: None,
        spool: edit.spool.as_deref(),
    };
    let mut entries = Vec::with_capacity(n);
    for s in &slots {
        let e = match s {
            Slot::Old(i) => {
                let e = f
                    .index_entry(*i)
                    .ok_or_else(|| unsupported(path, format!("chunk {i}: no index entry")))?;
                if e < 0 && switching {
                    // Special offsets have no size in variable mode: store the chunk (its
                    // size is still known from the fixed-size header).
                    Entry::Store(Cow::Owned(re.regular(&array.chunk_bytes(*i)?)?))
                } else {
                    Entry::Keep(e)
                }
            }
            Slot::New(bytes, h) => match header_special(h) {
                None => Entry::Store(Cow::Borrowed(bytes)),
                // A special offset only for a full-size chunk of a fixed-size frame (C-Blosc2
                // synthesises NaN for typesize 4 and 8 only): a partial special last chunk
                // would become unreadable once C-Blosc2 appends and switches to variable
                // mode.
                Some(kind) => match special_entry(kind) {
                    Some(code)
                        if !variable
                            && h.nbytes as u64 == chunksize as u64
                            && (kind != ChunkKind::Nan || matches!(info.typesize, 4 | 8)) =>
                    {
                        Entry::Keep(code)
                    }
                    _ => {
                        let special = bytes.bytes().map_err(|e| io_err(path, e))?;
                        Entry::Store(Cow::Owned(re.regular(&special)?))
                    }
                },
            },
        };
        entries.push(e);
    }
    let resized = n != old_n;
    let shape0 = match (nd, edit.shape0) {
        (Some(_), Some(want)) => Some(explicit_shape0(array, n, want)?),
        // Refused by `plan` already.
        (None, Some(_)) => return Err(no_shape0(path)),
        (Some(nd), None) if resized => {
            let cs0 = nd.chunkshape.first().copied().unwrap_or(0);
            let cover = (n as u64).saturating_mul(cs0);
            let old = nd.shape.first().copied().unwrap_or(0);
            Some(if n > old_n { cover } else { old.min(cover) })
        }
        _ => None,
    };
    Ok(Layout {
        entries,
        nbytes: sizes.iter().sum(),
        chunksize,
        general_flags,
        shape0,
    })
}

/// `want`, the first dimension [`Edit::shape0`] asks of the b2nd/caterva array `array` left
/// with `n` chunks, when those chunks are whole rows of its chunk grid (the other dimensions
/// unchanged) and `want` lies in the last row of them.
pub(super) fn explicit_shape0(array: &Array, n: usize, want: u64) -> Result<u64, ContainerError> {
    let path = array.path();
    let n = n as u64;
    if n == 0 && want == 0 {
        // Every chunk removed (a sparse frame; a contiguous one refuses that itself).
        return Ok(0);
    }
    let Some(grid) = array.grid().filter(|g| g.ndim() > 0) else {
        return Err(refused(
            path,
            "setting the first dimension of an array without a valid b2nd grid",
        ));
    };
    let cs0 = array.nd_meta().map_or(0, |nd| nd.chunkshape[0]);
    let per_row: u64 = grid.chunks_per_row().unwrap_or(0);
    let fits = cs0 > 0
        && per_row > 0
        && n > 0
        && n.is_multiple_of(per_row)
        && want > (n / per_row - 1).saturating_mul(cs0)
        && want <= (n / per_row).saturating_mul(cs0);
    if !fits {
        return Err(refused(
            path,
            format!("a first dimension of {want} with {n} chunks of {per_row} per row of {cs0}"),
        ));
    }
    Ok(want)
}
