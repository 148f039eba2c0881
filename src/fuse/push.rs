//! Pages offered to the kernel's page cache (`FUSE_NOTIFY_STORE`) from threads of their own,
//! before the read that made them cheap is answered; and that answer, sent by the thread
//! that stores the last of those pages.
//!
//! Why threads: storing a page locks it in the kernel, and a page being read by a request
//! that a FUSE worker has not answered yet stays locked until that answer. A worker that
//! stored pages itself could wait on a request only it would serve (two workers storing the
//! pages the other one is serving would wait forever); a storing thread serves no request, so
//! whatever it waits for is answered. Workers hand pages over with a bounded queue per
//! thread, a fault's pages split in as many batches as there are threads ([`THREADS`]: each
//! store is a system call of about 4 us per page, and one thread storing a fault's 32 pages
//! left the other core idle while the reader waited), together with the fault's answer,
//! which goes only once the pages are stored, or after a short bound ([`WAIT`]): the pages
//! are then in the cache before the reader runs on and faults on the next row (measured:
//! stored after the answer, the reader outran the thread and most pages were asked for
//! anyway). When the queue is full the pages are dropped (they are advice; the kernel asks
//! for them again when it needs them).
//!
//! Who answers: the storing thread that finishes the last batch the answer waits for sends
//! it (a write to the FUSE device), so the worker goes back to its requests at once, and
//! nobody sleeps on the answer or is woken for it (a worker that waited was woken across
//! vCPUs once per fault: BENCHMARKS.md, "Session 15: windows"). An answer whose bound has
//! passed is sent by a storing thread between two stores. The worker answers itself, at
//! once, when nothing is left to store or a thread is storing one of the fault's own pages
//! (below). A storing thread never waits for an answer it holds: a store waits only for the
//! page locks of faults whose own pages are not queued before their answer (see below), and
//! those are answered by their workers or by batches stored before.
//!
//! Each page is queued once: a page already waiting in the queue is not handed over again,
//! and a page that a fault asks for is taken out of the queue (the fault's answer fills it;
//! storing it would wait for that answer). An answer waits until everything queued before it
//! is stored, the pages of earlier faults included (batches are numbered; a batch counts as
//! stored once it and every batch before it are): when the threads fall behind (a busy
//! machine), a reader that outran it faults on a page still queued, and answering that
//! fault at once would let it outrun the thread on every row of its window, each fault
//! queueing the same rows again (measured: 13 faults per 64-row window instead of 2). A fault
//! takes its pages out of the queue when its request arrives; if the thread is storing one of
//! them already (queued by another reader's fault, locked by the kernel for this one), that
//! store waits for this answer, so the worker answers without waiting for the threads.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use std::io::IoSlice;

use fuser::{INodeNo, Notifier};

use crate::tree::Pieces;

/// Batches of pages waiting for each thread.
const QUEUE: usize = 64;

/// Threads storing pages: a fault's pages are split between them (measured on 2 cores: a
/// fault's 32 pages took 125 us on one thread, and the second core idled meanwhile).
const THREADS: usize = 2;

/// Longest an answer waits for the pages queued before it to be stored.
const WAIT: Duration = Duration::from_millis(2);

/// One file's ranges of pages (`(offset, bytes)`: one page, or many in a row) and the batch's
/// ticket.
type Batch = (u64, Vec<(u64, Pieces)>, u64);

