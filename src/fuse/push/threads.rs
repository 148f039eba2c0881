//! The pusher's threads: the storing threads, each storing the batches of its queue and
//! sending the answers whose batches it finishes (or whose wait is over between two
//! stores), and the deadline keeper, which sends the answers whose wait is over when no
//! storing thread gets there. Dropping the [`Pusher`] ends them.

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::state::Shared;
use super::{Answer, Batch, PAGE, Pusher, Store};

/// One storing thread (number `n`): stores the batches it takes from `batches` with `store`.
pub(super) fn store_batches(n: usize, theirs: &Shared, batches: &Receiver<Batch>, store: &Store) {
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
                        state.storing[n] = Some((ino, at..end, ticket));
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

impl Drop for Pusher {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.deadlines.notify_one();
    }
}

/// How long the deadline keeper goes on looking (every [`KEEPER_GRACE`]) after the last
/// answer it watched before it sleeps until an answer wakes it: while faults come, it is never
/// woken for one (a wake-up of an idle vCPU costs a VM exit on the machines measured).
const KEEPER_GRACE: Duration = Duration::from_millis(50);

/// Least time the deadline keeper sleeps while answers wait: it sends an answer at most this
/// late after its wait ([`WAIT`](super::WAIT)) is over. The storing threads keep to [`WAIT`](super::WAIT) itself
/// whenever they can; the keeper is for when they cannot, and waking it at every answer's
/// deadline would wake it about once per fault.
const KEEPER_SLACK: Duration = Duration::from_millis(10);

/// The deadline keeper: sends every answer whose wait ([`WAIT`](super::WAIT)) is over (at most
/// [`KEEPER_SLACK`] late), whatever the storing threads are doing. They send such answers
/// between two stores, but a thread whose store waits for a page the kernel holds locked
/// sends nothing until that store ends, and an idle one waits for its next batch: an answer
/// that the locked page's own read waits behind (the kernel holds back reads beyond its limit
/// of pending ones) would then never go.
pub(super) fn keep_deadlines(theirs: &Shared) {
    let mut state = theirs.lock();
    let mut watched = Instant::now();
    loop {
        if state.closed {
            return;
        }
        let now = Instant::now();
        let due = match state.answers.front() {
            Some(p) if p.deadline <= now => state.ready_answers(now),
            _ => Vec::new(),
        };
        if !due.is_empty() {
            drop(state);
            send(due);
            state = theirs.lock();
            continue;
        }
        let next = match state.answers.front() {
            Some(p) => {
                watched = now;
                p.deadline.saturating_duration_since(now).max(KEEPER_SLACK)
            }
            None if now.duration_since(watched) < KEEPER_GRACE => KEEPER_GRACE,
            None => {
                state.keeper_idle = true;
                state = theirs
                    .deadlines
                    .wait(state)
                    .unwrap_or_else(|p| p.into_inner());
                state.keeper_idle = false;
                watched = Instant::now();
                continue;
            }
        };
        state = theirs
            .deadlines
            .wait_timeout(state, next)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// Sends `answers` (with no lock held: each is a write to the FUSE device).
fn send(answers: Vec<Answer>) {
    answers.into_iter().for_each(|a| a());
}

/// An instant later than any deadline of a waiting answer.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}
