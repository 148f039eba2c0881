//! The filesystem logic: the directory tree a mounted source shows, as an in-process API
//! (lookup, getattr, readdir, open, read, write, flush, release, statfs, ...) that tests drive
//! without a kernel.
//!
//! This module knows nothing of fuser or the kernel protocol: it answers with b2fs-owned types
//! ([`Attr`], [`DirEntry`], [`StatFs`], [`TreeError`]) and [`crate::fuse`] translates. It does
//! not decode either: chunk bytes come from the [`crate::reader`] layer, by [`ChunkId`].
//!
//! What a mount looks like (see [`view`] for the rules):
//!
//! ```text
//! MOUNTPOINT/
//!   __attrs__             JSON: the frame's vlmeta / bcolz __attrs__
//!   array.npy             the whole array as an NPY file (C order, unpadded)
//!   meta/sizes            JSON: shape, nbytes, cbytes, nchunks
//!   meta/storage          JSON: dtype, chunkshape|chunklen, blockshape, typesize, chunksize, cparams
//!   meta/metalayers/NAME  JSON: one per fixed metalayer, decoded
//!   data/00000000.bin     chunk 0, decompressed
//!   zarr/                 a Zarr v3 hierarchy of the same arrays (`zarr.rs`)
//! ```
//!
//! Where each concern lives:
//!
//! | file | owns |
//! | --- | --- |
//! | `tree.rs` | [`Tree`]: each operation classifies its inode (`Entry`) and delegates |
//! | `build.rs` | building a [`Tree`]: [`TreeOptions`], opening a source, the check that a layout can be numbered |
//! | `registry.rs` | one entry per array (its writable array, its generated files) beside the reader's store, and what is mounted (`Mounted`) |
//! | `inode.rs` | the numbering plan: nodes, chunk files per array, scratch files |
//! | `layout.rs`, `view.rs` | the nodes a source shows and the rules that choose them |
//! | `dir.rs` | listings and chunk file names |
//! | `handle.rs` | open handles: the mode decided at open (the version a read-only one pinned, or what a writer writes), the access pattern ([`crate::reader::Access`]) |
//! | `read.rs` | what a read returns, per kind of file |
//! | `npy.rs` | `array.npy` / `table.npy`: bytes assembled from chunks, writes split into chunk edits |
//! | `edit.rs` | buffered edits (keyed by chunk, not by file) and the write operations; `edit/pending.rs` the buffers and the bound on their memory (`edit_budget`), `edit/spill.rs` the spill file past it |
//! | `commit.rs` | when buffers are committed (through [`crate::commit`]), refused, dropped; the kernel-cache rules |
//! | `reload.rs` | the one path for "the source changed: reload and propagate" (own commits and other writers) |
//! | `scratch.rs` | editors' temp files beside an `__attrs__`, rename over it |
//! | `ctable.rs` | `table.npy` of a python-blosc2 CTable group in a store: recognised by names, laid out on first access, valid rows as runs |
//! | `collection.rs` | stores and directories of sources: groups, leaves laid out on first access, reloads after commits |
//! | `follow.rs` | noticing other writers' changes: reloads and the kernel invalidations |
//! | `backing.rs` | memory files holding whole decoded files for FUSE passthrough, within a budget |
//! | `zarr.rs`, `zarr/` | the Zarr v3 view in `zarr/`: its inode plan, metadata, chunk objects, writes |
//! | `attr.rs` | the b2fs-owned answer types ([`Attr`], [`DirEntry`], [`StatFs`]) and `statfs` |
//! | `error.rs` | [`TreeError`] and the one map from a failure to its errno |
//! | `xattr.rs`, `names.rs` | the read-only `user.b2fs.*` extended attributes; python-blosc2's names of codecs and filters |
//! | `members.rs` | following a collection another writer changes: reopened, its leaves reloaded |
//! | `events.rs` | the ring of recent refusals and notices `b2fs log` shows; paths of inodes for messages |
//!
//! Subtleties and who handles them:
//! - **Stable inode numbers** (`inode.rs`); **readdir offsets are positions** (`dir.rs`).
//! - **One chunk, several files.** `data/N.bin` and `array.npy` show the same chunks: reads of
//!   both share the reader's caches (one decode per chunk), and edits of both patch the same
//!   buffer, keyed by [`ChunkId`] (`edit.rs`), so each view sees the other's writes at once.
//! - **A chunk that fails to decode** fails reads of the files that need it with
//!   [`TreeError::Container`] (EIO); every other file keeps working.
//! - **Read-only or read-write** ([`TreeOptions::writable`]): read-only refuses every change
//!   with EROFS. Read-write commits on fsync, on a close of a handle opened for writing by
//!   the process that opened it ([`Pid`]: a forked child's close commits nothing), and on
//!   release (`commit.rs`); commits are serialised by the committer lock.
//! - **ctables**: a commit that changes a column's row count resizes every column
//!   (`commit.rs`); opening one read-write first trims columns longer than the first.
//! - **One version per descriptor** (issue 12): a read-only descriptor reads the array
//!   version it pinned at open (`read.rs`, [`crate::reader::Snapshot`]), never bytes of two.
//! - **Other writers**: the tree follows changes to the source (`follow.rs`: at open, lookup,
//!   and every second from the adapter); a commit that finds the source changed on disk
//!   (ESTALE) reloads every array and drops cached chunks, so a retry applies to what is
//!   stored now.
//!
//! - **Collections grow while mounted**: a leaf's subtree is laid out on first access
//!   (`collection.rs`); nodes and arrays live in [`AppendVec`]s, so references to existing
//!   ones stay valid while it is added, and the growing inode plan numbers it (`inode.rs`).
//!
//! Lock order (parking_lot mutexes are not reentrant): `handles` before `edits` before
//! `scratch` before `kcache`; the `committer` is taken before any of them and held for a whole
//! commit (a reload after another writer takes it too). `follow.rs`'s own locks are leaves.
//! `Tree::entry` takes `edits` and `scratch` itself: never call it (or `getattr`,
//! `lookup`) with either held. `grow` is taken by `lookup`/`readdir` of a leaf directory not
//! laid out yet, with no other lock held (the committer included: `lookup` and `readdir` are
//! never called with it held), and held while that leaf opens; and by the reload of a
//! collection another writer changed (`members.rs`), after the committer; inside it only the
//! appends of the [`AppendVec`]s, `follow.rs`'s locks and a leaf's failure record
//! (`collection.rs`, a leaf lock) lock. No lock is held across a decode except the
//! committer's.

