//! The zip side of a `.b2z` store: the central directory (through the `zip` crate), the
//! members' names, sizes and CRC-32s, and each member's data window `(offset, length)` found
//! from its *local* header on first use (`docs/format/STORES.md` 1.2).
//!
//! Knows nothing of frames: it hands out byte windows of the zip file (a local file, or a
//! [`ByteSource`] such as a remote object, read in blocks). Opening parses the
//! end-of-central-directory records (ZIP64 included) and the central directory only; no
//! member's local header or data is read until [`ZipIndex::window`] is called for it.
//!
//! Rules (as python-blosc2 4.14.1 reads a store): a member is usable in place only when it is
//! stored (method 0) and not encrypted; [`ZipIndex::window`] refuses the others (a leaf that
//! is one fails on first access; the store layer refuses a store whose `embed.b2e` is one).
//! Directory entries are ignored. Every window is checked to lie inside the
//! file before it is handed out.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use zip::ZipArchive;

use crate::container::{ByteSource, ContainerError};

/// What a zip file is read from: a local file, or a byte source (a remote object) read in
/// blocks, so the zip crate's small reads of a local header cost one range read; blocks read
/// one after the other double (16 KiB up to 1 MiB), so a central directory longer than what
/// the source holds already (a 10,000-member store's) costs a few range reads, not one per
/// 16 KiB.
#[derive(Debug)]
pub(crate) enum Reader {
    /// A local file.
    File(File),
    /// A byte source, its position, the last block read (start, bytes), and the central
    /// directory read at open (start, bytes; kept while the zip crate reads elsewhere).
    Bytes(Arc<dyn ByteSource>, u64, (u64, Vec<u8>), (u64, Vec<u8>)),
}

/// The block a [`Reader::Bytes`] reads at once after a seek.
const BLOCK: u64 = 16 << 10;
/// The largest block of a run of reads in order.
const BLOCK_MAX: u64 = 1 << 20;
/// The largest central directory read ahead in one block.
const CD_MAX: u64 = 64 << 20;

/// The central directory of the zip in `src` and where it starts, read in one range when the
/// end record (in the last 64 KiB + 22 bytes) locates it; `None` for ZIP64 records, a
/// directory over [`CD_MAX`], or anything that does not add up (the zip crate then finds it
/// by its own reads, and says what is wrong).
fn central_directory(src: &dyn ByteSource) -> Option<(u64, Vec<u8>)> {
    let len = src.len();
    let n = len.min(22 + 0xFFFF);
    let mut end = vec![0u8; usize::try_from(n).ok()?];
    src.read_exact_at(len - n, &mut end).ok()?;
    let at = end.windows(4).rposition(|w| w == b"PK\x05\x06")?;
    let rec = end.get(at..at + 22)?;
    let le32 = |i: usize| {
        u64::from(u32::from_le_bytes([
            rec[i],
            rec[i + 1],
            rec[i + 2],
            rec[i + 3],
        ]))
    };
    let (size, offset) = (le32(12), le32(16));
    if size == 0xFFFF_FFFF || offset == 0xFFFF_FFFF || size > CD_MAX {
        return None;
    }
    if offset.checked_add(size)? > len - n + at as u64 {
        return None;
    }
    let mut cd = vec![0u8; usize::try_from(size).ok()?];
    src.read_exact_at(offset, &mut cd).ok()?;
    Some((offset, cd))
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let (src, pos, block, cd) = match self {
            Reader::File(f) => return f.read(buf),
            Reader::Bytes(src, pos, block, cd) => (src, pos, block, cd),
        };
        let len = src.len();
        if *pos >= len || buf.is_empty() {
            return Ok(0);
        }
        let inside = |b: &(u64, Vec<u8>), p: u64| p >= b.0 && p < b.0 + b.1.len() as u64;
        let block = if inside(cd, *pos) { cd } else { block };
        if !inside(block, *pos) {
            let prev = block.1.len() as u64;
            let next = if prev > 0 && *pos == block.0 + prev {
                (prev * 2).min(BLOCK_MAX)
            } else {
                BLOCK
            };
            let n = next.min(len - *pos);
            let mut bytes = vec![0u8; usize::try_from(n).unwrap_or(0)];
            src.read_exact_at(*pos, &mut bytes)?;
            *block = (*pos, bytes);
        }
        let at = usize::try_from(*pos - block.0).unwrap_or(0);
        let n = buf.len().min(block.1.len() - at);
        buf[..n].copy_from_slice(&block.1[at..at + n]);
        *pos += n as u64;
        Ok(n)
    }
}

