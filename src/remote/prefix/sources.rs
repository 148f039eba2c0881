//! A prefix holding a directory of sources (`s3://bucket/run7/` with `a.b2nd`, `st.b2z`, a
//! sparse frame's or a bcolz root's sub-prefix...): which of its objects are sources, told by
//! content as a local directory's files are (`crate::container::store::dir`), as the
//! [`ByteTree`] a collection of them is opened from
//! ([`crate::container::store::dir::open_listed`]), listed again when the prefix is followed.
//!
//! - **Telling the sources**: a sub-prefix holding `chunks.b2frame`, `__rootdirs__`,
//!   `meta/sizes` or `meta/nrows` is a directory source (its objects read through the prefix,
//!   as a prefix mounted alone reads them); any other object is a source when its first bytes
//!   are a frame's, a store when they are a zip's. One ranged GET of those bytes per object
//!   not fetched at open, all at once (at most [`HEADS_AT_ONCE`] in flight). Other objects
//!   are not shown; nor are 2012 blsk roots (`meta/nrows`) and `blsk` superchunk objects,
//!   which are not read from a prefix (logged). A sub-prefix holding `embed.b2e` is a `.b2d`
//!   store, its objects a tree of their own ([`ByteTree::store_dirs`]), read as a `.b2d`
//!   prefix mounted alone.
//! - **Frames and `.b2z` stores** are read as a single object mounted alone is
//!   ([`RemotePrefix::open_single`]), each opened when first used.
//! - **Followed** (`remote_recheck`): [`ByteTree::relist`] lists the prefix again when due;
//!   other names, sizes or ETags open it again and tell its sources again.

use std::sync::Arc;
use std::time::Duration;

use object_store::GetRange;

use super::listing::{listed, same_listing};
use super::{RemotePrefix, SharedPrefix, lock};
use crate::container::store::dir::{SOURCE_MARKERS, in_dirs, source_roots};
use crate::container::{ByteSource, ByteTree, Relist};
use crate::remote::RemoteOptions;
use crate::remote::client::{RemoteError, RemoteErrorKind};

/// The most head GETs in flight at once.
pub const HEADS_AT_ONCE: usize = 32;

/// The bytes of an object's start that tell its kind (a frame's magic is 11).
const HEAD: u64 = 11;

/// A prefix of sources as a byte tree (see the module docs).
#[derive(Debug)]
pub struct PrefixSources {
    prefix: Arc<RemotePrefix>,
    /// Sorted: the frame objects, and every object under a directory source.
    names: Vec<String>,
    /// The frame and store objects (sorted), opened as single objects.
    singles: Vec<String>,
    /// The `.b2d` stores' directories.
    store_dirs: Vec<String>,
    opts: RemoteOptions,
}

/// The prefix's sources: the tree of them, and its `.b2z` stores (`(name, bytes)`).
pub type Sources = (Arc<dyn ByteTree>, Vec<(String, Arc<dyn ByteSource>)>);

