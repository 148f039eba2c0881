//! Positional reads from one file of a source, with bounds checks against the file size seen
//! at open and I/O counters.
//!
//! This module knows nothing of frame or bcolz structure: it hands out byte ranges. It
//! deliberately does **not** memory-map: a later write-back feature appends to frames and
//! C-Blosc2 truncates files on its next write (`CONTAINER_NOTES.md` section 3.1, 6.1 pitfall
//! 9), and a mapping of a file that shrinks raises SIGBUS (STYLE.md section 7). `pread`
//! (`FileExt::read_at`) costs one copy per chunk and cannot fault, so this module has no
//! `unsafe` at all.
//!
//! Invariants:
//! - every read is bounded by the file length observed when the file was opened, checked
//!   *before* any buffer is allocated, so a forged length can never cause a huge allocation;
//! - reads are `&self` and thread-safe (`pread` does not move a shared file position);
//! - [`IoStats`] counts every read issued through a `Source` (tests use it to prove that
//!   opening a frame reads no chunk data).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::ContainerError;

/// Counters of the reads issued through one or more `Source`s.
#[derive(Debug, Default)]
pub struct IoStats {
    reads: AtomicU64,
    bytes: AtomicU64,
}

impl IoStats {
    /// Number of read calls so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Number of bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn record(&self, len: usize) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(len as u64, Ordering::Relaxed);
    }
}

/// One open file of a source, read with `pread`.
#[derive(Debug)]
pub(crate) struct Source {
    path: PathBuf,
    file: File,
    len: u64,
    mtime: SystemTime,
    stats: Arc<IoStats>,
}

impl Source {
    /// Opens `path` read-only and records its length and modification time.
    pub(crate) fn open(path: &Path, stats: Arc<IoStats>) -> Result<Source, ContainerError> {
        let io = |source| ContainerError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(ContainerError::NotAContainer {
                path: path.to_path_buf(),
                why: "not a regular file".into(),
            });
        }
        Ok(Source {
            path: path.to_path_buf(),
            file,
            len: meta.len(),
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            stats,
        })
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file length when it was opened.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The file's modification time when it was opened.
    pub(crate) fn mtime(&self) -> SystemTime {
        self.mtime
    }

    /// Reads exactly `len` bytes at `offset`. `what` names the structure for the error
    /// message. Fails (without allocating) when the range is not inside the file.
    pub(crate) fn read_at(
        &self,
        offset: u64,
        len: usize,
        what: &str,
    ) -> Result<Vec<u8>, ContainerError> {
        let mut buf = Vec::new();
        self.read_into(offset, len, what, &mut buf)?;
        Ok(buf)
    }

    /// Appends exactly `len` bytes read at `offset` to `buf`; see [`Source::read_at`].
    pub(crate) fn read_into(
        &self,
        offset: u64,
        len: usize,
        what: &str,
        buf: &mut Vec<u8>,
    ) -> Result<(), ContainerError> {
        let end = offset.checked_add(len as u64);
        match end {
            Some(end) if end <= self.len => {}
            _ => {
                return Err(ContainerError::Malformed {
                    path: self.path.clone(),
                    what: what.to_string(),
                    offset,
                    why: format!(
                        "{len} bytes at offset {offset} extend past the end of the file ({} bytes)",
                        self.len
                    ),
                });
            }
        }
        let start = buf.len();
        buf.resize(start + len, 0);
        let target = buf.get_mut(start..).unwrap_or_default();
        self.stats.record(len);
        self.file
            .read_exact_at(target, offset)
            .map_err(|source| ContainerError::Io {
                path: self.path.clone(),
                source,
            })
    }

    /// Fills `buf` with the bytes at `offset`. `what` names the structure for the error
    /// message. Fails (before reading) when the range is not inside the file.
    pub(crate) fn read_exact_at(
        &self,
        offset: u64,
        buf: &mut [u8],
        what: &str,
    ) -> Result<(), ContainerError> {
        let len = buf.len();
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.len => {}
            _ => {
                return Err(ContainerError::Malformed {
                    path: self.path.clone(),
                    what: what.to_string(),
                    offset,
                    why: format!(
                        "{len} bytes at offset {offset} extend past the end of the file ({} bytes)",
                        self.len
                    ),
                });
            }
        }
        self.stats.record(len);
        self.file
            .read_exact_at(buf, offset)
            .map_err(|source| ContainerError::Io {
                path: self.path.clone(),
                source,
            })
    }
}
