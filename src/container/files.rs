//! Where the files of a directory source (a sparse frame, a bcolz carray or ctable) come
//! from: the local file system, or a [`ByteTree`], a read-only tree of named byte sources
//! that is not a local directory (the objects under a remote prefix, `crate::remote`).
//!
//! `Files` is what the frame and bcolz readers open their files through, by the same paths
//! either way (a tree's paths are its root joined with the relative names), so they do not
//! know which one they read. `open_dir` holds the directory detection rules of
//! [`super::open`], shared by both.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::source::{ByteSource, IoStats, Source};
use super::{Array, Container, ContainerError, SourceKind, Table, bcolz, frame, not_a_container};

/// A read-only tree of named byte sources that is not the local file system (the objects
/// under a remote prefix). Names are relative to the root, `/`-separated, without a leading
/// `/`. Listing happens when the tree is made: asking costs no I/O; reading a file's bytes is
/// up to its [`ByteSource`].
pub trait ByteTree: Send + Sync + std::fmt::Debug {
    /// The tree's root as a path (a URL): the paths of its files are this joined with their
    /// relative names.
    fn root(&self) -> &Path;
    /// The file named `rel`, if there is one.
    fn file(&self, rel: &str) -> Option<Arc<dyn ByteSource>>;
    /// [`ByteTree::file`] for a file that is a collection's leaf, with why it cannot be
    /// opened (a tree whose files open lazily, over the network, says more than "absent").
    ///
    /// # Errors
    /// Why the file cannot be read; by default, that the tree has no such file.
    fn open_file(&self, rel: &str) -> std::io::Result<Arc<dyn ByteSource>> {
        self.file(rel).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("no file {rel}"))
        })
    }
    /// Whether `rel` is a directory (some file's name starts with `rel/`).
    fn is_dir(&self, rel: &str) -> bool;
    /// The relative name of every file, sorted.
    fn names(&self) -> Vec<String>;
    /// The relative names of the files whose name starts with `prefix`, sorted (a directory
    /// listing's: what `names` holds under `dir/`). Trees that keep their names sorted
    /// answer from that range alone instead of copying every name.
    fn names_under(&self, prefix: &str) -> Vec<String> {
        let mut names = self.names();
        names.retain(|n| n.starts_with(prefix));
        names
    }
    /// The `.b2d` stores inside the tree (a remote prefix of sources): each one's directory
    /// name and its files as a tree of their own (whose root is that directory). None by
    /// default.
    fn store_dirs(&self) -> Vec<(String, Arc<dyn ByteTree>)> {
        Vec::new()
    }
    /// How often the tree should be listed again to follow files added and removed since it
    /// was made; `None` (the default): never, its listing is fixed.
    fn relist_every(&self) -> Option<std::time::Duration> {
        None
    }
    /// Lists the tree again (see [`ByteTree::relist_every`]; by default there is nothing to
    /// list again: [`Relist::Unchanged`]).
    ///
    /// # Errors
    /// Why the listing could not be read now (the tree as it was keeps serving).
    fn relist(&self) -> std::io::Result<Relist> {
        Ok(Relist::Unchanged)
    }
    /// Whether the files changed where the tree lives since it was listed: what is known, or,
    /// with `ask`, asked now when that is due (a followed remote prefix listed again; only
    /// the mount's follower thread asks). False by default: nothing to follow.
    fn poll_changed(&self, ask: bool) -> bool {
        let _ = ask;
        false
    }
    /// Whether `poll_changed(true)` would list the tree again now (followed, its interval
    /// passed, no change known yet). False by default.
    fn asks_now(&self) -> bool {
        false
    }
    /// The tree listed again as it is now, with its stores opened ([`Relist::Changed`]), when
    /// it is followed ([`ByteTree::poll_changed`]); `None` by default.
    fn reopen(&self) -> Option<std::io::Result<Relist>> {
        None
    }
}

