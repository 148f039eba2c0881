//! Pages offered to the kernel's page cache (`FUSE_NOTIFY_STORE`) from threads of their own,
//! before the read that made them cheap is answered; and that answer, sent by the thread
//! that stores the last of those pages.
//!
//! Why threads: storing a page locks it in the kernel, and a page being read by a request
//! that a FUSE worker has not answered yet stays locked until that answer. A worker that
//! stored pages itself could wait on a request only it would serve (two workers storing the
//! pages the other one is serving would wait forever); a storing thread serves no request, so
//! whatever it waits for is answered. Workers hand pages over with a bounded queue per
//! thread, a fault's pages dealt to as many batches as there are threads ([`THREADS`]: each
//! store is a system call of about 4 us per page, and one thread storing a fault's 32 pages
//! left the other core idle while the reader waited), together with the fault's answer,
//! which goes only once the pages nearest the fault are stored, or after a short bound
//! ([`WAIT`]): they are then in the cache before the reader runs on and faults on the next
//! row (measured: all stored after the answer, the reader outran the thread and most pages
//! were asked for anyway). When the queue is full the pages are dropped (they are advice;
//! the kernel asks for them again when it needs them).
//!
//! Which pages the answer waits for: a fault's pages are dealt to the threads in turn (with
//! pages a row apart, one thread stores the odd rows and the other the even ones), and the
//! answer waits for the first [`EARLY`] of them, the rows nearest the fault; the rows
//! further below are stored after it, while the reader walks through the first ones
//! (measured: 1.03x waiting for all 64 rows of a window's fault; BENCHMARKS.md, "Session 19:
//! windows"). A reader that outruns those stores faults on a row still queued:
//! [`Pusher::reading`] tells so, and such a fault offers no pages (the rows below it are
//! queued already; asking for more would decode blocks below the window), and is answered
//! once what was queued before it is stored, as any fault.
//!
//! Who answers: the storing thread that finishes the last batch the answer waits for sends
//! it (a write to the FUSE device), so the worker goes back to its requests at once, and
//! nobody sleeps on the answer or is woken for it (a worker that waited was woken across
//! vCPUs once per fault: BENCHMARKS.md, "Session 15: windows"). An answer whose bound has
//! passed is sent by a storing thread between two stores, or by the deadline keeper
//! ([`keep_deadlines`]) when no thread gets there: one blocked in a store on a page whose
//! read the kernel holds back until answers are sent (its limit of pending reads), the
//! other idle. The worker answers itself, at once, when nothing is left to store or a thread
//! is storing one of the fault's own pages (below). A storing thread never waits for an
//! answer it holds: a store waits only for the page locks of faults whose own pages are not
//! queued before their answer (see below), and those are answered by their workers or by
//! batches stored before.
//!
//! Each page is queued once: a page already waiting in the queue is not handed over again,
//! and a page that a fault asks for is taken out of the queue (the fault's answer fills it;
//! storing it would wait for that answer) and not queued again until that answer is queued
//! (a store of it meanwhile would wait for the answer, which may wait for that store). An
//! answer waits until everything queued before it is stored, the pages of earlier faults
//! included (batches are numbered; a batch counts as stored once it and every batch before
//! it are): when the threads fall behind (a busy
//! machine), a reader that outran it faults on a page still queued, and answering that
//! fault at once would let it outrun the thread on every row of its window, each fault
//! queueing the same rows again (measured: 13 faults per 64-row window instead of 2). A fault
//! takes its pages out of the queue when its request arrives; if the thread is storing one of
//! them already (queued by another reader's fault, locked by the kernel for this one), that
//! store waits for this answer, so the worker answers without waiting for the threads.
//!
//! The parts: this file holds the [`Pusher`] the workers call (a fault announced, its pages
//! offered and dealt to the threads, inodes forgotten); [`state`] the bookkeeping they share
//! with the threads (which page is queued under which batch, which batches are stored, the
//! answers waiting); [`threads`] the storing threads and the deadline keeper, who send the
//! answers.

mod state;
mod threads;

use std::ops::Range;
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use std::io::IoSlice;

use fuser::{INodeNo, Notifier};

use crate::tree::Pieces;
use state::{Pending, Shared, State, page_offsets};
use threads::{keep_deadlines, store_batches};

/// Batches of pages waiting for each thread.
const QUEUE: usize = 64;

/// Threads storing pages: a fault's pages are split between them (measured on 2 cores: a
/// fault's 32 pages took 125 us on one thread, and the second core idled meanwhile).
const THREADS: usize = 2;

