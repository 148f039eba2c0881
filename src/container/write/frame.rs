//! Commits to Blosc2 frames: contiguous frames by shadow append, sparse frames by fresh chunk
//! files and a renamed `chunks.b2frame`; and the byte builders both share (patched header,
//! memcpyed index chunk, trailer).
//!
//! Knows nothing of FUSE or of chunk data (chunk headers only). Spec: `docs/format/CONTAINERS.md`
//! 1.2-1.6 (header fields, metalayer section, index, trailer), 2 (sparse frames), 3.2 (variable
//! mode), 4.1 (vlmeta encoding), 4.3 (the b2nd shape int64), 6.2 and 6.3 (commit orders).
//!
//! Contiguous order (6.2): with P the old frame_len, new chunks are written at P, then the new
//! index right after them (new cbytes = index position - header_len: the old index, old
//! trailer and replaced chunks become dead space), then the new trailer; fsync; then the whole
//! header in one `pwrite` at 0 (the commit point); fsync. Before that `pwrite` no byte a reader
//! of the old header looks at has changed.
//!
//! Sparse order (6.3): each new chunk in a fresh-id file, created where no file is (fsync;
//! a file another writer made there first is a conflict, not overwritten), directory fsync, the new
//! `chunks.b2frame` in a temp file of the commit's own (`.b2fs-PID-N-chunks.b2frame.b2fs-tmp`,
//! created where no file is; fsync) renamed over the old one, directory fsync, then
//! leftover chunk files of an earlier crash are removed; the chunk files this commit no longer
//! references are removed once no frame opened before it is open
//! (`src/container/frame/retire.rs`).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::io::{Io, SidecarLock};
use super::{
    Chunk, Edit, MAX_WRITE_VLMETALAYERS, Slot, changed, header_special, io_err, plan, refused,
    unsupported,
};
use crate::codec::{CParams, ChunkFormat, Codec, compress, filter_id};
use crate::container::frame::{Frame, retire, sparse_chunk_file, sparse_chunk_id};
use crate::container::{Array, ChunkKind, ContainerError, FileState, SourceKind, attrs};

/// Special index entries (`docs/format/CONTAINERS.md` 1.5).
pub(super) fn special_entry(kind: ChunkKind) -> Option<i64> {
    let top: u64 = match kind {
        ChunkKind::Zeros => 0x81,
        ChunkKind::Nan => 0x82,
        ChunkKind::Uninit => 0x84,
        ChunkKind::Regular | ChunkKind::Value => return None,
    };
    Some((top << 56) as i64)
}

/// A memcpyed Blosc2 chunk holding `data` (header `05 01 17 typesize`, filters all 0).
pub(super) fn memcpyed_chunk(data: &[u8], typesize: u8) -> Vec<u8> {
    let n = data.len() as u32;
    let mut c = Vec::with_capacity(32 + data.len());
    c.extend_from_slice(&[5, 1, 0x17, typesize]);
    c.extend_from_slice(&n.to_le_bytes());
    c.extend_from_slice(&n.to_le_bytes());
    c.extend_from_slice(&(n + 32).to_le_bytes());
    c.resize(32, 0);
    c.extend_from_slice(data);
    c
}

/// The index chunk of `entries` (LE int64, typesize 8, memcpyed).
pub(super) fn index_chunk(entries: &[i64]) -> Vec<u8> {
    let raw: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
    memcpyed_chunk(&raw, 8)
}

