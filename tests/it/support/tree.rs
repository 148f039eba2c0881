//! Paths and whole reads through the in-process [`Tree`]: what every tree-API test needs
//! instead of its own lookup loop or read loop.

use std::path::Path;

use b2fs::tree::{ROOT_INO, ReaderOptions, Tree, TreeError, TreeOptions};

/// The inode of the slash-separated `path` (empty parts ignored) from the root of `t`.
#[track_caller]
pub fn tree_ino(t: &Tree, path: &str) -> u64 {
    try_tree_ino(t, path).unwrap_or_else(|e| panic!("lookup {e}"))
}

/// [`tree_ino`], with the failing lookup as an error.
pub fn try_tree_ino(t: &Tree, path: &str) -> Result<u64, String> {
    let mut ino = ROOT_INO;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        ino = t.lookup(ino, part).map_err(|e| format!("{path}: {e}"))?.ino;
    }
    Ok(ino)
}

/// The whole file `ino` read through one read-only handle, in reads of `step` bytes.
pub fn tree_read(t: &Tree, ino: u64, step: u32) -> Result<Vec<u8>, TreeError> {
    let fh = t.open(ino, libc::O_RDONLY)?;
    let mut out = Vec::new();
    let res = loop {
        match t.read(ino, fh, out.len() as u64, step) {
            Ok(d) if d.is_empty() => break Ok(()),
            Ok(d) => out.extend_from_slice(&d),
            Err(e) => break Err(e),
        }
    };
    t.release(fh)?;
    res.map(|()| out)
}

/// A writable in-process tree of `src` with the default options.
#[track_caller]
pub fn rw_tree(src: &Path) -> Tree {
    Tree::from_source(
        src,
        TreeOptions {
            writable: true,
            ..TreeOptions::default()
        },
    )
    .unwrap()
}

/// Tree options without prefetch threads (reads happen where the test makes them), writable
/// or not.
pub fn no_prefetch(writable: bool) -> TreeOptions {
    TreeOptions {
        reader: ReaderOptions {
            prefetch_chunks: 0,
            ..ReaderOptions::default()
        },
        writable,
        ..TreeOptions::default()
    }
}
