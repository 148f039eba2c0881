//! Collections: many sources under one mount. A python-blosc2 store (`.b2z` zip or `.b2d`
//! directory, TreeStore / DictStore / EmbedStore, `docs/format/STORES.md`) or a plain directory of
//! frames, sparse frames, bcolz roots and blsk roots. Both open as a [`Collection`]: a tree of
//! [`Group`]s (with attributes) whose leaves ([`Leaf`]) are opened on first access.
//!
//! Knows nothing of FUSE or inodes: a tree layer maps each [`Group`] to a directory (its
//! attributes to `__attrs__`) and each [`Leaf`] to the single-source tree of what
//! [`Leaf::open`] returns; an open error belongs to that leaf only.
//!
//! Detection ([`open_any`]): a zip file with an `embed.b2e` member, or a directory with an
//! `embed.b2e` file, is a store whatever the marker (`b2tree`, `b2dict`, `b2embed`, or none)
//! says: by container form first, then meta (python-blosc2 dispatches on meta first and fails
//! on 4.0.0 `.b2z` files, notes 1.4). Single sources keep [`super::open`]'s rules; any other
//! directory is a directory of frames ([`dir`]).
//!
//! Stores (`open_store`):
//! - leaves are members (zip) or files (directory) ending in `.b2nd`, `.b2f` or `.b2b`, key
//!   = path without the suffix; files with other names are not probed (upstream probes them)
//!   and do not show; `embed.b2e` itself never shows;
//! - then the `embed_map` keys of `embed.b2e` not already present (the files win, as
//!   upstream); a `{offset, length}` entry is an embedded cframe, anything else a reference
//!   (remote C2Array) whose open fails with [`ContainerError::Unsupported`];
//! - groups are the path prefixes; `<group>/__vlmeta__` carriers give the group's attributes
//!   (their vlmeta) and never show as leaves; a group without one has `{}`;
//! - a leaf that would also be a group, or with an empty, `.` or `..` component, is left out
//!   with a log line;
//! - BatchArray/ListArray (`.b2b`), `b2o` carriers and other special objects are frames too:
//!   they open as arrays of their raw chunks; [`Leaf::special`] names them so the tree can
//!   leave out views (like `array.npy`) that would not mean anything;
//! - a CTable stored in a TreeStore shows as its internal subtree (`_meta`, `_cols/<col>`,
//!   `_valid_rows`): its columns keep deleted rows, which only `_valid_rows` masks, so they are
//!   not the table's columns as arrays (see docs/COLLECTIONS.md).
//!
//! Opening reads the zip's end records and central directory (or walks the directory) and
//! the estore frame's header, index and trailer; no leaf is touched. A leaf reads its local
//! header, frame header, index and trailer on first [`Leaf::open`]. Embedded values are
//! decoded on first open into a private temporary file (they are below the store's threshold,
//! so small) and read from there.
//!
//! The parts: this file holds the collection's types ([`Collection`], [`Group`], [`Leaf`]) and
//! a leaf's opening; `open.rs` detection and a store's parts; `keys.rs` the tree of groups
//! built from the keys; `dir.rs` directories of sources; `zip.rs` and `embed.rs` the zip
//! container and the estore; `zip_scan.rs` the members of a zip cut short, for salvage; `head.rs` a leaf opened for its metadata only; `follow.rs` the
//! remote collections the follower asks whether they changed.

pub mod dir;
pub mod embed;
mod follow;
mod head;
mod keys;
mod open;
pub mod zip;
pub mod zip_scan;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

pub use embed::Marker;
pub use follow::Followed;
use open::collection;
pub use open::{open_any, open_store, open_store_bytes};

use super::{Array, Container, ContainerError};
use embed::Estore;

/// Where a collection lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A `.b2z` zip store.
    Zip,
    /// A `.b2d` directory store (a directory with `embed.b2e`).
    Dir,
    /// A plain directory of frames and other sources.
    Frames,
}

/// What [`open_any`] found.
#[derive(Debug)]
pub enum Opened {
    /// A single source, as [`super::open`] returns it.
    Single(Container),
    /// A store or a directory of sources.
    Collection(Collection),
}

/// A store or directory of sources, as a tree.
#[derive(Debug)]
pub struct Collection {
    path: PathBuf,
    form: Form,
    marker: Option<Marker>,
    root: Group,
    shared: Arc<Shared>,
}

