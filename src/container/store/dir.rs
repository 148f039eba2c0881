//! Directories on disk for collections: the file walk of a `.b2d` store, and a plain
//! directory of sources opened as a [`Collection`] of form [`Form::Frames`].
//!
//! A directory of sources: each entry is classified by content without opening it as a
//! source (a few bytes read per file): a directory with `embed.b2e` is a nested store
//! ([`Node::Store`]); a sparse frame (`chunks.b2frame`), bcolz ctable (`__rootdirs__`),
//! carray (`meta/sizes`) or blsk root (`meta/nrows`, `data/`) is a leaf; any other directory
//! is a group; a file starting with the frame magic (`.b2frame`, `.b2nd`, `.b2f`, ...) is a
//! leaf, a zip file with an `embed.b2e` member a nested store, a `blsk` file a leaf (opening
//! it says why it is not a source). Other files are **not shown**: the mount is a view of
//! arrays, and a file b2fs does not understand could not be written back. Leaves keep their
//! file names (`a.b2nd`). Symbolic links are not followed; the walk stops at depth 32.
//! A source that fails to open is a leaf whose open fails (EIO on its directory).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::{Collection, Form, Group, Leaf, Location, Node, Shared};
use crate::container::{ByteSource, ByteTree, Container, ContainerError, Relist, not_a_container};

/// The deepest directory level walked.
const MAX_DEPTH: usize = 32;

fn io(path: &Path, source: std::io::Error) -> ContainerError {
    ContainerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The regular files under `dir` (relative `/`-separated names, location `File`), skipping
/// symbolic links; for a `.b2d` store.
pub(super) fn walk_store(
    root: &Path,
    dir: &Path,
    depth: usize,
    out: &mut Vec<(String, Location)>,
) -> Result<(), ContainerError> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| io(&path, e))?;
        if ft.is_dir() {
            walk_store(root, &path, depth + 1, out)?;
        } else if ft.is_file() {
            let Some(rel) = path
                .strip_prefix(root)
                .ok()
                .and_then(|r| r.to_str())
                .map(str::to_string)
            else {
                continue;
            };
            out.push((rel, Location::File(path)));
        }
    }
    Ok(())
}

/// Opens the `.b2d` store at the root of `tree` (a remote prefix holding `embed.b2e`): its
/// files are the tree's objects, each leaf opened through its byte source on first access.
///
/// # Errors
/// [`ContainerError::NotAContainer`] without `embed.b2e`; as [`super::open_store`].
pub fn open_store_tree(tree: Arc<dyn ByteTree>) -> Result<Collection, ContainerError> {
    let root = tree.root().to_path_buf();
    let e = tree
        .file("embed.b2e")
        .ok_or_else(|| not_a_container(&root, "the prefix holds no embed.b2e"))?;
    let estore = match crate::container::open_bytes(e)? {
        Container::Array(a) => a,
        Container::Table(_) => {
            return Err(not_a_container(&root, "its embed.b2e is not a frame"));
        }
    };
    let files = tree
        .names()
        .into_iter()
        .map(|n| (n.clone(), Location::TreeFile(n)))
        .collect();
    super::collection(&root, (Form::Dir, None, estore, files), Some(tree))
}

/// A directory of sources whose files are the sources of `tree` (a remote server's
/// directory, a prefix of sources): every name is a frame, opened through the tree on first
/// access, but the names under a directory source's root (a directory holding
/// `chunks.b2frame`, `__rootdirs__`, `meta/sizes` or `meta/nrows`, as a local directory's
/// are told) make one leaf of that directory; with its `.b2z` stores among them (`(name,
/// bytes)`: the store file's name relative to the root and its bytes, opened here; one that
/// does not open as a store is logged and not shown), and the `.b2d` stores the tree holds
/// ([`ByteTree::store_dirs`]). Leaves keep their file names; directories are groups.
pub fn open_listed(
    tree: Arc<dyn ByteTree>,
    stores: Vec<(String, Arc<dyn ByteSource>)>,
) -> Collection {
    let path = tree.root().to_path_buf();
    let names = tree.names();
    let store_dirs = tree.store_dirs();
    let roots = source_roots(&names);
    let mut dirs: Vec<String> = roots.iter().map(|r| format!("{r}/")).collect();
    dirs.sort();
    let mut keyed: Vec<(String, Location)> = roots
        .into_iter()
        .map(|r| (format!("/{r}"), Location::TreeDir(r)))
        .collect();
    keyed.extend(
        names
            .into_iter()
            .filter(|n| !in_dirs(&dirs, n))
            .map(|n| (format!("/{n}"), Location::TreeFile(n))),
    );
    let shared = Arc::new(Shared {
        path: path.clone(),
        zip: None,
        estore: None,
        scratch: OnceLock::new(),
        opened: Default::default(),
        tree: Some(tree),
    });
    let mut root = super::keys::build_tree(&path, keyed, &shared);
    for (rel, bytes) in stores {
        let store = match super::open_store_bytes(bytes) {
            Ok(c) => c,
            Err(e) => {
                log::warn!("{}: {rel}: not shown: {e}", path.display());
                continue;
            }
        };
        add_store(&path, &mut root, &rel, store);
    }
    for (rel, files) in store_dirs {
        match open_store_tree(files) {
            Ok(store) => add_store(&path, &mut root, &rel, store),
            Err(e) => log::warn!("{}: {rel}: not shown: {e}", path.display()),
        }
    }
    Collection {
        path,
        form: Form::Frames,
        marker: None,
        root,
        shared,
    }
}

