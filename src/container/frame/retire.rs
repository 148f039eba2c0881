//! When the chunk files a sparse-frame commit no longer references are removed (issue 21:
//! one version per open). A descriptor opened before a commit keeps reading the version of
//! its open, whose chunks may live in files the commit replaced; removing them at the commit
//! made its reads fail with EIO. So a commit hands them to this module, which removes them
//! once no frame of that directory opened (in this process) before the commit is still open.
//!
//! Versions are counted by generation. Every sparse frame opened from the local file system
//! holds its directory's current [`Generation`]; a commit ends the current generation (the
//! files it replaced are that generation's to remove) and starts a new one. Each generation
//! holds the next one alive, so a generation is dropped, and its files removed, only after
//! every frame of it and of every older generation is gone: the files it removes were
//! referenced by those versions only (chunk ids are never reused while their file exists).
//!
//! A crash between a commit and these removals leaves chunk files no version references;
//! readers ignore them and the next commit of the directory removes them
//! ([`pending`] names the files still waiting here, which it must keep). Frames opened by
//! other processes are not counted (another writer's change, as before).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

/// One version span of a sparse frame's directory: the frames opened between two commits.
#[derive(Debug)]
pub(crate) struct Generation {
    /// Chunk files the commit that ended this generation replaced: removed when it is dropped.
    retired: Mutex<Vec<PathBuf>>,
    /// The generation after this one, kept alive by this one (see the module doc).
    newer: Mutex<Option<Arc<Generation>>>,
}

impl Generation {
    fn new() -> Generation {
        Generation {
            retired: Mutex::new(Vec::new()),
            newer: Mutex::new(None),
        }
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        remove(std::mem::take(self.retired.get_mut()));
        // Unchained one at a time: a long chain must not recurse.
        let mut next = self.newer.get_mut().take();
        while let Some(g) = next {
            next = match Arc::try_unwrap(g) {
                Ok(mut g) => {
                    let newer = g.newer.get_mut().take();
                    drop(g);
                    newer
                }
                Err(_) => None,
            };
        }
    }
}

fn remove(files: Vec<PathBuf>) {
    for f in files {
        match std::fs::remove_file(&f) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                log::warn!("{}: replaced chunk file not removed: {e}", f.display());
            }
            _ => {}
        }
    }
}

/// The generations of every sparse-frame directory with a frame open, oldest first.
type Registry = HashMap<PathBuf, Vec<Weak<Generation>>>;

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(Mutex::default)
}

fn key(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// The live generations of `dir` in `reg`, oldest first (dead ones forgotten).
fn live<'a>(reg: &'a mut Registry, dir: &Path) -> &'a mut Vec<Weak<Generation>> {
    let gens = reg.entry(key(dir)).or_default();
    gens.retain(|g| g.strong_count() > 0);
    gens
}

/// The current generation of `dir`, for a frame opened from it now.
pub(crate) fn current(dir: &Path) -> Arc<Generation> {
    let mut reg = registry().lock();
    let gens = live(&mut reg, dir);
    // The newest is alive whenever an older one is (each holds the next).
    if let Some(g) = gens.last().and_then(Weak::upgrade) {
        return g;
    }
    let g = Arc::new(Generation::new());
    gens.push(Arc::downgrade(&g));
    g
}

/// A commit of `dir` no longer references `files`: they are removed once every frame of `dir`
/// opened before now is dropped (now, when none is open).
pub(crate) fn retire(dir: &Path, files: Vec<PathBuf>) {
    if files.is_empty() {
        return;
    }
    let mut reg = registry().lock();
    let gens = live(&mut reg, dir);
    let Some(cur) = gens.last().and_then(Weak::upgrade) else {
        drop(reg);
        remove(files);
        return;
    };
    cur.retired.lock().extend(files);
    let next = Arc::new(Generation::new());
    gens.push(Arc::downgrade(&next));
    *cur.newer.lock() = Some(next);
    drop(reg);
    drop(cur); // may remove the files now (no frame of it open)
}

/// The names of the chunk files of `dir` still waiting for older frames to close (a commit
/// must not remove them as leftovers).
pub(crate) fn pending(dir: &Path) -> HashSet<OsString> {
    let mut reg = registry().lock();
    let gens: Vec<Arc<Generation>> = live(&mut reg, dir)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    drop(reg);
    gens.iter()
        .flat_map(|g| g.retired.lock().clone())
        .filter_map(|p| p.file_name().map(OsString::from))
        .collect()
}
