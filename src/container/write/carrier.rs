//! A `__vlmeta__` carrier made for a group of a python-blosc2 store that has none, so that
//! attributes can be given to any group, as python-blosc2 does when a group's `vlmeta` is
//! first written (`TreeStore.vlmeta`: an empty SChunk stored at `<group>/__vlmeta__`).
//!
//! The carrier is an empty contiguous frame (no chunks, `docs/format/CONTAINERS.md` 1.2: the
//! header C-Blosc2 writes for `blosc2.SChunk()`, byte for byte) to which the attributes are
//! committed as vlmeta by the ordinary frame commit, in a scratch file; then:
//! - `.b2z`: a new zip is built with every member byte-copied and the carrier added as a
//!   stored member `<group>/__vlmeta__.b2f`, renamed over the old zip (the member commit's
//!   steps, `store.rs`);
//! - `.b2d`: under the lock of `embed.b2e.b2lock` when there is one (the one python-blosc2's
//!   `locking=True` handles take), the scratch file is made beside the store (not in it:
//!   python-blosc2 opens any file of a `.b2d` that reads as a frame as a key), linked to
//!   `<group>/__vlmeta__.b2f` (a link, not a rename: a carrier another writer made meanwhile
//!   is not replaced, ESTALE), the directory fsynced (made first when the group has none: its
//!   leaves all lie in `embed.b2e`), the lock's counter bumped (such handles then look at the
//!   store again) and the scratch file removed. On a file system without hard links the link
//!   fails (EIO, logged) and nothing changes.
//!
//! A crash before the rename (zip) or the link (directory) leaves the store as it was and a
//! stray temporary file, which reading ignores. Only TreeStores (marker `b2tree`) get one:
//! in a DictStore a carrier would be one more key; plain directories of sources have no
//! carriers. Both are refused.

use std::path::{Path, PathBuf};

use super::io::{Io, SidecarLock, parent_dir, temp_for};
use super::{Edit, frame, io_err, refused};
use crate::container::store::{Collection, Form, Marker};
use crate::container::{Array, ContainerError};

/// A contiguous frame of an empty SChunk (typesize 1, ZSTD clevel 5, SHUFFLE, AUTO split:
/// python-blosc2's defaults), with no metalayers, no chunks and no vlmeta.
pub(super) fn empty_frame() -> Vec<u8> {
    frame_with(1, 0, -1, None)
}

