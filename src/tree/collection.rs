//! Collections in the tree: a python-blosc2 store (`.b2z`, `.b2d`) or a directory of sources
//! mounts as one directory per group (with its `__attrs__`) and one directory per leaf, each
//! holding the single-source tree of what the leaf is (`__attrs__`, `array.npy`, `meta/`,
//! `data/`; a ctable's tree for a bcolz ctable in a directory of sources).
//!
//! Rules (the container layer's [`crate::container::store`] says what a leaf and a group
//! are):
//! - Mounting opens no leaf: each leaf is a directory ([`LazyLeaf`]) whose subtree (its
//!   arrays, their `__attrs__`, `meta/`, `data/`, `array.npy`) is laid out on the first lookup
//!   in it or listing of it, reading the leaf's header, index and trailer then (no chunk).
//!   `stat` of the leaf directory does not open it (its link count is 1, "unknown"). The
//!   subtree's nodes and arrays are numbered after everything that exists, under the tree's
//!   `grow` lock, so inode numbers handed out never change. A group's `__attrs__` opens its
//!   `__vlmeta__` carrier on first read or `stat`.
//! - A leaf that fails to open shows as a directory whose lookups and listing fail with EIO,
//!   with a log line naming the store and the key; every other leaf works. A failure of I/O
//!   (a [`ContainerError::Io`]: a remote store's hiccup, a member file missing or unreadable
//!   for a while) is tried again by the first access after a back-off of
//!   [`LEAF_RETRY_FIRST`], doubled after each failure in a row up to [`LEAF_RETRY_MAX`];
//!   one attempt at a time (under `grow`), each failure logged, and the recovery logged once.
//!   Any other failure (a leaf that opens but cannot be shown for what it holds: a corrupt
//!   header, a chunk count past what a leaf can number, a leaf no longer in the collection)
//!   stays until the mount follows a change of the source ([`LeafBuild`]).
//! - Leaves commit through the collection ([`crate::commit::Target::Leaf`]): a
//!   `.b2d` leaf or a file of a directory of sources is a frame committed as a single source;
//!   a `.b2z` member is committed by writing a new zip beside the old one and renaming it
//!   over it. After any commit the collection is opened again and every leaf reloaded from
//!   it (a `.b2z` commit moves members).
//! - Group attributes are stored in the group's `__vlmeta__` carrier; a group without one
//!   (DictStores, plain directories) refuses edits (EINVAL).
//! - Leaves of a store nested in a directory of sources, and ctables inside a collection,
//!   are read-only (EROFS).
//! - A group holding a python-blosc2 CTable (a leaf `_meta`, a leaf `_valid_rows`, a group
//!   `_cols`) also shows a read-only `table.npy` of its valid rows, laid out on first access
//!   (`super::ctable`); its subtree is shown as for any group.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::ctable::CTableFile;
use super::inode::{ARRAY_STRIDE, CHUNK_BASE, MAX_GROWING_ARRAYS};
use super::layout::{
    AttrsOwner, CollectionCell, FileKind, Generated, Layout, NodeKind, Owner, ROOT_INO,
};
use super::view::{self, Adding};
use super::{ArrayEntry, Tree, TreeError, display_chain};
use crate::container::store::{Collection, Group, Leaf, Node};
use crate::container::{Container, ContainerError};

/// A collection leaf's directory before and after its first access.
#[derive(Debug)]
pub struct LazyLeaf {
    pub(super) leaf: Arc<Leaf>,
    /// A leaf of the mounted collection itself (its edits commit), not of a nested store.
    pub(super) top: bool,
    /// Its children once laid out, or why it cannot be shown (for now).
    pub(super) built: LeafBuild,
}

/// The wait before a leaf that failed to open for an I/O reason is tried again, after its
/// first failure; doubled after each failure in a row, up to [`LEAF_RETRY_MAX`].
pub const LEAF_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two attempts to open a leaf that keeps failing for an I/O reason.
pub const LEAF_RETRY_MAX: Duration = Duration::from_secs(64);

