//! The write rules without a kernel: a [`Tree`] over a copy of a frame python-blosc2 wrote
//! (tests/data/frames, see GENERATED.json there) is edited through the calls the FUSE adapter
//! makes (`open`, `write`, `set_size`, `create`, `unlink`, `flush`, `release`); what reached
//! the file is read back by opening it again from disk. A refused edit must name its errno and
//! leave the file byte-identical.

use std::path::{Path, PathBuf};

use super::*;
use crate::codec::decode::decompress;
use crate::container::{self, Container};
use crate::reader::ReaderOptions;
use crate::tree::{ROOT_INO, TreeOptions};

// The buffers alone.

fn id(index: usize) -> ChunkId {
    ChunkId::new(ArrayId(0), index)
}

#[test]
fn a_buffer_is_dirty_until_clean_and_windows_stop_at_its_end() {
    let mut e = Edits::default();
    e.insert_chunk(id(0), ChunkBuf::loaded(vec![1, 2, 3, 4]));
    assert!(!e.chunk(id(0)).unwrap().dirty());
    let window =
        |e: &Edits, i, offset, size| e.chunk_window(id(i), offset, size).map(|w| w.unwrap());
    assert_eq!(window(&e, 0, 1, 2), Some(vec![2, 3]));
    assert_eq!(window(&e, 0, 3, 100), Some(vec![4]));
    assert_eq!(window(&e, 0, 9, 1), Some(vec![]));
    assert_eq!(window(&e, 1, 0, 1), None);
    assert_eq!(e.chunk_len(id(0)), Some(4));
    assert!(ChunkBuf::removal().dirty() && ChunkBuf::creating().dirty());
}

#[test]
fn o_trunc_marks_only_an_existing_buffer() {
    let mut e = Edits::default();
    e.emptied_by_trunc(Some(id(0)));
    assert!(!e.has_chunks());
    e.insert_chunk(id(0), ChunkBuf::loaded(Vec::new()));
    e.emptied_by_trunc(Some(id(0)));
    e.emptied_by_trunc(None);
    assert_eq!(e.chunk(id(0)).unwrap().state, BufState::EmptiedByTrunc);
    assert!(e.chunk(id(0)).unwrap().dirty());
}

#[test]
fn only_an_empty_creation_is_dropped() {
    let mut e = Edits::default();
    e.insert_chunk(id(3), ChunkBuf::creating());
    e.insert_chunk(id(2), ChunkBuf::removal());
    e.drop_empty_creation(Some(id(2)));
    assert!(e.has_chunk(id(2)), "a removal is no creation");
    e.insert_chunk(id(4), ChunkBuf::creating());
    e.edit_in_memory(id(4), 10, |b, _| {
        b.push(1);
        Ok(())
    })
    .unwrap();
    e.drop_empty_creation(Some(id(4)));
    assert!(e.has_chunk(id(4)), "a creation with data stays");
    e.drop_empty_creation(Some(id(3)));
    assert!(!e.has_chunk(id(3)));
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

// Whole trees.

/// 1-D, `<f8`, 1,000 items in chunks of 300 (4 chunks of 2,560 bytes: padded to blocks).
const ONE_D: &str = "b2nd_1d_f8.b2nd";
/// A plain SChunk (no N-dim metalayer), typesize 4: chunks of 65,536, 65,536 and 100 bytes.
const SCHUNK: &str = "schunk_zstd.b2frame";
/// 2-D, `<i4`, shape (10, 7) in 6 chunks of 64 bytes.
const TWO_D: &str = "b2nd_2d_i4_odd.b2nd";

/// A copy of fixture `name` in a directory of its own (removed with the guard).
fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join(name);
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/frames");
    std::fs::copy(from.join(name), &to).unwrap();
    (dir, to)
}

fn tree(path: &Path, writable: bool) -> Tree {
    let options = TreeOptions {
        reader: ReaderOptions {
            prefetch_chunks: 0,
            ..ReaderOptions::default()
        },
        writable,
        ..TreeOptions::default()
    };
    Tree::from_source(path, options).unwrap()
}

