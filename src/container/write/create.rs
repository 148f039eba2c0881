//! A new b2nd array file made from nothing (a Zarr writer's new array through the view of a
//! directory of sources: `src/tree/zarr/create.rs`): every chunk holding one fill value, the
//! attributes as vlmeta, python-blosc2 opens it as an `NDArray`.
//!
//! How: a contiguous frame with the `b2nd` metalayer (`docs/format/CONTAINERS.md` 1.3, 4.3)
//! and no chunk is written to a temp file of b2fs's own ([`temp_for`]: directory mounts and
//! readers skip it), the chunks (one compressed fill chunk, itself one block of the fill
//! value encoded and repeated: [`crate::codec::compress_repeated`], repeated) and attributes are
//! committed to it by the ordinary frame commit ([`Edit::shape0`] with appends), fsynced;
//! then it is linked to its name (a link, not a rename: a file another writer made there
//! meanwhile is not replaced, EEXIST), the directory fsynced and the temp file removed. A
//! crash leaves no file at the name, or the whole array (and at worst a stray temp file).
//!
//! In a `.b2d` store ([`create_store_array`]) the file is `<key>.b2nd`, which python-blosc2's
//! `DictStore` opens as one more key; the temp file lies beside the store (python-blosc2 opens
//! any frame file in it as a key), and the link is made under the lock of
//! `embed.b2e.b2lock` when there is one, its counter bumped after (handles of python-blosc2
//! that lock look at the store again), as for a new `__vlmeta__` carrier (`carrier.rs`).

use std::path::Path;

use super::io::{Io, SidecarLock, parent_dir, temp_for};
use super::{Edit, io_err, refused};
use crate::container::{Array, ContainerError};

/// What the new array is.
#[derive(Debug, Clone)]
pub struct NewArray {
    /// Its shape (at least one dimension, none of length 0).
    pub shape: Vec<u64>,
    /// Its chunk shape (as many lengths, each at least 1).
    pub chunkshape: Vec<u64>,
    /// Its block shape (as many lengths, each at least 1 and at most the chunk's).
    pub blockshape: Vec<u64>,
    /// The NumPy dtype string (`<f8`, `|b1`, `<U3`, ...).
    pub dtype: String,
    /// Bytes per item.
    pub itemsize: usize,
    /// One item of the fill value (`itemsize` bytes): every chunk holds it.
    pub fill: Vec<u8>,
    /// The attributes (a JSON object in the container's attrs mapping), stored as vlmeta.
    pub attrs: Option<serde_json::Value>,
}

/// Most bytes of one chunk of a new array.
pub const MAX_NEW_CHUNK_BYTES: u64 = 1 << 30;

/// Most bytes of a new array's compressed fill chunks, all of them (the commit holds each
/// one's copy in memory): a fill of zeros or a constant compresses to a few hundred bytes a
/// chunk, so 65,536 chunks fit; a hostile document asking for more is refused.
pub const MAX_FILL_BYTES: u64 = 64 << 20;

/// Makes the b2nd file `path` holding `array` (see the module doc); `path` must not exist.
///
/// # Errors
/// [`ContainerError::Refused`] for a shape the format cannot hold (no dimension, more than
/// 8, a zero length, a chunk past [`MAX_NEW_CHUNK_BYTES`], more chunks than a frame
/// numbers, fill chunks past [`MAX_FILL_BYTES`]); [`ContainerError::Io`] (`EEXIST` when a
/// file lies at `path`); the commit's errors. Nothing is left at `path` when it fails.
pub fn create_array(path: &Path, array: &NewArray) -> Result<(), ContainerError> {
    let mut io = Io::new(None);
    create_io(path, array, &mut io)
}

/// [`create_array`] for a new key of the `.b2d` store at `store`: `path` (`<key>.b2nd` in the
/// store's directory of the key's group) linked in under the store's lock, when it has one
/// (see the module doc). The key must be free in the store as it is under the lock: a key
/// `<key>` another writer embedded in `embed.b2e` (or a file of another suffix it wrote)
/// since the caller looked would become a second key of that name.
///
/// # Errors
/// As [`create_array`]; [`ContainerError::Io`] of kind `AlreadyExists` (EEXIST) when the
/// store holds the key, nothing written; the lock's errors; the store's, when it no longer
/// opens.
pub fn create_store_array(
    store: &Path,
    path: &Path,
    array: &NewArray,
) -> Result<(), ContainerError> {
    let mut sidecar = store.join("embed.b2e").into_os_string();
    sidecar.push(".b2lock");
    let lock = SidecarLock::acquire(Path::new(&sidecar))?;
    if let Some(key) = store_key(store, path) {
        let now = crate::container::store::open_store(store)?;
        if now.find(&key).is_some() {
            return Err(io_err(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("the store holds the key {key} already"),
                ),
            ));
        }
    }
    create_array(path, array)?;
    // The array is made and durable: a counter that cannot be bumped makes other handles
    // see it later (at their next look at the store), not a failed create.
    if let Some(Err(e)) = lock.map(|l| l.bump()) {
        log::warn!(
            "{}: made, but the store's lock counter was not bumped ({}): python-blosc2 \
             handles open now see it at their next look at the store",
            path.display(),
            crate::error::display_chain(&e)
        );
    }
    Ok(())
}

