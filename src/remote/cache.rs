//! The cache of fetched compressed bytes: whole chunk extents keyed by their start offset in
//! the object (the object's version is pinned at open, so a key never names two contents),
//! least recently used first out, within a byte budget; an extent larger than the budget is
//! never kept. Fetches fill buffers of the cache's [`BufPool`], and the budget bounds all of
//! them: the extents kept, the idle buffers, and those of GETs still arriving (extents are
//! evicted to make room for a prefetch window in flight). Single flight: a fetch under way is an [`Flight`] that any other reader of the
//! same extent waits on, with a deadline, instead of fetching it again.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lru::LruCache;

use super::client::{RemoteError, RemoteErrorKind};
use super::pool::BufPool;

/// The most idle buffer bytes kept for reuse (also at most an eighth of the budget).
const POOL_MAX: usize = 16 << 20;

/// A fetch under way; completed exactly once.
#[derive(Debug, Default)]
pub(crate) struct Flight {
    done: Mutex<Option<Result<Bytes, RemoteError>>>,
    cv: Condvar,
}

impl Flight {
    /// Sets the result (the first one wins) and wakes every waiter.
    pub(crate) fn complete(&self, r: Result<Bytes, RemoteError>) {
        let mut d = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if d.is_none() {
            *d = Some(r);
        }
        self.cv.notify_all();
    }

