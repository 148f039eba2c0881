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
//!
//! The grant and the freeing of the scratch it covered are one guard
//! ([`with_large_scratch`]): they happen when the decode returns and when it unwinds, so a
//! decode that panics (the daemon catches panics per request, and its thread goes on) keeps
//! neither its grant nor up to 1.5 GiB of scratch outside the budget.

use std::sync::{Condvar, Mutex, PoisonError};

use super::{Decoder, THREAD_SCRATCH_KEEP};

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

#[cfg(test)]
thread_local! {
    /// The largest grant this thread took since the last [`take_largest_grant_here`].
    static LARGEST_HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The largest grant the calling thread took (from any budget) since the last call: what a
/// test's decodes held under the budget, whatever other tests decode at the same time.
#[cfg(test)]
pub(crate) fn take_largest_grant_here() -> usize {
    LARGEST_HERE.with(|l| l.replace(0))
}

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
        #[cfg(test)]
        LARGEST_HERE.with(|l| l.set(l.get().max(bytes)));
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

/// Runs `f` on `dec`; when the decode needs more than the scratch a decoder keeps
/// ([`THREAD_SCRATCH_KEEP`]), it first takes a grant of `need` bytes from `budget`, and the
/// decoder's scratch past that size is freed before the grant goes back, whether `f` returns
/// or unwinds.
pub(super) fn with_large_scratch<R>(
    dec: &mut Decoder,
    budget: &Budget,
    need: usize,
    f: impl FnOnce(&mut Decoder) -> R,
) -> R {
    if need <= THREAD_SCRATCH_KEEP {
        return f(dec);
    }
    let held = Held {
        _grant: budget.acquire(need),
        dec,
    };
    f(&mut *held.dec)
}

/// A decoder holding large scratch under a grant. Dropped (on a return or an unwinding
/// panic), it frees the scratch; then its fields drop and the grant is given back.
struct Held<'d, 'b> {
    dec: &'d mut Decoder,
    _grant: Grant<'b>,
}

impl Drop for Held<'_, '_> {
    fn drop(&mut self) {
        self.dec.shrink_scratch(THREAD_SCRATCH_KEEP);
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

    /// A decode that panics inside its grant (here a closure standing for one: a decode has
    /// no panic to provoke) gives back both its scratch and its grant as it unwinds, so the
    /// next decode is granted the whole budget at once. Before, the scratch was freed after
    /// the decode returned: a panic skipped it, and the thread kept the scratch (up to
    /// 1.5 GiB) outside the budget until its next call.
    #[test]
    fn a_decode_that_panics_gives_back_its_scratch_and_its_grant() {
        let b = Budget::new(64 << 20);
        let mut d = Decoder::new();
        let need = 48 << 20;
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_large_scratch(&mut d, &b, need, |d| {
                super::super::scratch_slice(&mut d.scratch.block, need);
                super::super::scratch_slice(&mut d.scratch.filtered, need / 2);
                assert_eq!(b.held(), need);
                // A panic without the panic hook's message in the test output.
                std::panic::resume_unwind(Box::new("a decode bug"));
            })
        }));
        assert!(unwound.is_err());
        assert_eq!(b.held(), 0, "the grant is given back");
        let kept = [d.scratch.block.capacity(), d.scratch.filtered.capacity()];
        assert!(
            kept.iter().all(|&c| c <= THREAD_SCRATCH_KEEP),
            "the thread kept {kept:?} bytes of scratch"
        );
        // The next decode's grant, of the whole budget, does not wait.
        let all = b.acquire(64 << 20);
        assert_eq!(b.held(), 64 << 20);
        drop(all);
        // A decode within what a decoder keeps takes no grant and keeps its scratch.
        with_large_scratch(&mut d, &b, 1 << 20, |d| {
            super::super::scratch_slice(&mut d.scratch.block, 1 << 20);
            assert_eq!(b.held(), 0);
        });
        assert!(d.scratch.block.capacity() >= 1 << 20);
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
