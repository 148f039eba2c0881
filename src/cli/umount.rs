//! `b2fs umount`: `fusermount3 -u`, then wait until the process that served the mount is
//! gone (`-l`: `fusermount3 -u -z`, without waiting: the process exits when the last open
//! file of the detached mount is closed); plus the `/proc` lookups `mount` uses (is a path a mount point, where is a binary).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::Error;

/// How long `umount` waits for the daemon to exit.
const WAIT: Duration = Duration::from_secs(15);

/// Runs `b2fs umount [-l] MOUNTPOINT`.
pub(super) fn umount(mountpoint: &Path, lazy: bool) -> Result<(), Error> {
    let target = normalize(mountpoint).ok_or_else(|| Error::Mountpoint {
        path: mountpoint.to_path_buf(),
        why: "no such directory".into(),
    })?;
    if !is_mountpoint(&target) {
        return Err(Error::Mountpoint {
            path: mountpoint.to_path_buf(),
            why: "not mounted".into(),
        });
    }
    let servers = serving_processes(&target);
    let Some(fusermount) = find_in_path("fusermount3") else {
        return Err(Error::Fuse("fusermount3 not found in PATH".into()));
    };
    let out = Command::new(fusermount)
        .arg("-u")
        .args(lazy.then_some("-z"))
        .arg(&target)
        .output()
        .map_err(|e| Error::other("cannot run fusermount3", e))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr);
        let msg = msg.trim().trim_start_matches("fusermount3: ");
        return Err(Error::Mountpoint {
            path: mountpoint.to_path_buf(),
            why: if msg.is_empty() {
                format!("fusermount3 -u failed ({})", out.status)
            } else {
                msg.to_owned()
            },
        });
    }
    if lazy {
        return Ok(());
    }
    let start = Instant::now();
    while servers.iter().any(|pid| alive(*pid)) {
        if start.elapsed() > WAIT {
            return Err(Error::Other {
                what: format!(
                    "unmounted, but the b2fs process {:?} is still running after {}s",
                    servers,
                    WAIT.as_secs()
                ),
                source: None,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// `path` made absolute with its parent's symlinks resolved, without touching `path` itself
/// (a dead FUSE mount cannot be stat'ed).
fn normalize(path: &Path) -> Option<PathBuf> {
    let abs = std::path::absolute(path).ok()?;
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => Some(std::fs::canonicalize(parent).ok()?.join(name)),
        _ => Some(abs),
    }
}

/// Whether `abs` (absolute, normalized) is a mount point, per `/proc/self/mountinfo`.
pub(super) fn is_mountpoint(abs: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| Path::new(&unescape(mp)) == abs)
}

/// Undoes the octal escapes (`\040` for space) of `/proc` mount tables.
pub(super) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a shell looks when `PATH` is unset: mount(8) runs `mount.fuse3`, and so b2fs,
/// without the caller's environment.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The first executable named `name` in `PATH` (or [`DEFAULT_PATH`] when unset).
pub(super) fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Processes of this binary (by `/proc/PID/exe` file name) whose command line is a `mount`
/// of `target`.
fn serving_processes(target: &Path) -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| serves(pid, target))
        .collect()
}

fn serves(pid: u32, target: &Path) -> bool {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let is_b2fs = std::fs::read_link(proc.join("exe"))
        .ok()
        .and_then(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().starts_with("b2fs"))
        })
        .unwrap_or(false);
    if !is_b2fs {
        return false;
    }
    let Ok(cmdline) = std::fs::read(proc.join("cmdline")) else {
        return false;
    };
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if !args.iter().any(|a| a == "mount") {
        return false;
    }
    let Some(last) = args.last() else {
        return false;
    };
    let cwd = std::fs::read_link(proc.join("cwd")).unwrap_or_else(|_| PathBuf::from("/"));
    normalize(&cwd.join(last)).is_some_and(|p| p == target)
}

/// Whether process `pid` is still running (not gone, nor a zombie with no thread left).
pub(super) fn alive(pid: u32) -> bool {
    // A process has exited when /proc/PID is gone, or when it is a zombie ('Z' in the state
    // field) with no other task left. The leader of a multi-threaded process shows 'Z' as soon
    // as its main thread exits, while the other threads are still tearing down; the process
    // is not gone (nor reapable) until they are.
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let zombie = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
        .is_some_and(|state| state == 'Z');
    if !zombie {
        return true;
    }
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| tasks.count() > 1)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_octal() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/x\\"), "/x\\");
    }

    #[test]
    fn root_is_a_mountpoint_and_tmpdir_is_not() {
        assert!(is_mountpoint(Path::new("/")));
        let d = tempfile::tempdir().unwrap();
        assert!(!is_mountpoint(&std::fs::canonicalize(d.path()).unwrap()));
    }
}