/// What listing a [`ByteTree`] again found.
#[derive(Debug)]
pub enum Relist {
    /// The same names as before.
    Unchanged,
    /// Other names: the tree as it is now, and its stores opened (`(name, bytes)`: a store
    /// file's relative name and its bytes, as the tree's first listing gives them).
    Changed(Arc<dyn ByteTree>, Vec<(String, Arc<dyn ByteSource>)>),
}

/// Where a directory source's files are opened from.
#[derive(Debug, Clone, Default)]
pub(crate) enum Files {
    /// The local file system.
    #[default]
    Local,
    /// A byte tree (a remote prefix).
    Tree(Arc<dyn ByteTree>),
}

impl Files {
    /// The byte tree the files are opened from (`None`: the local file system).
    pub(crate) fn tree(&self) -> Option<&Arc<dyn ByteTree>> {
        match self {
            Files::Local => None,
            Files::Tree(t) => Some(t),
        }
    }

    /// The relative name of `path` in `tree` (`None`: not under its root).
    fn rel(tree: &dyn ByteTree, path: &Path) -> Option<String> {
        let rel = path.strip_prefix(tree.root()).ok()?;
        let parts: Vec<&str> = rel
            .components()
            .map(|c| c.as_os_str().to_str())
            .collect::<Option<_>>()?;
        Some(parts.join("/"))
    }

    /// Opens the file at `path` (`pread` for a local file).
    pub(crate) fn open(&self, path: &Path, stats: Arc<IoStats>) -> Result<Source, ContainerError> {
        match self {
            Files::Local => Source::open(path, stats),
            Files::Tree(t) => Files::rel(t.as_ref(), path)
                .and_then(|rel| t.file(&rel))
                .map(|b| Source::from_bytes(b, stats))
                .ok_or_else(|| ContainerError::Io {
                    path: path.to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "no such object under the prefix",
                    ),
                }),
        }
    }

    /// Whether `path` is a file.
    pub(crate) fn is_file(&self, path: &Path) -> bool {
        match self {
            Files::Local => path.is_file(),
            Files::Tree(t) => Files::rel(t.as_ref(), path).is_some_and(|r| t.file(&r).is_some()),
        }
    }

    /// Whether `path` exists (file or directory).
    pub(crate) fn exists(&self, path: &Path) -> bool {
        match self {
            Files::Local => path.exists(),
            Files::Tree(t) => {
                Files::rel(t.as_ref(), path).is_some_and(|r| t.file(&r).is_some() || t.is_dir(&r))
            }
        }
    }

    /// The names of the entries directly in the directory `dir` (unsorted; a tree: its files
    /// and subdirectories under `dir/`). One listing: its cost is the entries present.
    ///
    /// # Errors
    /// Why `dir` cannot be listed (a tree: never; a missing directory lists nothing there).
    pub(crate) fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        match self {
            Files::Local => std::fs::read_dir(dir)?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect(),
            Files::Tree(t) => {
                let Some(rel) = Files::rel(t.as_ref(), dir) else {
                    return Ok(Vec::new());
                };
                let prefix = if rel.is_empty() { rel } else { rel + "/" };
                let mut out: Vec<String> = t
                    .names_under(&prefix)
                    .into_iter()
                    .filter_map(|n| {
                        let rest = n.strip_prefix(&prefix)?;
                        Some(rest.split('/').next().unwrap_or(rest).to_owned())
                    })
                    .collect();
                out.dedup();
                Ok(out)
            }
        }
    }

    /// The modification time of the file at `path` (the epoch when it cannot be known).
    pub(crate) fn mtime(&self, path: &Path) -> SystemTime {
        match self {
            Files::Local => std::fs::metadata(path)
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH),
            Files::Tree(t) => Files::rel(t.as_ref(), path)
                .and_then(|r| t.file(&r))
                .map_or(SystemTime::UNIX_EPOCH, |b| b.mtime()),
        }
    }
}

