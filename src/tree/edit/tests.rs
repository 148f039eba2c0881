//! Edits without a kernel: a [`Tree`] over a copy of a frame python-blosc2 wrote
//! (`tests/data/frames`: `b2nd_1d_f8.b2nd`, 1,000 f8 in 4 chunks of 300 items, each decoded
//! chunk padded to 320; `schunk_zstd.b2frame`, chunks of 65,536, 65,536 and 100 bytes), driven
//! through `open`/`write`/`set_size`/`create`/`unlink`/`release` as the FUSE
//! adapter drives it; what a commit stored is read back from the file by the container layer.

use std::path::{Path, PathBuf};

use super::*;
use crate::codec::decode::decompress;
use crate::container::{self, Container};
use crate::tree::{ROOT_INO, TreeOptions};

/// Bytes of `array.npy` one chunk of `b2nd_1d_f8.b2nd` holds (300 f8).
const CHUNK: usize = 2400;

/// Bytes of one decoded chunk of `b2nd_1d_f8.b2nd` (its chunk files' size).
const CHUNK_BYTES: usize = 2560;

/// A read-write tree over a fresh copy of `b2nd_1d_f8.b2nd`, and the copy's path.
fn writable_tree() -> (Tree, PathBuf) {
    writable_tree_of("b2nd_1d_f8.b2nd")
}

/// A read-write tree over a fresh copy of fixture `name`, and the copy's path.
fn writable_tree_of(name: &str) -> (Tree, PathBuf) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("b2fs-edit-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/frames")
        .join(name);
    let path = dir.join(name);
    std::fs::copy(from, &path).unwrap();
    let options = TreeOptions {
        writable: true,
        ..TreeOptions::default()
    };
    (Tree::from_source(&path, options).unwrap(), path)
}

/// The inode of `path` (`/`-separated, from the root).
fn ino(t: &Tree, path: &str) -> u64 {
    path.split('/')
        .fold(ROOT_INO, |dir, name| t.lookup(dir, name).unwrap().ino)
}

/// The chunks of the source at `path` as they are on disk, decoded.
fn on_disk(path: &Path) -> Vec<Vec<u8>> {
    let Container::Array(a) = container::open(path).unwrap() else {
        panic!("a table")
    };
    (0..a.nchunks())
        .map(|i| decompress(&a.chunk_bytes(i).unwrap()).unwrap())
        .collect()
}

/// All bytes of file `ino` through a new read-only handle (the committed version: a
/// read-only descriptor reads no one's buffers).
fn read_all(t: &Tree, ino: u64) -> Vec<u8> {
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let out = read_through(t, ino, fh);
    t.release(fh).unwrap();
    out
}

/// All bytes of file `ino` through handle `fh` (a writer's: with the buffers).
fn read_through(t: &Tree, ino: u64, fh: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let got = t.read(ino, fh, out.len() as u64, 1 << 16).unwrap();
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    out
}

#[test]
fn a_write_is_seen_by_every_file_of_the_chunk_and_reaches_the_source_at_release() {
    let (t, path) = writable_tree();
    let before = on_disk(&path);
    assert_eq!(before.len(), 4);
    let c1 = ino(&t, "data/00000001.bin");
    let npy = ino(&t, "array.npy");
    let fh = t.open(c1, libc::O_RDWR).unwrap();
    assert_eq!(t.write(c1, fh, 8, &[7u8; 16]).unwrap(), 16);
    // Before any commit: writers of the chunk file and of array.npy read the buffer;
    // read-only descriptors and the source the committed version.
    let chunk = read_through(&t, c1, fh);
    assert_eq!(&chunk[8..24], &[7u8; 16]);
    assert_eq!(chunk[..8], before[1][..8]);
    assert_eq!(read_all(&t, c1), before[1]);
    let npy_fh = t.open(npy, libc::O_RDWR).unwrap();
    let whole = read_through(&t, npy, npy_fh);
    let header = whole.len() - 1000 * 8;
    assert_eq!(&whole[header + CHUNK + 8..header + CHUNK + 24], &[7u8; 16]);
    assert_eq!(on_disk(&path), before);
    // Either writer's close commits the buffer both files share.
    t.release(npy_fh).unwrap();
    assert_eq!(on_disk(&path)[1], chunk);
    t.release(fh).unwrap();
    let after = on_disk(&path);
    assert_eq!(after[1], chunk);
    assert_eq!(
        (&after[0], &after[2], &after[3]),
        (&before[0], &before[2], &before[3])
    );
    assert!(
        t.edits.lock().chunks.is_empty(),
        "a committed buffer is dropped"
    );
}

