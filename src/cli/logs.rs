//! The background daemon's log file: where it is, and the clearing of old logs of ended
//! daemons beside it.
//!
//! Each background mount logs to `b2fs-PID.log` in `$XDG_RUNTIME_DIR` (cleared at logout) or,
//! where that is unset (root mounts made by mount(8) or fstab, services), in `/tmp`, which
//! nothing clears while the machine runs: a machine that mounts at every job start would
//! gather a log per mount forever. A starting daemon therefore removes, in its log directory,
//! the logs of daemons that have ended once they are older than [`KEEP_AGE`], or beyond the
//! newest [`KEEP_ENDED`] of them. It only ever touches regular files named exactly
//! `b2fs-<pid>.log` that belong to its own user and whose process is gone: a live daemon's log,
//! another user's, a symlink or any other file is left alone, and a log of a crash stays
//! readable for a week (docs/TROUBLESHOOTING.md points users at it).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How long a log of an ended daemon is kept at least (unless [`KEEP_ENDED`] newer ones exist).
pub(super) const KEEP_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// How many logs of ended daemons are kept, the newest first, whatever their age.
pub(super) const KEEP_ENDED: usize = 32;

/// Where a daemon with process id `pid` logs.
pub(super) fn log_path(pid: u32) -> PathBuf {
    log_dir().join(log_name(pid))
}

/// The directory of the daemons' logs: `$XDG_RUNTIME_DIR` when it is a directory, else `/tmp`.
fn log_dir() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

fn log_name(pid: u32) -> String {
    format!("b2fs-{pid}.log")
}

/// The process id a daemon log's file name carries (`b2fs-<pid>.log`, digits only).
fn pid_of(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("b2fs-")?.strip_suffix(".log")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Removes the old logs of ended daemons beside `own` (this daemon's log, which must exist and
/// is never removed; its owner is the user whose logs are considered), as the module says; `alive` tells whether a process id is still running. Returns how many
/// were removed. Errors (a file gone meanwhile, no permission) only leave that file.
pub(super) fn prune_ended(own: &Path, now: SystemTime, alive: impl Fn(u32) -> bool) -> usize {
    let Some(dir) = own.parent() else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    // This daemon's own log was just made (or opened) by it: its owner is this user.
    let Ok(uid) = std::fs::metadata(own).map(|m| m.uid()) else {
        return 0;
    };
    let mut ended: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(pid) = entry.file_name().to_str().and_then(pid_of) else {
            continue;
        };
        if path == own {
            continue;
        }
        // `DirEntry::metadata` does not follow a symlink: only plain files are considered.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.file_type().is_file() || meta.uid() != uid || alive(pid) {
            continue;
        }
        ended.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), path));
    }
    ended.sort_by_key(|e| std::cmp::Reverse(e.0)); // newest first
    let mut removed = 0;
    for (i, (modified, path)) in ended.iter().enumerate() {
        let old = now.duration_since(*modified).unwrap_or_default() > KEEP_AGE;
        if (i >= KEEP_ENDED || old) && std::fs::remove_file(path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{File, FileTimes};

    fn log_at(dir: &Path, pid: u32, age: Duration, now: SystemTime) -> PathBuf {
        let p = dir.join(log_name(pid));
        let f = File::create(&p).unwrap();
        f.set_times(FileTimes::new().set_modified(now - age))
            .unwrap();
        p
    }

    #[test]
    fn names_carry_a_pid_and_nothing_else() {
        assert_eq!(pid_of("b2fs-123.log"), Some(123));
        for other in [
            "b2fs-.log",
            "b2fs-12a.log",
            "b2fs-+1.log",
            "b2fs-1.log.1",
            "x-1.log",
        ] {
            assert_eq!(pid_of(other), None, "{other}");
        }
        assert_eq!(pid_of("b2fs-99999999999.log"), None); // past u32
    }

    #[test]
    fn ended_logs_go_when_old_or_beyond_the_newest_kept() {
        let d = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let day = Duration::from_secs(24 * 3600);
        let own = log_at(d.path(), 1, 30 * day, now);
        let live_old = log_at(d.path(), 2, 30 * day, now);
        let ended_old = log_at(d.path(), 3, 8 * day, now);
        let ended_recent = log_at(d.path(), 4, day, now);
        // Not a daemon's log by name, old: kept.
        let other = d.path().join("b2fs-5.log.bak");
        File::create(&other).unwrap();
        // A symlink named like a log, pointing at an old log of an ended daemon elsewhere.
        let elsewhere = tempfile::tempdir().unwrap();
        let target = log_at(elsewhere.path(), 6, 30 * day, now);
        let link = d.path().join(log_name(7));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // More recent ended logs than are kept: the oldest of them go.
        let many: Vec<PathBuf> = (0..KEEP_ENDED as u32 + 3)
            .map(|i| {
                log_at(
                    d.path(),
                    100 + i,
                    Duration::from_secs(60 * u64::from(i)),
                    now,
                )
            })
            .collect();

        let removed = prune_ended(&own, now, |pid| pid == 2);

        for kept in [&own, &live_old, &other, &link, &target] {
            assert!(
                kept.symlink_metadata().is_ok(),
                "{} was removed",
                kept.display()
            );
        }
        assert!(
            !ended_old.exists(),
            "an ended daemon's log of 8 days stayed"
        );
        // The newest KEEP_ENDED ended logs stay: `many` holds the newest ones.
        for (i, p) in many.iter().enumerate() {
            assert_eq!(p.exists(), i < KEEP_ENDED, "log {i} of the many");
        }
        assert!(
            !ended_recent.exists(),
            "beyond the newest {KEEP_ENDED}, a day old"
        );
        assert_eq!(removed, 1 + 3 + 1);
    }
}