/// A complete trailer holding `layers` (name, stored Blosc2 chunk) in order.
pub(super) fn trailer(layers: &[(String, Vec<u8>)]) -> Vec<u8> {
    let names: usize = layers.iter().map(|(n, _)| 6 + n.len()).sum();
    let n = layers.len() as u16;
    let mut t = vec![0x94, 0x01, 0x93, 0xcd];
    t.extend_from_slice(&((6 + names) as u16).to_be_bytes());
    t.push(0xde);
    t.extend_from_slice(&n.to_be_bytes());
    let mut patch = Vec::with_capacity(layers.len());
    for (name, _) in layers {
        t.push(0xa0 | name.len() as u8);
        t.extend_from_slice(name.as_bytes());
        t.push(0xd2);
        patch.push(t.len());
        t.extend_from_slice(&[0; 4]);
    }
    t.push(0xdc);
    t.extend_from_slice(&n.to_be_bytes());
    for ((_, chunk), at) in layers.iter().zip(patch) {
        let off = (t.len() as u32).to_be_bytes();
        t[at..at + 4].copy_from_slice(&off);
        t.push(0xc6);
        t.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        t.extend_from_slice(chunk);
    }
    let len = (t.len() + 23) as u32;
    t.push(0xce);
    t.extend_from_slice(&len.to_be_bytes());
    t.extend_from_slice(&[0xd8, 0x00]);
    t.extend_from_slice(&[0; 16]);
    t
}

/// The vlmetalayers after the edit: old stored chunks for keys whose value did not change,
/// python-blosc2's encoding (msgpack, a ZSTD clevel 5 Blosc2 chunk of typesize 1) for the rest.
pub(super) fn vlmeta_layers(
    array: &Array,
    new: Option<&Value>,
) -> Result<Vec<(String, Vec<u8>)>, ContainerError> {
    let path = array.path();
    let old = array.vlmetalayers();
    let layers: Vec<(String, Vec<u8>)> = match new {
        None => old
            .iter()
            .map(|v| (v.name.clone(), v.chunk.clone()))
            .collect(),
        Some(obj) => {
            let map = obj
                .as_object()
                .ok_or_else(|| refused(path, "attrs: not a JSON object"))?;
            let mut out = Vec::with_capacity(map.len());
            for (k, v) in map {
                if k.len() > 31 {
                    return Err(refused(
                        path,
                        format!("attribute name {k:?}: longer than 31 bytes"),
                    ));
                }
                if let Some(o) = old.iter().find(|o| &o.name == k && &o.json == v) {
                    out.push((k.clone(), o.chunk.clone()));
                    continue;
                }
                let packed = attrs::json_to_msgpack(v)
                    .map_err(|e| refused(path, format!("attribute {k:?}: {e}")))?;
                let params = CParams {
                    allow_special: false,
                    ..CParams::blosc2(Codec::Zstd, 5, 1, filter_id::SHUFFLE)
                };
                let chunk = compress(&packed, &params)
                    .map_err(|e| unsupported(path, format!("attribute {k:?}: {e}")))?;
                out.push((k.clone(), chunk));
            }
            out
        }
    };
    if layers.len() > MAX_WRITE_VLMETALAYERS {
        return Err(refused(
            path,
            format!(
                "{} vlmetalayers (attributes): C-Blosc2 writes at most {MAX_WRITE_VLMETALAYERS} and corrupts frames with more",
                layers.len()
            ),
        ));
    }
    Ok(layers)
}

/// Re-encodes 32-byte zeros/NaN/uninitialised special chunks as regular chunks with the
/// array's chunk parameters (looked up once): C-Blosc2 3.3 cannot read such a chunk stored in
/// a frame (seen as "Cannot inspect the first chunk in frame"), only as a special offset,
/// which variable-size frames cannot have.
/// Each re-encoded chunk waits in the edit's spool when it has one (within the commit's
/// bound, like the edit's own chunks), else in memory.
struct Reencoder<'a> {
    array: &'a Array,
    params: Option<CParams>,
    spool: Option<&'a parking_lot::Mutex<super::Spool>>,
}

impl Reencoder<'_> {
    fn regular(&mut self, chunk: &[u8]) -> Result<Chunk, ContainerError> {
        let bytes = self.encode(chunk)?;
        match self.spool {
            None => Ok(bytes.into()),
            Some(spool) => spool.lock().add(bytes).map_err(|e| {
                io_err(
                    self.array.path(),
                    std::io::Error::new(
                        e.kind(),
                        format!("keeping a re-encoded special chunk in the commit's spool: {e}"),
                    ),
                )
            }),
        }
    }

    fn encode(&mut self, chunk: &[u8]) -> Result<Vec<u8>, ContainerError> {
        let path = self.array.path();
        let why = |e: crate::codec::CodecError| {
            unsupported(path, format!("re-encoding a special chunk: {e}"))
        };
        let data = crate::codec::decompress(chunk).map_err(why)?;
        if self.params.is_none() {
            self.params = Some(CParams {
                allow_special: false,
                ..super::chunk_cparams(self.array)?
            });
        }
        match &self.params {
            Some(p) => compress(&data, p).map_err(why),
            None => Err(unsupported(
                path,
                "re-encoding a special chunk: no parameters",
            )),
        }
    }
}

