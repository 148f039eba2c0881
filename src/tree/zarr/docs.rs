//! The cache of the groups' `zarr.json` documents (`consolidated.rs`): each holds the
//! consolidated metadata of its group's subtree, so together they are O(nodes x depth) bytes,
//! which a deep hostile store would make unbounded. Kept within a byte budget
//! ([`DOC_BUDGET`]): past it the least recently read documents are dropped (built again at
//! their next read); a document larger than the budget is kept alone (the cache then holds
//! that one document). Nothing is refused. Each document is kept with the view's generation it was built in; documents of
//! older generations are dropped at the next insert.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Bytes of group documents the cache keeps by default (64 MiB).
pub const DOC_BUDGET: usize = 64 << 20;

/// One kept document.
#[derive(Debug)]
struct Doc {
    generation: u64,
    bytes: Arc<[u8]>,
    /// When it was last read (a key of [`DocCache::order`]).
    used: u64,
}

/// Group documents by directory inode, within a byte budget, least recently read first out.
#[derive(Debug)]
pub(crate) struct DocCache {
    docs: HashMap<u64, Doc>,
    /// Last read -> inode.
    order: BTreeMap<u64, u64>,
    bytes: usize,
    budget: usize,
    tick: u64,
    /// Documents dropped to stay within the budget (or never kept, being larger).
    evicted: u64,
}

impl Default for DocCache {
    fn default() -> Self {
        DocCache {
            docs: HashMap::new(),
            order: BTreeMap::new(),
            bytes: 0,
            budget: DOC_BUDGET,
            tick: 0,
            evicted: 0,
        }
    }
}

impl DocCache {
    /// The document of inode `key` built in `generation`, if kept (it becomes the most
    /// recently read).
    pub(crate) fn get(&mut self, key: u64, generation: u64) -> Option<Arc<[u8]>> {
        self.tick += 1;
        let doc = self.docs.get_mut(&key)?;
        if doc.generation != generation {
            return None;
        }
        self.order.remove(&doc.used);
        doc.used = self.tick;
        self.order.insert(self.tick, key);
        Some(doc.bytes.clone())
    }

    /// Keeps `bytes` as the document of `key` in `generation`: documents of other
    /// generations go, then the least recently read until it fits; one larger than the
    /// budget is kept alone (every other dropped), so that the stats and opens of a huge
    /// document do not build it again each time.
    pub(crate) fn insert(&mut self, key: u64, generation: u64, bytes: Arc<[u8]>) {
        let stale: Vec<u64> = self
            .docs
            .iter()
            .filter(|(k, d)| d.generation != generation || **k == key)
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            self.remove(k);
        }
        while self.bytes + bytes.len() > self.budget {
            let Some((_, &oldest)) = self.order.iter().next() else {
                break;
            };
            self.remove(oldest);
            self.evicted += 1;
        }
        self.tick += 1;
        self.bytes += bytes.len();
        self.order.insert(self.tick, key);
        self.docs.insert(
            key,
            Doc {
                generation,
                bytes,
                used: self.tick,
            },
        );
    }

    fn remove(&mut self, key: u64) {
        if let Some(d) = self.docs.remove(&key) {
            self.order.remove(&d.used);
            self.bytes -= d.bytes.len();
        }
    }

    /// Sets the budget (tests: a tiny one); documents past it go now.
    pub(crate) fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        while self.bytes > self.budget {
            let Some((_, &oldest)) = self.order.iter().next() else {
                break;
            };
            self.remove(oldest);
            self.evicted += 1;
        }
    }

    /// (bytes kept, documents kept, documents evicted so far).
    pub(crate) fn usage(&self) -> (usize, usize, u64) {
        (self.bytes, self.docs.len(), self.evicted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(n: usize) -> Arc<[u8]> {
        vec![b'x'; n].into()
    }

    #[test]
    fn the_cache_keeps_the_most_recently_read_documents_within_its_budget() {
        let mut c = DocCache::default();
        c.set_budget(100);
        c.insert(1, 0, doc(40));
        c.insert(2, 0, doc(40));
        assert!(c.get(1, 0).is_some(), "1 is now the most recently read");
        c.insert(3, 0, doc(40));
        assert_eq!(c.usage(), (80, 2, 1));
        assert!(c.get(2, 0).is_none(), "the least recently read went");
        assert!(c.get(1, 0).is_some() && c.get(3, 0).is_some());
        // Larger than the budget: kept alone, the others dropped.
        c.insert(4, 0, doc(101));
        assert!(c.get(4, 0).is_some());
        assert!(c.get(1, 0).is_none() && c.get(3, 0).is_none());
        assert_eq!(c.usage(), (101, 1, 3));
        // Another generation: the old documents go.
        c.insert(5, 1, doc(10));
        assert!(c.get(4, 0).is_none() && c.get(4, 1).is_none());
        assert_eq!(c.usage().0, 10);
        // The same key again replaces its document.
        c.insert(5, 1, doc(20));
        assert_eq!(c.usage(), (20, 1, 3));
        c.set_budget(10);
        assert_eq!(c.usage(), (0, 0, 4));
    }
}
