//! A commit holds a bounded amount of compressed chunks in memory (src/container/write/spool.rs,
//! `Committer::with_edit_budget`): a python-blosc2 contiguous frame, a sparse frame and a
//! bcolz carray of 24 chunks, rewritten whole with incompressible values through `array.npy`
//! of a tree whose `edit_budget` is four chunks, are committed in one fsync whose compressed
//! chunks are five times that bound; the most a commit held in memory (`commit_peak_bytes`)
//! stays within it, the rest went through the spool file, and python-blosc2 / bcolz read every
//! value back. A spool file that cannot be read back (or written) fails the commit with EIO,
//! leaves every file of the source byte-identical and keeps the edits, which a retry commits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use b2fs::tree::{ROOT_INO, Tree, TreeOptions};

use crate::support::{self, no_prefetch, tree_ino as ino, tree_read};

/// Items (int32) per chunk and chunks of each source (scripts/oracle/commit_spool.py).
const ITEMS: usize = 4000;
const CHUNKS: usize = 24;
/// Decoded bytes of one chunk.
const CHUNK: usize = ITEMS * 4;
/// The trees' `edit_budget`: four chunks, so a commit keeps at most that much compressed.
const BUDGET: usize = 4 * CHUNK;

/// The three sources, as (file name, oracle kind).
const SOURCES: [(&str, &str); 3] = [("c.b2nd", "b2nd"), ("s.b2nd", "b2nd"), ("carr", "bcolz")];

fn make_sources(py: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    support::oracle(
        py,
        &[&"scripts/oracle/commit_spool.py", &"gen", &dir.path()],
    );
    dir
}

/// A read-write tree of `src` with the test's budget, spilling (edits and commits) to `spill`.
fn tree(src: &Path, spill: &Path) -> Tree {
    let t = Tree::from_source(
        src,
        TreeOptions {
            edit_budget: BUDGET,
            ..no_prefetch(true)
        },
    )
    .unwrap();
    t.set_spill_dir(spill.to_path_buf());
    t
}

/// `n` int32 that do not compress (xorshift).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n * 4);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&(x as u32).to_le_bytes());
    }
    out
}

/// Every file under `path` (or the file itself) with its bytes.
fn files(path: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    if path.is_file() {
        out.insert(path.to_path_buf(), std::fs::read(path).unwrap());
        return out;
    }
    for e in std::fs::read_dir(path).unwrap() {
        out.extend(files(&e.unwrap().path()));
    }
    out
}

fn root_xattr(t: &Tree, key: &str) -> u64 {
    let v = t.getxattr(ROOT_INO, &format!("user.b2fs.{key}")).unwrap();
    String::from_utf8(v.unwrap()).unwrap().parse().unwrap()
}

/// Writes `data` over the items of `array.npy` through `fh` (64 KiB writes).
fn write_items(t: &Tree, npy: u64, fh: u64, hlen: usize, data: &[u8]) {
    for (k, piece) in data.chunks(64 << 10).enumerate() {
        let at = hlen + k * (64 << 10);
        assert_eq!(
            t.write(npy, fh, at as u64, piece).unwrap(),
            piece.len() as u32
        );
    }
}

/// What the oracle says of `src` against the items `want`.
fn oracle_reads(py: &Path, dir: &Path, kind: &str, src: &Path, want: &[u8]) -> String {
    let raw = dir.join("want.raw");
    std::fs::write(&raw, want).unwrap();
    support::oracle_says(
        py,
        &[
            &"scripts/oracle/commit_spool.py",
            &"check",
            &kind,
            &src,
            &raw,
        ],
    )
}

/// `array.npy` of a tree over `src` (spilling to `spill`) with its items overwritten by noise
/// of `seed` through a handle left open: what each test edits before it commits.
struct Edited {
    t: Tree,
    npy: u64,
    fh: u64,
    /// The file before the writes.
    before: Vec<u8>,
    /// The length of its NPY header.
    hlen: usize,
    /// The items written.
    want: Vec<u8>,
}

fn edited(src: &Path, spill: &Path, seed: u64) -> Edited {
    let t = tree(src, spill);
    let npy = ino(&t, "array.npy");
    let before = tree_read(&t, npy, 1 << 20).unwrap();
    let hlen = before.len() - CHUNKS * CHUNK;
    let want = noise(CHUNKS * ITEMS, seed);
    let fh = t.open(npy, libc::O_RDWR).unwrap();
    write_items(&t, npy, fh, hlen, &want);
    Edited {
        t,
        npy,
        fh,
        before,
        hlen,
        want,
    }
}

