//! Commits that fail before their commit point leave the source as it was, and never write,
//! rename or remove a temp file or chunk file another writer made (sparse frames, bcolz).

use super::*;

/// A commit that fails before its commit point leaves the source byte-identical: the sparse
/// frame's new chunk files go when its new index cannot be written, and a shrinking bcolz
/// carray's staged chunk files go when its `meta/sizes` cannot be replaced (each temp file's
/// creation failed by a directory made at its name just before, as a full disk fails it).
#[test]
fn writer_a_commit_failing_before_its_commit_point_leaves_the_source_as_it_was() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Sparse frame: an update makes a new chunk file, then the index's temp file fails.
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    let a = open_array(&path);
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![updated_chunk(&a, 1, &pattern(4000, 5))],
        ..Edit::default()
    };
    let (hook, blockers) = block_temp_files();
    let e = b2fs::container::write::commit_racing(&a, &edit, hook)
        .expect_err("the index cannot be written");
    assert!(e.to_string().contains("b2fs-tmp"), "{e}");
    remove_blockers(&blockers);
    assert_eq!(
        tree_hash(&path),
        before,
        "sparse frame: the new chunk file stays"
    );
    commit(&a, &edit).expect("the same commit once the disk allows it");
    assert_eq!(chunks_of(&open_array(&path))[1], pattern(4000, 5));

    // bcolz, shrinking: the chunks are staged, then `meta/sizes` (the commit point) fails.
    let path = fixture_copy(&tmp, "bcolz/carray_appended");
    let a = open_array(&path);
    let n = a.nchunks();
    assert!(n >= 3, "{n} chunks");
    let nbytes = a.chunk_nbytes(n - 2).expect("nbytes");
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![updated_chunk(&a, n - 2, &pattern(nbytes, 7))],
        truncate: Some(n - 1),
        ..Edit::default()
    };
    let (hook, blockers) = block_temp_files();
    b2fs::container::write::commit_racing(&a, &edit, hook)
        .expect_err("meta/sizes cannot be replaced");
    assert!(
        blockers
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.to_string_lossy().ends_with("sizes.b2fs-tmp")),
        "{blockers:?}"
    );
    remove_blockers(&blockers);
    assert_eq!(tree_hash(&path), before, "bcolz: a staged chunk file stays");
}

type Blockers = std::sync::Arc<std::sync::Mutex<Vec<PathBuf>>>;

/// A hook for `commit_racing` that makes a directory at the name of every whole-file
/// rewrite's temp file (`*.b2fs-tmp` but a bcolz chunk's `__N.blp.b2fs-tmp`) just before the
/// commit creates it, and the directories made.
fn block_temp_files() -> (b2fs::container::write::BeforeCreate, Blockers) {
    let made: Blockers = Default::default();
    let record = made.clone();
    let hook = Box::new(move |p: &Path| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".b2fs-tmp") && !name.contains(".blp") {
            std::fs::create_dir(p).expect("mkdir");
            record.lock().unwrap().push(p.to_path_buf());
        }
    });
    (hook, made)
}

fn remove_blockers(made: &Blockers) {
    for p in made.lock().unwrap().drain(..) {
        std::fs::remove_dir(&p).expect("rmdir");
    }
}

/// A carray's commit never writes or removes a temp file another writer made: one at
/// `data/__N.blp.b2fs-tmp` (the name b2fs used before session 26) of a chunk the commit
/// replaces stays, with their bytes, through a commit that fails after staging its chunks
/// (its `meta/sizes` cannot be replaced) and through a successful one.
#[test]
fn writer_a_bcolz_commit_leaves_another_writers_temp_files_alone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "bcolz/carray_appended");
    let a = open_array(&path);
    let n = a.nchunks();
    let nbytes = a.chunk_nbytes(n - 2).expect("nbytes");
    let theirs = path.join(format!("data/__{}.blp.b2fs-tmp", n - 2));
    std::fs::write(&theirs, b"their chunk").expect("their file");
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![updated_chunk(&a, n - 2, &pattern(nbytes, 11))],
        truncate: Some(n - 1),
        ..Edit::default()
    };
    let (hook, blockers) = block_temp_files();
    b2fs::container::write::commit_racing(&a, &edit, hook)
        .expect_err("meta/sizes cannot be replaced");
    remove_blockers(&blockers);
    assert_eq!(
        std::fs::read(&theirs).expect("theirs stays"),
        b"their chunk"
    );
    assert_eq!(tree_hash(&path), before, "the staged chunk file is gone");
    commit(&a, &edit).expect("the same commit once alone");
    assert_eq!(chunks_of(&open_array(&path))[n - 2], pattern(nbytes, 11));
    assert_eq!(
        std::fs::read(&theirs).expect("theirs stays"),
        b"their chunk"
    );
}