#[test]
fn a_write_through_array_npy_patches_the_chunks_it_covers_and_keeps_the_header() {
    let (t, path) = writable_tree();
    let before = on_disk(&path);
    let npy = ino(&t, "array.npy");
    let whole = read_all(&t, npy);
    let header = whole.len() - 1000 * 8;
    let fh = t.open(npy, libc::O_RDWR).unwrap();
    // The header's own last bytes, then the first item's first bytes.
    let mut data = whole[header - 4..header].to_vec();
    data.extend_from_slice(&[9u8; 4]);
    assert_eq!(t.write(npy, fh, (header - 4) as u64, &data).unwrap(), 8);
    // Across the boundary of chunks 0 and 1.
    let at = header + CHUNK - 8;
    assert_eq!(t.write(npy, fh, at as u64, &[9u8; 16]).unwrap(), 16);
    // A changed header byte is refused and patches nothing.
    let mut bad = whole[..header].to_vec();
    bad[header - 2] ^= 1;
    bad.extend_from_slice(&[5u8; 8]);
    let err = t.write(npy, fh, 0, &bad).unwrap_err();
    assert!(matches!(err, TreeError::Refused(_)), "{err:?}");
    // Past its end: EFBIG; its size is fixed.
    let err = t.write(npy, fh, whole.len() as u64, &[1]).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    assert!(matches!(t.set_size(npy, 10), Err(TreeError::Refused(_))));
    t.release(fh).unwrap();
    let after = on_disk(&path);
    assert_eq!(&after[0][..4], &[9u8; 4]);
    assert_eq!(&after[0][CHUNK - 8..CHUNK], &[9u8; 8]);
    assert_eq!(&after[1][..8], &[9u8; 8]);
    assert_eq!(after[0][4..CHUNK - 8], before[0][4..CHUNK - 8]);
    assert_eq!(after[0][CHUNK..], before[0][CHUNK..], "the padding is kept");
    assert_eq!(after[1][8..], before[1][8..]);
    assert_eq!(&read_all(&t, npy)[at..at + 16], &[9u8; 16]);
}

#[test]
fn writes_need_a_handle_opened_for_writing_that_file() {
    let (t, path) = writable_tree();
    let before = on_disk(&path);
    let c0 = ino(&t, "data/00000000.bin");
    let c1 = ino(&t, "data/00000001.bin");
    let ro = t.open(c0, libc::O_RDONLY).unwrap();
    assert_eq!(t.write(c0, ro, 0, b"x").unwrap_err().errno(), libc::EBADF);
    let w = t.open(c0, libc::O_WRONLY).unwrap();
    assert_eq!(t.write(c1, w, 0, b"x").unwrap_err().errno(), libc::EBADF);
    assert_eq!(t.write(c0, 999, 0, b"x").unwrap_err().errno(), libc::EBADF);
    t.release(ro).unwrap();
    t.release(w).unwrap();
    assert_eq!(on_disk(&path), before);
    // Metadata files cannot be opened for writing.
    let sizes = t.open(ino(&t, "meta/sizes"), libc::O_WRONLY);
    assert!(matches!(sizes, Err(TreeError::MetadataFile)), "{sizes:?}");
}