/// The new content of each chunk slot of the frame.
enum Entry<'e> {
    /// Keep this index entry (an offset/id of a stored chunk, or a special code).
    Keep(i64),
    /// Store these bytes (new, or a special chunk materialised for variable mode), read back
    /// from the edit's spool when the commit writes them.
    Store(Cow<'e, Chunk>),
}

/// Everything a frame commit writes besides the chunk bytes.
struct Layout<'e> {
    entries: Vec<Entry<'e>>,
    nbytes: u64,
    chunksize: i32,
    general_flags: u8,
    /// New first dimension of a 1-D b2nd/caterva shape.
    shape0: Option<u64>,
}

/// Validates sizes, decides fixed vs variable mode, and maps slots to index entries.
fn layout<'e>(array: &Array, f: &Frame, edit: &'e Edit) -> Result<Layout<'e>, ContainerError> {
    let path = array.path();
    let info = f.info();
    let slots = plan(array, edit, ChunkFormat::Blosc2)?;
    let old_n = array.nchunks();
    let n = slots.len();
    let mut sizes = Vec::with_capacity(n);
    for (p, s) in slots.iter().enumerate() {
        let size = match s {
            Slot::Old(i) => array.chunk_nbytes(*i)?,
            Slot::New(_, h) => {
                // Plain frames: an updated chunk other than the last keeps its size.
                if array.nd_meta().is_none() && p < old_n && p + 1 < n {
                    let old = array.chunk_nbytes(p)?;
                    if h.nbytes != old {
                        return Err(refused(
                            path,
                            format!(
                                "chunk {p}: {} bytes uncompressed, the chunk it replaces has {old}",
                                h.nbytes
                            ),
                        ));
                    }
                }
                h.nbytes
            }
        };
        sizes.push(size as u64);
    }
    // A frame that has no chunks keeps none (an attributes-only edit of an empty SChunk,
    // such as a store's `__vlmeta__` carrier): nothing is truncated.
    if n == 0 && old_n > 0 && array.kind == SourceKind::Cframe {
        return Err(refused(
            path,
            "truncating a contiguous frame to 0 chunks (not possible crash-safely in place)",
        ));
    }
    let mut chunksize = info.chunksize;
    let nd = array.nd_meta();
    if nd.is_some() {
        for (p, s) in slots.iter().enumerate() {
            let Slot::New(_, h) = s else { continue };
            if chunksize <= 0 || h.nbytes as u64 != chunksize as u64 {
                return Err(refused(
                    path,
                    format!(
                        "chunk {p}: {} bytes uncompressed, every chunk of this array has {chunksize}",
                        h.nbytes
                    ),
                ));
            }
        }
    } else if chunksize != 0 && n > 0 {
        let c = if chunksize > 0 {
            chunksize as u64
        } else {
            sizes[0]
        };
        let fixed = sizes[..n - 1].iter().all(|&s| s == c) && sizes[n - 1] <= c;
        chunksize = if fixed { c as i32 } else { 0 };
    }
    let variable = chunksize == 0;
    let switching = variable && info.chunksize != 0;
    let general_flags = if switching {
        (info.general_flags & 0xb0) | 0x40 | 3
    } else {
        info.general_flags
    };
    let mut re = Reencoder {
        array,
        params: None,
        spool: edit.spool.as_deref(),
    };
    let mut entries = Vec::with_capacity(n);
    for s in &slots {
        let e = match s {
            Slot::Old(i) => {
                let e = f
                    .index_entry(*i)
                    .ok_or_else(|| unsupported(path, format!("chunk {i}: no index entry")))?;
                if e < 0 && switching {
                    // Special offsets have no size in variable mode: store the chunk (its
                    // size is still known from the fixed-size header).
                    Entry::Store(Cow::Owned(re.regular(&array.chunk_bytes(*i)?)?))
                } else {
                    Entry::Keep(e)
                }
            }
            Slot::New(bytes, h) => match header_special(h) {
                None => Entry::Store(Cow::Borrowed(bytes)),
                // A special offset only for a full-size chunk of a fixed-size frame (C-Blosc2
                // synthesises NaN for typesize 4 and 8 only): a partial special last chunk
                // would become unreadable once C-Blosc2 appends and switches to variable
                // mode.
                Some(kind) => match special_entry(kind) {
                    Some(code)
                        if !variable
                            && h.nbytes as u64 == chunksize as u64
                            && (kind != ChunkKind::Nan || matches!(info.typesize, 4 | 8)) =>
                    {
                        Entry::Keep(code)
                    }
                    _ => {
                        let special = bytes.bytes().map_err(|e| io_err(path, e))?;
                        Entry::Store(Cow::Owned(re.regular(&special)?))
                    }
                },
            },
        };
        entries.push(e);
    }
    let resized = n != old_n;
    let shape0 = match nd {
        Some(nd) if resized => {
            let cs0 = nd.chunkshape.first().copied().unwrap_or(0);
            let cover = (n as u64).saturating_mul(cs0);
            let old = nd.shape.first().copied().unwrap_or(0);
            Some(if n > old_n { cover } else { old.min(cover) })
        }
        _ => None,
    };
    Ok(Layout {
        entries,
        nbytes: sizes.iter().sum(),
        chunksize,
        general_flags,
        shape0,
    })
}

