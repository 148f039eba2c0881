//! [`Layout`]: the fixed shape of a tree before it is served: directories, files with their
//! content rendered up front (the JSON metadata), and data directories whose chunk files are
//! produced on demand from a [`ChunkStore`].
//!
//! Inode numbers are assigned here, once: the root is 1 and fixed nodes follow in creation
//! order. Chunk files are not nodes: [`crate::tree::Tree`] numbers them `base + index` after
//! the fixed nodes, so a source with a million chunks costs no per-chunk allocation.

use std::sync::Arc;
use std::time::SystemTime;

use super::store::ChunkStore;
use super::write::{AttrsTarget, SharedArray, Source};
use crate::container::Array;

/// Inode number of the root directory.
pub const ROOT_INO: u64 = 1;

/// Owner and times every inode of a tree shows (the source's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Modification time.
    pub mtime: SystemTime,
}

impl Owner {
    /// The owner, group and mtime of `path`, or root/now-less defaults when it cannot be read.
    pub fn of(path: &std::path::Path) -> Owner {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(path) {
            Ok(m) => Owner {
                uid: m.uid(),
                gid: m.gid(),
                mtime: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            },
            Err(_) => Owner {
                uid: 0,
                gid: 0,
                mtime: SystemTime::UNIX_EPOCH,
            },
        }
    }
}

#[derive(Debug)]
pub(crate) enum NodeKind {
    /// A directory: fixed children by inode, or (when `data` is set) the chunk files of that
    /// data directory.
    Dir {
        children: Vec<u64>,
        data: Option<usize>,
    },
    /// A file whose bytes are known up front.
    File { content: Arc<[u8]> },
}

#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) parent: u64,
    pub(crate) kind: NodeKind,
}

/// The shape of a tree: fixed nodes plus the chunk stores behind its data directories.
#[derive(Debug)]
pub struct Layout {
    pub(crate) nodes: Vec<Node>,
    pub(crate) stores: Vec<Box<dyn ChunkStore>>,
    /// Per store: the writable array behind it (`None` for synthetic stores).
    pub(crate) sources: Vec<Option<Arc<Source>>>,
    /// `__attrs__` files and what they edit.
    pub(crate) attrs: Vec<(u64, AttrsTarget)>,
    /// `meta/sizes` files: (inode, data set they describe), re-rendered after commits.
    pub(crate) sizes: Vec<(u64, usize)>,
    pub(crate) owner: Owner,
}

impl Layout {
    /// A layout with only the root directory.
    pub fn new(owner: Owner) -> Layout {
        Layout {
            nodes: vec![Node {
                name: String::new(),
                parent: ROOT_INO,
                kind: NodeKind::Dir {
                    children: Vec::new(),
                    data: None,
                },
            }],
            stores: Vec::new(),
            sources: Vec::new(),
            attrs: Vec::new(),
            sizes: Vec::new(),
            owner,
        }
    }

    /// Adds a directory `name` under directory `parent`; returns its inode.
    ///
    /// # Panics
    /// If `parent` is not a directory of this layout without chunk files (a programming error
    /// in the view rules, not something input can cause).
    pub fn dir(&mut self, parent: u64, name: &str) -> u64 {
        self.push(
            parent,
            name,
            NodeKind::Dir {
                children: Vec::new(),
                data: None,
            },
        )
    }

    /// Adds a file `name` with fixed `content` under `parent`; returns its inode.
    ///
    /// # Panics
    /// As [`Layout::dir`].
    pub fn file(&mut self, parent: u64, name: &str, content: Vec<u8>) -> u64 {
        self.push(
            parent,
            name,
            NodeKind::File {
                content: content.into(),
            },
        )
    }

    /// Adds a directory `name` under `parent` whose entries are the chunk files of `store`
    /// (`00000000.bin`, ...); returns its inode.
    ///
    /// # Panics
    /// As [`Layout::dir`].
    pub fn data_dir(&mut self, parent: u64, name: &str, store: Box<dyn ChunkStore>) -> u64 {
        let index = self.stores.len();
        self.stores.push(store);
        self.sources.push(None);
        self.push(
            parent,
            name,
            NodeKind::Dir {
                children: Vec::new(),
                data: Some(index),
            },
        )
    }

    /// Adds a data directory `name` under `parent` for `array`, which a read-write tree can
    /// commit edits to; returns its inode.
    ///
    /// # Panics
    /// As [`Layout::dir`].
    pub fn array_dir(&mut self, parent: u64, name: &str, array: Array) -> u64 {
        let source = Arc::new(Source::new(array));
        let ino = self.data_dir(parent, name, Box::new(SharedArray(source.clone())));
        if let Some(last) = self.sources.last_mut() {
            *last = Some(source);
        }
        ino
    }

    /// Marks file `ino` as an `__attrs__` file editing `target`; the data set of the last
    /// added data directory is `self.stores.len() - 1`.
    pub(crate) fn attrs_file(&mut self, ino: u64, target: AttrsTarget) {
        self.attrs.push((ino, target));
    }

    /// Marks file `ino` as the `meta/sizes` of data set `set`.
    pub(crate) fn sizes_file(&mut self, ino: u64, set: usize) {
        self.sizes.push((ino, set));
    }

    /// Number of data directories added so far.
    pub fn data_sets(&self) -> usize {
        self.stores.len()
    }

    fn push(&mut self, parent: u64, name: &str, kind: NodeKind) -> u64 {
        let ino = self.nodes.len() as u64 + 1;
        let slot = usize::try_from(parent - 1)
            .ok()
            .and_then(|i| self.nodes.get_mut(i));
        match slot.map(|n| &mut n.kind) {
            Some(NodeKind::Dir {
                children,
                data: None,
            }) => children.push(ino),
            _ => panic!("layout: parent {parent} of {name:?} is not a plain directory"),
        }
        self.nodes.push(Node {
            name: name.to_owned(),
            parent,
            kind,
        });
        ino
    }
}
