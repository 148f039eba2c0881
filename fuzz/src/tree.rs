//! The whole-tree targets: a [`Tree`] (the filesystem a mount shows, without a kernel) over a
//! fuzzed source.
//!
//! - `tree_walk`: every directory listed and every file read (whole, then at odd offsets and
//!   sizes), with each inode's attributes and extended attributes;
//! - `tree_edit`: one write of hostile bytes through a writable tree, then its commit: refused
//!   (the source left byte for byte as it was) or applied (the source opens again and shows
//!   what was written).
//!
//! An input is one kind byte ([`Kind`]: frame, bcolz carray, `.b2z`, `.b2d`) and the source's
//! bytes; `tree_edit` adds an operation byte after the kind and the bytes to write after the
//! last [`EDIT_SEPARATOR`].

use std::path::{Path, PathBuf};

use b2fs::tree::{Attr, EntryKind, ROOT_INO, ReaderOptions, Tree, TreeError, TreeOptions};

use super::source::{self, Kind};

/// Separates the source from the bytes `tree_edit` writes.
pub const EDIT_SEPARATOR: &[u8] = b"\n##edit##\n";

/// Most inodes (directories and files) one walk visits.
const MAX_VISITS: usize = 160;
/// Most entries of one directory a walk takes (a data directory may list 2^40 chunks).
const MAX_LISTED: usize = 40;
/// Deepest directory a walk enters.
const MAX_DEPTH: usize = 10;
/// Bytes of each file read from its start, in reads of [`STEP`] bytes.
const HEAD: u64 = 256 << 10;
/// The size of a sequential read.
const STEP: u32 = 64 << 10;

/// The tree's options: no prefetch or decode threads (every read happens in the target's
/// thread), a small cache.
pub fn options(writable: bool) -> TreeOptions {
    TreeOptions {
        reader: ReaderOptions {
            cache_size: 16 << 20,
            prefetch_chunks: 0,
            prefetch_threads: 0,
            decode_threads: 1,
            parallel_decode_min: usize::MAX,
            ..ReaderOptions::default()
        },
        writable,
        ..TreeOptions::default()
    }
}

/// The scratch directory of the tree targets.
fn dir() -> PathBuf {
    let d = super::scratch().join("tree");
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Builds a read-only tree over the source in `data` and walks all of it.
pub fn tree_walk(data: &[u8]) {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let Some(path) = source::write(&dir(), Kind::of(k), rest) else {
        return;
    };
    if let Ok(t) = Tree::from_source(&path, options(false)) {
        walk(&t, u64::from(k) << 8 | rest.len() as u64);
    }
}

/// Lists every directory and reads every file of `t`, within the budgets above. `salt` moves
/// one read of each file to an input-dependent offset.
pub fn walk(t: &Tree, salt: u64) {
    let _ = t.statfs();
    for name in [".", "..", "", "zarr", "data", "00000000.bin", "__attrs__"] {
        let _ = t.lookup(ROOT_INO, name);
    }
    let _ = t.lookup(ROOT_INO, &"x".repeat(300));
    let mut stack = vec![(ROOT_INO, 0usize)];
    let mut visits = 0;
    while let Some((ino, depth)) = stack.pop() {
        visits += 1;
        if visits > MAX_VISITS {
            break;
        }
        touch_inode(t, ino);
        let Ok(listing) = t.readdir(ino, 0) else {
            continue;
        };
        let entries: Vec<_> = listing.take(MAX_LISTED).collect();
        // Far positions of the listing: computed, never allocated.
        for off in [1000, u64::MAX - 1] {
            if let Ok(mut far) = t.readdir(ino, off) {
                let _ = far.next();
            }
        }
        for e in entries {
            if e.name == "." || e.name == ".." {
                continue;
            }
            let attr = match t.lookup(ino, &e.name) {
                Ok(a) => a,
                Err(_) => continue,
            };
            assert_eq!(
                attr.kind, e.kind,
                "lookup and readdir disagree on {:?}",
                e.name
            );
            match attr.kind {
                EntryKind::Directory if depth < MAX_DEPTH => stack.push((attr.ino, depth + 1)),
                EntryKind::Directory => {}
                EntryKind::File => {
                    visits += 1;
                    touch_inode(t, attr.ino);
                    read_file(t, &attr, salt);
                }
            }
        }
        let _ = t.lookup(ino, "99999999.bin");
    }
}

/// Attributes, access checks and extended attributes of `ino`.
fn touch_inode(t: &Tree, ino: u64) {
    let _ = t.getattr(ino);
    let _ = t.access(ino, libc::R_OK | libc::W_OK | libc::X_OK);
    if let Ok(names) = t.listxattr(ino) {
        for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()).take(32) {
            if let Ok(name) = std::str::from_utf8(name) {
                let _ = t.getxattr(ino, name);
            }
        }
    }
    let _ = t.getxattr(ino, "user.b2fs.nothing");
}

