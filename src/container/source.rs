//! Positional reads from one file of a source, with bounds checks against the file size seen
//! at open and I/O counters.
//!
//! This module knows nothing of frame or bcolz structure: it hands out byte ranges, read
//! with `pread` (`FileExt::read_at`), which costs one copy and cannot fault, or, for a source
//! that is not a local file (a remote object, `crate::remote`), from a [`ByteSource`]: the
//! pluggable byte source below this layer. A source opened
//! with `Source::open_mapped` also lends ranges straight from a read-only mapping
//! (`Source::with_mapped`); a mapped file that shrinks underneath (another process
//! truncating it) is made an I/O error of that read by `mapped.rs`, never a SIGBUS.
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

/// What a read error says of a file that ended before the length seen at open (another
/// process truncated it): the file changed, its content is not damaged.
const SHRANK_SINCE_OPEN: &str = "it shrank since it was opened";

/// Whether a [`ContainerError::Malformed`] reason says the file shrank underneath (read
/// past its end here, or spoiled while mapped: [`super::mapped::SHRANK`]) rather than that
/// its bytes are wrong.
pub(crate) fn says_shrank(why: &str) -> bool {
    why.contains(SHRANK_SINCE_OPEN) || why.contains(super::mapped::SHRANK)
}

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

/// A read-only byte source that is not a local file (a remote object): what a `Source`
/// reads from instead of `pread`. Its length and modification time are fixed when it is
/// opened; reads are `&self` and thread-safe, and must return within a deadline.
pub trait ByteSource: Send + Sync + std::fmt::Debug {
    /// The name used in messages and as the source's path (a URL).
    fn name(&self) -> &str;
    /// The length seen at open.
    fn len(&self) -> u64;
    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The modification time seen at open.
    fn mtime(&self) -> SystemTime;
    /// Fills `buf` with the bytes at `offset` (the range is inside [`ByteSource::len`]).
    ///
    /// # Errors
    /// Any failure to get exactly those bytes of the version seen at open.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    /// A hint from the container: stored chunks start at the sorted, distinct `starts` and
    /// the chunk area ends at `end`, so a read inside `[starts[i], starts[i + 1])` (the last
    /// one up to `end`) belongs to one chunk. The default ignores it.
    fn chunk_extents(&self, starts: Vec<u64>, end: u64) {
        let _ = (starts, end);
    }
    /// Whether the source is known to have changed since it was opened.
    fn changed(&self) -> bool {
        false
    }
    /// Whether a source that can be opened again ([`ByteSource::reopen`]) changed since it
    /// was opened. With `ask`, it may ask where it lives when that is due (a followed remote
    /// object asks its server at most every so often): only the mount's follower thread asks,
    /// about once a second, never a file system request. The default: false (nothing to
    /// follow).
    fn poll_changed(&self, ask: bool) -> bool {
        let _ = ask;
        false
    }
    /// Whether `poll_changed(true)` would ask where the source lives now (followed, its
    /// interval passed, no change known yet): the follower asks only such sources. False by
    /// default.
    fn asks_now(&self) -> bool {
        false
    }
    /// The source opened again as it is now, when it can be (a followed remote object);
    /// `None` by default.
    fn reopen(&self) -> Option<std::io::Result<Arc<dyn ByteSource>>> {
        None
    }
    /// The `len` bytes at `offset` as a view of memory the source already holds (a chunk
    /// it fetched whole), so a decoder reads them without a copy; `None` when the source
    /// keeps no such buffer for that range (then they are read with
    /// [`ByteSource::read_exact_at`]). The default has none.
    fn view(&self, offset: u64, len: usize) -> Option<std::io::Result<ByteView>> {
        let _ = (offset, len);
        None
    }
}

/// Bytes a [`ByteSource`] lends ([`ByteSource::view`]): kept alive until dropped.
pub type ByteView = Box<dyn AsRef<[u8]> + Send>;

/// Where a [`Source`]'s bytes come from.
#[derive(Debug)]
enum Backend {
    /// A local file, read with `pread`.
    File(File),
    /// Anything else (a remote object).
    Bytes(Arc<dyn ByteSource>),
}

/// What `fstat` says of an open file: which file it is and the length and modification time
/// a change of its bytes moves ([`crate::container::Array::file_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileState {
    /// Device and inode: which file.
    pub id: (u64, u64),
    /// Length in bytes.
    pub len: u64,
    /// Modification time.
    pub mtime: SystemTime,
}

impl FileState {
    /// The state of the file at `path` now (`None`: missing or unreadable).
    pub fn stat(path: &Path) -> Option<FileState> {
        std::fs::metadata(path).ok().map(|m| FileState::of(&m))
    }

    pub(crate) fn of(meta: &std::fs::Metadata) -> FileState {
        use std::os::unix::fs::MetadataExt;
        FileState {
            id: (meta.dev(), meta.ino()),
            len: meta.len(),
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        }
    }
}