fn ino(t: &Tree, path: &str) -> u64 {
    path.split('/')
        .fold(ROOT_INO, |at, name| t.lookup(at, name).unwrap().ino)
}

/// The whole file `path` of the tree, read through a fresh read-only handle.
fn read(t: &Tree, path: &str) -> Vec<u8> {
    let ino = ino(t, path);
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let size = t.getattr(ino).unwrap().size;
    let got = t.read(ino, fh, 0, size as u32).unwrap().to_vec();
    t.release(fh).unwrap();
    got
}

/// A copy of fixture `name`, its chunks as stored, and a writable tree over it.
fn writable(name: &str) -> (tempfile::TempDir, PathBuf, Vec<Vec<u8>>, Tree) {
    let (dir, path) = copy(name);
    let stored = on_disk(&path);
    let t = tree(&path, true);
    (dir, path, stored, t)
}

/// Every chunk of the source at `path` as it is on disk now, decoded.
fn on_disk(path: &Path) -> Vec<Vec<u8>> {
    let Container::Array(a) = container::open(path).unwrap() else {
        panic!("a table")
    };
    (0..a.nchunks())
        .map(|i| decompress(&a.chunk_bytes(i).unwrap()).unwrap())
        .collect()
}

/// Runs `refused` on a writable tree over a copy of `fixture`, expects errno `errno`, and
/// checks that the file is byte-identical and the tree shows the stored chunks again.
fn refused(fixture: &str, errno: i32, refused: impl FnOnce(&Tree) -> Result<(), TreeError>) {
    let (_dir, path) = copy(fixture);
    let before = std::fs::read(&path).unwrap();
    let t = tree(&path, true);
    let err = refused(&t).expect_err("the edit was accepted");
    assert_eq!(err.errno(), errno, "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the source changed");
    for (i, chunk) in on_disk(&path).iter().enumerate() {
        assert_eq!(&read(&t, &format!("data/{}", dir::chunk_name(i))), chunk);
    }
}

/// A partial write is read by the descriptor that wrote it at once; a read-only descriptor
/// reads the committed version as it was at its open (docs/SEMANTICS.md, "One version per
/// descriptor") until and after the commit; a new open sees the commit.
#[test]
fn a_partial_write_is_seen_by_its_writer_until_committed_at_close() {
    let (_dir, path, stored, t) = writable(ONE_D);
    let c1 = ino(&t, "data/00000001.bin");
    let fh = t.open(c1, libc::O_RDWR).unwrap();
    assert_eq!(t.write(c1, fh, 16, &[0xAB; 8]).unwrap(), 8);
    let mut want = stored[1].clone();
    want[16..24].fill(0xAB);
    assert_eq!(t.read(c1, fh, 0, 4096).unwrap().to_vec(), want);
    let before = t.open(c1, libc::O_RDONLY).unwrap();
    assert_eq!(t.read(c1, before, 0, 4096).unwrap().to_vec(), stored[1]);
    assert_eq!(on_disk(&path), stored);
    t.release(fh).unwrap();
    let now = on_disk(&path);
    assert_eq!(now[1], want);
    assert_eq!(
        [&now[0], &now[2], &now[3]],
        [&stored[0], &stored[2], &stored[3]]
    );
    assert_eq!(t.read(c1, before, 0, 4096).unwrap().to_vec(), stored[1]);
    t.release(before).unwrap();
    assert_eq!(read(&t, "data/00000001.bin"), want);
    // array.npy shows the chunk's items 300.. after its header.
    let npy = read(&t, "array.npy");
    let at = npy.len() - 1000 * 8 + 300 * 8 + 16;
    assert_eq!(npy[at..at + 8], [0xAB; 8]);
}

