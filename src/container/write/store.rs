//! Write-back into collections (`docs/format/STORES.md` 3): a leaf of a `.b2d` store or of a
//! directory of sources is a frame file and takes the single-frame commit as it is; a member
//! of a `.b2z` store is committed by building a whole new zip beside the old one and renaming
//! it into place, as python-blosc2 does: a frame inside the zip is never written in place (a
//! frame at an offset may only grow at the end of its file, and no member is last).
//!
//! The `.b2z` commit, in order (each durable step counted for crash tests, `io.rs`):
//! 1. the member's bytes are copied out to a scratch frame of the commit's own
//!    (`.b2fs-PID-T-N-<zip>.b2fs-member`, not a step) and the edit is committed to that
//!    standalone frame with the ordinary frame commit;
//! 2. a temp file of the commit's own (`.b2fs-PID-T-N-<zip>.b2fs-tmp`) is created where no file
//!    is and written by the `zip` crate: every other entry byte-copied as stored
//!    (`raw_copy_file`: local header, data and central entry with their CRC-32 and sizes), the
//!    edited member written stored with a freshly computed CRC-32 and the commit's local time
//!    as its modification time, in the old order, ZIP64 records where sizes or offsets need
//!    them (one step);
//! 3. fsync of the new zip; 4. rename over the old one; 5. fsync of the directory;
//! 6. removal of the scratch frame.
//!
//! A crash before step 4 leaves the old zip (and stray temporary files, which reading
//! ignores); after it, the new one. Both temporary files are the commit's own: a file another
//! writer made at such a name is never written or removed. Beside the zip, or beside the
//! `.b2d` store the zip lies in (`leftover.rs`, `own_temp`). The [`Collection`] is not updated: every member may have
//! moved, so reopen the store after a commit.
//!
//! Embedded values (leaves and `__vlmeta__` carriers inside `embed.b2e`) are edited by
//! appending their new cframe to the estore's stream (`embed.rs`), which is then committed as
//! above (a `.b2z` member, or a `.b2d` frame file).
//!
//! A group without a `__vlmeta__` carrier (DictStores, groups that never had attributes)
//! gets one when its attributes are first written (`carrier.rs`). Refused: references, new
//! keys and groups (there is no API to create them), and attributes of plain directories.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde_json::Value;

use super::io::{Io, own_temp, parent_dir, temp_for};
use super::{Edit, io_err, refused, unsupported};
use crate::container::store::{Collection, Leaf, Location, open_member, zip::ZipIndex};
use crate::container::{Array, Container, ContainerError};

/// Members from this size on are written with ZIP64 sizes (python's `zipfile` switches at
/// about 1.95 GiB; any value below 4 GiB works for readers).
const ZIP64_FROM: u64 = 1 << 31;

/// Commits `edit` to `leaf` of `store` crash-safely (see the module doc), like
/// [`super::commit`] does for a single frame. Reopen the store afterwards.
///
/// # Errors
/// [`ContainerError::Unsupported`] for embedded values, references and tables;
/// [`ContainerError::Changed`] when the zip changed since the store was opened; the frame
/// commit's refusals; [`ContainerError::Io`].
pub fn commit_member(store: &Collection, leaf: &Leaf, edit: &Edit) -> Result<(), ContainerError> {
    commit_io(store, leaf, edit, &mut Io::new(None))
}

/// [`commit_member`] stopping after `steps` durable steps, as a crash there would; `Ok(true)`
/// when it completed. For crash tests.
///
/// # Errors
/// As [`commit_member`].
pub fn commit_member_with_crash_after(
    store: &Collection,
    leaf: &Leaf,
    edit: &Edit,
    steps: usize,
) -> Result<bool, ContainerError> {
    Io::until_crash(steps, |io| commit_io(store, leaf, edit, io))
}

/// Replaces the attributes of the group at `group_key` (`/` for the store's own) with
/// `attrs` (a JSON object in the attrs mapping), stored as the vlmeta of its `__vlmeta__`
/// carrier. Reopen the store afterwards.
///
/// # Errors
/// [`ContainerError::Refused`] when the group does not exist, or has no carrier and is a
/// directory of sources (a store's group without one gets one: `carrier.rs`); as
/// [`commit_member`].
pub fn commit_group_attrs(
    store: &Collection,
    group_key: &str,
    attrs: &Value,
) -> Result<(), ContainerError> {
    group_attrs_io(store, group_key, attrs, &mut Io::new(None))
}