/// How a leaf's directory stands: laid out (for good: its children never change), failed
/// (and when it may be tried again), or not tried yet. The attempts themselves are the
/// tree's (`leaf_children_as_is`, under `grow`); this keeps their outcome and the back-off.
#[derive(Debug, Default)]
pub struct LeafBuild {
    done: OnceLock<Vec<u64>>,
    failed: Mutex<Option<Failed>>,
}

/// The last failure of a leaf's attempts.
#[derive(Debug, Clone)]
struct Failed {
    why: Arc<str>,
    /// When the next access may try again; `None`: not before the source changes (a leaf
    /// that cannot be shown for what it holds).
    again: Option<Instant>,
    /// The wait that set `again` (the next failure doubles it).
    wait: Duration,
    /// Failures in a row.
    count: u32,
}

impl LeafBuild {
    /// Whether the leaf was laid out or tried (and failed): a stat of it, or the Zarr view,
    /// no longer reads it as not opened yet.
    pub(super) fn tried(&self) -> bool {
        self.done.get().is_some() || self.failed.lock().is_some()
    }

    /// Whether the leaf failed before and an access at `now` would try it again (its
    /// back-off has passed): the Zarr view's consolidation tries at most one such leaf that
    /// fails again per document (`zarr/consolidated.rs`).
    pub(super) fn due(&self, now: Instant) -> bool {
        self.done.get().is_none() && self.failed.lock().is_some() && self.may_try(now).is_ok()
    }

    /// Whether the leaf was laid out.
    pub(super) fn is_laid_out(&self) -> bool {
        self.done.get().is_some()
    }

    /// The children, once laid out.
    fn done(&self) -> Option<&[u64]> {
        self.done.get().map(Vec::as_slice)
    }

    /// `Ok` when an access at `now` may try to lay the leaf out (never tried, or its back-off
    /// has passed); else why it cannot be shown.
    fn may_try(&self, now: Instant) -> Result<(), Arc<str>> {
        match &*self.failed.lock() {
            Some(f) if f.again.is_none_or(|at| now < at) => Err(f.why.clone()),
            _ => Ok(()),
        }
    }

    /// Records a failed attempt at `now`: `io`, a failure of I/O (tried again after the
    /// back-off), else one of what the leaf holds (not before the source changes). Returns
    /// the failure now recorded.
    fn failed(&self, why: Arc<str>, io: bool, now: Instant) -> Failed {
        let mut failed = self.failed.lock();
        let (wait, count) = match &*failed {
            Some(f) if f.again.is_some() => ((f.wait * 2).min(LEAF_RETRY_MAX), f.count + 1),
            Some(f) => (LEAF_RETRY_FIRST, f.count + 1),
            None => (LEAF_RETRY_FIRST, 1),
        };
        let f = Failed {
            why,
            again: io.then(|| now + wait),
            wait,
            count,
        };
        *failed = Some(f.clone());
        f
    }

    /// Records the children laid out; returns how many attempts had failed before.
    fn laid_out(&self, children: Vec<u64>) -> u32 {
        let _ = self.done.set(children);
        self.failed.lock().take().map_or(0, |f| f.count)
    }

    /// A test lengthens the back-off by `by` (a leaf that failed for an I/O reason), so that
    /// no access tries again however slow the machine is.
    fn delay_back_off(&self, by: Duration) {
        if let Some(f) = self.failed.lock().as_mut() {
            f.again = f.again.map(|at| at + by);
        }
    }

    /// A test ends the back-off: a leaf that failed for an I/O reason may be tried again at
    /// the next access.
    fn end_back_off(&self, now: Instant) {
        if let Some(f) = self.failed.lock().as_mut()
            && f.again.is_some()
        {
            f.again = Some(now);
        }
    }