impl RemotePrefix {
    /// The prefix as a directory of sources (see the module docs): the tree of its sources,
    /// and its `.b2z` stores (their bytes opened as single objects).
    ///
    /// # Errors
    /// A head GET that failed (the mount would show a directory with holes), or a prefix
    /// with no source in it.
    pub fn sources(self: &Arc<Self>, opts: &RemoteOptions) -> Result<Sources, RemoteError> {
        let names: Vec<String> = self.objects.iter().map(|o| o.rel.clone()).collect();
        // The outermost `.b2d` stores, then the directory sources outside them (both lists
        // sorted, their names ending in `/`, so that a name's one enclosing directory, if
        // any, is found by a binary search: `in_dirs`).
        let mut store_dirs: Vec<String> = names
            .iter()
            .filter_map(|n| n.strip_suffix("embed.b2e").filter(|d| d.ends_with('/')))
            .map(str::to_owned)
            .collect();
        store_dirs.sort();
        let all: std::collections::HashSet<String> = store_dirs.iter().cloned().collect();
        // Nested in another: one of its ancestors (each name up to a `/`) is one too.
        store_dirs.retain(|d| {
            !d.trim_end_matches('/')
                .match_indices('/')
                .any(|(at, _)| all.contains(&d[..=at]))
        });
        let root_dirs: Vec<String> = source_roots(&names)
            .into_iter()
            .filter(|r| !in_dirs(&store_dirs, r))
            .map(|r| format!("{r}/"))
            .collect();
        // A 2012 blsk root is not read from a prefix: left out, its objects with it.
        let set: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
        let (mut blsk_roots, mut root_dirs): (Vec<String>, Vec<String>) =
            root_dirs.into_iter().partition(|d| is_blsk_root(&set, d));
        for d in &blsk_roots {
            log::warn!(
                "{}/{d}: a 2012 blsk root is not read from a remote prefix: not shown",
                self.root.display()
            );
        }
        // Sorted with their `/` (`ct-2/` sorts before `ct/`).
        root_dirs.sort();
        blsk_roots.sort();
        let (mut listed, mut candidates) = (Vec::new(), Vec::new());
        for (i, o) in self.objects.iter().enumerate() {
            if in_dirs(&store_dirs, &o.rel) || in_dirs(&blsk_roots, &o.rel) {
                continue;
            }
            if in_dirs(&root_dirs, &o.rel) {
                listed.push(o.rel.clone());
            } else if o.size > 0 {
                candidates.push(i);
            }
        }
        let heads = self.heads(&candidates)?;
        let (mut singles, mut stores) = (Vec::new(), Vec::new());
        for (&i, head) in candidates.iter().zip(heads) {
            let rel = &self.objects[i].rel;
            let Some(head) = head else {
                continue;
            };
            if head.starts_with(b"blsk") {
                log::warn!(
                    "{}/{rel}: a 2012 blsk superchunk file, not a source: not shown",
                    self.root.display()
                );
            } else if head.starts_with(&crate::container::frame::MAGIC) {
                listed.push(rel.clone());
                singles.push(rel.clone());
            } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
                singles.push(rel.clone());
                stores.push(rel.clone());
            } else {
                log::debug!("{}/{rel}: not a source, not shown", self.root.display());
            }
        }
        if listed.is_empty() && stores.is_empty() && store_dirs.is_empty() {
            return Err(RemoteError::new(
                RemoteErrorKind::NotFound,
                "no source under the prefix (no frame, store, sparse frame or bcolz root)",
            ));
        }
        listed.sort();
        singles.sort();
        let store_dirs = store_dirs
            .into_iter()
            .map(|d| d.trim_end_matches('/').to_owned())
            .collect();
        let tree = Arc::new(PrefixSources {
            prefix: Arc::clone(self),
            names: listed,
            singles,
            store_dirs,
            opts: opts.clone(),
        });
        let mut opened = Vec::with_capacity(stores.len());
        for rel in stores {
            let bytes = self.open_single(&rel)?;
            opened.push((rel, bytes));
        }
        Ok((tree, opened))
    }

    /// The first bytes of each object of `which` (fewer for shorter objects), `None` for one
    /// that is gone or refused now (deleted or locked since the listing: not shown, logged):
    /// from the cache when the open fetched it, else one ranged GET each (not pinned to the
    /// listed version: only the kind is asked), at most [`HEADS_AT_ONCE`] in flight.
    ///
    /// # Errors
    /// A GET that failed otherwise (the network, the server): the prefix is not shown with
    /// holes. The GETs still in flight are dropped.
    fn heads(&self, which: &[usize]) -> Result<Vec<Option<bytes::Bytes>>, RemoteError> {
        let mut heads: Vec<Option<bytes::Bytes>> = vec![None; which.len()];
        let mut pending = Vec::new();
        for (k, &i) in which.iter().enumerate() {
            let n = HEAD.min(self.objects[i].size) as usize;
            if self.cache.present(i as u64)
                && let Ok(Some(b)) = self.whole(i)
            {
                heads[k] = Some(b.slice(..n.min(b.len())));
                continue;
            }
            pending.push((k, i, n as u64));
        }
        let unpinned = super::super::client::Pin::default();
        let root = self.root.display();
        self.client.rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            let mut next = pending.into_iter();
            loop {
                while set.len() < HEADS_AT_ONCE {
                    let Some((k, i, n)) = next.next() else {
                        break;
                    };
                    let get = self.client.get_at(
                        &self.objects[i].path,
                        GetRange::Bounded(0..n),
                        &unpinned,
                        None,
                    );
                    set.spawn(async move { (k, i, get.await) });
                }
                let Some(done) = set.join_next().await else {
                    break;
                };
                let (k, i, got) =
                    done.map_err(|e| RemoteError::new(RemoteErrorKind::Network, e.to_string()))?;
                let rel = &self.objects[i].rel;
                match got {
                    Ok(g) => heads[k] = Some(g.bytes()),
                    Err(e)
                        if matches!(
                            e.kind,
                            RemoteErrorKind::NotFound | RemoteErrorKind::Denied
                        ) =>
                    {
                        log::warn!("{root}/{rel}: not shown: {}", e.why);
                    }
                    Err(e) => {
                        return Err(RemoteError::new(e.kind, format!("{root}/{rel}: {}", e.why)));
                    }
                }
            }
            Ok(())
        })?;
        Ok(heads)
    }
}