/// [`commit_group_attrs`] stopping after `steps` durable steps, as a crash there would;
/// `Ok(true)` when it completed. For crash tests.
///
/// # Errors
/// As [`commit_group_attrs`].
pub fn commit_group_attrs_with_crash_after(
    store: &Collection,
    group_key: &str,
    attrs: &Value,
    steps: usize,
) -> Result<bool, ContainerError> {
    Io::until_crash(steps, |io| group_attrs_io(store, group_key, attrs, io))
}

fn group_attrs_io(
    store: &Collection,
    group_key: &str,
    attrs: &Value,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let path = store.path();
    let group = store
        .group(group_key)
        .ok_or_else(|| refused(path, format!("no group {group_key:?}")))?;
    let edit = Edit {
        attrs: Some(attrs.clone()),
        ..Edit::default()
    };
    match group.carrier() {
        Some(carrier) => commit_io(store, carrier, &edit, io),
        // python-blosc2 makes a group's carrier when its attributes are first set.
        None => super::carrier::new_carrier(store, group_key, &edit, io),
    }
}

fn commit_io(
    store: &Collection,
    leaf: &Leaf,
    edit: &Edit,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let path = store.path();
    match leaf.location() {
        Location::File(_) | Location::Source(_) | Location::TreeFile(_) | Location::TreeDir(_) => {
            match leaf.open().map_err(unwrap)? {
                Container::Array(a) => super::commit_io(a, edit, io),
                Container::Table(t) => Err(unsupported(
                    &t.path,
                    "a ctable in a directory: commit its columns with commit_column",
                )),
            }
        }
        Location::Member { index, .. } => {
            let zip = store
                .zip()
                .ok_or_else(|| unsupported(path, "a zip member outside a zip store"))?;
            commit_zip_member(zip, *index, edit, io)
        }
        Location::Embedded { offset, len } => {
            let estore = store
                .estore_array()
                .ok_or_else(|| unsupported(path, "an embedded value outside a store"))?;
            match super::embed::estore_edit(store, estore, leaf.key(), (*offset, *len), edit)? {
                Some(e) => super::embed::commit_estore(store, estore, &e, io),
                None => Ok(()),
            }
        }
        Location::Reference(_) | Location::Failed(..) => Err(unsupported(
            path,
            format!("{}: not a stored array", leaf.key()),
        )),
    }
}

fn unwrap(e: std::sync::Arc<ContainerError>) -> ContainerError {
    std::sync::Arc::try_unwrap(e).unwrap_or_else(|e| ContainerError::Malformed {
        path: std::path::PathBuf::new(),
        what: "leaf".into(),
        offset: 0,
        why: e.to_string(),
    })
}

/// A scratch file of this commit's own for a member of `zip` (`.b2fs-PID-T-N-<zip>.b2fs-member`
/// beside the zip, or beside the `.b2d` store it lies in: `leftover.rs`, `own_temp`); create it
/// where no file is.
pub(super) fn scratch_path(zip: &Path) -> std::path::PathBuf {
    own_temp(zip, crate::container::leftover::MEMBER_SUFFIX)
}

fn zip_err(path: &Path, e: zip::result::ZipError) -> ContainerError {
    match e {
        zip::result::ZipError::Io(source) => io_err(path, source),
        other => ContainerError::Malformed {
            path: path.to_path_buf(),
            what: "zip archive".into(),
            offset: 0,
            why: other.to_string(),
        },
    }
}

/// Commits `edit` to member `index` of `zip` by rebuilding the zip (the module doc).
pub(super) fn commit_zip_member(
    zip: &ZipIndex,
    index: usize,
    edit: &Edit,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let path = zip.path();
    if zip.changed_on_disk() {
        return Err(super::changed(path, "the zip file's size or mtime changed"));
    }
    if edit.is_empty() {
        return Ok(());
    }
    super::check_path_writable(path)?;
    super::check_path_writable(parent_dir(path))?;
    // Validate the member as a frame first (the frame commit checks the edit).
    let member = open_member(zip, index)?;
    let window = zip.window(index)?;
    drop(member);
    let scratch = scratch_path(path);
    copy_window(path, window.offset, window.len, &scratch)?;
    let result = (|| {
        let frame = Array::open_frame_at(&scratch, 0)?;
        super::commit(&frame, edit)?;
        drop(frame);
        write_zip(zip, index, &scratch, io)
    })();
    if result.is_err() && !io.crashed() {
        // The scratch frame is this commit's own; the new zip's temp file removed itself.
        let _ = std::fs::remove_file(&scratch);
    }
    result?;
    io.remove(&scratch)
}

