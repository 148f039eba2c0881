//! Fuzz inputs written out as sources on disk, for the targets that open a source by path
//! (`store_open`, `tree_walk`, `tree_edit`): one input byte says which kind of source the rest
//! of the input is, and the source is written into the thread's scratch directory
//! (`/dev/shm` under `scripts/fuzz.sh`), replacing the previous input's.

use std::path::{Path, PathBuf};

use b2fs::container::store::zip::ZipIndex;

/// The kinds of source an input can be (its first byte, modulo 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A frame file (`.b2nd`: contiguous b2nd, SChunk, or a sparse frame's index file).
    Frame,
    /// A bcolz carray directory, its files as `bcolz_open` splits them.
    Bcolz,
    /// A `.b2z` zip store.
    Zip,
    /// A `.b2d` directory store: the input is a zip whose stored members are written out as
    /// the directory's files (names checked: no absolute path, no `..`).
    Dir,
}

impl Kind {
    /// The kind byte `b` stands for.
    pub fn of(b: u8) -> Kind {
        match b % 4 {
            0 => Kind::Frame,
            1 => Kind::Bcolz,
            2 => Kind::Zip,
            _ => Kind::Dir,
        }
    }

    /// The byte that stands for this kind (seeds are made with it).
    pub fn byte(self) -> u8 {
        match self {
            Kind::Frame => 0,
            Kind::Bcolz => 1,
            Kind::Zip => 2,
            Kind::Dir => 3,
        }
    }
}

/// Most members a `.b2d` input writes out.
const DIR_MEMBERS: usize = 32;
/// Deepest member path a `.b2d` input writes out.
const DIR_DEPTH: usize = 6;

/// Removes whatever is at `p` (file or directory).
pub fn clear(p: &Path) {
    if p.is_dir() {
        let _ = std::fs::remove_dir_all(p);
    } else {
        let _ = std::fs::remove_file(p);
    }
}

/// Writes `data` as a source of kind `kind` under `dir` (which exists) and returns its path;
/// `None` when the input cannot be written as that kind (a `.b2d` input that is no zip).
pub fn write(dir: &Path, kind: Kind, data: &[u8]) -> Option<PathBuf> {
    let path = dir.join(match kind {
        Kind::Frame => "input.b2nd",
        Kind::Bcolz => "carray",
        Kind::Zip => "input.b2z",
        Kind::Dir => "input.b2d",
    });
    clear(&path);
    match kind {
        Kind::Frame | Kind::Zip => std::fs::write(&path, data).expect("writing the fuzz input"),
        Kind::Bcolz => write_bcolz(&path, data),
        Kind::Dir => write_dir(dir, &path, data)?,
    }
    Some(path)
}

/// A carray directory at `root` from `data` cut as `bcolz_open` cuts it.
fn write_bcolz(root: &Path, data: &[u8]) {
    std::fs::create_dir_all(root.join("meta")).expect("scratch dir");
    std::fs::create_dir_all(root.join("data")).expect("scratch dir");
    let parts = super::split_parts(data, 6);
    let put = |rel: &str, part: Option<&&[u8]>| {
        if let Some(b) = part {
            std::fs::write(root.join(rel), b).expect("write");
        }
    };
    put("meta/sizes", Some(parts.first().unwrap_or(&&[][..])));
    put("meta/storage", Some(parts.get(1).unwrap_or(&&[][..])));
    put("__attrs__", parts.get(2).filter(|b| !b.is_empty()));
    for i in 0..3 {
        put(&format!("data/__{i}.blp"), parts.get(3 + i));
    }
}

/// A `.b2d` directory at `root` holding the stored members of the zip `data` (at most
/// [`DIR_MEMBERS`], names made only of plain components); `None` when `data` is no zip.
fn write_dir(scratch: &Path, root: &Path, data: &[u8]) -> Option<()> {
    let zip = scratch.join("members.zip");
    std::fs::write(&zip, data).expect("writing the fuzz input");
    let index = ZipIndex::open(&zip).ok();
    let _ = std::fs::remove_file(&zip);
    let index = index?;
    std::fs::create_dir_all(root).expect("scratch dir");
    for (i, name) in index.names().iter().enumerate().take(DIR_MEMBERS) {
        let Some(rel) = plain(name) else { continue };
        let Ok(w) = index.window(i) else { continue };
        let (Ok(start), Ok(len)) = (usize::try_from(w.offset), usize::try_from(w.len)) else {
            continue;
        };
        let Some(bytes) = data.get(start..start.saturating_add(len)) else {
            continue;
        };
        let p = root.join(rel);
        if let Some(parent) = p.parent()
            && std::fs::create_dir_all(parent).is_err()
        {
            continue;
        }
        let _ = std::fs::write(&p, bytes);
    }
    Some(())
}

/// `name` as a relative path of plain components (no root, `.`, `..` or empty component,
/// at most [`DIR_DEPTH`] deep), or `None`.
fn plain(name: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = name.split('/').collect();
    let ok = parts.len() <= DIR_DEPTH
        && parts.iter().all(|p| {
            !p.is_empty() && *p != "." && *p != ".." && p.len() < 200 && !p.contains('\0')
        });
    ok.then(|| parts.iter().collect())
}

/// Every file under `root` (or `root` itself when it is a file) with its bytes, sorted by
/// path: what a refused commit must leave unchanged.
pub fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    fn walk(p: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        if p.is_dir() {
            let mut names: Vec<PathBuf> = match std::fs::read_dir(p) {
                Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
                Err(_) => return,
            };
            names.sort();
            for n in names {
                walk(&n, out);
            }
        } else if let Ok(b) = std::fs::read(p) {
            out.push((p.to_path_buf(), b));
        }
    }
    walk(root, &mut out);
    out
}
