//! The b2fs-owned types the tree answers with: [`Attr`], [`EntryKind`], [`DirEntry`] and
//! [`StatFs`]. The fuse adapter converts them to fuser's types; nothing here knows fuser.

use std::time::SystemTime;

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