/// A group: a directory of the tree.
#[derive(Debug)]
pub struct Group {
    /// Its name (empty for the root).
    pub name: String,
    /// Its key (`/` for the root, `/a/b` below).
    pub key: String,
    /// Sub-groups and leaves, sorted by name.
    pub children: Vec<Node>,
    carrier: Option<Arc<Leaf>>,
}

/// A child of a group.
#[derive(Debug)]
pub enum Node {
    /// A sub-group.
    Group(Group),
    /// A source (array, table, or an object that failed to open).
    Leaf(Arc<Leaf>),
    /// A store nested in a directory of frames.
    Store(Box<Collection>),
}

/// Where a leaf's bytes are.
#[derive(Debug, Clone, PartialEq)]
pub enum Location {
    /// Member `index` of the zip (an index into [`zip::ZipIndex::names`]), named `name`.
    Member {
        /// Index into the zip's member names.
        index: usize,
        /// The member's name.
        name: String,
    },
    /// A frame file of a `.b2d` store.
    File(PathBuf),
    /// A frame file of a byte tree (a `.b2d` store under a remote prefix, a directory of a
    /// remote server): its name in the tree.
    TreeFile(String),
    /// A directory source of a byte tree (a sparse frame, bcolz carray or ctable under a
    /// remote prefix of sources): its directory's name in the tree.
    TreeDir(String),
    /// An embedded value: `len` bytes at `offset` of `embed.b2e`'s stream.
    Embedded {
        /// Offset in the estore's decompressed stream.
        offset: u64,
        /// Length of the cframe.
        len: u64,
    },
    /// An `embed_map` entry that is not a byte range (a remote array reference), as stored.
    Reference(Value),
    /// A source of a directory of frames ([`super::open`] on this path).
    Source(PathBuf),
    /// A path that could not be classified (the reason).
    Failed(PathBuf, String),
}

/// A leaf: one source, opened on first access.
#[derive(Debug)]
pub struct Leaf {
    name: String,
    key: String,
    location: Location,
    shared: Arc<Shared>,
    cell: OnceLock<Result<Container, Arc<ContainerError>>>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    zip: Option<zip::ZipIndex>,
    estore: Option<Estore>,
    scratch: OnceLock<Result<tempfile::TempDir, String>>,
    /// Leaves opened so far ([`Collection::leaves_opened`]).
    opened: AtomicUsize,
    /// The byte tree of a `.b2d` store under a remote prefix, or of a remote directory of
    /// sources ([`Location::TreeFile`]).
    tree: Option<Arc<dyn super::ByteTree>>,
}

impl Collection {
    /// The store file or directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Zip store, directory store or directory of frames.
    pub fn form(&self) -> Form {
        self.form
    }

    /// The marker metalayer of `embed.b2e` (stores; `None` when it has none of the three).
    pub fn marker(&self) -> Option<Marker> {
        self.marker
    }

    /// The root group.
    pub fn root(&self) -> &Group {
        &self.root
    }

    /// The zip index of a `.b2z` store.
    pub fn zip(&self) -> Option<&zip::ZipIndex> {
        self.shared.zip.as_ref()
    }

    /// Whether the collection's followed remote sources ([`Collection::followed`]) are known
    /// to have changed on their servers (the mount's follower asks them, each through
    /// [`Followed::poll_changed`]). False for local collections.
    pub fn source_changed(&self) -> bool {
        self.followed().iter().any(|f| f.poll_changed(false))
    }

    /// The collection opened again as its source is now (after a commit, or another writer's
    /// change): a local store or directory from its path; a followed remote `.b2z` fetched
    /// again from its server; a `.b2d` under a followed prefix from the prefix listed again;
    /// a remote server's listed directory is `this` itself, whose leaves open anew from the
    /// server at every [`Leaf::open_owned`] (names added or removed there come from
    /// [`Collection::relisted`]), or, when one of its `.b2z` stores changed, the directory
    /// listed again with that store opened again (`follow.rs`).
    ///
    /// # Errors
    /// When it cannot be opened now, or no longer opens as a collection.
    pub fn reopened(this: &Arc<Collection>) -> Result<Arc<Collection>, ContainerError> {
        if let Some(again) = follow::reopened_remote(this)? {
            return Ok(again);
        }
        let path = &this.path;
        let remote = this.zip().and_then(zip::ZipIndex::byte_source);
        let opened = match remote.and_then(|b| b.reopen()) {
            Some(bytes) => Opened::Collection(open_store_bytes(bytes.map_err(|source| {
                ContainerError::Io {
                    path: path.clone(),
                    source,
                }
            })?)?),
            None => open_any(path)?,
        };
        match opened {
            Opened::Collection(c) => Ok(Arc::new(c)),
            Opened::Single(_) => Err(ContainerError::Changed {
                path: path.clone(),
                why: "it no longer opens as a collection".into(),
            }),
        }
    }

