//! The recent refusals and errors of a tree, kept in a small ring ([`EventLog`]) so that
//! `b2fs log MOUNTPOINT` can show what shells never see: an error of the last `close(2)` (a
//! refused `__attrs__` edit, a chunk of the wrong size) reaches no program, only the daemon's
//! log file. The ring is read through the root's `user.b2fs.log` extended attribute
//! ([`super::xattr`]), so reading it needs nothing but access to the mount.
//!
//! What is kept: every failed operation except name probes (`ENOENT`, and `lookup`, `access`,
//! `getattr`, which shells and editors fail on constantly) and editors' ACL copies
//! (`setxattr` EOPNOTSUPP); at most [`CAPACITY`] events, the
//! oldest dropped first, each message cut to [`MAX_MESSAGE`] bytes, so the rendering always
//! fits one extended attribute (64 KiB). Notices that are no failure (a scratch file created,
//! which will not persist) are kept the same way, with errno 0, rendered as `note:`.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::inode::Located;
use super::layout::{Node, NodeKind, ROOT_INO};
use super::{TreeError, chunk_name, display_chain};
use crate::reader::{AppendVec, ArrayId};

/// Events kept.
pub const CAPACITY: usize = 64;
/// Longest message kept, in bytes.
pub const MAX_MESSAGE: usize = 480;

/// One failed operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When it failed.
    pub time: SystemTime,
    /// The operation (`flush`, `release`, `write`, `rename`, ...).
    pub op: String,
    /// The file, relative to the mount root.
    pub path: String,
    /// The errno the caller got (0: a notice, not a failure).
    pub errno: i32,
    /// Why, one line (the error chain).
    pub message: String,
}

/// The ring of recent [`Event`]s. `Sync`: FUSE worker threads record into it.
#[derive(Debug, Default)]
pub struct EventLog {
    ring: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    events: VecDeque<Event>,
    /// Events recorded since the start, including those dropped from the ring.
    total: u64,
}

/// Whether a failure of `op` with `errno` is worth keeping: not a name probe, nor the ACL
/// copy editors try on every save (EOPNOTSUPP from `setxattr`).
pub fn worth_recording(op: &str, errno: i32) -> bool {
    let acl_probe = matches!(op, "setxattr" | "removexattr") && errno == libc::EOPNOTSUPP;
    errno != libc::ENOENT && !acl_probe && !matches!(op, "lookup" | "access" | "getattr")
}

impl EventLog {
    /// Records a notice about `op` on `path` that is no failure (errno 0): a file created
    /// where it will not persist.
    pub fn note(&self, op: &str, path: String, message: &str) {
        self.record(op, path, 0, message);
    }

    /// Records a failure of `op` on `path` now.
    pub fn record(&self, op: &str, path: String, errno: i32, message: &str) {
        let mut message = message.replace('\n', " ");
        if message.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str("...");
        }
        let event = Event {
            time: SystemTime::now(),
            op: op.to_owned(),
            path,
            errno,
            message,
        };
        let mut r = self.ring.lock();
        if r.events.len() == CAPACITY {
            r.events.pop_front();
        }
        r.events.push_back(event);
        r.total += 1;
    }

    /// The events kept, oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.ring.lock().events.iter().cloned().collect()
    }

    /// The text `b2fs log` prints: a header line, then one line per event, oldest first:
    /// `TIME OP PATH: ERRNO_NAME (strerror): message`.
    pub fn render(&self) -> String {
        let r = self.ring.lock();
        let dropped = r.total - r.events.len() as u64;
        let mut out = format!(
            "# {} refusals/errors since the mount ({} shown, {} older dropped)\n",
            r.total,
            r.events.len(),
            dropped
        );
        for e in &r.events {
            if e.errno == 0 {
                out.push_str(&format!(
                    "{} {} {}: note: {}\n",
                    utc(e.time),
                    e.op,
                    e.path,
                    e.message
                ));
                continue;
            }
            out.push_str(&format!(
                "{} {} {}: {} ({}): {}\n",
                utc(e.time),
                e.op,
                e.path,
                errno_name(e.errno),
                std::io::Error::from_raw_os_error(e.errno)
                    .to_string()
                    .split(" (os error")
                    .next()
                    .unwrap_or_default(),
                e.message
            ));
        }
        out
    }
}

/// The inode of the directory that shows the chunk files of `array` (the root when none does).
pub(crate) fn data_dir_of(nodes: &AppendVec<Node>, array: ArrayId) -> u64 {
    nodes
        .iter()
        .position(|n| matches!(n.kind, NodeKind::Dir { data: Some(a), .. } if a == array))
        .map_or(ROOT_INO, |i| i as u64 + 1)
}

