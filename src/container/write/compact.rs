//! `compact`: rewrites a contiguous frame without dead space (chunks back to back in index
//! order, a fresh index, the trailer verbatim) into a temp file in the same directory, then
//! fsync, rename over the original and directory fsync.
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
use crate::container::{Container, ContainerError, SourceKind};

/// Rewrites the contiguous frame at `path` without dead space (temp file in the same
/// directory + fsync + rename + directory fsync), calling `progress(done_chunks, total)` as it
/// goes. The file keeps its permissions; python-blosc2 reads the same chunks and attributes.
///
/// # Errors
///
/// [`ContainerError::Busy`] when the source is mounted by a running b2fs (its daemon holds
/// the source lock, see [`super::lock_source_for_mount`]); [`ContainerError::Unsupported`]
/// when `path` is not a writable contiguous frame starting at offset 0; open errors as
/// [`crate::container::open`]; [`ContainerError::Io`].
pub fn compact(path: &Path, progress: &mut dyn FnMut(usize, usize)) -> Result<(), ContainerError> {
    // Refuse a mounted source (its daemon holds the shared lock) before anything else; held
    // until the rewrite is renamed in.
    let _mounted = SourceLock::acquire(path, LockMode::Compact)?;
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
    let read = |off: u64, len: u64| -> Result<Vec<u8>, ContainerError> {
        let mut b = vec![0u8; len as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut b, off)
            .map_err(|e| io_err(path, e))?;
        Ok(b)
    };
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
    let tmp = super::io::tmp_path(path);
    io.create(&tmp, &out)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io_err(&tmp, e))?;
    io.rename(&tmp, path)?;
    io.sync_dir(super::io::parent_dir(path))?;
    if let Some(lock) = lock {
        lock.bump()?;
    }
    Ok(())
}
