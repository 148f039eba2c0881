//! The b2fs-owned types the tree answers with: [`Attr`], [`EntryKind`], [`DirEntry`] and
//! [`StatFs`], and `statfs` itself. The fuse adapter converts them to fuser's types; nothing
//! here knows fuser.

use std::time::SystemTime;

use super::layout::{FileKind, NodeKind};
use super::{Entry, NAME_MAX};
use crate::reader::{ArrayId, ChunkId};

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A directory.
    Directory,
    /// A regular file (metadata JSON or a decompressed chunk).
    File,
}

/// The attributes `stat` shows for one inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Inode number (stable for the life of the tree).
    pub ino: u64,
    /// Directory or file.
    pub kind: EntryKind,
    /// Size in bytes: the exact number of bytes a read returns (0 for directories).
    pub size: u64,
    /// Allocated 512-byte blocks (`ceil(size / 512)`).
    pub blocks: u64,
    /// Permission bits (0o555 directories, 0o444 files: the mount is read-only).
    pub perm: u16,
    /// Hard links (2 + subdirectories for directories, 1 for files).
    pub nlink: u32,
    /// Owner, taken from the source's metadata.
    pub uid: u32,
    /// Group, taken from the source's metadata.
    pub gid: u32,
    /// Modification time: the source's.
    pub mtime: SystemTime,
    /// Preferred I/O size in bytes.
    pub blksize: u32,
}

/// One directory entry as `readdir` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's inode.
    pub ino: u64,
    /// The offset to pass to the next `readdir` call to continue after this entry.
    pub next_offset: u64,
    /// Directory or file.
    pub kind: EntryKind,
    /// The entry's name (`.` and `..` included).
    pub name: String,
}

/// Filesystem statistics for `statfs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    /// Total data blocks (of `bsize` bytes) the tree's files hold.
    pub blocks: u64,
    /// Free blocks (always 0: read-only).
    pub bfree: u64,
    /// Free blocks for unprivileged users (always 0).
    pub bavail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes (always 0).
    pub ffree: u64,
    /// Block size.
    pub bsize: u32,
    /// Longest name.
    pub namelen: u32,
    /// Fragment size.
    pub frsize: u32,
}

impl super::Tree {
    /// Filesystem statistics: the size of every file (chunk files estimated from their first
    /// chunk), every inode. A collection counts only what was opened so far: leaves not yet
    /// accessed are one directory each, and a group `__attrs__` not yet read counts 0 bytes
    /// (statfs opens nothing).
    pub fn statfs(&self) -> StatFs {
        const BSIZE: u32 = 4096;
        let mut bytes: u64 = 0;
        let mut files = self.nodes.len() as u64;
        for (i, node) in self.nodes.iter().enumerate() {
            if let NodeKind::File(kind) = &node.kind {
                let ino = i as u64 + 1;
                let size = match kind {
                    FileKind::Attrs(_, g) if g.rendered_len().is_none() => 0,
                    _ => self.file_size(ino, Entry::File(kind)).unwrap_or(0),
                };
                bytes = bytes.saturating_add(size);
            }
        }
        for a in 0..self.reader.arrays() {
            let array = ArrayId(a as u32);
            let n = self.reader.nchunks(array) as u64;
            files += n;
            let first = self
                .reader
                .chunk_nbytes(ChunkId::new(array, 0))
                .unwrap_or(0);
            bytes = bytes.saturating_add(n.saturating_mul(first as u64));
        }
        StatFs {
            blocks: bytes.div_ceil(u64::from(BSIZE)),
            bfree: 0,
            bavail: 0,
            files,
            ffree: 0,
            bsize: BSIZE,
            namelen: NAME_MAX as u32,
            frsize: BSIZE,
        }
    }
}