#[test]
fn a_refused_first_write_leaves_no_buffer() {
    let (t, path) = writable_tree();
    let before = on_disk(&path);
    let c0 = ino(&t, "data/00000000.bin");
    let fh = t.open(c0, libc::O_WRONLY).unwrap();
    // Chunk 0 is no last chunk: it holds exactly its stored bytes.
    let err = t.write(c0, fh, CHUNK_BYTES as u64, b"x").unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    assert!(
        t.edits.lock().chunks.is_empty(),
        "{:?}",
        t.edits.lock().chunks
    );
    t.release(fh).unwrap();
    assert_eq!(on_disk(&path), before);
}

#[test]
fn writability_is_decided_at_open() {
    let (t, path) = writable_tree();
    let before = on_disk(&path);
    let c0 = ino(&t, "data/00000000.bin");
    let fh = t.open(c0, libc::O_WRONLY).unwrap();
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o444);
    std::fs::set_permissions(&path, perm).unwrap();
    // The source turned read-only: a new writer is refused at open...
    assert_eq!(t.open(c0, libc::O_WRONLY).unwrap_err().errno(), libc::EROFS);
    assert_eq!(t.set_size(c0, 0).unwrap_err().errno(), libc::EROFS);
    // ...the open one writes its buffer, and its commit is refused: the source is unchanged.
    assert_eq!(t.write(c0, fh, 0, b"x").unwrap(), 1);
    assert_eq!(t.release(fh).unwrap_err().errno(), libc::EROFS);
    assert_eq!(on_disk(&path), before);
    assert!(t.edits.lock().chunks.is_empty());
}

#[test]
fn the_next_chunk_file_is_created_and_appended_at_release() {
    let (t, path) = writable_tree_of("schunk_zstd.b2frame");
    let before = on_disk(&path);
    assert_eq!(before.len(), 3);
    let data = ino(&t, "data");
    let wrong = t.create(data, "00000009.bin").unwrap_err();
    assert!(matches!(wrong, TreeError::NotPermitted(_)), "{wrong:?}");
    // Created and closed empty: nothing is appended.
    let (attr, fh) = t.create(data, "00000003.bin").unwrap();
    assert_eq!(t.lookup(data, "00000003.bin").unwrap().ino, attr.ino);
    t.release(fh).unwrap();
    assert_eq!(on_disk(&path), before);
    assert!(t.lookup(data, "00000003.bin").is_err());
    // Created and written: an append of the bytes written.
    let (attr, fh) = t.create(data, "00000003.bin").unwrap();
    assert_eq!(t.write(attr.ino, fh, 0, &[3u8; 80]).unwrap(), 80);
    assert_eq!(read_through(&t, attr.ino, fh), vec![3u8; 80]);
    t.release(fh).unwrap();
    let after = on_disk(&path);
    assert_eq!(after[..3], before[..]);
    assert_eq!(after[3], vec![3u8; 80]);
}

#[test]
fn only_the_last_chunk_is_removed_and_truncate_commits_at_once() {
    let (t, path) = writable_tree_of("schunk_zstd.b2frame");
    let before = on_disk(&path);
    let data = ino(&t, "data");
    let err = t.unlink(data, "00000000.bin").unwrap_err();
    assert!(matches!(err, TreeError::NotPermitted(_)), "{err:?}");
    t.unlink(data, "00000002.bin").unwrap();
    assert_eq!(on_disk(&path), before[..2]);
    assert!(t.lookup(data, "00000002.bin").is_err());
    // truncate(2) of the (new) last chunk, without a handle: committed at once.
    let c1 = ino(&t, "data/00000001.bin");
    t.set_size(c1, 40).unwrap();
    let after = on_disk(&path);
    assert_eq!(after[1], before[1][..40]);
    // Growing a middle chunk past its stored size: EFBIG, nothing changes.
    let c0 = ino(&t, "data/00000000.bin");
    let err = t.set_size(c0, before[0].len() as u64 + 1).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    assert_eq!(on_disk(&path), after);
    assert!(t.edits.lock().chunks.is_empty());
    // Size 0 of the last chunk removes it.
    t.set_size(c1, 0).unwrap();
    assert_eq!(on_disk(&path), after[..1]);
}

