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

/// Flags for an opened file. `keep` is [`crate::tree::Tree::keep_cache`]: false when the
/// kernel's cached pages of the file may differ from what is stored (a commit, another
/// writer since the file's last open).
///
/// With direct I/O the only cached pages are those of mmap readers (their faults, and the
/// pages b2fs stores after them): an open without `FOPEN_KEEP_CACHE` drops them all, so
/// one process opening `array.npy` (every `np.load(path, mmap_mode='r')` of a Dask task or
/// a data-loader worker) would make every other process mapping it fault on every page
/// again. They are kept like the page cache's (the kernel still drops them at each `mmap()`
/// of a direct-I/O file).
pub fn fopen_flags(policy: CachePolicy, keep: bool) -> FopenFlags {
    let keep = if keep {
        FopenFlags::FOPEN_KEEP_CACHE
    } else {
        FopenFlags::empty()
    };
    match policy {
        CachePolicy::KeepCache => keep,
        CachePolicy::DirectIo | CachePolicy::Auto => FopenFlags::FOPEN_DIRECT_IO | keep,
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