impl Seek for Reader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let (src, pos) = match self {
            Reader::File(f) => return f.seek(to),
            Reader::Bytes(src, pos, ..) => (src, pos),
        };
        let new = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => src.len().checked_add_signed(d),
            SeekFrom::Current(d) => pos.checked_add_signed(d),
        };
        *pos = new.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(*pos)
    }
}

/// Where a stored member's data lies, read from its local header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Offset of the member's first data byte in the zip file.
    pub offset: u64,
    /// The member's stored size (for a stored member, the frame's length).
    pub len: u64,
    /// The CRC-32 the central directory records.
    pub crc32: u32,
}

/// The central directory of a zip file and the lazily found data offsets of its members.
#[derive(Debug)]
pub struct ZipIndex {
    path: PathBuf,
    len: u64,
    mtime: std::time::SystemTime,
    /// Member names in central-directory order (directory entries left out).
    names: Vec<String>,
    /// Index into the archive of each name.
    archive_index: Vec<usize>,
    archive: Mutex<ZipArchive<Reader>>,
    /// The byte source the zip is read from, when it is not a local file.
    bytes: Option<Arc<dyn ByteSource>>,
    /// The local zip file opened at open (a second descriptor of it), for reads of member
    /// bytes that need no seek ([`ZipIndex::backing`]).
    file: Option<Arc<File>>,
}

fn bad_zip(path: &Path, why: impl std::fmt::Display) -> ContainerError {
    ContainerError::Malformed {
        path: path.to_path_buf(),
        what: "zip archive".into(),
        offset: 0,
        why: why.to_string(),
    }
}

impl ZipIndex {
    /// Parses the end-of-central-directory records and the central directory of `path`.
    ///
    /// # Errors
    /// [`ContainerError::NotAContainer`] when `path` is not a zip file;
    /// [`ContainerError::Malformed`] for a damaged archive; [`ContainerError::Io`].
    pub fn open(path: &Path) -> Result<ZipIndex, ContainerError> {
        let io = |source| ContainerError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let (len, mtime) = (meta.len(), meta.modified().map_err(io)?);
        let second = Arc::new(file.try_clone().map_err(io)?);
        let mut z = ZipIndex::open_reader(path, Reader::File(file), len, mtime, None)?;
        z.file = Some(second);
        Ok(z)
    }

    /// [`ZipIndex::open`] of the zip file held by a byte source (a remote object); its path
    /// is the byte source's name. Members are read in place through the byte source.
    ///
    /// # Errors
    /// As [`ZipIndex::open`].
    pub fn open_bytes(bytes: Arc<dyn ByteSource>) -> Result<ZipIndex, ContainerError> {
        let path = PathBuf::from(bytes.name());
        let (len, mtime) = (bytes.len(), bytes.mtime());
        // The central directory read at once (the reader serves the zip crate's reads of
        // it from that block): one range read, or none when it lies in bytes the source holds.
        let cd = central_directory(bytes.as_ref()).unwrap_or_default();
        let reader = Reader::Bytes(Arc::clone(&bytes), 0, (0, Vec::new()), cd);
        ZipIndex::open_reader(&path, reader, len, mtime, Some(bytes))
    }

    fn open_reader(
        path: &Path,
        reader: Reader,
        len: u64,
        mtime: std::time::SystemTime,
        bytes: Option<Arc<dyn ByteSource>>,
    ) -> Result<ZipIndex, ContainerError> {
        let archive = ZipArchive::new(reader).map_err(|e| match e {
            zip::result::ZipError::Io(source) => ContainerError::Io {
                path: path.to_path_buf(),
                source,
            },
            // No end record: what a download or copy cut short leaves (the members come
            // first, the central directory and its end record last).
            other if other.to_string().contains("Could not find EOCD") => bad_zip(
                path,
                format!(
                    "central directory: {other}: the zip's end record is missing (a truncated \
                     or partly copied file?)"
                ),
            ),
            other => bad_zip(path, format!("central directory: {other}")),
        })?;
        let mut names = Vec::with_capacity(archive.len());
        let mut archive_index = Vec::with_capacity(archive.len());
        for i in 0..archive.len() {
            match archive.name_for_index(i) {
                Some(name) if !name.ends_with('/') => {
                    names.push(name.to_string());
                    archive_index.push(i);
                }
                _ => {}
            }
        }
        Ok(ZipIndex {
            path: path.to_path_buf(),
            len,
            mtime,
            names,
            archive_index,
            archive: Mutex::new(archive),
            bytes,
            file: None,
        })
    }

