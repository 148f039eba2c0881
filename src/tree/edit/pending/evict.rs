//! Making room for a buffer and bringing a spilled one back, with the spill file's I/O done
//! while the edits lock is released (the states and who may do what: `pending.rs`).
//!
//! Both take the lock's guard and release it around their I/O. What they took under the lock
//! is an `Arc` (a victim's bytes, a slot), and they act on the result only when the buffer is
//! still in the state they took it in: an eviction pass finds its victim still `Spilling`
//! with its ticket, a read-back finds the same slot in the map. Anything else (a writer took
//! the victim back, a commit or a drop removed it, another pass spilled it) means another
//! thread changed the buffer meanwhile; its change stands, and what the I/O made is given
//! back. A caller that goes around again because of such a change does its I/O with the lock
//! held after [`MAX_UNLOCKED_TRIES`] tries, so it always ends.

use std::io;
use std::sync::Arc;

use parking_lot::MutexGuard;

use super::{Body, BufState, Edits, Slot, SpillHook, spill_error};
use crate::reader::ChunkId;
use crate::tree::TreeError;

/// The edits lock, held, and how to release it around I/O: the guard of the mount's lock, or
/// (unit tests) the buffers themselves, where the I/O runs in place.
pub(crate) trait Relock: std::ops::DerefMut<Target = Edits> {
    /// Runs `f` with the lock released.
    fn without_lock<R>(&mut self, f: impl FnOnce() -> R) -> R;
}

impl Relock for MutexGuard<'_, Edits> {
    fn without_lock<R>(&mut self, f: impl FnOnce() -> R) -> R {
        MutexGuard::unlocked(self, f)
    }
}

