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
    /// Modification time (and change time): when what the file shows last changed, else the
    /// source's time at mount (issue 21, [`super::Tree::getattr`]).
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
    /// Total data blocks (of `bsize` bytes): what the tree's files hold plus `bfree`.
    pub blocks: u64,
    /// Free blocks: on a read-write tree, those of the filesystem holding the source (what
    /// commits can use); 0 on a read-only one.
    pub bfree: u64,
    /// Free blocks for unprivileged users (as `bfree`).
    pub bavail: u64,
    /// Total inodes (the tree's plus `ffree`).
    pub files: u64,
    /// Free inodes (as `bfree`).
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
    /// chunk), every inode; on a read-write tree, plus the free blocks and inodes of the
    /// filesystem that holds the source (`df MNT` shows them as available: issue 21). A collection counts only what was opened so far: leaves not yet
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
        let free = if self.options.writable {
            self.source_free(u64::from(BSIZE))
        } else {
            Free::default()
        };
        let used = bytes.div_ceil(u64::from(BSIZE));
        StatFs {
            blocks: used.saturating_add(free.blocks),
            bfree: free.blocks,
            bavail: free.avail,
            files: files.saturating_add(free.files),
            ffree: free.files,
            bsize: BSIZE,
            namelen: NAME_MAX as u32,
            frsize: BSIZE,
        }
    }

    /// What the filesystem holding the source has free, in blocks of `bsize` (nothing when
    /// it cannot be asked: a remote source, a source gone).
    fn source_free(&self, bsize: u64) -> Free {
        let Some(path) = self.source_path() else {
            return Free::default();
        };
        match rustix::fs::statvfs(path) {
            Ok(s) => {
                let blocks = |n: u64| n.saturating_mul(s.f_frsize.max(1)) / bsize;
                Free {
                    blocks: blocks(s.f_bfree),
                    avail: blocks(s.f_bavail),
                    files: s.f_ffree,
                }
            }
            Err(_) => Free::default(),
        }
    }

    /// The source on disk: the ctable's or collection's path, else the first array's.
    pub(crate) fn source_path(&self) -> Option<&std::path::Path> {
        if let Some(t) = self.mounted.table() {
            return Some(t);
        }
        if let Some(c) = self.mounted.collection_path() {
            return Some(c);
        }
        self.lives().map(|(_, l)| l).next().map(|l| l.path())
    }
}

/// Free space of the source's filesystem, in [`StatFs`] units.
#[derive(Debug, Default, Clone, Copy)]
struct Free {
    blocks: u64,
    avail: u64,
    files: u64,
}