    /// The source changed (the mount followed it): a failed leaf is as one never tried, and
    /// its back-off starts again from [`LEAF_RETRY_FIRST`].
    fn forget_failure(&self) {
        self.failed.lock().take();
    }
}

/// Why a leaf could not be laid out, and whether it failed for an I/O reason.
struct LeafError {
    why: String,
    io: bool,
}

impl LeafError {
    /// A failure of what the leaf holds (or of the mount's limits): not tried again before
    /// the source changes.
    fn held(why: impl Into<String>) -> LeafError {
        LeafError {
            why: why.into(),
            io: false,
        }
    }
}

/// Records a failed attempt to open leaf `lazy` (`io`: for an I/O reason, tried again after
/// its back-off), logged; returns why.
pub(super) fn leaf_failed(lazy: &LazyLeaf, why: String, io: bool) -> Arc<str> {
    let (store, key) = (lazy.leaf.store_path().display(), lazy.leaf.key());
    let f = lazy.built.failed(why.into(), io, Instant::now());
    let next = match f.again {
        Some(_) => format!("tried again at an access after {} s", f.wait.as_secs_f64()),
        None => "not tried again until the source changes".to_owned(),
    };
    log::warn!(
        "{store}: {key}: cannot open, its directory gives EIO ({next}): {}",
        f.why
    );
    f.why
}

/// The layout of `collection`.
///
/// # Errors
/// When the metadata of an opened leaf cannot be rendered.
pub fn layout(collection: Collection) -> Result<Layout, ContainerError> {
    let collection = Arc::new(collection);
    let mut layout = Layout::new(Owner::of(collection.path()));
    layout.set_collection(collection.clone());
    let cell = layout.collection.clone();
    add_group(&mut layout, ROOT_INO, collection.root(), cell.as_ref())?;
    Ok(layout)
}

/// Adds group `g`'s `__attrs__` and children under directory `dir`; `top`: the cell of the
/// mounted collection when `g` is one of its groups (not of a nested store): its leaves and
/// attributes commit, and are looked up in the collection as it is when first accessed.
pub(super) fn add_group(
    layout: &mut Layout,
    dir: u64,
    g: &Group,
    top: Option<&CollectionCell>,
) -> Result<(), ContainerError> {
    let owner = if top.is_some() {
        AttrsOwner::Group(g.key.clone())
    } else {
        AttrsOwner::ReadOnly
    };
    let attrs = match g.carrier() {
        None => Generated::new(view::json_file(&serde_json::json!({}))),
        Some(carrier) => {
            let (carrier, key) = (carrier.clone(), g.key.clone());
            let cell = top.cloned();
            Generated::lazy(move || {
                // A commit may have moved the carrier (a rebuilt zip): take today's.
                let now = cell.as_ref().and_then(|c| {
                    let c = c.get();
                    c.group(&key).and_then(|g| g.carrier().cloned())
                });
                let carrier = now.unwrap_or_else(|| carrier.clone());
                match carrier.array() {
                    Ok(a) => Ok(view::json_file(a.attrs())),
                    // Not `{}`: that would say the group has no attributes, and an edit
                    // would then replace the ones the carrier holds.
                    Err(e) => {
                        let why = format!(
                            "{}: group {}: __attrs__ gives EIO: its carrier {} cannot be \
                             read: {}",
                            carrier.store_path().display(),
                            if key.is_empty() { "/" } else { &key },
                            carrier.key(),
                            super::display_chain(&*e)
                        );
                        log::warn!("{why}");
                        Err(why.into())
                    }
                }
            })
        }
    };
    layout.generated(dir, "__attrs__", FileKind::Attrs(owner, attrs));
    // A CTable's group: its `_meta`, `_valid_rows` and `_cols` inodes, for `table.npy`.
    let ctable = super::ctable::is_ctable_group(
        g.children
            .iter()
            .map(|c| (c.name(), matches!(c, Node::Leaf(_)))),
    ) && g.child("table.npy").is_none();
    let (mut meta, mut valid, mut cols) = (None, None, None);
    for child in &g.children {
        let name = child.name();
        if !view::valid_name(name) || name == "__attrs__" {
            log::warn!(
                "group {}: {name:?} is not a valid file name; not shown",
                g.key
            );
            continue;
        }
        match child {
            Node::Group(sub) => {
                let sub_dir = layout.dir(dir, name);
                add_group(layout, sub_dir, sub, top)?;
                if name == "_cols" {
                    cols = Some(sub_dir);
                }
            }
            Node::Store(nested) => {
                let sub_dir = layout.dir(dir, name);
                add_group(layout, sub_dir, nested.root(), None)?;
            }
            Node::Leaf(leaf) => {
                let lazy = LazyLeaf {
                    leaf: leaf.clone(),
                    top: top.is_some(),
                    built: LeafBuild::default(),
                };
                let ino = layout.lazy_leaf(dir, name, lazy);
                match name {
                    "_meta" => meta = Some(ino),
                    "_valid_rows" => valid = Some(ino),
                    _ => {}
                }
            }
        }
    }
    if let (true, Some(meta), Some(valid), Some(cols)) = (ctable, meta, valid, cols) {
        let file = CTableFile::new(g.key.clone(), meta, valid, cols);
        layout.generated(dir, "table.npy", FileKind::CTableNpy(Box::new(file)));
    }
    Ok(())
}

