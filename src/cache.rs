//! A byte-budgeted LRU cache of decompressed chunks, shared by worker threads, that loads each
//! cold entry once however many readers ask for it at the same time.
//!
//! The cache knows nothing of formats or files: keys are any hashable value (the tree uses
//! `(array, chunk index)`), values are immutable byte buffers behind an [`Arc`] so a reader
//! keeps its bytes alive after eviction.
//!
//! Subtleties and who handles them:
//! - **Bytes, not entries.** The `lru` crate counts entries; [`ChunkCache`] keeps its own byte
//!   total and pops least-recently-used entries until it is within the budget. A value larger
//!   than the whole budget is handed to its reader but never cached.
//! - **Single flight.** Two readers of the same cold key must not decode it twice. The first
//!   reader registers a `Flight` under the key and loads outside the lock; later readers wait
//!   on the flight's condition variable and receive the same `Arc`. A failed (or panicking)
//!   load wakes the waiters, which then retry on their own, so an error is never cached.
//! - **Memory reuse.** Freshly allocated large buffers are slow to fault in on the target
//!   machines, so [`ChunkCache::buffer`] first makes room (evicting to the budget *before* a
//!   decode rather than after) and recycles evicted buffers nobody else holds. At most
//!   [`MAX_SPARE`] spare buffers are kept, so the process holds at most the budget plus a few
//!   chunks.
//! - **Scans do not flush the cache.** A chunk that one reader streamed from start to end
//!   ([`ChunkCache::streamed`]) was most likely read once (`cp`, `cat`, `numpy.fromfile`). It
//!   waits in a short FIFO and is the first victim when room or a buffer is needed, so a scan
//!   of a source larger than the budget recycles a handful of warm buffers instead of growing
//!   the process into fresh memory and evicting chunks that random readers reuse. Its key is
//!   remembered as a *ghost*; a chunk streamed again while its ghost is remembered is kept like
//!   any other entry (the 2Q policy: a second pass is the evidence that it is reused), and so
//!   is a streamed entry hit again; later streaming passes over a reused entry do not demote
//!   it.
//! - **Prefetched chunks outlive read ones.** A value loaded ahead of its readers
//!   ([`ChunkCache::load_ahead`]) is evicted only when nothing else is left, until a reader
//!   gets it: otherwise a scan whose chunks are not streamed (a second pass) could lose the
//!   chunk it reads next to the one it just finished.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;
use parking_lot::{Condvar, Mutex};

/// A decompressed chunk as the cache hands it out.
pub type Bytes = Arc<Vec<u8>>;

/// How many evicted buffers are kept for reuse.
pub const MAX_SPARE: usize = 2;

/// How many streamed entries wait in the FIFO before they are evicted anyway.
pub const STREAM_KEEP: usize = 4;

/// How many of the newest streamed entries are kept even when their buffers could serve a
/// new decode (a second reader a little behind the first still finds them).
pub const STREAM_MIN: usize = 2;

/// How many keys of evicted streamed entries are remembered (16 bytes each for the tree's keys).
pub const MAX_GHOSTS: usize = 16 * 1024;

/// Counters for tests, `b2fs info` and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache (including waits on another reader's load).
    pub hits: u64,
    /// Loads performed (each cold key loaded by exactly one reader).
    pub loads: u64,
    /// Readers that waited for another reader's load of the same key.
    pub waits: u64,
    /// Entries evicted to stay within the budget.
    pub evictions: u64,
    /// Buffers reused from evicted entries.
    pub recycled: u64,
}