/// The old header with the commit's fields patched in (same length: pitfall 1).
fn patch_header(
    array: &Array,
    header: &mut [u8],
    l: &Layout<'_>,
    frame_len: u64,
    cbytes: u64,
    has_vlmeta: bool,
) -> Result<(), ContainerError> {
    let path = array.path();
    header[16..24].copy_from_slice(&frame_len.to_be_bytes());
    header[25] = l.general_flags;
    header[30..38].copy_from_slice(&l.nbytes.to_be_bytes());
    header[39..47].copy_from_slice(&cbytes.to_be_bytes());
    header[58..62].copy_from_slice(&l.chunksize.to_be_bytes());
    header[68] = if has_vlmeta { 0xc3 } else { 0xc2 };
    let Some(shape0) = l.shape0 else {
        return Ok(());
    };
    let bad = |why: &str| unsupported(path, format!("updating the array shape: {why}"));
    let mut patched = false;
    for m in ["b2nd", "caterva"] {
        if let Some(c) = metalayer_content(header, m) {
            // fixarray, version, ndim 1, fixarray(1), d3, int64 shape[0].
            let ok = header.get(c + 2) == Some(&1)
                && header.get(c + 3) == Some(&0x91)
                && header.get(c + 4) == Some(&0xd3)
                && header.len() >= c + 13;
            if !ok {
                return Err(bad("the metalayer is not a 1-D b2nd/caterva layer"));
            }
            header[c + 5..c + 13].copy_from_slice(&shape0.to_be_bytes());
            patched = true;
        }
    }
    if patched {
        Ok(())
    } else {
        Err(bad("no b2nd/caterva metalayer found in the header"))
    }
}

/// Position of the content of metalayer `name` in the header bytes (after its `c6` + len).
fn metalayer_content(h: &[u8], name: &str) -> Option<usize> {
    if h.get(91) != Some(&0xde) {
        return None;
    }
    let n = u16::from_be_bytes([*h.get(92)?, *h.get(93)?]);
    let mut pos = 94usize;
    for _ in 0..n {
        let len = usize::from(*h.get(pos)? & 0x1f);
        let nm = h.get(pos + 1..pos + 1 + len)?;
        pos += 1 + len;
        if *h.get(pos)? != 0xd2 {
            return None;
        }
        let off = i32::from_be_bytes(h.get(pos + 1..pos + 5)?.try_into().ok()?);
        pos += 5;
        if nm == name.as_bytes() {
            let off = usize::try_from(off).ok()?;
            return (*h.get(off)? == 0xc6).then_some(off + 5);
        }
    }
    None
}

