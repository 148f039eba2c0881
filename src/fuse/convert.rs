//! Conversions from the tree's types to fuser's: [`Attr`] to [`FileAttr`], [`EntryKind`] to
//! [`FileType`], and the open flags each [`CachePolicy`] asks for.

use fuser::{FileAttr, FileType, FopenFlags, INodeNo};

use super::CachePolicy;
use crate::tree::{Attr, EntryKind};

/// fuser's view of an [`Attr`]; every time field is the source's mtime.
pub fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: a.mtime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: a.blksize,
        flags: 0,
    }
}

/// fuser's file type for an entry kind.
pub fn file_type(kind: EntryKind) -> FileType {
    match kind {
        EntryKind::Directory => FileType::Directory,
        EntryKind::File => FileType::RegularFile,
    }
}

/// Flags for an opened file.
pub fn fopen_flags(policy: CachePolicy) -> FopenFlags {
    match policy {
        CachePolicy::KeepCache => FopenFlags::FOPEN_KEEP_CACHE,
        CachePolicy::DirectIo => FopenFlags::FOPEN_DIRECT_IO,
    }
}

/// Flags for an opened directory: listings never change, so the kernel may cache them.
pub fn opendir_flags() -> FopenFlags {
    FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR
}