#[test]
fn a_commit_several_times_its_memory_bound_holds_within_it_and_the_references_read_it() {
    let py = or_skip!(support::python(
        "a_commit_several_times_its_memory_bound_holds_within_it_and_the_references_read_it"
    ));
    let dir = make_sources(&py);
    for (k, (name, kind)) in SOURCES.iter().enumerate() {
        let src = dir.path().join(name);
        let spill = tempfile::tempdir().unwrap();
        let Edited {
            t,
            npy,
            fh,
            hlen,
            want,
            ..
        } = edited(&src, spill.path(), 7 + k as u64);
        assert_eq!(
            t.commit_stats().spilled_chunks,
            0,
            "{name}: nothing committed yet"
        );
        t.fsync(npy, fh).unwrap();
        t.release(fh).unwrap();
        let s = t.commit_stats();
        eprintln!("{name}: {s:?}");
        assert_eq!(s.memory, BUDGET, "{name}");
        // Incompressible chunks are a little over CHUNK each: three fit in the bound.
        assert!(s.peak_bytes > 0 && s.peak_bytes <= BUDGET, "{name}: {s:?}");
        assert!(
            s.spilled_bytes >= 4 * BUDGET as u64 && s.spilled_chunks >= 20,
            "{name}: the commit is several times its bound: {s:?}"
        );
        assert_eq!(root_xattr(&t, "commit_peak_bytes"), s.peak_bytes as u64);
        assert_eq!(root_xattr(&t, "commit_memory"), BUDGET as u64);
        assert_eq!(root_xattr(&t, "commit_spilled_bytes"), s.spilled_bytes);
        drop(t);
        let fresh = Tree::from_source(&src, no_prefetch(false)).unwrap();
        let got = tree_read(&fresh, ino(&fresh, "array.npy"), 1 << 20).unwrap();
        assert!(got[hlen..] == want[..], "{name}: b2fs reads the commit");
        assert_eq!(
            oracle_reads(&py, dir.path(), kind, &src, &want),
            "same",
            "{name}: the reference library reads the commit"
        );
    }
}

#[test]
fn a_spool_that_fails_fails_the_commit_leaves_the_source_and_keeps_the_edits() {
    let py = or_skip!(support::python(
        "a_spool_that_fails_fails_the_commit_leaves_the_source_and_keeps_the_edits"
    ));
    let dir = make_sources(&py);
    for (k, (name, kind)) in SOURCES.iter().enumerate() {
        let src = dir.path().join(name);
        let spill = tempfile::tempdir().unwrap();
        let stored = files(&src);
        let Edited {
            t,
            npy,
            fh,
            before,
            hlen,
            want,
        } = edited(&src, spill.path(), 70 + k as u64);
        // Read back failing (a failing disk), then writing to it (a full one): EIO, and
        // every file of the source as it was (nothing left past a frame's end, no chunk
        // file or temp file made).
        for (write, read) in [(0, libc::EIO), (libc::ENOSPC, 0)] {
            t.fail_commit_spool(write, read);
            let e = t.fsync(npy, fh).unwrap_err();
            assert_eq!(e.errno(), libc::EIO, "{name} ({write}, {read}): {e}");
            assert!(
                files(&src) == stored,
                "{name} ({write}, {read}): source changed"
            );
            assert_eq!(tree_read(&t, npy, 1 << 20).unwrap(), before, "{name}");
        }
        // The edits are kept: the writer still reads them, and a retry commits them.
        let mut mine = Vec::new();
        while mine.len() < before.len() {
            let got = t.read(npy, fh, mine.len() as u64, 1 << 20).unwrap();
            assert!(!got.is_empty());
            mine.extend_from_slice(&got);
        }
        assert!(mine[hlen..] == want[..], "{name}: the edits are kept");
        t.fail_commit_spool(0, 0);
        t.fsync(npy, fh).unwrap();
        t.release(fh).unwrap();
        assert!(t.commit_stats().spilled_chunks >= 20, "{name}");
        drop(t);
        assert_eq!(
            oracle_reads(&py, dir.path(), kind, &src, &want),
            "same",
            "{name}: the retry is read by the reference library"
        );
    }
}

