//! How the FUSE workers take turns: one worker reads `/dev/fuse` while it is free; the
//! others wait here, inside the callback of the request they last answered, until that
//! worker blocks.
//!
//! Why: the kernel queues the threads that read `/dev/fuse` as exclusive waiters and wakes
//! the one that has waited longest, so with two idle workers a stream of requests (a scan's
//! 1 MiB reads) goes to them strictly in turn, and each request wakes the thread that was
//! not just running, on the other core and its cold caches (BENCHMARKS.md, "Session 16:
//! sequential reads": one worker scanned 4-7% faster on 2.5-7.5% less daemon CPU). One worker
//! alone would serialize the mount: a request that waits (a chunk another thread decodes, a
//! remote fetch, a passthrough fill, a commit) would hold up every other request.
//!
//! The rule, kept under one lock:
//! - A worker that finishes a request while another worker is free (outside every callback,
//!   so reading `/dev/fuse` or about to) does not go back to the device: it waits here.
//! - A worker about to block (the [`crate::blocking`] hint, called by the cache, the reader,
//!   the remote layer and the tree without knowing of FUSE) hands the device to a waiting
//!   worker when no other worker is free.
//! - Requests queue while the worker is busy (several readers at once): a waiting worker
//!   that wakes (every [`BOUND`] while the mount is busy) while no other worker is free asks
//!   the device whether requests are queued (`poll`, no wait) and returns to it if so; a
//!   worker does not wait after a request while more are queued. Asking at every request's
//!   start instead handed a scan's worker on at most 1 MiB reads (the kernel sends a read's
//!   two pieces at once) and lost the gain (BENCHMARKS.md, "Session 17").
//! - The bound for blocks nobody hints (a page fault of a mapped source on a cold disk, a
//!   slow system call): while every other worker is inside a request, a waiting worker
//!   returns to the device once no request has begun or ended for [`BOUND`]. While the mount
//!   is busy a waiting worker checks every [`BOUND`]; after [`LINGER`] without a request it
//!   sleeps until the next request begins.
//! - Session end: `fuser` joins every worker before it ends the session, and the worker
//!   reading the device leaves (ENODEV at unmount) without calling back. Each worker
//!   registers a thread-local record on its first request; its destructor runs when the
//!   thread leaves `fuser`'s loop and ends the turn-taking for good, so the waiting workers
//!   return to the device, see ENODEV and leave too. Only registered workers count as free,
//!   so a worker never waits for one that could leave without telling.
//!
//! Every callback that takes a [`Turn`] must have answered (or handed its answer to another
//! thread) before the turn ends: a worker may wait when its turn ends.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

/// How long every other worker may stay inside requests, none beginning or ending one, before
/// a waiting worker returns to the device (a block nobody hinted).
pub(crate) const BOUND: Duration = Duration::from_millis(5);

/// How long after the last request waiting workers keep checking every [`BOUND`].
pub(crate) const LINGER: Duration = Duration::from_millis(200);

/// Counts for tests and the unmount log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TurnStats {
    /// Times a worker waited here after a request.
    pub parks: u64,
    /// Times a worker about to block handed the device to a waiting one.
    pub handoffs: u64,
    /// Times a waiting worker returned after [`BOUND`] without a hint.
    pub fallbacks: u64,
    /// Times a worker handed the device on (or did not wait) because requests were queued.
    pub queued: u64,
}

#[derive(Debug)]
struct State {
    /// Workers that have taken a turn (and not left `fuser`'s loop).
    registered: usize,
    /// Workers inside a callback.
    busy: usize,
    /// Workers waiting here (not counting those handed a token).
    parked: usize,
    /// Hand-offs not yet taken by a waiting worker.
    tokens: usize,
    /// Waiting workers asleep until the next request begins.
    sleepers: usize,
    /// A worker left `fuser`'s loop: the session ends; nobody waits any more.
    over: bool,
    /// When a request last began or ended.
    last_event: Instant,
    stats: TurnStats,
}

impl State {
    /// Registered workers outside every callback and not waiting here.
    fn free(&self) -> usize {
        self.registered
            .saturating_sub(self.busy)
            .saturating_sub(self.parked)
    }
}

/// The turn-taking of one session's workers (see the module doc).
#[derive(Debug)]
pub(crate) struct Turns {
    state: Mutex<State>,
    wake: Condvar,
    /// The session's device (a duplicate), to ask whether requests are queued.
    device: OnceLock<OwnedFd>,
}

