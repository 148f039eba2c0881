//! `compact`: rewrites a contiguous frame without dead space (chunks back to back in index
//! order, a fresh index, the trailer verbatim) into a temp file of its own in the same
//! directory (beside the store for a member of a `.b2d`: `leftover.rs`, `own_temp`), then fsync,
//! rename over the original and directory fsync.
//!
//! A mounted source is refused (`docs/format/CONTAINERS.md` has no word on this: it is b2fs's own
//! rule): the rename would leave the mount serving the old file while its commits go to the
//! new one.
//!
//! Knows nothing of chunk data (copies stored chunks as they are). Spec: `docs/format/CONTAINERS.md`
//! 3.2 (dead space from deletes and other writers; `to_cframe()` compacts the same way) and
//! 6.1 pitfall 14. The header keeps its length and every field except frame_len and cbytes;
//! special offsets stay special; two entries sharing one stored chunk keep sharing it.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::frame::index_chunk;
use super::io::{Io, LockMode, SidecarLock, SourceLock};
use super::{io_err, unsupported};
use crate::container::{Array, Container, ContainerError, SourceKind};

/// Rewrites the contiguous frame at `path` without dead space (a temp file of its own in the
/// same directory, or beside the `.b2d` store it lies in, + fsync + rename + directory fsync), calling `progress(done_chunks, total)` as it
/// goes. The file keeps its permissions; python-blosc2 reads the same chunks and attributes.
///
/// # Errors
///
/// [`ContainerError::Busy`] when the source is mounted by a running b2fs (its daemon holds
/// the source lock, see [`super::lock_source_for_mount`]); [`ContainerError::Unsupported`]
/// when `path` is not a writable contiguous frame starting at offset 0, or this process may
/// not open it for writing or create a file where the rewrite lies (beside the outermost
/// `.b2d` store for a member: all asked before the rewrite starts); open errors as
/// [`crate::container::open`]; [`ContainerError::Io`] for I/O errors of the rewrite (the
/// source is then as it was).
pub fn compact(path: &Path, progress: &mut dyn FnMut(usize, usize)) -> Result<(), ContainerError> {
    // Refuse a mounted source first (its daemon holds the shared lock: Busy, whatever else
    // is wrong); held until the rewrite is renamed in.
    let _mounted = SourceLock::acquire(path, LockMode::Compact)?;
    // What the rewrite needs, asked before anything else: a source that can be written, and a
    // directory the rewrite can be made in (beside the outermost `.b2d` store for a member).
    // Refused as the source's failure, not an I/O error of the rewrite.
    if path.is_file() {
        let cannot = |p: &Path, what: &str, e: std::io::Error| {
            unsupported(path, format!("compacting: {what} {}: {e}", p.display()))
        };
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(path) {
            return Err(cannot(path, "cannot write", e));
        }
        let dir = super::io::temp_dir(path);
        if let Err(e) = super::io::can_create_in(&dir) {
            return Err(cannot(&dir, "cannot create its rewrite in", e));
        }
    }
    let mut sidecar = path.as_os_str().to_os_string();
    sidecar.push(".b2lock");
    let lock = SidecarLock::acquire(Path::new(&sidecar))?;
    let array = match crate::container::open(path)? {
        Container::Array(a) if a.kind() == SourceKind::Cframe => a,
        _ => return Err(unsupported(path, "compacting: not a contiguous frame")),
    };
    super::writable(&array, false)?;
    let info = array
        .frame_info()
        .ok_or_else(|| unsupported(path, "compacting: not a frame"))?
        .clone();
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let read = |off: u64, len: u64| read_range(&file, path, off, len);
    let mut out = read(0, info.header_len)?;
    let total = array.nchunks();
    let mut entries = Vec::with_capacity(total);
    let mut moved: HashMap<i64, i64> = HashMap::new();
    for i in 0..total {
        let e = array
            .frame_index_entry(i)
            .ok_or_else(|| unsupported(path, format!("chunk {i}: no index entry")))?;
        let new = if e < 0 {
            e
        } else if let Some(&n) = moved.get(&e) {
            n
        } else {
            let n = (out.len() as u64 - info.header_len) as i64;
            out.extend_from_slice(&array.chunk_bytes(i)?);
            moved.insert(e, n);
            n
        };
        entries.push(new);
        progress(i + 1, total);
    }
    let cbytes = out.len() as u64 - info.header_len;
    if info.nbytes > 0 {
        out.extend_from_slice(&index_chunk(&entries));
    }
    let trailer = read(info.frame_len - info.trailer_len, info.trailer_len)?;
    out.extend_from_slice(&trailer);
    let frame_len = out.len() as u64;
    out[16..24].copy_from_slice(&frame_len.to_be_bytes());
    out[39..47].copy_from_slice(&cbytes.to_be_bytes());
    let mode = file
        .metadata()
        .map_err(|e| io_err(path, e))?
        .permissions()
        .mode();
    drop(file);

    let mut io = Io::new(None);
    let tmp = super::io::temp_for(path);
    io.create_new(&tmp, &out)?;
    let renamed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io_err(&tmp, e))
        .and_then(|()| io.rename(&tmp, path));
    if let Err(e) = renamed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    io.sync_dir(super::io::parent_dir(path))?;
    if let Some(lock) = lock {
        lock.bump()?;
    }
    Ok(())
}

