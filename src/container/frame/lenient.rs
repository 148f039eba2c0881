//! A lenient open of a damaged contiguous frame, for `b2fs verify` and `b2fs salvage` only
//! (mounts and every other caller open strictly): the header prefix and the metalayers must
//! parse (without them nothing can be located), but a damaged index, trailer or vlmetalayer
//! is recorded as a [`Damaged`] part instead of failing the open.
//!
//! - **Trailer or a vlmetalayer**: the chunks are still located by the index; the attributes
//!   that cannot be read are lost.
//! - **A contiguous frame cut short** (the file ends before its `frame_len`): the trailer and
//!   its attributes are lost; the index is read where the header puts it when the cut is
//!   after it, else the chunks are located by walking as above when the whole chunk area is
//!   there. A cut inside the chunk area is refused: which chunk each whole one before the cut
//!   is cannot be told (a chunk of zeros or NaN is stored in the index alone).
//! - **Index**: the chunks are located by walking their 32-byte headers from the start of the
//!   chunk area (C-Blosc2 appends each chunk right after the previous one), and only when the
//!   result is unambiguous: a fixed chunk size, every header declaring that size (the last
//!   chunk the remainder of `nbytes`), as many chunks as `nbytes / chunksize` and the walk
//!   ending exactly at `cbytes`. A frame with special chunks (zeros, NaN: no bytes in the
//!   chunk area), updated chunks (their old bytes stay as dead space) or a destroyed chunk
//!   header cannot be walked safely: which bytes are chunk `i` is then unknown, and the open
//!   fails saying so.
//! - **A sparse frame's index** (in its `chunks.b2frame`): chunk `i` is taken to be the file
//!   `%08X.chunk` named `i`, which is how C-Blosc2 names the chunks it appends, and only when
//!   the directory holds exactly the files `0 .. nbytes / chunksize`: a missing file may have
//!   been a special chunk (zeros, NaN: no file) and an extra one an updated chunk, so which
//!   file is chunk `i` is then unknown, and the open fails saying so.
//!
//! Both rebuilt indexes assume chunks in the order they were appended: a frame whose chunks
//! were inserted or moved (`insert_chunk`) stores them in another order than its index, and
//! nothing left in the file tells which.

use std::path::Path;
use std::sync::Arc;

use super::index::{Index, MAX_NCHUNKS};
use super::{Frame, FrameInfo, sparse_chunk_file, sparse_chunk_id};
use crate::codec::ChunkHeader;
use crate::container::ContainerError;
use crate::container::source::{IoStats, Source};
use crate::error::display_chain;

/// A part of a frame a lenient open did without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damaged {
    /// The part (`index`, `trailer`, `vlmetalayer`) and why it cannot be read, one line.
    pub reason: String,
    /// Whether what it held was recovered (an index rebuilt from the chunk headers) rather
    /// than lost (attributes).
    pub recovered: bool,
}

impl Damaged {
    /// A part whose content is lost.
    pub(super) fn lost(part: &str, e: &ContainerError) -> Damaged {
        Damaged {
            reason: format!("{part} damaged: {}: what it held is lost", display_chain(e)),
            recovered: false,
        }
    }
}

impl Frame {
    /// Opens the contiguous frame file `path` leniently: the parts it did without are pushed
    /// to `damaged` ([`Damaged`]).
    ///
    /// # Errors
    /// As a strict open, for a damaged header or metalayers, or an index whose chunks cannot
    /// be located.
    pub(crate) fn open_lenient(
        path: &Path,
        stats: Arc<IoStats>,
        damaged: &mut Vec<Damaged>,
    ) -> Result<Frame, ContainerError> {
        if path.is_dir() {
            return Frame::open_lenient_sparse(path, stats, damaged);
        }
        let src = Source::open_mapped(path, Arc::clone(&stats))?;
        Frame::open_parsed(src, 0, None, stats, Some(damaged))
    }

    /// [`Frame::open_lenient`] of the sparse frame in directory `dir`.
    fn open_lenient_sparse(
        dir: &Path,
        stats: Arc<IoStats>,
        damaged: &mut Vec<Damaged>,
    ) -> Result<Frame, ContainerError> {
        let index = dir.join("chunks.b2frame");
        // As a strict open: the generation is taken before the index is read.
        let generation = super::retire::current(dir);
        let src = Source::open(&index, Arc::clone(&stats))?;
        let mut f = Frame::open_parsed(src, 0, Some(dir), stats, Some(damaged))?;
        f.generation = Some(generation);
        Ok(f)
    }
}

