//! Building a [`Tree`]: its options ([`TreeOptions`]), opening a source or serving a
//! collection or a layout, and the check that every file of a layout can be numbered.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::commit::{self, KernelCache};
use super::edit::{self, Edits};
use super::handle::Handles;
use super::inode::{self, Inodes};
use super::layout::{FileKind, Layout, NodeKind};
use super::registry::{ArrayEntry, Mounted};
use super::scratch::ScratchFiles;
use super::{Tree, backing, collection, events, follow, view, zarr};
use crate::commit::Committer;
use crate::container::ContainerError;
use crate::container::store::Opened;
use crate::reader::{ChunkReader, ReaderOptions};

/// Tuning knobs of a [`Tree`]: the reader's ([`ReaderOptions`], documented and defaulted
/// there, so a new reader knob is added in one place) and the tree's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeOptions {
    /// The reader's knobs: cache budget, prefetch, range reads, decode threads.
    pub reader: ReaderOptions,
    /// Accept edits and commit them to the source (a read-write mount). When false every
    /// change is [`TreeError::ReadOnly`](super::TreeError::ReadOnly).
    pub writable: bool,
    /// Bytes of decoded file content kept in memory files for FUSE passthrough
    /// ([`Tree::backing_file`]; `-o passthrough`); 0: no file is backed.
    pub backing_budget: u64,
    /// Show each b2nd array whose blocks tile its chunks as a sharded Zarr array (shard = the
    /// source's chunk, inner chunk = one of its blocks: `-o zarr_shards`), so a Zarr reader
    /// reads a window by the blocks it touches; see `tree/zarr/geom.rs`.
    pub zarr_shards: bool,
    /// Show every `zarr.json` of the Zarr view as strict JSON (RFC 8259): a NaN or infinite
    /// attribute is the string `"NaN"`, `"Infinity"` or `"-Infinity"` instead of zarr-python's
    /// bare token (`-o zarr_strict_json`), for strict readers (TensorStore, Go, JavaScript);
    /// see `tree/view.rs` and `tree/zarr/attrs.rs`.
    pub zarr_strict_json: bool,
    /// Bytes of pending chunk edits kept in memory (`edit_budget=`); past it, the least
    /// recently edited buffers go to a spill file (`edit/pending.rs`).
    pub edit_budget: usize,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            reader: ReaderOptions::default(),
            writable: false,
            backing_budget: 0,
            zarr_shards: false,
            zarr_strict_json: false,
            edit_budget: edit::DEFAULT_EDIT_BUDGET,
        }
    }
}

/// Refuses a layout whose chunk files cannot all have inode numbers below the scratch files
/// ([`inode::SCRATCH_BASE`], 2^62): a hostile bcolz ctable whose columns declare 2^62 chunks
/// each would otherwise open with the files of every column after the first unreachable.
fn numberable(layout: &Layout, path: &Path) -> Result<(), ContainerError> {
    let end = layout
        .stores
        .iter()
        .try_fold(layout.nodes.len() as u64 + 1, |n, s| {
            n.checked_add(s.nchunks() as u64)
        });
    match end {
        Some(end) if end < inode::SCRATCH_BASE => Ok(()),
        _ => Err(ContainerError::Malformed {
            path: path.to_path_buf(),
            what: "chunk count".into(),
            offset: 0,
            why: format!(
                "its {} arrays declare more chunk files than b2fs can number (2^62)",
                layout.stores.len()
            ),
        }),
    }
}

impl Tree {
    /// Opens the source at `path` and builds its tree.
    ///
    /// # Errors
    /// When the source cannot be opened or its metadata cannot be rendered.
    pub fn from_source(path: &Path, options: TreeOptions) -> Result<Tree, ContainerError> {
        let mut container = match crate::container::store::open_any(path)? {
            Opened::Single(c) => c,
            Opened::Collection(c) => {
                let layout = collection::layout(c)?;
                numberable(&layout, path)?;
                return Ok(Tree::new(layout, options));
            }
        };
        if options.writable
            && let crate::container::Container::Table(t) = &container
            && commit::repair_table(t)
        {
            container = crate::container::open(path)?;
        }
        let layout = view::layout(container)?;
        numberable(&layout, path)?;
        Ok(Tree::new(layout, options))
    }

    /// Serves a collection (a store opened by the caller, e.g. from a remote object).
    ///
    /// # Errors
    /// Why its layout cannot be built.
    pub fn from_collection(
        collection: crate::container::Collection,
        options: TreeOptions,
    ) -> Result<Tree, ContainerError> {
        Ok(Tree::new(collection::layout(collection)?, options))
    }

    /// Serves `layout`.
    pub fn new(layout: Layout, options: TreeOptions) -> Tree {
        let Layout {
            nodes,
            stores,
            live,
            table,
            collection,
            owner,
            ..
        } = layout;
        let nchunks: Vec<usize> = stores.iter().map(|s| s.nchunks()).collect();
        let outer = follow::outer_files(table.as_deref(), collection.as_ref());
        let inodes = if collection.is_some() {
            Inodes::growing()
        } else {
            Inodes::new(nodes.len(), &nchunks, options.writable)
        };
        let mut arrays: Vec<ArrayEntry> = live
            .into_iter()
            .map(|live| ArrayEntry {
                live,
                ..ArrayEntry::default()
            })
            .collect();
        for (i, node) in nodes.iter().enumerate() {
            let ino = i as u64 + 1;
            match &node.kind {
                NodeKind::File(FileKind::Sizes(id, _)) => arrays[id.index()].sizes = Some(ino),
                NodeKind::File(FileKind::Npy(id, _)) => arrays[id.index()].npy = Some(ino),
                _ => {}
            }
        }
        let mounted = match (table, collection) {
            (_, Some(cell)) => {
                let path = cell.with(|c| c.path().to_path_buf());
                Mounted::Collection { cell, path }
            }
            (Some(t), None) => Mounted::Table(t),
            (None, None) => Mounted::Single,
        };
        let committer = Committer::with_edit_budget(options.edit_budget, std::env::temp_dir());
        Tree {
            nodes: nodes.into_iter().collect(),
            inodes,
            reader: ChunkReader::new(stores, options.reader),
            arrays: arrays.into_iter().collect(),
            grow: Mutex::new(()),
            mounted,
            owner,
            options,
            handles: Handles::new(),
            edits: Mutex::new(Edits::new(options.edit_budget, std::env::temp_dir())),
            scratch: Mutex::new(ScratchFiles::default()),
            kcache: Mutex::new(KernelCache::default()),
            faults: Mutex::default(),
            commit_stats: committer.stats_handle(),
            committer: Mutex::new(committer),
            events: events::EventLog::default(),
            follow: Arc::new(follow::Follow::watching(outer)),
            zarr: zarr::ZarrState::default(),
            backings: backing::Backings::new(),
        }
    }
}
