//! [`TreeError`]: why a tree operation failed, and the one place that maps each failure to an
//! errno ([`TreeError::errno`], an exhaustive match).

use thiserror::Error;

use crate::container::ContainerError;

/// Why a tree operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TreeError {
    /// No such inode, or no entry of that name in the directory.
    #[error("no such file or directory")]
    NotFound,
    /// A directory operation on a file.
    #[error("inode {0} is not a directory")]
    NotADirectory(u64),
    /// A file operation on a directory.
    #[error("inode {0} is a directory")]
    IsADirectory(u64),
    /// A write, create, truncate or other change: the mount is read-only.
    #[error("read-only filesystem")]
    ReadOnly,
    /// An access the permission bits do not allow (executing a file).
    #[error("permission denied")]
    PermissionDenied,
    /// A read or release with a file handle the tree did not hand out (or already released).
    #[error("unknown file handle {0}")]
    BadHandle(u64),
    /// A name longer than 255 bytes.
    #[error("name too long")]
    NameTooLong,
    /// An argument the operation cannot accept (e.g. a negative offset).
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// A change the tree does not support at all (creating other names, mkdir, rename,
    /// symlinks, links, changing modes or owners, removing anything but the last chunk).
    #[error("operation not permitted: {0}")]
    NotPermitted(String),
    /// A feature the filesystem does not have at all, as a filesystem without it answers
    /// (POSIX ACLs, attributes on scratch files): programs that copy them (`sed -i`, editors)
    /// then fall back to what works (`chmod`) without a warning.
    #[error("not supported by b2fs: {0}")]
    Unsupported(String),
    /// A `rename` with `RENAME_NOREPLACE` (what `mv` asks for first) onto a name that
    /// exists.
    #[error("{0:?} exists")]
    Exists(String),
    /// `rmdir` of a directory that holds something (a pending directory of the Zarr view
    /// holding a temp file).
    #[error("directory not empty")]
    NotEmpty,
    /// A write to a generated metadata file (`meta/*`).
    #[error("metadata files are generated and cannot be written")]
    MetadataFile,
    /// A write or size change past what the chunk may hold (its chunk size, or its current
    /// size for chunks that cannot grow).
    #[error("file too large: {0}")]
    TooBig(String),
    /// A write, truncation or creation past what the mount keeps in memory for scratch files
    /// (their count and total size: `scratch.rs`).
    #[error("no space left for scratch files: {0}")]
    NoSpace(String),
    /// Pending edits past the mount's memory budget (`edit_budget=`) could not be written to,
    /// or read back from, the spill file (`edit/spill.rs`): `errno` is ENOSPC or EDQUOT as the
    /// file system said, else EIO. The write that needed the room failed; every earlier
    /// edit is kept.
    #[error("pending edits could not be spilled: {why}")]
    Spill {
        /// The errno the kernel gets.
        errno: i32,
        /// What failed, naming the spill directory.
        why: String,
    },
    /// An edit the source refused: bad `__attrs__` content, a chunk size the format cannot
    /// store, appending to an N-dim array, truncating a middle chunk. Nothing was changed.
    #[error("refused edit: {0}")]
    Refused(String),
    /// A commit failed: the container layer refused the edit by rule (EINVAL), cannot write
    /// that kind of source (EOPNOTSUPP), found the source changed by another writer (ESTALE)
    /// or being compacted (EBUSY), or an I/O error happened (EIO); the source reads as before
    /// or as after the commit.
    #[error("commit of inode {ino} failed")]
    Commit {
        /// The file being committed.
        ino: u64,
        /// What the container layer reported.
        source: ContainerError,
    },
    /// An edit that needs the stored content of a chunk (a partial write of a chunk not yet
    /// buffered) while another writer is replacing the version it would start from (ESTALE:
    /// retry once the change is done, as after a commit that found the source changed).
    #[error("edit of inode {ino} has no current base")]
    StaleBase {
        /// The file being edited.
        ino: u64,
        /// What the reader reported.
        source: ContainerError,
    },
    /// A directory whose content cannot be shown: a collection leaf that failed to open (the
    /// reason, naming the store and the key).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The source failed: a chunk that does not decode, an I/O error reading the source.
    #[error("inode {ino}")]
    Container {
        /// The file whose content could not be produced.
        ino: u64,
        /// What the container or codec reported (names the path and chunk).
        source: ContainerError,
    },
}

impl TreeError {
    /// The errno the kernel gets for this error.
    #[deny(clippy::wildcard_enum_match_arm)]
    pub fn errno(&self) -> i32 {
        match self {
            TreeError::NotFound => libc::ENOENT,
            TreeError::NotADirectory(_) => libc::ENOTDIR,
            TreeError::IsADirectory(_) => libc::EISDIR,
            TreeError::ReadOnly => libc::EROFS,
            TreeError::PermissionDenied => libc::EACCES,
            TreeError::BadHandle(_) => libc::EBADF,
            TreeError::NameTooLong => libc::ENAMETOOLONG,
            TreeError::InvalidArgument(_) => libc::EINVAL,
            TreeError::NotPermitted(_) => libc::EPERM,
            TreeError::Unsupported(_) => libc::EOPNOTSUPP,
            TreeError::Exists(_) => libc::EEXIST,
            TreeError::NotEmpty => libc::ENOTEMPTY,
            TreeError::MetadataFile => libc::EACCES,
            TreeError::TooBig(_) => libc::EFBIG,
            TreeError::NoSpace(_) => libc::ENOSPC,
            TreeError::Spill { errno, .. } => *errno,
            TreeError::Refused(_) => libc::EINVAL,
            // Each container failure class gets its own errno; nothing was written for the
            // first four (the checks run before the first write).
            TreeError::StaleBase { .. } => libc::ESTALE,
            TreeError::Commit { source, .. } => commit_errno(source),
            // A corrupt chunk or an unreadable source: the data cannot be produced. EIO is what
            // a disk with a bad sector gives, which is the closest model for readers.
            TreeError::Container { .. } => libc::EIO,
            // Like a corrupt chunk: the data cannot be produced.
            TreeError::Unavailable(_) => libc::EIO,
        }
    }
}