/// Makes the directory `name` in `folder` (a new group of a directory of sources) and fsyncs
/// `folder`. When the fsync fails the directory is removed again: the error then says what
/// the disk holds (nothing new), and a retry can make it.
///
/// # Errors
/// [`ContainerError::Io`] (`AlreadyExists` when something lies at the name).
pub fn create_group_dir(folder: &Path, name: &str) -> Result<(), ContainerError> {
    create_dir_io(folder, name, &mut Io::new(None))
}

/// [`create_group_dir`] whose step `step` (0: the `mkdir`, 1: the fsync of `folder`) fails
/// with `errno`. For tests of errors after the effect.
///
/// # Errors
/// As [`create_group_dir`].
pub fn create_group_dir_failing(
    folder: &Path,
    name: &str,
    step: usize,
    errno: i32,
) -> Result<(), ContainerError> {
    let mut io = Io::new(None);
    io.fail_step_with(step, errno);
    create_dir_io(folder, name, &mut io)
}

fn create_dir_io(folder: &Path, name: &str, io: &mut Io) -> Result<(), ContainerError> {
    let at = folder.join(name);
    io.begin_step(&at)?;
    std::fs::create_dir(&at).map_err(|e| io_err(&at, e))?;
    if let Err(e) = io.sync_dir(folder) {
        // Not known to be durable: undone, so that the error matches what is there.
        if let Err(why) = std::fs::remove_dir(&at) {
            log::warn!(
                "{}: made, its directory's fsync failed, and it could not be removed: {why}",
                at.display()
            );
        }
        return Err(e);
    }
    Ok(())
}

/// The key (`/a/name`) that file `path` (`<store>/a/name.b2nd`) is in the store at `store`.
fn store_key(store: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(store).ok()?.to_str()?;
    let stem = rel.strip_suffix(".b2nd")?;
    Some(format!("/{stem}"))
}

/// [`create_array`] whose durable step `step` (after the temp file's commit: 0 the link, 1
/// the directory's fsync, 2 the temp file's removal) fails with `errno`, the others run. For
/// tests of errors after the effect.
///
/// # Errors
/// As [`create_array`].
pub fn create_array_failing(
    path: &Path,
    array: &NewArray,
    step: usize,
    errno: i32,
) -> Result<(), ContainerError> {
    let mut io = Io::new(None);
    io.fail_step_with(step, errno);
    create_io(path, array, &mut io)
}

/// [`create_array`] stopped after `steps` durable steps of the link and directory sync (the
/// temp file's commit runs whole), as a crash there would leave the files; `Ok(false)` when
/// cut short. For crash-safety tests.
///
/// # Errors
/// As [`create_array`].
pub fn create_array_with_crash_after(
    path: &Path,
    array: &NewArray,
    steps: usize,
) -> Result<bool, ContainerError> {
    Io::until_crash(steps, |io| create_io(path, array, io))
}

