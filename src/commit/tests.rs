//! Commits without a kernel or a tree: real frames python-blosc2 wrote (tests/data), copied
//! to a temporary directory, edited through [`Committer::commit`], reopened from disk.

use std::path::{Path, PathBuf};

use super::*;
use crate::codec::decode::decompress;
use crate::container::{self, Container};

/// A fresh copy of fixture `name` (tests/data/frames) in a directory of its own.
fn copy(name: &str) -> (PathBuf, PathBuf) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("b2fs-commit-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/frames")
        .join(name);
    let to = dir.join(name);
    std::fs::copy(from, &to).unwrap();
    (dir, to)
}

fn live(path: &Path) -> LiveArray {
    match container::open(path).unwrap() {
        Container::Array(a) => LiveArray::new(a),
        Container::Table(_) => panic!("a table"),
    }
}

/// Chunk `i` of the source at `path` as it is on disk now, decoded.
fn chunk_on_disk(path: &Path, i: usize) -> Vec<u8> {
    let Container::Array(a) = container::open(path).unwrap() else {
        panic!("a table")
    };
    decompress(&a.chunk_bytes(i).unwrap()).unwrap()
}

#[test]
fn a_chunk_edit_reaches_the_file_and_the_live_array() {
    let (dir, path) = copy("b2nd_1d_f8.b2nd");
    let live = live(&path);
    let nchunks = live.get().nchunks();
    assert!(nchunks >= 2, "the fixture has {nchunks} chunks");
    let old = chunk_on_disk(&path, 1);
    let new: Vec<u8> = old.iter().map(|b| b.wrapping_add(1)).collect();
    let edit = [ChunkEdit {
        index: 1,
        data: &new,
        append: false,
    }];
    let mut c = Committer::new();
    let done = c.commit(Target::Array(&live), Edit::Chunks(&edit)).unwrap();
    assert_eq!(done, Committed::Reloaded);
    assert_eq!(chunk_on_disk(&path, 1), new);
    assert_ne!(chunk_on_disk(&path, 1), old);
    // The live array is the new version already, other chunks untouched.
    assert_eq!(
        decompress(&live.get().chunk_bytes(1).unwrap()).unwrap(),
        new
    );
    assert!(!live.changed_on_disk());
    assert_eq!(live.get().nchunks(), nchunks);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn attributes_are_stored_and_reloaded() {
    let (dir, path) = copy("b2nd_1d_f8.b2nd");
    let live = live(&path);
    let attrs = serde_json::json!({"unit": "m", "n": 3});
    let done = Committer::new()
        .commit(Target::Array(&live), Edit::Attrs(attrs.clone()))
        .unwrap();
    assert_eq!(done, Committed::Reloaded);
    assert_eq!(live.get().attrs(), &attrs);
    let Container::Array(again) = container::open(&path).unwrap() else {
        panic!("a table")
    };
    assert_eq!(again.attrs(), &attrs);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn refused_edits_leave_the_source_byte_identical() {
    let (dir, path) = copy("b2nd_1d_f8.b2nd");
    let before = std::fs::read(&path).unwrap();
    let live = live(&path);
    let mut c = Committer::new();
    // Emptying a chunk that is not the last.
    let empty = [ChunkEdit {
        index: 0,
        data: &[],
        append: false,
    }];
    let e = c
        .commit(Target::Array(&live), Edit::Chunks(&empty))
        .unwrap_err();
    assert!(matches!(e, ContainerError::Refused { .. }), "{e}");
    // Chunks of a target that holds only attributes.
    let one = [ChunkEdit {
        index: 0,
        data: &[1],
        append: false,
    }];
    let e = c
        .commit(Target::Table(&path), Edit::Chunks(&one))
        .unwrap_err();
    assert!(matches!(e, ContainerError::Refused { .. }), "{e}");
    // A created chunk file still empty: nothing to do.
    let creating = [ChunkEdit {
        index: live.get().nchunks(),
        data: &[],
        append: true,
    }];
    let done = c
        .commit(Target::Array(&live), Edit::Chunks(&creating))
        .unwrap();
    assert_eq!(done, Committed::Nothing);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn another_writers_change_is_not_overwritten() {
    let (dir, path) = copy("b2nd_1d_f8.b2nd");
    let live = live(&path);
    // Another writer: the same frame with other attributes, renamed over it.
    let other = dir.join("other.b2nd");
    std::fs::copy(&path, &other).unwrap();
    let theirs = live_of_copy(&other);
    Committer::new()
        .commit(
            Target::Array(&theirs),
            Edit::Attrs(serde_json::json!({"by": "them"})),
        )
        .unwrap();
    std::fs::rename(&other, &path).unwrap();
    let after_them = std::fs::read(&path).unwrap();
    assert!(live.changed_on_disk());
    let e = Committer::new()
        .commit(
            Target::Array(&live),
            Edit::Attrs(serde_json::json!({"by": "us"})),
        )
        .unwrap_err();
    assert!(matches!(e, ContainerError::Changed { .. }), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), after_them);
    let _ = std::fs::remove_dir_all(dir);
}

fn live_of_copy(path: &Path) -> LiveArray {
    live(path)
}

#[test]
fn a_crash_cut_commit_fails_and_leaves_old_or_new() {
    for steps in 0..4 {
        let (dir, path) = copy("b2nd_1d_f8.b2nd");
        let live = live(&path);
        let old = chunk_on_disk(&path, 0);
        let new = vec![7u8; old.len()];
        let edit = [ChunkEdit {
            index: 0,
            data: &new,
            append: false,
        }];
        let mut c = Committer::new();
        c.crash_after(steps);
        let res = c.commit(Target::Array(&live), Edit::Chunks(&edit));
        let now = chunk_on_disk(&path, 0);
        assert!(
            now == old || now == new,
            "steps {steps}: neither old nor new"
        );
        if res.is_ok() {
            assert_eq!(now, new, "steps {steps}: ok but not committed");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn an_undoing_is_adopted_only_in_the_state_it_left() {
    use std::time::{Duration, SystemTime};
    let (dir, path) = copy("b2nd_1d_f8.b2nd");
    let live = live(&path);
    // The mount's own undoing: same bytes, another mtime.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(7))
        .unwrap();
    let left = container::FileState::stat(&path).unwrap();
    assert!(live.changed_on_disk());
    // Another writer after it: its change is not taken as the mount's.
    file.set_modified(SystemTime::now() + Duration::from_secs(9))
        .unwrap();
    assert!(!live.adopt(left).unwrap());
    assert!(live.changed_on_disk());
    let left = container::FileState::stat(&path).unwrap();
    assert!(live.adopt(left).unwrap());
    assert!(!live.changed_on_disk());
    assert!(!live.get().changed_on_disk().unwrap());
    let _ = std::fs::remove_dir_all(dir);
}
