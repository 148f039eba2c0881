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
    /// Keys of streamed entries evicted recently, oldest first, and the same with the
    /// number of loads started when each was evicted.
    ghost_order: VecDeque<K>,
    ghosts: HashMap<K, u64>,
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

    fn add_ghost(&mut self, key: K, loads: u64) {
        if self.ghosts.insert(key.clone(), loads).is_none() {
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
                ghosts: HashMap::new(),
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
        if inner.ghosts.remove(key).is_some() {
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

    /// Whether `key` was streamed and then evicted during the last `within` loads: a scan
    /// has just read it, so decoding it ahead again would be wasted (a prefetch left behind
    /// by a scan that went another way, or by another reader).
    pub fn streamed_lately(&self, key: &K, within: u64) -> bool {
        let inner = self.inner.lock();
        let now = self.loads.load(Ordering::Relaxed);
        inner.ghosts.get(key).is_some_and(|&at| now - at <= within)
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
        inner.add_ghost(key, self.loads.load(Ordering::Relaxed));
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
mod tests;