/// A sparse frame's commit never writes, renames or removes a temp file another writer
/// made: a `chunks.b2frame.b2fs-tmp` of theirs (the name b2fs used before session 26) stays
/// through a failed commit and a successful one, and a file they made at the name of the
/// commit's own temp file fails the commit (`ContainerError::Io` with EEXIST, EIO at the
/// mount) and stays with their bytes; the source is as it was.
#[test]
fn writer_a_sparse_commit_leaves_another_writers_temp_files_alone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    let theirs = path.join("chunks.b2frame.b2fs-tmp");
    std::fs::write(&theirs, b"another writer's index").expect("their file");
    let a = open_array(&path);
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![updated_chunk(&a, 1, &pattern(4000, 9))],
        ..Edit::default()
    };
    // They make a file at the name of the commit's own temp file just before it does.
    let taken: Blockers = Default::default();
    let record = taken.clone();
    let hook = Box::new(move |p: &Path| {
        if p.to_string_lossy().ends_with(".b2fs-tmp") {
            // Old b2fs: the shared name, theirs already (left as it is).
            if !p.exists() {
                std::fs::write(p, b"theirs too").expect("their temp file");
                record.lock().unwrap().push(p.to_path_buf());
            }
        }
    });
    let e = b2fs::container::write::commit_racing(&a, &edit, hook).expect_err("a taken name");
    let b2fs::container::ContainerError::Io { source, .. } = &e else {
        panic!("an I/O error: {e}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
    assert_eq!(
        std::fs::read(&theirs).expect("theirs stays"),
        b"another writer's index"
    );
    let taken = taken.lock().unwrap().clone();
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!(std::fs::read(&taken[0]).expect("stays"), b"theirs too");
    std::fs::remove_file(&taken[0]).expect("rm");
    assert_eq!(tree_hash(&path), before, "the commit's chunk file is gone");
    commit(&a, &edit).expect("the same commit once alone");
    assert_eq!(chunks_of(&open_array(&path))[1], pattern(4000, 9));
    assert_eq!(
        std::fs::read(&theirs).expect("theirs stays"),
        b"another writer's index"
    );
}

/// A sparse frame's commit removes, when it fails before its commit point, only the chunk
/// files it made: a file another writer made meanwhile at a name it planned is theirs (the
/// commit fails as for another writer's change, ESTALE) and stays, with their bytes.
#[test]
fn writer_a_failed_sparse_commit_removes_only_the_chunk_files_it_made() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    let a = open_array(&path);
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![
            updated_chunk(&a, 0, &pattern(a.chunk_nbytes(0).expect("nbytes"), 3)),
            updated_chunk(&a, 1, &pattern(a.chunk_nbytes(1).expect("nbytes"), 5)),
        ],
        ..Edit::default()
    };
    // Another writer's temp file too (at the name b2fs used before session 26): left alone.
    let blocker = path.join("chunks.b2frame.b2fs-tmp");
    std::fs::write(&blocker, b"their index").expect("their temp file");
    let mut planned = Vec::new();
    let theirs: std::sync::Arc<std::sync::Mutex<Option<PathBuf>>> = Default::default();
    let placed = theirs.clone();
    let hook = Box::new(move |p: &Path| {
        planned.push(p.to_path_buf());
        if planned.len() == 2 {
            std::fs::write(p, b"another writer's chunk").expect("their file");
            *placed.lock().expect("lock") = Some(p.to_path_buf());
        }
    });
    let e = b2fs::container::write::commit_racing(&a, &edit, hook).expect_err("a conflict");
    let theirs = theirs.lock().expect("lock").clone().expect("placed");
    assert_eq!(
        std::fs::read(&theirs).expect("their file stays"),
        b"another writer's chunk"
    );
    assert!(
        matches!(e, b2fs::container::ContainerError::Changed { .. }),
        "another writer's change: {e}"
    );
    std::fs::remove_file(&theirs).expect("rm");
    assert_eq!(
        std::fs::read(&blocker).expect("their temp file stays"),
        b"their index"
    );
    std::fs::remove_file(&blocker).expect("rm");
    assert_eq!(
        tree_hash(&path),
        before,
        "the commit's own chunk file is gone"
    );
    commit(&a, &edit).expect("the same commit once alone");
    let now = chunks_of(&open_array(&path));
    assert_eq!(now[0], pattern(now[0].len(), 3));
    assert_eq!(now[1], pattern(now[1].len(), 5));
}

/// An update of chunk `index` of `a` to `data`, compressed as `a`'s chunks are.
fn updated_chunk(a: &Array, index: usize, data: &[u8]) -> (usize, b2fs::container::write::Chunk) {
    (index, b2fs::container::write::Chunk::from(encode(a, data)))
}
