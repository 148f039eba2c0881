//! The kill-and-check loop of the crash tests: a read-write mount served by a foreground
//! daemon, a writer thread committing through it, a SIGKILL of the daemon after a delay,
//! then the dead mount detached and the writer's acknowledgements handed back for the
//! reference library to check. One delay policy for every such test: [`kill_delay`]; one
//! verdict on what a run left: [`OldOrNew`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use super::mount::{Mount, b2fs, is_mounted};
use super::wait::wait_until;

/// A small xorshift generator: the tests need no cryptographic randomness.
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// A generator seeded from `salt` and this process (each run kills at other moments).
    pub fn per_run(salt: u64) -> Rng {
        Rng(salt ^ 0x9E37_79B9_7F4A_7C15 ^ u64::from(std::process::id()).rotate_left(17) | 1)
    }

    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// When run `run` kills the daemon: `from_ms` milliseconds plus a point of the next `span_ms`
/// (the window the test's commit takes). The first runs split the window evenly (run 0 at its start, run 1
/// in the middle, then quarters...: a few runs already cover it), each point moved by a
/// random amount of at most its share of the window from `rng`, so repeated runs land
/// everywhere. The one delay policy of every kill-and-check test.
pub fn kill_delay(rng: &mut Rng, run: usize, from_ms: u64, span_ms: u64) -> Duration {
    // The van der Corput sequence in base 2: 0, 1/2, 1/4, 3/4, 1/8, ...
    let (mut x, mut k, mut base) = (0.0f64, run, 0.5f64);
    while k > 0 {
        if k & 1 == 1 {
            x += base;
        }
        k >>= 1;
        base /= 2.0;
    }
    let share = 1.0 / (run + 1).next_power_of_two() as f64;
    let jitter = (rng.next() % 1024) as f64 / 1024.0 * share;
    Duration::from_millis(from_ms) + Duration::from_millis(span_ms).mul_f64((x + jitter).min(1.0))
}

/// The directory of run `run` under `root` (`runN`) with a copy of `pristine` in it (same
/// name) and an empty mount point `mnt`: the source and the mount point.
pub fn run_copy(root: &Path, run: usize, pristine: &Path) -> (PathBuf, PathBuf) {
    let dir = root.join(format!("run{run}"));
    let mp = dir.join("mnt");
    std::fs::create_dir_all(&mp).unwrap();
    let src = dir.join(pristine.file_name().unwrap());
    super::copy_all(pristine, &src);
    (src, mp)
}

/// `b2fs mount -f SOURCE MP` (output discarded), returned once `mp` is mounted.
pub fn foreground(src: &Path, mp: &Path) -> Child {
    let mut child = b2fs()
        .args(["mount", "-f"])
        .arg(src)
        .arg(mp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = wait_until(Duration::from_secs(20), || {
        is_mounted(mp) || child.try_wait().unwrap().is_some()
    });
    assert!(up && is_mounted(mp), "mount -f did not come up");
    child
}

/// A writer thread: `data` written over `path` from its start, then fsynced; `Some(())` when
/// both were acknowledged.
pub fn write_and_fsync(path: PathBuf, data: Vec<u8>) -> JoinHandle<Option<()>> {
    std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).ok()?;
        f.write_all(&data).ok()?;
        f.sync_all().ok()
    })
}

/// [`kill_after`] for the foreground daemon of `m` ([`Mount::foreground`]).
pub fn kill_mount_after<T>(m: &mut Mount, delay: Duration, writer: JoinHandle<T>) -> T {
    let mut child = m.child.take().expect("a foreground mount");
    kill_after(delay, &mut child, writer, &m.mp)
}

/// SIGKILLs the daemon `child` after `delay`, then joins the `writer` thread (its commits
/// fail from then on) and detaches the dead mount at `mp`; the writer's result.
pub fn kill_after<T>(delay: Duration, child: &mut Child, writer: JoinHandle<T>, mp: &Path) -> T {
    std::thread::sleep(delay);
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    let acked = writer.join().unwrap();
    let _ = Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(mp)
        .output();
    acked
}

/// The verdict of a kill-and-check loop, run after run: what the source holds after the kill
/// is the old value or the new one, never anything else, and the new one whenever the writer's
/// call returned (an acknowledged write is never lost). Counts both outcomes for the report.
#[derive(Debug, Default)]
pub struct OldOrNew {
    /// Runs that left the old value.
    pub old: usize,
    /// Runs that left the new value.
    pub new: usize,
}

impl OldOrNew {
    /// Checks run `run`: the source now holds `now`; the writer was acknowledged (`acked`).
    #[track_caller]
    pub fn check<T: PartialEq + ?Sized>(
        &mut self,
        run: usize,
        (now, old, new): (&T, &T, &T),
        acked: bool,
    ) {
        if now == new {
            self.new += 1;
        } else {
            assert!(now == old, "run {run}: neither the old nor the new value");
            assert!(!acked, "run {run}: an acknowledged write was lost");
            self.old += 1;
        }
    }
}
