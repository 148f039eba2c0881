//! The background daemon's log file: where it is, and the clearing of old logs of ended
//! daemons beside it.
//!
//! Each background mount logs to `b2fs-PID.log` in `$XDG_RUNTIME_DIR` (cleared at logout) or,
//! where that is unset (root mounts made by mount(8) or fstab, services), in `/tmp`, which
//! nothing clears while the machine runs: a machine that mounts at every job start would
//! gather a log per mount forever. A starting daemon therefore removes, in its log directory,
//! the logs of daemons that have ended once their last line is older than [`KEEP_AGE`], or
//! older than [`KEEP_RECENT`] when [`KEEP_ENDED`] newer logs of ended daemons are there. It
//! only ever touches regular files named exactly `b2fs-<pid>.log` that belong to its effective
//! user and whose process is gone (looked at again, with the file's identity, right before the
//! removal): a live daemon's log, another user's, a symlink or any other file is left alone. A
//! log of a crash stays readable for a day at least, and for a week unless many mounts ended
//! since (docs/TROUBLESHOOTING.md points users at it); a daemon of another PID namespace that
//! shares the directory looks ended, so its log too is safe for a day only.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How long a log of an ended daemon is kept (unless [`KEEP_ENDED`] newer ones exist).
pub(super) const KEEP_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// How many logs of ended daemons are kept, the newest first, past [`KEEP_RECENT`].
pub(super) const KEEP_ENDED: usize = 32;

/// How long a log of an ended daemon is kept whatever the count.
pub(super) const KEEP_RECENT: Duration = Duration::from_secs(24 * 3600);

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

/// The process's effective user id (the second field of `Uid:` in `/proc/self/status`).
pub(super) fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Removes the old logs of user `uid`'s ended daemons beside `own` (this daemon's log, never
/// removed), as the module says; `alive` tells whether a process id is still running. Returns
/// how many were removed. Errors (a file gone meanwhile, no permission) only leave that file.
pub(super) fn prune_ended(
    own: &Path,
    uid: u32,
    now: SystemTime,
    alive: impl Fn(u32) -> bool,
) -> usize {
    let Some(dir) = own.parent() else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut ended: Vec<(SystemTime, PathBuf, u32, u64)> = Vec::new();
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
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        ended.push((modified, path, pid, meta.ino()));
    }
    ended.sort_by_key(|e| std::cmp::Reverse(e.0)); // newest first
    let mut removed = 0;
    for (i, (modified, path, pid, ino)) in ended.iter().enumerate() {
        let age = now.duration_since(*modified).unwrap_or_default();
        if !(age > KEEP_AGE || (i >= KEEP_ENDED && age > KEEP_RECENT)) {
            continue;
        }
        // A daemon started meanwhile with the same (reused) pid may have opened the file:
        // the removal goes ahead only for the same file, unwritten since, its pid still gone.
        let same = std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.ino() == *ino && m.modified().ok() == Some(*modified));
        if same && !alive(*pid) && std::fs::remove_file(path).is_ok() {
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
        let (hour, day) = (Duration::from_secs(3600), Duration::from_secs(24 * 3600));
        let own = log_at(d.path(), 1, 30 * day, now);
        let live_old = log_at(d.path(), 2, 30 * day, now);
        let ended_old = log_at(d.path(), 3, 8 * day, now);
        // Not a daemon's log by name, old: kept.
        let other = d.path().join("b2fs-5.log.bak");
        File::create(&other).unwrap();
        // A symlink named like a log, pointing at an old log of an ended daemon elsewhere.
        let elsewhere = tempfile::tempdir().unwrap();
        let target = log_at(elsewhere.path(), 6, 30 * day, now);
        let link = d.path().join(log_name(7));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // The newest three ended an hour ago; then more of the last week than are kept.
        let fresh: Vec<PathBuf> = (0..3)
            .map(|i| log_at(d.path(), 200 + i, hour, now))
            .collect();
        let many: Vec<PathBuf> = (0..KEEP_ENDED as u32 + 2)
            .map(|i| log_at(d.path(), 100 + i, day + hour * (i + 1), now))
            .collect();

        let uid = effective_uid().expect("the effective uid");
        let removed = prune_ended(&own, uid, now, |pid| pid == 2);

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
        assert!(fresh.iter().all(|p| p.exists()), "an hour-old log went");
        // Newest first: the three fresh ones, then the many, of which the newest
        // KEEP_ENDED - 3 stay.
        for (i, p) in many.iter().enumerate() {
            assert_eq!(p.exists(), i + 3 < KEEP_ENDED, "log {i} of the many");
        }
        assert_eq!(removed, 1 + 5);
    }

    #[test]
    fn ended_logs_of_the_last_day_stay_however_many() {
        let d = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let own = log_at(d.path(), 1, Duration::ZERO, now);
        let recent: Vec<PathBuf> = (0..2 * KEEP_ENDED as u32)
            .map(|i| {
                log_at(
                    d.path(),
                    100 + i,
                    Duration::from_secs(60 * u64::from(i)),
                    now,
                )
            })
            .collect();
        let uid = effective_uid().expect("the effective uid");
        assert_eq!(prune_ended(&own, uid, now, |_| false), 0);
        assert!(recent.iter().all(|p| p.exists()));
        // Another user's uid: nothing of this user's is touched, however old.
        let old = log_at(d.path(), 9, Duration::from_secs(30 * 24 * 3600), now);
        assert_eq!(prune_ended(&own, uid.wrapping_add(1), now, |_| false), 0);
        assert!(old.exists());
    }
}