/// One open file of a source, read with `pread` (or from a [`ByteSource`]).
#[derive(Debug)]
pub(crate) struct Source {
    path: PathBuf,
    backend: Backend,
    len: u64,
    mtime: SystemTime,
    stats: Arc<IoStats>,
    /// The whole file (as long as it was at open), mapped read-only; `None`: `pread` only.
    map: Option<super::mapped::Mapping>,
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
            backend: Backend::File(file),
            len: meta.len(),
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            stats,
            map: None,
        })
    }

    /// [`Source::open`], plus a read-only mapping of the whole file for
    /// [`Source::with_mapped`] (when the file can be mapped; else reads use `pread`).
    pub(crate) fn open_mapped(path: &Path, stats: Arc<IoStats>) -> Result<Source, ContainerError> {
        let mut src = Source::open(path, stats)?;
        if let Backend::File(file) = &src.backend {
            src.map = super::mapped::Mapping::new(file, src.len);
        }
        Ok(src)
    }

    /// A source reading from `bytes` (never mapped); its path is the byte source's name.
    pub(crate) fn from_bytes(bytes: Arc<dyn ByteSource>, stats: Arc<IoStats>) -> Source {
        Source {
            path: PathBuf::from(bytes.name()),
            len: bytes.len(),
            mtime: bytes.mtime(),
            backend: Backend::Bytes(bytes),
            stats,
            map: None,
        }
    }

    /// The state of the open file now (one `fstat`); `None` for a byte source or when
    /// `fstat` fails.
    pub(crate) fn file_state(&self) -> Option<FileState> {
        match &self.backend {
            Backend::File(file) => file.metadata().ok().map(|m| FileState::of(&m)),
            Backend::Bytes(_) => None,
        }
    }

    /// The byte source this reads from, when it is not a local file.
    pub(crate) fn byte_source(&self) -> Option<&Arc<dyn ByteSource>> {
        match &self.backend {
            Backend::File(_) => None,
            Backend::Bytes(b) => Some(b),
        }
    }

    /// `pread` or the byte source.
    fn fill(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        match &self.backend {
            Backend::File(file) => file.read_exact_at(buf, offset),
            Backend::Bytes(b) => b.read_exact_at(offset, buf),
        }
    }

    /// Calls `f` with the `len` bytes at `offset` straight from the file's mapping (or a byte
    /// source's [`ByteSource::view`]), without copying them; `f` is expected to read about
    /// `touched` of them. `None` when there is no usable mapping of that range (not mapped,
    /// past the mapped length, or the mapping lost pages to a truncation): read them instead. An
    /// [`ContainerError::Io`] when the file shrank while `f` ran (`f`'s result is dropped).
    pub(crate) fn with_mapped<R>(
        &self,
        offset: u64,
        len: usize,
        touched: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<Result<R, ContainerError>> {
        if let (None, Backend::Bytes(b)) = (&self.map, &self.backend) {
            // A byte source's own buffer (a fetched chunk) stands in for the mapping.
            let view = match b.view(offset, len)? {
                Ok(v) => v,
                Err(source) => {
                    return Some(Err(ContainerError::Io {
                        path: self.path.clone(),
                        source,
                    }));
                }
            };
            let bytes = (*view).as_ref();
            if bytes.len() != len {
                return None;
            }
            self.stats.record(touched.min(len));
            return Some(Ok(f(bytes)));
        }
        let r = self.map.as_ref()?.with(offset, len, touched, f)?;
        self.stats.record(touched.min(len));
        let shrank =
            || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, super::mapped::SHRANK);
        // A cut inside the range's last page raises no SIGBUS (the rest of that page reads as
        // zeros), so the guard cannot see it: the file's length can. Checked after `f`, so a
        // cut that could have touched what `f` read is seen.
        let Backend::File(file) = &self.backend else {
            return Some(r.map_err(|source| ContainerError::Io {
                path: self.path.clone(),
                source,
            }));
        };
        let r = r.and_then(|v| match file.metadata() {
            Ok(m) if m.len() < offset.saturating_add(len as u64) => Err(shrank()),
            _ => Ok(v),
        });
        Some(r.map_err(|source| ContainerError::Io {
            path: self.path.clone(),
            source,
        }))
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
        self.fill(offset, target)
            .map_err(|e| self.read_error(e, offset, &what))
    }

    /// Fills `buf` with the bytes at `offset`. `what` names the structure for the error
    /// message (formatted only on error). Fails (before reading) when the range is not inside
    /// the file.
    pub(crate) fn read_exact_at(
        &self,
        offset: u64,
        buf: &mut [u8],
        what: &dyn std::fmt::Display,
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
        self.fill(offset, buf)
            .map_err(|e| self.read_error(e, offset, what))
    }

    /// A failed read of `what` at `offset`. Running into the end of the file inside the
    /// length seen at open means the file shrank underneath (another process truncated it):
    /// say so, naming the structure.
    fn read_error(
        &self,
        source: std::io::Error,
        offset: u64,
        what: &dyn std::fmt::Display,
    ) -> ContainerError {
        if source.kind() == std::io::ErrorKind::UnexpectedEof {
            return ContainerError::Malformed {
                path: self.path.clone(),
                what: what.to_string(),
                offset,
                why: format!(
                    "the file ends before it: {SHRANK_SINCE_OPEN} (truncated by another process)"
                ),
            };
        }
        ContainerError::Io {
            path: self.path.clone(),
            source,
        }
    }
}
