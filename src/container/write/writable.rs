//! Whether a source can be written: the permission and layout checks every commit makes
//! before its first write ([`writable`]), and their public forms for callers that want the
//! answer before editing ([`check_writable`], [`check_writable_member`]).
//!
//! Knows no commit order and writes nothing: a read-only file or directory, or a source
//! whose kind or layout b2fs cannot write (a frame embedded in a bigger file outside a
//! collection, variable-length-block chunks, a 2012 `blsk` root, a bcolz object dtype), is
//! named in an [`ContainerError::Unsupported`].

use std::path::Path;

use super::{io_err, unsupported};
use crate::container::{Array, ContainerError, Inner, SourceKind};

/// Refuses when `path` (a file or directory) cannot be written: no write permission bits, or
/// the OS refuses to open it for writing (files only).
pub(super) fn check_path_writable(path: &Path) -> Result<(), ContainerError> {
    let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    if meta.permissions().readonly() {
        return Err(unsupported(path, "writing: the path is read-only"));
    }
    if meta.is_file() {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
    }
    Ok(())
}

/// Why a source cannot be written (`None` = writable): read-only file or directory
/// permissions, or an unsupported kind or layout (frames embedded in a bigger file, frames
/// with variable-length blocks, bcolz object dtype).
pub fn check_writable(array: &Array) -> Option<ContainerError> {
    writable(array, false).err()
}

/// [`check_writable`] for the array of a collection leaf, which commits through the
/// collection ([`commit_member`](super::commit_member)): a frame at an offset of a `.b2z` is
/// written by rebuilding the zip, so only the other rules apply.
pub fn check_writable_member(array: &Array) -> Option<ContainerError> {
    writable(array, true).err()
}

/// The checks of [`check_writable`] (`member`: of [`check_writable_member`]) as a `Result`,
/// what every commit and compaction runs before its first write.
pub(super) fn writable(array: &Array, member: bool) -> Result<(), ContainerError> {
    let path = array.path();
    match &array.inner {
        Inner::Frame(f) => {
            let info = f.info();
            if info.start != 0 && !member {
                return Err(unsupported(
                    path,
                    format!(
                        "writing a frame embedded at offset {} of a bigger file",
                        info.start
                    ),
                ));
            }
            if info.general_flags & 0x80 != 0 {
                return Err(unsupported(
                    path,
                    "writing a frame of variable-length-block chunks",
                ));
            }
            if array.kind == SourceKind::Sframe {
                check_path_writable(path)?;
            }
            check_path_writable(f.source().path())
        }
        Inner::Bcolz(c) => {
            if c.is_blsk() {
                return Err(unsupported(path, "writing a 2012 blsk root (read-only)"));
            }
            if c.itemsize() == 0 {
                return Err(unsupported(
                    path,
                    format!("writing a carray of dtype {:?}", c.dtype()),
                ));
            }
            for p in [path.to_path_buf(), path.join("data"), path.join("meta")] {
                check_path_writable(&p)?;
            }
            Ok(())
        }
    }
}
