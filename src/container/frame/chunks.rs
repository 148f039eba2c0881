//! Access to one frame's chunks: index entries, sizes, kinds, the compressed bytes of stored
//! chunks (read, mapped, or read in part), and the chunks synthesised for special index
//! entries. Opening the frame is the parent module's.

use super::*;

impl Frame {
    /// The raw index entry of chunk `i` (no range check beyond the index itself).
    pub(crate) fn index_entry(&self, i: usize) -> Option<i64> {
        match &self.index {
            Index::Explicit(v) => v.get(i).copied(),
            Index::Repeated(e) => (i < self.nchunks).then_some(*e),
        }
    }

    /// The entry every chunk shares when the index is a repeated value (`None`: explicit).
    pub(crate) fn repeated_entry(&self) -> Option<i64> {
        match &self.index {
            Index::Explicit(_) => None,
            Index::Repeated(e) => Some(*e),
        }
    }

    fn no_such(&self, index: usize) -> ContainerError {
        ContainerError::NoSuchChunk {
            path: self.display_path(),
            index,
            nchunks: self.nchunks,
        }
    }

    fn display_path(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| self.src.path().to_path_buf())
    }

    pub(super) fn slot(&self, i: usize) -> Result<Slot, ContainerError> {
        let e = self.index_entry(i).ok_or_else(|| self.no_such(i))?;
        // Entries were classified at open.
        classify(e).ok_or_else(|| self.no_such(i))
    }

    /// Uncompressed size implied by the header for chunk `i` in a fixed-size frame.
    fn fixed_nbytes(&self, i: usize) -> Option<usize> {
        let cs = u64::try_from(self.info.chunksize).ok().filter(|&c| c > 0)?;
        let before = cs.checked_mul(i as u64)?;
        let n = self.info.nbytes.checked_sub(before)?.min(cs);
        usize::try_from(n).ok()
    }

    fn sparse_chunk_path(&self, id: u64) -> PathBuf {
        sparse_chunk_file(self.dir.as_deref().unwrap_or(Path::new(".")), id)
    }

    /// The first 32 bytes of stored chunk `i` (offset or id `o`).
    fn stored_header(&self, i: usize, o: u64) -> Result<Vec<u8>, ContainerError> {
        if self.dir.is_some() {
            let src = self
                .files
                .open(&self.sparse_chunk_path(o), Arc::clone(&self.stats))?;
            src.read_at(0, 32, &format!("chunk {i} header"))
        } else {
            let at = self.info.start + self.info.header_len + o;
            self.src.read_at(at, 32, &format!("chunk {i} header"))
        }
    }

    /// Uncompressed size of chunk `i`: from the header for fixed-size frames, from the chunk's
    /// own header (32 bytes read) for variable-size frames.
    pub(crate) fn chunk_nbytes(&self, i: usize) -> Result<usize, ContainerError> {
        let slot = self.slot(i)?;
        if let Some(n) = self.fixed_nbytes(i) {
            return Ok(n);
        }
        match slot {
            Slot::Special(_) => self.special_nbytes(i),
            Slot::Stored(o) => {
                let h = self.stored_header(i, o)?;
                let n = le_i32(&h, 4).unwrap_or(-1);
                let n = usize::try_from(n)
                    .map_err(|_| self.chunk_fault(i, o, format!("negative nbytes {n}")))?;
                // One chunk cannot hold more than the whole frame: readers size buffers from
                // this, so a chunk header claiming gigabytes in a small frame is refused.
                if n as u64 > self.info.nbytes {
                    return Err(self.chunk_fault(
                        i,
                        o,
                        format!("nbytes {n} exceeds the frame's nbytes {}", self.info.nbytes),
                    ));
                }
                Ok(n)
            }
        }
    }

    fn variable_special(&self, i: usize) -> ContainerError {
        ContainerError::Malformed {
            path: self.display_path(),
            what: format!("chunk {i}"),
            offset: self.info.index_offset.unwrap_or(0),
            why: "special chunk in a variable-size frame whose size cannot be inferred (C-Blosc2 cannot read it either)"
                .into(),
        }
    }

    fn chunk_fault(&self, i: usize, o: u64, why: String) -> ContainerError {
        match &self.dir {
            Some(_) => ContainerError::Malformed {
                path: self.sparse_chunk_path(o),
                what: format!("chunk {i}"),
                offset: 0,
                why,
            },
            None => ContainerError::Malformed {
                path: self.src.path().to_path_buf(),
                what: format!("chunk {i}"),
                offset: self.info.start + self.info.header_len + o,
                why,
            },
        }
    }

    /// How chunk `i` is stored (reads the 32-byte header of stored chunks).
    pub(crate) fn chunk_kind(&self, i: usize) -> Result<ChunkKind, ContainerError> {
        match self.slot(i)? {
            Slot::Special(k) => Ok(k),
            Slot::Stored(o) => Ok(header_kind(&self.stored_header(i, o)?)),
        }
    }

    /// The 32-byte header of chunk `i` (synthesised for special entries).
    pub(crate) fn chunk_header_bytes(&self, i: usize) -> Result<Vec<u8>, ContainerError> {
        match self.slot(i)? {
            Slot::Special(k) => self.synthesise(i, k),
            Slot::Stored(o) => self.stored_header(i, o),
        }
    }

    /// Size of special chunk `i`: from the header for fixed-size frames; for variable-size
    /// frames inferred (see the module docs) or an error.
    fn special_nbytes(&self, i: usize) -> Result<usize, ContainerError> {
        if let Some(n) = self.fixed_nbytes(i) {
            return Ok(n);
        }
        self.variable_special_size
            .get_or_init(|| self.infer_special_size())
            .ok_or_else(|| self.variable_special(i))
    }

    /// In a variable-size frame, the special chunks' common size: the nbytes not covered by
    /// stored chunks, divided evenly; with more than one special chunk it must also equal the
    /// largest stored chunk (the writer's chunk size). `None` when that does not hold.
    fn infer_special_size(&self) -> Option<usize> {
        let n = self.nchunks as u64;
        if let Index::Repeated(e) = self.index {
            return match classify(e)? {
                Slot::Special(_) if n > 0 && self.info.nbytes.is_multiple_of(n) => {
                    usize::try_from(self.info.nbytes / n).ok()
                }
                _ => None,
            };
        }
        let (mut specials, mut stored, mut largest) = (0u64, 0u64, 0u64);
        for i in 0..self.nchunks {
            match self.slot(i).ok()? {
                Slot::Special(_) => specials += 1,
                Slot::Stored(o) => {
                    let h = self.stored_header(i, o).ok()?;
                    let nb = u64::try_from(le_i32(&h, 4)?).ok()?;
                    stored = stored.checked_add(nb)?;
                    largest = largest.max(nb);
                }
            }
        }
        let rest = self.info.nbytes.checked_sub(stored)?;
        if specials == 0 || rest % specials != 0 {
            return None;
        }
        let each = rest / specials;
        let plausible = each > 0 && (specials == 1 || largest == 0 || each == largest);
        if plausible {
            usize::try_from(each).ok()
        } else {
            None
        }
    }

    fn synthesise(&self, i: usize, kind: ChunkKind) -> Result<Vec<u8>, ContainerError> {
        let n = self.special_nbytes(i)?;
        Ok(special_chunk(
            kind,
            n,
            self.info.typesize,
            self.info.blocksize,
        ))
    }

    /// The complete compressed chunk `i`.
    pub(crate) fn chunk_bytes(&self, i: usize) -> Result<Vec<u8>, ContainerError> {
        let o = match self.slot(i)? {
            Slot::Special(k) => return self.synthesise(i, k),
            Slot::Stored(o) => o,
        };
        if self.dir.is_some() {
            let path = self.sparse_chunk_path(o);
            let src = self.files.open(&path, Arc::clone(&self.stats))?;
            // A chunk file holds exactly one chunk, whose cbytes is an int32.
            let len = usize::try_from(src.len())
                .ok()
                .filter(|&l| l <= i32::MAX as usize)
                .ok_or_else(|| {
                    self.chunk_fault(i, o, format!("{} bytes, too large for a chunk", src.len()))
                })?;
            return src.read_at(0, len, &format!("chunk {i}"));
        }
        let mut buf = Vec::new();
        let n = self.contiguous_chunk_into(i, o, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// The same bytes as [`Frame::chunk_bytes`], read into `buf[..n]` (returns `n`): `buf` is
    /// grown when too short but never shrunk or cleared, so a reused buffer costs neither an
    /// allocation nor zeroing per chunk. Bytes past `n` are left as they were.
    pub(crate) fn chunk_bytes_into(
        &self,
        i: usize,
        buf: &mut Vec<u8>,
    ) -> Result<usize, ContainerError> {
        match self.slot(i)? {
            Slot::Stored(o) if self.dir.is_none() => self.contiguous_chunk_into(i, o, buf),
            _ => {
                // Special and sparse chunks: rare or small enough to go the simple way.
                Ok(crate::container::copy_into(buf, &self.chunk_bytes(i)?))
            }
        }
    }

    /// Calls `f` with the complete compressed chunk `i` straight from the frame's mapping (the
    /// same bytes as [`Frame::chunk_bytes`], without a copy). `Ok(false)` (and `f` not called)
    /// when the chunk is not in a mapping: special and sparse chunks, a chunk past the mapped
    /// length (the frame grew), or no mapping at all. `partial`: `f` reads only a few of its
    /// pages (a range decode), see `mapped.rs` on why that matters.
    ///
    /// # Errors
    /// A chunk whose cbytes does not fit the chunk area; an I/O error when the file shrank
    /// while `f` ran.
    pub(crate) fn with_mapped_chunk(
        &self,
        i: usize,
        partial: bool,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<bool, ContainerError> {
        let o = match self.slot(i)? {
            Slot::Stored(o) if self.dir.is_none() => o,
            _ => return Ok(false),
        };
        let at = self.info.start + self.info.header_len + o;
        // A file that shrank underneath is an error of this chunk, named as such in the log.
        let shrank = |e: ContainerError| match e {
            ContainerError::Io { source, .. } => self.chunk_fault(i, o, source.to_string()),
            e => e,
        };
        let Some(cb) = self.src.with_mapped(at, 32, 32, |head| le_i32(head, 12)) else {
            return Ok(false);
        };
        let cb = cb.map_err(shrank)?.unwrap_or(-1);
        let cb = self.checked_cbytes(i, o, cb)?;
        let touched = if partial { PARTIAL_TOUCH } else { cb };
        match self.src.with_mapped(at, cb, touched, f) {
            None => Ok(false),
            Some(r) => r.map(|()| true).map_err(shrank),
        }
    }

    /// A chunk's cbytes (read from its header at offset `o` of the chunk area), checked to be
    /// a whole header at least and to fit the room left in the frame.
    fn checked_cbytes<C>(&self, i: usize, o: u64, cb: C) -> Result<usize, ContainerError>
    where
        C: TryInto<u64> + std::fmt::Display + Copy,
    {
        let room = self.info.cbytes - o;
        cb.try_into()
            .ok()
            .filter(|&c| (32..=room).contains(&c))
            .and_then(|c| usize::try_from(c).ok())
            .ok_or_else(|| {
                self.chunk_fault(i, o, format!("chunk cbytes {cb} outside [32, {room}]"))
            })
    }

    /// Chunk `i` of a contiguous frame, stored at offset `o` of the chunk area, read into
    /// `buf[..n]` (returns `n`, its cbytes, checked against the room left in the frame).
    fn contiguous_chunk_into(
        &self,
        i: usize,
        o: u64,
        buf: &mut Vec<u8>,
    ) -> Result<usize, ContainerError> {
        let at = self.info.start + self.info.header_len + o;
        let mut head = [0u8; 32];
        self.src
            .read_exact_at(at, &mut head, &format_args!("chunk {i} header"))?;
        let cb = self.checked_cbytes(i, o, le_i32(&head, 12).unwrap_or(-1))?;
        crate::mem::grow_discarding(buf, cb);
        buf[..32].copy_from_slice(&head);
        self.src
            .read_exact_at(at + 32, &mut buf[32..cb], &format_args!("chunk {i}"))?;
        Ok(cb)
    }

    /// Reads `buf.len()` compressed bytes of chunk `i` at `offset` (relative to the chunk
    /// start) without reading the rest of the chunk: the same bytes as that window of
    /// [`Frame::chunk_bytes`]. `Ok(false)` for special entries, which store no bytes.
    ///
    /// The window is checked against the chunk's cbytes (contiguous: from its header, read
    /// together with the window when the window starts at 0; sparse: the chunk file's length,
    /// the whole file being the chunk) and is an error outside it.
    ///
    /// `known`: chunk `i`'s `cbytes`, when the caller read them from its header in this
    /// frame earlier: a contiguous frame then checks them against the room the frame has for
    /// the chunk and the window against them, and reads the window alone (one read, not
    /// two). Sparse frames read as without them.
    pub(crate) fn chunk_read_at(
        &self,
        i: usize,
        offset: u64,
        buf: &mut [u8],
        known: Option<u64>,
    ) -> Result<bool, ContainerError> {
        let o = match self.slot(i)? {
            Slot::Special(_) => return Ok(false),
            Slot::Stored(o) => o,
        };
        let len = buf.len();
        let window = |path: PathBuf, cbytes: u64| window_in(path, i, offset, len, cbytes);
        if self.dir.is_some() {
            let path = self.sparse_chunk_path(o);
            let src = self.files.open(&path, Arc::clone(&self.stats))?;
            window(path, src.len())?;
            src.read_exact_at(offset, buf, &format_args!("chunk {i}"))?;
            return Ok(true);
        }
        let at = self.info.start + self.info.header_len + o;
        if let Some(cb) = known {
            self.checked_cbytes(i, o, cb)?;
            window(self.src.path().to_path_buf(), cb)?;
            self.src
                .read_exact_at(at + offset, buf, &format_args!("chunk {i}"))?;
            return Ok(true);
        }
        let room = self.info.cbytes - o;
        let cbytes = |head: &[u8]| {
            let cb = self.checked_cbytes(i, o, le_i32(head, 12).unwrap_or(-1))?;
            Ok::<u64, ContainerError>(cb as u64)
        };
        if offset == 0 && buf.len() >= 16 {
            // The header comes with the window: one read.
            window(self.src.path().to_path_buf(), room)?;
            self.src
                .read_exact_at(at, buf, &format_args!("chunk {i}"))?;
            let cb = cbytes(buf)?;
            window(self.src.path().to_path_buf(), cb)?;
            return Ok(true);
        }
        let mut head = [0u8; 16];
        self.src
            .read_exact_at(at, &mut head, &format_args!("chunk {i} header"))?;
        window(self.src.path().to_path_buf(), cbytes(&head)?)?;
        self.src
            .read_exact_at(at + offset, buf, &format_args!("chunk {i}"))?;
        Ok(true)
    }
}

/// `Ok` when the window of `len` bytes at `offset` of chunk `index` (of `path`) lies inside
/// its `cbytes`, else [`ContainerError::ChunkWindow`].
fn window_in(
    path: PathBuf,
    index: usize,
    offset: u64,
    len: usize,
    cbytes: u64,
) -> Result<(), ContainerError> {
    let fits = offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= cbytes);
    if fits {
        return Ok(());
    }
    Err(ContainerError::ChunkWindow {
        path,
        index,
        offset,
        len,
        cbytes,
    })
}

/// The file of chunk id `id` in the sparse frame directory `dir`: `%08X.chunk`, as C-Blosc2
/// names them.
pub(crate) fn sparse_chunk_file(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:08X}.chunk"))
}

/// The chunk id file `name` of a sparse frame directory stands for, when it is spelled as
/// C-Blosc2 spells them ([`sparse_chunk_file`]: the only name b2fs opens for that id).
pub(crate) fn sparse_chunk_id(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".chunk").filter(|h| h.len() == 8)?;
    let id = u64::from_str_radix(hex, 16).ok()?;
    (format!("{id:08X}.chunk") == name).then_some(id)
}
