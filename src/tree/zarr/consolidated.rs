//! The groups' `zarr.json` documents, each with the consolidated metadata of everything
//! below it (`consolidated_metadata`, as zarr-python 3's `consolidate_metadata(path=...)`
//! writes it): a reader opening any group, the root or one deep in a collection
//! (`xr.open_zarr("MNT/zarr/grid")`), reads one file and lists nothing.
//!
//! Rules:
//! - **Built when first read or `stat`ed** and kept until the view's generation moves (a
//!   commit, a reload), within a byte budget (`docs.rs`: past it the least recently read
//!   are built again when read); a collection leaf not laid out yet gives its metadata from its
//!   header (`quick.rs`) without being laid out.
//! - **Keys are relative to the group** the document belongs to; a nested group's entry has
//!   an empty `metadata` of its own (zarr-python's flattened form). An array left out of the
//!   view (no Zarr type) is named by its path from the view's root in the log and the
//!   `user.b2fs.zarr_omitted` attribute, whichever document met it first.
//! - **A collection leaf that fails to open** is left out (and logged, `collection.rs`): read
//!   once from its header when never tried (a failure of I/O starts its back-off there, no
//!   second attempt by laying it out), not tried while in its back-off, and, past it, tried
//!   again by one document build until one such retry fails: the others wait for the next
//!   build or access. So K dead leaves of a remote store cost one wait per build, not K.
//! - **A group whose attributes cannot be read** is left out of its parent's document, with
//!   what is below it; its own `zarr.json` gives EIO.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::{Map, Value};

use super::super::layout::NodeKind;
use super::super::{ROOT_INO, Tree, TreeError};
use super::{DirKind, Geom, ZNode, meta};

/// A node [`Tree::zarr_walk`] meets below a group.
pub(super) enum Met<'a> {
    /// An array: its native directory, geometry and attributes (as `__attrs__` shows them).
    Array(u64, &'a Geom, &'a Value),
    /// A group, with its attributes; the nodes below it follow.
    Group(&'a Value),
}

impl Tree {
    /// The root `zarr.json`: the root group with the consolidated metadata of the whole
    /// hierarchy (every collection leaf's header is read for it, `quick.rs`).
    ///
    /// # Errors
    /// EIO when the root's attributes cannot be read.
    pub(crate) fn zarr_root_json(&self) -> Result<Arc<[u8]>, TreeError> {
        self.zarr_consolidated(ZNode::Root)
    }

    /// The `zarr.json` of the group mirroring native directory `n`, with the consolidated
    /// metadata of what is below it.
    ///
    /// # Errors
    /// EIO when the group's attributes cannot be read.
    pub(crate) fn zarr_group_json(&self, n: u64) -> Result<Arc<[u8]>, TreeError> {
        self.zarr_consolidated(ZNode::Dir(n))
    }

