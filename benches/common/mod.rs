//! What the mount benchmarks (`read`, `write`) share: where the repository and its Python are,
//! and whether a directory is a mount point now.

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python with python-blosc2: `B2FS_PYTHON`, else the repository's `.venv`.
pub fn python() -> PathBuf {
    std::env::var_os("B2FS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"))
}

/// Whether this process's mount table lists a mount at `dir`.
pub fn is_mounted(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| Path::new(mp) == dir)
}
