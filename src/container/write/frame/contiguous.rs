//! The commit of a contiguous frame by shadow append (`docs/format/CONTAINERS.md` 6.2), and
//! its undo when it fails before its commit point.
//!
//! Order: with P the old frame_len, new chunks are written at P, then the new
//! index right after them (new cbytes = index position - header_len: the old index, old
//! trailer and replaced chunks become dead space), then the new trailer; fsync; then the whole
//! header in one `pwrite` at 0 (the commit point); fsync. Before that `pwrite` no byte a reader
//! of the old header looks at has changed.

use std::fs::OpenOptions;
use std::path::Path;

use super::bytes::{index_chunk, patch_header, read_header};
use super::check_fresh;
use super::layout::{Entry, Layout};
use crate::container::frame::Frame;
use crate::container::write::io::{Io, SidecarLock};
use crate::container::write::{Chunk, io_err};
use crate::container::{Array, ContainerError, FileState};

/// Commits the laid-out edit `l` to the contiguous frame `f` of `array`.
pub(super) fn commit_contiguous(
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