/// A worker's record: registered on its first turn, unregistered when its thread ends.
struct Worker(Arc<Turns>);

impl Drop for Worker {
    fn drop(&mut self) {
        let mut st = self.0.state.lock();
        st.registered = st.registered.saturating_sub(1);
        st.over = true;
        self.0.wake.notify_all();
    }
}

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// One request's turn: the worker is busy until it is dropped, and may then wait.
#[must_use = "the turn ends when dropped"]
pub(crate) struct Turn<'a>(&'a Turns);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl Turns {
    pub(crate) fn new() -> Arc<Turns> {
        Arc::new(Turns {
            state: Mutex::new(State {
                registered: 0,
                busy: 0,
                parked: 0,
                tokens: 0,
                sleepers: 0,
                over: false,
                last_event: Instant::now(),
                stats: TurnStats::default(),
            }),
            wake: Condvar::new(),
            device: OnceLock::new(),
        })
    }

    /// Watches `device` (a duplicate of the session's `/dev/fuse` descriptor; any clone of it
    /// shares its queue) for queued requests.
    pub(crate) fn watch(&self, device: OwnedFd) {
        let _ = self.device.set(device);
    }

    /// Whether requests are queued on the device that no worker has read yet.
    fn queued(&self) -> bool {
        let Some(fd) = self.device.get() else {
            return false;
        };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call; the descriptor stays open
        // while `self` lives; timeout 0: no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n == 1 && p.revents & libc::POLLIN != 0
    }

    /// The counts so far.
    pub(crate) fn stats(&self) -> TurnStats {
        self.state.lock().stats
    }