impl crate::container::Array {
    /// Opens the frame at `path` (a contiguous frame file, or a sparse frame's directory)
    /// leniently, for `b2fs verify` and `b2fs salvage`: a damaged index, trailer or
    /// vlmetalayer is done without (an index rebuilt from the chunk headers or the chunk
    /// files' names when that is unambiguous, attributes lost) and returned as a [`Damaged`]
    /// part.
    ///
    /// # Errors
    /// As [`crate::container::open`], for what a lenient open cannot do without.
    pub fn open_frame_lenient(
        path: &Path,
    ) -> Result<(crate::container::Array, Vec<Damaged>), ContainerError> {
        let stats = Arc::new(IoStats::default());
        let mut damaged = Vec::new();
        let f = Frame::open_lenient(path, Arc::clone(&stats), &mut damaged)?;
        let kind = if f.is_contiguous() {
            crate::container::SourceKind::Cframe
        } else {
            crate::container::SourceKind::Sframe
        };
        let a = Self::from_frame(path.to_path_buf(), kind, f, stats)?;
        Ok((a, damaged))
    }
}

/// The chunks of a contiguous frame whose index could not be read (`err`), located by
/// walking their headers; records the rebuilt index in `damaged`.
///
/// # Errors
/// `err`, saying why the chunks cannot be located without the index.
pub(super) fn locate(
    src: &Source,
    info: &FrameInfo,
    start: u64,
    err: ContainerError,
    damaged: &mut Vec<Damaged>,
) -> Result<(usize, Index), ContainerError> {
    match walk(src, info, start) {
        Ok(entries) => {
            damaged.push(Damaged {
                reason: format!(
                    "index damaged: {}: its {} chunks were located by walking their headers",
                    display_chain(&err),
                    entries.len()
                ),
                recovered: true,
            });
            Ok((entries.len(), Index::Explicit(entries)))
        }
        Err(why) => Err(ContainerError::Malformed {
            path: src.path().to_path_buf(),
            what: "index chunk".into(),
            offset: info.index_offset.unwrap_or(start + info.header_len),
            why: format!(
                "{}; the chunks cannot be located without it: {why}",
                display_chain(&err)
            ),
        }),
    }
}

/// The chunks of the sparse frame in `dir` whose index could not be read (`err`): chunk `i`
/// is the file named `i` when the directory holds exactly the files of the chunks the header
/// declares (module doc); records the rebuilt index in `damaged`.
///
/// # Errors
/// `err`, saying why the chunks cannot be located without the index.
pub(super) fn locate_sparse(
    src: &Source,
    info: &FrameInfo,
    dir: &Path,
    err: ContainerError,
    damaged: &mut Vec<Damaged>,
) -> Result<(usize, Index), ContainerError> {
    match by_names(info, dir) {
        Ok(n) => {
            damaged.push(Damaged {
                reason: format!(
                    "index damaged: {}: its {n} chunks were located by their files' names \
                     (chunk i in file i, as C-Blosc2 names the chunks it appends: a chunk \
                     inserted, or appended after a special chunk and updated since, would be \
                     misplaced)",
                    display_chain(&err)
                ),
                recovered: true,
            });
            Ok((n, Index::Explicit((0..n as i64).collect())))
        }
        Err(why) => Err(ContainerError::Malformed {
            path: src.path().to_path_buf(),
            what: "index chunk".into(),
            offset: info.index_offset.unwrap_or(info.header_len),
            why: format!(
                "{}; the chunks cannot be located without it: {why}",
                display_chain(&err)
            ),
        }),
    }
}