/// One in-progress load: waiters block on `cv` until `state` is no longer pending.
#[derive(Debug, Default)]
struct Flight {
    state: Mutex<FlightState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
enum FlightState {
    #[default]
    Pending,
    Done(Bytes),
    Failed,
}

#[derive(Debug)]
struct Inner<K: Hash + Eq> {
    lru: LruCache<K, Bytes>,
    bytes: usize,
    inflight: HashMap<K, Arc<Flight>>,
    spare: Vec<Vec<u8>>,
    /// Streamed entries, oldest first (all of them are in `lru`).
    streamed: VecDeque<K>,
    /// Keys of streamed entries evicted recently, oldest first, and the same as a set.
    ghost_order: VecDeque<K>,
    ghosts: HashSet<K>,
    /// Cached keys known to be reused (streamed again while a ghost, or hit again after
    /// being streamed): streaming them once more does not demote them.
    reused: HashSet<K>,
    /// Cached keys loaded ahead of their readers (prefetch) and not read since: evicted
    /// only when nothing else is left, so a scan does not lose the chunks it is about to
    /// read to the ones it has read.
    ahead: HashSet<K>,
}

impl<K: Hash + Eq + Clone> Inner<K> {
    /// Forgets that `key` was streamed (it was hit again, replaced or removed).
    fn unstream(&mut self, key: &K) {
        if let Some(i) = self.streamed.iter().position(|k| k == key) {
            self.streamed.remove(i);
        }
    }

    /// `key` was read again after being streamed: it is worth keeping.
    fn mark_reused(&mut self, key: &K) {
        if let Some(i) = self.streamed.iter().position(|k| k == key) {
            self.streamed.remove(i);
            self.reused.insert(key.clone());
        }
    }

    /// `key` left the cache: forget everything about it but its ghost.
    fn forget(&mut self, key: &K) {
        self.unstream(key);
        self.reused.remove(key);
        self.ahead.remove(key);
    }

    fn add_ghost(&mut self, key: K) {
        if self.ghosts.insert(key.clone()) {
            self.ghost_order.push_back(key);
        }
        while self.ghost_order.len() > MAX_GHOSTS {
            if let Some(old) = self.ghost_order.pop_front() {
                self.ghosts.remove(&old);
            }
        }
    }
}

/// A byte-budgeted, single-flight LRU cache of byte buffers; `Sync`, shared by all readers.
#[derive(Debug)]
pub struct ChunkCache<K: Hash + Eq> {
    inner: Mutex<Inner<K>>,
    budget: usize,
    hits: AtomicU64,
    loads: AtomicU64,
    waits: AtomicU64,
    evictions: AtomicU64,
    recycled: AtomicU64,
}

/// Completes a flight when dropped, so a panicking loader still wakes its waiters.
struct FlightGuard<'a, K: Hash + Eq + Clone> {
    cache: &'a ChunkCache<K>,
    key: Option<K>,
    flight: Arc<Flight>,
    /// Loaded ahead of its readers (see `Inner::ahead`).
    ahead: bool,
}

impl<K: Hash + Eq + Clone> FlightGuard<'_, K> {
    fn finish(mut self, value: Option<Bytes>) {
        self.complete(value);
    }

    fn complete(&mut self, value: Option<Bytes>) {
        let Some(key) = self.key.take() else { return };
        {
            let mut inner = self.cache.inner.lock();
            inner.inflight.remove(&key);
            if let Some(v) = &value {
                if self.ahead {
                    inner.ahead.insert(key.clone());
                }
                self.cache.insert_locked(&mut inner, key, v.clone());
            }
        }
        let mut state = self.flight.state.lock();
        *state = match value {
            Some(v) => FlightState::Done(v),
            None => FlightState::Failed,
        };
        self.flight.cv.notify_all();
    }
}

impl<K: Hash + Eq + Clone> Drop for FlightGuard<'_, K> {
    fn drop(&mut self) {
        self.complete(None);
    }
}

