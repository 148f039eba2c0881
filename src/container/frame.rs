//! Blosc2 frames, contiguous (a `.b2frame`/`.b2nd` file) and sparse (a directory with
//! `chunks.b2frame` and one `%08X.chunk` file per stored chunk): header, fixed metalayers,
//! chunk index, trailer with vlmetalayers, and access to each chunk's compressed bytes.
//!
//! This module does not decode chunk *data* and knows nothing of FUSE or caches; it calls the
//! codec only for the index chunk and the vlmetalayer contents, which are Blosc2 chunks.
//!
//! Spec: the CFrame format (seed 002 of `docs/format/README.md`) and
//! `docs/format/CONTAINERS.md` sections 1 and 2, which correct the seed where real bytes
//! differ: chunk offsets are relative to the **end** of the header; the frame header stores
//! the C API compcode (not the chunk compformat); the trailer version is a fixint and its
//! vlmetalayers are not wrapped in a bin32; nchunks is derived (section 1.2); special
//! offsets `0x81...`/`0x82...`/`0x84...` carry no bytes; `fill_special` writes the index as
//! one repeated-value special chunk.
//!
//! Submodules: `header` (the 87-byte prefix, [`FrameInfo`], the metalayer/vlmetalayer
//! sections, the trailer tail constants), `index` (nchunks, index decoding, special codes,
//! synthesised special chunks), and `chunks` (access to each chunk's bytes). This file opens a
//! frame from the files on disk.
//!
//! Open path (section 1.7; opening reads only these bytes, never chunk data):
//! 1. the 87-byte header prefix at the frame start F (magic, lengths, flags, exact markers);
//! 2. the 23-byte trailer tail at F + frame_len - 23 (`ce` + trailer_len);
//! 3. the rest of the header (metalayer section) up to header_len;
//! 4. the index chunk (if nbytes > 0) at F + header_len + cbytes (sparse: F + header_len),
//!    decoded into one `i64` per chunk, or kept as one value when it is a special chunk;
//!    every regular offset is bound-checked against cbytes (sparse: a u32 chunk id); a
//!    repeated stored entry may not claim more chunks than cbytes holds 32-byte headers;
//! 5. the trailer, whose vlmetalayer chunks are decompressed and mapped to JSON.
//!
//! Beyond C-Blosc2: a special index entry in a variable-size frame (chunksize 0) has no size,
//! and C-Blosc2 cannot read it back although it writes such frames (section 1.5, "Hazard").
//! b2fs infers the size once, on first use, from the header nbytes minus the stored chunks'
//! sizes (their 32-byte headers are read), divided evenly among the special chunks; with more
//! than one special chunk the result must equal the largest stored chunk. Otherwise reading
//! such a chunk is an error.
//!
//! Invariants: a file longer than frame_len is fine (bytes after the frame are ignored); every
//! read allocation is bounded by the real file size; decoded data is bounded too: the index by
//! [`INDEX_LIMIT_FLOOR`] or 64 x the file size, whichever is larger (a special repeated-value
//! index is never expanded), each vlmetalayer by [`VLMETA_MAX_RATIO`] x its stored size (at
//! least [`VLMETA_LIMIT_FLOOR`]).

mod chunks;
mod header;
mod index;
pub(crate) mod lenient;
pub(crate) mod retire;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

pub use header::{
    FrameInfo, HEADER_PREFIX_LEN, MAGIC, MAX_METALAYERS, MAX_VLMETALAYERS, TRAILER_TAIL_LEN,
};
pub use index::{INDEX_LIMIT_FLOOR, MAX_NCHUNKS};

pub(crate) use self::chunks::{sparse_chunk_file, sparse_chunk_id};
use self::header::{Prefix, parse_layers, parse_prefix};
use self::index::{Index, IndexError, Slot, classify, decode_index, le_i32};
pub(crate) use self::index::{header_kind, special_chunk};
pub use self::lenient::Damaged;
use super::files::Files;
use super::msgpack::{Cursor, Fault};
use super::source::{IoStats, Source};
use super::{ChunkKind, ContainerError, Metalayer, attrs};
use crate::codec::Decoder;