/// How many chunks the header of the sparse frame in `dir` declares, when the directory
/// holds exactly their files `00000000.chunk` onwards (module doc).
fn by_names(info: &FrameInfo, dir: &Path) -> Result<usize, String> {
    let size = u64::try_from(info.chunksize)
        .ok()
        .filter(|&c| c > 0)
        .ok_or("a variable-size frame (chunksize 0): the chunks' sizes cannot be checked")?;
    let n = info.nbytes.div_ceil(size);
    if n > MAX_NCHUNKS {
        return Err(format!("{n} chunks declared, more than a frame holds"));
    }
    let listing = std::fs::read_dir(dir).map_err(|e| format!("listing {}: {e}", dir.display()))?;
    // Bounded by the directory, never by the header's count.
    let mut ids: Vec<u64> = Vec::new();
    let mut extra: Vec<String> = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| format!("listing {}: {e}", dir.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.strip_suffix(".chunk").is_none_or(|h| h.len() != 8) {
            continue;
        }
        // Only C-Blosc2's own spelling: the reader opens exactly that name.
        match sparse_chunk_id(&name) {
            Some(id) if id < n => ids.push(id),
            _ => extra.push(name.into_owned()),
        }
    }
    ids.sort_unstable();
    ids.dedup();
    if (ids.len() as u64) < n {
        let first = ids
            .iter()
            .enumerate()
            .find(|&(i, &id)| id != i as u64)
            .map_or(ids.len() as u64, |(i, _)| i as u64);
        return Err(format!(
            "{} of the {n} chunk files the header declares are not there (the first: \
             {first:08X}.chunk): special chunks (zeros, NaN) have no file, so which file is \
             which chunk is unknown",
            n - ids.len() as u64
        ));
    }
    if !extra.is_empty() {
        extra.sort();
        return Err(format!(
            "{} chunk files beyond the {n} the header declares (the first: {}): updated or \
             inserted chunks, so which file is which chunk is unknown",
            extra.len(),
            extra[0]
        ));
    }
    // A file whose header declares another size than its place holds another chunk (the
    // short last chunk, appended after special chunks, lands at a smaller name). A header
    // that cannot be read says nothing of the place: that chunk is reported damaged.
    let last = info.nbytes - (n - 1) * size;
    for i in 0..n {
        let want = if i + 1 == n { last } else { size };
        let path = sparse_chunk_file(dir, i);
        let mut head = [0u8; 32];
        let read = std::fs::File::open(&path).and_then(|mut f| {
            use std::io::Read;
            f.read_exact(&mut head)
        });
        if let Ok(h) = read
            .map_err(drop)
            .and_then(|()| ChunkHeader::parse(&head).map_err(drop))
            && h.nbytes as u64 != want
        {
            return Err(format!(
                "{} says {} bytes, not the {want} of chunk {i}: it holds another chunk, so \
                     which file is which chunk is unknown",
                path.display(),
                h.nbytes
            ));
        }
    }
    Ok(n as usize)
}

/// The offsets (from the end of the header) of the chunks found one after the other in the
/// chunk area, when they are exactly the chunks the header declares (module doc). A file cut
/// short inside its chunk area is refused: the chunks before the cut are whole, but which
/// chunk each is cannot be told without the index (a chunk of zeros or NaN, which
/// python-blosc2 writes for every all-zero chunk, is stored in the index alone, so every
/// chunk after one would be misplaced; the count check that rules this out for a whole chunk
/// area has nothing to count).
fn walk(src: &Source, info: &FrameInfo, start: u64) -> Result<Vec<i64>, String> {
    let size = u64::try_from(info.chunksize)
        .ok()
        .filter(|&c| c > 0)
        .ok_or("a variable-size frame (chunksize 0): the chunks' sizes cannot be checked")?;
    let n = info.nbytes.div_ceil(size);
    if n > MAX_NCHUNKS || n > info.cbytes / 32 {
        return Err(format!(
            "{n} chunks declared, more than the chunk area of {} bytes holds",
            info.cbytes
        ));
    }
    let last = info.nbytes - (n - 1) * size;
    let base = start + info.header_len;
    let held = src.len().saturating_sub(base);
    if held < info.cbytes {
        return Err(format!(
            "the file ends inside the chunk area ({held} of its {} bytes): which chunk each \
             whole one before the end is cannot be told without the index (a chunk of zeros \
             or NaN is stored in the index alone: every chunk after one would be misplaced)",
            info.cbytes
        ));
    }
    // Bounded by the bytes there are, whatever the header claims.
    let mut entries = Vec::with_capacity(n.min(src.len() / 32) as usize);
    let mut pos = 0u64;
    while pos < info.cbytes {
        let i = entries.len() as u64;
        if i == n {
            return Err(format!(
                "bytes follow the {n} chunks the header declares at offset {}: dead space or \
                 updated chunks, so which bytes are which chunk is unknown",
                base + pos
            ));
        }
        let at = base + pos;
        let bytes = src
            .read_at(at, 32.min((info.cbytes - pos) as usize), "chunk header")
            .map_err(|e| display_chain(&e))?;
        let h = ChunkHeader::parse(&bytes)
            .map_err(|e| format!("chunk {i}'s header at offset {at}: {e}"))?;
        let want = if i + 1 == n { last } else { size };
        if h.nbytes as u64 != want {
            return Err(format!(
                "chunk {i}'s header at offset {at} says {} bytes, not {want}: a special chunk \
                 (no bytes) or a damaged header, so the chunks after it cannot be placed",
                h.nbytes
            ));
        }
        if h.cbytes < 32 || pos + h.cbytes as u64 > info.cbytes {
            return Err(format!(
                "chunk {i}'s header at offset {at} says {} compressed bytes, past the chunk \
                 area",
                h.cbytes
            ));
        }
        entries.push(pos as i64);
        pos += h.cbytes as u64;
    }
    if entries.len() as u64 != n {
        return Err(format!(
            "{} chunks in the chunk area, the header declares {n}: special chunks (zeros, \
             NaN) have no bytes there, so their places are unknown",
            entries.len()
        ));
    }
    Ok(entries)
}