/// What a contiguous frame's file holds: its length and the bytes its current version uses
/// (header, stored chunks counted once however many entries share them, index, trailer);
/// the rest is dead space earlier commits left (see [`compact_mounted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// The file's length.
    pub len: u64,
    /// The bytes the current version uses.
    pub live: u64,
}

/// The [`Space`] of `array` as opened (one chunk header read per stored chunk); `None` when
/// it is not a contiguous frame at offset 0 of its own file.
///
/// # Errors
/// A chunk header that cannot be read.
pub fn space(array: &Array) -> Result<Option<Space>, ContainerError> {
    let (Some(info), Some(state)) = (array.frame_info(), array.file_state()) else {
        return Ok(None);
    };
    if array.kind() != SourceKind::Cframe || info.start != 0 {
        return Ok(None);
    }
    let mut seen = std::collections::HashSet::new();
    let mut chunks = 0u64;
    for i in 0..array.nchunks() {
        match array.frame_index_entry(i) {
            Some(e) if e >= 0 && seen.insert(e) => {
                chunks += array.chunk_header(i)?.cbytes as u64;
            }
            _ => {}
        }
    }
    // The index chunk and the trailer follow the chunk area (header cbytes).
    let tail = info
        .frame_len
        .saturating_sub(info.header_len.saturating_add(info.cbytes));
    Ok(Some(Space {
        len: state.len,
        live: info.header_len + chunks + tail,
    }))
}

/// Rewrites the contiguous frame `array` was opened from without dead space while a mount
/// serves it (issue 21: the mount's own background compaction, `src/commit.rs`): the
/// chunks are copied from `array` into a temp file of its own (`.b2fs-PID-T-N-<file>.b2fs-tmp`
/// beside the file, or beside the `.b2d` store the file lies in: `leftover.rs`, `own_temp`) one
/// by one (memory: one chunk), the file fsynced, checked again to be the version `array`
/// shows, renamed over the source, and the directory fsynced. A crash leaves the old file
/// or the new one, with the same content (and perhaps the temp file, which readers ignore).
///
/// Descriptors reading older versions keep the old file open and read it as before. The
/// mount's shared source lock is taken on the new file before it is renamed in, and
/// returned: hold it instead of the old one (`b2fs compact` must keep refusing the source).
///
/// # Errors
/// [`ContainerError::Unsupported`] when `array` is not a writable contiguous frame at offset
/// 0; [`ContainerError::Changed`] when another writer changed the file since `array` was
/// opened (nothing renamed; the temp file is removed); [`ContainerError::Io`].
pub fn compact_mounted(array: &Array) -> Result<SourceLock, ContainerError> {
    compact_mounted_io(array, &mut Io::new(None))
}

/// [`compact_mounted`] stopping after `steps` durable steps (write, fsync, rename, directory
/// fsync), as a crash there would; `Ok(true)` when it completed. For crash tests.
///
/// # Errors
/// As [`compact_mounted`].
pub fn compact_mounted_with_crash_after(
    array: &Array,
    steps: usize,
) -> Result<bool, ContainerError> {
    Io::until_crash(steps, |io| compact_mounted_io(array, io))
}