/// A contiguous frame's commit that fails before its commit point is undone, but its file
/// cannot be given back its modification time (a file of another owner, which a read-write
/// mount may write but whose times only its owner sets): the mount takes the state its own
/// undoing left as its own, so the edits are kept and a retry commits them (not ESTALE, as
/// if another writer had changed the file), and python-blosc2 reads the retry.
#[test]
fn an_undone_commit_whose_mtime_cannot_be_reset_keeps_the_edits() {
    let py = or_skip!(support::python(
        "an_undone_commit_whose_mtime_cannot_be_reset_keeps_the_edits"
    ));
    let dir = make_sources(&py);
    let src = dir.path().join("c.b2nd");
    let spill = tempfile::tempdir().unwrap();
    let t = tree(&src, spill.path());
    let npy = ino(&t, "array.npy");
    let before = tree_read(&t, npy, 1 << 20).unwrap();
    let hlen = before.len() - CHUNKS * CHUNK;
    let stored = std::fs::read(&src).unwrap();
    let mtime = std::fs::metadata(&src).unwrap().modified().unwrap();
    let want = noise(CHUNKS * ITEMS, 90);
    let fh = t.open(npy, libc::O_RDWR).unwrap();
    write_items(&t, npy, fh, hlen, &want);
    // The spool cannot be read back: the commit fails after writing past the frame's end,
    // and the undoing cannot set the time back.
    t.fail_commit_spool(0, libc::EIO);
    t.fail_time_reset(libc::EPERM);
    let e = t.fsync(npy, fh).unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert!(
        std::fs::read(&src).unwrap() == stored,
        "the bytes are undone"
    );
    assert_ne!(
        std::fs::metadata(&src).unwrap().modified().unwrap(),
        mtime,
        "the test's premise: the time was not given back"
    );
    t.fail_commit_spool(0, 0);
    t.fail_time_reset(0);
    let mut mine = Vec::new();
    while mine.len() < before.len() {
        let got = t.read(npy, fh, mine.len() as u64, 1 << 20).unwrap();
        assert!(!got.is_empty());
        mine.extend_from_slice(&got);
    }
    assert!(mine[hlen..] == want[..], "the edits are kept");
    t.fsync(npy, fh).expect("the retry commits the kept edits");
    t.release(fh).unwrap();
    drop(t);
    assert_eq!(
        oracle_reads(&py, dir.path(), "b2nd", &src, &want),
        "same",
        "the retry is read by python-blosc2"
    );
}

/// A plain frame of python-blosc2's with three zero chunks stored as special offsets (the
/// last one partial) turns variable-size when a chunk is appended after it: the commit
/// re-encodes the three as regular chunks, and keeps them in its spool like the appended
/// one, so under a one-byte bound all four go through the spool file (`commit_*` on the
/// root), none held in memory; python-blosc2 reads every chunk back.
#[test]
fn special_chunks_re_encoded_for_a_variable_size_frame_go_through_the_spool() {
    let py = or_skip!(support::python(
        "special_chunks_re_encoded_for_a_variable_size_frame_go_through_the_spool"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("fill.b2frame");
    std::fs::copy(
        support::data_dir().join("frames/schunk_fill_special.b2frame"),
        &src,
    )
    .unwrap();
    let spill = tempfile::tempdir().unwrap();
    let t = Tree::from_source(
        &src,
        TreeOptions {
            edit_budget: 1,
            ..no_prefetch(true)
        },
    )
    .unwrap();
    t.set_spill_dir(spill.path().to_path_buf());
    let data = ino(&t, "data");
    let appended = noise(2000, 5);
    let (attr, fh) = t.create(data, "00000003.bin").unwrap();
    assert_eq!(t.write(attr.ino, fh, 0, &appended).unwrap(), 8000);
    t.fsync(attr.ino, fh).unwrap();
    t.release(fh).unwrap();
    let s = t.commit_stats();
    assert_eq!(
        (s.spilled_chunks, s.peak_bytes),
        (4, 0),
        "the appended chunk and the three re-encoded ones spilled: {s:?}"
    );
    assert_eq!(root_xattr(&t, "commit_spilled_chunks"), 4);
    assert_eq!(root_xattr(&t, "commit_peak_bytes"), 0);
    drop(t);
    let raw = dir.path().join("appended.raw");
    std::fs::write(&raw, &appended).unwrap();
    let check = r#"
import sys, numpy as np, blosc2
s = blosc2.open(sys.argv[1], mode="r")
want = [bytes(8000), bytes(8000), bytes(4000), open(sys.argv[2], "rb").read()]
got = [bytes(s.decompress_chunk(i)) for i in range(s.nchunks)]
print("same" if got == want else f"differ: {[len(g) for g in got]}")
"#;
    assert_eq!(
        support::python_says(
            &py,
            &["-c", check, &src.to_string_lossy(), &raw.to_string_lossy()]
        ),
        "same",
        "python-blosc2 reads the variable-size frame"
    );
}
