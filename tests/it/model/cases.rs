//! Fixed cases through the same tree and sources as the model test: the fork rule without a
//! kernel, and sequences the random model found (a stale commit's reload, a sparse frame's
//! version outliving the mount's own commit).

use super::*;

/// A fresh copy of `seed`'s source in a new temporary directory (kept for the case's length),
/// mounted: the directory, the source, its tree and the modelled files' inodes.
fn mounted(seed: Seed) -> (tempfile::TempDir, PathBuf, Tree, Files) {
    let dir = tempfile::tempdir().unwrap();
    let src = make_source(seed, dir.path());
    let t = mount(&src);
    let files = Files::of(&t);
    (dir, src, t, files)
}

/// The fork rule without a kernel: a close by a process other than the opener commits
/// nothing of the half-written chunk; the opener's close commits the whole; fsync from any
/// process commits; the last close commits what the opener never closed.
#[test]
fn model_close_by_another_process_commits_nothing() {
    let (_dir, src, t, files) = mounted(Seed::PyB2nd);
    let (old, _) = stored(&src);
    let ino = files.chunks[1];
    let len = old[1].len();
    let new = content(1, len, 9);
    let (parent, child) = (pid(0), pid(1));
    let fh = t.open_by(ino, libc::O_RDWR, parent).unwrap();
    t.write(ino, fh, 0, &new[..len / 2]).unwrap();
    t.flush_by(ino, fh, child).unwrap();
    assert_eq!(
        stored(&src).0[1],
        old[1],
        "a child's close committed half a chunk"
    );
    t.write(ino, fh, (len / 2) as u64, &new[len / 2..]).unwrap();
    t.flush_by(ino, fh, parent).unwrap();
    assert_eq!(stored(&src).0[1], new);
    // fsync commits whoever asks; the release commits what no opener's close did.
    let newer = content(1, len, 10);
    t.write(ino, fh, 0, &newer[..8]).unwrap();
    t.fsync(ino, fh).unwrap();
    assert_eq!(&stored(&src).0[1][..8], &newer[..8]);
    t.write(ino, fh, 0, &newer).unwrap();
    t.flush_by(ino, fh, child).unwrap();
    assert_eq!(&stored(&src).0[1][8..], &new[8..]);
    t.release(fh).unwrap();
    assert_eq!(stored(&src).0[1], newer);
    // A refused edit: the child's close says nothing, the opener's close says EINVAL and
    // drops it.
    let fh = t
        .open_by(ino, libc::O_WRONLY | libc::O_TRUNC, parent)
        .unwrap();
    t.write(ino, fh, 0, &new[..len / 2]).unwrap();
    t.flush_by(ino, fh, child).unwrap();
    assert_eq!(
        t.flush_by(ino, fh, parent).unwrap_err().errno(),
        libc::EINVAL
    );
    t.release(fh).unwrap();
    assert_eq!(stored(&src).0[1], newer);
}

/// Found by the 5,000-case model run: a commit that fails with ESTALE because its edit was
/// marked stale at an earlier reload must not reload again when nothing changed on disk since:
/// that reload marked an edit made after the first reload, from the current version, stale,
/// and its commit failed with ESTALE though no other writer had touched the source since.
/// The same through `__attrs__`.
#[test]
fn model_stale_commit_reloads_only_after_a_change() {
    let (_dir, src, t, files) = mounted(Seed::PyB2nd);
    let (c0, c1) = (files.chunks[0], files.chunks[1]);
    let len = stored(&src).0[0].len();
    let by = pid(0);
    let w0 = t.open_by(c0, libc::O_RDWR, by).unwrap();
    t.write(c0, w0, 0, &[7]).unwrap();
    // Another writer replaces chunk 0.
    let foreign = content(0, len, 3);
    foreign_commit(&src, &[(0, foreign.clone())], None);
    let w1 = t.open_by(c1, libc::O_WRONLY | libc::O_TRUNC, by).unwrap();
    t.write(c1, w1, 0, &content(2, len, 4)[..1]).unwrap();
    // Both edits were made against the replaced version: ESTALE (the first reloads).
    assert_eq!(t.fsync(c0, w0).unwrap_err().errno(), libc::ESTALE);
    let mine = content(0, len, 5);
    t.write(c0, w0, 0, &mine).unwrap();
    assert_eq!(t.fsync(c1, w1).unwrap_err().errno(), libc::ESTALE);
    // Made from what is stored now: committed.
    t.fsync(c0, w0).unwrap();
    assert!(stored(&src).0[0] == mine, "chunk 0 is not the mount's edit");

    // `__attrs__`: the ESTALE of an edit marked stale at an earlier reload does not make a
    // chunk edit made after that reload stale either.
    let a = t.open_by(files.attrs, libc::O_RDWR, by).unwrap();
    t.write(files.attrs, a, 0, b"{\"x\": 1}").unwrap();
    foreign_commit(&src, &[(0, foreign)], None);
    t.write(c1, w1, 0, &[9]).unwrap();
    assert_eq!(t.fsync(c1, w1).unwrap_err().errno(), libc::ESTALE);
    let mine = content(0, len, 6);
    t.write(c0, w0, 0, &mine).unwrap();
    assert_eq!(t.fsync(files.attrs, a).unwrap_err().errno(), libc::ESTALE);
    t.fsync(c0, w0).unwrap();
    assert!(stored(&src).0[0] == mine, "chunk 0 is not the mount's edit");
    for fh in [w0, w1, a] {
        t.release(fh).unwrap();
    }
}

/// Chunk files of sparse frame `dir`, sorted.
fn chunk_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".chunk"))
        .collect();
    v.sort();
    v
}

/// One version per open on a sparse frame (found by the model): a read-only descriptor opened
/// before the mount's own commit reads its version after it (the commit used to remove the
/// replaced chunk file at once: EIO). The replaced file goes when that descriptor is released;
/// with no such descriptor, right after the commit.
#[test]
fn model_sparse_version_outlives_own_commit() {
    let (_dir, src, t, files) = mounted(Seed::PySparse);
    let c1 = files.chunks[1];
    let (old, _) = stored(&src);
    let len = old[1].len();
    let before = chunk_files(&src);
    let by = pid(0);
    let ro = t.open_by(c1, libc::O_RDONLY, by).unwrap();
    assert_eq!(t.read(c1, ro, 0, 8).unwrap().to_vec(), old[1][..8]);
    let w = t.open_by(c1, libc::O_RDWR, by).unwrap();
    let new = content(1, len, 7);
    t.write(c1, w, 0, &new).unwrap();
    t.fsync(c1, w).unwrap();
    assert!(stored(&src).0[1] == new, "the commit is not stored");
    // The old version, whole, through the descriptor opened before.
    let all = t.read(c1, ro, 0, len as u32).unwrap().to_vec();
    assert!(
        all == old[1],
        "the descriptor opened before lost its version"
    );
    let during = chunk_files(&src);
    assert_eq!(during.len(), before.len() + 1, "{before:?} -> {during:?}");
    t.release(ro).unwrap();
    let after = chunk_files(&src);
    assert_eq!(after.len(), before.len(), "{during:?} -> {after:?}");
    // No descriptor pins the version: the replaced file goes at the commit.
    let newer = content(1, len, 8);
    t.write(c1, w, 0, &newer).unwrap();
    t.fsync(c1, w).unwrap();
    assert_eq!(chunk_files(&src).len(), before.len());
    t.release(w).unwrap();
    assert!(stored(&src).0[1] == newer);
}
