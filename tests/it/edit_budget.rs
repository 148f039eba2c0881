//! Pending edits past the mount's `edit_budget` (src/tree/edit/pending.rs): a python-blosc2
//! array edited in every chunk through `array.npy` by a tree whose budget is two chunks keeps
//! at most two chunks in memory (the others in the spill file), reads every edit back before
//! the commit (through `array.npy` and the chunk files), and commits what python-blosc2 then
//! reads exactly; a spill that fails (injected ENOSPC, a spill directory that does not exist)
//! refuses the write that needed the room, keeps every earlier edit and leaves the source
//! byte-identical until a commit.

use std::path::Path;

use b2fs::tree::{ROOT_INO, Tree};

use crate::support::gen2d::{CHUNK, COLS, ROWS, budget_tree, gen2d};
use crate::support::{self, no_prefetch, tree_ino as ino, tree_read};

/// The first `len` bytes of `ino` read through handle `fh` (a writer's: it sees the edits).
fn read_fh(t: &Tree, ino: u64, fh: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < len {
        let got = t.read(ino, fh, out.len() as u64, 64 << 10).unwrap();
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    out
}

fn root_xattr(t: &Tree, key: &str) -> u64 {
    let v = t.getxattr(ROOT_INO, &format!("user.b2fs.{key}")).unwrap();
    String::from_utf8(v.unwrap()).unwrap().parse().unwrap()
}

/// Whether python-blosc2 reads from `src` exactly the array whose `array.npy` is `want`.
fn python_reads(py: &Path, dir: &Path, src: &Path, want: &[u8]) -> String {
    let expect = dir.join("expect.npy");
    std::fs::write(&expect, want).unwrap();
    support::oracle_says(
        py,
        &[&"scripts/oracle/npy_check.py", &"same", &src, &expect],
    )
}

#[test]
fn edits_of_every_chunk_stay_within_the_budget_read_back_and_commit() {
    let py = or_skip!(support::python(
        "edits_of_every_chunk_stay_within_the_budget_read_back_and_commit"
    ));
    let (dir, src) = gen2d(&py);
    let spill = tempfile::tempdir().unwrap();
    let budget = 2 * CHUNK;
    let t = budget_tree(&src, budget, spill.path());
    let npy = ino(&t, "array.npy");
    let before = tree_read(&t, npy, 1 << 20).unwrap();
    let hlen = before.len() - ROWS * COLS * 8;
    // Every value replaced, in page-sized writes as a memmap's write-back makes them: each
    // touches the chunks of up to four chunk columns, so spilled chunks are patched too.
    let mut want = before.clone();
    for (i, v) in want[hlen..].chunks_exact_mut(8).enumerate() {
        v.copy_from_slice(&(-(i as f64) - 0.25).to_le_bytes());
    }
    let fh = t.open(npy, libc::O_RDWR).unwrap();
    let mut at = hlen;
    while at < want.len() {
        let end = (at + 4096).min(want.len());
        assert_eq!(
            t.write(npy, fh, at as u64, &want[at..end]).unwrap() as usize,
            end - at
        );
        let s = t.edit_stats();
        assert!(s.memory <= budget, "after byte {at}: {s:?}");
        at = end;
    }
    let s = t.edit_stats();
    assert_eq!(s.budget, budget);
    assert!(s.peak_memory <= budget, "{s:?}");
    assert_eq!(s.spilled_chunks, 16 - 2, "{s:?}");
    assert!(s.spilled_bytes >= (14 * CHUNK) as u64, "{s:?}");
    assert!(s.spills >= 14, "{s:?}");
    assert_eq!(root_xattr(&t, "edit_bytes"), s.memory as u64);
    assert_eq!(root_xattr(&t, "edit_spilled_chunks"), 14);
    assert_eq!(root_xattr(&t, "edit_budget"), budget as u64);
    // Before the commit: the writer's array.npy shows every edit; a read-only descriptor
    // the stored array; the chunk files (spilled or not) the edited chunks.
    assert_eq!(read_fh(&t, npy, fh, want.len()), want);
    assert_eq!(tree_read(&t, npy, 1 << 20).unwrap(), before);
    let mut pending_chunks = Vec::new();
    for i in 0..16 {
        let c = ino(&t, &format!("data/{i:08}.bin"));
        let cfh = t.open(c, libc::O_RDWR).unwrap();
        pending_chunks.push(read_fh(&t, c, cfh, CHUNK));
        t.release(cfh).unwrap();
    }
    // Chunk 0's first item is item 0 of the array.
    assert_eq!(pending_chunks[0][..8], (-0.25f64).to_le_bytes());
    // One fsync commits all sixteen, spilled ones read back one at a time.
    t.fsync(npy, fh).unwrap();
    t.release(fh).unwrap();
    let s = t.edit_stats();
    assert_eq!(
        (s.memory, s.spilled_chunks, s.spilled_bytes),
        (0, 0, 0),
        "{s:?}"
    );
    let fresh = Tree::from_source(&src, no_prefetch(false)).unwrap();
    assert_eq!(
        tree_read(&fresh, ino(&fresh, "array.npy"), 1 << 20).unwrap(),
        want
    );
    for (i, chunk) in pending_chunks.iter().enumerate() {
        let c = ino(&fresh, &format!("data/{i:08}.bin"));
        assert_eq!(&tree_read(&fresh, c, 1 << 20).unwrap(), chunk, "chunk {i}");
    }
    assert_eq!(
        python_reads(&py, dir.path(), &src, &want),
        "same",
        "python-blosc2 reads the edited array"
    );
}

#[test]
fn a_spill_that_fails_refuses_the_write_and_keeps_the_earlier_edits() {
    let py = or_skip!(support::python(
        "a_spill_that_fails_refuses_the_write_and_keeps_the_earlier_edits"
    ));
    let (dir, src) = gen2d(&py);
    let stored = std::fs::read(&src).unwrap();
    let spill = tempfile::tempdir().unwrap();
    let t = budget_tree(&src, CHUNK, spill.path());
    let npy = ino(&t, "array.npy");
    let before = tree_read(&t, npy, 1 << 20).unwrap();
    let hlen = before.len() - ROWS * COLS * 8;
    let item = |row: usize, col: usize| hlen + (row * COLS + col) * 8;
    let mut want = before.clone();
    let fh = t.open(npy, libc::O_RDWR).unwrap();
    let put = |t: &Tree, want: &mut Vec<u8>, row, col, v: f64| {
        let at = item(row, col);
        let res = t.write(npy, fh, at as u64, &v.to_le_bytes());
        if res.is_ok() {
            want[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        res
    };
    // Chunk 0 fits the budget; chunk 1 (row 0, column 50) spills it.
    put(&t, &mut want, 0, 0, 1.5).unwrap();
    put(&t, &mut want, 0, 50, 2.5).unwrap();
    assert_eq!(t.edit_stats().spilled_chunks, 1);
    // The file system is full: chunk 2 needs chunk 1 spilled, and that fails.
    t.fail_spills(Some(libc::ENOSPC));
    let e = put(&t, &mut want, 0, 100, 3.5).unwrap_err();
    assert_eq!(e.errno(), libc::ENOSPC, "{e}");
    assert!(e.to_string().contains("edit_budget"), "{e}");
    // A write into the spilled chunk 0 fails too (it is patched in the file).
    let e = put(&t, &mut want, 1, 0, 4.5).unwrap_err();
    assert_eq!(e.errno(), libc::ENOSPC, "{e}");
    // Chunk 1 is in memory: writing it needs no room.
    put(&t, &mut want, 1, 51, 5.5).unwrap();
    // A spill directory that does not exist: EIO, as any other failure of the file.
    t.fail_spills(None);
    let gone = budget_tree(&src, CHUNK, &spill.path().join("missing"));
    let gnpy = ino(&gone, "array.npy");
    let gfh = gone.open(gnpy, libc::O_RDWR).unwrap();
    gone.write(gnpy, gfh, item(0, 0) as u64, &[0; 8]).unwrap();
    let e = gone
        .write(gnpy, gfh, item(0, 50) as u64, &[0; 8])
        .unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert!(
        e.to_string().contains("missing"),
        "names the directory: {e}"
    );
    drop(gone);
    // Nothing reached the source; every accepted edit reads back.
    assert!(std::fs::read(&src).unwrap() == stored, "the source changed");
    assert_eq!(read_fh(&t, npy, fh, want.len()), want);
    // Once there is room again, the refused write can be retried and everything commits.
    put(&t, &mut want, 0, 100, 3.5).unwrap();
    t.fsync(npy, fh).unwrap();
    t.release(fh).unwrap();
    let fresh = Tree::from_source(&src, no_prefetch(false)).unwrap();
    assert_eq!(
        tree_read(&fresh, ino(&fresh, "array.npy"), 1 << 20).unwrap(),
        want
    );
    assert_eq!(python_reads(&py, dir.path(), &src, &want), "same");
}

/// The case of the bound, through a real mount: `numpy.load(mmap_mode='r+')` replacing every
/// item of `array.npy`, then `flush`, on a mount whose `edit_budget` is two chunks.
#[test]
fn a_mapped_rewrite_of_a_whole_array_stays_within_the_mounts_edit_budget() {
    let py = or_skip!(support::fuse_and_python(
        "a_mapped_rewrite_of_a_whole_array_stays_within_the_mounts_edit_budget"
    ));
    let (dir, src) = gen2d(&py);
    let spill = tempfile::tempdir().unwrap();
    let budget = 2 * CHUNK;
    let opts = format!("edit_budget={budget},spill_dir={}", spill.path().display());
    let m = support::Mount::daemon(&src, &[&opts]);
    let expect = dir.path().join("expect.npy");
    let says = support::oracle_says(
        &py,
        &[&"scripts/oracle/npy_check.py", &"mmapall", &m.mp, &expect],
    );
    let words: Vec<&str> = says.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"ok"), "{says}");
    let (peak, spills): (usize, u64) = (words[1].parse().unwrap(), words[2].parse().unwrap());
    assert!(peak <= budget, "peak {peak} of budget {budget}");
    assert!(
        spills >= 14,
        "{spills} spills: every chunk but two went to the file"
    );
    m.umount();
    assert_eq!(
        std::fs::read_dir(spill.path()).unwrap().count(),
        0,
        "the spill file has no name"
    );
    let says = support::oracle_says(
        &py,
        &[&"scripts/oracle/npy_check.py", &"same", &src, &expect],
    );
    assert_eq!(says, "same", "python-blosc2 reads the rewritten array");
}