/// Whether directory source `dir` (ending in `/`) among the prefix's `names` is a 2012 blsk
/// root: `meta/nrows` and none of the other [`SOURCE_MARKERS`], which the open tries first.
fn is_blsk_root(names: &std::collections::HashSet<&str>, dir: &str) -> bool {
    let has = |m: &str| names.contains(format!("{dir}{m}").as_str());
    has("meta/nrows") && !SOURCE_MARKERS.iter().any(|m| *m != "meta/nrows" && has(m))
}

impl PrefixSources {
    /// Whether `rel` is a frame or store object of the prefix (not a directory source's).
    fn is_single(&self, rel: &str) -> bool {
        self.singles
            .binary_search_by(|n| n.as_str().cmp(rel))
            .is_ok()
    }
}

impl ByteTree for PrefixSources {
    fn root(&self) -> &std::path::Path {
        &self.prefix.root
    }

    fn file(&self, rel: &str) -> Option<Arc<dyn ByteSource>> {
        match self.is_single(rel) {
            true => self.prefix.open_single(rel).ok(),
            false => SharedPrefix(Arc::clone(&self.prefix)).file(rel),
        }
    }

    fn open_file(&self, rel: &str) -> std::io::Result<Arc<dyn ByteSource>> {
        match self.is_single(rel) {
            true => self.prefix.open_single(rel).map_err(RemoteError::into_io),
            false => SharedPrefix(Arc::clone(&self.prefix))
                .file(rel)
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, rel)),
        }
    }

    fn is_dir(&self, rel: &str) -> bool {
        let dir = format!("{}/", rel.trim_end_matches('/'));
        !self.names_under(&dir).is_empty()
    }

    fn names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn names_under(&self, prefix: &str) -> Vec<String> {
        super::sorted_under(&self.names, String::as_str, prefix).to_vec()
    }

    fn store_dirs(&self) -> Vec<(String, Arc<dyn ByteTree>)> {
        self.store_dirs
            .iter()
            .map(|d| {
                let sub: Arc<dyn ByteTree> = Arc::new(SubPrefix {
                    prefix: Arc::clone(&self.prefix),
                    root: self.prefix.root.join(d),
                    base: format!("{d}/"),
                });
                (d.clone(), sub)
            })
            .collect()
    }

    fn relist_every(&self) -> Option<Duration> {
        lock(&self.prefix.follow).as_ref().map(|f| f.every)
    }

    /// Lists the prefix now (the mount's follower asks every [`ByteTree::relist_every`]);
    /// other names, sizes or ETags open it again and tell its sources again.
    fn relist(&self) -> std::io::Result<Relist> {
        let p = &self.prefix;
        let now = listed(&p.client, &p.root.display().to_string(), p.client.deadline)
            .map_err(RemoteError::into_io)?;
        if same_listing(&p.objects, &now) {
            return Ok(Relist::Unchanged);
        }
        self.reopen().unwrap_or(Ok(Relist::Unchanged))
    }

    /// The prefix opened again and its sources told again (when it is followed), whatever
    /// the listing: after a `.b2z` store of it changed.
    fn reopen(&self) -> Option<std::io::Result<Relist>> {
        let now = self.prefix.reopen()?;
        Some(
            now.and_then(|p| p.sources(&self.opts))
                .map(|(tree, stores)| Relist::Changed(tree, stores))
                .map_err(RemoteError::into_io),
        )
    }
}

/// The objects under directory `base` of a prefix, as a tree of their own (a `.b2d` store
/// inside a prefix of sources); read through the prefix.
#[derive(Debug)]
struct SubPrefix {
    prefix: Arc<RemotePrefix>,
    /// The prefix's root joined with the directory.
    root: std::path::PathBuf,
    /// The directory's name with a final `/`.
    base: String,
}

impl ByteTree for SubPrefix {
    fn root(&self) -> &std::path::Path {
        &self.root
    }

    fn file(&self, rel: &str) -> Option<Arc<dyn ByteSource>> {
        SharedPrefix(Arc::clone(&self.prefix)).file(&format!("{}{rel}", self.base))
    }

    fn open_file(&self, rel: &str) -> std::io::Result<Arc<dyn ByteSource>> {
        self.prefix
            .open_single(&format!("{}{rel}", self.base))
            .map_err(RemoteError::into_io)
    }

    fn is_dir(&self, rel: &str) -> bool {
        let dir = format!("{}{}/", self.base, rel.trim_end_matches('/'));
        !super::sorted_under(&self.prefix.objects, |o| o.rel.as_str(), &dir).is_empty()
    }

    fn names(&self) -> Vec<String> {
        self.names_under("")
    }

    fn names_under(&self, prefix: &str) -> Vec<String> {
        let under = format!("{}{prefix}", self.base);
        super::sorted_under(&self.prefix.objects, |o| o.rel.as_str(), &under)
            .iter()
            .map(|o| o.rel[self.base.len()..].to_owned())
            .collect()
    }
}
