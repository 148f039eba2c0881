//! `b2fs log MOUNTPOINT`: prints the recent refusals and errors a mount recorded (the tree's
//! event ring, `crate::tree::events`), read from the root's `user.b2fs.log` extended attribute.
//! Nothing but access to the mount is needed: no socket, no log file, any user who can read
//! the mount can read its log.

use std::path::{Path, PathBuf};

use super::Error;
use crate::tree::xattr::LOG;

/// Runs `b2fs log MOUNTPOINT` (any path inside the mount works: the mount root is found
/// by walking up while the device stays the same).
pub(super) fn log(path: &Path) -> Result<(), Error> {
    let root = mount_root(path)?;
    match xattr::get(&root, LOG) {
        Ok(Some(text)) => {
            print!("{}", String::from_utf8_lossy(&text));
            Ok(())
        }
        Ok(None) => Err(not_b2fs(path)),
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => Err(not_b2fs(path)),
        Err(e) => Err(Error::other(
            format!("cannot read the log of '{}'", path.display()),
            e,
        )),
    }
}

fn not_b2fs(path: &Path) -> Error {
    Error::Mountpoint {
        path: path.to_path_buf(),
        why: "not a b2fs mount".into(),
    }
}

/// The root of the mount `path` is in: the highest ancestor on the same device.
fn mount_root(path: &Path) -> Result<PathBuf, Error> {
    use std::os::unix::fs::MetadataExt;
    let err = |e: std::io::Error| Error::Mountpoint {
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    let mut cur = std::fs::canonicalize(path).map_err(err)?;
    let dev = std::fs::metadata(&cur).map_err(err)?.dev();
    while let Some(parent) = cur.parent() {
        match std::fs::metadata(parent) {
            Ok(m) if m.dev() == dev => cur = parent.to_path_buf(),
            _ => break,
        }
    }
    Ok(cur)
}