fn create_io(path: &Path, a: &NewArray, io: &mut Io) -> Result<(), ContainerError> {
    let nd = a.shape.len();
    let bad = |why: String| Err(refused(path, why));
    // python-blosc2 (C-Blosc2's B2ND_MAX_DIM) reads at most 8 dimensions.
    if nd == 0 || nd > 8 || a.chunkshape.len() != nd || a.blockshape.len() != nd {
        return bad(format!("a new array of {nd} dimensions (1 to 8 are made)"));
    }
    if a.shape.contains(&0) || a.chunkshape.contains(&0) || a.blockshape.contains(&0) {
        return bad("a new array with a zero length in its shape, chunks or blocks".into());
    }
    if a.itemsize == 0 || a.fill.len() != a.itemsize {
        return bad(format!(
            "a fill value of {} bytes for items of {}",
            a.fill.len(),
            a.itemsize
        ));
    }
    let items = |s: &[u64]| s.iter().try_fold(1u64, |p, &x| p.checked_mul(x));
    let chunk_bytes = items(&a.chunkshape).and_then(|n| n.checked_mul(a.itemsize as u64));
    let block_bytes = items(&a.blockshape).and_then(|n| n.checked_mul(a.itemsize as u64));
    let (Some(chunk_bytes), Some(block_bytes)) = (chunk_bytes, block_bytes) else {
        return bad("a chunk too large".into());
    };
    if chunk_bytes > MAX_NEW_CHUNK_BYTES || i32::try_from(chunk_bytes).is_err() {
        return bad(format!(
            "a chunk of {chunk_bytes} bytes (at most 1 GiB, 2 GiB for Blosc2)"
        ));
    }
    let grid: Vec<u64> = a
        .shape
        .iter()
        .zip(&a.chunkshape)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    let nchunks = items(&grid).filter(|&n| n < (1 << 28));
    let Some(nchunks) = nchunks else {
        return bad("more chunks than a frame numbers".into());
    };
    let typesize = i32::try_from(a.itemsize)
        .ok()
        .filter(|t| (1..=255).contains(t))
        .unwrap_or(1);
    let frame = super::carrier::frame_with(
        typesize,
        i32::try_from(block_bytes).unwrap_or(0),
        chunk_bytes as i32,
        Some(&b2nd_meta(a)),
    );
    let tmp = temp_for(path);
    let made = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io_err(&tmp, e))?;
        std::io::Write::write_all(&mut f, &frame).map_err(|e| io_err(&tmp, e))?;
        drop(f);
        let empty = Array::open_frame_at(&tmp, 0)?;
        let params = super::chunk_cparams(&empty)?;
        // One block of the fill value encoded and repeated: the memory and time of the
        // compressed chunk, not of the raw one (up to 1 GiB).
        let chunk = crate::codec::compress_repeated(&a.fill, chunk_bytes as usize, &params)
            .map_err(|e| ContainerError::Chunk {
                path: tmp.clone(),
                index: 0,
                source: e,
            })?;
        // Every chunk is a copy of it in the commit: bounded, whatever the document asked.
        let all = (chunk.len() as u64).saturating_mul(nchunks);
        if all > MAX_FILL_BYTES {
            return Err(refused(
                path,
                format!(
                    "its {nchunks} chunks of the fill value would take {all} bytes compressed \
                     (at most {MAX_FILL_BYTES}): fewer or smaller chunks, or the fill value 0"
                ),
            ));
        }
        let chunk = super::Chunk::from(chunk);
        let edit = Edit {
            appends: (0..nchunks).map(|_| chunk.clone()).collect(),
            shape0: Some(a.shape[0]),
            attrs: a.attrs.clone(),
            ..Edit::default()
        };
        super::commit(&empty, &edit)
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return made;
    }
    let linked = (|| {
        io.begin_step(path)?;
        std::fs::hard_link(&tmp, path).map_err(|e| io_err(path, e))
    })();
    if linked.is_err() && !io.crashed() {
        let _ = std::fs::remove_file(&tmp);
    }
    linked?;
    // The reply says what the disk holds: an error when the array is not made (a failed
    // fsync of the directory undoes the link), success once it is durable.
    if let Err(e) = io.sync_dir(parent_dir(path)) {
        if !io.crashed() {
            unlink_own(path, &tmp);
            let _ = std::fs::remove_file(&tmp);
        }
        return Err(e);
    }
    if let Err(e) = io.remove(&tmp) {
        if io.crashed() {
            return Err(e);
        }
        // Made and durable; a stray temp file of b2fs's own (mounts and readers skip it,
        // `b2fs verify` names it) is no failure of the create.
        log::warn!(
            "{}: made; its temp file {} stays: {}",
            path.display(),
            tmp.display(),
            crate::error::display_chain(&e)
        );
    }
    Ok(())
}

/// Removes `path` when it is still the link to `tmp` made by this create (the same file):
/// a file another writer renamed over it since is theirs and stays.
fn unlink_own(path: &Path, tmp: &Path) {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &Path| std::fs::symlink_metadata(p).map(|m| (m.dev(), m.ino()));
    match (id(path), id(tmp)) {
        (Ok(a), Ok(b)) if a == b => {
            if let Err(why) = std::fs::remove_file(path) {
                log::warn!(
                    "{}: its directory's fsync failed and it could not be removed: {why}",
                    path.display()
                );
            }
        }
        _ => {}
    }
}

