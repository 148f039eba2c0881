//! Real mounts of the built `b2fs`: the command, whether a directory is a mount point, and
//! [`Mount`], a mount point that is unmounted (and its foreground daemon killed) when dropped.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::wait::wait_until;

/// The built `b2fs` binary. Its background daemons log to `$XDG_RUNTIME_DIR`, else to
/// `target/test-logs/` (as under `scripts/test.sh`), so that `cargo test` run directly does
/// not leave a `b2fs-PID.log` in `/tmp` per mount.
pub fn b2fs() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_b2fs"));
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        static LOGS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        let dir = LOGS.get_or_init(|| {
            let d = super::repo_root().join("target/test-logs");
            let _ = std::fs::create_dir_all(&d);
            d
        });
        c.env("XDG_RUNTIME_DIR", dir);
    }
    c
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
        Mount::foreground_with(source, &[], log)
    }

    /// [`Mount::foreground`] with `-o OPT` for each of `opts`.
    pub fn foreground_with(source: &Path, opts: &[&str], log: &Path) -> Mount {
        let mut m = Mount::empty();
        let child = b2fs()
            .args(["mount", "-f"])
            .args(opts.iter().flat_map(|o| ["-o", o]))
            .arg(source)
            .arg(&m.mp)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        m.child = Some(child);
        let child = m.child.as_mut().unwrap();
        let up = wait_until(Duration::from_secs(20), || {
            is_mounted(&m.mp) || child.try_wait().unwrap().is_some()
        });
        if let Some(st) = child.try_wait().unwrap() {
            panic!(
                "b2fs mount -f exited early ({st}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(up, "mount -f did not come up");
        m
    }

    /// A path inside the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mp.join(rel)
    }

    /// `b2fs umount`, waiting until the mount is gone (so every commit is done).
    pub fn umount(&self) {
        super::ok(b2fs().arg("umount").arg(&self.mp));
        assert!(
            wait_until(Duration::from_secs(10), || !is_mounted(&self.mp)),
            "still mounted after b2fs umount"
        );
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

/// The pid of the daemon serving `mp` (its command line names the mount point).
pub fn daemon_pid(mp: &Path) -> Option<u32> {
    let want = mp.to_string_lossy().into_owned();
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let e = e.ok()?;
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd);
        (cmd.contains("--daemon-child") && cmd.split('\0').any(|a| a == want)).then_some(pid)
    })
}

/// The peak resident size (`VmHWM`) of process `pid` in KiB; 0 if it cannot be read.
pub fn vm_hwm_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Reads every data file of the mount in order; returns (bytes, seconds).
pub fn stream(m: &Mount) -> (u64, f64) {
    let mut names: Vec<_> = std::fs::read_dir(m.path("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let t0 = Instant::now();
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for n in names {
        let mut f = std::fs::File::open(n).unwrap();
        loop {
            let k = f.read(&mut buf).unwrap();
            if k == 0 {
                break;
            }
            total += k as u64;
        }
    }
    (total, t0.elapsed().as_secs_f64())
}
