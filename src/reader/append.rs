//! [`AppendVec`]: a vector that grows through a shared reference and never moves what it
//! holds, so `&T` taken from it stays valid while others append. The tree keeps its nodes
//! and arrays in it (a collection leaf's subtree is added on first access, while FUSE worker
//! threads hold references to other nodes), the reader its chunk stores.
//!
//! Slots live in buckets of doubling size (32, 64, 128, ...) allocated on first use; a slot
//! is a `OnceLock`, so no `unsafe` is needed. Appends are serialised by a mutex; reads take
//! no lock.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// log2 of the first bucket's size.
const FIRST: u32 = 5;
/// Number of buckets: enough for more items than memory can hold.
const BUCKETS: usize = 48;

/// An append-only vector whose items never move (see the module doc).
pub struct AppendVec<T> {
    buckets: [OnceLock<Box<[OnceLock<T>]>>; BUCKETS],
    /// Items readable now (published after their slot is set).
    len: AtomicUsize,
    /// Serialises appends.
    push: Mutex<()>,
}

impl<T> Default for AppendVec<T> {
    fn default() -> Self {
        AppendVec {
            buckets: std::array::from_fn(|_| OnceLock::new()),
            len: AtomicUsize::new(0),
            push: Mutex::new(()),
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for AppendVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Bucket and position in it of item `i`.
fn place(i: usize) -> (usize, usize) {
    let n = i + (1 << FIRST);
    let bucket = (usize::BITS - 1 - n.leading_zeros() - FIRST) as usize;
    (bucket, n - (1 << (bucket as u32 + FIRST)))
}

impl<T> AppendVec<T> {
    /// An empty vector.
    pub fn new() -> AppendVec<T> {
        AppendVec::default()
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether it holds no item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len() {
            return None;
        }
        let (b, k) = place(i);
        self.buckets.get(b)?.get()?.get(k)?.get()
    }

    /// Appends `value`; returns its index.
    ///
    /// # Panics
    /// Past `2^52` items (memory runs out long before).
    pub fn push(&self, value: T) -> usize {
        let _guard = self.push.lock();
        let i = self.len.load(Ordering::Acquire);
        let (b, k) = place(i);
        let bucket = self.buckets[b].get_or_init(|| {
            (0..1usize << (b as u32 + FIRST))
                .map(|_| OnceLock::new())
                .collect()
        });
        if bucket[k].set(value).is_err() {
            unreachable!("slot {i} is set only by the append that publishes it");
        }
        self.len.store(i + 1, Ordering::Release);
        i
    }

    /// The items in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len()).map_while(|i| self.get(i))
    }
}

impl<T> FromIterator<T> for AppendVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let v = AppendVec::new();
        for x in iter {
            v.push(x);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_fill_buckets_of_doubling_size() {
        assert_eq!(place(0), (0, 0));
        assert_eq!(place(31), (0, 31));
        assert_eq!(place(32), (1, 0));
        assert_eq!(place(95), (1, 63));
        assert_eq!(place(96), (2, 0));
    }

    #[test]
    fn references_stay_valid_across_appends() {
        let v: AppendVec<String> = (0..10).map(|i| i.to_string()).collect();
        let first = v.get(3).unwrap();
        for i in 10..5000 {
            assert_eq!(v.push(i.to_string()), i);
        }
        assert_eq!(first, "3");
        assert_eq!(v.len(), 5000);
        assert_eq!(v.get(4999).map(String::as_str), Some("4999"));
        assert!(v.get(5000).is_none());
        assert_eq!(v.iter().count(), 5000);
    }

    #[test]
    fn appends_from_several_threads_all_land() {
        let v: AppendVec<usize> = AppendVec::new();
        std::thread::scope(|s| {
            for t in 0..4 {
                let v = &v;
                s.spawn(move || {
                    for i in 0..1000 {
                        v.push(t * 1000 + i);
                    }
                });
            }
        });
        let mut all: Vec<usize> = v.iter().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..4000).collect::<Vec<_>>());
    }
}
