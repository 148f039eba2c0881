//! Shared test helpers, one place each: fixture paths, the python oracle (python-blosc2, blosc,
//! bcolz, caterva in the project's venv), the FUSE/Python/server skip-or-require policy,
//! sha256, and commands that must succeed (here); paths and whole reads through the in-process
//! [`Tree`](b2fs::tree::Tree) (`tree`); mounts, foreground daemons and mount checks (`mount`);
//! the oracles' warm interpreters (`forkserver`); the kill-and-check loop of the crash tests
//! with its one delay policy (`crash`); hand-built chunks and frames (`frames`); waits that
//! poll for a condition (`wait`); the servers and the fault-injecting proxy of the remote tests
//! (`remote`).

#![allow(dead_code)]

/// The value of an `Option` whose `None` means "skip this test": a missing reference, FUSE or
/// server has printed its SKIP line (or failed under `B2FS_REQUIRE_*`), and the test returns.
macro_rules! or_skip {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return,
        }
    };
}

pub mod crash;
pub mod forkserver;
pub mod frames;
pub mod gen2d;
pub mod mount;
#[cfg(feature = "remote")]
pub mod remote;
pub mod steps;
pub mod tree;
pub mod wait;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use mount::{Mount, b2fs, is_mounted};
pub use tree::{no_prefetch, rw_tree, tree_ino, tree_read, try_tree_ino};
pub use wait::wait_until;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/data`, where the committed fixtures live.
pub fn data_dir() -> PathBuf {
    repo_root().join("tests/data")
}

/// A python-blosc2 `.b2z` of 10,000 small members (`scripts/oracle/stores.py many`: member
/// `g{i % 100}/a{i}` holds the int32 values `i..i + 4`), generated once per test run (about
/// 10 CPU-s) and shared: the tests that use it only read it, or copy it first.
pub fn many_members_store(py: &Path) -> &'static Path {
    static STORE: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> = std::sync::OnceLock::new();
    let (_, path) = STORE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("many.b2z");
        oracle(py, &[&"scripts/oracle/stores.py", &"many", &path, &"10000"]);
        (dir, path)
    });
    path
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads every chunk file `data/<index>.bin` below `root` (a mount point) that sidecar `sc`
/// lists in its `chunk_list`, checks each against the sidecar's sha256 (`what` names the
/// source in a failure), and returns their bytes one after the other.
#[track_caller]
pub fn chunk_files_match(root: &Path, sc: &serde_json::Value, what: &str) -> Vec<u8> {
    let mut all = Vec::new();
    for c in sc["chunk_list"].as_array().unwrap() {
        let f = root.join(format!("data/{:08}.bin", c["index"].as_u64().unwrap()));
        let bytes = std::fs::read(&f).unwrap();
        assert_eq!(
            sha256_hex(&bytes),
            c["sha256"].as_str().unwrap(),
            "{what} {f:?}"
        );
        all.extend(bytes);
    }
    all
}

/// The value of environment variable `name` (a run count, a seed...), or `default` when it
/// is unset or does not parse.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn env_flag(name: &str) -> bool {
    std::env::var(name)
        .map(|v| v == "1" || v == "true")
        .unwrap_or(false)
}

/// The python interpreter with the reference libraries, or `None` (after printing a visible
/// SKIP line) when there is none. Panics instead of skipping when `B2FS_REQUIRE_PYTHON=1`.
/// Looks at `B2FS_PYTHON`, then the repository's `.venv`. The probe (an interpreter importing
/// the references: about 0.8 CPU-s, mostly python-blosc2's own imports) runs once per test
/// process, not once per test: the answer cannot change while the tests run.
pub fn python(test: &str) -> Option<PathBuf> {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let candidates = [
            std::env::var_os("B2FS_PYTHON").map(PathBuf::from),
            Some(repo_root().join(".venv/bin/python")),
        ];
        candidates.into_iter().flatten().find(|py| {
            Command::new(py)
                .args(["-c", "import blosc2, blosc, bcolz, numpy"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        })
    });
    if found.is_some() {
        return found.clone();
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
    let args: Vec<&dyn AsRef<OsStr>> = args.iter().map(|a| a as &dyn AsRef<OsStr>).collect();
    oracle(py, &args)
}

/// The reference cases of `scripts/oracle/npy_cases.py` (every dtype and layout python-blosc2
/// and bcolz write, with numpy's `np.save` of each), written into a fresh temp dir: (that
/// dir, which must outlive the cases, and the case list: `name`, `kind`, `source`, `npy`).
pub fn npy_cases(py: &Path) -> (tempfile::TempDir, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let out = run_python(
        py,
        &["scripts/oracle/npy_cases.py", dir.path().to_str().unwrap()],
    );
    let cases: serde_json::Value = serde_json::from_slice(&out).expect("case list");
    let cases = cases.as_array().expect("a list").clone();
    (dir, cases)
}

/// The `array.npy` python-blosc2 and `scripts/oracle/npy_ref.py` make of member `key` of
/// the store at `path`.
pub fn member_npy(py: &Path, path: &Path, key: &str) -> Vec<u8> {
    let script = "import sys, io, blosc2\n\
                  sys.path.insert(0, 'scripts/oracle'); import npy_ref\n\
                  a = blosc2.TreeStore(sys.argv[1], mode='r')[sys.argv[2]]\n\
                  b = io.BytesIO(); npy_ref.save(b, a[:]); sys.stdout.buffer.write(b.getvalue())\n";
    let out = std::process::Command::new(py)
        .args(["-c", script, &path.display().to_string(), key])
        .current_dir(crate::support::repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// [`run_python`] with arguments of any kind (script, words, paths): `oracle(&py,
/// &[&"scripts/oracle/fork.py", &"gen", &src])`.
pub fn oracle(py: &Path, args: &[&dyn AsRef<OsStr>]) -> Vec<u8> {
    if let Some(ran) = forkserver::run(py, args, &repo_root()) {
        assert!(
            ran.code == 0,
            "python {:?} failed ({}): {}",
            args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
            ran.code,
            String::from_utf8_lossy(&ran.stderr)
        );
        return ran.stdout;
    }
    let out = Command::new(py)
        .args(args.iter().map(|a| a.as_ref()))
        .current_dir(repo_root())
        .output()
        .expect("spawn python");
    assert!(
        out.status.success(),
        "python {:?} failed: {}",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// [`oracle`]'s stdout as trimmed text: what a one-line oracle check printed.
pub fn oracle_says(py: &Path, args: &[&dyn AsRef<OsStr>]) -> String {
    String::from_utf8_lossy(&oracle(py, args))
        .trim()
        .to_string()
}

/// [`run_python`]'s stdout as trimmed text: what a one-line oracle check printed.
pub fn python_says(py: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&run_python(py, args))
        .trim()
        .to_string()
}

/// A python child that holds something open across a change the test makes: it runs
/// `script` with `arg`, prints `ready` once it holds it (the start returns then), reads a
/// line of its stdin ([`Waiting::go`]) and prints what it found.
pub struct Waiting {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Waiting {
    /// Starts the child and waits for its `ready`.
    pub fn start(py: &Path, script: &str, arg: &Path) -> Waiting {
        let mut child = Command::new(py)
            .args(["-c", script])
            .arg(arg)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        Waiting { child, out }
    }

    /// Lets the child go on; what it printed then (trimmed), once it exited successfully.
    pub fn go(mut self) -> String {
        std::io::Write::write_all(self.child.stdin.as_mut().unwrap(), b"go\n").unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.out, &mut rest).unwrap();
        assert!(self.child.wait().unwrap().success(), "{rest}");
        rest.trim().to_string()
    }
}

/// [`fuse_available`] for [`or_skip!`]: `or_skip!(fuse(test));`.
pub fn fuse(test: &str) -> Option<()> {
    fuse_available(test).then_some(())
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

/// Runs `cmd` and returns its output; panics with its stderr unless it succeeded.
#[track_caller]
pub fn ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `cp -a FROM TO`: a file or a whole directory copied with its modes and times.
#[track_caller]
pub fn copy_all(from: &Path, to: &Path) {
    ok(Command::new("cp").arg("-a").arg(from).arg(to));
}

/// Copies `src` (a file or a directory tree) to `dst`, creating `dst`'s parents: unlike
/// [`copy_all`], `dst` may exist already.
pub fn copy_tree(src: &Path, dst: &Path) {
    if src.is_dir() {
        std::fs::create_dir_all(dst).expect("mkdir");
        for e in std::fs::read_dir(src).expect("read_dir") {
            let e = e.expect("entry");
            copy_tree(&e.path(), &dst.join(e.file_name()));
        }
    } else {
        std::fs::create_dir_all(dst.parent().expect("parent")).expect("mkdir");
        std::fs::copy(src, dst).expect("copy");
    }
}

/// `n` items of `atom` bytes taken from the whole items of `all`, starting at item `shift`,
/// cycled: valid values of a column, in another order.
pub fn cycled_items(all: &[u8], atom: usize, n: usize, shift: usize) -> Vec<u8> {
    let have = all.len() / atom;
    (0..n)
        .flat_map(|r| {
            let at = (r + shift) % have * atom;
            all[at..at + atom].to_vec()
        })
        .collect()
}

/// A fresh temp directory and the path `name` in it (not created): where a test makes its
/// source. The directory lives as long as the returned guard.
pub fn temp_path(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

/// python-blosc2 writes `src` (a `.b2nd`): int64 items 0..1000 in chunks of 300 and blocks of
/// 100, the array the follow tests have another writer grow ([`grow_to_1500`]).
pub fn int64_1000_b2nd(py: &Path, src: &Path) {
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(1000, dtype=np.int64), chunks=(300,), blocks=(100,), \
        urlpath=sys.argv[1], mode='w')\n";
    run_python(py, &["-c", make, src.to_str().unwrap()]);
}

/// Another writer (python-blosc2) grows the array of [`int64_1000_b2nd`] at `src` to 1500
/// items, item i holding 3i, and sets its attribute `units` to `units`.
pub fn grow_to_1500(py: &Path, src: &Path, units: &str) {
    let grow = "import sys, numpy as np, blosc2\n\
        a = blosc2.open(sys.argv[1], mode='a')\n\
        a.resize((1500,))\n\
        a[:] = np.arange(1500, dtype=np.int64) * 3\n\
        a.vlmeta['units'] = sys.argv[2]\n";
    run_python(py, &["-c", grow, src.to_str().unwrap(), units]);
}

/// Every file under `dir`, relative to it, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}
