//! `/dev/fd/N` mount points (libfuse's convention): the mount was made by another process
//! (`mount.fuse3 -o drop_privileges`, a container's privileged side, a CSI node plugin), which
//! passes b2fs the open `/dev/fuse` descriptor N of that mount; b2fs serves it and mounts
//! nothing. This module recognises such a mount point, checks that the descriptor really is
//! an open `/dev/fuse`, hands it on to the daemon child, and takes ownership of it in the
//! process that serves.
//!
//! b2fs cannot unmount such a mount (the mounter may have dropped every privilege): when
//! b2fs fails or is stopped, the kernel closes the connection and the mount point answers
//! ENOTCONN until the mounter (or root) unmounts it, as for every libfuse filesystem. Every
//! check that can fail is therefore done before the daemon starts, and its message says so.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::Error;

/// `/dev/fuse` is the character device 10:229 on every Linux.
const FUSE_MAJOR: u64 = 10;
/// See [`FUSE_MAJOR`].
const FUSE_MINOR: u64 = 229;

/// The descriptor number of a mount point written `/dev/fd/N` (N decimal, as libfuse
/// writes it), else `None`: any other path is a directory to mount on.
pub(super) fn parse(mountpoint: &Path) -> Option<RawFd> {
    let n = mountpoint.to_str()?.strip_prefix("/dev/fd/")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || n.len() > 9 {
        return None;
    }
    n.parse().ok()
}

/// What a failure on a `/dev/fd/N` mount point leaves behind, for its message.
pub(super) const LEFT_BEHIND: &str = "the caller's mount of this descriptor is left \
     disconnected: unmount it (umount MOUNTPOINT)";

/// Checks that `fd` is an open descriptor of `/dev/fuse`.
///
/// # Errors
/// [`Error::Mountpoint`] naming `mountpoint` when it is not open or is something else.
pub(super) fn check(fd: RawFd, mountpoint: &Path) -> Result<(), Error> {
    let err = |why: String| Error::Mountpoint {
        path: mountpoint.to_path_buf(),
        why,
    };
    // SAFETY: F_GETFD only reads the descriptor flags of `fd`, whatever `fd` is; it fails
    // with EBADF when `fd` is not open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(err(format!(
            "descriptor {fd} is not open (the process that mounted must pass its open \
             /dev/fuse descriptor)"
        )));
    }
    // SAFETY: `fd` is open (checked just above) and stays open for the borrow, which only
    // lives for this function: nothing here closes it.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let dup = borrowed
        .try_clone_to_owned()
        .map_err(|e| err(format!("descriptor {fd}: {e}")))?;
    let meta = std::fs::File::from(dup)
        .metadata()
        .map_err(|e| err(format!("descriptor {fd}: {e}")))?;
    let rdev = meta.rdev();
    if !meta.file_type().is_char_device()
        || libc::major(rdev) as u64 != FUSE_MAJOR
        || libc::minor(rdev) as u64 != FUSE_MINOR
    {
        return Err(err(format!(
            "descriptor {fd} is not /dev/fuse (a /dev/fd/N mount point is the open /dev/fuse \
             descriptor of a mount another process made)"
        )));
    }
    Ok(())
}

/// A descriptor number for the daemon child to inherit `fd` under: `fd` itself, or a
/// duplicate numbered 3 or more when `fd` is a standard stream the child's are replaced with.
/// The duplicate (if any) must live until the child has started.
///
/// # Errors
/// When the duplicate cannot be made.
pub(super) fn for_child(fd: RawFd) -> std::io::Result<(RawFd, Option<OwnedFd>)> {
    if fd > 2 {
        return Ok((fd, None));
    }
    // SAFETY: F_DUPFD on an open descriptor (checked by `check`) makes a new one numbered 3
    // or more, without close-on-exec so the child inherits it; it touches no memory.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD, 3) };
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `dup` was just created by this process and nothing else refers to it.
    let owned = unsafe { OwnedFd::from_raw_fd(dup) };
    Ok((owned.as_raw_fd(), Some(owned)))
}

/// Takes ownership of the inherited descriptor `fd` (checked by [`check`]) in the process
/// that serves it, and marks it close-on-exec.
///
/// Call once per process, for a descriptor this process inherited and nothing in it uses.
pub(super) fn take(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` is open (checked) and was inherited from the parent: no Rust object in
    // this process owns it, and the caller takes it once, so the OwnedFd is its only owner.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: F_SETFD on an open descriptor only changes its flags.
    unsafe { libc::fcntl(owned.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    owned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dev_fd_numbers_are_descriptors() {
        assert_eq!(parse(Path::new("/dev/fd/3")), Some(3));
        assert_eq!(parse(Path::new("/dev/fd/17")), Some(17));
        for other in [
            "/dev/fd",
            "/dev/fd/",
            "/dev/fd/x",
            "/dev/fd/-1",
            "/dev/fd/+3",
            "/dev/fd/3/",
            "/dev/fd/9999999999",
            "dev/fd/3",
            "/proc/self/fd/3",
            "/mnt/fd/3",
        ] {
            assert_eq!(parse(Path::new(other)), None, "{other}");
        }
    }

    #[test]
    fn a_closed_or_other_descriptor_is_refused() {
        let file = tempfile::tempfile().unwrap();
        let fd = file.as_raw_fd();
        let e = check(fd, Path::new("/dev/fd/x")).unwrap_err().to_string();
        assert!(e.contains("is not /dev/fuse"), "{e}");
        // A number no process has open (a closed one could be reused by a parallel test).
        let e = check(1 << 29, Path::new("/dev/fd/x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not open"), "{e}");
        // /dev/null is a character device too, of another number.
        let null = std::fs::File::open("/dev/null").unwrap();
        let e = check(null.as_raw_fd(), Path::new("/dev/fd/x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not /dev/fuse"), "{e}");
    }

    #[test]
    fn an_open_dev_fuse_is_accepted() {
        let Ok(fuse) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
        else {
            assert!(
                std::env::var("B2FS_REQUIRE_FUSE").is_err(),
                "an_open_dev_fuse_is_accepted: cannot open /dev/fuse"
            );
            eprintln!("SKIP an_open_dev_fuse_is_accepted: cannot open /dev/fuse");
            return;
        };
        check(fuse.as_raw_fd(), Path::new("/dev/fd/x")).unwrap();
    }
}