/// The `b2nd` metalayer content of `a` (`docs/format/CONTAINERS.md` 4.3).
fn b2nd_meta(a: &NewArray) -> Vec<u8> {
    let nd = a.shape.len() as u8;
    let mut m = vec![0x97, 0x00, nd, 0x90 | nd];
    for &s in &a.shape {
        m.push(0xd3);
        m.extend_from_slice(&(s as i64).to_be_bytes());
    }
    for shape in [&a.chunkshape, &a.blockshape] {
        m.push(0x90 | nd);
        for &c in shape {
            m.push(0xd2);
            m.extend_from_slice(&(c as i32).to_be_bytes());
        }
    }
    m.push(0x00);
    m.push(0xdb);
    m.extend_from_slice(&(a.dtype.len() as u32).to_be_bytes());
    m.extend_from_slice(a.dtype.as_bytes());
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_array_opens_with_its_shape_and_fill() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("t");
        let a = NewArray {
            shape: vec![10, 7],
            chunkshape: vec![4, 4],
            blockshape: vec![2, 4],
            dtype: "<f8".into(),
            itemsize: 8,
            fill: f64::NAN.to_le_bytes().to_vec(),
            attrs: Some(serde_json::json!({"units": "K"})),
        };
        create_array(&at, &a).unwrap();
        let arr = Array::open_frame_at(&at, 0).unwrap();
        assert_eq!(arr.nchunks(), 6);
        let nd = arr.nd_meta().unwrap();
        assert_eq!(nd.shape, vec![10, 7]);
        assert!(create_array(&at, &a).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn fill_chunks_past_their_bound_and_more_than_8_dimensions_are_refused_leaving_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("t");
        // 20,000 chunks of 256 MiB of the byte 1: each compresses to kilobytes (a block's
        // few bytes, 1,024 blocks), all of them past MAX_FILL_BYTES (they were held in
        // memory, one copy per chunk).
        let big = NewArray {
            shape: vec![262_144 * 20_000, 1024],
            chunkshape: vec![262_144, 1024],
            blockshape: vec![256, 1024],
            dtype: "|u1".into(),
            itemsize: 1,
            fill: vec![1],
            attrs: None,
        };
        let err = create_array(&at, &big).unwrap_err().to_string();
        assert!(err.contains("chunks of the fill value"), "{err}");
        let nine = NewArray {
            shape: vec![2; 9],
            chunkshape: vec![1; 9],
            blockshape: vec![1; 9],
            ..big
        };
        let err = create_array(&at, &nine).unwrap_err().to_string();
        assert!(err.contains("9 dimensions"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Nine `<i4` items of 7 in chunks and blocks of 4 (three chunks, the last short).
    fn nine_int32_of_7() -> NewArray {
        NewArray {
            shape: vec![9],
            chunkshape: vec![4],
            blockshape: vec![4],
            dtype: "<i4".into(),
            itemsize: 4,
            fill: 7i32.to_le_bytes().to_vec(),
            attrs: None,
        }
    }

    /// Errors after the effect: the reply says what the disk holds. A failed fsync of the
    /// directory after the link undoes the link (an error, no file, and a retry makes it);
    /// a temp file that cannot be removed after the array is durable is no failure (the
    /// array is there and opens). A group directory whose parent's fsync fails is removed.
    #[test]
    fn an_error_after_the_link_leaves_the_disk_as_the_reply_says() {
        let dir = tempfile::tempdir().unwrap();
        let a = nine_int32_of_7();
        let at = dir.path().join("t.b2nd");
        let err = create_array_failing(&at, &a, 1, libc::EIO).unwrap_err();
        assert!(err.to_string().contains("Input/output"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        create_array(&at, &a).unwrap();
        let at = dir.path().join("u.b2nd");
        create_array_failing(&at, &a, 2, libc::EIO).unwrap();
        assert_eq!(Array::open_frame_at(&at, 0).unwrap().nchunks(), 3);
        let err = create_group_dir_failing(dir.path(), "g", 1, libc::EIO).unwrap_err();
        assert!(err.to_string().contains("Input/output"), "{err}");
        assert!(!dir.path().join("g").exists());
        create_group_dir(dir.path(), "g").unwrap();
        assert!(dir.path().join("g").is_dir());
    }

    #[test]
    fn a_crash_at_any_step_leaves_no_file_or_the_whole_array() {
        let dir = tempfile::tempdir().unwrap();
        let a = nine_int32_of_7();
        let mut outcomes = Vec::new();
        for steps in 0..6 {
            let at = dir.path().join(format!("t{steps}"));
            let done = create_array_with_crash_after(&at, &a, steps).unwrap();
            let present = at.exists();
            if present {
                let arr = Array::open_frame_at(&at, 0).unwrap();
                assert_eq!(arr.nchunks(), 3);
                assert_eq!(arr.nd_meta().unwrap().shape, vec![9]);
            }
            outcomes.push((done, present));
        }
        assert_eq!(outcomes[0], (false, false));
        assert!(outcomes.iter().any(|&(done, present)| done && present));
        assert!(outcomes.iter().all(|&(done, present)| !done || present));
    }
}