/// A vlmetalayer may decode to at most this many bytes per stored byte (and at least
/// [`VLMETA_LIMIT_FLOOR`]), so a 32-byte special chunk cannot claim 64 MiB of attributes.
pub const VLMETA_MAX_RATIO: usize = 4096;
/// Every vlmetalayer may decode to this many bytes.
pub const VLMETA_LIMIT_FLOOR: usize = 1 << 20;

/// The decode limit of one vlmetalayer stored in `stored` bytes.
fn vlmeta_limit(stored: usize, overall: usize) -> usize {
    stored
        .saturating_mul(VLMETA_MAX_RATIO)
        .max(VLMETA_LIMIT_FLOOR)
        .min(overall)
}

/// A vlmetalayer of the trailer.
#[derive(Debug, Clone, PartialEq)]
pub struct Vlmetalayer {
    /// Its name.
    pub name: String,
    /// The stored Blosc2 chunk.
    pub chunk: Vec<u8>,
    /// The decompressed content (msgpack for python-blosc2 writers).
    pub content: Vec<u8>,
    /// The content mapped to JSON ([`attrs::content_to_json`]).
    pub json: Value,
}

/// What a range decode of a mapped chunk is counted as having read (header, block-start
/// table and a block's streams) toward dropping the mapping's pages (`mapped.rs`).
const PARTIAL_TOUCH: usize = 256 << 10;

/// An opened frame.
#[derive(Debug)]
pub(crate) struct Frame {
    src: Source,
    /// The sparse frame's directory (`None` for a contiguous frame).
    dir: Option<PathBuf>,
    /// Where the sparse frame's chunk files are opened from.
    pub(crate) files: Files,
    stats: Arc<IoStats>,
    info: FrameInfo,
    nchunks: usize,
    index: Index,
    metalayers: Vec<Metalayer>,
    vlmeta: Vec<Vlmetalayer>,
    /// The size of every special chunk of a variable-size frame, inferred on first use.
    variable_special_size: OnceLock<Option<usize>>,
    /// The 87-byte prefix as read at open (for [`Frame::changed_on_disk`]).
    prefix: Vec<u8>,
    /// A local sparse frame's version span: the chunk files later commits replace stay until
    /// it is dropped ([`retire`]).
    generation: Option<Arc<retire::Generation>>,
}

impl Frame {
    /// Opens the frame stored in `path` starting at byte `start`; `sparse_dir` is the sparse
    /// frame's directory when `path` is its `chunks.b2frame`.
    pub(crate) fn open(
        path: &Path,
        start: u64,
        sparse_dir: Option<&Path>,
        stats: Arc<IoStats>,
    ) -> Result<Frame, ContainerError> {
        // Contiguous frames are mapped: their chunks decode straight from the page cache.
        let src = if sparse_dir.is_none() {
            Source::open_mapped(path, Arc::clone(&stats))?
        } else {
            Source::open(path, Arc::clone(&stats))?
        };
        Frame::open_source(src, start, sparse_dir, stats)
    }

    /// [`Frame::open`] on an already opened source (a local file or a byte source such as a
    /// remote object). A byte source is told where the stored chunks lie
    /// ([`super::source::ByteSource::chunk_extents`]), so it can fetch a chunk in one request.
    pub(crate) fn open_source(
        src: Source,
        start: u64,
        sparse_dir: Option<&Path>,
        stats: Arc<IoStats>,
    ) -> Result<Frame, ContainerError> {
        Frame::open_source_in(&Files::Local, src, start, sparse_dir, stats)
    }

    /// [`Frame::open_source`] for a frame whose sparse chunk files are opened through `files`.
    pub(crate) fn open_source_in(
        files: &Files,
        src: Source,
        start: u64,
        sparse_dir: Option<&Path>,
        stats: Arc<IoStats>,
    ) -> Result<Frame, ContainerError> {
        // Taken before the index is read: a commit meanwhile ends this generation, so the
        // files of the version read stay while this frame is open.
        let generation = match (sparse_dir, files) {
            (Some(dir), Files::Local) => Some(retire::current(dir)),
            _ => None,
        };
        let mut frame = Frame::open_parsed(src, start, sparse_dir, stats, None)?;
        frame.files = files.clone();
        frame.generation = generation;
        if let (Some(bytes), None) = (frame.src.byte_source(), &frame.dir) {
            bytes.chunk_extents(frame.chunk_starts(), frame.chunk_area_end());
        }
        Ok(frame)
    }