impl<K: Hash + Eq + Clone> ChunkCache<K> {
    /// A cache holding at most `budget` bytes of values (plus up to [`MAX_SPARE`] spare
    /// buffers kept for reuse).
    pub fn new(budget: usize) -> Self {
        ChunkCache {
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
                inflight: HashMap::new(),
                spare: Vec::new(),
                streamed: VecDeque::new(),
                ghost_order: VecDeque::new(),
                ghosts: HashSet::new(),
                reused: HashSet::new(),
                ahead: HashSet::new(),
            }),
            budget,
            hits: AtomicU64::new(0),
            loads: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            recycled: AtomicU64::new(0),
        }
    }

    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes currently held by cached values.
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }

    /// Number of cached values.
    pub fn len(&self) -> usize {
        self.inner.lock().lru.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            loads: self.loads.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            recycled: self.recycled.load(Ordering::Relaxed),
        }
    }

    /// The cached value for `key`, marking it most recently used.
    pub fn get(&self, key: &K) -> Option<Bytes> {
        let mut inner = self.inner.lock();
        let v = inner.lru.get(key).cloned();
        if v.is_some() {
            inner.ahead.remove(key);
            if !inner.streamed.is_empty() {
                inner.mark_reused(key);
            }
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        v
    }

    /// Tells the cache that one reader has just read `key`'s value from start to end in
    /// order: unless it was streamed before (its ghost is remembered) or is read again, it is
    /// evicted first, before the budget is reached (see the module comment).
    pub fn streamed(&self, key: &K) {
        let mut inner = self.inner.lock();
        if !inner.lru.contains(key) {
            return;
        }
        if inner.ghosts.remove(key) {
            // The second pass over it: keep it like any other entry from now on.
            inner.reused.insert(key.clone());
            return;
        }
        if inner.reused.contains(key) || inner.streamed.contains(key) {
            return;
        }
        inner.streamed.push_back(key.clone());
        while inner.streamed.len() > STREAM_KEEP {
            self.evict_streamed(&mut inner);
        }
    }

    /// Evicts the oldest streamed entry (recycling its buffer); false when there is none.
    fn evict_streamed(&self, inner: &mut Inner<K>) -> bool {
        let Some(key) = inner.streamed.pop_front() else {
            return false;
        };
        inner.reused.remove(&key);
        if let Some(v) = inner.lru.pop(&key) {
            self.evicted(inner, v);
        }
        inner.add_ghost(key);
        true
    }

    /// Accounts for an evicted value and keeps its buffer as a spare when nobody else holds
    /// it (the oldest spare makes room: the newest buffer is the likeliest fit).
    fn evicted(&self, inner: &mut Inner<K>, v: Bytes) {
        inner.bytes -= v.len();
        self.evictions.fetch_add(1, Ordering::Relaxed);
        if let Ok(buf) = Arc::try_unwrap(v) {
            if inner.spare.len() >= MAX_SPARE {
                inner.spare.remove(0);
            }
            inner.spare.push(buf);
        }
    }

    /// Whether `key` is cached or being loaded, without touching its recency.
    pub fn contains_or_loading(&self, key: &K) -> bool {
        let inner = self.inner.lock();
        inner.lru.contains(key) || inner.inflight.contains_key(key)
    }

    /// The value for `key`: from the cache, from a concurrent reader's load of the same key,
    /// or from `load` (called at most once, outside the lock). The loaded value is cached
    /// when it fits in the budget.
    ///
    /// # Errors
    /// Whatever `load` returns; errors are not cached, and readers that were waiting for a
    /// failed load retry it themselves.
    pub fn get_or_load<E>(
        &self,
        key: K,
        load: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Bytes, E> {
        self.fetch(key, load, false)
    }

    /// [`ChunkCache::get_or_load`] for a value loaded ahead of its readers (prefetch): until a
    /// reader gets it, it is evicted only when nothing else is left.
    ///
    /// # Errors
    /// Whatever `load` returns.
    pub fn load_ahead<E>(
        &self,
        key: K,
        load: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Bytes, E> {
        self.fetch(key, load, true)
    }

    fn fetch<E>(
        &self,
        key: K,
        load: impl FnOnce() -> Result<Vec<u8>, E>,
        ahead: bool,
    ) -> Result<Bytes, E> {
        let mut load = Some(load);
        loop {
            let waiting = {
                let mut inner = self.inner.lock();
                if let Some(v) = inner.lru.get(&key).cloned() {
                    if !ahead {
                        inner.ahead.remove(&key);
                    }
                    if !inner.streamed.is_empty() {
                        inner.mark_reused(&key);
                    }
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(v);
                }
                match inner.inflight.get(&key) {
                    Some(flight) => Some(flight.clone()),
                    None => {
                        let flight = Arc::new(Flight::default());
                        inner.inflight.insert(key.clone(), flight.clone());
                        drop(inner);
                        let guard = FlightGuard {
                            cache: self,
                            key: Some(key.clone()),
                            flight,
                            ahead,
                        };
                        self.loads.fetch_add(1, Ordering::Relaxed);
                        let Some(load) = load.take() else {
                            unreachable!("a reader loads at most once: it returns after loading")
                        };
                        return match load() {
                            Ok(bytes) => {
                                let v = Arc::new(bytes);
                                guard.finish(Some(v.clone()));
                                Ok(v)
                            }
                            Err(e) => {
                                guard.finish(None);
                                Err(e)
                            }
                        };
                    }
                }
            };
            if let Some(flight) = waiting {
                self.waits.fetch_add(1, Ordering::Relaxed);
                let mut state = flight.state.lock();
                while matches!(*state, FlightState::Pending) {
                    flight.cv.wait(&mut state);
                }
                if let FlightState::Done(v) = &*state {
                    let v = v.clone();
                    drop(state);
                    if !ahead {
                        // Marked by the loader before it signalled: this reader has it now.
                        self.inner.lock().ahead.remove(&key);
                    }
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(v);
                }
                // Failed: loop and try the load ourselves.
            }
        }
    }

    /// Drops the cached value for `key` (the source changed under it). A load in flight is
    /// not cancelled; callers that must not see its value swap their source first.
    pub fn remove(&self, key: &K) {
        let mut inner = self.inner.lock();
        if let Some(old) = inner.lru.pop(key) {
            inner.bytes -= old.len();
        }
        inner.forget(key);
    }

    /// Drops every cached value whose key matches `pred`, and returns the matching keys of
    /// loads still in flight.
    fn remove_where(&self, pred: impl Fn(&K) -> bool) -> Vec<K> {
        let mut inner = self.inner.lock();
        let doomed: Vec<K> = inner
            .lru
            .iter()
            .map(|(k, _)| k)
            .filter(|k| pred(k))
            .cloned()
            .collect();
        for k in &doomed {
            if let Some(old) = inner.lru.pop(k) {
                inner.bytes -= old.len();
            }
            inner.forget(k);
        }
        inner.inflight.keys().filter(|k| pred(k)).cloned().collect()
    }

    /// Drops every value whose key matches `pred` and waits for the matching loads in flight,
    /// dropping what they insert: afterwards no value loaded before the call is cached. (For
    /// a source that changed: loads that start later read the new source.)
    pub fn purge_where(&self, pred: impl Fn(&K) -> bool) {
        for key in self.remove_where(pred) {
            // Joining the flight (a reader whose loader refuses waits for it, or fails at once
            // when it is done) and removing again closes the window.
            let _ = self.get_or_load(key.clone(), || Err(()));
            self.remove(&key);
        }
    }

    /// Inserts a value directly (used by tests and by callers that decoded elsewhere).
    pub fn insert(&self, key: K, value: Bytes) {
        let mut inner = self.inner.lock();
        self.insert_locked(&mut inner, key, value);
    }

    /// A buffer of exactly `len` bytes to decode into, reusing an evicted buffer when one is
    /// available. Makes room first: when the cache is full, least-recently-used entries are
    /// evicted now so that the caller's value will fit without exceeding the budget.
    /// The contents are unspecified (the caller overwrites all of them).
    pub fn buffer(&self, len: usize) -> Vec<u8> {
        let mut inner = self.inner.lock();
        if len <= self.budget {
            while inner.bytes + len > self.budget {
                if !self.evict_for_room(&mut inner) {
                    break;
                }
            }
        }
        let fits = |b: &Vec<u8>| b.capacity() >= len && b.capacity() <= len.saturating_mul(2);
        let mut pick = inner.spare.iter().position(fits);
        // Rather than a fresh allocation, take the buffer of a streamed entry.
        while pick.is_none() && inner.streamed.len() > STREAM_MIN && self.evict_streamed(&mut inner)
        {
            pick = inner.spare.iter().position(fits);
        }
        if let Some(i) = pick {
            let mut buf = inner.spare.swap_remove(i);
            drop(inner);
            self.recycled.fetch_add(1, Ordering::Relaxed);
            if buf.len() >= len {
                buf.truncate(len);
            } else {
                buf.resize(len, 0);
            }
            return buf;
        }
        drop(inner);
        crate::mem::zeroed(len)
    }

    /// Returns a buffer nobody needs any more to the spare list (used for scratch buffers).
    pub fn recycle(&self, buf: Vec<u8>) {
        let mut inner = self.inner.lock();
        if inner.spare.len() < MAX_SPARE && buf.capacity() > 0 {
            inner.spare.push(buf);
        }
    }

    fn insert_locked(&self, inner: &mut Inner<K>, key: K, value: Bytes) {
        let len = value.len();
        if len > self.budget {
            return;
        }
        if let Some(old) = inner.lru.put(key.clone(), value) {
            inner.bytes -= old.len();
            inner.forget(&key);
        }
        inner.bytes += len;
        while inner.bytes > self.budget {
            if !self.evict_for_room(inner) {
                break;
            }
        }
    }

    /// Makes room by one entry: a streamed entry first (read once: the 2Q rule keeps the
    /// entries that were reused), else the least recently used. False when the cache is empty.
    fn evict_for_room(&self, inner: &mut Inner<K>) -> bool {
        self.evict_streamed(inner) || self.evict_one(inner)
    }

    /// Evicts the least-recently-used entry; false when the cache is empty.
    fn evict_one(&self, inner: &mut Inner<K>) -> bool {
        // The least recently used entry that was read; one loaded ahead only when all are.
        let read = inner
            .lru
            .iter()
            .rev()
            .map(|(k, _)| k)
            .find(|k| !inner.ahead.contains(*k))
            .cloned();
        let popped = match read {
            Some(k) => inner.lru.pop(&k).map(|v| (k, v)),
            None => inner.lru.pop_lru(),
        };
        let Some((key, v)) = popped else {
            return false;
        };
        inner.forget(&key);
        self.evicted(inner, v);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::atomic::AtomicUsize;
    use std::thread;
    use std::time::Duration;

    fn val(n: usize, b: u8) -> Vec<u8> {
        vec![b; n]
    }

    #[test]
    fn cache_bytes_accounted_on_insert_and_replace() {
        let c = ChunkCache::new(100);
        c.insert(1u32, Arc::new(val(30, 1)));
        c.insert(2, Arc::new(val(20, 2)));
        assert_eq!(c.bytes(), 50);
        c.insert(1, Arc::new(val(10, 3)));
        assert_eq!(c.bytes(), 30);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&1).unwrap()[0], 3);
    }

    #[test]
    fn cache_over_budget_evicts_least_recently_used() {
        let c = ChunkCache::new(100);
        c.insert(1u32, Arc::new(val(40, 1)));
        c.insert(2, Arc::new(val(40, 2)));
        assert!(c.get(&1).is_some()); // 2 is now the LRU
        c.insert(3, Arc::new(val(40, 3)));
        assert_eq!(c.bytes(), 80);
        assert!(c.get(&2).is_none());
        assert!(c.get(&1).is_some());
        assert!(c.get(&3).is_some());
        assert_eq!(c.stats().evictions, 1);
    }

    #[test]
    fn cache_over_budget_evicts_streamed_entries_before_the_least_recently_used() {
        let c = ChunkCache::new(300);
        for k in 1..=3u32 {
            c.insert(k, Arc::new(val(100, k as u8)));
        }
        c.streamed(&3); // the newest entry, but read once
        c.insert(4, Arc::new(val(100, 4)));
        assert!(c.get(&3).is_none(), "the streamed entry makes room");
        assert!(c.get(&1).is_some(), "the least recently used one stays");
        // Room for a decode, too: again the streamed entry goes first.
        c.streamed(&4);
        let _buf = c.buffer(100);
        assert!(c.get(&4).is_none());
        assert!(c.get(&1).is_some() && c.get(&2).is_some());
    }

    #[test]
    fn cache_values_loaded_ahead_are_evicted_last_until_read() {
        let c = ChunkCache::new(300);
        let ok = |b: u8| move || Ok::<_, ()>(val(100, b));
        c.load_ahead(1u32, ok(1)).unwrap();
        c.get_or_load(2, ok(2)).unwrap();
        c.get_or_load(3, ok(3)).unwrap();
        c.get_or_load(4, ok(4)).unwrap(); // over budget: 1 is the oldest, but not read yet
        assert!(
            c.contains_or_loading(&1),
            "a value loaded ahead outlives older reads"
        );
        assert!(!c.contains_or_loading(&2));
        assert!(c.get(&1).is_some()); // read now: an ordinary entry from here on
        for k in 5..=7u32 {
            c.get_or_load(k, ok(k as u8)).unwrap();
        }
        assert!(
            !c.contains_or_loading(&1),
            "once read it ages like any other"
        );
        // When everything left was loaded ahead, the oldest of those goes.
        let d = ChunkCache::new(200);
        for k in 1..=3u32 {
            d.load_ahead(k, ok(k as u8)).unwrap();
        }
        assert!(!d.contains_or_loading(&1) && d.contains_or_loading(&3));
    }

    #[test]
    fn cache_value_larger_than_budget_is_returned_not_cached() {
        let c = ChunkCache::new(10);
        let v = c.get_or_load(7u32, || Ok::<_, ()>(val(11, 9))).unwrap();
        assert_eq!(v.len(), 11);
        assert!(c.is_empty());
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn cache_error_is_not_cached() {
        let c = ChunkCache::<u32>::new(100);
        assert_eq!(c.get_or_load(1, || Err::<Vec<u8>, _>("bad")), Err("bad"));
        assert!(c.is_empty());
        let v = c.get_or_load(1, || Ok::<_, &str>(val(5, 1))).unwrap();
        assert_eq!(v.len(), 5);
        assert_eq!(c.stats().loads, 2);
    }

    #[test]
    fn cache_buffer_makes_room_and_recycles_evicted_buffers() {
        let c = ChunkCache::new(100);
        c.insert(1u32, Arc::new(val(50, 1)));
        c.insert(2, Arc::new(val(50, 2)));
        let buf = c.buffer(50);
        assert_eq!(buf.len(), 50);
        // Room was made before the decode, and the evicted buffer was reused.
        assert_eq!(c.bytes(), 50);
        assert_eq!(c.stats().recycled, 1);
        c.insert(3, Arc::new(buf));
        assert_eq!(c.bytes(), 100);
    }

    #[test]
    fn cache_buffer_held_by_reader_is_not_recycled() {
        let c = ChunkCache::new(50);
        c.insert(1u32, Arc::new(val(50, 1)));
        let held = c.get(&1).unwrap();
        let buf = c.buffer(50);
        assert_eq!(c.stats().recycled, 0);
        assert_eq!(held[0], 1, "a reader's bytes survive eviction");
        assert_eq!(buf.len(), 50);
    }

    #[test]
    fn cache_concurrent_cold_reads_load_once() {
        let c = Arc::new(ChunkCache::<u32>::new(1 << 20));
        let calls = Arc::new(AtomicUsize::new(0));
        let n = 8;
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (c, calls, barrier) = (c.clone(), calls.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    c.get_or_load(42, || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(50));
                        Ok::<_, ()>(val(1000, 4))
                    })
                    .unwrap()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap().len(), 1000);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(c.stats().loads, 1);
    }

    #[test]
    fn cache_waiters_retry_after_failed_load() {
        let c = Arc::new(ChunkCache::<u32>::new(1 << 20));
        let calls = Arc::new(AtomicUsize::new(0));
        let n = 4;
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (c, calls, barrier) = (c.clone(), calls.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    c.get_or_load(1, || {
                        let k = calls.fetch_add(1, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(20));
                        if k == 0 { Err(()) } else { Ok(val(10, 1)) }
                    })
                    .is_ok()
                })
            })
            .collect();
        let oks = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|ok| *ok)
            .count();
        // Exactly the first loader failed; everyone else got the value from one more load.
        assert_eq!(oks, n - 1);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn cache_panicking_loader_wakes_waiters() {
        let c = Arc::new(ChunkCache::<u32>::new(1 << 20));
        let c2 = c.clone();
        let t = thread::spawn(move || {
            let _ = c2.get_or_load(5, || -> Result<Vec<u8>, ()> {
                thread::sleep(Duration::from_millis(50));
                panic!("loader panics")
            });
        });
        thread::sleep(Duration::from_millis(10));
        let v = c.get_or_load(5, || Ok::<_, ()>(val(3, 3))).unwrap();
        assert_eq!(v.len(), 3);
        assert!(t.join().is_err());
    }

    /// Loads `key` through a recycled-or-fresh buffer filled with `b`, as the tree does.
    fn load(c: &ChunkCache<u32>, key: u32, n: usize, b: u8) -> Bytes {
        c.get_or_load(key, || {
            let mut buf = c.buffer(n);
            buf.fill(b);
            Ok::<_, ()>(buf)
        })
        .unwrap()
    }

    #[test]
    fn cache_streamed_entries_are_evicted_first_and_their_buffers_reused() {
        // A scan of 40 entries through a budget that could hold 100: without the streaming
        // rule all 40 would stay; with it only the last STREAM_KEEP do, and every buffer
        // after the first few is a recycled one.
        let c = ChunkCache::<u32>::new(100 * 64);
        for k in 0..40 {
            let v = load(&c, k, 64, k as u8);
            assert!(v.iter().all(|&x| x == k as u8), "entry {k} has stale bytes");
            drop(v);
            c.streamed(&k);
        }
        assert!(
            (STREAM_MIN..=STREAM_KEEP).contains(&c.len()),
            "{} streamed entries kept",
            c.len()
        );
        assert_eq!(c.bytes(), c.len() * 64);
        let st = c.stats();
        assert!(st.recycled >= 40 - STREAM_KEEP as u64 - 2, "{st:?}");
        for k in 40 - STREAM_MIN as u32..40 {
            assert!(
                c.get(&k).is_some(),
                "the newest streamed entries stay ({k})"
            );
        }
    }

    #[test]
    fn cache_streamed_entry_read_again_or_streamed_twice_is_kept() {
        let c = ChunkCache::<u32>::new(100 * 64);
        load(&c, 0, 64, 0);
        c.streamed(&0);
        assert!(c.get(&0).is_some()); // a second reader: now an ordinary entry
        for k in 1..=10 {
            load(&c, k, 64, 1);
            c.streamed(&k);
        }
        assert!(c.get(&0).is_some(), "a re-read streamed entry was evicted");
        assert!(c.get(&1).is_none(), "an old streamed entry was kept");
        // Entry 1 streamed again while its ghost is remembered: kept from now on.
        load(&c, 1, 64, 2);
        c.streamed(&1);
        for k in 11..=20 {
            load(&c, k, 64, 1);
            c.streamed(&k);
        }
        assert_eq!(
            c.get(&1).unwrap()[0],
            2,
            "a twice-streamed entry was evicted"
        );
        // A third pass over it (and over the re-read entry 0) does not demote them again.
        c.streamed(&1);
        c.streamed(&0);
        for k in 21..=30 {
            load(&c, k, 64, 1);
            c.streamed(&k);
        }
        assert_eq!(
            c.get(&1).unwrap()[0],
            2,
            "a reused entry was demoted by streaming"
        );
        assert!(
            c.get(&0).is_some(),
            "a re-read entry was demoted by streaming"
        );
        assert!(c.len() <= STREAM_KEEP + 2, "{} entries", c.len());
        // Removing a streamed entry forgets it (no stale key left behind to evict later).
        c.remove(&30);
        assert!(c.get(&30).is_none());
        assert_eq!(c.get(&0).unwrap()[0], 0);
    }
}