/// `/a/b/leaf`: the path of fixed node `dir` from the root, then `leaf` if any.
pub(crate) fn node_path(nodes: &AppendVec<Node>, dir: u64, leaf: Option<String>) -> String {
    let mut parts: Vec<String> = leaf.into_iter().collect();
    let mut ino = dir;
    // At most one step per node: a malformed parent chain cannot loop.
    for _ in 0..nodes.len() {
        if ino == ROOT_INO {
            break;
        }
        let Some(n) = ino
            .checked_sub(1)
            .and_then(|i| nodes.get(usize::try_from(i).ok()?))
        else {
            break;
        };
        parts.push(n.name.clone());
        ino = n.parent;
    }
    parts.reverse();
    format!("/{}", parts.join("/"))
}

/// The symbolic name of the errnos the tree answers with (`EINVAL`, ...), else `errno N`.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::EEXIST => "EEXIST",
        libc::EROFS => "EROFS",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENODATA => "ENODATA",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ESTALE => "ESTALE",
        libc::ERANGE => "ERANGE",
        _ => return format!("errno {errno}"),
    };
    name.to_owned()
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC) of `t`.
pub fn utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (the proleptic Gregorian calendar, eras of 400
    // years).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

impl super::Tree {
    /// Records a failed operation for `b2fs log` (this module); name probes are not kept.
    pub fn note_error(&self, op: &str, ino: u64, e: &TreeError) {
        if worth_recording(op, e.errno()) {
            let path = self.path_of(ino);
            self.events.record(op, path, e.errno(), &display_chain(e));
        }
    }

    /// The path of `ino` from the mount root (`/data/00000001.bin`), for messages.
    pub fn path_of(&self, ino: u64) -> String {
        let (dir, leaf) = match self.inodes.locate(ino) {
            Located::Node(_) => (ino, None),
            Located::Chunk(id) => (
                data_dir_of(&self.nodes, id.array),
                Some(chunk_name(id.index)),
            ),
            Located::Zarr if self.entry(ino).is_ok() => return self.zarr_path_of(ino),
            Located::Scratch | Located::Zarr | Located::Nothing => {
                let parent = self.scratch.lock().files.get(&ino).map(|f| f.parent);
                (parent.unwrap_or(ROOT_INO), Some(self.scratch_name(ino)))
            }
        };
        node_path(&self.nodes, dir, leaf)
    }

    fn scratch_name(&self, ino: u64) -> String {
        let files = &self.scratch.lock().files;
        files
            .get(&ino)
            .map_or(format!("(inode {ino})"), |f| f.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century leap year) 12:34:56
        let t = UNIX_EPOCH + Duration::from_secs(951_827_696);
        assert_eq!(utc(t), "2000-02-29T12:34:56Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(utc(t), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn ring_keeps_the_newest_and_counts_the_dropped() {
        let log = EventLog::default();
        for i in 0..CAPACITY + 5 {
            log.record("flush", format!("f{i}"), libc::EINVAL, "bad");
        }
        let ev = log.events();
        assert_eq!(ev.len(), CAPACITY);
        assert_eq!(ev[0].path, "f5");
        let text = log.render();
        assert!(text.starts_with(&format!(
            "# {} refusals/errors since the mount ({CAPACITY} shown, 5 older dropped)\n",
            CAPACITY + 5
        )));
        assert!(
            text.contains(" flush f5: EINVAL (Invalid argument): bad\n"),
            "{text}"
        );
        assert!(text.len() < 64 * 1024);
    }

    #[test]
    fn long_messages_are_cut_and_kept_on_one_line() {
        let log = EventLog::default();
        let long = "x\n".repeat(MAX_MESSAGE);
        log.record("write", "data/00000000.bin".into(), libc::EFBIG, &long);
        let ev = log.events();
        assert_eq!(ev[0].message.len(), MAX_MESSAGE + 3);
        assert!(!ev[0].message.contains('\n'));
        // A full ring of the longest messages still fits one extended attribute.
        for _ in 0..CAPACITY {
            log.record("write", "p".repeat(255), libc::EFBIG, &long);
        }
        assert!(log.render().len() < 64 * 1024);
    }

    #[test]
    fn probes_are_not_recorded() {
        assert!(!worth_recording("lookup", libc::EINVAL));
        assert!(!worth_recording("flush", libc::ENOENT));
        assert!(worth_recording("flush", libc::EINVAL));
        assert!(worth_recording("release", libc::EIO));
        assert!(!worth_recording("setxattr", libc::EOPNOTSUPP));
        assert!(worth_recording("setxattr", libc::EPERM));
    }
}
