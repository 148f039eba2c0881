//! Shared test helpers: fixture paths, the python oracle (python-blosc2, blosc, bcolz,
//! caterva in the project's venv), the FUSE skip/require policy, and sha256.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/data`, where the committed fixtures live.
pub fn data_dir() -> PathBuf {
    repo_root().join("tests/data")
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn env_flag(name: &str) -> bool {
    std::env::var(name)
        .map(|v| v == "1" || v == "true")
        .unwrap_or(false)
}

/// The python interpreter with the reference libraries, or `None` (after printing a visible
/// SKIP line) when there is none. Panics instead of skipping when `B2FS_REQUIRE_PYTHON=1`.
/// Looks at `B2FS_PYTHON`, then the repository's `.venv`.
pub fn python(test: &str) -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("B2FS_PYTHON").map(PathBuf::from),
        Some(repo_root().join(".venv/bin/python")),
    ];
    for py in candidates.into_iter().flatten() {
        let ok = Command::new(&py)
            .args(["-c", "import blosc2, blosc, bcolz, numpy"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            return Some(py);
        }
    }
    if env_flag("B2FS_REQUIRE_PYTHON") {
        panic!(
            "{test}: B2FS_REQUIRE_PYTHON=1 but no python with blosc2/blosc/bcolz (run scripts/setup.sh)"
        );
    }
    eprintln!("SKIP {test}: no python with the reference libraries (run scripts/setup.sh)");
    None
}

/// Runs a python script (`scripts/NAME` relative path or inline code with `-c`) and returns
/// its stdout; panics with stderr on failure.
pub fn run_python(py: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new(py)
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("spawn python");
    assert!(
        out.status.success(),
        "python {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Whether real-mount tests can run: `/dev/fuse` and `fusermount3` present. Prints a visible
/// SKIP line when not; panics instead when `B2FS_REQUIRE_FUSE=1` (CI sets it).
pub fn fuse_available(test: &str) -> bool {
    let dev = Path::new("/dev/fuse").exists();
    let fusermount = Command::new("fusermount3")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if dev && fusermount {
        return true;
    }
    let why = if dev {
        "fusermount3 missing"
    } else {
        "/dev/fuse missing"
    };
    if env_flag("B2FS_REQUIRE_FUSE") {
        panic!("{test}: B2FS_REQUIRE_FUSE=1 but {why}");
    }
    eprintln!("SKIP {test}: {why}");
    false
}

/// Parses a MANIFEST.tsv into one map (column name -> value) per row.
pub fn read_manifest(path: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("manifest header").split('\t').collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            header
                .iter()
                .zip(l.split('\t'))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}