    /// The node at `key` (`/a/b`; `/` is not a node: use [`Collection::root`]).
    pub fn find(&self, key: &str) -> Option<&Node> {
        let mut group = &self.root;
        let mut parts = key.split('/').filter(|p| !p.is_empty()).peekable();
        while let Some(part) = parts.next() {
            let node = group.child(part)?;
            if parts.peek().is_none() {
                return Some(node);
            }
            match node {
                Node::Group(g) => group = g,
                _ => return None,
            }
        }
        None
    }

    /// The group at `key` (`/` for the root).
    pub fn group(&self, key: &str) -> Option<&Group> {
        if key.split('/').all(str::is_empty) {
            return Some(&self.root);
        }
        match self.find(key)? {
            Node::Group(g) => Some(g),
            _ => None,
        }
    }

    /// The opened `embed.b2e` of a store (its frame), for write-back.
    pub(crate) fn estore_array(&self) -> Option<&Array> {
        self.shared.estore.as_ref().map(Estore::array)
    }

    /// The decompressed bytes `[offset, offset + len)` of the store's `embed.b2e` stream (an
    /// embedded value's cframe).
    ///
    /// # Errors
    /// When the store has no estore or the range cannot be read.
    pub(crate) fn read_embedded(&self, offset: u64, len: u64) -> Result<Vec<u8>, ContainerError> {
        self.shared
            .estore
            .as_ref()
            .ok_or_else(|| internal(&self.path))?
            .read(offset, len)
    }

    /// How many times a leaf of this collection was opened (its headers and index read):
    /// what shows that opening a collection, and mounting it, opens no leaf.
    pub fn leaves_opened(&self) -> usize {
        self.shared.opened.load(Ordering::Relaxed)
    }

    /// Every leaf, depth first in name order (not those of nested stores).
    pub fn leaves(&self) -> Vec<&Arc<Leaf>> {
        fn walk<'a>(g: &'a Group, out: &mut Vec<&'a Arc<Leaf>>) {
            for c in &g.children {
                match c {
                    Node::Group(g) => walk(g, out),
                    Node::Leaf(l) => out.push(l),
                    Node::Store(_) => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }
}

impl Group {
    /// The child named `name`.
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children
            .binary_search_by(|c| c.name().cmp(name))
            .ok()
            .and_then(|i| self.children.get(i))
    }

    /// The group's attributes as a JSON object: its `__vlmeta__` carrier's vlmeta (TreeStore),
    /// or `{}` when it has none.
    ///
    /// # Errors
    /// The carrier's open error.
    pub fn attrs(&self) -> Result<Value, Arc<ContainerError>> {
        match &self.carrier {
            None => Ok(Value::Object(Default::default())),
            Some(c) => Ok(c.array()?.attrs().clone()),
        }
    }

    /// The `__vlmeta__` carrier holding the attributes, if the group has one (to commit new
    /// attributes through).
    pub fn carrier(&self) -> Option<&Arc<Leaf>> {
        self.carrier.as_ref()
    }
}

impl Node {
    /// The node's name in its group.
    pub fn name(&self) -> &str {
        match self {
            Node::Group(g) => &g.name,
            Node::Leaf(l) => &l.name,
            Node::Store(s) => s
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default(),
        }
    }
}

impl Leaf {
    /// Its name in its group.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its key (`/a/b`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Where its bytes are.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The store (or directory) it belongs to.
    pub fn store_path(&self) -> &Path {
        &self.shared.path
    }

    /// Whether it was opened already (successfully or not).
    pub fn is_open(&self) -> bool {
        self.cell.get().is_some()
    }