/// Opens the directory source at `path` read through `files`: a ctable (`__rootdirs__`), a
/// sparse frame (`chunks.b2frame`) or a carray (`meta/sizes` + `meta/storage`). `Ok(None)`:
/// none of these (the caller goes on with its other rules).
pub(crate) fn open_dir(
    files: &Files,
    path: &Path,
    stats: &Arc<IoStats>,
) -> Result<Option<Container>, ContainerError> {
    if files.is_file(&path.join("__rootdirs__")) {
        let (attrs, cols) = bcolz::ctable::open_ctable_in(files, path, stats)?;
        let columns = cols
            .into_iter()
            .map(|(name, c)| {
                let col_path = path.join(&name);
                (name, Array::from_carray(col_path, c, Arc::clone(stats)))
            })
            .collect();
        return Ok(Some(Container::Table(Table {
            path: path.to_path_buf(),
            attrs,
            columns,
        })));
    }
    let index = path.join("chunks.b2frame");
    if files.is_file(&index) {
        let src = files.open(&index, Arc::clone(stats))?;
        let f = frame::Frame::open_source_in(files, src, 0, Some(path), Arc::clone(stats))?;
        return Array::from_frame(path.to_path_buf(), SourceKind::Sframe, f, Arc::clone(stats))
            .map(|a| Some(Container::Array(a)));
    }
    if files.is_file(&path.join("meta/sizes")) && files.is_file(&path.join("meta/storage")) {
        let c = bcolz::Carray::open_in(files, path, Arc::clone(stats))?;
        return Ok(Some(Container::Array(Array::from_carray(
            path.to_path_buf(),
            c,
            Arc::clone(stats),
        ))));
    }
    Ok(None)
}

impl Array {
    /// The byte tree a directory source (sparse frame, bcolz carray or column) was opened
    /// from (a remote prefix), which the mount's follower asks whether it changed and lists
    /// again ([`ByteTree::poll_changed`], [`ByteTree::reopen`]); `None` for local files and
    /// sources of one object.
    pub fn byte_tree(&self) -> Option<&Arc<dyn ByteTree>> {
        match &self.inner {
            super::Inner::Frame(f) => f.files.tree(),
            super::Inner::Bcolz(c) => c.files.tree(),
        }
    }
}

/// Opens the directory source at `path` under the root of `tree` (the root itself, or a
/// ctable's column directory): what a followed prefix's array is opened again from.
///
/// # Errors
/// As [`open_tree`]; [`ContainerError::NotAContainer`] when `path` holds no source.
pub fn open_tree_at(tree: Arc<dyn ByteTree>, path: &Path) -> Result<Container, ContainerError> {
    let files = Files::Tree(tree);
    let stats = Arc::new(IoStats::default());
    open_dir(&files, path, &stats)?.ok_or_else(|| {
        not_a_container(
            path,
            "the prefix holds no chunks.b2frame, __rootdirs__ or meta/sizes + meta/storage",
        )
    })
}

/// Opens the directory source at the root of `tree` (a remote prefix): a sparse frame, a
/// bcolz carray or a ctable, detected as [`super::open`] detects a local directory. Reads go
/// through the tree's byte sources; nothing is mapped.
///
/// # Errors
/// As [`super::open`]; [`ContainerError::Unsupported`] for a 2012 `blsk` root;
/// [`ContainerError::NotAContainer`] for anything else.
pub fn open_tree(tree: Arc<dyn ByteTree>) -> Result<Container, ContainerError> {
    let root = tree.root().to_path_buf();
    let files = Files::Tree(Arc::clone(&tree));
    let stats = Arc::new(IoStats::default());
    if let Some(c) = open_dir(&files, &root, &stats)? {
        return Ok(c);
    }
    if tree.file("meta/nrows").is_some() {
        return Err(ContainerError::Unsupported {
            path: root,
            what: "a 2012 blsk root is not read from a remote prefix".into(),
        });
    }
    Err(not_a_container(
        &root,
        "the prefix holds no chunks.b2frame, __rootdirs__ or meta/sizes + meta/storage",
    ))
}
