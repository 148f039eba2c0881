//! The `gen2d` array python-blosc2 writes (`scripts/oracle/npy_check.py gen2d`: 230 x 170
//! float64 in 16 chunks of 60 x 50, blocks of 16 x 24) and a read-write tree over it whose
//! pending edits are bounded: the fixture of the edit-budget and spill tests
//! (`tests/it/edit_budget.rs`, `tests/it/spill_lock.rs`).

use std::path::{Path, PathBuf};

use b2fs::tree::{Tree, TreeOptions};

use super::{no_prefetch, run_python};

/// Decoded bytes of one chunk: 60 x 50 float64 in blocks of 16 x 24, so 64 x 72 items (b2nd
/// pads a chunk to whole blocks).
pub const CHUNK: usize = 64 * 72 * 8;
/// Rows of the array.
pub const ROWS: usize = 230;
/// Columns of the array.
pub const COLS: usize = 170;

/// A fresh `gen2d` array in a temp dir: (the dir, the `.b2nd` in it).
pub fn gen2d(py: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.b2nd");
    run_python(
        py,
        &[
            "scripts/oracle/npy_check.py",
            "gen2d",
            src.to_str().unwrap(),
        ],
    );
    (dir, src)
}

/// A read-write tree of `src` keeping at most `budget` bytes of edits in memory, spilling to
/// `spill`.
pub fn budget_tree(src: &Path, budget: usize, spill: &Path) -> Tree {
    let t = Tree::from_source(
        src,
        TreeOptions {
            edit_budget: budget,
            ..no_prefetch(true)
        },
    )
    .unwrap();
    t.set_spill_dir(spill.to_path_buf());
    t
}
