//! The durable steps of a commit (positional write, fsync, create, rename, unlink, directory
//! fsync), each counted so a test can stop a commit after any step as a crash would, and the
//! `.b2lock` sidecar lock.
//!
//! Knows no format: paths and bytes in. Spec: `docs/format/CONTAINERS.md` 3.6 (the sidecar: `flock`
//! exclusive, u64 generation counter at offset 8, host byte order). The names and places of
//! temp files (never inside a `.b2d` store, a directory holding `embed.b2e`) are
//! `src/container/leftover.rs`'s ([`own_temp`], [`temp_for`]).
//!
//! Invariant: with a step budget, the step that would exceed it is not performed at all and
//! every later step fails too ([`Io::crashed`] then says so).
//!
//! Also the source lock of mounts and `compact` ([`SourceLock`]): a mounting process holds
//! `flock(LOCK_SH)` on the source itself (the frame file, or the sparse frame / bcolz
//! directory) while it serves it; `compact` takes `LOCK_EX` without waiting, so it cannot
//! rewrite a mounted source, and a mount cannot start on a source being compacted.
//!
//! The `unsafe` blocks: the `flock(2)` call ([`flock`]; std's `File::lock` needs Rust
//! 1.89, above the crate's rust-version) and `localtime_r(3)` ([`local_time_now`]: std has no
//! time zones).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use super::io_err;
use crate::container::ContainerError;
// Temp files' names and places are `leftover.rs`'s (`b2fs verify` tells them by the same
// rules).
pub(super) use crate::container::leftover::{
    own_temp, parent_dir, temp_dir, temp_dir_in, temp_for, temp_name,
};

/// Tests: called with each path a commit is about to create a file at (another writer may
/// make it first).
pub type BeforeCreate = Box<dyn FnMut(&Path)>;

/// Performs and counts the durable steps of one commit.
pub(super) struct Io {
    budget: Option<usize>,
    crashed: bool,
    /// Tests: giving a file back its modification time fails with this errno.
    fail_times: Option<i32>,
    /// Tests: stands for another writer before each file [`Io::create_new`] makes.
    before_create: Option<BeforeCreate>,
    /// Steps begun so far.
    begun: usize,
    /// Tests: the step of this number (from 0) fails with this errno, not performed; the
    /// others run (a failed fsync, not a crash).
    fail_step: Option<(usize, i32)>,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("budget", &self.budget)
            .field("crashed", &self.crashed)
            .field("fail_times", &self.fail_times)
            .field("before_create", &self.before_create.is_some())
            .field("fail_step", &self.fail_step)
            .finish()
    }
}

impl Io {
    /// `budget`: how many steps may run (`None`: all).
    pub(super) fn new(budget: Option<usize>) -> Io {
        Io {
            budget,
            crashed: false,
            fail_times: None,
            before_create: None,
            begun: 0,
            fail_step: None,
        }
    }

    /// Tests: step `step` (from 0) fails with `errno` without being performed, as a failed
    /// `fsync` or `link` would; the steps after it run.
    pub(super) fn fail_step_with(&mut self, step: usize, errno: i32) {
        self.fail_step = Some((step, errno));
    }

    /// Tests: `hook` runs before each file [`Io::create_new`] makes.
    pub(super) fn before_create(&mut self, hook: BeforeCreate) {
        self.before_create = Some(hook);
    }

    /// Tests: [`Io::set_mtime`] fails with `errno` (as for a file of another owner, whose
    /// times only its owner may set).
    pub(super) fn fail_times_with(&mut self, errno: i32) {
        self.fail_times = Some(errno);
    }

    /// Whether the budget ran out (a simulated crash).
    pub(super) fn crashed(&self) -> bool {
        self.crashed
    }