/// Shows `store`, found at `rel`, in its directory's group of `root`.
fn add_store(path: &Path, root: &mut Group, rel: &str, store: Collection) {
    let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
    let name = Node::Store(Box::new(store));
    let shown = name.name().to_owned();
    if !super::keys::add_node(root, dir, name) {
        log::warn!("{}: {dir}/{shown}: name taken, not shown", path.display());
    }
}

/// The files whose presence in a directory makes it a directory source (a sparse frame, a
/// bcolz ctable, a bcolz carray, a 2012 `blsk` root), as `classify` tells local ones.
pub const SOURCE_MARKERS: [&str; 4] =
    ["chunks.b2frame", "__rootdirs__", "meta/sizes", "meta/nrows"];

/// The directory sources among `names` (relative `/`-separated file names): the outermost
/// directories holding one of [`SOURCE_MARKERS`] (a ctable's columns, each with its own
/// `meta/sizes`, are the ctable's), sorted.
pub fn source_roots(names: &[String]) -> Vec<String> {
    let mut roots: Vec<String> = names
        .iter()
        .filter_map(|n| {
            SOURCE_MARKERS.iter().find_map(|m| {
                n.strip_suffix(m)
                    .and_then(|d| d.strip_suffix('/'))
                    .filter(|d| !d.is_empty())
                    .map(str::to_owned)
            })
        })
        .collect();
    roots.sort();
    roots.dedup();
    let all: std::collections::HashSet<&str> = roots.iter().map(String::as_str).collect();
    let enclosed = |r: &str| r.match_indices('/').any(|(at, _)| all.contains(&r[..at]));
    roots.iter().filter(|r| !enclosed(r)).cloned().collect()
}

/// Whether `name` lies under one of `dirs` (sorted, none inside another, each ending in
/// `/`): the last one sorting at or before `name` is the only one that can hold it (every
/// name between a directory and a name under it is under it too).
pub fn in_dirs(dirs: &[String], name: &str) -> bool {
    let at = dirs.partition_point(|d| d.as_str() <= name);
    at > 0 && name.starts_with(dirs[at - 1].as_str())
}

impl Collection {
    /// How often this collection should be listed again ([`Collection::relisted`]): for a
    /// remote server's directory whose tree asks for it; `None` for the rest (local
    /// collections are followed by the `stat` of their files).
    pub fn relist_every(&self) -> Option<std::time::Duration> {
        self.shared.tree.as_ref().and_then(|t| t.relist_every())
    }

    /// The collection as its server lists it now, when that listing names other files than
    /// this one's (`None`: the same, or a collection that is not listed again).
    ///
    /// # Errors
    /// [`ContainerError::Io`] when the listing cannot be read now.
    pub fn relisted(&self) -> Result<Option<Collection>, ContainerError> {
        let Some(tree) = self
            .shared
            .tree
            .as_ref()
            .filter(|_| self.form == Form::Frames)
        else {
            return Ok(None);
        };
        match tree.relist().map_err(|e| io(&self.path, e))? {
            Relist::Unchanged => Ok(None),
            Relist::Changed(tree, stores) => Ok(Some(open_listed(tree, stores))),
        }
    }
}