    /// Begins a request's turn on this worker thread (registering it on its first).
    pub(crate) fn begin(self: &Arc<Self>) -> Turn<'_> {
        let first = WORKER.with_borrow_mut(|w| match w {
            Some(_) => false,
            None => {
                *w = Some(Worker(self.clone()));
                true
            }
        });
        if first {
            let me = Arc::downgrade(self);
            crate::blocking::set_hook(Some(Arc::new(move || {
                if let Some(t) = me.upgrade() {
                    t.blocking();
                }
            })));
        }
        let mut st = self.state.lock();
        if first {
            st.registered += 1;
        }
        st.busy += 1;
        st.last_event = Instant::now();
        if st.sleepers > 0 {
            st.sleepers = 0;
            self.wake.notify_all();
        }
        Turn(self)
    }

    /// This worker is about to block: if no other worker is free, one waiting worker goes
    /// back to the device.
    fn blocking(&self) {
        let mut st = self.state.lock();
        if !st.over && st.parked > 0 && st.free() == 0 {
            st.parked -= 1;
            st.tokens += 1;
            st.stats.handoffs += 1;
            self.wake.notify_one();
        }
    }

    /// Ends a request's turn: waits here while another worker is free.
    fn end(&self) {
        let mut st = self.state.lock();
        st.busy = st.busy.saturating_sub(1);
        st.last_event = Instant::now();
        // `free` counts this worker too: it is outside the callback now.
        if st.over || st.free() <= 1 {
            return;
        }
        drop(st);
        if self.queued() {
            self.state.lock().stats.queued += 1;
            return;
        }
        let mut st = self.state.lock();
        if !st.over && st.free() > 1 {
            st.stats.parks += 1;
            self.wait(st);
        }
    }

    /// Waits until handed the device, the others are all stuck in requests for [`BOUND`], or
    /// the session ends.
    fn wait(&self, mut st: MutexGuard<'_, State>) {
        st.parked += 1;
        let mut queued = false;
        loop {
            if st.over {
                st.parked -= 1;
                return;
            }
            if st.tokens > 0 {
                st.tokens -= 1;
                return;
            }
            if std::mem::take(&mut queued) && st.free() == 0 && st.busy > 0 {
                st.parked -= 1;
                st.stats.queued += 1;
                return;
            }
            let now = Instant::now();
            if st.free() == 0 {
                if st.busy == 0 {
                    // Nobody left to read the device (cannot happen while the rule holds).
                    st.parked -= 1;
                    return;
                }
                // Requests queued and nobody to read them (several readers at once)?
                // Asked without the lock: the state is checked again above.
                if MutexGuard::unlocked(&mut st, || self.queued()) {
                    queued = true;
                    continue;
                }
                let due = st.last_event + BOUND;
                if now >= due {
                    st.parked -= 1;
                    st.stats.fallbacks += 1;
                    return;
                }
                self.wake.wait_until(&mut st, due);
            } else if now.duration_since(st.last_event) < LINGER {
                self.wake.wait_for(&mut st, BOUND);
            } else {
                st.sleepers += 1;
                self.wake.wait(&mut st);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A worker thread: takes a turn per message, runs it, ends it; leaves when the channel
    /// closes (its record then ends the turn-taking, as a worker leaving `fuser`'s loop).
    fn worker(
        turns: &Arc<Turns>,
        jobs: mpsc::Receiver<Box<dyn FnOnce() + Send>>,
        done: mpsc::Sender<()>,
    ) -> std::thread::JoinHandle<()> {
        let turns = turns.clone();
        std::thread::spawn(move || {
            while let Ok(job) = jobs.recv() {
                let _turn = turns.begin();
                job();
                let _ = done.send(());
            }
        })
    }

    fn wait_for(what: impl Fn() -> bool) {
        let start = Instant::now();
        while !what() {
            assert!(start.elapsed() < Duration::from_secs(30), "never happened");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_worker_waits_while_another_is_free_and_comes_back_when_it_blocks() {
        let turns = Turns::new();
        let (done_tx, done) = mpsc::channel();
        let (a_tx, a_rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let (b_tx, b_rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let a = worker(&turns, a_rx, done_tx.clone());
        let b = worker(&turns, b_rx, done_tx);
        // A takes a turn (B unregistered: A does not wait), then B (A free: B waits).
        a_tx.send(Box::new(|| ())).unwrap();
        done.recv().unwrap();
        b_tx.send(Box::new(|| ())).unwrap();
        done.recv().unwrap();
        wait_for(|| turns.state.lock().parked == 1);
        assert_eq!(turns.stats().parks, 1);
        // A blocks with the hint: B is handed the device at once.
        let (release_tx, release) = mpsc::channel::<()>();
        a_tx.send(Box::new(move || {
            crate::blocking::will_block();
            let _ = release.recv();
        }))
        .unwrap();
        wait_for(|| turns.stats().handoffs == 1 && turns.state.lock().parked == 0);
        release_tx.send(()).unwrap();
        done.recv().unwrap();
        // A ended its turn while B was free: A waits now.
        wait_for(|| turns.state.lock().parked == 1);
        drop((a_tx, b_tx));
        a.join().unwrap();
        b.join().unwrap();
        assert!(turns.state.lock().over);
    }

    #[test]
    fn a_block_nobody_hints_brings_a_waiting_worker_back_within_the_bound() {
        let turns = Turns::new();
        let (done_tx, done) = mpsc::channel();
        let (a_tx, a_rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let (b_tx, b_rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let a = worker(&turns, a_rx, done_tx.clone());
        let b = worker(&turns, b_rx, done_tx);
        a_tx.send(Box::new(|| ())).unwrap();
        done.recv().unwrap();
        b_tx.send(Box::new(|| ())).unwrap();
        done.recv().unwrap();
        wait_for(|| turns.state.lock().parked == 1);
        // A blocks without a hint; B comes back by itself.
        let (release_tx, release) = mpsc::channel::<()>();
        a_tx.send(Box::new(move || {
            let _ = release.recv();
        }))
        .unwrap();
        wait_for(|| turns.stats().fallbacks == 1 && turns.state.lock().parked == 0);
        assert_eq!(turns.stats().handoffs, 0);
        release_tx.send(()).unwrap();
        done.recv().unwrap();
        drop((a_tx, b_tx));
        a.join().unwrap();
        b.join().unwrap();
    }

    #[test]
    fn a_waiting_worker_leaves_when_the_reading_one_leaves() {
        let turns = Turns::new();
        let (done_tx, done) = mpsc::channel();
        let (a_tx, a_rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let (b_tx, b_rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let a = worker(&turns, a_rx, done_tx.clone());
        let b = worker(&turns, b_rx, done_tx);
        a_tx.send(Box::new(|| ())).unwrap();
        done.recv().unwrap();
        b_tx.send(Box::new(|| ())).unwrap();
        done.recv().unwrap();
        wait_for(|| turns.state.lock().parked == 1);
        // A (the free one) leaves; B, waiting inside its turn, must come out.
        drop(a_tx);
        a.join().unwrap();
        wait_for(|| turns.state.lock().parked == 0);
        drop(b_tx);
        b.join().unwrap();
    }
}