    fn step(&mut self, path: &Path) -> Result<(), ContainerError> {
        let this = self.begun;
        self.begun += 1;
        if let Some((n, errno)) = self.fail_step
            && n == this
        {
            return Err(io_err(path, std::io::Error::from_raw_os_error(errno)));
        }
        match &mut self.budget {
            Some(0) => {
                self.crashed = true;
                Err(io_err(
                    path,
                    std::io::Error::other("simulated crash (test step budget exhausted)"),
                ))
            }
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Counts one step that the caller performs itself (a file written through another
    /// writer, such as a whole zip built by the `zip` crate).
    pub(super) fn begin_step(&mut self, path: &Path) -> Result<(), ContainerError> {
        self.step(path)
    }

    /// Writes all of `bytes` at `offset` of `file` (one step).
    pub(super) fn write_at(
        &mut self,
        file: &File,
        path: &Path,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), ContainerError> {
        self.step(path)?;
        file.write_all_at(bytes, offset)
            .map_err(|e| io_err(path, e))
    }

    /// fsyncs `file` (one step).
    pub(super) fn sync(&mut self, file: &File, path: &Path) -> Result<(), ContainerError> {
        self.step(path)?;
        file.sync_all().map_err(|e| io_err(path, e))
    }

    /// Gives `file` back the modification time `mtime` (not a durable step: a restore).
    pub(super) fn set_mtime(
        &self,
        file: &File,
        path: &Path,
        mtime: std::time::SystemTime,
    ) -> Result<(), ContainerError> {
        if let Some(errno) = self.fail_times {
            return Err(io_err(path, std::io::Error::from_raw_os_error(errno)));
        }
        file.set_modified(mtime).map_err(|e| io_err(path, e))
    }

    /// Creates `path`, which must not exist, writes `bytes` (one step) and fsyncs it (one
    /// step): a file another writer made there first fails with `AlreadyExists` and is left
    /// alone; one made but not filled is removed. On success the caller owns the file: it
    /// removes it when the commit is undone.
    pub(super) fn create_new(&mut self, path: &Path, bytes: &[u8]) -> Result<(), ContainerError> {
        self.step(path)?;
        if let Some(hook) = &mut self.before_create {
            hook(path);
        }
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let filled = file
            .write_all_at(bytes, 0)
            .map_err(|e| io_err(path, e))
            .and_then(|()| self.sync(&file, path));
        if filled.is_err() && !self.crashed() {
            // Its own file, not filled: removed (a crash leaves it, as a real one would).
            let _ = std::fs::remove_file(path);
        }
        filled
    }

    /// Renames `from` over `to` (one step).
    pub(super) fn rename(&mut self, from: &Path, to: &Path) -> Result<(), ContainerError> {
        self.step(to)?;
        std::fs::rename(from, to).map_err(|e| io_err(to, e))
    }

    /// Removes the file `path` if it exists (one step).
    pub(super) fn remove(&mut self, path: &Path) -> Result<(), ContainerError> {
        self.step(path)?;
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(path, e)),
            _ => Ok(()),
        }
    }

    /// fsyncs the directory `dir` (one step), making renames and creations in it durable.
    pub(super) fn sync_dir(&mut self, dir: &Path) -> Result<(), ContainerError> {
        self.step(dir)?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err(dir, e))
    }