#[test]
fn a_write_through_array_npy_lands_in_the_chunk_it_falls_in() {
    let (_dir, path, stored, t) = writable(TWO_D);
    let npy = ino(&t, "array.npy");
    let whole = read(&t, "array.npy");
    let data = whole.len() - 10 * 7 * 4;
    let fh = t.open(npy, libc::O_WRONLY).unwrap();
    // The header rewritten as it is and the first item: accepted.
    let mut head = whole[..data + 4].to_vec();
    head[data..].copy_from_slice(&(-5i32).to_le_bytes());
    t.write(npy, fh, 0, &head).unwrap();
    t.flush(npy, fh).unwrap();
    t.release(fh).unwrap();
    let now = on_disk(&path);
    assert_eq!(now[0][..4], (-5i32).to_le_bytes());
    assert_eq!(now[0][4..], stored[0][4..]);
    assert_eq!(now[1..], stored[1..]);
}

#[test]
fn a_changed_array_npy_header_is_einval() {
    refused(TWO_D, libc::EINVAL, |t| {
        let npy = ino(t, "array.npy");
        let fh = t.open(npy, libc::O_WRONLY).unwrap();
        let res = t.write(npy, fh, 10, b"X").map(drop);
        t.release(fh).unwrap();
        res
    });
}

#[test]
fn array_npy_keeps_its_size() {
    refused(TWO_D, libc::EFBIG, |t| {
        let npy = ino(t, "array.npy");
        let len = t.getattr(npy).unwrap().size;
        let fh = t.open(npy, libc::O_WRONLY).unwrap();
        let res = t.write(npy, fh, len - 2, &[0; 4]).map(drop);
        t.release(fh).unwrap();
        res
    });
    refused(TWO_D, libc::EINVAL, |t| {
        let npy = ino(t, "array.npy");
        let len = t.getattr(npy).unwrap().size;
        t.set_size(npy, len).unwrap();
        t.set_size(npy, len - 1)
    });
}

#[test]
fn a_write_past_what_a_chunk_holds_is_efbig() {
    // An N-dim chunk holds its stored size; so does a 1-D chunk that is not the last.
    refused(TWO_D, libc::EFBIG, |t| {
        let c = ino(t, "data/00000002.bin");
        let fh = t.open(c, libc::O_WRONLY).unwrap();
        let res = t.write(c, fh, 60, &[1; 8]).map(drop);
        t.release(fh).unwrap();
        res
    });
    refused(ONE_D, libc::EFBIG, |t| {
        t.set_size(ino(t, "data/00000000.bin"), 2561)
    });
}

