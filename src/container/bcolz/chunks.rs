//! A carray's chunk files: which exist (`data/__N.blp`, or a blsk root's superchunks), where
//! each chunk lies, its uncompressed size, and its Blosc1 bytes read whole or by windows
//! (checked to be a Blosc1 chunk that fits its file).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{BLP_HEADER_LEN, Carray};
use crate::container::ContainerError;
use crate::container::source::Source;

impl Carray {
    /// The file holding chunk `i`, the offset of the chunk in it and the bytes the chunk may
    /// occupy from there, opened.
    fn locate(&self, i: usize) -> Result<(PathBuf, Source, u64, usize), ContainerError> {
        if i >= self.nchunks {
            return Err(self.no_such(i));
        }
        if let Some(c) = self.blsk.as_ref().and_then(|b| b.get(i)) {
            let src = Source::open(&c.file, Arc::clone(&self.stats))?;
            let room = usize::try_from(c.room).unwrap_or(usize::MAX);
            return Ok((c.file.to_path_buf(), src, c.offset, room));
        }
        let path = self.chunk_path(i);
        let src = self.files.open(&path, Arc::clone(&self.stats))?;
        let room = usize::try_from(src.len())
            .unwrap_or(usize::MAX)
            .saturating_sub(BLP_HEADER_LEN);
        Ok((path, src, BLP_HEADER_LEN as u64, room))
    }

    /// The chunks that have bytes to read, as sorted, disjoint runs of indices: a blsk root,
    /// every chunk (its superchunk indexes, read at open, locate each); otherwise the chunks
    /// whose file `data/__N.blp` exists, from one listing of `data/` (a missing `data/` has
    /// none). The cost is the files present, never the chunk count `meta/sizes` declares
    /// (a damaged `shape` may declare 1e15 chunks). Files named for an index past
    /// [`Carray::nchunks`] (leftovers of a longer carray) and other names are not chunks.
    ///
    /// # Errors
    /// [`ContainerError::Io`] when `data/` exists but cannot be listed.
    pub(crate) fn present_chunks(&self) -> Result<Vec<Range<usize>>, ContainerError> {
        if self.blsk.is_some() {
            return Ok(std::iter::once(0..self.nchunks).collect());
        }
        let data = self.root.join("data");
        let names = match self.files.list_dir(&data) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(ContainerError::Io { path: data, source }),
        };
        let mut present: Vec<usize> = names
            .iter()
            .filter_map(|n| chunk_file_index(n))
            .filter(|&i| i < self.nchunks)
            .collect();
        present.sort_unstable();
        present.dedup();
        let mut runs: Vec<Range<usize>> = Vec::new();
        for i in present {
            match runs.last_mut() {
                Some(r) if r.end == i => r.end += 1,
                _ => runs.push(i..i + 1),
            }
        }
        Ok(runs)
    }

    /// Path of chunk file `i` (blsk: the superchunk file holding it).
    pub(crate) fn chunk_path(&self, i: usize) -> PathBuf {
        if let Some(c) = self.blsk.as_ref().and_then(|b| b.get(i)) {
            return c.file.to_path_buf();
        }
        self.root.join(format!("data/__{i}.blp"))
    }

    fn no_such(&self, index: usize) -> ContainerError {
        ContainerError::NoSuchChunk {
            path: self.root.clone(),
            index,
            nchunks: self.nchunks,
        }
    }

    /// Uncompressed size of chunk `i` (from the metadata; object dtype: the chunk header).
    pub(crate) fn chunk_nbytes(&self, i: usize) -> Result<usize, ContainerError> {
        if i >= self.nchunks {
            return Err(self.no_such(i));
        }
        if self.dtype_info.is_none() {
            let h = self.chunk_header_bytes(i)?;
            let n = i32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            return usize::try_from(n).map_err(|_| ContainerError::Malformed {
                path: self.chunk_path(i),
                what: "chunk nbytes".into(),
                offset: BLP_HEADER_LEN as u64 + 4,
                why: format!("negative nbytes {n}"),
            });
        }
        let rows = (self.shape[0] - i as u64 * self.chunklen).min(self.chunklen);
        usize::try_from(rows * self.atomsize).map_err(|_| self.no_such(i))
    }

    /// The 16-byte Blosc1 header of chunk `i`.
    pub(crate) fn chunk_header_bytes(&self, i: usize) -> Result<Vec<u8>, ContainerError> {
        let (_, src, base, _) = self.locate(i)?;
        src.read_at(base, 16, "blosc1 chunk header")
    }

    /// The Blosc1 chunk of chunk file `i` (bytes after its cbytes are ignored).
    pub(crate) fn chunk_bytes(&self, i: usize) -> Result<Vec<u8>, ContainerError> {
        let (path, src, base, room) = self.locate(i)?;
        // The Blosc1 header first; then exactly the chunk (bytes after its cbytes are
        // ignored, as bcolz does).
        let mut buf = src.read_at(base, 16.min(room), "blosc1 chunk header")?;
        let cb = blosc1_check(&path, &buf, room, base)?;
        src.read_into(base + 16, cb - 16, "blosc1 chunk", &mut buf)?;
        Ok(buf)
    }

    /// Reads `buf.len()` bytes of the Blosc1 chunk of file `i` at `offset` (relative to the
    /// chunk, i.e. after the `blpk` prefix): the same bytes as that window of
    /// [`Carray::chunk_bytes`], without reading the rest. A window outside the chunk's cbytes
    /// is an error.
    pub(crate) fn chunk_read_at(
        &self,
        i: usize,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<bool, ContainerError> {
        if i >= self.nchunks {
            return Err(self.no_such(i));
        }
        let (path, src, base, room) = self.locate(i)?;
        let mut head = [0u8; 16];
        let n = head.len().min(room);
        src.read_exact_at(base, &mut head[..n], &"blosc1 chunk header")?;
        let cb = blosc1_check(&path, &head[..n], room, base)? as u64;
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > cb)
        {
            return Err(ContainerError::ChunkWindow {
                path,
                index: i,
                offset,
                len: buf.len(),
                cbytes: cb,
            });
        }
        src.read_exact_at(base + offset, buf, &"blosc1 chunk")?;
        Ok(true)
    }
}

