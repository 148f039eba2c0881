//! Errors of the container layer; each names the source path and the offset, field or chunk.

use std::path::PathBuf;

use thiserror::Error;

use crate::codec::CodecError;

/// Why a source could not be opened or a chunk could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ContainerError {
    /// An I/O error on a file of the source.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a source b2fs recognises.
    #[error("{path}: not a Blosc2 frame, sparse frame or bcolz directory ({why})")]
    NotAContainer {
        /// The path given.
        path: PathBuf,
        /// What was found instead.
        why: String,
    },
    /// A recognised layout or feature b2fs does not support (reading it, or writing it: a
    /// frame embedded in a bigger file, variable-length blocks, a codec b2fs cannot encode).
    #[error("{path}: unsupported: {what}")]
    Unsupported {
        /// The path.
        path: PathBuf,
        /// What is unsupported.
        what: String,
    },
    /// An edit the write-back layer refuses by rule (a chunk of a size its slot cannot hold,
    /// appending to an N-dim array, attributes that are not a JSON object, more than 16
    /// vlmetalayers, ...). Checked before anything is written: the source is unchanged.
    #[error("{path}: refused: {why}")]
    Refused {
        /// The source (or the file of it) the edit was for.
        path: PathBuf,
        /// The rule the edit breaks.
        why: String,
    },
    /// The source changed on disk since it was opened (another writer): an edit prepared
    /// against the old view is not committed. Nothing was written.
    #[error("{path}: changed on disk since it was opened ({why}); reopen it")]
    Changed {
        /// The source.
        path: PathBuf,
        /// What differs (or who holds it).
        why: String,
    },
    /// The source is in use by another b2fs process in a way that excludes the operation
    /// (compacting a mounted source, mounting a source being compacted).
    #[error("{path}: busy: {why}")]
    Busy {
        /// The source.
        path: PathBuf,
        /// Who uses it.
        why: String,
    },
    /// A commit failed (`source`) before its commit point and gave every byte of the source
    /// back, but not its modification time (a file whose times only its owner may set): the
    /// file is byte-identical to the version the commit was made against, in the state
    /// `left`. Whoever holds that version may reopen it and take `left` as its own, rather
    /// than as another writer's change that makes its pending edits stale.
    #[error(
        "{path}: the failed commit was undone, but its modification time could not be given back ({why})"
    )]
    Restored {
        /// The frame file.
        path: PathBuf,
        /// The state (identity, length, mtime) the file was left in.
        left: Box<super::FileState>,
        /// Why the time could not be set.
        why: String,
        /// The commit's failure.
        source: Box<ContainerError>,
    },
    /// A structural field is wrong.
    #[error("{path}: malformed {what} at offset {offset}: {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Which structure or field.
        what: String,
        /// Byte offset in the file.
        offset: u64,
        /// The reason.
        why: String,
    },
    /// A chunk index out of range.
    #[error("{path}: chunk {index} out of range ({nchunks} chunks)")]
    NoSuchChunk {
        /// The source.
        path: PathBuf,
        /// Requested index.
        index: usize,
        /// Chunks present.
        nchunks: usize,
    },
    /// A read of part of a chunk's compressed bytes outside the chunk.
    #[error(
        "{path}: chunk {index}: {len} bytes at offset {offset} are outside its {cbytes} compressed bytes"
    )]
    ChunkWindow {
        /// The file holding the chunk.
        path: PathBuf,
        /// Chunk number.
        index: usize,
        /// Requested offset, relative to the chunk start.
        offset: u64,
        /// Requested length.
        len: usize,
        /// The chunk's compressed size.
        cbytes: u64,
    },
    /// A chunk (or the chunk index, or a vlmetalayer) failed to decode.
    #[error("{path}: {}", chunk_label(*index))]
    Chunk {
        /// The source.
        path: PathBuf,
        /// Chunk number (`usize::MAX` for the index chunk).
        index: usize,
        /// The codec's reason.
        source: CodecError,
    },
    /// A vlmetalayer's Blosc2 chunk failed to decode.
    #[error("{path}: vlmetalayer {name:?} at offset {offset}")]
    Vlmeta {
        /// The frame file.
        path: PathBuf,
        /// The vlmetalayer's name.
        name: String,
        /// File offset of its content.
        offset: u64,
        /// The codec's reason.
        source: CodecError,
    },
}

impl ContainerError {
    /// Whether this error, from reading or decoding one chunk, says that chunk itself is
    /// damaged: its bytes do not decode or do not fit its file, or its file is missing.
    /// Not damage: the source could not be read, changed underneath (a file that shrank
    /// since it was opened), or holds a chunk b2fs cannot decode but another reader can (a
    /// plugin codec or filter). What passes over a damaged chunk (the first readable
    /// header, a removal through the Zarr view) asks this.
    pub fn is_chunk_damage(&self) -> bool {
        match self {
            ContainerError::Chunk { index, source, .. } => {
                *index != usize::MAX
                    && matches!(
                        source,
                        CodecError::Truncated { .. }
                            | CodecError::BadHeader { .. }
                            | CodecError::TooLarge { .. }
                            | CodecError::OutputSize { .. }
                            | CodecError::Corrupt { .. }
                    )
            }
            ContainerError::Malformed { why, .. } => !super::source::says_shrank(why),
            ContainerError::ChunkWindow { .. } => true,
            ContainerError::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        }
    }
}

/// `chunk N`, or `index chunk` for `usize::MAX`.
fn chunk_label(index: usize) -> String {
    if index == usize::MAX {
        "index chunk".to_string()
    } else {
        format!("chunk {index}")
    }
}