#[test]
fn a_read_only_tree_refuses_every_change() {
    let (_, path) = writable_tree();
    let t = Tree::from_source(&path, TreeOptions::default()).unwrap();
    let c0 = ino(&t, "data/00000000.bin");
    for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_RDONLY | libc::O_TRUNC] {
        assert_eq!(t.open(c0, flags).unwrap_err().errno(), libc::EROFS);
    }
    let data = ino(&t, "data");
    assert_eq!(t.set_size(c0, 0).unwrap_err().errno(), libc::EROFS);
    assert_eq!(
        t.create(data, "00000004.bin").unwrap_err().errno(),
        libc::EROFS
    );
    assert_eq!(
        t.unlink(data, "00000003.bin").unwrap_err().errno(),
        libc::EROFS
    );
}

fn id(index: usize) -> ChunkId {
    ChunkId::new(ArrayId(0), index)
}

#[test]
fn a_buffer_is_dirty_until_clean_and_windows_stop_at_its_end() {
    let mut e = Edits::default();
    e.chunks.insert(id(0), ChunkBuf::loaded(vec![1, 2, 3, 4]));
    assert!(!e.chunks[&id(0)].dirty());
    assert_eq!(e.chunk_window(id(0), 1, 2), Some(vec![2, 3]));
    assert_eq!(e.chunk_window(id(0), 3, 100), Some(vec![4]));
    assert_eq!(e.chunk_window(id(0), 9, 1), Some(vec![]));
    assert_eq!(e.chunk_window(id(1), 0, 1), None);
    assert_eq!(e.chunk_len(id(0)), Some(4));
    assert!(ChunkBuf::removal().dirty() && ChunkBuf::creating().dirty());
}

#[test]
fn o_trunc_marks_only_an_existing_buffer() {
    let mut e = Edits::default();
    e.emptied_by_trunc(Some(id(0)));
    assert!(e.chunks.is_empty());
    e.chunks.insert(id(0), ChunkBuf::loaded(Vec::new()));
    e.emptied_by_trunc(Some(id(0)));
    e.emptied_by_trunc(None);
    assert_eq!(e.chunks[&id(0)].state, BufState::EmptiedByTrunc);
    assert!(e.chunks[&id(0)].dirty());
}

#[test]
fn only_an_empty_creation_is_dropped() {
    let mut e = Edits::default();
    e.chunks.insert(id(3), ChunkBuf::creating());
    e.chunks.insert(id(2), ChunkBuf::removal());
    e.drop_empty_creation(Some(id(2)));
    assert!(e.chunks.contains_key(&id(2)), "a removal is no creation");
    let mut written = ChunkBuf::creating();
    written.data.push(1);
    e.chunks.insert(id(4), written);
    e.drop_empty_creation(Some(id(4)));
    assert!(e.chunks.contains_key(&id(4)), "a creation with data stays");
    e.drop_empty_creation(Some(id(3)));
    assert!(!e.chunks.contains_key(&id(3)));
}

#[test]
fn attrs_windows_stop_at_the_end() {
    let mut e = Edits::default();
    e.attrs.insert(
        7,
        AttrsBuf {
            data: b"not json".to_vec(),
            dirty: true,
            version: 3,
            stale: false,
        },
    );
    assert_eq!(e.attrs_window(7, 4, 100), Some(b"json".to_vec()));
    assert_eq!(e.attrs_window(8, 0, 1), None);
    assert_eq!(e.attrs_len(7), Some(8));
}