#[test]
fn read_only_trees_metadata_and_directories_refuse_writes() {
    let (_dir, path) = copy(ONE_D);
    let before = std::fs::read(&path).unwrap();
    let ro = tree(&path, false);
    for file in ["data/00000000.bin", "array.npy", "__attrs__"] {
        let e = ro.open(ino(&ro, file), libc::O_WRONLY).unwrap_err();
        assert_eq!(e.errno(), libc::EROFS, "{file}: {e}");
    }
    let e = ro.set_size(ino(&ro, "data/00000003.bin"), 0).unwrap_err();
    assert_eq!(e.errno(), libc::EROFS);
    let e = ro.unlink(ino(&ro, "data"), "00000003.bin").unwrap_err();
    assert_eq!(e.errno(), libc::EROFS);
    let rw = tree(&path, true);
    let e = rw.open(ino(&rw, "meta/sizes"), libc::O_WRONLY).unwrap_err();
    assert_eq!(e.errno(), libc::EACCES, "{e}");
    let e = rw.open(ino(&rw, "data"), libc::O_WRONLY).unwrap_err();
    assert_eq!(e.errno(), libc::EISDIR, "{e}");
    // A handle opened for reading does not write.
    let c0 = ino(&rw, "data/00000000.bin");
    let fh = rw.open(c0, libc::O_RDONLY).unwrap();
    assert_eq!(rw.write(c0, fh, 0, b"x").unwrap_err().errno(), libc::EBADF);
    rw.release(fh).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_chunk_that_is_not_the_last_keeps_its_size() {
    // truncate(2) without a handle commits at once: refused, dropped.
    refused(ONE_D, libc::EINVAL, |t| {
        t.set_size(ino(t, "data/00000001.bin"), 100)
    });
    refused(TWO_D, libc::EINVAL, |t| {
        t.set_size(ino(t, "data/00000005.bin"), 0)
    });
    // O_TRUNC and nothing written: a close does not commit that (a shell's `>` closes a
    // duplicate first), the last release does, and is refused.
    refused(ONE_D, libc::EINVAL, |t| {
        let c = ino(t, "data/00000001.bin");
        let fh = t.open(c, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        assert_eq!(t.getattr(c).unwrap().size, 0);
        t.flush(c, fh).unwrap();
        t.release(fh)
    });
}

#[test]
fn the_last_chunk_of_a_1d_source_may_shrink_grow_go_and_come_after() {
    let (_dir, path, stored, t) = writable(SCHUNK);
    assert_eq!(
        stored.iter().map(Vec::len).collect::<Vec<_>>(),
        [65536, 65536, 100]
    );
    let last = ino(&t, "data/00000002.bin");
    // Shrunk by truncate(2): committed at once.
    t.set_size(last, 40).unwrap();
    assert_eq!(on_disk(&path)[2], stored[2][..40]);
    // Grown by a write past its end, up to the chunk size and no further.
    let fh = t.open(last, libc::O_WRONLY).unwrap();
    t.write(last, fh, 40, &[7; 24]).unwrap();
    let e = t.write(last, fh, 65536 - 4, &[7; 8]).unwrap_err();
    assert_eq!(e.errno(), libc::EFBIG, "{e}");
    t.release(fh).unwrap();
    let now = on_disk(&path);
    assert_eq!(now[2][..40], stored[2][..40]);
    assert_eq!(now[2][40..], [7; 24]);
    assert_eq!(now[..2], stored[..2]);
    // Removed: two chunks left; a chunk that is not the last cannot go.
    let data = ino(&t, "data");
    t.unlink(data, "00000002.bin").unwrap();
    assert_eq!(on_disk(&path)[..], stored[..2]);
    let e = t.unlink(data, "00000000.bin").unwrap_err();
    assert_eq!(e.errno(), libc::EPERM, "{e}");
    // Created: only the next name, filled by writes and appended at the last close.
    let e = t.create(data, "00000007.bin").unwrap_err();
    assert_eq!(e.errno(), libc::EPERM, "{e}");
    let (attr, fh) = t.create(data, "00000002.bin").unwrap();
    assert_eq!(attr.size, 0);
    let new: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    t.write(attr.ino, fh, 0, &new[..1000]).unwrap();
    t.write(attr.ino, fh, 1000, &new[1000..]).unwrap();
    assert_eq!(on_disk(&path).len(), 2, "appended before the close");
    t.release(fh).unwrap();
    let now = on_disk(&path);
    assert_eq!(now[..2], stored[..2]);
    assert_eq!(now[2], new);
    // Created and closed empty: nothing appended.
    let before = std::fs::read(&path).unwrap();
    let (_, fh) = t.create(data, "00000003.bin").unwrap();
    t.release(fh).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // O_TRUNC and closed without a write: the last chunk is removed.
    let fh = t.open(attr.ino, libc::O_WRONLY | libc::O_TRUNC).unwrap();
    t.flush(attr.ino, fh).unwrap();
    assert_eq!(
        on_disk(&path).len(),
        3,
        "removed at a close before the last"
    );
    t.release(fh).unwrap();
    assert_eq!(on_disk(&path)[..], stored[..2]);
}

#[test]
fn a_b2nd_chunk_keeps_its_size_but_the_last_may_go() {
    refused(ONE_D, libc::EINVAL, |t| {
        t.set_size(ino(t, "data/00000003.bin"), 800)
    });
    let (_dir, path, stored, t) = writable(ONE_D);
    t.unlink(ino(&t, "data"), "00000003.bin").unwrap();
    assert_eq!(on_disk(&path)[..], stored[..3]);
    let sizes: serde_json::Value = serde_json::from_slice(&read(&t, "meta/sizes")).unwrap();
    assert_eq!(sizes["shape"], serde_json::json!([900]));
}

#[test]
fn an_n_dim_array_does_not_grow() {
    refused(TWO_D, libc::EINVAL, |t| {
        t.create(ino(t, "data"), "00000006.bin").map(drop)
    });
    refused(TWO_D, libc::EPERM, |t| {
        t.unlink(ino(t, "data"), "00000005.bin")
    });
}

#[test]
fn attrs_take_a_json_object_only() {
    let (_dir, path) = copy(ONE_D);
    let t = tree(&path, true);
    let a = ino(&t, "__attrs__");
    let fh = t.open(a, libc::O_WRONLY | libc::O_TRUNC).unwrap();
    t.write(a, fh, 0, br#"{"unit": "m"}"#).unwrap();
    t.release(fh).unwrap();
    let Container::Array(stored) = container::open(&path).unwrap() else {
        panic!("a table")
    };
    assert_eq!(stored.attrs(), &serde_json::json!({"unit": "m"}));
    let before = std::fs::read(&path).unwrap();
    for bad in [&b"[1, 2]"[..], b"{not json"] {
        let fh = t.open(a, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        t.write(a, fh, 0, bad).unwrap();
        let e = t.release(fh).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
    let shown: serde_json::Value = serde_json::from_slice(&read(&t, "__attrs__")).unwrap();
    assert_eq!(shown, serde_json::json!({"unit": "m"}));
}

/// Whether a file may be written is decided at open, as `open(2)` checks permissions
/// (`Mode::Write` in `tree/handle.rs`): a source made read-only after a writer opened it
/// refuses new writers (EROFS), the open one's writes are buffered and its commit is refused
/// (EROFS), and the source stays as it was. A writer's handle writes only its own file.
#[test]
fn writability_is_decided_at_open() {
    let (_dir, path, stored, t) = writable(ONE_D);
    let c0 = ino(&t, "data/00000000.bin");
    let c1 = ino(&t, "data/00000001.bin");
    let fh = t.open(c0, libc::O_WRONLY).unwrap();
    assert_eq!(t.write(c1, fh, 0, b"x").unwrap_err().errno(), libc::EBADF);
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o444);
    std::fs::set_permissions(&path, perm).unwrap();
    let e = t.open(c0, libc::O_WRONLY).unwrap_err();
    assert_eq!(e.errno(), libc::EROFS, "{e}");
    assert_eq!(t.set_size(c0, 0).unwrap_err().errno(), libc::EROFS);
    assert_eq!(t.write(c0, fh, 0, b"x").unwrap(), 1);
    assert_eq!(t.release(fh).unwrap_err().errno(), libc::EROFS);
    assert_eq!(on_disk(&path), stored);
    assert!(!t.edits.lock().has_chunks());
}

/// The scratch files of a mount are bounded together, not only each (session 20 left their
/// sum open: any number of 64 MiB files in the root): growing them past the mount's bytes
/// ([`MAX_SCRATCH_BYTES`](crate::tree::scratch::MAX_SCRATCH_BYTES), lowered here to 3 MiB) is
/// ENOSPC, and so is one file more than its count (lowered to 8); one file past its own bound
/// is still EFBIG. A refusal changes no file; shrinking or removing files makes room again;
/// the source is untouched throughout.
#[test]
fn the_scratch_files_of_a_mount_are_bounded_in_count_and_in_bytes() {
    let (_dir, path) = copy(ONE_D);
    let before = std::fs::read(&path).unwrap();
    let t = tree(&path, true);
    {
        let mut s = t.scratch.lock();
        assert_eq!(s.max_files, crate::tree::scratch::MAX_SCRATCH_FILES);
        (s.max_files, s.max_bytes) = (8, 3 << 20);
    }
    let mut big = Vec::new();
    for i in 0..3 {
        let (a, fh) = t.create(ROOT_INO, &format!("big{i}.swp")).unwrap();
        t.set_size(a.ino, 1 << 20).unwrap();
        big.push((a.ino, fh));
    }
    let (a, fh) = t.create(ROOT_INO, "one.more").unwrap();
    let err = t.write(a.ino, fh, 0, b"x").unwrap_err();
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert_eq!(t.set_size(a.ino, 1).unwrap_err().errno(), libc::ENOSPC);
    let past = t.set_size(a.ino, MAX_BUFFERED as u64 + 1).unwrap_err();
    assert_eq!(past.errno(), libc::EFBIG, "{past}");
    assert_eq!(t.getattr(a.ino).unwrap().size, 0);
    // Rewriting bytes a file holds needs no room; growing one past the rest does not fit.
    let (b0, fh0) = big[0];
    t.write(b0, fh0, 5, b"abc").unwrap();
    assert_eq!(t.scratch_data(b0)[5..8], *b"abc");
    let err = t.write(b0, fh0, 1 << 20, b"x").unwrap_err();
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert_eq!(t.getattr(b0).unwrap().size, 1 << 20);
    t.set_size(b0, 8).unwrap();
    assert_eq!(t.write(a.ino, fh, 0, b"x").unwrap(), 1);
    t.unlink(ROOT_INO, "big1.swp").unwrap();
    t.set_size(a.ino, 1 << 20).unwrap();
    // The count: one more than the most is refused and not listed; a removal makes room.
    let have = t.scratch_entries(ROOT_INO).len();
    for i in have..8 {
        let (_, fh) = t.create(ROOT_INO, &format!("f{i}")).unwrap();
        t.release(fh).unwrap();
    }
    let err = t.create(ROOT_INO, "too.many").unwrap_err();
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert_eq!(
        t.lookup(ROOT_INO, "too.many").unwrap_err().errno(),
        libc::ENOENT
    );
    assert_eq!(t.scratch_entries(ROOT_INO).len(), 8);
    t.unlink(ROOT_INO, &format!("f{have}")).unwrap();
    let (_, fh2) = t.create(ROOT_INO, "too.many").unwrap();
    t.release(fh2).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before, "the source changed");
}

/// The bound on scratch files counts the memory their buffers hold, not their lengths: files
/// written and truncated (an editor's swap file, `O_TRUNC` rewrites) give their memory back,
/// and a file written in small pieces never holds more than the bound while it grows.
#[test]
fn scratch_memory_is_counted_as_held_not_as_shown() {
    let (_dir, path) = copy(ONE_D);
    let t = tree(&path, true);
    let cap = 3usize << 20;
    {
        let mut s = t.scratch.lock();
        (s.max_files, s.max_bytes) = (32, cap);
    }
    let held = |t: &Tree| -> usize {
        t.scratch
            .lock()
            .files
            .values()
            .map(|f| f.data.capacity())
            .sum()
    };
    let piece = vec![7u8; 64 << 10];
    for i in 0..8 {
        let (a, fh) = t.create(ROOT_INO, &format!("s{i}.swp")).unwrap();
        for k in 0..16 {
            t.write(a.ino, fh, (k * piece.len()) as u64, &piece)
                .unwrap();
        }
        assert_eq!(t.getattr(a.ino).unwrap().size, 1 << 20);
        t.set_size(a.ino, 0).unwrap();
        t.release(fh).unwrap();
        assert!(held(&t) <= cap, "file {i}: {} bytes held", held(&t));
    }
    assert_eq!(held(&t), 0);
    let (g, fh) = t.create(ROOT_INO, "grow").unwrap();
    let mut written = 0usize;
    loop {
        match t.write(g.ino, fh, written as u64, &piece) {
            Ok(n) => written += n as usize,
            Err(e) => {
                assert_eq!(e.errno(), libc::ENOSPC, "{e}");
                break;
            }
        }
        assert!(held(&t) <= cap, "at {written}: {} bytes held", held(&t));
    }
    assert!(written > cap / 2, "{written}");
    assert_eq!(t.scratch_data(g.ino), vec![7u8; written]);
}