/// How a storing thread stores bytes at an offset of an inode: the windows of one range.
type Store = dyn Fn(u64, u64, &[IoSlice<'_>]) -> std::io::Result<()> + Send + Sync;

/// A fault's answer (the reply to its FUSE request), sent once every page queued before it is
/// stored: by the storing thread that finishes the last of those batches.
pub(crate) type Answer = Box<dyn FnOnce() + Send>;

/// An answer waiting for the batches up to `target`, or for `deadline`.
struct Pending {
    target: u64,
    deadline: Instant,
    answer: Answer,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("target", &self.target)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// What the workers and the threads share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Pages `(inode, offset)` queued and not stored yet, page by page (a range offered
    /// covers many), with the ticket of the batch that stores them: a batch stores only the
    /// pages queued by it, so a page taken out by a fault and queued again after the fault's
    /// answer is stored by the later batch, never by one that answer waits for.
    queued: HashMap<(u64, u64), u64>,
    /// Tickets of the latest batch handed over, and of the latest one stored with every
    /// batch before it.
    handed: u64,
    done: u64,
    /// Tickets stored while an earlier one was still being stored (by another thread).
    finished: BTreeSet<u64>,
    /// The pages `(inode, range)` each thread is storing now.
    storing: Vec<Option<(u64, Range<u64>)>>,
    /// Answers of faults waiting for their batches, oldest (lowest target) first.
    answers: std::collections::VecDeque<Pending>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The offsets of the pages of `len` bytes at `offset` (page-aligned; the last may be short).
fn page_offsets(offset: u64, len: usize) -> impl Iterator<Item = u64> {
    (0..len.div_ceil(PAGE as usize) as u64).map(move |k| offset + k * PAGE)
}

impl State {
    /// Records batch `ticket` as stored and moves `done` past every ticket stored in a row.
    fn finish(&mut self, ticket: u64) {
        self.finished.insert(ticket);
        while self.finished.remove(&(self.done + 1)) {
            self.done += 1;
        }
    }

    /// Takes the answers whose batches are all stored, or whose wait is over at `now`.
    fn ready_answers(&mut self, now: Instant) -> Vec<Answer> {
        let mut ready = Vec::new();
        while let Some(p) = self.answers.front() {
            if p.target > self.done && p.deadline > now {
                break;
            }
            ready.extend(self.answers.pop_front().map(|p| p.answer));
        }
        ready
    }

    /// Whether a thread is storing a page of `reading` of inode `ino`.
    fn storing_any(&self, ino: u64, reading: &Range<u64>) -> bool {
        self.storing
            .iter()
            .flatten()
            .any(|(i, at)| *i == ino && at.start < reading.end && reading.start < at.end)
    }

    /// Takes pages `pages` (indices from the range's first) of the range at `offset` of inode
    /// `ino` out of the queue while they are queued by batch `ticket`, from `*k` on: the run
    /// of them that is, after skipping those that are not (stored by an earlier range, read
    /// by a fault, queued again by a later batch).
    fn take_run(
        &mut self,
        (ino, offset, ticket): (u64, u64, u64),
        pages: usize,
        k: &mut usize,
    ) -> Option<Range<usize>> {
        let mut taken = |k: usize| {
            let page = (ino, offset + k as u64 * PAGE);
            let ours = self.queued.get(&page) == Some(&ticket);
            ours && self.queued.remove(&page).is_some()
        };
        while *k < pages && !taken(*k) {
            *k += 1;
        }
        if *k == pages {
            return None;
        }
        let start = *k;
        *k += 1;
        while *k < pages && taken(*k) {
            *k += 1;
        }
        Some(start..*k)
    }

    /// Takes the pages of `reading` of inode `ino` out of the queue.
    fn cancel(&mut self, ino: u64, reading: std::ops::Range<u64>) {
        if self.queued.is_empty() {
            return;
        }
        let start = reading.start / PAGE * PAGE;
        let len = usize::try_from(reading.end.saturating_sub(start)).unwrap_or(usize::MAX);
        for at in page_offsets(start, len) {
            self.queued.remove(&(ino, at));
        }
    }
}

/// The storing threads' queues; the threads end when this is dropped.
#[derive(Debug)]
pub(crate) struct Pusher {
    queues: Vec<SyncSender<Batch>>,
    shared: Arc<Shared>,
    /// Longest an answer waits ([`WAIT`]; other bounds in tests).
    wait: Duration,
    /// Threads storing pages (a fault's pages are split between them).
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
        Ok(Pusher {
            queues,
            shared,
            wait,
            threads,
        })
    }

    /// Before a page fault of inode `ino` that reads the pages of `reading` is served: takes
    /// them out of the queue (the answer fills them; a store of one would wait for it).
    pub(crate) fn reading(&self, ino: u64, reading: std::ops::Range<u64>) {
        let mut state = self.shared.lock();
        state.cancel(ino, reading);
    }

    /// After a page fault of inode `ino` that reads the pages of `reading` (which the answer
    /// fills: they are taken out of the queue): hands the ranges of `pages` with a page not
    /// queued yet to the threads, split between them (or drops a batch when its thread's queue
    /// is full; the threads store only the pages nobody stored or read meanwhile), and sends
    /// the fault's `answer` once every page queued so far is stored, or after at most
    /// [`WAIT`]: the storing thread that finishes the last of those batches sends it, so the
    /// worker neither sleeps nor is woken for it. The worker sends it itself, at once, when
    /// nothing is left to wait for, or when a thread is storing one of the fault's own pages
    /// (queued before the fault came: that store waits for this answer).
    pub(crate) fn offer(
        &self,
        ino: u64,
        reading: std::ops::Range<u64>,
        (mut pages, mut later): crate::tree::Offered,
        answer: Answer,
    ) {
        let mut state = self.shared.lock();
        state.cancel(ino, reading.clone());
        let mut blocked = state.storing_any(ino, &reading);
        for pages in [&mut pages, &mut later] {
            pages.retain(|(offset, bytes)| {
                // A range goes when one of its pages is not queued yet.
                page_offsets(*offset, bytes.len()).any(|at| !state.queued.contains_key(&(ino, at)))
            });
        }
        // The answer waits for `pages` (and what was queued before), not for `later`.
        let mut n = 0;
        for batch in split(pages, self.threads) {
            blocked |= self.hand(&mut state, n, ino, batch);
            n += 1;
        }
        let target = state.handed;
        for batch in split(later, self.threads) {
            blocked |= self.hand(&mut state, n, ino, batch);
            n += 1;
        }
        if blocked || state.done >= target {
            drop(state);
            return answer();
        }
        let deadline = Instant::now() + self.wait;
        state.answers.push_back(Pending {
            target,
            deadline,
            answer,
        });
    }

    /// Hands the ranges of `pages` of inode `ino` with a page not queued yet to the threads,
    /// split between them, with no answer waiting for them: pages a reader is expected to
    /// fault on soon (the rows ahead of a walk down a column, `Tree::walk_lead`). The answers
    /// of later faults wait for them as for any page queued before.
    pub(crate) fn ahead(&self, ino: u64, mut pages: Vec<(u64, Pieces)>) {
        let mut state = self.shared.lock();
        pages.retain(|(offset, bytes)| {
            page_offsets(*offset, bytes.len()).any(|at| !state.queued.contains_key(&(ino, at)))
        });
        for (n, batch) in split(pages, self.threads).into_iter().enumerate() {
            self.hand(&mut state, n, ino, batch);
        }
    }

    /// Hands batch number `n` of a fault's pages of inode `ino` to its thread (`n` modulo the
    /// threads), its pages queued under a new ticket; returns whether that thread is gone
    /// (nothing it was given will be stored). A full queue drops the batch (its pages are
    /// advice).
    fn hand(&self, state: &mut State, n: usize, ino: u64, batch: Vec<(u64, Pieces)>) -> bool {
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

/// Splits the ranges `pages` into at most `n` batches of about as many pages each, in order.
fn split(pages: Vec<(u64, Pieces)>, n: usize) -> Vec<Vec<(u64, Pieces)>> {
    let total: usize = pages
        .iter()
        .map(|(_, b)| b.len().div_ceil(PAGE as usize))
        .sum();
    if pages.is_empty() {
        return Vec::new();
    }
    let per = total.div_ceil(n.max(1)).max(1);
    let mut out: Vec<Vec<(u64, Pieces)>> = vec![Vec::new()];
    let mut in_last = 0;
    for range in pages {
        if in_last >= per {
            out.push(Vec::new());
            in_last = 0;
        }
        in_last += range.1.len().div_ceil(PAGE as usize);
        out.last_mut().expect("one batch at least").push(range);
    }
    out
}

/// One storing thread (number `n`): stores the batches it takes from `batches` with `store`.
fn store_batches(n: usize, theirs: &Shared, batches: &Receiver<Batch>, store: &Store) {
    // Answers are sent with no lock held (each is a write to the FUSE device).
    let send = |answers: Vec<Answer>| answers.into_iter().for_each(|a| a());
    loop {
        let next = batches.recv();
        let Ok((ino, ranges, ticket)) = next else {
            // The mount is going away: whatever still waits is answered.
            let all = theirs.lock().ready_answers(far_future());
            return send(all);
        };
        let mut failed = false;
        for (offset, bytes) in ranges {
            // The runs of the range's pages still queued: the others were taken out by a
            // fault that reads them or stored by an earlier range. After a failed store of
            // this file, taken out and not stored.
            let pages = bytes.len().div_ceil(PAGE as usize);
            let mut k = 0;
            loop {
                let (run, at) = {
                    let mut state = theirs.lock();
                    let Some(run) = state.take_run((ino, offset, ticket), pages, &mut k) else {
                        break;
                    };
                    let at = offset + run.start as u64 * PAGE;
                    if !failed {
                        let end = offset + run.end as u64 * PAGE;
                        state.storing[n] = Some((ino, at..end));
                    }
                    (run, at)
                };
                if failed {
                    continue;
                }
                let piece = bytes
                    .slices(run.start * PAGE as usize..(run.end * PAGE as usize).min(bytes.len()));
                if let Err(e) = store(ino, at, &piece) {
                    // The file was forgotten or the mount is going away.
                    log::debug!("store of inode {ino} at {at}: {e}");
                    failed = true;
                }
                // Answers whose wait is over go now, between two stores.
                let late = {
                    let mut state = theirs.lock();
                    state.storing[n] = None;
                    match state.answers.front() {
                        Some(p) if p.deadline <= Instant::now() => {
                            state.ready_answers(Instant::now())
                        }
                        _ => Vec::new(),
                    }
                };
                send(late);
            }
        }
        let ready = {
            let mut state = theirs.lock();
            state.finish(ticket);
            state.ready_answers(Instant::now())
        };
        send(ready);
    }
}

/// An instant later than any deadline of a waiting answer.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// The kernel's page ([`crate::tree::PAGE`]), as a file offset.
const PAGE: u64 = crate::tree::PAGE as u64;

#[cfg(test)]
mod tests;
