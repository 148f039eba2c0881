//! Shared test helpers: fixture paths, the python oracle (python-blosc2, blosc, bcolz,
//! caterva in the project's venv), the FUSE skip/require policy, sha256, and paths and whole
//! reads through the in-process [`Tree`].

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use b2fs::tree::{ROOT_INO, Tree, TreeError};

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

/// [`run_python`]'s stdout as trimmed text: what a one-line oracle check printed.
pub fn python_says(py: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&run_python(py, args))
        .trim()
        .to_string()
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

/// The python with the reference libraries, when FUSE is usable too: the guard of tests that
/// mount and then check with a reference library (each half skips or fails as above).
pub fn fuse_and_python(test: &str) -> Option<PathBuf> {
    if !fuse_available(test) {
        return None;
    }
    python(test)
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

/// The built `b2fs` binary.
pub fn b2fs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_b2fs"))
}

/// Whether `dir` is a mount point now (compared in canonical form, as `/proc` shows it).
pub fn is_mounted(dir: &Path) -> bool {
    let dir = match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|p| p.join(name))
            .unwrap_or_else(|_| dir.to_path_buf()),
        _ => dir.to_path_buf(),
    };
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| Path::new(mp) == dir)
}

/// A mount point in a temp dir; on drop it is unmounted (lazily, forcefully) and a
/// foreground `b2fs` process is killed, so a failing test never leaves a mount behind.
pub struct Mount {
    /// The mount point.
    pub mp: PathBuf,
    _dir: tempfile::TempDir,
    /// The `b2fs mount -f` process of [`Mount::foreground`].
    pub child: Option<Child>,
}

impl Mount {
    /// An empty mount point (nothing mounted yet).
    pub fn empty() -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let mp = std::fs::canonicalize(dir.path()).unwrap().join("mnt");
        std::fs::create_dir(&mp).unwrap();
        Mount {
            mp,
            _dir: dir,
            child: None,
        }
    }

    /// `b2fs mount [-o OPT]... SOURCE MP` in daemon mode; panics unless it succeeds and the
    /// mount is live when the command returns.
    pub fn daemon(source: &Path, opts: &[&str]) -> Mount {
        let m = Mount::empty();
        let out = m.run_mount(source, opts);
        assert!(
            out.status.success(),
            "mount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            is_mounted(&m.mp),
            "mount returned before the mount was live"
        );
        m
    }

    /// Runs `b2fs mount [-o OPT]... SOURCE MP` and returns what it did.
    pub fn run_mount(&self, source: &Path, opts: &[&str]) -> Output {
        let mut c = b2fs();
        c.arg("mount");
        for o in opts {
            c.args(["-o", o]);
        }
        c.arg(source).arg(&self.mp).output().unwrap()
    }

    /// `b2fs mount -f SOURCE MP` with stderr going to `log`; waits until mounted.
    pub fn foreground(source: &Path, log: &Path) -> Mount {
        let mut m = Mount::empty();
        let child = b2fs()
            .args(["mount", "-f"])
            .arg(source)
            .arg(&m.mp)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        m.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !is_mounted(&m.mp) {
            if let Some(st) = m.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "b2fs mount -f exited early ({st}): {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "mount -f did not come up");
            std::thread::sleep(Duration::from_millis(10));
        }
        m
    }

    /// A path inside the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mp.join(rel)
    }

    /// `b2fs umount`, waiting until the mount is gone (so every commit is done).
    pub fn umount(&self) {
        let out = b2fs().arg("umount").arg(&self.mp).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_mounted(&self.mp) {
            assert!(Instant::now() < deadline, "still mounted after b2fs umount");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if is_mounted(&self.mp) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mp)
                .output();
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