pub mod attr;
mod backing;
mod build;
mod collection;
mod commit;
mod ctable;
mod dir;
mod edit;
pub mod error;
pub mod events;
mod follow;
mod handle;
pub mod inode;
pub mod layout;
mod members;
mod names;
mod npy;
mod read;
mod registry;
mod reload;
mod scratch;
pub mod view;
pub mod xattr;
pub mod zarr;

use std::borrow::Cow;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::commit::Committer;
use crate::reader::{AppendVec, ArrayId, CacheStats, ChunkId, ChunkReader};
use commit::KernelCache;
use edit::Edits;
use handle::Handles;
use inode::{Inodes, Located};
use layout::{FileKind, Node, NodeKind};
use registry::{ArrayEntry, Mounted};
use scratch::ScratchFiles;

pub use crate::reader::ChunkStore;
pub use crate::reader::{PAGE, Pieces, RANGE_READ_MAX, ReadData, ReaderOptions};
pub use attr::{Attr, DirEntry, EntryKind, StatFs};
pub use backing::{BackingNow, BackingStats};
pub use build::TreeOptions;
pub use dir::{ReadDir, chunk_name};
pub use edit::{DEFAULT_EDIT_BUDGET, EditStats};
pub use error::{TreeError, display_chain};
pub use follow::{Follow, Invalidation};
pub use handle::Pid;
pub use layout::{Layout, Owner, ROOT_INO};
pub use npy::{Leads, Offered};

/// What a test asks the tree to run at one point of an operation (`Tree::on_zarr_resize`,
/// `on_zarr_create`, `on_zarr_mkdir`, `on_scratch_drop`): it makes a concurrent change
/// land exactly there.
pub(crate) struct TestHook(Box<dyn FnOnce(&Tree) + Send>);

impl TestHook {
    pub(crate) fn new(hook: Box<dyn FnOnce(&Tree) + Send>) -> TestHook {
        TestHook(hook)
    }

