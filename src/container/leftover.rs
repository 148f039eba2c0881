//! The temp files of b2fs's own commits: their names and where they lie (the one place both
//! are decided: the commits make them here, `b2fs verify` and directory mounts tell them by
//! the same rules), and the ones a crash left behind.
//!
//! A commit that rewrites a whole file (a `.b2z` zip, a sparse frame's `chunks.b2frame`, a
//! bcolz chunk or `__attrs__`, a compaction) writes it first to a temp file of its own,
//! `.b2fs-PID-T-N-<target's name>.b2fs-tmp` (a `.b2z` member in the making:
//! `.b2fs-member`; `own_temp`), beside the target or beside the outermost `.b2d` store
//! holding it (`temp_dir`), and renames it over the target. A crash between the two
//! leaves the temp file: never part of the source (readers skip it, the next commit takes a
//! name of its own), but disk space until removed. This module tells such names apart
//! ([`commit_temp_target`]: directory mounts hide them) and finds the ones of a source
//! ([`leftovers`]: `b2fs verify` lists them).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// What every commit temp file's name starts with.
pub const PREFIX: &str = ".b2fs-";
/// The suffix of a whole-file rewrite's temp file.
pub const TEMP_SUFFIX: &str = ".b2fs-tmp";
/// The suffix of a `.b2z` member written before its zip is rebuilt.
pub const MEMBER_SUFFIX: &str = ".b2fs-member";

/// Most bytes of the target's name a temp file's name holds (the rest is cut: the whole
/// name stays within the 255 bytes of a file name).
const MAX_TARGET_NAME: usize = 200;

/// Most directory entries [`leftovers`] looks at (a bcolz carray of many chunk files, a
/// directory of sources): past it the walk stops and says so.
pub const MAX_WALKED: usize = 200_000;

/// A path for a temp file of this process's own (its id, a token `T` of the time of its
/// first one (8 hex digits), and a counter `N`, never reused while it runs) for a
/// whole-file rewrite of `target`: `.b2fs-PID-T-N-<target's name><suffix>` (the name cut to
/// 200 bytes) in [`temp_dir`]`(target)`. Create it where no file is (`O_EXCL`): a file
/// another writer made there is theirs.
pub(crate) fn own_temp(target: &Path, suffix: &str) -> PathBuf {
    temp_dir(target).join(temp_name(target.file_name().unwrap_or_default(), suffix))
}

/// [`own_temp`] with the suffix [`TEMP_SUFFIX`]: the temp file a whole-file rewrite of
/// `target` is written to before its rename.
pub(crate) fn temp_for(target: &Path) -> PathBuf {
    own_temp(target, TEMP_SUFFIX)
}

/// A fresh temp file name of this process's own for the file named `target` (see
/// [`own_temp`]); it lies in [`temp_dir_in`] of the target's directory.
pub(crate) fn temp_name(target: &OsStr, suffix: &str) -> OsString {
    static TEMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // The time of the first temp file, to the nanosecond: two processes of one PID (PID
    // namespaces, other hosts of a shared file system, a PID reused after a crash left a
    // file) do not take each other's names, which `create_new` would refuse.
    static STARTED: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let token = *STARTED.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        (t.as_nanos() as u32) ^ (t.as_secs() as u32).rotate_left(16)
    });
    let n = TEMPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = format!("{PREFIX}{}-{token:08x}-{n}-", std::process::id()).into_bytes();
    name.extend_from_slice(kept_name(target));
    name.extend_from_slice(suffix.as_bytes());
    OsString::from_vec(name)
}

/// Where the temp files of a rewrite of `target` lie: beside it, or, when `target` lies
/// inside a `.b2d` store (a directory holding `embed.b2e`, at any depth above it), beside
/// the outermost such store: python-blosc2 takes any file of a `.b2d` that reads as a frame
/// for a key, whatever its name, so a crash between the temp file's creation and its rename
/// would leave one in the store. The rename then crosses directories of one file system (a
/// store that is a mount point of its own fails it: `EXDEV`).
pub(crate) fn temp_dir(target: &Path) -> PathBuf {
    temp_dir_in(parent_dir(target))
}