    /// Opens it on first call (reading only its headers, index and trailer; embedded values
    /// are decoded into a private temporary file) and returns the same result afterwards. A
    /// failure is logged once, naming the store and the key.
    ///
    /// # Errors
    /// Why the leaf cannot be opened.
    pub fn open(&self) -> Result<&Container, Arc<ContainerError>> {
        self.cell
            .get_or_init(|| {
                self.open_now().map_err(|e| {
                    log::warn!(
                        "{}: {}: cannot open: {e}",
                        self.shared.path.display(),
                        self.key
                    );
                    Arc::new(e)
                })
            })
            .as_ref()
            .map_err(Arc::clone)
    }

    /// Opens the leaf again, into a container the caller owns (the tree keeps it behind its
    /// own lock and replaces it after commits); not cached, not logged.
    ///
    /// # Errors
    /// Why the leaf cannot be opened.
    pub fn open_owned(&self) -> Result<Container, ContainerError> {
        self.open_now()
    }

    /// Opens the leaf again for its metadata (a many-member store's consolidated Zarr
    /// metadata): the same [`Container`] as [`Leaf::open_owned`], but a frame leaf's bytes
    /// are read in one window at its start (the whole frame up to 128 KiB) and, for a larger
    /// frame, one at its end, instead of five reads (`head.rs`); an embedded value is
    /// decoded in memory, not into a temporary file. Other leaves (sources of a directory)
    /// open as [`Leaf::open_owned`] does. Counted as an open; not cached, not logged.
    ///
    /// # Errors
    /// Why the leaf cannot be opened (the same as [`Leaf::open_owned`]'s).
    pub fn open_head(&self) -> Result<Container, ContainerError> {
        let store = &self.shared.path;
        let io = |path: &Path, source| ContainerError::Io {
            path: path.to_path_buf(),
            source,
        };
        let windowed = |w: head::Windowed| Array::open_frame_bytes(Arc::new(w), 0);
        let array = match &self.location {
            Location::Member { index, .. } => {
                let zip = self.shared.zip.as_ref().ok_or_else(|| internal(store))?;
                let (backing, mtime) = zip.backing().ok_or_else(|| internal(store))?;
                self.shared.opened.fetch_add(1, Ordering::Relaxed);
                let w = zip.window(*index)?;
                let name = zip.path().display().to_string();
                let a = windowed(head::Windowed::read(
                    &name, backing, w.offset, w.len, mtime,
                )?)?;
                check_member(zip, *index, &w, &a)?;
                a
            }
            Location::File(p) => {
                self.shared.opened.fetch_add(1, Ordering::Relaxed);
                let file = std::fs::File::open(p).map_err(|e| io(p, e))?;
                let meta = file.metadata().map_err(|e| io(p, e))?;
                if !meta.is_file() {
                    return self.open_now();
                }
                let mtime = meta.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH);
                let backing = head::Backing::File(Arc::new(file));
                let name = p.display().to_string();
                windowed(head::Windowed::read(&name, backing, 0, meta.len(), mtime)?)?
            }
            Location::Embedded { offset, len } => {
                let estore = self.shared.estore.as_ref().ok_or_else(|| internal(store))?;
                self.shared.opened.fetch_add(1, Ordering::Relaxed);
                let bytes = estore.read(*offset, *len)?;
                let name = format!("{}: embedded {}", store.display(), self.key);
                let mtime = std::time::SystemTime::UNIX_EPOCH;
                windowed(head::Windowed::in_memory(&name, bytes, mtime))?
            }
            _ => return self.open_now(),
        };
        Ok(Container::Array(array))
    }

    /// [`Leaf::open`] for a leaf that must be one array.
    ///
    /// # Errors
    /// The open error, or [`ContainerError::Unsupported`] for a table.
    pub fn array(&self) -> Result<&Array, Arc<ContainerError>> {
        match self.open()? {
            Container::Array(a) => Ok(a),
            Container::Table(t) => Err(Arc::new(ContainerError::Unsupported {
                path: t.path.clone(),
                what: format!("{} is a table, not an array", self.key),
            })),
        }
    }

    /// The special object kind of an opened frame leaf (`batcharray`, `listarray`,
    /// `vlarray`, `b2o`, `b2remote_store`, or a store marker), `None` for plain arrays and
    /// SChunks, and for leaves not opened yet.
    pub fn special(&self) -> Option<&str> {
        match self.cell.get()? {
            Ok(Container::Array(a)) => special_kind(a),
            _ => None,
        }
    }