fn read_header(path: &Path, file: &std::fs::File, len: u64) -> Result<Vec<u8>, ContainerError> {
    let mut header = vec![0u8; len as usize];
    file.read_exact_at(&mut header, 0)
        .map_err(|e| io_err(path, e))?;
    Ok(header)
}

/// Refuses when the source changed since `array` was opened (its view would be stale).
pub(super) fn check_fresh(array: &Array) -> Result<(), ContainerError> {
    if array.changed_on_disk()? {
        return Err(changed(
            array.path(),
            "the frame header, length or mtime differ",
        ));
    }
    Ok(())
}

/// Commits `edit` to the frame `f` of `array` (contiguous or sparse).
pub(super) fn commit(
    array: &Array,
    f: &Frame,
    edit: &Edit,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let l = layout(array, f, edit)?;
    let layers = vlmeta_layers(array, edit.attrs.as_ref())?;
    let trailer = trailer(&layers);
    match array.kind {
        SourceKind::Sframe => commit_sparse(array, f, &l, &layers, &trailer, io),
        _ => commit_contiguous(array, f, &l, &layers, &trailer, io),
    }
}

fn commit_contiguous(
    array: &Array,
    f: &Frame,
    l: &Layout<'_>,
    layers: &[(String, Vec<u8>)],
    trailer: &[u8],
    io: &mut Io,
) -> Result<(), ContainerError> {
    let path = f.source().path();
    let info = f.info();
    let mut sidecar = path.as_os_str().to_os_string();
    sidecar.push(".b2lock");
    let lock = SidecarLock::acquire(Path::new(&sidecar))?;
    check_fresh(array)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    let hl = info.header_len;
    if array.nchunks() == 0 && l.entries.is_empty() {
        // An empty frame (a store's `__vlmeta__` carrier) stays empty. Its trailer follows
        // the header directly (no index chunk when nbytes is 0), and C-Blosc2 cannot open one
        // with dead space there, so it is rewritten whole (header and trailer: a few hundred
        // bytes) and renamed into place.
        let len = hl + trailer.len() as u64;
        let mut bytes = read_header(path, &file, hl)?;
        patch_header(array, &mut bytes, l, len, 0, !layers.is_empty())?;
        bytes.extend_from_slice(trailer);
        io.replace(path, &bytes)?;
        if let Some(lock) = lock {
            lock.bump()?;
        }
        return Ok(());
    }
    // Everything is laid out (and the header patched) before the first write, so a refusal
    // leaves every byte of the file as it was.
    let mut pos = info.frame_len;
    let mut writes: Vec<(u64, &Chunk)> = Vec::new();
    let mut entries = Vec::with_capacity(l.entries.len());
    for e in &l.entries {
        match e {
            Entry::Keep(v) => entries.push(*v),
            Entry::Store(bytes) => {
                writes.push((pos, bytes));
                entries.push((pos - hl) as i64);
                pos += bytes.len() as u64;
            }
        }
    }
    let cbytes = pos - hl;
    let index = index_chunk(&entries);
    let index_at = pos;
    pos += index.len() as u64;
    let trailer_at = pos;
    pos += trailer.len() as u64;
    let mut header = read_header(path, &file, hl)?;
    patch_header(array, &mut header, l, pos, cbytes, !layers.is_empty())?;
    let old = file.metadata().map_err(|e| io_err(path, e))?;

    // Past the old frame_len only, each chunk read back from the edit's spool as it is
    // written. A failure here (a write, a read-back) leaves the old version as it was: the
    // file is cut back to its old length and given back its mtime, so the source is
    // byte-identical again and the mount's next commit does not take it for another
    // writer's change (not after a simulated crash, which must leave what a crash would).
    let shadow = (|| {
        for (at, chunk) in writes {
            let bytes = chunk.bytes().map_err(|e| io_err(path, e))?;
            io.write_at(&file, path, at, &bytes)?;
        }
        io.write_at(&file, path, index_at, &index)?;
        io.write_at(&file, path, trailer_at, trailer)?;
        io.sync(&file, path)
    })();
    if let Err(e) = shadow {
        if io.crashed() {
            return Err(e);
        }
        return Err(restore(io, (f, &file), path, &old, e));
    }
    // The commit point: one pwrite of the whole header.
    io.write_at(&file, path, 0, &header)?;
    io.sync(&file, path)?;
    if let Some(lock) = lock {
        lock.bump()?;
    }
    Ok(())
}