    /// The absolute start of every stored chunk of a contiguous frame, sorted, distinct.
    fn chunk_starts(&self) -> Vec<u64> {
        let base = self.info.start + self.info.header_len;
        let mut starts: Vec<u64> = (0..self.nchunks)
            .filter_map(|i| match self.slot(i) {
                Ok(Slot::Stored(o)) => Some(base + o),
                _ => None,
            })
            .collect();
        starts.sort_unstable();
        starts.dedup();
        starts
    }

    /// The absolute end of a contiguous frame's chunk area.
    fn chunk_area_end(&self) -> u64 {
        self.info.start + self.info.header_len + self.info.cbytes
    }

    /// Opens a frame from `src`. With `lenient` (for `b2fs verify` and `b2fs salvage`:
    /// [`lenient`]), a damaged index, trailer or vlmetalayer is recorded there instead of
    /// failing the open, and done without (an index rebuilt from the chunk headers, or a
    /// sparse frame's chunk file names, when that is unambiguous; attributes lost).
    fn open_parsed(
        src: Source,
        start: u64,
        sparse_dir: Option<&Path>,
        stats: Arc<IoStats>,
        mut lenient: Option<&mut Vec<Damaged>>,
    ) -> Result<Frame, ContainerError> {
        let path = &src.path().to_path_buf();
        let mal = malformed(path);
        let fault = |what: &str, offset: u64, why: String| mal(Fault::new(what, offset, why));

        // 1. Header prefix.
        let prefix = src.read_at(start, HEADER_PREFIX_LEN, "frame header")?;
        let Prefix {
            mut info,
            nbytes,
            cbytes,
        } = parse_prefix(&prefix, start).map_err(mal)?;
        let want_type = u8::from(sparse_dir.is_some());
        if info.frame_type != want_type {
            let kinds = ["contiguous", "sparse"];
            return Err(fault(
                "frame_type",
                start + 26,
                format!(
                    "frame type {} in a {} frame",
                    info.frame_type,
                    kinds[usize::from(want_type)]
                ),
            ));
        }
        let avail = src.len().saturating_sub(start);
        // Lenient: a contiguous frame cut short (a copy or download interrupted) loses its
        // trailer and attributes, and its index when the cut is before it (the chunks are then
        // located by walking their headers, `lenient::locate`, which refuses a cut inside the
        // chunk area); a file that ends with a whole trailer is not cut, its frame_len is
        // damaged (below, at the trailer).
        let declared_len = info.frame_len;
        let mut truncated = false;
        if info.frame_len > avail {
            match lenient.as_deref_mut() {
                Some(_)
                    if sparse_dir.is_none()
                        && nbytes > 0
                        && avail >= info.header_len + TRAILER_TAIL_LEN as u64 =>
                {
                    info.frame_len = avail;
                    truncated = true;
                }
                _ => {
                    let hint = if sparse_dir.is_none() {
                        " (cut short? `b2fs verify` says what `b2fs salvage` can keep)"
                    } else {
                        ""
                    };
                    return Err(fault(
                        "frame_len",
                        start + 16,
                        format!(
                            "frame_len {} exceeds the {avail} bytes of the file after the \
                             frame start{hint}",
                            info.frame_len
                        ),
                    ));
                }
            }
        }
        let abs = |o: u64| start + o;

        // 2. Trailer tail.
        let tail_at = abs(info.frame_len - TRAILER_TAIL_LEN as u64);
        let read_tail = || -> Result<u64, ContainerError> {
            let tail = src.read_at(tail_at, TRAILER_TAIL_LEN, "trailer tail")?;
            let mut tc = Cursor::new(&tail, tail_at);
            tc.expect(0xce, "trailer_len").map_err(mal)?;
            let trailer_len = u64::from(tc.be_u32("trailer_len").map_err(mal)?);
            if trailer_len < 25 || trailer_len > info.frame_len - HEADER_PREFIX_LEN as u64 {
                return Err(fault(
                    "trailer_len",
                    tail_at + 1,
                    format!("{trailer_len} outside [25, frame_len - 87]"),
                ));
            }
            Ok(trailer_len)
        };
        // Lenient: without the trailer's length, the index is read up to the frame's end
        // (its chunk says its own length) and the trailer is lost.
        let trailer_len = match (read_tail(), lenient.as_deref_mut()) {
            (Ok(n), Some(damaged)) if truncated => {
                damaged.push(Damaged {
                    reason: format!(
                        "frame_len damaged: it says {declared_len} bytes, the file holds \
                         {avail} from the frame's start and ends with a whole trailer: the \
                         frame is taken to end there"
                    ),
                    recovered: true,
                });
                Some(n)
            }
            (_, Some(damaged)) if truncated => {
                damaged.push(Damaged {
                    reason: format!(
                        "truncated: the frame is {declared_len} bytes, the file holds {avail} \
                         from its start: what lay past the end is lost (the trailer with the \
                         attributes, and the index when the cut is before it)"
                    ),
                    recovered: false,
                });
                None
            }
            (Ok(n), _) => Some(n),
            (Err(e), Some(damaged)) if nbytes > 0 => {
                damaged.push(Damaged::lost("trailer", &e));
                None
            }
            (Err(e), _) => return Err(e),
        };
        info.trailer_len = trailer_len.unwrap_or(0);

        // 3. The rest of the header: the metalayers.
        let mut header = prefix.clone();
        let rest = info.header_len as usize - HEADER_PREFIX_LEN;
        src.read_into(
            abs(HEADER_PREFIX_LEN as u64),
            rest,
            "frame header",
            &mut header,
        )?;
        let metalayers = parse_layers(
            &header,
            start,
            HEADER_PREFIX_LEN,
            MAX_METALAYERS,
            "metalayer section",
        )
        .map_err(mal)?
        .into_iter()
        .map(|(name, raw, _)| Metalayer {
            json: attrs::content_to_json(raw),
            name,
            raw: raw.to_vec(),
        })
        .collect::<Vec<_>>();

        // 4. nchunks and the index.
        let data_end = info.frame_len - trailer_len.unwrap_or(0);
        let limit = INDEX_LIMIT_FLOOR
            .max(usize::try_from(src.len().saturating_mul(64)).unwrap_or(usize::MAX));
        // (A truncated frame's index is read where the header puts it, up to the end of the
        // file: a cut in the trailer leaves it whole.)
        let read = read_index(
            &src,
            &mut info,
            start,
            sparse_dir,
            (nbytes, cbytes),
            data_end,
            limit,
        );
        let (nchunks, index) = match (read, lenient.as_deref_mut()) {
            (Ok(read), _) => read,
            (Err(e), Some(damaged)) if nbytes > 0 => match sparse_dir {
                None => lenient::locate(&src, &info, start, e, damaged)?,
                Some(dir) => lenient::locate_sparse(&src, &info, dir, e, damaged)?,
            },
            (Err(e), _) => return Err(e),
        };

        // 5. Trailer.
        let t_start = if nbytes > 0 {
            data_end
        } else {
            info.header_len
        };
        let t_len = (info.frame_len - t_start) as usize;
        let trailer = match trailer_len {
            Some(_) => src.read_at(abs(t_start), t_len, "trailer")?,
            None => Vec::new(),
        };
        let layers = match trailer_len.map(|_| {
            parse_layers(&trailer, abs(t_start), 2, MAX_VLMETALAYERS, "trailer").map_err(mal)
        }) {
            None => Vec::new(),
            Some(Ok(layers)) => layers,
            Some(Err(e)) => match lenient.as_deref_mut() {
                Some(damaged) => {
                    damaged.push(Damaged::lost("trailer", &e));
                    Vec::new()
                }
                None => return Err(e),
            },
        };
        let mut vlmeta = Vec::with_capacity(layers.len());
        for (name, chunk, at) in layers {
            let content = Decoder::with_limit(vlmeta_limit(chunk.len(), limit))
                .decompress(chunk)
                .map_err(|source| ContainerError::Vlmeta {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    offset: at,
                    source,
                });
            let content = match (content, lenient.as_deref_mut()) {
                (Ok(c), _) => c,
                (Err(e), Some(damaged)) => {
                    damaged.push(Damaged::lost("vlmetalayer", &e));
                    continue;
                }
                (Err(e), None) => return Err(e),
            };
            vlmeta.push(Vlmetalayer {
                json: attrs::content_to_json(&content),
                name,
                chunk: chunk.to_vec(),
                content,
            });
        }

        Ok(Frame {
            src,
            dir: sparse_dir.map(Path::to_path_buf),
            files: Files::Local,
            stats,
            info,
            nchunks,
            index,
            metalayers,
            vlmeta,
            variable_special_size: OnceLock::new(),
            prefix,
            generation: None,
        })
    }