/// Copies `len` bytes at `offset` of `zip` to a new file `to` (made where no file is; removed
/// again when the copy fails).
fn copy_window(zip: &Path, offset: u64, len: u64, to: &Path) -> Result<(), ContainerError> {
    let mut src = File::open(zip).map_err(|e| io_err(zip, e))?;
    src.seek(SeekFrom::Start(offset))
        .map_err(|e| io_err(zip, e))?;
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(|e| io_err(to, e))?;
    let copied = match std::io::copy(&mut src.take(len), &mut dst) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(io_err(
            zip,
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "member cut short"),
        )),
        Err(e) => Err(io_err(to, e)),
    };
    if copied.is_err() {
        let _ = std::fs::remove_file(to);
    }
    copied
}

/// Writes the new zip to a temp file and renames it over `zip`: member `index`
/// replaced by the content of `member`.
fn write_zip(
    zip: &ZipIndex,
    index: usize,
    member: &Path,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let name = zip.names()[index].clone();
    build_zip(zip, (zip.archive_index(index), &name), member, io)
}

/// [`write_zip`] adding a new member `name` with the content of `member` after the others.
pub(super) fn write_zip_adding(
    zip: &ZipIndex,
    name: &str,
    member: &Path,
    io: &mut Io,
) -> Result<(), ContainerError> {
    build_zip(zip, (None, name), member, io)
}

/// The new zip: every entry byte-copied but the archive's entry `edited`, written (stored)
/// as `name` with the content of `member`; with no `edited` entry, `name` is added last.
fn build_zip(
    zip: &ZipIndex,
    (edited, name): (Option<usize>, &str),
    member: &Path,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let path = zip.path();
    // A name of this commit's own, made where no file is (`leftover.rs`, `own_temp`).
    let tmp = temp_for(path);
    io.begin_step(&tmp)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io_err(&tmp, e))?;
    let renamed = fill_zip(zip, (edited, name), member, (file, &tmp), io)
        .and_then(|()| io.rename(&tmp, path));
    if let Err(e) = renamed {
        if !io.crashed() {
            let _ = std::fs::remove_file(&tmp);
        }
        return Err(e);
    }
    io.sync_dir(parent_dir(path))
}

/// Writes the entries of [`build_zip`] to `file` (the new zip at `tmp`) and fsyncs it. The
/// member written gets the local time of the commit as its modification time, as python's
/// `zipfile` gives a file it writes (its mtime, in local time): not the zip crate's default
/// of 1980-01-01.
fn fill_zip(
    zip: &ZipIndex,
    (edited, name): (Option<usize>, &str),
    member: &Path,
    (file, tmp): (File, &Path),
    io: &mut Io,
) -> Result<(), ContainerError> {
    let path = zip.path();
    let mut data = File::open(member).map_err(|e| io_err(member, e))?;
    let len = data.metadata().map_err(|e| io_err(member, e))?.len();
    let modified = super::io::local_time_now()
        .and_then(|(y, mo, d, h, mi, s)| {
            ::zip::DateTime::from_date_and_time(y, mo, d, h, mi, s).ok()
        })
        .unwrap_or_default();
    let file = zip.with_archive(|ar| -> Result<File, ContainerError> {
        let mut w = ::zip::ZipWriter::new(file);
        let mut put = |w: &mut ::zip::ZipWriter<File>| -> Result<(), ContainerError> {
            let opts = ::zip::write::SimpleFileOptions::default()
                .compression_method(::zip::CompressionMethod::Stored)
                .last_modified_time(modified)
                .large_file(len >= ZIP64_FROM);
            w.start_file(name, opts).map_err(|e| zip_err(tmp, e))?;
            std::io::copy(&mut data, w).map_err(|e| io_err(tmp, e))?;
            Ok(())
        };
        for i in 0..ar.len() {
            if Some(i) == edited {
                put(&mut w)?;
            } else {
                let f = ar.by_index_raw(i).map_err(|e| zip_err(path, e))?;
                w.raw_copy_file(f).map_err(|e| zip_err(tmp, e))?;
            }
        }
        if edited.is_none() {
            put(&mut w)?;
        }
        let mut file = w.finish().map_err(|e| zip_err(tmp, e))?;
        file.flush().map_err(|e| io_err(tmp, e))?;
        Ok(file)
    })?;
    io.sync(&file, tmp)
}