/// Undoes the shadow writes of a contiguous commit that failed (`e`) before its commit point:
/// the file cut back to its old length and given back its old mtime (`old`). When the time
/// cannot be set (a file of another owner on a mount that may write it), the file is still
/// byte-identical but another writer's change would look the same: the error then says so
/// ([`ContainerError::Restored`], with the state the file is left in), so the caller can take
/// that state as its own rather than drop its pending edits as stale; only when the file was,
/// before the commit's writes, the state the frame was opened from (length, mtime) and now
/// holds its length and header prefix again. A file that cannot be
/// cut back keeps the plain error (its bytes past the old end differ: C-Blosc2 finds the
/// trailer from the file's end).
fn restore(
    io: &Io,
    (f, file): (&Frame, &std::fs::File),
    path: &Path,
    old: &std::fs::Metadata,
    e: ContainerError,
) -> ContainerError {
    if file.set_len(old.len()).is_err() {
        return e;
    }
    let reset = match old.modified() {
        Ok(mtime) => io.set_mtime(file, path, mtime),
        Err(why) => Err(io_err(path, why)),
    };
    let Err(why) = reset else {
        return e;
    };
    // Only the state the mount's version was opened from may be handed back as its own:
    // another writer's change before or during the shadow writes stays a change (ESTALE at
    // the next commit), as it was before the undo.
    if !f.same_but_mtime(old).unwrap_or(false) {
        return e;
    }
    match file.metadata() {
        Ok(now) => ContainerError::Restored {
            path: path.to_path_buf(),
            left: Box::new(FileState::of(&now)),
            why: why.to_string(),
            source: Box::new(e),
        },
        Err(_) => e,
    }
}

/// Ids of the chunk files in `dir` ([`sparse_chunk_id`]).
fn chunk_file_ids(dir: &Path) -> Result<Vec<u64>, ContainerError> {
    let rd = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    let mut ids = Vec::new();
    for e in rd {
        let e = e.map_err(|e| io_err(dir, e))?;
        ids.extend(sparse_chunk_id(&e.file_name().to_string_lossy()));
    }
    Ok(ids)
}