pub use crate::error::display_chain;

/// The errno of a commit that failed with `source`: each container failure class gets its own;
/// nothing was written for the first four (the checks run before the first write).
fn commit_errno(source: &ContainerError) -> i32 {
    match source {
        // An edit the format's rules do not allow (docs/SEMANTICS.md: "errno when refused").
        ContainerError::Refused { .. } => libc::EINVAL,
        // A source feature b2fs cannot write (a codec it cannot encode, ...).
        ContainerError::Unsupported { .. } => libc::EOPNOTSUPP,
        // Another writer changed the source since the mount read it: the edit was
        // made against stale content.
        ContainerError::Changed { .. } => libc::ESTALE,
        // Being compacted by `b2fs compact`.
        ContainerError::Busy { .. } => libc::EBUSY,
        // Undone: the commit's own failure tells.
        ContainerError::Restored { source, .. } => commit_errno(source),
        ContainerError::Io { .. }
        | ContainerError::NotAContainer { .. }
        | ContainerError::Malformed { .. }
        | ContainerError::NoSuchChunk { .. }
        | ContainerError::ChunkWindow { .. }
        | ContainerError::Chunk { .. }
        | ContainerError::Vlmeta { .. } => libc::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::CodecError;
    use std::path::PathBuf;

    #[test]
    fn errno_table_is_pinned() {
        let chunk = ContainerError::Chunk {
            path: PathBuf::from("/x.b2frame"),
            index: 3,
            source: CodecError::BadHeader {
                what: "flags".into(),
            },
        };
        let table = [
            (TreeError::NotFound, libc::ENOENT),
            (TreeError::NotADirectory(2), libc::ENOTDIR),
            (TreeError::IsADirectory(1), libc::EISDIR),
            (TreeError::ReadOnly, libc::EROFS),
            (TreeError::PermissionDenied, libc::EACCES),
            (TreeError::BadHandle(9), libc::EBADF),
            (TreeError::NameTooLong, libc::ENAMETOOLONG),
            (TreeError::InvalidArgument("offset"), libc::EINVAL),
            (TreeError::NotPermitted("mkdir".into()), libc::EPERM),
            (TreeError::Unsupported("ACLs".into()), libc::EOPNOTSUPP),
            (TreeError::Exists("x".into()), libc::EEXIST),
            (TreeError::MetadataFile, libc::EACCES),
            (TreeError::TooBig("x".into()), libc::EFBIG),
            (TreeError::NoSpace("x".into()), libc::ENOSPC),
            (TreeError::Refused("x".into()), libc::EINVAL),
            (TreeError::Unavailable("x".into()), libc::EIO),
            (
                TreeError::StaleBase {
                    ino: 3,
                    source: ContainerError::Changed {
                        path: PathBuf::from("/x"),
                        why: "x".into(),
                    },
                },
                libc::ESTALE,
            ),
            (
                TreeError::Commit {
                    ino: 3,
                    source: ContainerError::Refused {
                        path: PathBuf::from("/x"),
                        why: "x".into(),
                    },
                },
                libc::EINVAL,
            ),
            (
                TreeError::Commit {
                    ino: 3,
                    source: ContainerError::Unsupported {
                        path: PathBuf::from("/x"),
                        what: "x".into(),
                    },
                },
                libc::EOPNOTSUPP,
            ),
            (
                TreeError::Commit {
                    ino: 3,
                    source: ContainerError::Changed {
                        path: PathBuf::from("/x"),
                        why: "x".into(),
                    },
                },
                libc::ESTALE,
            ),
            (
                TreeError::Commit {
                    ino: 3,
                    source: ContainerError::Busy {
                        path: PathBuf::from("/x"),
                        why: "x".into(),
                    },
                },
                libc::EBUSY,
            ),
            (
                TreeError::Commit {
                    ino: 3,
                    source: ContainerError::Io {
                        path: PathBuf::from("/x"),
                        source: std::io::Error::other("disk"),
                    },
                },
                libc::EIO,
            ),
            (
                TreeError::Container {
                    ino: 5,
                    source: chunk,
                },
                libc::EIO,
            ),
        ];
        for (e, errno) in table {
            assert_eq!(e.errno(), errno, "{e}");
        }
    }

    #[test]
    fn display_chain_names_path_chunk_and_reason() {
        let e = TreeError::Container {
            ino: 7,
            source: ContainerError::Chunk {
                path: PathBuf::from("/d/a.b2frame"),
                index: 3,
                source: CodecError::BadHeader {
                    what: "flags".into(),
                },
            },
        };
        assert_eq!(
            display_chain(&e),
            "inode 7: /d/a.b2frame: chunk 3: bad header: flags"
        );
    }
}