    /// Runs `commit` with a budget of `steps` durable steps, as a crash after them would
    /// stop it: `Ok(true)` when it completed, `Ok(false)` when the budget stopped it. For the
    /// crash-test variants of the commits.
    pub(super) fn until_crash<T>(
        steps: usize,
        commit: impl FnOnce(&mut Io) -> Result<T, ContainerError>,
    ) -> Result<bool, ContainerError> {
        let mut io = Io::new(Some(steps));
        match commit(&mut io) {
            Ok(_) => Ok(true),
            Err(_) if io.crashed() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes `bytes` to `target` atomically: a temp file of this commit's own
    /// ([`temp_for`]: beside `target`, or beside the `.b2d` store `target` lies in) created
    /// where no file is and fsynced, renamed over `target`, the target's directory fsynced
    /// (four steps). Only that temp file is ever removed (when the rename fails): a file
    /// another writer made at its name is left alone, and the error is theirs (`EEXIST`).
    pub(super) fn replace(&mut self, target: &Path, bytes: &[u8]) -> Result<(), ContainerError> {
        let tmp = temp_for(target);
        // One that is not filled is removed by create_new itself.
        self.create_new(&tmp, bytes)?;
        if let Err(e) = self.rename(&tmp, target) {
            if !self.crashed() {
                // Nothing a reader sees changed: the temp file goes too.
                let _ = std::fs::remove_file(&tmp);
            }
            return Err(e);
        }
        self.sync_dir(parent_dir(target))
    }
}

/// Whether this process may create files in `dir` (`access(2)` with `W_OK | X_OK`, by its
/// real ids): what a rewrite made beside a file needs, asked before it starts.
///
/// # Errors
/// The OS error (`EACCES`, `EROFS`, `ENOENT`, ...).
pub(super) fn can_create_in(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration; access(2) only
    // reads it.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The local date and time now (year, month 1-12, day 1-31, hour, minute, second), as the
/// C library's `localtime_r` gives it (`TZ`, `/etc/localtime`); `None` when it cannot.
pub(super) fn local_time_now() -> Option<(u16, u8, u8, u8, u8, u8)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let t = libc::time_t::try_from(now.as_secs()).ok()?;
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct (its pointer field,
    // where the platform has one, is null), and `localtime_r` only reads `t` and writes
    // `tm`, both living on this stack for the whole call.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return None;
        }
        tm
    };
    Some((
        u16::try_from(tm.tm_year + 1900).ok()?,
        u8::try_from(tm.tm_mon + 1).ok()?,
        u8::try_from(tm.tm_mday).ok()?,
        u8::try_from(tm.tm_hour).ok()?,
        u8::try_from(tm.tm_min).ok()?,
        u8::try_from(tm.tm_sec).ok()?,
    ))
}

/// An exclusive `flock` on a `.b2lock` sidecar, held until dropped.
#[derive(Debug)]
pub(super) struct SidecarLock {
    file: File,
    path: std::path::PathBuf,
}

impl SidecarLock {
    /// Locks `sidecar` exclusively when it exists (`None` when it does not: nobody uses the
    /// protocol).
    pub(super) fn acquire(sidecar: &Path) -> Result<Option<SidecarLock>, ContainerError> {
        if !sidecar.is_file() {
            return Ok(None);
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(sidecar)
            .map_err(|e| io_err(sidecar, e))?;
        flock(&file, libc::LOCK_EX).map_err(|e| io_err(sidecar, e))?;
        Ok(Some(SidecarLock {
            file,
            path: sidecar.to_path_buf(),
        }))
    }

    /// Increments the generation counter (u64, host byte order, bytes 8..16), so handles that
    /// lock too refresh their view.
    pub(super) fn bump(&self) -> Result<(), ContainerError> {
        let mut b = [0u8; 8];
        let len = self
            .file
            .metadata()
            .map_err(|e| io_err(&self.path, e))?
            .len();
        if len >= 16 {
            self.file
                .read_exact_at(&mut b, 8)
                .map_err(|e| io_err(&self.path, e))?;
        }
        let next = u64::from_ne_bytes(b).wrapping_add(1);
        if len < 8 {
            self.file
                .write_all_at(&[0u8; 8][..8 - len as usize], len)
                .map_err(|e| io_err(&self.path, e))?;
        }
        self.file
            .write_all_at(&next.to_ne_bytes(), 8)
            .map_err(|e| io_err(&self.path, e))?;
        self.file.sync_data().map_err(|e| io_err(&self.path, e))
    }
}

/// `flock(2)` on `file` with `op` (`LOCK_SH`, `LOCK_EX`, optionally `| LOCK_NB`), retried on
/// EINTR.
fn flock(file: &File, op: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock only takes a file descriptor, owned by `file`, which outlives the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// An `flock` on a source itself (file or directory), held until dropped: shared by mounts,
/// exclusive by `compact` (see the module doc).
#[derive(Debug)]
pub struct SourceLock {
    _file: File,
}

/// How a [`SourceLock`] is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LockMode {
    /// By a mount (many may share it).
    Mount,
    /// By `compact` (alone).
    Compact,
}

impl SourceLock {
    /// Locks the source at `path` without waiting. The lock is taken on what `path` names at
    /// the moment of locking: when `path` is replaced meanwhile (a `compact` renamed its
    /// rewrite over it), the lock is taken again on the new file.
    ///
    /// # Errors
    /// [`ContainerError::Busy`] when a process holds a conflicting lock (a mount, for
    /// `Compact`; a compaction, for `Mount`); [`ContainerError::Io`].
    pub(super) fn acquire(path: &Path, mode: LockMode) -> Result<SourceLock, ContainerError> {
        use std::os::unix::fs::MetadataExt;
        let (op, why) = match mode {
            LockMode::Mount => (
                libc::LOCK_SH | libc::LOCK_NB,
                "it is being compacted by `b2fs compact`",
            ),
            LockMode::Compact => (
                libc::LOCK_EX | libc::LOCK_NB,
                "it is mounted by a running b2fs (unmount it first)",
            ),
        };
        for _ in 0..8 {
            let file = File::open(path).map_err(|e| io_err(path, e))?;
            match flock(&file, op) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Err(ContainerError::Busy {
                        path: path.to_path_buf(),
                        why: why.into(),
                    });
                }
                Err(e) => return Err(io_err(path, e)),
            }
            let held = file.metadata().map_err(|e| io_err(path, e))?;
            let now = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
            if (held.dev(), held.ino()) == (now.dev(), now.ino()) {
                return Ok(SourceLock { _file: file });
            }
        }
        Err(ContainerError::Busy {
            path: path.to_path_buf(),
            why: "it keeps being replaced while b2fs tries to lock it".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_is_now() {
        assert!(local_time_now().is_some_and(|(y, ..)| y >= 2024));
    }
}