fn commit_sparse(
    array: &Array,
    f: &Frame,
    l: &Layout<'_>,
    layers: &[(String, Vec<u8>)],
    trailer: &[u8],
    io: &mut Io,
) -> Result<(), ContainerError> {
    let dir = array.path();
    let index_path = f.source().path();
    let info = f.info();
    let lock = SidecarLock::acquire(&dir.join(".b2lock"))?;
    check_fresh(array)?;
    let old_ids: HashSet<u64> = (0..array.nchunks())
        .filter_map(|i| f.index_entry(i))
        .filter(|&e| e >= 0)
        .map(|e| e as u64)
        .collect();
    let on_disk = chunk_file_ids(dir)?;
    let mut next = old_ids
        .iter()
        .copied()
        .chain(on_disk.iter().copied())
        .max()
        .map_or(0, |m| m + 1);
    // Ids, cbytes and the new chunks.b2frame are settled before the first write.
    let mut entries = Vec::with_capacity(l.entries.len());
    let mut files: Vec<(PathBuf, &Chunk)> = Vec::new();
    let mut cbytes = 0u64;
    for e in &l.entries {
        match e {
            Entry::Keep(v) => {
                if *v >= 0 {
                    let p = sparse_chunk_file(dir, *v as u64);
                    cbytes += std::fs::metadata(&p).map_err(|e| io_err(&p, e))?.len();
                }
                entries.push(*v);
            }
            Entry::Store(bytes) => {
                if next > u64::from(u32::MAX) {
                    return Err(refused(dir, "no free chunk id (ids are uint32)"));
                }
                files.push((sparse_chunk_file(dir, next), bytes));
                cbytes += bytes.len() as u64;
                entries.push(next as i64);
                next += 1;
            }
        }
    }
    let file = std::fs::File::open(index_path).map_err(|e| io_err(index_path, e))?;
    let mut out = read_header(index_path, &file, info.header_len)?;
    drop(file);
    let index = if l.nbytes > 0 {
        index_chunk(&entries)
    } else {
        Vec::new()
    };
    let frame_len = out.len() + index.len() + trailer.len();
    patch_header(
        array,
        &mut out,
        l,
        frame_len as u64,
        cbytes,
        !layers.is_empty(),
    )?;
    out.extend_from_slice(&index);
    out.extend_from_slice(trailer);

    // Each new chunk read back from the edit's spool as its file is written. A failure
    // before the rename below (a write, a read-back) removes the files made so far, so the
    // source is byte-identical again (not after a simulated crash: a crash leaves them, and
    // the next commit removes them).
    // The new index is written to its temp file and renamed in the same scope: a failure up
    // to the rename (the temp file's creation after the new chunks used the disk's space)
    // also removes them.
    // Only the files this commit made are removed: each is created where no file is, and one
    // another writer made at a planned name meanwhile (after the listing above) is theirs,
    // left alone, and the commit fails as for any change of another writer. The index's temp
    // file has a name of this commit's own (`io.rs`, `own_temp`), made where no file is too:
    // another writer's temp file is never written, renamed or removed.
    let index_tmp = super::io::temp_for(index_path);
    let mut made: Vec<&Path> = Vec::with_capacity(files.len());
    let mut staged = false;
    let fresh = (|| {
        for (p, chunk) in &files {
            let bytes = chunk.bytes().map_err(|e| io_err(p, e))?;
            match io.create_new(p, &bytes) {
                Ok(()) => made.push(p),
                Err(ContainerError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists =>
                {
                    return Err(changed(
                        dir,
                        format!(
                            "chunk file {} was made by another writer meanwhile",
                            p.display()
                        ),
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        if !files.is_empty() {
            io.sync_dir(dir)?;
        }
        io.create_new(&index_tmp, &out)?;
        staged = true;
        // The commit point: the rename of the new chunks.b2frame (one that fails changed
        // nothing).
        io.rename(&index_tmp, index_path)
    })();
    if let Err(e) = fresh {
        if !io.crashed() {
            for p in made {
                let _ = std::fs::remove_file(p);
            }
            if staged {
                let _ = std::fs::remove_file(&index_tmp);
            }
        }
        return Err(e);
    }
    io.sync_dir(super::io::parent_dir(index_path))?;
    let live: HashSet<u64> = entries
        .iter()
        .filter(|&&e| e >= 0)
        .map(|&e| e as u64)
        .collect();
    // Leftovers no version references (a crash after an earlier commit's rename): removed
    // now, but for the files `frame/retire.rs` keeps for frames opened before an earlier commit.
    let waiting = retire::pending(dir);
    for id in on_disk
        .iter()
        .filter(|id| !old_ids.contains(id) && !live.contains(id))
    {
        let p = sparse_chunk_file(dir, *id);
        if !p.file_name().is_some_and(|n| waiting.contains(n)) {
            io.remove(&p)?;
        }
    }
    // The files this commit replaced: removed once no frame opened before it is open
    // (a read-only descriptor keeps reading the version of its open).
    retire::retire(
        dir,
        old_ids
            .difference(&live)
            .map(|id| sparse_chunk_file(dir, *id))
            .collect(),
    );
    if let Some(lock) = lock {
        lock.bump()?;
    }
    Ok(())
}