    /// Runs the hook on `tree`.
    pub(crate) fn run(self, tree: &Tree) {
        (self.0)(tree)
    }
}

impl std::fmt::Debug for TestHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestHook")
    }
}

/// Preferred I/O size reported in `stat` (`st_blksize`): the largest FUSE request. `cat`,
/// `cp` and stdio size their buffers from it, and with direct I/O every `read()` is one round
/// trip to b2fs, so 1 MiB reads take an eighth of the round trips of 128 KiB ones.
const BLKSIZE: u32 = 1024 * 1024;
/// Longest name a lookup accepts.
const NAME_MAX: usize = 255;

/// What an inode is, classified.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry<'a> {
    /// A directory: its node, and the array whose chunk files it lists, if any.
    Dir(&'a Node, Option<ArrayId>),
    /// A generated file.
    File(&'a FileKind),
    /// A chunk file (stored, or being created).
    Chunk(ChunkId),
    /// An editor's scratch file (in a directory with `__attrs__`, or of the Zarr view).
    Scratch,
    /// A node of the Zarr view (`zarr.rs`).
    Zarr(zarr::ZNode),
    /// A node of the read-only Zarr v2 view (`zarr/v2.rs`).
    Zarr2(zarr::V2),
}

/// The virtual filesystem of one mounted source. `Sync`: FUSE worker threads share it.
#[derive(Debug)]
pub struct Tree {
    /// Node `i` has inode `i + 1`; a collection adds its leaves' nodes on first access.
    nodes: AppendVec<Node>,
    inodes: Inodes,
    reader: ChunkReader,
    /// Per array (by [`ArrayId`]): its registry entry.
    arrays: AppendVec<ArrayEntry>,
    /// Serialises the laying out of collection leaves (see the lock order above).
    grow: Mutex<()>,
    /// What is mounted: one array, a ctable, a collection.
    mounted: Mounted,
    owner: Owner,
    options: TreeOptions,
    handles: Handles,
    edits: Mutex<Edits>,
    scratch: Mutex<ScratchFiles>,
    kcache: Mutex<KernelCache>,
    /// The latest page faults of `array.npy` files (walks down a column, see `npy.rs`).
    faults: Mutex<npy::RecentFaults>,
    /// Serialises commits; one encoder reused by all of them.
    committer: Mutex<Committer>,
    /// The committer's [`crate::commit::CommitStats`], read without waiting for a commit.
    commit_stats: std::sync::Arc<Mutex<crate::commit::CommitStats>>,
    /// Issue 15: recent refusals and errors, for `b2fs log` ([`events`]).
    events: events::EventLog,
    /// Issue 12: following changes other writers make to the source (`follow.rs`).
    follow: Arc<Follow>,
    /// Issue 20: the Zarr view's state (`zarr.rs`).
    zarr: zarr::ZarrState,
    /// Memory files holding whole files for FUSE passthrough (`backing.rs`).
    backings: backing::Backings,
}

impl Drop for Tree {
    /// Ends the thread that follows the source at once (it holds only a weak reference to
    /// the tree, but waits for invalidations up to a second at a time).
    fn drop(&mut self) {
        self.follow.close();
    }
}

impl Tree {
    /// Whether this tree accepts edits (a read-write mount).
    pub fn is_writable(&self) -> bool {
        self.options.writable
    }

    /// Counters of the chunk cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.reader.cache_stats()
    }

    /// Counters of the cache of decoded blocks (random small reads).
    pub fn block_cache_stats(&self) -> CacheStats {
        self.reader.block_cache_stats()
    }

    /// Counters of the cache of 4 KiB pages (random small reads).
    pub fn page_cache_stats(&self) -> CacheStats {
        self.reader.page_cache_stats()
    }

    /// Bands of `array.npy` scans decoded so far (see [`crate::reader::BandStream`]).
    pub fn bands_decoded(&self) -> u64 {
        self.reader.bands_decoded()
    }

    /// Whether the pages small reads keep have all reached the page cache (they are copied
    /// there off the read's path).
    pub fn pages_settled(&self) -> bool {
        self.reader.pages_settled()
    }

    /// Bytes held by the chunk cache now.
    pub fn cache_bytes(&self) -> usize {
        self.reader.cache_bytes()
    }

    /// Classifies `ino`.
    pub(crate) fn entry(&self, ino: u64) -> Result<Entry<'_>, TreeError> {
        match self.inodes.locate(ino) {
            Located::Node(i) => {
                let node = self.nodes.get(i).ok_or(TreeError::NotFound)?;
                Ok(match &node.kind {
                    NodeKind::Dir { data, .. } => Entry::Dir(node, *data),
                    NodeKind::Leaf(_) => Entry::Dir(node, None),
                    NodeKind::File(kind) => Entry::File(kind),
                })
            }
            Located::Chunk(id) => {
                let exists = id.array.index() < self.reader.arrays()
                    && (id.index < self.reader.nchunks(id.array) || self.creating(id));
                if exists {
                    Ok(Entry::Chunk(id))
                } else {
                    Err(TreeError::NotFound)
                }
            }
            Located::Scratch if self.scratch.lock().files.contains_key(&ino) => Ok(Entry::Scratch),
            Located::Zarr => match zarr::ZNode::of(ino) {
                // A directory made for a new array: the array's once made.
                Some(zarr::ZNode::Pending(k)) => match self.zarr_pending(k) {
                    Some(z) if self.zarr_exists(z) => Ok(Entry::Zarr(z)),
                    _ => Err(TreeError::NotFound),
                },
                Some(z) if self.zarr_exists(z) => Ok(Entry::Zarr(z)),
                Some(_) => Err(TreeError::NotFound),
                None => self
                    .zarr2_entry(ino)
                    .map(Entry::Zarr2)
                    .ok_or(TreeError::NotFound),
            },
            Located::Scratch | Located::Nothing => Err(TreeError::NotFound),
        }
    }

    fn node(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(usize::try_from(ino.checked_sub(1)?).ok()?)
    }

    /// The children of directory `ino` (`node`): a collection leaf's are laid out on first
    /// access.
    ///
    /// # Errors
    /// [`TreeError::Unavailable`] (EIO) for a directory whose content cannot be shown.
    fn children<'a>(&'a self, ino: u64, node: &'a Node) -> Result<Cow<'a, [u64]>, TreeError> {
        match &node.kind {
            NodeKind::Dir {
                error: Some(why), ..
            } => Err(TreeError::Unavailable(why.to_string())),
            NodeKind::Dir { children, .. } => Ok(self.members_of(ino, children)),
            NodeKind::Leaf(_) if self.member_gone(ino) => Err(TreeError::NotFound),
            NodeKind::Leaf(lazy) => self.leaf_children(ino, lazy).map(Cow::Borrowed),
            NodeKind::File(_) => Err(TreeError::NotADirectory(ino)),
        }
    }

    /// The attributes of `ino`.
    ///
    /// # Errors
    /// [`TreeError::NotFound`] for unknown inodes; [`TreeError::Container`] when a chunk's
    /// size cannot be read.
    pub fn getattr(&self, ino: u64) -> Result<Attr, TreeError> {
        let entry = self.entry(ino)?;
        let mtime = self.mtime_of(ino, &entry);
        let (kind, size, nlink) = match entry {
            Entry::Dir(node, _) => {
                // A collection leaf's directory: not opened by a stat; 1 = "count unknown".
                let NodeKind::Dir { children, .. } = &node.kind else {
                    return Ok(Attr {
                        mtime,
                        ..self.dir_attr(ino, 1)
                    });
                };
                let subdirs = children
                    .iter()
                    .filter(|&&c| {
                        matches!(
                            self.node(c).map(|n| &n.kind),
                            Some(NodeKind::Dir { .. } | NodeKind::Leaf(_))
                        )
                    })
                    .count();
                (EntryKind::Directory, 0, 2 + subdirs as u32)
            }
            Entry::Zarr(z) => return self.zarr_getattr(ino, z),
            Entry::Zarr2(v) => return self.zarr2_getattr(ino, v),
            entry => (EntryKind::File, self.file_size(ino, entry)?, 1),
        };
        Ok(Attr {
            mtime,
            ..self.attr(ino, kind, size, nlink)
        })
    }

    /// The attributes of directory `ino` with `nlink` links.
    fn dir_attr(&self, ino: u64, nlink: u32) -> Attr {
        self.attr(ino, EntryKind::Directory, 0, nlink)
    }

    /// Issue 21: when what `ino` (`entry`) shows last changed, the time `stat` shows (mtime
    /// and ctime). Chunk files: the commit (or another writer's change the mount followed)
    /// that last changed that chunk; a data directory: the last change of its chunk count;
    /// `array.npy`/`table.npy`: the last change of any of their chunks; `meta/sizes` and
    /// `__attrs__`: the last change of their bytes; the root: the last scratch file created,
    /// renamed or removed (anywhere: a stat of another directory must not open a collection
    /// leaf to learn whether it takes scratch files). Everything else, and everything not changed since the mount,
    /// shows the source's time read at mount. Cheap: no allocation per chunk
    /// ([`crate::reader::Snapshot::chunk_time`]).
    fn mtime_of(&self, ino: u64, entry: &Entry<'_>) -> std::time::SystemTime {
        let snap = |a: ArrayId| self.live(a).map(|l| l.snapshot());
        let t = match entry {
            Entry::Dir(_, Some(a)) => snap(*a).and_then(|s| s.listed_time()),
            Entry::Dir(..) if ino == ROOT_INO => self.scratch.lock().changed,
            Entry::Dir(..) | Entry::File(FileKind::Fixed(_)) => None,
            Entry::File(FileKind::Attrs(_, g) | FileKind::Sizes(_, g)) => g.changed(),
            Entry::File(FileKind::Npy(a, _)) => snap(*a).and_then(|s| s.changed_time()),
            Entry::File(FileKind::TableNpy(_, columns)) => columns
                .iter()
                .filter_map(|a| snap(*a).and_then(|s| s.changed_time()))
                .max(),
            // As rendered last (a stat renders it first: `file_size`).
            Entry::File(FileKind::CTableNpy(file)) => file.rendered().and_then(|v| {
                v.arrays()
                    .filter_map(|a| snap(a).and_then(|s| s.changed_time()))
                    .max()
            }),
            Entry::Chunk(id) => snap(id.array).and_then(|s| s.chunk_time(id.index)),
            Entry::Scratch => self.scratch.lock().files.get(&ino).map(|f| f.mtime),
            // The Zarr view shows the source's time (`zarr_getattr`).
            Entry::Zarr(_) | Entry::Zarr2(_) => None,
        };
        t.unwrap_or(self.owner.mtime)
    }

    fn attr(&self, ino: u64, kind: EntryKind, size: u64, nlink: u32) -> Attr {
        Attr {
            ino,
            kind,
            size,
            blocks: size.div_ceil(512),
            perm: match (kind, self.writable_ino(ino)) {
                (EntryKind::Directory, false) => 0o555,
                (EntryKind::Directory, true) => 0o755,
                (EntryKind::File, false) => 0o444,
                (EntryKind::File, true) => 0o644,
            },
            nlink,
            uid: self.owner.uid,
            gid: self.owner.gid,
            mtime: self.owner.mtime,
            blksize: BLKSIZE,
        }
    }

    /// The entry `name` in directory `parent`, with its attributes.
    ///
    /// # Errors
    /// [`TreeError::NotFound`], [`TreeError::NotADirectory`], [`TreeError::NameTooLong`], or
    /// [`TreeError::Container`] when the entry's size cannot be read.
    pub fn lookup(&self, parent: u64, name: &str) -> Result<Attr, TreeError> {
        if name.len() > NAME_MAX {
            return Err(TreeError::NameTooLong);
        }
        self.follow_at_lookup();
        let entry = self.entry(parent)?;
        if let Entry::Zarr(z) = entry {
            return self.zarr_lookup(parent, z, name);
        }
        if let Entry::Zarr2(v) = entry {
            return self.zarr2_lookup(parent, v, name);
        }
        let Entry::Dir(node, data) = entry else {
            return Err(TreeError::NotADirectory(parent));
        };
        match name {
            "." => return self.getattr(parent),
            ".." => return self.getattr(node.parent),
            _ => {}
        }
        let children = self.children(parent, node)?;
        if let Some(array) = data {
            let index = dir::parse_chunk_name(name).ok_or(TreeError::NotFound)?;
            if index as u64 >= self.inodes.capacity(array) {
                return Err(TreeError::NotFound);
            }
            return self.getattr(self.inodes.chunk_ino(ChunkId::new(array, index)));
        }
        let child = children
            .iter()
            .copied()
            .find(|&c| self.node(c).is_some_and(|n| n.name == name));
        match child {
            Some(child) => self.getattr(child),
            None if parent == ROOT_INO && name == self.zarr_name() => {
                self.getattr(self.zarr_root_ino())
            }
            None if parent == ROOT_INO && name == self.zarr2_name() => {
                self.getattr(self.zarr2_root_ino())
            }
            None => {
                let ino = self.scratch_in(parent, name).ok_or(TreeError::NotFound)?;
                self.getattr(ino)
            }
        }
    }

    /// The entries of directory `ino` from position `offset` on (0 = the start; otherwise an
    /// entry's `next_offset` from an earlier call). The iterator is lazy: a data directory
    /// with a million chunks costs only the entries actually taken.
    ///
    /// # Errors
    /// [`TreeError::NotFound`] or [`TreeError::NotADirectory`].
    pub fn readdir(&self, ino: u64, offset: u64) -> Result<ReadDir<'_>, TreeError> {
        let entry = self.entry(ino)?;
        let zarr = match entry {
            Entry::Zarr(z) => Some(self.zarr_listing(ino, z)?),
            Entry::Zarr2(v) => {
                let (parent, listing) = self.zarr2_listing(ino, v)?;
                Some((parent, zarr::Listing::V2(listing)))
            }
            _ => None,
        };
        if let Some((parent, listing)) = zarr {
            return Ok(ReadDir {
                tree: self,
                ino,
                parent,
                children: Cow::Borrowed(&[]),
                scratch: Vec::new(),
                data: None,
                pos: offset,
                len: 2 + listing.len(),
                zarr: Some(listing),
                views: Vec::new(),
            });
        }
        let Entry::Dir(node, data) = entry else {
            return Err(TreeError::NotADirectory(ino));
        };
        let children = self.children(ino, node)?;
        // A directory lists the scratch files in it now, after its fixed children; one whose
        // name a member took since (another writer's) is hidden by it, as lookups are.
        let mut scratch = if data.is_none() {
            self.scratch_entries(ino)
        } else {
            Vec::new()
        };
        if !scratch.is_empty() {
            scratch.retain(|(_, name)| {
                !children
                    .iter()
                    .any(|&c| self.node(c).is_some_and(|n| n.name == *name))
            });
        }
        let len = 2
            + scratch.len() as u64
            + match data {
                Some(array) => {
                    let n = self
                        .reader
                        .nchunks(array)
                        .min(self.inodes.capacity(array) as usize);
                    n as u64 + u64::from(self.creating(ChunkId::new(array, n)))
                }
                None => children.len() as u64,
            };
        // The root lists the Zarr views after its fixed children, before the scratch files.
        let mut views = match ino == ROOT_INO {
            true => vec![
                (self.zarr_root_ino(), self.zarr_name().to_owned()),
                (self.zarr2_root_ino(), self.zarr2_name().to_owned()),
            ],
            false => Vec::new(),
        };
        // A member another writer added under a view's name hides the view (lookups find the
        // member): the root never lists one name twice.
        if !views.is_empty() {
            views.retain(|(_, view)| {
                !children
                    .iter()
                    .any(|&c| self.node(c).is_some_and(|n| n.name == *view))
            });
        }
        Ok(ReadDir {
            tree: self,
            ino,
            parent: node.parent,
            children,
            scratch,
            data,
            pos: offset,
            len: len + views.len() as u64,
            zarr: None,
            views,
        })
    }

    /// Opens file `ino` for this process ([`Tree::open_by`] with [`Pid::current`]).
    ///
    /// # Errors
    /// As [`Tree::open_by`].
    pub fn open(&self, ino: u64, flags: i32) -> Result<u64, TreeError> {
        self.open_by(ino, flags, Pid::current())
    }

    /// Opens file `ino` for process `by`; `flags` are the `open(2)` flags. Returns a handle
    /// for [`Tree::read`] and [`Tree::release`]. A handle opened for writing remembers `by`:
    /// only that process's close commits at [`Tree::flush_by`].
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`] for a write access (or `O_TRUNC`) on a read-only tree or to a
    /// file that cannot be written; [`TreeError::IsADirectory`]; [`TreeError::NotFound`].
    pub fn open_by(&self, ino: u64, flags: i32, by: Pid) -> Result<u64, TreeError> {
        let write = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        // Decided once: a writer's writes probe neither the tree's options nor the source.
        let target = if write {
            Some(self.write_target(ino)?)
        } else {
            None
        };
        match self.entry(ino)? {
            Entry::Dir(..) => return Err(TreeError::IsADirectory(ino)),
            Entry::Zarr(z) if self.zarr_is_dir(ino, z) => {
                return Err(TreeError::IsADirectory(ino));
            }
            Entry::Zarr2(v) if self.zarr2_is_dir(v) => return Err(TreeError::IsADirectory(ino)),
            _ => {}
        }
        self.follow_at_open(ino);
        let mode = match target {
            Some(target) => handle::Mode::Write(target),
            None => {
                let pinned = self.pin(ino);
                self.check_open_for_read(ino, &pinned)?;
                handle::Mode::Read(pinned)
            }
        };
        let fh = self.handles.open(ino, mode, by);
        if write && flags & libc::O_TRUNC != 0 {
            if let Err(e) = self.set_size(ino, 0) {
                let _ = self.handles.close(fh);
                return Err(e);
            }
            self.edits.lock().emptied_by_trunc(self.chunk_of(ino));
        }
        Ok(fh)
    }

    /// Forgets handle `fh`; a handle opened for writing first commits its file's buffer (a
    /// buffer that cannot be committed is dropped, and the error returned).
    ///
    /// # Errors
    /// [`TreeError::BadHandle`] when `fh` is not open; commit errors as [`Tree::flush`].
    pub fn release(&self, fh: u64) -> Result<(), TreeError> {
        let (ino, write) = self.handles.close(fh)?;
        if !write {
            return Ok(());
        }
        let mut res = self.commit(ino, commit::Reason::Durable);
        let still_open = self.handles.other_writer(ino, None);
        if !still_open {
            // A created chunk file closed empty: nothing is appended.
            self.edits.lock().drop_empty_creation(self.chunk_of(ino));
            res = res.and(self.zarr_rewrite_finished(ino));
        }
        if res.is_err() && !still_open {
            self.drop_pending(ino);
        }
        res
    }

    /// Number of open handles (for tests).
    pub fn open_handles(&self) -> usize {
        self.handles.len()
    }

    /// The chunk `ino` shows, when it is a chunk file.
    fn chunk_of(&self, ino: u64) -> Option<ChunkId> {
        match self.inodes.locate(ino) {
            Located::Chunk(id) => Some(id),
            Located::Zarr => self.zarr_chunk_of(ino),
            _ => None,
        }
    }

    /// A change the tree never supports (`op`: mkdir, rename, symlink, link, mknod, rmdir,
    /// extended attributes, chmod/chown) on or under `ino`: the error to answer with.
    pub fn refusal(&self, ino: u64, op: &str) -> TreeError {
        match self.entry(ino) {
            Err(e) => return e,
            // The Zarr v2 view is read-only on every mount.
            Ok(Entry::Zarr2(_)) => return TreeError::ReadOnly,
            Ok(_) => {}
        }
        if !self.options.writable {
            return TreeError::ReadOnly;
        }
        TreeError::NotPermitted(format!("{op} is not supported by b2fs"))
    }

    /// `access(2)`: `mask` is a combination of `R_OK`, `W_OK`, `X_OK` (or `F_OK`).
    ///
    /// # Errors
    /// [`TreeError::NotFound`]; [`TreeError::ReadOnly`] when `W_OK` is asked;
    /// [`TreeError::PermissionDenied`] for `X_OK` on a file.
    pub fn access(&self, ino: u64, mask: i32) -> Result<(), TreeError> {
        let attr = self.getattr(ino)?;
        if mask & libc::W_OK != 0 && !self.writable_ino(ino) {
            return Err(TreeError::ReadOnly);
        }
        if mask & libc::X_OK != 0 && attr.kind == EntryKind::File {
            return Err(TreeError::PermissionDenied);
        }
        Ok(())
    }
}
