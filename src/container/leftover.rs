//! The temp files of b2fs's own commits, by name, and the ones a crash left behind.
//!
//! A commit that rewrites a whole file (a `.b2z` zip, a sparse frame's `chunks.b2frame`, a
//! bcolz chunk or `__attrs__`, a compaction) writes it first to a temp file of its own,
//! `.b2fs-PID-T-N-<target's name>.b2fs-tmp` (a `.b2z` member in the making:
//! `.b2fs-member`), beside the target or beside the outermost `.b2d` store holding it
//! (`src/container/write/io.rs`, `own_temp`), and renames it over the target. A crash
//! between the two leaves the temp file: never part of the source (readers skip it, the
//! next commit takes a name of its own), but disk space until removed. This module tells
//! such names apart ([`commit_temp_target`]: directory mounts hide them) and finds the ones
//! of a source ([`leftovers`]: `b2fs verify` lists them).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What every commit temp file's name starts with.
pub const PREFIX: &str = ".b2fs-";
/// The suffix of a whole-file rewrite's temp file.
pub const TEMP_SUFFIX: &str = ".b2fs-tmp";
/// The suffix of a `.b2z` member written before its zip is rebuilt.
pub const MEMBER_SUFFIX: &str = ".b2fs-member";

/// Most directory entries [`leftovers`] looks at (a bcolz carray of many chunk files, a
/// directory of sources): past it the walk stops and says so.
pub const MAX_WALKED: usize = 200_000;

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
/// Unreadable directories are skipped. The temp files of a file inside a `.b2d` store,
/// checked on its own, lie beside the outermost store: not looked for.
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
                    names.insert(own_name(&name));
                }
            }
        }
    } else if meta.is_ok() {
        if let Some(own) = source.file_name() {
            names.insert(own_name(own));
        }
    }
    // Beside the source: a file source's own temp files; a `.b2d` store's, named after the
    // files inside it.
    let beside = !is_dir || source.join("embed.b2e").is_file();
    if let (true, Some(parent)) = (beside && !cut, source.parent()) {
        let parent = match parent.as_os_str().is_empty() {
            true => Path::new("."),
            false => parent,
        };
        if let Ok(entries) = std::fs::read_dir(parent) {
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
    }
    found.sort();
    (found, cut)
}

/// A file's name as a temp file's name holds it (cut to 200 bytes, `own_temp`).
fn own_name(name: &OsStr) -> Vec<u8> {
    let b = name.as_bytes();
    b[..b.len().min(200)].to_vec()
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
    fn leftovers_are_found_inside_and_beside_their_source_only() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
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
    }
}
