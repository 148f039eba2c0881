//! The commit of a sparse frame (`docs/format/CONTAINERS.md` 2, 6.3): fresh chunk files and a
//! renamed `chunks.b2frame`.
//!
//! Order: each new chunk in a fresh-id file, created where no file is (fsync;
//! a file another writer made there first is a conflict, not overwritten), directory fsync, the new
//! `chunks.b2frame` in a temp file of the commit's own (`.b2fs-PID-T-N-chunks.b2frame.b2fs-tmp`,
//! created where no file is; fsync) renamed over the old one, directory fsync, then
//! leftover chunk files of an earlier crash are removed; the chunk files this commit no longer
//! references are removed once no frame opened before it is open
//! (`src/container/frame/retire.rs`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::bytes::{index_chunk, patch_header, read_header};
use super::check_fresh;
use super::layout::{Entry, Layout};
use crate::container::frame::{Frame, retire, sparse_chunk_file, sparse_chunk_id};
use crate::container::write::io::{self, Io, SidecarLock};
use crate::container::write::{Chunk, changed, io_err, refused};
use crate::container::{Array, ContainerError};

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

/// The bytes of the chunk files the kept entries of `l` name (one file length per regular
/// entry, as C-Blosc2 counts a sparse frame's cbytes): the old header's cbytes less the files
/// of the old entries that are not kept (replaced or cut), so that only those are looked at,
/// not every kept chunk's file. An old header that counts less than those files (not
/// written by that rule), a figure the kept files cannot add up to (each is 32 bytes to
/// `i32::MAX`), or a dropped file that cannot be looked at, is not trusted: every kept file
/// is counted then.
fn kept_cbytes(array: &Array, f: &Frame, l: &Layout<'_>) -> Result<u64, ContainerError> {
    let dir = array.path();
    let file_len = |id: i64| {
        let p = sparse_chunk_file(dir, id as u64);
        std::fs::metadata(&p)
            .map(|m| m.len())
            .map_err(|e| io_err(&p, e))
    };
    let mut dropped = Some(0u64);
    for i in 0..array.nchunks() {
        let Some(old) = f.index_entry(i).filter(|&e| e >= 0) else {
            continue;
        };
        // An old regular entry stays only as `Keep` of itself at its own position. A dropped
        // file that cannot be read (gone: a damaged source salvaged) is not counted here.
        if !matches!(l.entries.get(i), Some(Entry::Keep(v)) if *v == old) {
            dropped = dropped.zip(file_len(old).ok()).map(|(d, n)| d + n);
        }
    }
    // The old figure less the dropped files is trusted only where it can be true: each kept
    // chunk file is a chunk of 32 bytes to `i32::MAX` (a header set to anything else, up to
    // `i64::MAX`, opens: it would stay wrong, or overflow the new one).
    let regular = l
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::Keep(v) if *v >= 0));
    let n_kept = regular.count() as u64;
    let possible = 32 * n_kept..=n_kept.saturating_mul(i32::MAX as u64);
    if let Some(kept) = dropped.and_then(|d| f.info().cbytes.checked_sub(d))
        && possible.contains(&kept)
    {
        return Ok(kept);
    }
    let mut kept = 0u64;
    for e in &l.entries {
        if let Entry::Keep(v) = e
            && *v >= 0
        {
            kept += file_len(*v)?;
        }
    }
    Ok(kept)
}

/// Commits the laid-out edit `l` to the sparse frame `f` of `array`.
pub(super) fn commit_sparse(
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
    let mut cbytes = kept_cbytes(array, f, l)?;
    for e in &l.entries {
        match e {
            Entry::Keep(v) => entries.push(*v),
            Entry::Store(bytes) => {
                if next > u64::from(u32::MAX) {
                    return Err(refused(dir, "no free chunk id (ids are uint32)"));
                }
                files.push((sparse_chunk_file(dir, next), bytes));
                cbytes = cbytes.saturating_add(bytes.len() as u64);
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
    // left alone, and the commit fails as for any change of another writer.
    // The index's temp file has a name of this commit's own (`src/container/leftover.rs`,
    // `own_temp`), made where no file is too: another writer's temp file is never written,
    // renamed or removed.
    let index_tmp = io::temp_for(index_path);
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
    io.sync_dir(io::parent_dir(index_path))?;
    let live: HashSet<u64> = entries
        .iter()
        .filter(|&&e| e >= 0)
        .map(|&e| e as u64)
        .collect();
    // Leftovers no version references (a crash after an earlier commit's rename): removed
    // now, but for the files `src/container/frame/retire.rs` keeps for frames opened before
    // an earlier commit.
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
