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
//! process-wide [`Budget`] and waits while other decodes hold the rest, so that N decoding
//! threads (FUSE workers, decode and prefetch threads) hold at most [`LARGE_SCRATCH`] of
//! large scratch together, not N times 1.5 GiB. A decode asking for more than the whole
//! budget is granted the whole budget (it runs alone).

use std::sync::{Condvar, Mutex, PoisonError};

/// The large scratch (bytes past a decoder's kept 16 MiB) all decoders may hold at once.
pub const LARGE_SCRATCH: usize = 1 << 30;

/// Bytes granted and not yet given back, with the condition their release signals.
#[derive(Debug)]
pub(crate) struct Budget {
    held: Mutex<usize>,
    freed: Condvar,
    cap: usize,
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
            held: Mutex::new(0),
            freed: Condvar::new(),
            cap,
        }
    }

    /// Waits until `bytes` (at most the whole budget) fit beside what is held, and takes
    /// them. A grant is taken by a decoder that holds none, so waiting cannot deadlock: each
    /// holder finishes its decode and gives its grant back.
    pub(crate) fn acquire(&self, bytes: usize) -> Grant<'_> {
        let bytes = bytes.min(self.cap);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held + bytes > self.cap {
            held = self
                .freed
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *held += bytes;
        Grant {
            budget: self,
            bytes,
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        *self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        let mut held = self
            .budget
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *held -= self.bytes;
        drop(held);
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
