//! Reused buffers for fetched bytes. A GET's body is copied from the network straight into
//! buffers taken from this pool (one per cached extent, so a merged GET never allocates one
//! large body), and a buffer goes back to the pool when the last [`Bytes`] viewing it is
//! dropped (evicted from the cache, read done). The pool keeps at most its byte cap of idle
//! buffers and unmaps the rest (each buffer is an anonymous mapping of its own).
//!
//! Why: a stream through the cache allocates and frees one buffer per chunk on the I/O
//! runtime's threads while the FUSE threads allocate their own; with glibc malloc that
//! fragments the per-thread arenas (BENCHMARKS.md, "Memory while streaming 4 GiB over
//! HTTP"), so the daemon's resident memory grew far past the cache budget. Reused buffers
//! outside malloc keep it at what the cache and the reads in flight hold.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use memmap2::MmapMut;

/// Buffer capacities are rounded up to this, so extents of nearby sizes share buffers.
const GRAIN: usize = 64 << 10;

/// Idle buffers, at most `cap` bytes of them, and the count of the bytes out in use; a
/// buffer coming back is kept idle only while all the pool accounts for stays within `limit`.
/// Each buffer is an anonymous mapping of its own, outside malloc's arenas: freed, it goes
/// back to the system at once.
#[derive(Debug)]
pub(crate) struct BufPool {
    cap: usize,
    limit: usize,
    idle: Mutex<Idle>,
}

#[derive(Debug, Default)]
struct Idle {
    bufs: Vec<MmapMut>,
    /// Capacity of the idle buffers.
    bytes: usize,
    /// Capacity of the buffers taken and not yet back (cached, being filled, being read).
    live: usize,
}

/// Where a [`PoolBuf`]'s bytes live.
#[derive(Debug)]
enum Store {
    /// Of no pool: a growable vector.
    Heap(Vec<u8>),
    /// A pool's mapping; the bytes written are its first `len`.
    Mapped(MmapMut, usize),
}

/// A buffer taken from a pool (or allocated when the pool had none): empty, with room for
/// the length asked. Dropped, it goes back to the pool.
#[derive(Debug)]
pub(crate) struct PoolBuf {
    store: Store,
    pool: Option<Arc<BufPool>>,
}

impl BufPool {
    /// A pool keeping at most `cap` bytes of idle buffers, and none once all its buffers,
    /// idle and in use, reach `limit` bytes.
    pub(crate) fn new(cap: usize, limit: usize) -> Arc<BufPool> {
        Arc::new(BufPool {
            cap,
            limit,
            idle: Mutex::new(Idle::default()),
        })
    }

    /// An empty buffer with room for `len` bytes: the smallest idle one that fits without
    /// wasting more than half of it, else a new one (its capacity rounded up to [`GRAIN`]).
    /// A buffer of no pool when no mapping can be made (or `len` is 0).
    pub(crate) fn take(self: &Arc<Self>, len: usize) -> PoolBuf {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let best = idle
            .bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.len() >= len && b.len() / 2 <= len.max(GRAIN))
            .min_by_key(|(_, b)| b.len())
            .map(|(i, _)| i);
        let map = match best {
            Some(i) => {
                let b = idle.bufs.swap_remove(i);
                idle.bytes -= b.len();
                b
            }
            None => match (len > 0)
                .then(|| MmapMut::map_anon(len.div_ceil(GRAIN) * GRAIN).ok())
                .flatten()
            {
                Some(m) => m,
                None => return PoolBuf::unpooled(len),
            },
        };
        idle.live += map.len();
        PoolBuf {
            store: Store::Mapped(map, 0),
            pool: Some(Arc::clone(self)),
        }
    }

    /// Takes back `map` if it fits under the cap and the limit (of all the bytes the pool
    /// accounts for, idle and in use); otherwise unmaps it.
    fn give(&self, map: MmapMut) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.live = idle.live.saturating_sub(map.len());
        let after = idle.bytes + map.len();
        if after <= self.cap && after + idle.live <= self.limit {
            idle.bytes = after;
            idle.bufs.push(map);
        }
    }

    /// Bytes of every buffer of the pool: idle, and out in use (cached, being filled by a
    /// GET, being copied out by a reader).
    pub(crate) fn held(&self) -> usize {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.bytes + idle.live
    }

    /// Bytes held by idle buffers.
    #[cfg(test)]
    pub(crate) fn idle_bytes(&self) -> usize {
        self.idle.lock().unwrap().bytes
    }
}

