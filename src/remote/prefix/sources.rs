//! A prefix holding a directory of sources (`s3://bucket/run7/` with `a.b2nd`, `st.b2z`, a
//! sparse frame's or a bcolz root's sub-prefix...): which of its objects are sources, told by
//! content as a local directory's files are (`crate::container::store::dir`), as the
//! [`ByteTree`] a collection of them is opened from
//! ([`crate::container::store::dir::open_listed`]), listed again when the prefix is followed.
//!
//! - **Telling the sources**: a sub-prefix holding `chunks.b2frame`, `__rootdirs__`,
//!   `meta/sizes` or `meta/nrows` is a directory source (its objects read through the prefix,
//!   as a prefix mounted alone reads them); any other object is a source when its first bytes
//!   are a frame's or `blsk`'s, a store when they are a zip's. One ranged GET of those bytes
//!   per object not fetched at open, all at once (at most [`HEADS_AT_ONCE`] in flight). Other
//!   objects are not shown. A sub-prefix holding `embed.b2e` is a `.b2d` store, its objects
//!   a tree of their own ([`ByteTree::store_dirs`]), read as a `.b2d` prefix mounted alone.
//! - **Frames and `.b2z` stores** are read as a single object mounted alone is
//!   ([`RemotePrefix::open_single`]), each opened when first used.
//! - **Followed** (`remote_recheck`): [`ByteTree::relist`] lists the prefix again when due;
//!   other names, sizes or ETags open it again and tell its sources again.

use std::sync::Arc;
use std::time::Duration;

use object_store::GetRange;

use super::{RemotePrefix, SharedPrefix, lock};
use crate::container::store::dir::source_roots;
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
        let inside = |n: &str, dirs: &[&str]| {
            dirs.iter()
                .any(|d| n.strip_prefix(d).is_some_and(|r| r.starts_with('/')))
        };
        // The outermost `.b2d` stores, then the directory sources outside them.
        let mut stores_inside: Vec<&str> = names
            .iter()
            .filter_map(|n| n.strip_suffix("/embed.b2e"))
            .collect();
        let all = stores_inside.clone();
        stores_inside.retain(|d| !inside(d, &all));
        let roots = source_roots(&names);
        let root_dirs: Vec<&str> = roots
            .iter()
            .map(String::as_str)
            .filter(|r| !inside(r, &stores_inside))
            .collect();
        let (mut listed, mut candidates) = (Vec::new(), Vec::new());
        for (i, o) in self.objects.iter().enumerate() {
            if inside(&o.rel, &stores_inside) {
                continue;
            }
            if inside(&o.rel, &root_dirs) {
                listed.push(o.rel.clone());
            } else if o.size > 0 {
                candidates.push(i);
            }
        }
        let heads = self.heads(&candidates)?;
        let (mut singles, mut stores) = (Vec::new(), Vec::new());
        for (&i, head) in candidates.iter().zip(heads) {
            let rel = &self.objects[i].rel;
            if head.starts_with(&crate::container::frame::MAGIC) || head.starts_with(b"blsk") {
                listed.push(rel.clone());
                singles.push(rel.clone());
            } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
                singles.push(rel.clone());
                stores.push(rel.clone());
            } else {
                log::debug!("{}/{rel}: not a source, not shown", self.root.display());
            }
        }
        if listed.is_empty() && stores.is_empty() && stores_inside.is_empty() {
            return Err(RemoteError::new(
                RemoteErrorKind::NotFound,
                "no source under the prefix (no frame, store, sparse frame or bcolz root)",
            ));
        }
        listed.sort();
        singles.sort();
        let tree = Arc::new(PrefixSources {
            prefix: Arc::clone(self),
            names: listed,
            singles,
            store_dirs: stores_inside.iter().map(|s| (*s).to_owned()).collect(),
            opts: opts.clone(),
        });
        let mut opened = Vec::with_capacity(stores.len());
        for rel in stores {
            let bytes = self.open_single(&rel)?;
            opened.push((rel, bytes));
        }
        Ok((tree, opened))
    }

    /// The first bytes of each object of `which` (fewer for shorter objects): from the
    /// cache when the open fetched it, else one ranged GET each, [`HEADS_AT_ONCE`] at a time.
    fn heads(&self, which: &[usize]) -> Result<Vec<bytes::Bytes>, RemoteError> {
        let sem = Arc::new(tokio::sync::Semaphore::new(HEADS_AT_ONCE));
        let rt = &self.client.rt;
        let tasks: Vec<_> = which
            .iter()
            .map(|&i| {
                let o = &self.objects[i];
                let n = HEAD.min(o.size);
                if self.cache.present(i as u64) {
                    let got = self
                        .whole(i)
                        .map(|b| b.map(|b| b.slice(..n as usize)).unwrap_or_default())
                        .map_err(|e| RemoteError::new(RemoteErrorKind::Network, e.to_string()));
                    return rt.spawn(async move { got });
                }
                let get = self
                    .client
                    .get_at(&o.path, GetRange::Bounded(0..n), &o.pin, None);
                let sem = Arc::clone(&sem);
                rt.spawn(async move {
                    let _turn = sem.acquire_owned().await;
                    get.await.map(|g| g.bytes())
                })
            })
            .collect();
        rt.block_on(async {
            let mut heads = Vec::with_capacity(tasks.len());
            for (t, &i) in tasks.into_iter().zip(which) {
                let got = t
                    .await
                    .map_err(|e| RemoteError::new(RemoteErrorKind::Network, e.to_string()))?;
                let head = got.map_err(|e| {
                    RemoteError::new(e.kind, format!("{}: {}", self.objects[i].url, e.why))
                })?;
                heads.push(head);
            }
            Ok(heads)
        })
    }
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

    fn relist(&self) -> std::io::Result<Relist> {
        if !self.prefix.poll_changed(true) {
            return Ok(Relist::Unchanged);
        }
        let Some(now) = self.prefix.reopen() else {
            return Ok(Relist::Unchanged);
        };
        let (tree, stores) = now
            .and_then(|p| p.sources(&self.opts))
            .map_err(RemoteError::into_io)?;
        Ok(Relist::Changed(tree, stores))
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