/// [`temp_dir`] of the files of directory `dir` (one look up the tree for many files).
pub(crate) fn temp_dir_in(dir: &Path) -> PathBuf {
    outside_store(dir).unwrap_or_else(|| dir.to_path_buf())
}

/// The directory holding the outermost `.b2d` store (a directory with an `embed.b2e` file)
/// among `dir` and the directories above it, if any.
fn outside_store(dir: &Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let outer = dir
        .ancestors()
        .filter(|a| a.join("embed.b2e").is_file())
        .last()?;
    outer.parent().map(Path::to_path_buf)
}

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The name of the file a commit temp file named `name` was for
/// (`.b2fs-PID-T-N-<target><suffix>`: PID and N decimal, T hexadecimal; or
/// `.b2fs-PID-N-<target><suffix>`, as b2fs named them before the start-time token), or
/// `None` when `name` is not one.
pub fn commit_temp_target(name: &OsStr) -> Option<&OsStr> {
    let b = name.as_bytes();
    let rest = b.strip_prefix(PREFIX.as_bytes())?;
    let rest = rest
        .strip_suffix(TEMP_SUFFIX.as_bytes())
        .or_else(|| rest.strip_suffix(MEMBER_SUFFIX.as_bytes()))?;
    let field = |f: &[u8], hex: bool| {
        !f.is_empty()
            && f.iter().all(|c| match hex {
                true => c.is_ascii_hexdigit(),
                false => c.is_ascii_digit(),
            })
    };
    // The fields before the target's name: PID, start-time token, counter; else PID, counter.
    let parts: Vec<&[u8]> = rest.splitn(4, |&c| c == b'-').collect();
    // T is always 8 hex digits (`own_temp`), so an old name whose target starts with
    // `<digits>-` is not taken for a new one.
    let target: &[u8] = match parts.as_slice() {
        [pid, t, n, target]
            if field(pid, false) && t.len() == 8 && field(t, true) && field(n, false) =>
        {
            target
        }
        [pid, n, _, ..] if field(pid, false) && field(n, false) => {
            rest.get(pid.len() + n.len() + 2..)?
        }
        _ => return None,
    };
    (!target.is_empty()).then(|| OsStr::from_bytes(target))
}

/// The commit temp files a crash left for local source `source`: those inside it (a
/// directory source: a sparse frame, a bcolz carray or ctable, a `.b2d` store, a directory
/// of sources) and those beside it that were for it (a file source by its name; a `.b2d`
/// store, whose temp files lie beside it, by the names of its files: a sibling store's of
/// the same names too). Regular files only, and none whose process runs now (a commit under
/// way). Sorted; the flag says whether the walk stopped at [`MAX_WALKED`] entries.
/// Unreadable directories are skipped. Beside means where `temp_dir` puts them: for a
/// file inside a `.b2d` store, checked on its own, beside the outermost store.
pub fn leftovers(source: &Path) -> (Vec<PathBuf>, bool) {
    // Absolute, as the name it was given (a symlinked source's temp files are named after
    // the link, beside it); `.` and `..`, which have no name, canonical.
    let absolute = std::path::absolute(source).unwrap_or_else(|_| source.to_path_buf());
    let source = &match absolute.file_name() {
        Some(_) => absolute,
        None => std::fs::canonicalize(source).unwrap_or(absolute),
    };
    let mut found = Vec::new();
    let mut names: std::collections::HashSet<Vec<u8>> = Default::default();
    let mut walked = 0usize;
    let mut cut = false;
    let meta = std::fs::symlink_metadata(source);
    let is_dir = source.is_dir();
    if is_dir {
        let mut stack = vec![source.to_path_buf()];
        'walk: while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                walked += 1;
                if walked > MAX_WALKED {
                    cut = true;
                    break 'walk;
                }
                let name = e.file_name();
                let Ok(kind) = e.file_type() else { continue };
                if commit_temp_target(&name).is_some() && kind.is_file() {
                    if !in_use(&name) {
                        found.push(e.path());
                    }
                } else if kind.is_dir() {
                    stack.push(e.path());
                } else {
                    names.insert(kept_name(&name).to_vec());
                }
            }
        }
    } else if meta.is_ok()
        && let Some(own) = source.file_name()
    {
        names.insert(kept_name(own).to_vec());
    }
    // Where the source's commits put their temp files ([`temp_dir`]): a file source's own
    // (beside it, or beside the outermost `.b2d` store it lies in); a `.b2d` store's, named
    // after the files inside it (beside it, or beside the outermost store holding it).
    let beside = match is_dir {
        false => Some(temp_dir(source)),
        true if source.join("embed.b2e").is_file() => Some(temp_dir_in(source)),
        true => None,
    };
    if let (Some(dir), false) = (beside, cut)
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        for e in entries.flatten() {
            walked += 1;
            if walked > MAX_WALKED {
                cut = true;
                break;
            }
            let name = e.file_name();
            let ours = commit_temp_target(&name).is_some_and(|t| names.contains(t.as_bytes()));
            if ours && e.file_type().is_ok_and(|k| k.is_file()) && !in_use(&name) {
                found.push(e.path());
            }
        }
    }
    found.sort();
    (found, cut)
}