/// Lays out the content of leaf directory `at` in `sub` (opening `leaf`, which is `lazy`'s
/// leaf as the collection holds it now).
fn lay_out_leaf(
    sub: &mut Layout,
    at: u64,
    lazy: &LazyLeaf,
    leaf: &Leaf,
) -> Result<(), ContainerError> {
    match leaf.open_owned()? {
        Container::Array(array) => {
            let how = if lazy.top {
                Adding::Leaf(lazy.leaf.key().to_owned())
            } else {
                Adding::ReadOnly
            };
            view::add_array_as(sub, at, array, how)
        }
        Container::Table(table) => view::add_table(sub, at, table, false),
    }
}

impl Tree {
    /// The children of leaf directory `ino` (`lazy`), laid out now if this is the first
    /// access.
    ///
    /// # Errors
    /// [`TreeError::Unavailable`] (EIO) when the leaf cannot be opened or shown.
    pub(crate) fn leaf_children<'a>(
        &'a self,
        ino: u64,
        lazy: &'a LazyLeaf,
    ) -> Result<&'a [u64], TreeError> {
        if lazy.top && lazy.built.done().is_none() {
            // The leaf is opened (or tried again) from the collection as the tree knows it:
            // catch up with another writer first (a `.b2z` rewritten since moves every
            // member; following is rate-limited).
            self.follow_source();
        }
        self.leaf_children_as_is(ino, lazy)
    }

    /// [`Tree::leaf_children`] without catching up with other writers first (a caller that
    /// lays out many leaves, the Zarr view's consolidated metadata, follows once itself).
    /// A leaf whose last attempt failed answers that failure until its back-off has passed;
    /// then one access tries again (the others wait for it on `grow`, as at a first access).
    pub(crate) fn leaf_children_as_is<'a>(
        &'a self,
        ino: u64,
        lazy: &'a LazyLeaf,
    ) -> Result<&'a [u64], TreeError> {
        let unavailable = |why: Arc<str>| TreeError::Unavailable(why.to_string());
        if let Some(children) = lazy.built.done() {
            return Ok(children);
        }
        lazy.built.may_try(Instant::now()).map_err(unavailable)?;
        let _grow = self.grow.lock();
        // Another access may have laid it out, or failed, while this one waited.
        if let Some(children) = lazy.built.done() {
            return Ok(children);
        }
        lazy.built.may_try(Instant::now()).map_err(unavailable)?;
        let (store, key) = (lazy.leaf.store_path().display(), lazy.leaf.key());
        match self.build_leaf(ino, lazy) {
            Ok(children) => {
                let failures = lazy.built.laid_out(children);
                if failures > 0 {
                    log::info!("{store}: {key}: opens now, after {failures} failed attempts");
                    self.zarr_leaf_recovered(ino);
                }
            }
            Err(e) => return Err(unavailable(leaf_failed(lazy, e.why, e.io))),
        }
        match lazy.built.done() {
            Some(children) => Ok(children),
            None => Err(TreeError::Unavailable("leaf not laid out".into())),
        }
    }

    /// Tests: every collection leaf that failed to open for an I/O reason is tried again at
    /// its next access, as if its back-off had passed (a leaf that failed for what it holds
    /// is not).
    pub fn end_leaf_back_offs(&self) {
        let now = Instant::now();
        for node in self.nodes.iter() {
            if let NodeKind::Leaf(lazy) = &node.kind {
                lazy.built.end_back_off(now);
            }
        }
    }

    /// Tests: every collection leaf that failed to open for an I/O reason waits `by` longer
    /// before it is tried again (no timed test: [`Tree::end_leaf_back_offs`] ends it).
    pub fn delay_leaf_retries(&self, by: Duration) {
        for node in self.nodes.iter() {
            if let NodeKind::Leaf(lazy) = &node.kind {
                lazy.built.delay_back_off(by);
            }
        }
    }

    /// The mount followed a change of the source: every collection leaf that failed to
    /// open, for any reason, is tried again at its next access.
    pub(crate) fn forget_leaf_failures(&self) {
        for node in self.nodes.iter() {
            if let NodeKind::Leaf(lazy) = &node.kind {
                lazy.built.forget_failure();
            }
        }
    }

    /// Opens leaf `lazy` and adds its subtree under directory `ino`: arrays to the reader,
    /// nodes after every existing one. The caller holds `grow`.
    fn build_leaf(&self, ino: u64, lazy: &LazyLeaf) -> Result<Vec<u64>, LeafError> {
        let nodes = self.nodes.len() as u64;
        let arrays =
            u32::try_from(self.reader.arrays()).map_err(|e| LeafError::held(e.to_string()))?;
        let mut sub = Layout::subtree(ino, nodes, arrays, self.owner);
        // A leaf of the mounted collection is opened as the collection is now: a commit may
        // have rebuilt it (a `.b2z` commit moves every member). Nested stores are never
        // rewritten.
        let now = match (self.mounted.collection(), lazy.top) {
            (Some(cell), true) => {
                let c = cell.get();
                match c.find(lazy.leaf.key()) {
                    Some(Node::Leaf(l)) => Some(l.clone()),
                    _ => {
                        return Err(LeafError::held(
                            "it is no longer one of the collection's leaves",
                        ));
                    }
                }
            }
            _ => None,
        };
        let leaf = now.as_deref().unwrap_or(&lazy.leaf);
        lay_out_leaf(&mut sub, ino, lazy, leaf).map_err(|e| LeafError {
            why: display_chain(&e),
            io: matches!(e, ContainerError::Io { .. }),
        })?;
        let Layout {
            nodes: mut new_nodes,
            stores,
            live,
            ..
        } = sub;
        if nodes + new_nodes.len() as u64 >= CHUNK_BASE
            || u64::from(arrays) + stores.len() as u64 > MAX_GROWING_ARRAYS
        {
            return Err(LeafError::held(
                "the mount has no inode numbers left for it",
            ));
        }
        if let Some(s) = stores.iter().find(|s| s.nchunks() as u64 >= ARRAY_STRIDE) {
            return Err(LeafError::held(format!(
                "{} has {} chunks, more than a collection leaf can show",
                s.path().display(),
                s.nchunks()
            )));
        }
        let mut entries: Vec<ArrayEntry> = live
            .into_iter()
            .map(|live| ArrayEntry {
                live,
                ..ArrayEntry::default()
            })
            .collect();
        for (i, node) in new_nodes.iter().enumerate().skip(1) {
            let file_ino = nodes + i as u64;
            let slot = match &node.kind {
                NodeKind::File(FileKind::Sizes(id, _) | FileKind::Npy(id, _)) => {
                    entries.get_mut(id.0.wrapping_sub(arrays) as usize)
                }
                _ => None,
            };
            match (slot, &node.kind) {
                (Some(f), NodeKind::File(FileKind::Sizes(..))) => f.sizes = Some(file_ino),
                (Some(f), _) => f.npy = Some(file_ino),
                (None, _) => {}
            }
        }
        for (store, entry) in stores.into_iter().zip(entries) {
            self.add_array(store, entry);
        }
        let children = match &mut new_nodes[0].kind {
            NodeKind::Dir { children, .. } => std::mem::take(children),
            _ => Vec::new(),
        };
        for node in new_nodes.into_iter().skip(1) {
            self.nodes.push(node);
        }
        Ok(children)
    }

    /// Leaves opened by the mounted collection so far (`None`: not a collection): a mount
    /// opens none; each leaf is opened on first access, and again after every commit that
    /// rewrites the collection.
    pub fn leaves_opened(&self) -> Option<usize> {
        self.mounted
            .collection()
            .map(|c| c.with(|c| c.leaves_opened()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The back-off of a leaf that keeps failing for an I/O reason: 1 s, doubled after each
    /// failure in a row, up to 64 s; no attempt before it has passed; a failure of what the
    /// leaf holds is never tried again (only a change of the source clears it); success ends
    /// it, and counts the failures before.
    #[test]
    fn a_leaf_failing_for_io_is_tried_again_after_a_doubling_back_off() {
        let b = LeafBuild::default();
        let t0 = Instant::now();
        assert!(!b.tried());
        assert!(b.may_try(t0).is_ok(), "never tried: an access tries");
        let mut now = t0;
        let mut waits = Vec::new();
        for i in 0..9 {
            let f = b.failed(format!("hiccup {i}").into(), true, now);
            assert!(b.tried());
            assert_eq!(f.count, i + 1);
            assert_eq!(f.again, Some(now + f.wait));
            waits.push(f.wait.as_secs());
            // Before the wait has passed: the failure, no attempt.
            let just_before = now + f.wait - Duration::from_millis(1);
            assert_eq!(
                b.may_try(just_before).unwrap_err().as_ref(),
                format!("hiccup {i}")
            );
            now += f.wait;
            assert!(b.may_try(now).is_ok(), "after {:?}", f.wait);
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 64, 64]);
        // A test ends the back-off at once.
        b.failed("again".into(), true, now);
        assert!(b.may_try(now).is_err());
        b.end_back_off(now);
        assert!(b.may_try(now).is_ok());
        // A failure of what the leaf holds: never tried again, whatever the time, nor by a
        // test's end of the back-offs; the source changing clears it, and the back-off
        // starts again from its first wait.
        let f = b.failed("corrupt header".into(), false, now);
        assert_eq!(f.again, None);
        assert!(b.may_try(now + Duration::from_secs(1 << 20)).is_err());
        b.end_back_off(now);
        assert!(b.may_try(now + Duration::from_secs(1 << 20)).is_err());
        b.forget_failure();
        assert!(!b.tried());
        assert!(b.may_try(now).is_ok());
        assert_eq!(b.failed("hiccup".into(), true, now).wait, LEAF_RETRY_FIRST);
        // Laid out: the children, for good; the failures before are counted once.
        assert_eq!(b.laid_out(vec![7, 8]), 1);
        assert_eq!(b.done(), Some(&[7, 8][..]));
        assert!(b.tried() && b.may_try(now).is_ok());
    }
}