/// Reads file `attr` whole up to [`HEAD`] bytes, then at odd offsets and sizes; no read may
/// return more than it asked for, or bytes past the file's size.
fn read_file(t: &Tree, attr: &Attr, salt: u64) {
    let Ok(fh) = t.open(attr.ino, libc::O_RDONLY) else {
        return;
    };
    let size = attr.size;
    let check = |off: u64, want: u32| -> bool {
        match t.read(attr.ino, fh, off, want) {
            Ok(d) => {
                assert!(d.len() <= want as usize, "read of {want} gave {}", d.len());
                assert!(
                    off.saturating_add(d.len() as u64) <= size || d.is_empty(),
                    "read at {off} of a {size}-byte file gave {} bytes",
                    d.len()
                );
                !d.is_empty()
            }
            Err(_) => false,
        }
    };
    let mut off = 0;
    while off < size.min(HEAD) && check(off, STEP) {
        off += u64::from(STEP);
    }
    let odd = [
        (size.saturating_sub(1), 1),
        ((size / 2).saturating_sub(3), 4099),
        (size / 3 + 1, 131_073),
        (size, 8),
        (size.saturating_add(4096), 16),
        (u64::MAX - 7, 8),
        (salt % size.saturating_add(1), 1000),
        (salt % 4093, 1 << 20),
    ];
    for (off, want) in odd {
        check(off, want);
    }
    let _ = t.release(fh);
}

/// What `tree_edit` does, chosen by the input's operation byte (modulo 8).
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Truncate the root `__attrs__` and write the bytes.
    Attrs,
    /// Write the bytes to a new scratch file in the root and rename it over `__attrs__`.
    RenameAttrs,
    /// Write to `meta/storage` (a metadata file: refused).
    Meta,
    /// Write to the Zarr view's root `zarr.json` (refused unless the bytes are already there).
    ZarrJson,
    /// Write to the first chunk file.
    Chunk,
    /// Write to `array.npy`.
    Npy,
    /// Write the bytes to the `__attrs__` of the root's first sub-directory (a group of a
    /// store, or a table's column).
    GroupAttrs,
    /// Set the size of the root `__attrs__`.
    Truncate,
}

/// The offsets (and sizes, for [`Op::Truncate`]) an operation uses: the operation byte's
/// high bits pick one.
const OFFSETS: [u64; 8] = [0, 1, 7, 100, 4096, 1 << 20, 1 << 40, u64::MAX - 3];

/// What became of a `tree_edit` input.
#[derive(Debug)]
pub enum Outcome {
    /// The input is too short, or its source does not open as a tree.
    NoTree,
    /// The file to edit does not exist in this tree.
    NoFile,
    /// The edit was refused with this error (and the source left as it was).
    Refused(TreeError),
    /// The edit was committed (and the source opens again showing it).
    Applied,
}

/// Opens a writable tree over the source, makes one edit and closes (commits) it; checks
/// that a refused edit left the source byte for byte as it was and that an applied one
/// opens again showing the bytes written.
pub fn tree_edit(data: &[u8]) {
    let _ = tree_edit_outcome(data);
}

/// [`tree_edit`], saying what became of the edit.
pub fn tree_edit_outcome(data: &[u8]) -> Outcome {
    let [k, op, rest @ ..] = data else {
        return Outcome::NoTree;
    };
    let (src, payload) = match rest
        .windows(EDIT_SEPARATOR.len())
        .rposition(|w| w == EDIT_SEPARATOR)
    {
        Some(at) => (&rest[..at], &rest[at + EDIT_SEPARATOR.len()..]),
        None => (rest, &[][..]),
    };
    let dir = dir();
    let Some(path) = source::write(&dir, Kind::of(*k), src) else {
        return Outcome::NoTree;
    };
    let Ok(t) = Tree::from_source(&path, options(true)) else {
        return Outcome::NoTree;
    };
    let offset = OFFSETS[usize::from(op >> 3) % OFFSETS.len()];
    let op = [
        Op::Attrs,
        Op::RenameAttrs,
        Op::Meta,
        Op::ZarrJson,
        Op::Chunk,
        Op::Npy,
        Op::GroupAttrs,
        Op::Truncate,
    ][usize::from(op % 8)];
    let before = source::snapshot(&dir);
    let res = edit(&t, op, offset, payload);
    drop(t);
    match res {
        Err(e) => {
            let after = source::snapshot(&dir);
            assert!(
                before == after,
                "a refused edit ({op:?} at {offset}: {e}) changed the source: {:?}",
                changed(&before, &after)
            );
            Outcome::Refused(e)
        }
        Ok(Some((rel, want_at, want))) => {
            applied(&path, &rel, want_at, &want, op);
            Outcome::Applied
        }
        Ok(None) => Outcome::NoFile,
    }
}

/// Makes the edit. `Ok(Some((file, offset, bytes)))`: the file (a path from the root) that
/// must now hold `bytes` at `offset`; `Ok(None)`: nothing to check (no such file).
type Edited = Option<(String, u64, Vec<u8>)>;

