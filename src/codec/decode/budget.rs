//! The bound on the large scratch buffers of all decoders together.
//!
//! A range decode that covers a block only in part decodes the whole block into a scratch
//! buffer (and a filtered block beside it, and block 0 for DELTA): each byte of an LZ4,
//! BloscLZ, Zlib or Zstd stream is made from the bytes before it, and shuffle and bitshuffle
//! spread each element over every stream of the block, so no byte of a block can be had
//! without decoding its streams up to it, and the filters need all of them. The scratch is
//! therefore sized by the chunk's header (its block size, up to 512 MiB), not by the range,
//! and a hostile chunk of a few bytes (run streams) can ask for that much; a decoder frees
//! what it holds past 16 MiB after each call (`shrink_scratch`). What is bounded here is the
//! sum: a decode whose scratch would pass that size first takes a grant of it from one
//! process-wide [`Budget`] and waits, in the order the decodes asked, while other decodes
//! hold the rest, so that N decoding
//! threads (FUSE workers, decode and prefetch threads) hold at most [`LARGE_SCRATCH`] of
//! large scratch together, not N times 1.5 GiB. A decode asking for more than the whole
//! budget is granted the whole budget (it runs alone).

use std::sync::{Condvar, Mutex, PoisonError};

/// The large scratch (bytes past a decoder's kept 16 MiB) all decoders may hold at once.
pub const LARGE_SCRATCH: usize = 1 << 30;

/// Bytes granted and not yet given back, the order of waiters, and the condition a release
/// or a grant signals.
#[derive(Debug)]
pub(crate) struct Budget {
    state: Mutex<State>,
    freed: Condvar,
    cap: usize,
}

/// What a [`Budget`] holds: bytes granted, and tickets in the order the decodes asked.
#[derive(Debug)]
struct State {
    held: usize,
    /// The ticket the next decode to ask takes.
    next: u64,
    /// The ticket whose turn it is: grants go in the order they were asked for, so a large
    /// decode (up to the whole budget) is never starved by smaller ones that keep part of it
    /// held.
    serving: u64,
}

/// The process's budget.
pub(super) static GLOBAL: Budget = Budget::new(LARGE_SCRATCH);

/// A share of a [`Budget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Grant<'b> {
    budget: &'b Budget,
    bytes: usize,
}

impl Budget {
    /// A budget of `cap` bytes.
    pub(crate) const fn new(cap: usize) -> Budget {
        Budget {
            state: Mutex::new(State {
                held: 0,
                next: 0,
                serving: 0,
            }),
            freed: Condvar::new(),
            cap,
        }
    }

    /// Waits for its turn (first asked, first served) and until `bytes` (at most the whole
    /// budget) fit beside what is held, and takes them. A grant is taken by a decoder that
    /// holds none, so waiting cannot deadlock: each holder finishes its decode and gives its
    /// grant back.
    pub(crate) fn acquire(&self, bytes: usize) -> Grant<'_> {
        let bytes = bytes.min(self.cap);
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let ticket = st.next;
        st.next += 1;
        while st.serving != ticket || st.held + bytes > self.cap {
            st = self.freed.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        st.held += bytes;
        st.serving += 1;
        drop(st);
        // The next ticket may fit beside this grant.
        self.freed.notify_all();
        Grant {
            budget: self,
            bytes,
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .held
    }
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        let mut st = self
            .budget
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        st.held -= self.bytes;
        drop(st);
        self.budget.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_add_up_and_go_back_and_one_larger_than_the_budget_gets_all_of_it() {
        let b = Budget::new(100);
        let g1 = b.acquire(30);
        let g2 = b.acquire(70);
        assert_eq!(b.held(), 100);
        drop(g1);
        drop(g2);
        assert_eq!(b.held(), 0);
        let all = b.acquire(1 << 40);
        assert_eq!(b.held(), 100);
        drop(all);
        assert_eq!(b.held(), 0);
    }

    /// A large grant waiting for the whole budget is served before smaller grants asked
    /// after it, even while smaller ones would fit beside what is held.
    #[test]
    fn grants_are_served_in_the_order_asked() {
        let b = Budget::new(100);
        let small = b.acquire(30);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let big_tx = tx.clone();
            let b = &b;
            s.spawn(move || {
                let g = b.acquire(1000);
                big_tx.send(("big", b.held())).unwrap();
                drop(g);
            });
            // Let the large one take its ticket first.
            while b.state.lock().unwrap().next < 2 {
                std::thread::yield_now();
            }
            let later_tx = tx.clone();
            s.spawn(move || {
                let g = b.acquire(30);
                later_tx.send(("later", b.held())).unwrap();
                drop(g);
            });
            while b.state.lock().unwrap().next < 3 {
                std::thread::yield_now();
            }
            // 30 + 30 would fit in 100, but the later one waits behind the large one.
            assert!(
                rx.recv_timeout(std::time::Duration::from_millis(50))
                    .is_err()
            );
            drop(small);
            assert_eq!(rx.recv().unwrap(), ("big", 100));
            assert_eq!(rx.recv().unwrap().0, "later");
        });
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn a_grant_that_does_not_fit_waits_for_a_release() {
        let b = Budget::new(100);
        let first = b.acquire(60);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let g = b.acquire(60);
                tx.send(b.held()).unwrap();
                drop(g);
            });
            // It cannot have its grant while the first is held (a slow machine only makes
            // this wait pass more surely).
            assert!(
                rx.recv_timeout(std::time::Duration::from_millis(50))
                    .is_err()
            );
            drop(first);
            assert_eq!(rx.recv().unwrap(), 60);
        });
        assert_eq!(b.held(), 0);
    }
}