fn compact_mounted_io(array: &Array, io: &mut Io) -> Result<SourceLock, ContainerError> {
    use std::io::Write;
    let path = array.path();
    let info = match array.frame_info() {
        Some(i) if array.kind() == SourceKind::Cframe && i.start == 0 => i.clone(),
        _ => return Err(unsupported(path, "compacting: not a contiguous frame")),
    };
    super::writable(array, false)?;
    let mut sidecar = path.as_os_str().to_os_string();
    sidecar.push(".b2lock");
    let lock = SidecarLock::acquire(Path::new(&sidecar))?;
    super::frame::check_fresh(array)?;
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let read = |off: u64, len: u64| read_range(&file, path, off, len);
    let mut header = read(0, info.header_len)?;
    let trailer = read(info.frame_len - info.trailer_len, info.trailer_len)?;
    let mode = file
        .metadata()
        .map_err(|e| io_err(path, e))?
        .permissions()
        .mode();
    drop(file);

    // A name of this compaction's own, made where no file is (`leftover.rs`, `own_temp`).
    let tmp = super::io::temp_for(path);
    io.begin_step(&tmp)?;
    let out = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io_err(&tmp, e))?;
    let written = (|| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &out);
        let err = |e| io_err(&tmp, e);
        w.write_all(&header).map_err(err)?;
        let mut pos = 0u64;
        let mut entries = Vec::with_capacity(array.nchunks());
        let mut moved: HashMap<i64, i64> = HashMap::new();
        for i in 0..array.nchunks() {
            let e = array
                .frame_index_entry(i)
                .ok_or_else(|| unsupported(path, format!("chunk {i}: no index entry")))?;
            let new = if e < 0 {
                e
            } else if let Some(&n) = moved.get(&e) {
                n
            } else {
                let bytes = array.chunk_bytes(i)?;
                w.write_all(&bytes).map_err(err)?;
                let n = pos as i64;
                pos += bytes.len() as u64;
                moved.insert(e, n);
                n
            };
            entries.push(new);
        }
        let cbytes = pos;
        if info.nbytes > 0 {
            let index = index_chunk(&entries);
            w.write_all(&index).map_err(err)?;
            pos += index.len() as u64;
        }
        w.write_all(&trailer).map_err(err)?;
        w.flush().map_err(err)?;
        Ok::<_, ContainerError>((info.header_len + pos + trailer.len() as u64, cbytes))
    })();
    // Every failure from here to the rename removes the temp file (this compaction's own),
    // but a simulated crash, which leaves what a crash would.
    let renamed = written.and_then(|(frame_len, cbytes)| {
        header[16..24].copy_from_slice(&frame_len.to_be_bytes());
        header[39..47].copy_from_slice(&cbytes.to_be_bytes());
        std::os::unix::fs::FileExt::write_all_at(&out, &header, 0).map_err(|e| io_err(&tmp, e))?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
            .map_err(|e| io_err(&tmp, e))?;
        io.sync(&out, &tmp)?;
        // The mount's lock moves to the new file before anyone can find it at `path`.
        let mounted = SourceLock::acquire(&tmp, LockMode::Mount)?;
        // Another writer that changed the source meanwhile keeps its change: nothing is
        // renamed.
        super::frame::check_fresh(array)?;
        io.rename(&tmp, path)?;
        Ok(mounted)
    });
    drop(out);
    let mounted = match renamed {
        Ok(m) => m,
        Err(e) => {
            if !io.crashed() {
                let _ = std::fs::remove_file(&tmp);
            }
            return Err(e);
        }
    };
    io.sync_dir(super::io::parent_dir(path))?;
    if let Some(lock) = lock {
        lock.bump()?;
    }
    Ok(mounted)
}

/// `len` bytes of `file` (the frame at `path`) from `off`.
fn read_range(
    file: &std::fs::File,
    path: &Path,
    off: u64,
    len: u64,
) -> Result<Vec<u8>, ContainerError> {
    let mut b = vec![0u8; len as usize];
    std::os::unix::fs::FileExt::read_exact_at(file, &mut b, off).map_err(|e| io_err(path, e))?;
    Ok(b)
}