impl PoolBuf {
    /// A buffer of no pool, with room for `len` bytes (freed when dropped).
    pub(crate) fn unpooled(len: usize) -> PoolBuf {
        PoolBuf {
            store: Store::Heap(Vec::with_capacity(len)),
            pool: None,
        }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.as_ref().len()
    }

    /// Room left in a pool's buffer (unbounded for one of no pool).
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        match &self.store {
            Store::Heap(_) => usize::MAX,
            Store::Mapped(m, len) => m.len() - len,
        }
    }

    /// Appends `b` (at most the room left; more is an error of the caller, who
    /// asked for the length: the excess is dropped).
    pub(crate) fn push(&mut self, b: &[u8]) {
        match &mut self.store {
            Store::Heap(v) => v.extend_from_slice(b),
            Store::Mapped(m, len) => {
                let n = b.len().min(m.len() - *len);
                m[*len..*len + n].copy_from_slice(&b[..n]);
                *len += n;
            }
        }
    }

    /// Appends exactly `n` bytes read from `r` (at most the room left).
    ///
    /// # Errors
    /// The reader's, or `UnexpectedEof` when it ends first.
    pub(crate) fn fill_from(
        &mut self,
        r: &mut impl std::io::Read,
        n: usize,
    ) -> std::io::Result<()> {
        match &mut self.store {
            Store::Heap(v) => {
                let at = v.len();
                v.resize(at + n, 0);
                r.read_exact(&mut v[at..])
            }
            Store::Mapped(m, len) => {
                let n = n.min(m.len() - *len);
                r.read_exact(&mut m[*len..*len + n])?;
                *len += n;
                Ok(())
            }
        }
    }

    /// The bytes written, shared; the buffer returns to its pool when the last view drops.
    pub(crate) fn freeze(mut self) -> Bytes {
        match &mut self.store {
            Store::Heap(v) => Bytes::from(std::mem::take(v)),
            Store::Mapped(..) => Bytes::from_owner(self),
        }
    }
}

impl AsRef<[u8]> for PoolBuf {
    fn as_ref(&self) -> &[u8] {
        match &self.store {
            Store::Heap(v) => v,
            Store::Mapped(m, len) => &m[..*len],
        }
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        let store = std::mem::replace(&mut self.store, Store::Heap(Vec::new()));
        if let (Some(pool), Store::Mapped(m, _)) = (self.pool.take(), store) {
            pool.give(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_when_the_last_view_drops_and_are_reused_within_the_cap() {
        let pool = BufPool::new(3 * GRAIN, usize::MAX);
        let mut a = pool.take(1000);
        a.push(&[7; 1000]);
        let ptr = a.as_ref().as_ptr();
        let bytes = a.freeze();
        let view = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(pool.idle_bytes(), 0, "a view still holds it");
        assert_eq!(&view[..], &[7; 10]);
        drop(view);
        assert_eq!(pool.idle_bytes(), GRAIN, "back in the pool");
        let b = pool.take(GRAIN);
        assert_eq!(b.as_ref().as_ptr(), ptr, "the same buffer, reused");
        assert_eq!((b.len(), b.room()), (0, GRAIN));
        // Too small for a larger request; too large (more than twice) for a tiny one.
        drop(b);
        let big = pool.take(GRAIN + 1);
        assert_ne!(big.as_ref().as_ptr(), ptr);
        assert_eq!(big.room(), 2 * GRAIN);
        drop(big);
        assert_eq!(pool.idle_bytes(), 3 * GRAIN);
        // Over the cap: freed, not kept.
        let extra = pool.take(3 * GRAIN);
        let again = pool.take(3 * GRAIN);
        drop(extra);
        drop(again);
        assert!(pool.idle_bytes() <= 3 * GRAIN);
        assert_eq!(pool.held(), pool.idle_bytes(), "nothing out");
    }

    #[test]
    fn buffers_in_use_count_against_the_limit() {
        let pool = BufPool::new(usize::MAX, 4 * GRAIN);
        let a = pool.take(2 * GRAIN);
        let b = pool.take(2 * GRAIN);
        let c = pool.take(GRAIN);
        assert_eq!(
            pool.held(),
            5 * GRAIN,
            "in use: counted, even over the limit"
        );
        drop(c);
        assert_eq!(
            pool.held(),
            4 * GRAIN,
            "over the limit when it came back: freed"
        );
        drop(a);
        assert_eq!((pool.held(), pool.idle_bytes()), (4 * GRAIN, 2 * GRAIN));
        drop(b);
        assert_eq!(pool.held(), 4 * GRAIN);
    }
}
