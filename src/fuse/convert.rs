//! Conversions between the tree's types and fuser's: [`Attr`] to [`FileAttr`], [`EntryKind`]
//! to [`FileType`], the open flags each [`CachePolicy`] asks for, and the process a request
//! comes from ([`caller`]).

use fuser::{FileAttr, FileType, FopenFlags, INodeNo};

use super::CachePolicy;
use crate::tree::{Attr, EntryKind, Pid};

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

/// The process (thread group) that thread `tid` belongs to: a FUSE request carries the
/// caller's thread id, and a thread other than the main one has an id of its own. Read from
/// `Tgid:` in `/proc/TID/status`; when that cannot be read (the thread is gone, or the caller
/// is outside the daemon's pid namespace and the kernel sent 0) the thread id itself, which
/// is the thread group's id for single-threaded programs.
pub fn caller(tid: u32) -> Pid {
    let tgid = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| tgid_of(&s));
    Pid(tgid.unwrap_or(tid))
}

/// The `Tgid:` field of a `/proc/PID/status` text.
fn tgid_of(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_maps_to_its_process() {
        assert_eq!(
            tgid_of("Name:\tx\nUmask:\t0022\nTgid:\t4242\nPid:\t4250\n"),
            Some(4242)
        );
        assert_eq!(tgid_of("Name:\tx\n"), None);
        // This test runs on a thread of the test harness, not its main thread.
        let tid = this_thread_id();
        assert_eq!(caller(tid), Pid::current());
        assert_eq!(caller(u32::MAX), Pid(u32::MAX));
    }

    /// This thread's id, from `/proc/thread-self` (no libc call needed).
    fn this_thread_id() -> u32 {
        std::fs::read_link("/proc/thread-self")
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    }
}
