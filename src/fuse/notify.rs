//! `FUSE_NOTIFY_STORE` written by hand on the session's FUSE device: one `writev` whose
//! windows point into the decoded buffers a range of pages is made of, where fuser's
//! `Notifier::store` takes one slice (the range would first be copied into one buffer).
//!
//! The message is the kernel's: `fuse_out_header` (`len`, `error` = the notification code,
//! `unique` = 0), then `fuse_notify_store_out` (`nodeid`, `offset`, `size`, padding), then
//! `size` bytes (`include/uapi/linux/fuse.h`). A write to the device is one message whole or
//! nothing.

use std::io::{self, IoSlice};
use std::os::fd::AsFd;

/// `FUSE_NOTIFY_STORE`.
const NOTIFY_STORE: i32 = 4;

/// Most windows one `writev` takes (Linux's `IOV_MAX`), the two headers included.
const IOV_MAX: usize = 1024;

/// Stores `bytes` (the windows of one range, in order) at `offset` of inode `ino` in the
/// kernel's page cache, through `device`, a descriptor of the session's FUSE device. An inode
/// the kernel no longer knows is no error (nothing to store into), as for fuser's `store`.
///
/// # Errors
/// When the kernel refuses the message, or it is larger than a message can say.
pub(crate) fn store(
    device: impl AsFd,
    ino: u64,
    offset: u64,
    bytes: &[IoSlice<'_>],
) -> io::Result<()> {
    let size: usize = bytes.iter().map(|s| s.len()).sum();
    let too_big = || io::Error::new(io::ErrorKind::InvalidInput, "store larger than 4 GiB");
    let size32 = u32::try_from(size).map_err(|_| too_big())?;
    let len = u32::try_from(16 + 24 + size).map_err(|_| too_big())?;
    let mut head = [0u8; 40];
    head[0..4].copy_from_slice(&len.to_ne_bytes());
    head[4..8].copy_from_slice(&NOTIFY_STORE.to_ne_bytes());
    // unique (8..16) and padding (36..40) stay 0.
    head[16..24].copy_from_slice(&ino.to_ne_bytes());
    head[24..32].copy_from_slice(&offset.to_ne_bytes());
    head[32..36].copy_from_slice(&size32.to_ne_bytes());
    let joined;
    let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(bytes.len() + 1);
    iov.push(IoSlice::new(&head));
    if bytes.len() < IOV_MAX {
        iov.extend(bytes.iter().map(|s| IoSlice::new(s)));
    } else {
        joined = joined_bytes(bytes);
        iov.push(IoSlice::new(&joined));
    }
    match rustix::io::writev(device, &iov) {
        Ok(n) if n == len as usize => Ok(()),
        Ok(n) => Err(io::Error::other(format!(
            "FUSE device took {n} of {len} bytes"
        ))),
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The windows `bytes` copied into one buffer.
pub(crate) fn joined_bytes(bytes: &[IoSlice<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.iter().map(|s| s.len()).sum());
    for s in bytes {
        out.extend_from_slice(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_headers_then_the_windows_in_order() {
        // A file stands for the device: what one writev puts in it is the message.
        let path = std::env::temp_dir().join(format!("b2fs-notify-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let (a, b) = ([1u8, 2, 3], [4u8, 5]);
        store(&file, 7, 4096, &[IoSlice::new(&a), IoSlice::new(&b)]).unwrap();
        let got = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(got.len(), 45);
        let u32_at = |i: usize| u32::from_ne_bytes(got[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_ne_bytes(got[i..i + 8].try_into().unwrap());
        assert_eq!((u32_at(0), u32_at(4), u64_at(8)), (45, 4, 0));
        assert_eq!(
            (u64_at(16), u64_at(24), u32_at(32), u32_at(36)),
            (7, 4096, 5, 0)
        );
        assert_eq!(&got[40..45], &[1, 2, 3, 4, 5]);
    }
}