/// A contiguous frame with no chunk and no vlmeta, ZSTD clevel 5, SHUFFLE, AUTO split (what
/// [`empty_frame`] writes), with this typesize, blocksize (0: automatic) and chunksize (-1:
/// no chunk yet), and the metalayer `b2nd` of content `b2nd` when given.
pub(super) fn frame_with(
    typesize: i32,
    blocksize: i32,
    chunksize: i32,
    b2nd: Option<&[u8]>,
) -> Vec<u8> {
    let mut h = vec![0x9e, 0xa8];
    h.extend_from_slice(b"b2frame\0");
    h.push(0xd2);
    let header_len_at = h.len();
    h.extend_from_slice(&[0; 4]);
    h.push(0xcf);
    let frame_len_at = h.len();
    h.extend_from_slice(&[0; 8]);
    // Flags: version 2 with 64-bit offsets, contiguous, ZSTD (5) at clevel 5, AUTO split.
    h.extend_from_slice(&[0xa4, 0x12, 0x00, 0x55, 0x02]);
    h.push(0xd3);
    h.extend_from_slice(&0i64.to_be_bytes()); // nbytes
    h.push(0xd3);
    h.extend_from_slice(&0i64.to_be_bytes()); // cbytes
    for v in [typesize, blocksize, chunksize] {
        h.push(0xd2);
        h.extend_from_slice(&v.to_be_bytes());
    }
    h.extend_from_slice(&[0xd1, 0, 0, 0xd1, 0, 1]); // nthreads (compression, decompression)
    h.push(0xc2); // no vlmetalayers yet (the commit sets it)
    // Filters (the last slot SHUFFLE), the codec id, its meta, filters' metas, flags2.
    h.extend_from_slice(&[0xd8, 0x06, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    match b2nd {
        // The metalayer section: its size, no names, no contents.
        None => h.extend_from_slice(&[0x93, 0xcd, 0x00, 0x07, 0xde, 0x00, 0x00, 0xdc, 0x00, 0x00]),
        // One entry "b2nd" (idx_size 7 + 6 + 4 = 17), then its content.
        Some(meta) => {
            h.extend_from_slice(&[0x93, 0xcd, 0x00, 0x11, 0xde, 0x00, 0x01, 0xa4]);
            h.extend_from_slice(b"b2nd");
            h.push(0xd2);
            let offset = (h.len() + 4 + 3) as i32;
            h.extend_from_slice(&offset.to_be_bytes());
            h.extend_from_slice(&[0xdc, 0x00, 0x01, 0xc6]);
            h.extend_from_slice(&(meta.len() as u32).to_be_bytes());
            h.extend_from_slice(meta);
        }
    }
    let header_len = h.len() as u32;
    h[header_len_at..header_len_at + 4].copy_from_slice(&header_len.to_be_bytes());
    h.extend_from_slice(&frame::trailer(&[]));
    let frame_len = h.len() as u64;
    h[frame_len_at..frame_len_at + 8].copy_from_slice(&frame_len.to_be_bytes());
    h
}

/// The store-relative path of the carrier of group `group_key` (`/` or `/a/b`).
fn carrier_name(group_key: &str) -> String {
    let dir = group_key.trim_matches('/');
    match dir.is_empty() {
        true => "__vlmeta__.b2f".into(),
        false => format!("{dir}/__vlmeta__.b2f"),
    }
}

/// Gives group `group_key` of `store` (which has no carrier) the attributes of `edit` (an
/// edit of attributes only) in a new carrier (see the module doc). Reopen the store afterwards.
///
/// # Errors
/// [`ContainerError::Refused`] for a directory of sources or a store that is no TreeStore;
/// [`ContainerError::Changed`] when the zip changed since the store was opened, or a carrier
/// lies at its path already (another writer made it); the vlmeta commit's refusals
/// (attributes that are no object, keys past 31 bytes); [`ContainerError::Io`] (also when
/// the directory holding a `.b2d` store cannot take the scratch file).
pub(super) fn new_carrier(
    store: &Collection,
    group_key: &str,
    edit: &Edit,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let path = store.path();
    let name = carrier_name(group_key);
    if store.form() != Form::Frames && store.marker() != Some(Marker::Tree) {
        // In a DictStore a new `<group>/__vlmeta__` would show as one more key.
        return Err(refused(
            path,
            format!(
                "group {group_key:?} has no __vlmeta__ carrier, and the store is no TreeStore \
                 (marker {}): python-blosc2 gives attributes to TreeStore groups only",
                store.marker().map_or("none", Marker::name)
            ),
        ));
    }
    match store.form() {
        Form::Frames => Err(refused(
            path,
            format!(
                "group {group_key:?} is a directory of sources, which has no place for \
                 attributes"
            ),
        )),
        Form::Zip => {
            let zip = store
                .zip()
                .ok_or_else(|| refused(path, "a zip store without its zip"))?;
            if zip.changed_on_disk() {
                return Err(super::changed(path, "the zip file's size or mtime changed"));
            }
            if zip
                .names()
                .iter()
                .any(|n| n.trim_start_matches('/') == name)
            {
                return Err(super::changed(
                    path,
                    format!("{name}: made by another writer"),
                ));
            }
            super::check_path_writable(path)?;
            super::check_path_writable(parent_dir(path))?;
            let scratch = super::store::scratch_path(path);
            carrier_file(&scratch, edit)?;
            let result = super::store::write_zip_adding(zip, &name, &scratch, io);
            if result.is_err() && !io.crashed() {
                let _ = std::fs::remove_file(&scratch);
            }
            result?;
            io.remove(&scratch)
        }
        Form::Dir => {
            let target: PathBuf = path.join(&name);
            let dir = parent_dir(&target);
            // Handles of python-blosc2 that lock the store (`locking=True`) take this lock
            // for their own mutations, and see the bump below as a change to rescan for.
            let mut sidecar = path.join("embed.b2e").into_os_string();
            sidecar.push(".b2lock");
            let lock = SidecarLock::acquire(Path::new(&sidecar))?;
            if std::fs::symlink_metadata(&target).is_ok() {
                return Err(super::changed(
                    path,
                    format!("{name}: made by another writer"),
                ));
            }
            super::check_path_writable(path)?;
            // A group whose leaves all lie in `embed.b2e` has no directory yet (python-blosc2
            // makes it, too); an empty one left by a crash shows nothing.
            if !dir.is_dir() {
                std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
                io.sync_dir(parent_dir(dir))?;
            }
            // Beside the store, not in it: python-blosc2 opens every file of a `.b2d` that
            // reads as a frame as one more key, whatever its name (`leftover.rs`, `own_temp`).
            let tmp = temp_for(&target);
            carrier_file(&tmp, edit)?;
            let result = (|| {
                io.begin_step(&target)?;
                std::fs::hard_link(&tmp, &target).map_err(|e| match e.kind() {
                    std::io::ErrorKind::AlreadyExists => {
                        super::changed(path, format!("{name}: made by another writer meanwhile"))
                    }
                    _ => io_err(&target, e),
                })
            })();
            if result.is_err() && !io.crashed() {
                let _ = std::fs::remove_file(&tmp);
            }
            result?;
            io.sync_dir(dir)?;
            if let Some(lock) = lock {
                lock.bump()?;
            }
            io.remove(&tmp)
        }
    }
}

/// Writes an empty frame to a new file `at` (made where no file is: a file another writer
/// made there is left alone) and commits `edit` (its attributes) to it, fsynced; removes
/// the file again when that fails.
fn carrier_file(at: &Path, edit: &Edit) -> Result<(), ContainerError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(at)
        .map_err(|e| io_err(at, e))?;
    let made = std::io::Write::write_all(&mut f, &empty_frame())
        .map_err(|e| io_err(at, e))
        .and_then(|()| {
            drop(f);
            let frame = Array::open_frame_at(at, 0)?;
            super::commit(&frame, edit)
        });
    if made.is_err() {
        let _ = std::fs::remove_file(at);
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_frame_opens_as_an_empty_schunk() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("c.b2f");
        std::fs::write(&at, empty_frame()).unwrap();
        let a = Array::open_frame_at(&at, 0).unwrap();
        assert_eq!(a.nchunks(), 0);
        assert_eq!(empty_frame().len(), 132);
        assert_eq!(carrier_name("/"), "__vlmeta__.b2f");
        assert_eq!(carrier_name("/a/b"), "a/b/__vlmeta__.b2f");
    }
}