fn edit(t: &Tree, op: Op, offset: u64, payload: &[u8]) -> Result<Edited, TreeError> {
    let find = |path: &str| -> Option<u64> {
        let mut ino = ROOT_INO;
        for part in path.split('/') {
            ino = t.lookup(ino, part).ok()?.ino;
        }
        Some(ino)
    };
    // Writes `payload` to `rel` at `at` through one handle opened with `flags`, then closes.
    let write = |rel: &str, flags: i32, at: u64| -> Result<Edited, TreeError> {
        let Some(ino) = find(rel) else {
            return Ok(None);
        };
        let fh = t.open(ino, libc::O_WRONLY | flags)?;
        let wrote = t.write(ino, fh, at, payload);
        let closed = t.release(fh);
        wrote?;
        closed?;
        Ok(Some((rel.to_owned(), at, payload.to_vec())))
    };
    match op {
        Op::Attrs => write("__attrs__", libc::O_TRUNC, offset),
        Op::Meta => write("meta/storage", 0, offset),
        Op::ZarrJson => write("zarr/zarr.json", 0, offset),
        Op::Chunk => write("data/00000000.bin", 0, offset),
        Op::Npy => write("array.npy", 0, offset),
        Op::GroupAttrs => {
            let Some(sub) = t
                .readdir(ROOT_INO, 2)?
                .find(|e| e.kind == EntryKind::Directory)
            else {
                return Ok(None);
            };
            write(&format!("{}/__attrs__", sub.name), libc::O_TRUNC, 0)
        }
        Op::RenameAttrs => {
            let (_, fh) = t.create(ROOT_INO, ".__attrs__.swp")?;
            let ino = find(".__attrs__.swp").ok_or(TreeError::NotFound)?;
            let wrote = t.write(ino, fh, offset, payload);
            let closed = t.release(fh);
            wrote?;
            closed?;
            t.rename(ROOT_INO, ".__attrs__.swp", ROOT_INO, "__attrs__", false)?;
            // Zeros up to the offset, then the bytes: JSON only when the offset is 0.
            let want = (offset == 0).then(|| ("__attrs__".into(), 0, payload.to_vec()));
            Ok(want)
        }
        Op::Truncate => {
            let Some(ino) = find("__attrs__") else {
                return Ok(None);
            };
            t.set_size(ino, offset)?;
            Ok(None)
        }
    }
}

/// After an applied edit: the source opens again, and `rel` shows `want` at `at` (for
/// `__attrs__`, the same JSON value).
fn applied(path: &Path, rel: &str, at: u64, want: &[u8], op: Op) {
    let t = match Tree::from_source(path, options(false)) {
        Ok(t) => t,
        Err(e) => panic!("the source does not open after an applied edit ({op:?}): {e}"),
    };
    let mut ino = ROOT_INO;
    for part in rel.split('/') {
        ino = match t.lookup(ino, part) {
            Ok(a) => a.ino,
            Err(e) => panic!("{rel} is gone after an applied edit ({op:?}): {e}"),
        };
    }
    let Ok(fh) = t.open(ino, libc::O_RDONLY) else {
        panic!("{rel} does not open after an applied edit ({op:?})");
    };
    // `__attrs__` whole; any other file only where it was written (other chunks of a
    // damaged source may have been unreadable from the start).
    let attrs = rel.ends_with("__attrs__");
    let (from, len) = match attrs {
        true => (0, t.getattr(ino).map_or(0, |a| a.size)),
        false => (at, want.len() as u64),
    };
    let mut got = Vec::new();
    while (got.len() as u64) < len {
        let want_now = u32::try_from(len - got.len() as u64)
            .unwrap_or(1 << 20)
            .min(1 << 20);
        match t.read(ino, fh, from + got.len() as u64, want_now) {
            Ok(d) if d.is_empty() => break,
            Ok(d) => got.extend_from_slice(&d),
            Err(e) => panic!(
                "{rel} cannot be read after an applied edit ({op:?}): {}",
                b2fs::tree::display_chain(&e)
            ),
        }
    }
    let _ = t.release(fh);
    if attrs {
        let written: Result<serde_json::Value, _> = serde_json::from_slice(want);
        let shown: Result<serde_json::Value, _> = serde_json::from_slice(&got);
        if let (Ok(w), Ok(s)) = (written, shown) {
            assert_eq!(w, s, "__attrs__ after an applied edit ({op:?})");
        }
    } else {
        assert!(
            got == want,
            "{rel} at {at} after an applied edit ({op:?}) shows other bytes"
        );
    }
}

/// The paths whose bytes differ between two snapshots.
fn changed(before: &[(PathBuf, Vec<u8>)], after: &[(PathBuf, Vec<u8>)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (p, b) in before {
        match after.iter().find(|(q, _)| q == p) {
            Some((_, a)) if a == b => {}
            Some(_) => out.push(format!("{} changed", p.display())),
            None => out.push(format!("{} removed", p.display())),
        }
    }
    for (p, _) in after {
        if !before.iter().any(|(q, _)| q == p) {
            out.push(format!("{} added", p.display()));
        }
    }
    out
}