    /// The zip file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The member names in central-directory order (directory entries left out). Reading
    /// them reads no local header.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The data window of member `i` (an index into [`ZipIndex::names`]): reads its local
    /// header (the `zip` crate remembers the offset) and checks that the member is stored
    /// uncompressed and unencrypted and that the window lies inside the file.
    ///
    /// # Errors
    /// [`ContainerError::Unsupported`] for a compressed or encrypted member;
    /// [`ContainerError::Malformed`] for a bad local header or a window past the end.
    pub fn window(&self, i: usize) -> Result<Window, ContainerError> {
        let (Some(name), Some(&ai)) = (self.names.get(i), self.archive_index.get(i)) else {
            return Err(bad_zip(&self.path, format!("no member {i}")));
        };
        let (start, len, crc32, in_place) = {
            let mut archive = self.archive.lock();
            let file = archive.by_index_raw(ai).map_err(|e| match e {
                // Its local header could not be read (a remote store's hiccup): I/O, tried
                // again later, not a malformed archive.
                // (A header past the end of a local file is a truncated archive: malformed.)
                zip::result::ZipError::Io(source)
                    if source.kind() != std::io::ErrorKind::UnexpectedEof =>
                {
                    ContainerError::Io {
                        path: self.path.clone(),
                        source: std::io::Error::new(
                            source.kind(),
                            format!("member {name:?}: {source}"),
                        ),
                    }
                }
                e => bad_zip(&self.path, format!("member {name:?}: {e}")),
            })?;
            (
                file.data_start(),
                file.compressed_size(),
                file.crc32(),
                file.compression() == zip::CompressionMethod::Stored && !file.encrypted(),
            )
        };
        if !in_place {
            return Err(ContainerError::Unsupported {
                path: self.path.clone(),
                what: format!(
                    "zip member {name:?} is compressed or encrypted (a store's members must be \
                     stored uncompressed to be read in place)"
                ),
            });
        }
        let start = start.ok_or_else(|| {
            bad_zip(
                &self.path,
                format!("member {name:?}: no data offset in its local header"),
            )
        })?;
        match start.checked_add(len) {
            Some(end) if end <= self.len => Ok(Window {
                offset: start,
                len,
                crc32,
            }),
            _ => Err(ContainerError::Malformed {
                path: self.path.clone(),
                what: format!("zip member {name:?}"),
                offset: start,
                why: format!(
                    "{len} bytes at offset {start} extend past the end of the file ({} bytes)",
                    self.len
                ),
            }),
        }
    }

    /// Whether the zip file's length or modification time differ from what they were when
    /// it was opened (or it cannot be read any more).
    pub fn changed_on_disk(&self) -> bool {
        if let Some(b) = &self.bytes {
            return b.changed();
        }
        match std::fs::metadata(&self.path) {
            Ok(m) => m.len() != self.len || m.modified().ok() != Some(self.mtime),
            Err(_) => true,
        }
    }

    /// The member named `name`, as an index into [`ZipIndex::names`].
    pub fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Runs `f` on the archive (for the commit, which byte-copies members).
    pub(crate) fn with_archive<R>(&self, f: impl FnOnce(&mut ZipArchive<Reader>) -> R) -> R {
        f(&mut self.archive.lock())
    }

    /// What member bytes are read from (the zip file as opened, or its byte source), and the
    /// zip's modification time at open.
    pub(crate) fn backing(&self) -> Option<(super::head::Backing, std::time::SystemTime)> {
        let b = match (&self.bytes, &self.file) {
            (Some(b), _) => super::head::Backing::Bytes(Arc::clone(b)),
            (None, Some(f)) => super::head::Backing::File(Arc::clone(f)),
            (None, None) => return None,
        };
        Some((b, self.mtime))
    }

    /// The byte source the zip is read from, when it is not a local file.
    pub fn byte_source(&self) -> Option<&Arc<dyn ByteSource>> {
        self.bytes.as_ref()
    }

    /// The archive index of member `i`.
    pub(crate) fn archive_index(&self, i: usize) -> Option<usize> {
        self.archive_index.get(i).copied()
    }
}

/// Whether `path` is a file starting with a zip local-file or end-of-central-directory
/// signature (cheap check before the central directory is parsed).
pub fn looks_like_zip(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && (head == *b"PK\x03\x04" || head == *b"PK\x05\x06")
}