/// A file's name as the name of a temp file for it holds it (cut to [`MAX_TARGET_NAME`]
/// bytes).
fn kept_name(name: &OsStr) -> &[u8] {
    let b = name.as_bytes();
    &b[..b.len().min(MAX_TARGET_NAME)]
}

/// Whether the process that named commit temp file `name` runs now (its commit may be under
/// way: not a leftover). A PID of another namespace or host may look alive: then the file
/// is not listed (never one listed that may be in use).
fn in_use(name: &OsStr) -> bool {
    let pid = name.as_bytes()[PREFIX.len()..]
        .split(|&c| c == b'-')
        .next()
        .and_then(|f| std::str::from_utf8(f).ok())
        .and_then(|f| f.parse::<u32>().ok());
    pid.is_some_and(|p| Path::new("/proc").join(p.to_string()).exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_temp_names_give_their_target_and_nothing_else_does() {
        fn t(s: &str) -> Option<&str> {
            commit_temp_target(OsStr::new(s)).map(|t| t.to_str().unwrap())
        }
        assert_eq!(t(".b2fs-12-0a1b2c3d-0-x.b2nd.b2fs-tmp"), Some("x.b2nd"));
        assert_eq!(
            t(".b2fs-7-000000ff-12-a-b-c.b2z.b2fs-member"),
            Some("a-b-c.b2z")
        );
        assert_eq!(t(".b2fs-12-00000a1b-3-__0.blp.b2fs-tmp"), Some("__0.blp"));
        // Before the start-time token: PID and counter.
        assert_eq!(t(".b2fs-7-0-a.b2nd.b2fs-tmp"), Some("a.b2nd"));
        for not in [
            ".b2fs-12-0a1b-3-.b2fs-tmp",
            // Two numeric fields and nothing else (no target): no panic, no match.
            ".b2fs-12-3.b2fs-tmp",
            ".b2fs-x-0a1b-3-a.b2fs-tmp",
            ".b2fs-12-zz-3-a.b2fs-tmp",
            ".b2fs-12-0a1b-3-.b2fs-tmp",
            ".b2fs-12-a.b2fs-tmp",
            ".b2fs-12-0a1b-3-a",
            "b2fs-12-0a1b-3-a.b2fs-tmp",
            "x.b2nd",
        ] {
            assert_eq!(t(not), None, "{not}");
        }
    }

    #[test]
    fn temp_files_are_named_by_the_process_and_lie_outside_the_outermost_store() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let inner = root.join("outer.b2d/g/inner.b2d/h");
        std::fs::create_dir_all(&inner).unwrap();
        for store in ["outer.b2d", "outer.b2d/g/inner.b2d"] {
            std::fs::write(root.join(store).join("embed.b2e"), b"").unwrap();
        }
        let leaf = inner.join("x.b2f");
        let (a, b) = (temp_for(&leaf), temp_for(&leaf));
        assert_ne!(a, b, "a name of each commit's own");
        assert_eq!(a.parent(), Some(root.as_path()), "{}", a.display());
        assert_eq!(temp_dir(&leaf), root);
        assert_eq!(temp_dir_in(&inner), root);
        let name = a.file_name().unwrap().to_str().unwrap();
        let head = format!(".b2fs-{}-", std::process::id());
        assert!(
            name.starts_with(&head) && name.ends_with("-x.b2f.b2fs-tmp"),
            "{name}"
        );
        // The name `b2fs verify` and directory mounts tell leftovers by.
        let target = commit_temp_target(a.file_name().unwrap());
        assert_eq!(target, Some(OsStr::new("x.b2f")));
        // PID, the process's start token (8 hex digits), the counter.
        let fields: Vec<&str> = name[1..].splitn(5, '-').collect();
        assert!(
            fields[2].len() == 8 && fields[2].chars().all(|c| c.is_ascii_hexdigit()),
            "{name}"
        );
        // Outside any store: beside the file; a long name is cut, and told by its cut.
        let plain = root.join("y".repeat(255));
        let t = own_temp(&plain, MEMBER_SUFFIX);
        assert_eq!(t.parent(), Some(root.as_path()));
        assert!(t.file_name().unwrap().len() <= 255, "{}", t.display());
        let told = commit_temp_target(t.file_name().unwrap()).unwrap();
        assert_eq!(told.as_bytes(), kept_name(plain.file_name().unwrap()));
    }

    #[test]
    fn leftovers_are_found_inside_and_beside_their_source_only() {
        let dir = tempfile::tempdir().unwrap();
        // Canonical: the temp files of a store's files are looked for beside it, canonically.
        let d = &std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(d.join("a.b2nd"), b"frame").unwrap();
        std::fs::write(d.join(".b2fs-4999999-000000ab-0-a.b2nd.b2fs-tmp"), b"").unwrap();
        std::fs::write(d.join(".b2fs-4999999-000000ab-1-other.b2nd.b2fs-tmp"), b"").unwrap();
        // One whose process runs (this one's: a commit under way) is no leftover.
        let live = format!(".b2fs-{}-000000ab-2-a.b2nd.b2fs-tmp", std::process::id());
        std::fs::write(d.join(&live), b"").unwrap();
        let (found, cut) = leftovers(&d.join("a.b2nd"));
        assert!(!cut);
        assert_eq!(
            found,
            vec![d.join(".b2fs-4999999-000000ab-0-a.b2nd.b2fs-tmp")]
        );
        std::fs::remove_file(d.join(&live)).unwrap();
        // A source reached through a symlink: its temp files are named after the link and
        // lie beside it (as mounts and `compact` name them).
        std::fs::create_dir(d.join("real")).unwrap();
        std::fs::write(d.join("real/r.b2nd"), b"frame").unwrap();
        std::os::unix::fs::symlink("real/r.b2nd", d.join("link.b2nd")).unwrap();
        std::fs::write(d.join(".b2fs-4999999-000000ab-3-link.b2nd.b2fs-tmp"), b"").unwrap();
        let (found, _) = leftovers(&d.join("link.b2nd"));
        assert_eq!(
            found,
            vec![d.join(".b2fs-4999999-000000ab-3-link.b2nd.b2fs-tmp")]
        );

        // A `.b2d` store: its leaves' temp files lie beside it; one inside is found too.
        let store = d.join("s.b2d");
        std::fs::create_dir_all(store.join("g")).unwrap();
        std::fs::write(store.join("embed.b2e"), b"").unwrap();
        std::fs::write(store.join("g/v.b2nd"), b"").unwrap();
        std::fs::write(
            store.join("g/.b2fs-4999998-000000cd-0-__vlmeta__.b2f.b2fs-tmp"),
            b"",
        )
        .unwrap();
        std::fs::write(d.join(".b2fs-4999998-000000cd-1-v.b2nd.b2fs-tmp"), b"").unwrap();
        let (found, _) = leftovers(&store);
        assert_eq!(
            found,
            vec![
                d.join(".b2fs-4999998-000000cd-1-v.b2nd.b2fs-tmp"),
                store.join("g/.b2fs-4999998-000000cd-0-__vlmeta__.b2f.b2fs-tmp"),
            ]
        );
        // A file of the store checked on its own: its temp files lie beside the store.
        let (found, _) = leftovers(&store.join("g/v.b2nd"));
        assert_eq!(
            found,
            vec![d.join(".b2fs-4999998-000000cd-1-v.b2nd.b2fs-tmp")]
        );
    }
}