/// Pages of a fault stored before its answer: the rows nearest it (dealt to the threads in
/// turn, so both store them), while the rows further below are stored after the answer, as
/// the reader walks through the first ones (measured: 16, 1.03x storing all before the
/// answer; BENCHMARKS.md, "Session 19: windows").
const EARLY: usize = 16;

/// Longest an answer waits for the pages queued before it to be stored.
const WAIT: Duration = Duration::from_millis(2);

/// Longest [`Pusher::forget`] waits for a store of the forgotten inode in progress (a store
/// waits at most for a page the kernel holds locked for a read, answered within [`WAIT`] and
/// the deadline keeper's slack).
const FORGET_WAIT: Duration = Duration::from_secs(1);

/// One file's ranges of pages (`(offset, bytes)`: one page, or many in a row) and the batch's
/// ticket.
type Batch = (u64, Vec<(u64, Pieces)>, u64);

/// How a storing thread stores bytes at an offset of an inode: the windows of one range.
type Store = dyn Fn(u64, u64, &[IoSlice<'_>]) -> std::io::Result<()> + Send + Sync;

/// A fault's answer (the reply to its FUSE request), sent once every page queued before it is
/// stored: by the storing thread that finishes the last of those batches.
pub(crate) type Answer = Box<dyn FnOnce() + Send>;

/// The storing threads' queues; the threads end when this is dropped.
#[derive(Debug)]
pub(crate) struct Pusher {
    queues: Vec<SyncSender<Batch>>,
    shared: Arc<Shared>,
    /// Longest an answer waits ([`WAIT`]; other bounds in tests).
    wait: Duration,
    /// Threads storing pages (a fault's pages are dealt to them in turn).
    threads: usize,
}

impl Pusher {
    /// Starts the threads that store pages: with one `writev` of the windows a range is made
    /// of on `device` (the session's FUSE device, duplicated: [`super::notify`]) when given,
    /// else through `notifier`, which takes one slice (the windows copied into one buffer).
    pub(crate) fn start(
        notifier: Notifier,
        device: Option<std::os::fd::OwnedFd>,
    ) -> std::io::Result<Pusher> {
        match device {
            Some(fd) => Pusher::start_with(WAIT, THREADS, move |ino, offset, bytes| {
                super::notify::store(&fd, ino, offset, bytes)
            }),
            None => Pusher::start_with(WAIT, THREADS, move |ino, offset, bytes| {
                notifier.store(INodeNo(ino), offset, &super::notify::joined_bytes(bytes))
            }),
        }
    }

    /// Starts `threads` threads that store each page with `store(inode, offset, bytes)`;
    /// answers wait at most `wait` for them.
    fn start_with(
        wait: Duration,
        threads: usize,
        store: impl Fn(u64, u64, &[IoSlice<'_>]) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> std::io::Result<Pusher> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared::default());
        shared.lock().storing = vec![None; threads];
        let store: Arc<Store> = Arc::new(store);
        let mut queues = Vec::new();
        for n in 0..threads {
            let (queue, batches) = sync_channel::<Batch>(QUEUE);
            queues.push(queue);
            let (theirs, store) = (shared.clone(), store.clone());
            std::thread::Builder::new()
                .name("b2fs-push".into())
                .spawn(move || store_batches(n, &theirs, &batches, &*store))?;
        }
        let theirs = shared.clone();
        std::thread::Builder::new()
            .name("b2fs-deadlines".into())
            .spawn(move || keep_deadlines(&theirs))?;
        Ok(Pusher {
            queues,
            shared,
            wait,
            threads,
        })
    }

    /// Before a page fault of inode `ino` that reads the pages of `reading` is served: takes
    /// them out of the queue (the answer fills them; a store of one would wait for it), and
    /// keeps them from being queued until the fault's answer is ([`Pusher::offer`] or
    /// [`Pusher::failed`]). Returns whether the reader outran the stores: one of the pages
    /// was queued, or is being stored, as a row below an earlier fault stored after that
    /// fault's answer ([`EARLY`]); the rows below it are then queued already.
    pub(crate) fn reading(&self, ino: u64, reading: std::ops::Range<u64>) -> bool {
        let mut state = self.shared.lock();
        let outran = state.cancel(ino, reading.clone()) || state.storing_rows(ino, &reading);
        let since = state.forgets;
        state.faulting.push((ino, reading, since));
        outran
    }

    /// The count of [`Pusher::forget`] calls so far: what [`Pusher::ahead`] is given, taken
    /// before the pages it hands over are read from the tree.
    pub(crate) fn epoch(&self) -> u64 {
        self.shared.lock().forgets
    }

    /// Before the kernel is told to drop its cached pages of the inodes `inodes` (the source
    /// changed, or a commit rewrote them): drops every page of them still queued, keeps the
    /// pages of faults and walks that began before this call from being queued (they may
    /// hold the version before), and waits (at most [`FORGET_WAIT`]) for a store of them in
    /// progress, so that nothing read before the change reaches the kernel's cache after
    /// its invalidation (nor a store past a shrunken end grows the kernel's idea of the
    /// size again). One pass over the queue for all of them: a change can name thousands.
    pub(crate) fn forget(&self, inodes: impl IntoIterator<Item = u64>) {
        let inodes: std::collections::HashSet<u64> = inodes.into_iter().collect();
        if inodes.is_empty() {
            return;
        }
        let mut state = self.shared.lock();
        state.forgets += 1;
        let at = state.forgets;
        for &ino in &inodes {
            state.forgotten.insert(ino, at);
        }
        // Batches store only the pages still queued under their ticket.
        state.queued.retain(|(ino, _), _| !inodes.contains(ino));
        // Only stores of batches handed before now can hold pages read before the change
        // (later ones passed the epoch checks of `offer` and `ahead`).
        let handed = state.handed;
        let until = Instant::now() + FORGET_WAIT;
        while let Some((ino, ..)) = state
            .storing
            .iter()
            .flatten()
            .find(|(ino, _, ticket)| inodes.contains(ino) && *ticket <= handed)
        {
            if Instant::now() >= until {
                log::debug!("inode {ino}: a page store still runs as its pages are dropped");
                return;
            }
            drop(state);
            std::thread::sleep(Duration::from_micros(200));
            state = self.shared.lock();
        }
    }

    /// After a page fault announced by [`Pusher::reading`] failed (no pages are offered for
    /// it): forgets it.
    pub(crate) fn failed(&self, ino: u64, reading: std::ops::Range<u64>) {
        self.shared.lock().unfault(ino, &reading);
    }

    /// After a page fault of inode `ino` that reads the pages of `reading` (which the answer
    /// fills: they are taken out of the queue): hands the ranges of `pages` with a page not
    /// queued yet (and none read by a fault being served) to the threads, dealt in turn, and
    /// sends the fault's `answer` once its first [`EARLY`] pages and every page queued before
    /// it are stored, or after at most [`WAIT`]: the storing thread that finishes the last of
    /// those batches sends it, so the worker neither sleeps nor is woken for it. The rest of
    /// `pages` (the rows further below) are stored after the answer, while the reader walks
    /// through the rows before them, and `later` after those. The worker sends the answer
    /// itself, at once, when nothing is left to wait for, or when a thread is storing one of
    /// the fault's own pages (queued before the fault came: that store waits for this
    /// answer). A batch whose thread's queue is full is dropped (its pages are advice).
    pub(crate) fn offer(
        &self,
        ino: u64,
        reading: std::ops::Range<u64>,
        (mut pages, mut later): crate::tree::Offered,
        answer: Answer,
    ) {
        let mut state = self.shared.lock();
        state.cancel(ino, reading.clone());
        if state.unfault(ino, &reading) {
            // Read from the version before a change the kernel is told (or was told) of.
            pages.clear();
            later.clear();
        }
        for pages in [&mut pages, &mut later] {
            pages.retain(|(offset, bytes)| state.wanted(ino, *offset, bytes.len()));
        }
        let rows = pages.split_off(early_cut(&pages));
        let mut dealt = vec![0; self.threads];
        let mut gone = self.deal(&mut state, ino, pages, &mut dealt, false);
        // The answer waits for the batches so far, not for the rows below or `later`.
        let target = state.handed;
        gone |= self.deal(&mut state, ino, rows, &mut dealt, true);
        gone |= self.deal(&mut state, ino, later, &mut dealt, false);
        if gone || state.storing_any(ino, &reading) || state.done >= target {
            drop(state);
            return answer();
        }
        let deadline = Instant::now() + self.wait;
        state.answers.push_back(Pending {
            target,
            deadline,
            answer,
        });
        if state.keeper_idle {
            self.shared.deadlines.notify_one();
        }
    }

    /// Deals the ranges `pages` of inode `ino` to the threads, each to the one given the
    /// fewest pages so far (`dealt`), in order: with pages a row apart, one thread takes
    /// the odd rows and the other the even ones, so the rows nearest the fault are stored
    /// first. One batch per thread, marked as rows stored after their fault's answer when
    /// `rows`. Returns whether a thread is gone.
    fn deal(
        &self,
        state: &mut State,
        ino: u64,
        pages: Vec<(u64, Pieces)>,
        dealt: &mut [usize],
        rows: bool,
    ) -> bool {
        let mut batches: Vec<Vec<(u64, Pieces)>> = (0..self.threads).map(|_| Vec::new()).collect();
        for range in pages {
            let t = (0..self.threads).min_by_key(|&t| dealt[t]).unwrap_or(0);
            dealt[t] += range.1.len().div_ceil(PAGE as usize);
            batches[t].push(range);
        }
        let mut gone = false;
        for (n, batch) in batches.into_iter().enumerate() {
            if !batch.is_empty() {
                gone |= self.hand(state, n, ino, batch, rows);
            }
        }
        gone
    }

    /// Hands the ranges of `pages` of inode `ino` with a page wanted (not queued yet, not
    /// read by a fault in flight) to the threads, dealt as a fault's, with no answer waiting
    /// for them: pages a reader is expected to fault on soon (the rows ahead of a walk down a
    /// column, `Tree::walk_lead`). The answers of later faults wait for them as for any page
    /// queued before; a fault on one of them is a fault like any other (not marked as rows
    /// stored after an answer), so the walk it continues is still counted. Nothing is handed
    /// over if the inode was forgotten since [`Pusher::epoch`] was `since`.
    pub(crate) fn ahead(&self, ino: u64, mut pages: Vec<(u64, Pieces)>, since: u64) {
        let mut state = self.shared.lock();
        if state.forgotten_since(ino, since) {
            return;
        }
        pages.retain(|(offset, bytes)| state.wanted(ino, *offset, bytes.len()));
        let mut dealt = vec![0; self.threads];
        self.deal(&mut state, ino, pages, &mut dealt, false);
    }

    /// Hands batch number `n` of a fault's pages of inode `ino` to its thread (`n` modulo the
    /// threads), its pages queued under a new ticket (noted as rows stored after their
    /// fault's answer when `rows`); returns whether that thread is gone
    /// (nothing it was given will be stored). A full queue drops the batch (its pages are
    /// advice).
    fn hand(
        &self,
        state: &mut State,
        n: usize,
        ino: u64,
        batch: Vec<(u64, Pieces)>,
        rows: bool,
    ) -> bool {
        let ticket = state.handed + 1;
        // The batch's pages not queued yet are its own (the others stay an earlier one's).
        for (offset, bytes) in &batch {
            for at in page_offsets(*offset, bytes.len()) {
                state.queued.entry((ino, at)).or_insert(ticket);
            }
        }
        let e = match self.queues[n % self.threads].try_send((ino, batch, ticket)) {
            Ok(()) => {
                state.handed = ticket;
                if rows {
                    state.rows.insert(ticket);
                }
                return false;
            }
            Err(e) => e,
        };
        // Not stored: none of its own pages stays queued (and its ticket goes to the next
        // batch).
        let (full, (_, ranges, _)) = match e {
            TrySendError::Full(batch) => (true, batch),
            TrySendError::Disconnected(batch) => (false, batch),
        };
        for (offset, bytes) in ranges {
            for at in page_offsets(offset, bytes.len()) {
                if state.queued.get(&(ino, at)) == Some(&ticket) {
                    state.queued.remove(&(ino, at));
                }
            }
        }
        if full {
            log::trace!("page store queue full: pages of inode {ino} dropped");
        }
        !full
    }
}

/// A page fault announced to the pusher ([`Pusher::reading`]) whose pages are not offered
/// yet: dropped before [`Announced::offered`] (the read failed, or panicked), it tells the
/// pusher the fault failed ([`Pusher::failed`]), so its pages are not kept out of later
/// offers for good.
pub(crate) struct Announced<'a> {
    pusher: &'a Pusher,
    ino: u64,
    reading: Range<u64>,
}

impl<'a> Announced<'a> {
    /// The fault of inode `ino` reading `reading`, just announced to `pusher`.
    pub(crate) fn new(pusher: &'a Pusher, ino: u64, reading: Range<u64>) -> Self {
        Announced {
            pusher,
            ino,
            reading,
        }
    }

    /// Its pages are being offered ([`Pusher::offer`] forgets the fault).
    pub(crate) fn offered(self) {
        std::mem::forget(self);
    }
}

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        self.pusher.failed(self.ino, self.reading.clone());
    }
}

/// How many of `pages` (ranges in the order they are needed) go before the answer: those
/// that start within the first [`EARLY`] pages.
fn early_cut(pages: &[(u64, Pieces)]) -> usize {
    let mut n = 0;
    pages
        .iter()
        .take_while(|(_, bytes)| {
            let before = n < EARLY;
            n += bytes.len().div_ceil(PAGE as usize);
            before
        })
        .count()
}

/// The kernel's page ([`crate::tree::PAGE`]), as a file offset.
const PAGE: u64 = crate::tree::PAGE as u64;

#[cfg(test)]
mod tests;
