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

/// Flags for an opened file. On a read-write mount (`writable`) files go through the page
/// cache but do not keep it across opens: a refused `__attrs__` edit reverts its content.
pub fn fopen_flags(policy: CachePolicy, writable: bool) -> FopenFlags {
    match (policy, writable) {
        (CachePolicy::KeepCache, false) => FopenFlags::FOPEN_KEEP_CACHE,
        (CachePolicy::KeepCache, true) => FopenFlags::empty(),
        (CachePolicy::DirectIo, _) => FopenFlags::FOPEN_DIRECT_IO,
    }
}

/// Flags for an opened directory: on a read-only mount listings never change, so the kernel
/// may cache them; on a read-write mount appends and removals change them.
pub fn opendir_flags(writable: bool) -> FopenFlags {
    if writable {
        FopenFlags::empty()
    } else {
        FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR
    }
}