/// Opens the directory `path` as a collection of the sources in it.
///
/// # Errors
/// [`ContainerError::Io`] when `path` cannot be listed.
pub fn open_frames(path: &Path) -> Result<Collection, ContainerError> {
    let shared = Arc::new(Shared {
        path: path.to_path_buf(),
        zip: None,
        estore: None,
        scratch: OnceLock::new(),
        opened: Default::default(),
        tree: None,
    });
    let root = group(path, "", "/", 0, &shared)?;
    Ok(Collection {
        path: path.to_path_buf(),
        form: Form::Frames,
        marker: None,
        root,
        shared,
    })
}

enum Kind {
    Source,
    Store,
    Group,
    Hidden,
}

fn classify(path: &Path, is_dir: bool) -> Kind {
    if is_commit_temp(path) {
        return Kind::Hidden;
    }
    if is_dir {
        if path.join("embed.b2e").is_file() {
            return Kind::Store;
        }
        let source = SOURCE_MARKERS.iter().any(|f| path.join(f).is_file());
        return if source { Kind::Source } else { Kind::Group };
    }
    let mut head = [0u8; 11];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let head = &head[..n];
    if head.starts_with(&crate::container::frame::MAGIC) || head.starts_with(b"blsk") {
        Kind::Source
    } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        Kind::Store
    } else {
        Kind::Hidden
    }
}

/// Whether `path` is a temp file of a b2fs commit (`crate::container::leftover`), which a
/// crash leaves beside the outermost `.b2d` store it was for: a copy of a frame or zip,
/// never a source of its own.
fn is_commit_temp(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| crate::container::leftover::commit_temp_target(n).is_some())
}

fn group(
    dir: &Path,
    name: &str,
    key: &str,
    depth: usize,
    shared: &Arc<Shared>,
) -> Result<Group, ContainerError> {
    let mut children = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let Some(child) = entry.file_name().to_str().map(str::to_string) else {
            log::warn!("{}: not UTF-8, not shown", path.display());
            continue;
        };
        let Ok(ft) = entry.file_type() else {
            continue;
        };
        if ft.is_symlink() || !(ft.is_dir() || ft.is_file()) {
            continue;
        }
        let child_key = if key == "/" {
            format!("/{child}")
        } else {
            format!("{key}/{child}")
        };
        let leaf = |location| {
            Node::Leaf(Arc::new(Leaf {
                name: child.clone(),
                key: child_key.clone(),
                location,
                shared: Arc::clone(shared),
                cell: OnceLock::new(),
            }))
        };
        match classify(&path, ft.is_dir()) {
            Kind::Source => children.push(leaf(Location::Source(path))),
            Kind::Store => match super::open_store(&path) {
                Ok(c) => children.push(Node::Store(Box::new(c))),
                Err(ContainerError::NotAContainer { .. }) => {}
                Err(e) => {
                    log::warn!("{}: not shown as a store: {e}", path.display());
                    children.push(leaf(Location::Failed(path, e.to_string())));
                }
            },
            Kind::Group if depth < MAX_DEPTH => {
                children.push(Node::Group(group(
                    &path,
                    &child,
                    &child_key,
                    depth + 1,
                    shared,
                )?));
            }
            Kind::Group | Kind::Hidden => {}
        }
    }
    Ok(Group {
        name: name.to_string(),
        key: key.to_string(),
        children,
        carrier: None,
    })
}

#[cfg(test)]
mod tests {
    use super::{in_dirs, source_roots};

    #[test]
    fn source_roots_are_the_outermost_directories_with_a_marker() {
        let names: Vec<String> = [
            "a.b2nd",
            "ct/__rootdirs__",
            "ct/id/meta/sizes",
            "ct/id/data/__0.blp",
            "ct-2/x/meta/sizes",
            "ct-2/x/meta/storage",
            "meta/sizes",
            "sp.b2frame/chunks.b2frame",
            "sp.b2frame/00000000.chunk",
            "sub/deep/old/meta/nrows",
            "sub/notmeta/sizes",
        ]
        .map(String::from)
        .to_vec();
        // The root's own marker is not a directory source of it; `ct-2/x` sorts between
        // `ct` and `ct/id` and must not hide `ct/id` under `ct`.
        let roots = source_roots(&names);
        assert_eq!(roots, ["ct", "ct-2/x", "sp.b2frame", "sub/deep/old"]);
        let mut dirs: Vec<String> = roots.iter().map(|r| format!("{r}/")).collect();
        dirs.sort();
        let outside: Vec<&String> = names.iter().filter(|n| !in_dirs(&dirs, n)).collect();
        assert_eq!(outside, ["a.b2nd", "meta/sizes", "sub/notmeta/sizes"]);
        assert!(!in_dirs(&dirs, "ct-2"), "a root's own name is not under it");
    }
}