/// The chunk index a file of `data/` is named for (`__N.blp`, N written as [`Carray`] names
/// it: decimal without leading zeros), or `None`. The one parser of these names (remote
/// prefixes order their chunk objects by it too).
pub(crate) fn chunk_file_index(name: &str) -> Option<usize> {
    let n = name.strip_prefix("__")?.strip_suffix(".blp")?;
    let canonical = n == "0" || (!n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()));
    if canonical { n.parse().ok() } else { None }
}

/// The cbytes of the Blosc1 chunk whose 16-byte header is `head`, stored at offset `base` of
/// `path` with `room` bytes available, checked to fit; a chunk that is not Blosc1 is an error.
fn blosc1_check(path: &Path, head: &[u8], room: usize, base: u64) -> Result<usize, ContainerError> {
    let cb = head
        .get(12..16)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let cb = cb
        .and_then(|c| usize::try_from(c).ok())
        .filter(|&c| (16..=room).contains(&c))
        .ok_or_else(|| ContainerError::Malformed {
            path: path.to_path_buf(),
            what: "blosc1 chunk".into(),
            offset: base + 12,
            why: format!("chunk cbytes {cb:?} outside [16, {room}]"),
        })?;
    // C-Blosc 1.x reads only version-2 chunks (1 = pre-1.0); a Blosc2 chunk here is a
    // damaged carray (`docs/format/CONTAINERS.md` 5.1).
    let version = head.first().copied().unwrap_or(0);
    let flags = head.get(2).copied().unwrap_or(0);
    if !(1..=2).contains(&version) || flags & 0x05 == 0x05 {
        return Err(ContainerError::Malformed {
            path: path.to_path_buf(),
            what: "blosc1 chunk".into(),
            offset: base,
            why: format!(
                "chunk version {version} flags 0x{flags:02x}: not a Blosc1 chunk (bcolz cannot read Blosc2 chunks)"
            ),
        });
    }
    Ok(cb)
}