    /// Whether the frame changed since it was opened: its file's length or modification time
    /// differ, or its 87-byte header prefix (frame_len, nbytes, cbytes, ...) does. Reads 87
    /// bytes. C-Blosc2 changes frame_len with almost every mutation (`docs/format/CONTAINERS.md`
    /// 3.6); the mtime catches same-length edits too.
    pub(crate) fn changed_on_disk(&self) -> Result<bool, ContainerError> {
        if let Some(bytes) = self.src.byte_source() {
            return Ok(bytes.changed());
        }
        let now = match Source::open(self.src.path(), Arc::clone(&self.stats)) {
            Ok(now) => now,
            // Gone or replaced by something unreadable: changed.
            Err(ContainerError::Io { .. } | ContainerError::NotAContainer { .. }) => {
                return Ok(true);
            }
            Err(e) => return Err(e),
        };
        if now.len() != self.src.len() || now.mtime() != self.src.mtime() {
            return Ok(true);
        }
        let prefix = now.read_at(self.info.start, HEADER_PREFIX_LEN, "frame header")?;
        Ok(prefix != self.prefix)
    }

    /// Whether the file is what the frame was opened from but for its modification time
    /// (after an undone commit could not give that back): the same length, and the same
    /// header prefix; `was` is the file's state before the commit's writes, which must be
    /// the opened one, mtime included (else another writer came first).
    pub(crate) fn same_but_mtime(&self, was: &std::fs::Metadata) -> Result<bool, ContainerError> {
        if self.src.byte_source().is_some()
            || was.len() != self.src.len()
            || was.modified().ok() != Some(self.src.mtime())
        {
            return Ok(false);
        }
        let now = match Source::open(self.src.path(), Arc::clone(&self.stats)) {
            Ok(now) => now,
            Err(ContainerError::Io { .. } | ContainerError::NotAContainer { .. }) => {
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        if now.len() != self.src.len() {
            return Ok(false);
        }
        let prefix = now.read_at(self.info.start, HEADER_PREFIX_LEN, "frame header")?;
        Ok(prefix == self.prefix)
    }

    /// The header fields.
    pub(crate) fn info(&self) -> &FrameInfo {
        &self.info
    }

    /// The file another writer changes when it changes the frame (the frame file, or a
    /// sparse frame's `chunks.b2frame`); none for a remote source.
    pub(crate) fn watched_files(&self) -> Vec<PathBuf> {
        if self.src.byte_source().is_some() {
            return Vec::new();
        }
        vec![self.src.path().to_path_buf()]
    }

    /// Whether the frame is contiguous (its chunks live in the frame file).
    pub(crate) fn is_contiguous(&self) -> bool {
        self.dir.is_none()
    }

    /// The file holding the header (the frame file or `chunks.b2frame`).
    pub(crate) fn source(&self) -> &Source {
        &self.src
    }

    /// Number of chunks.
    pub(crate) fn nchunks(&self) -> usize {
        self.nchunks
    }

    /// Fixed metalayers in header order.
    pub(crate) fn metalayers(&self) -> &[Metalayer] {
        &self.metalayers
    }

    /// Vlmetalayers in trailer order.
    pub(crate) fn vlmetalayers(&self) -> &[Vlmetalayer] {
        &self.vlmeta
    }
}

/// Step 4 of opening a frame: nchunks and the index chunk (between the chunk area, or the
/// header for a sparse frame, and `data_end`), every stored entry bound-checked.
fn read_index(
    src: &Source,
    info: &mut FrameInfo,
    start: u64,
    sparse_dir: Option<&Path>,
    (nbytes, cbytes): (i64, i64),
    data_end: u64,
    limit: usize,
) -> Result<(usize, Index), ContainerError> {
    let path = &src.path().to_path_buf();
    let mal = malformed(path);
    let fault = |what: &str, offset: u64, why: String| mal(Fault::new(what, offset, why));
    let abs = |o: u64| start + o;
    let (nchunks, index) = if nbytes == 0 {
        (0, Index::Explicit(Vec::new()))
    } else {
        if info.chunksize < 0 {
            return Err(fault(
                "chunksize",
                start + 58,
                format!("chunksize {} with nbytes {nbytes}", info.chunksize),
            ));
        }
        let idx_start = if sparse_dir.is_some() {
            info.header_len
        } else {
            info.header_len.saturating_add(cbytes as u64)
        };
        if idx_start >= data_end {
            return Err(fault(
                "cbytes",
                start + 39,
                format!("index would start at {idx_start}, at or after the trailer at {data_end}"),
            ));
        }
        let region_len = (data_end - idx_start) as usize;
        info.index_offset = Some(abs(idx_start));
        info.index_len = region_len as u64;
        let region = src.read_at(abs(idx_start), region_len, "index chunk")?;
        decode_index(&region, info, abs(idx_start), limit).map_err(|e| match e {
            IndexError::Fault(f) => mal(f),
            IndexError::Codec(source) => ContainerError::Chunk {
                path: path.to_path_buf(),
                index: usize::MAX,
                source,
            },
        })?
    };
    // Bound-check stored entries.
    let check = |i: usize, e: i64| -> Result<(), ContainerError> {
        match classify(e) {
            None => Err(fault(
                "index entry",
                info.index_offset.unwrap_or(0),
                format!("chunk {i}: invalid special value 0x{:016x}", e as u64),
            )),
            Some(Slot::Stored(o)) => {
                let ok = if sparse_dir.is_some() {
                    o <= u64::from(u32::MAX)
                } else {
                    o.checked_add(32).is_some_and(|end| end <= info.cbytes)
                };
                if ok {
                    Ok(())
                } else {
                    Err(fault(
                        "index entry",
                        info.index_offset.unwrap_or(0),
                        format!(
                            "chunk {i}: offset {o} outside the chunk area of {} bytes",
                            info.cbytes
                        ),
                    ))
                }
            }
            Some(Slot::Special(_)) => Ok(()),
        }
    };
    match &index {
        Index::Explicit(v) => {
            for (i, &e) in v.iter().enumerate() {
                check(i, e)?;
            }
        }
        Index::Repeated(e) => {
            if nchunks > 0 {
                check(0, *e)?;
            }
            // Issue 22: every chunk at one stored offset (or chunk file). C-Blosc2 never
            // shares a chunk's bytes between chunks; more chunks than the chunk area holds
            // chunk headers is a count the file cannot hold, refused here at no cost
            // rather than walked chunk by chunk (hostile inputs declare 200 M).
            let stored = matches!(classify(*e), Some(Slot::Stored(_)));
            let room = info.cbytes / 32;
            if stored && nchunks > 1 && nchunks as u64 > room {
                return Err(fault(
                    "index chunk",
                    info.index_offset.unwrap_or(0),
                    format!(
                        "{nchunks} chunks all at one stored entry {e}: a chunk area of {} \
                         bytes holds at most {room} chunks",
                        info.cbytes
                    ),
                ));
            }
        }
    }
    Ok((nchunks, index))
}

/// The [`ContainerError::Malformed`] of `path` a parse fault makes.
fn malformed(path: &Path) -> impl Fn(Fault) -> ContainerError + Copy + '_ {
    move |f: Fault| ContainerError::Malformed {
        path: path.to_path_buf(),
        what: f.what,
        offset: f.offset,
        why: f.why,
    }
}