    fn open_now(&self) -> Result<Container, ContainerError> {
        self.shared.opened.fetch_add(1, Ordering::Relaxed);
        let store = &self.shared.path;
        match &self.location {
            Location::Member { index, .. } => {
                let zip = self.shared.zip.as_ref().ok_or_else(|| internal(store))?;
                open_member(zip, *index).map(Container::Array)
            }
            Location::File(p) => Array::open_frame_at(p, 0).map(Container::Array),
            Location::TreeFile(rel) => {
                let tree = self.shared.tree.as_ref().ok_or_else(|| internal(store))?;
                let bytes = tree.open_file(rel).map_err(|source| ContainerError::Io {
                    path: store.join(rel),
                    source,
                })?;
                super::open_bytes(bytes)
            }
            Location::TreeDir(rel) => {
                let tree = self.shared.tree.as_ref().ok_or_else(|| internal(store))?;
                super::open_tree_at(Arc::clone(tree), &store.join(rel))
            }
            Location::Embedded { offset, len } => {
                let estore = self.shared.estore.as_ref().ok_or_else(|| internal(store))?;
                let bytes = estore.read(*offset, *len)?;
                let dir = self
                    .shared
                    .scratch
                    .get_or_init(|| {
                        tempfile::Builder::new()
                            .prefix("b2fs-embedded-")
                            .tempdir()
                            .map_err(|e| e.to_string())
                    })
                    .as_ref()
                    .map_err(|why| ContainerError::Io {
                        path: store.clone(),
                        source: std::io::Error::other(format!("temporary directory: {why}")),
                    })?;
                let file = dir.path().join(format!("{offset}.b2frame"));
                std::fs::write(&file, &bytes).map_err(|source| ContainerError::Io {
                    path: file.clone(),
                    source,
                })?;
                Array::open_frame_at(&file, 0).map(Container::Array)
            }
            Location::Reference(v) => Err(ContainerError::Unsupported {
                path: store.clone(),
                what: format!("{} is a reference to a remote array ({v})", self.key),
            }),
            Location::Source(p) => super::open(p),
            Location::Failed(p, why) => Err(ContainerError::NotAContainer {
                path: p.clone(),
                why: why.clone(),
            }),
        }
    }
}

/// The special object kind of a frame (`batcharray`, `listarray`, `vlarray`, `b2o`,
/// `b2remote_store`, or a store marker), `None` for plain arrays and SChunks.
pub fn special_kind(a: &Array) -> Option<&str> {
    const SPECIAL: &[&str] = &[
        "batcharray",
        "listarray",
        "vlarray",
        "b2o",
        "b2remote_store",
        "b2tree",
        "b2dict",
        "b2embed",
    ];
    a.metalayers()
        .iter()
        .map(|m| m.name.as_str())
        .find(|n| SPECIAL.contains(n))
}

fn internal(path: &Path) -> ContainerError {
    ContainerError::Malformed {
        path: path.to_path_buf(),
        what: "store".into(),
        offset: 0,
        why: "leaf location does not match the store form".into(),
    }
}

/// Opens member `index` of `zip` as a frame at its window, checking that the frame ends
/// inside the member.
pub(crate) fn open_member(zip: &zip::ZipIndex, index: usize) -> Result<Array, ContainerError> {
    let w = zip.window(index)?;
    let a = match zip.byte_source() {
        Some(b) => Array::open_frame_bytes(Arc::clone(b), w.offset)?,
        None => Array::open_frame_at(zip.path(), w.offset)?,
    };
    check_member(zip, index, &w, &a)?;
    Ok(a)
}

/// Checks that the frame `a` opened in member `index` (window `w`) of `zip` ends inside it.
fn check_member(
    zip: &zip::ZipIndex,
    index: usize,
    w: &zip::Window,
    a: &Array,
) -> Result<(), ContainerError> {
    let frame_len = a.frame_info().map_or(0, |i| i.frame_len);
    if frame_len > w.len {
        return Err(ContainerError::Malformed {
            path: zip.path().to_path_buf(),
            what: format!("zip member {:?}", zip.names()[index]),
            offset: w.offset,
            why: format!(
                "its frame claims {frame_len} bytes, the member has {}",
                w.len
            ),
        });
    }
    Ok(())
}