impl Relock for &mut Edits {
    fn without_lock<R>(&mut self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// How many times an edit goes around (its buffer changed while the lock was released)
/// before it does its I/O with the lock held.
const MAX_UNLOCKED_TRIES: usize = 4;

/// One victim of an eviction pass: its bytes, the slot reserved for them, and the ticket it
/// was marked `Spilling` with.
struct Job {
    id: ChunkId,
    ticket: u64,
    data: Arc<Vec<u8>>,
    slot: Arc<Slot>,
}

impl Edits {
    /// The first step of an eviction pass, under the lock: evicts the least recently edited
    /// buffers other than `keep` until `need` more bytes fit beside the others (those being
    /// spilled counted as freed): clean ones are dropped, edited ones marked `Spilling` with a
    /// reserved slot, to be written by the caller. The error of a slot that could not be
    /// reserved ends the pass early (its buffer stays as it was).
    fn plan_room(&mut self, need: usize, keep: ChunkId) -> (Vec<Job>, Option<io::Error>) {
        let mut jobs = Vec::new();
        while (self.memory - self.in_flight).saturating_add(need) > self.budget {
            let victim = self
                .lru
                .iter()
                .map(|(&tick, &id)| (tick, id))
                .find(|&(_, id)| id != keep);
            let Some((tick, id)) = victim else {
                break; // only `keep`: a chunk larger than the budget
            };
            let (clean, data) = match self.chunks.get(&id) {
                Some(buf) if buf.used == tick => match &buf.body {
                    Body::Mem(v) => (buf.state == BufState::Clean, v.clone()),
                    _ => (false, Arc::default()),
                },
                _ => (false, Arc::default()),
            };
            if clean {
                self.remove_chunk(id);
                self.stats.dropped_clean += 1;
                continue;
            }
            let held = data.capacity();
            if held == 0 {
                // Nothing to give back (a removal, a chunk file just created; or not in memory
                // under this tick, which cannot happen: kept in step): stays.
                self.lru.remove(&tick);
                continue;
            }
            let slot = match self.spill.reserve(data.len()) {
                Ok(slot) => slot,
                Err(e) => return (jobs, Some(e)),
            };
            self.tick += 1;
            let ticket = self.tick;
            if let Some(buf) = self.chunks.get_mut(&id) {
                buf.body = Body::Spilling(data.clone(), ticket);
            }
            self.lru.remove(&tick);
            self.in_flight += held;
            jobs.push(Job {
                id,
                ticket,
                data,
                slot,
            });
        }
        (jobs, None)
    }

    /// The last step of an eviction pass, under the lock: each victim still `Spilling` with
    /// its ticket becomes `Spilled` (its memory freed), or, when its write failed, goes back
    /// into memory at its place in the eviction order; any other gives its slot back.
    /// Returns the first write error.
    fn finish_room(&mut self, done: Vec<(Job, io::Result<()>)>) -> io::Result<()> {
        let mut failed = None;
        for (job, res) in done {
            let ours = self
                .chunks
                .get_mut(&job.id)
                .filter(|buf| matches!(&buf.body, Body::Spilling(_, t) if *t == job.ticket));
            let Some(buf) = ours else {
                self.spill.release(job.slot);
                continue;
            };
            let held = job.data.capacity();
            self.in_flight -= held;
            match res {
                Ok(()) => {
                    buf.body = Body::Spilled(job.slot);
                    self.memory -= held;
                    self.stats.spills += 1;
                }
                Err(e) => {
                    buf.body = Body::Mem(job.data);
                    self.lru.insert(buf.used, job.id);
                    self.spill.release(job.slot);
                    failed.get_or_insert(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// [`make_room`] with the lock held throughout (its writes included).
    fn make_room_locked(&mut self, need: usize, keep: ChunkId) -> io::Result<()> {
        let (jobs, failed) = self.plan_room(need, keep);
        let done = fill(jobs, self.hook.as_ref());
        let res = self.finish_room(done);
        failed.map_or(res, Err)
    }
}

/// Writes each job's bytes to its slot (after the test hook, if any).
fn fill(jobs: Vec<Job>, hook: Option<&SpillHook>) -> Vec<(Job, io::Result<()>)> {
    jobs.into_iter()
        .map(|job| {
            if let Some(hook) = hook {
                (hook.0)(job.id);
            }
            let res = job.slot.fill(&job.data);
            (job, res)
        })
        .collect()
}

/// Makes room for `need` more bytes of buffers in memory beside the budget's others: evicts
/// the least recently edited buffers other than `keep` (clean ones dropped, edited ones
/// spilled) until they fit or only `keep` is left. The spill file is written with the lock
/// released (so the buffers may have changed when this returns: callers look again).
///
/// # Errors
/// The spill file could not be written: nothing changed for the buffers that failed to
/// spill (those evicted besides them are in the file, as readable as before).
pub(crate) fn make_room(edits: &mut impl Relock, need: usize, keep: ChunkId) -> io::Result<()> {
    // Another pass when a victim was taken back (edited) while this one wrote it.
    for _ in 0..MAX_UNLOCKED_TRIES {
        let (jobs, failed) = edits.plan_room(need, keep);
        if jobs.is_empty() {
            return failed.map_or(Ok(()), Err);
        }
        let hook = edits.hook.clone();
        let done = edits.without_lock(|| fill(jobs, hook.as_ref()));
        let res = edits.finish_room(done);
        if failed.is_some() || res.is_err() {
            return failed.map_or(res, Err);
        }
    }
    Ok(())
}

/// Runs `f` on chunk `id`'s buffer in memory and the most bytes it may hold (`limit`): a
/// spilled buffer is brought back first (only its first `prefix` bytes: a truncation keeps
/// no more), and room is made for it to reach `limit` (a buffer another holder has is copied
/// first; one being spilled is taken back). Marks it as just edited; the caller sets its
/// state. The spill file is read and written with the lock released.
///
/// Returns `Err(f)` (not run) when the buffer is gone (dropped or committed while the lock
/// was released, or never there): the caller makes it again.
///
/// # Errors
/// (Inside `Ok`) the spill file's errors ([`spill_error`]); what `f` returns.
pub(crate) fn edit_in_memory<T, F>(
    edits: &mut impl Relock,
    id: ChunkId,
    limit: usize,
    prefix: usize,
    f: F,
) -> Result<Result<T, TreeError>, F>
where
    F: FnOnce(&mut Vec<u8>, usize) -> Result<T, TreeError>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        let unlocked = tries <= MAX_UNLOCKED_TRIES;
        let (len, held, slot) = match edits.chunks.get(&id).map(|c| &c.body) {
            None => return Err(f),
            Some(Body::Mem(v) | Body::Spilling(v, _)) => (v.len(), v.capacity(), None),
            Some(Body::Spilled(s)) => (s.len().min(prefix), 0, Some(s.clone())),
        };
        let grow = limit.max(len).saturating_sub(held);
        // A buffer not edited yet (just loaded for this edit) makes its room with the lock
        // held: released, another writer's pass could drop it (clean buffers go first) and
        // two writers could each keep dropping the other's. Nothing to make: no pass.
        let fresh = edits
            .chunks
            .get(&id)
            .is_some_and(|c| c.state == BufState::Clean);
        let room = if grow == 0 {
            Ok(())
        } else if unlocked && !fresh {
            make_room(edits, grow, id)
        } else {
            edits.make_room_locked(grow, id)
        };
        if let Err(e) = room {
            if let Some(slot) = slot {
                edits.release_slot(slot);
            }
            return Ok(Err(spill_error(edits.spill.dir(), e)));
        }
        match slot {
            Some(slot) => {
                // Read back outside the lock: while this holds the slot nobody changes it.
                let data = if unlocked {
                    edits.without_lock(|| slot.load_prefix(len))
                } else {
                    slot.load_prefix(len)
                };
                let e: &mut Edits = &mut *edits;
                let buf = e
                    .chunks
                    .get_mut(&id)
                    .filter(|buf| matches!(&buf.body, Body::Spilled(s) if Arc::ptr_eq(s, &slot)));
                let Some(buf) = buf else {
                    e.spill.release(slot);
                    continue; // changed meanwhile: look again
                };
                let data = match data {
                    Ok(data) => data,
                    Err(err) => {
                        e.spill.release(slot);
                        return Ok(Err(spill_error(e.spill.dir(), err)));
                    }
                };
                e.memory += data.capacity();
                let old = std::mem::replace(&mut buf.body, Body::Mem(Arc::new(data)));
                if let Body::Spilled(old) = old {
                    e.spill.release(old);
                }
                e.spill.release(slot);
            }
            // Spilled (or gone) while the lock was released: look again.
            None if !matches!(
                edits.chunks.get(&id).map(|c| &c.body),
                Some(Body::Mem(_) | Body::Spilling(..))
            ) =>
            {
                continue;
            }
            None => {}
        }
        return Ok(edit_resident(&mut *edits, id, limit, f));
    }
}

/// Runs `f` on chunk `id`'s buffer, which is in memory (`Mem`, or `Spilling`: taken back, its
/// pass's copy discarded), and moves it to the end of the eviction order.
fn edit_resident<T>(
    edits: &mut Edits,
    id: ChunkId,
    limit: usize,
    f: impl FnOnce(&mut Vec<u8>, usize) -> Result<T, TreeError>,
) -> Result<T, TreeError> {
    let Some(buf) = edits.chunks.get_mut(&id) else {
        return Err(TreeError::NotFound);
    };
    if let Body::Spilling(v, _) = &buf.body {
        let v = v.clone();
        edits.in_flight -= v.capacity();
        buf.body = Body::Mem(v);
    }
    let Body::Mem(v) = &mut buf.body else {
        return Err(TreeError::NotFound);
    };
    let before = v.capacity();
    // Copied here when another holder has it (a commit stores what it took; a pass that was
    // spilling it writes what it took, then discards it).
    let data = Arc::make_mut(v);
    let out = f(data, limit);
    let after = data.capacity();
    edits.memory = edits.memory - before + after;
    edits.stats.peak_memory = edits.stats.peak_memory.max(edits.memory);
    edits.lru.remove(&buf.used);
    edits.tick += 1;
    buf.used = edits.tick;
    edits.lru.insert(edits.tick, id);
    out
}

#[cfg(test)]
impl Edits {
    /// Unit tests: [`make_room`] on the buffers alone (its I/O in place).
    pub(crate) fn make_room(&mut self, need: usize, keep: ChunkId) -> io::Result<()> {
        make_room(&mut &mut *self, need, keep)
    }

    /// Unit tests: [`edit_in_memory`] on the buffers alone, of the whole chunk.
    pub(crate) fn edit_in_memory<T>(
        &mut self,
        id: ChunkId,
        limit: usize,
        f: impl FnOnce(&mut Vec<u8>, usize) -> Result<T, TreeError>,
    ) -> Result<T, TreeError> {
        edit_in_memory(&mut &mut *self, id, limit, usize::MAX, f)
            .unwrap_or_else(|_| Err(TreeError::NotFound))
    }
}
