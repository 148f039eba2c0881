//! The pusher's bookkeeping, shared by the workers and the storing threads under one lock:
//! which pages are queued and under which batch's ticket, which batches are stored (in a
//! row, so that an answer knows when all before it are), which pages a thread is storing
//! now, which faults are being served, which inodes were forgotten, and the answers
//! waiting for their batches. No thread and no system call lives here.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use super::{Answer, PAGE};

/// An answer waiting for the batches up to `target`, or for `deadline`.
pub(super) struct Pending {
    pub(super) target: u64,
    pub(super) deadline: Instant,
    pub(super) answer: Answer,
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
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Wakes the deadline keeper ([`keep_deadlines`](super::threads::keep_deadlines)) when an answer is queued while it
    /// sleeps with none to watch, and when the pusher goes away.
    pub(super) deadlines: std::sync::Condvar,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// Pages `(inode, offset)` queued and not stored yet, page by page (a range offered
    /// covers many), with the ticket of the batch that stores them: a batch stores only the
    /// pages queued by it, so a page taken out by a fault and queued again after the fault's
    /// answer is stored by the later batch, never by one that answer waits for.
    pub(super) queued: HashMap<(u64, u64), u64>,
    /// Tickets of the latest batch handed over, and of the latest one stored with every
    /// batch before it.
    pub(super) handed: u64,
    pub(super) done: u64,
    /// Tickets stored while an earlier one was still being stored (by another thread).
    pub(super) finished: BTreeSet<u64>,
    /// The pages `(inode, range)` each thread is storing now, and their batch's ticket.
    pub(super) storing: Vec<Option<(u64, Range<u64>, u64)>>,
    /// Tickets of batches of rows below a fault stored after its answer ([`EARLY`](super::EARLY)), not
    /// stored yet.
    pub(super) rows: std::collections::HashSet<u64>,
    /// Answers of faults waiting for their batches, oldest (lowest target) first.
    pub(super) answers: std::collections::VecDeque<Pending>,
    /// Pages `(inode, range)` of faults being served whose answer is not queued yet: the
    /// kernel holds them locked until the answer, so they are not handed over (a store of
    /// one would wait for an answer that may wait for it). With each, [`State::forgets`]
    /// when it came: pages it offers are dropped if its inode was forgotten since.
    pub(super) faulting: Vec<(u64, Range<u64>, u64)>,
    /// Calls of [`Pusher::forget`](super::Pusher::forget) so far, and the count at the latest one of each inode.
    pub(super) forgets: u64,
    pub(super) forgotten: HashMap<u64, u64>,
    /// The deadline keeper sleeps until woken (no answer waited for a while).
    pub(super) keeper_idle: bool,
    /// The pusher is gone: the deadline keeper ends.
    pub(super) closed: bool,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The offsets of the pages of `len` bytes at `offset` (page-aligned; the last may be short).
pub(super) fn page_offsets(offset: u64, len: usize) -> impl Iterator<Item = u64> {
    (0..len.div_ceil(PAGE as usize) as u64).map(move |k| offset + k * PAGE)
}

impl State {
    /// Records batch `ticket` as stored and moves `done` past every ticket stored in a row.
    pub(super) fn finish(&mut self, ticket: u64) {
        self.rows.remove(&ticket);
        self.finished.insert(ticket);
        while self.finished.remove(&(self.done + 1)) {
            self.done += 1;
        }
    }

    /// Takes the answers whose batches are all stored, or whose wait is over at `now`.
    pub(super) fn ready_answers(&mut self, now: Instant) -> Vec<Answer> {
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
    pub(super) fn storing_any(&self, ino: u64, reading: &Range<u64>) -> bool {
        self.storing_where(ino, reading, |_| true)
    }

    /// Whether a thread is storing a page of `reading` of inode `ino` as a row stored after
    /// its fault's answer.
    pub(super) fn storing_rows(&self, ino: u64, reading: &Range<u64>) -> bool {
        self.storing_where(ino, reading, |ticket| self.rows.contains(&ticket))
    }

    /// Whether a thread is storing a page of `reading` of inode `ino` for a batch whose ticket
    /// `which` picks.
    pub(super) fn storing_where(
        &self,
        ino: u64,
        reading: &Range<u64>,
        which: impl Fn(u64) -> bool,
    ) -> bool {
        self.storing.iter().flatten().any(|(i, at, ticket)| {
            *i == ino && at.start < reading.end && reading.start < at.end && which(*ticket)
        })
    }

    /// Takes pages `pages` (indices from the range's first) of the range at `offset` of inode
    /// `ino` out of the queue while they are queued by batch `ticket`, from `*k` on: the run
    /// of them that is, after skipping those that are not (stored by an earlier range, read
    /// by a fault, queued again by a later batch).
    pub(super) fn take_run(
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

    /// Forgets the fault of inode `ino` reading `reading` ([`Pusher::reading`](super::Pusher::reading)); returns
    /// whether the inode was forgotten ([`Pusher::forget`](super::Pusher::forget)) since the fault came, so that
    /// what it read may be of the version before (a fault never announced counts as new).
    pub(super) fn unfault(&mut self, ino: u64, reading: &Range<u64>) -> bool {
        let Some(k) = self
            .faulting
            .iter()
            .position(|(i, r, _)| *i == ino && r == reading)
        else {
            return false;
        };
        let (_, _, since) = self.faulting.swap_remove(k);
        self.forgotten_since(ino, since)
    }

    /// Whether inode `ino` was forgotten after [`State::forgets`] was `since`.
    pub(super) fn forgotten_since(&self, ino: u64, since: u64) -> bool {
        self.forgotten.get(&ino).is_some_and(|&at| at > since)
    }

    /// Whether a range of `len` bytes at `offset` of inode `ino` may be handed over: one of
    /// its pages is not queued yet, and none is read by a fault being served.
    pub(super) fn wanted(&self, ino: u64, offset: u64, len: usize) -> bool {
        let end = offset + len as u64;
        let read =
            |(i, r, _): &(u64, Range<u64>, u64)| *i == ino && r.start < end && offset < r.end;
        !self.faulting.iter().any(read)
            && page_offsets(offset, len).any(|at| !self.queued.contains_key(&(ino, at)))
    }

    /// Takes the pages of `reading` of inode `ino` out of the queue; returns whether one of
    /// them was queued as a row stored after its fault's answer.
    pub(super) fn cancel(&mut self, ino: u64, reading: std::ops::Range<u64>) -> bool {
        if self.queued.is_empty() {
            return false;
        }
        let start = reading.start / PAGE * PAGE;
        let len = usize::try_from(reading.end.saturating_sub(start)).unwrap_or(usize::MAX);
        let mut rows = false;
        for at in page_offsets(start, len) {
            if let Some(ticket) = self.queued.remove(&(ino, at)) {
                rows |= self.rows.contains(&ticket);
            }
        }
        rows
    }
}