    /// The document of group `z` (`Root` or a `Dir`), from the cache when built in this
    /// generation.
    fn zarr_consolidated(&self, z: ZNode) -> Result<Arc<[u8]>, TreeError> {
        let key = z.ino().ok_or(TreeError::NotFound)?;
        let generation = self.zarr.generation.load(Ordering::Relaxed);
        if let Some(bytes) = self.zarr.group_json.lock().get(key, generation) {
            return Ok(bytes);
        }
        let started = std::time::Instant::now();
        // Once before every leaf below is opened (lookups follow at most every 50 ms).
        self.follow_source();
        let (attrs, base) = match z {
            ZNode::Dir(n) => (self.zarr_attrs(n)?, self.zarr_path(n)),
            _ if self.root_is_array() => (Value::Object(Map::new()), String::new()),
            _ => (self.zarr_attrs(ROOT_INO)?, String::new()),
        };
        let mut flat = Map::new();
        let mut emit = |key: &str, met: Met<'_>| {
            let doc = match met {
                Met::Array(n, g, attrs) => self.zarr_array_json_with(n, g, attrs),
                Met::Group(attrs) => meta::group(attrs, Some(Map::new())),
            };
            flat.insert(key.to_owned(), doc);
        };
        self.zarr_walk(z, &base, "", &mut emit, &mut true);
        let nodes = flat.len();
        let bytes: Arc<[u8]> = self.zarr_json_file(&meta::group(&attrs, Some(flat))).into();
        log::info!(
            "zarr/{}{}zarr.json: consolidated metadata of {nodes} nodes built in {:.1} ms",
            base,
            if base.is_empty() { "" } else { "/" },
            started.elapsed().as_secs_f64() * 1e3
        );
        // Documents of older generations are dropped, not only replaced; past the budget,
        // the least recently read.
        self.zarr
            .group_json
            .lock()
            .insert(key, generation, bytes.clone());
        Ok(bytes)
    }

    /// Gives `emit` every node below Zarr group `z` (parents before children), each keyed by
    /// `prefix` and its path below the document's group; `base` is the document's group's
    /// path from the view's root (for the names of arrays left out); `retry`: whether a leaf
    /// that failed before may still be tried again (see the module doc). The Zarr v2 view's
    /// `.zmetadata` walks the same nodes (`v2.rs`).
    pub(super) fn zarr_walk(
        &self,
        z: ZNode,
        base: &str,
        prefix: &str,
        emit: &mut dyn FnMut(&str, Met<'_>),
        retry: &mut bool,
    ) {
        let join = |a: &str, b: &str| {
            if a.is_empty() {
                b.to_owned()
            } else {
                format!("{a}/{b}")
            }
        };
        let children = match self.zarr_children(z) {
            Ok(c) => c,
            Err(e) => {
                log::warn!(
                    "zarr/{}: not in the consolidated metadata: {e}",
                    join(base, prefix)
                );
                return;
            }
        };
        for (name, child) in children {
            let ZNode::Dir(n) = child else { continue };
            let key = join(prefix, &name);
            let full = || join(base, &key);
            // A leaf not laid out yet: from its header, without laying it out.
            let quick = self.zarr_unbuilt_leaf(n).and_then(|l| self.zarr_quick(l));
            match quick {
                Some(Ok((g, attrs))) => {
                    emit(&key, Met::Array(n, &g, &attrs));
                    continue;
                }
                Some(Err(why)) => {
                    self.zarr_omit(full(), &why);
                    continue;
                }
                None => {}
            }
            // A leaf that failed before and whose back-off has passed: tried again, unless
            // another such leaf failed again in this document (one wait per document).
            let due = match self.node(n).map(|node| &node.kind) {
                Some(NodeKind::Leaf(lazy)) => lazy.built.due(Instant::now()),
                _ => false,
            };
            if due && !*retry {
                log::info!(
                    "zarr/{}: not in this consolidated metadata: it failed to open before, and \
                     another such leaf failed again while it was built (tried again at its next \
                     access)",
                    full()
                );
                continue;
            }
            let kind = self.zarr_dir_kind(n);
            if due && kind.is_err() {
                *retry = false;
            }
            match kind {
                Ok(DirKind::Array(a)) => match self.zarr_geom(a, None) {
                    Ok(g) => match self.zarr_attrs(n) {
                        Ok(attrs) => emit(&key, Met::Array(n, &g, &attrs)),
                        Err(e) => self.zarr_omit(full(), &e.to_string()),
                    },
                    Err(why) => self.zarr_omit(full(), &why),
                },
                Ok(DirKind::Group) => match self.zarr_attrs(n) {
                    Ok(attrs) => {
                        emit(&key, Met::Group(&attrs));
                        self.zarr_walk(child, base, &key, emit, retry);
                    }
                    // The group and what is below it: its `zarr.json` gives EIO.
                    Err(e) => self.zarr_omit(full(), &e.to_string()),
                },
                Err(e) => log::warn!("zarr/{}: not in the consolidated metadata: {e}", full()),
            }
        }
    }
}