    /// Waits for the result until `deadline`.
    pub(crate) fn wait(&self, deadline: Duration) -> Result<Bytes, RemoteError> {
        let until = Instant::now() + deadline;
        let mut d = self.done.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(r) = d.as_ref() {
                return r.clone();
            }
            let now = Instant::now();
            if now >= until {
                return Err(RemoteError::new(
                    RemoteErrorKind::Network,
                    format!("no answer within {:.1} s", deadline.as_secs_f64()),
                ));
            }
            d = self
                .cv
                .wait_timeout(d, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// What [`ExtentCache::begin`] found.
pub(crate) enum Begin {
    /// The bytes are cached.
    Hit(Bytes),
    /// Another fetch is under way: wait on it.
    Wait(Arc<Flight>),
    /// Nobody fetches it: the caller must, then call [`ExtentCache::finish`].
    Lead(Arc<Flight>),
}

#[derive(Debug)]
struct State {
    lru: LruCache<u64, Bytes>,
    used: usize,
    flights: HashMap<u64, Arc<Flight>>,
}

/// The byte-budgeted cache of fetched extents.
#[derive(Debug)]
pub(crate) struct ExtentCache {
    budget: usize,
    pool: Arc<BufPool>,
    state: Mutex<State>,
}

impl ExtentCache {
    /// An empty cache holding at most `budget` bytes.
    pub(crate) fn new(budget: usize) -> ExtentCache {
        ExtentCache {
            budget,
            pool: BufPool::new((budget / 8).min(POOL_MAX), budget),
            state: Mutex::new(State {
                lru: LruCache::unbounded(),
                used: 0,
                flights: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pool fetches fill their buffers from; evicted extents' buffers go back to it.
    pub(crate) fn pool(&self) -> Arc<BufPool> {
        Arc::clone(&self.pool)
    }

    /// The budget in bytes.
    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes held now.
    pub(crate) fn used(&self) -> usize {
        self.lock().used
    }

    /// Whether `key` is cached or being fetched (no recency change).
    pub(crate) fn present(&self, key: u64) -> bool {
        let s = self.lock();
        s.lru.contains(&key) || s.flights.contains_key(&key)
    }

    /// Looks `key` up; registers a fetch of it when it is neither cached nor under way.
    pub(crate) fn begin(&self, key: u64) -> Begin {
        let mut s = self.lock();
        if let Some(b) = s.lru.get(&key) {
            return Begin::Hit(b.clone());
        }
        if let Some(f) = s.flights.get(&key) {
            return Begin::Wait(Arc::clone(f));
        }
        let f = Arc::new(Flight::default());
        s.flights.insert(key, Arc::clone(&f));
        Begin::Lead(f)
    }

    /// The extents cached now, least recently used first (no recency change).
    pub(crate) fn extents(&self) -> Vec<(u64, Bytes)> {
        let s = self.lock();
        s.lru.iter().rev().map(|(k, b)| (*k, b.clone())).collect()
    }

    /// Keeps `bytes` as `key`'s extent, as a fetch of it would, unless it is cached or being
    /// fetched already.
    pub(crate) fn seed(&self, key: u64, bytes: Bytes) {
        if let Begin::Lead(f) = self.begin(key) {
            self.finish(key, &f, Ok(bytes));
        }
    }

    /// Ends the fetch of `key` that [`ExtentCache::begin`] handed out: keeps the bytes (when
    /// they fit the budget, evicting the least recently used) and wakes its waiters.
    pub(crate) fn finish(&self, key: u64, flight: &Flight, r: Result<Bytes, RemoteError>) {
        {
            let mut s = self.lock();
            s.flights.remove(&key);
            if let Ok(b) = &r
                && b.len() <= self.budget
            {
                if let Some(old) = s.lru.put(key, b.clone()) {
                    s.used -= old.len();
                }
                s.used += b.len();
                // Within the budget: the extents kept, and every buffer of the pool
                // (idle ones, and those of GETs still arriving); the one just kept stays.
                while s.lru.len() > 1 && (s.used > self.budget || self.pool.held() > self.budget) {
                    match s.lru.pop_lru() {
                        Some((_, old)) => s.used -= old.len(),
                        None => break,
                    }
                }
            }
        }
        flight.complete(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(c: &ExtentCache, key: u64) -> Arc<Flight> {
        match c.begin(key) {
            Begin::Lead(f) => f,
            _ => panic!("{key} should be fetched"),
        }
    }

    #[test]
    fn extents_come_least_recent_first_and_seeds_keep_what_is_there() {
        let c = ExtentCache::new(100);
        for k in 0..3u64 {
            let f = lead(&c, k);
            c.finish(k, &f, Ok(Bytes::from(vec![k as u8; 10])));
        }
        assert!(matches!(c.begin(0), Begin::Hit(_)), "0 used last");
        let keys: Vec<u64> = c.extents().iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, [1, 2, 0]);
        let d = ExtentCache::new(100);
        let f = lead(&d, 7);
        d.seed(7, Bytes::from_static(b"seeded"));
        d.seed(1, Bytes::from_static(b"one"));
        d.seed(1, Bytes::from_static(b"again"));
        assert!(matches!(d.begin(1), Begin::Hit(b) if &b[..] == b"one"));
        assert!(
            matches!(d.begin(7), Begin::Wait(_)),
            "a fetch under way is not replaced"
        );
        d.finish(7, &f, Ok(Bytes::from_static(b"fetched")));
        assert!(matches!(d.begin(7), Begin::Hit(b) if &b[..] == b"fetched"));
        assert_eq!(d.used(), 3 + 7);
    }

    #[test]
    fn budget_evicts_least_recently_used_and_never_keeps_oversized() {
        let c = ExtentCache::new(100);
        for k in 0..3u64 {
            let f = lead(&c, k);
            c.finish(k, &f, Ok(Bytes::from(vec![k as u8; 40])));
        }
        assert_eq!(
            c.used(),
            80,
            "the oldest of three 40-byte extents is evicted"
        );
        assert!(!c.present(0) && c.present(1) && c.present(2));
        assert!(matches!(c.begin(1), Begin::Hit(b) if b[0] == 1));
        let f = lead(&c, 9);
        c.finish(9, &f, Ok(Bytes::from(vec![0; 101])));
        assert!(!c.present(9), "larger than the budget: not kept");
        assert_eq!(f.wait(Duration::from_secs(1)).unwrap().len(), 101);
    }

    #[test]
    fn single_flight_waiters_share_one_fetch_and_time_out_without_it() {
        let c = Arc::new(ExtentCache::new(1 << 20));
        let f = lead(&c, 7);
        let Begin::Wait(w) = c.begin(7) else {
            panic!("second reader must wait")
        };
        let t0 = Instant::now();
        assert_eq!(
            w.wait(Duration::from_millis(50)).unwrap_err().kind,
            RemoteErrorKind::Network
        );
        assert!(t0.elapsed() < Duration::from_secs(2));
        let c2 = Arc::clone(&c);
        let h = std::thread::spawn(move || {
            c2.finish(7, &f, Ok(Bytes::from_static(b"abc")));
        });
        assert_eq!(&w.wait(Duration::from_secs(5)).unwrap()[..], b"abc");
        h.join().unwrap();
        // A failed fetch is not cached: the next reader fetches again.
        let f = lead(&c, 8);
        c.finish(8, &f, Err(RemoteError::new(RemoteErrorKind::Network, "x")));
        assert!(matches!(c.begin(8), Begin::Lead(_)));
    }
}
