//! The streams of one block, decoded on the calling thread and, when it is idle, one helper
//! thread beside it.
//!
//! Why: a small read decodes one block, and a block of a typed array is usually split in one
//! codec stream per byte of the type (python-blosc2's default for float64: 8 zstd streams of
//! 16 KiB per 128 KiB block), each independent of the others. Decoded one after the other
//! they keep one core busy while the reader waits; on two cores they take about half the time.
//! Whole-chunk decodes do not come here: they already spread blocks over threads.
//!
//! How: the caller publishes the job (a slot under a mutex) only when the helper is idle,
//! then both threads take stream indices from one atomic counter, so whoever is faster does
//! more and a helper that wakes late costs nothing: the caller may have taken every stream
//! by then. The caller always leaves with the job finished by both: it takes the job back if
//! the helper never picked it up, else it waits until the helper has left it, spinning for
//! the helper's last stream a while ([`END_SPIN`]) before it sleeps. Panics of the
//! decoders are caught per stream on both threads (an error of that stream), so no unwinding
//! ever leaves the job while the helper may still write into it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::Codec;
use super::compressor::StreamDecoders;

/// Blocks smaller than this are decoded on the calling thread alone: the hand-over would
/// cost more than it saves.
const MIN_BLOCK: usize = 32 * 1024;

/// One stream of a block, checked and located by the caller.
#[derive(Debug, Clone, Copy)]
pub(super) enum Piece<'a> {
    /// A stream of zeros (csize 0).
    Zeros,
    /// A run of one byte value (negative csize).
    Run(u8),
    /// Stored raw (csize equal to the stream's size).
    Raw(&'a [u8]),
    /// Compressed by the block's codec.
    Coded(&'a [u8]),
}

/// Decodes `pieces[i]` into `out[i * len..(i + 1) * len]` for every `i` (`out` holds exactly
/// `pieces.len() * len` bytes). `parallel`: the caller allows the helper thread (a small
/// read's block); it is used only for the slow codecs (zstd, zlib), blocks of
/// [`MIN_BLOCK`] or more, two streams or more, no dictionary, and only when idle.
///
/// # Errors
/// The index of the first stream that failed, and why.
pub(super) fn decode_pieces(
    streams: &mut StreamDecoders,
    codec: Codec,
    dict: Option<&[u8]>,
    pieces: &[Piece<'_>],
    out: &mut [u8],
    parallel: bool,
) -> Result<(), (usize, String)> {
    let len = out.len().checked_div(pieces.len()).unwrap_or(0);
    if len * pieces.len() != out.len() {
        return Err((0, "streams do not fill the block".into()));
    }
    let helped = parallel
        && dict.is_none()
        && matches!(codec, Codec::Zstd | Codec::Zlib)
        && pieces.len() >= 2
        && out.len() >= MIN_BLOCK;
    let job = Job {
        codec,
        dict,
        pieces,
        out: out.as_mut_ptr(),
        len,
        next: AtomicUsize::new(0),
        error: Mutex::new(None),
    };
    match helped.then(helper).flatten() {
        Some(h) => h.run_with(&job, streams),
        None => job.run(streams),
    }
    let error = job.error.into_inner().unwrap_or_else(|p| p.into_inner());
    error.map_or(Ok(()), Err)
}

/// One block's streams, shared by the caller and the helper while both work on it.
struct Job<'a> {
    codec: Codec,
    dict: Option<&'a [u8]>,
    pieces: &'a [Piece<'a>],
    /// Start of the block's output: stream `i` owns `[i * len, (i + 1) * len)`.
    out: *mut u8,
    len: usize,
    /// The next stream index to take.
    next: AtomicUsize,
    /// The failed stream with the lowest index.
    error: Mutex<Option<(usize, String)>>,
}

impl Job<'_> {
    /// Takes stream indices until none is left, decoding each.
    fn run(&self, streams: &mut StreamDecoders) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            let Some(piece) = self.pieces.get(i) else {
                return;
            };
            // SAFETY: `out` points at `pieces.len() * len` bytes the caller borrowed mutably
            // for the whole call (`decode_pieces` returns only after both threads have left
            // the job), and index `i` is handed out exactly once by `next`, so this is the
            // only reference to these `len` bytes.
            let out =
                unsafe { std::slice::from_raw_parts_mut(self.out.add(i * self.len), self.len) };
            let res = catch_unwind(AssertUnwindSafe(|| {
                decode_piece(streams, self.codec, self.dict, *piece, out)
            }))
            .unwrap_or_else(|_| Err("the decoder panicked on this stream (a b2fs bug)".into()));
            if let Err(reason) = res {
                let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
                if e.as_ref().is_none_or(|(j, _)| i < *j) {
                    *e = Some((i, reason));
                }
            }
        }
    }
}

/// Decodes one stream into `out` (its exact size).
fn decode_piece(
    streams: &mut StreamDecoders,
    codec: Codec,
    dict: Option<&[u8]>,
    piece: Piece<'_>,
    out: &mut [u8],
) -> Result<(), String> {
    match piece {
        Piece::Zeros => out.fill(0),
        Piece::Run(v) => out.fill(v),
        Piece::Raw(bytes) if bytes.len() == out.len() => out.copy_from_slice(bytes),
        Piece::Raw(_) => return Err("raw stream of the wrong size".into()),
        Piece::Coded(input) => streams.decode(codec, input, out, dict)?,
    }
    Ok(())
}

/// A job handed to the helper: the address of a [`Job`] on the caller's stack.
struct Handed(*const Job<'static>);

// SAFETY: the pointer is only dereferenced by the helper between taking it from the slot and
// leaving the job (publishing its ticket in `Helper::done`), and the caller keeps the job
// alive and unmoved until then (`Helper::run_with`). Everything the helper touches through it
// is `Sync` (slices of bytes, atomics, a mutex) or its own part of `out`.
unsafe impl Send for Handed {}

/// What the helper is doing.
struct Slot {
    /// A job published and not taken yet.
    job: Option<Handed>,
    /// The ticket of the job the helper is working on.
    working: Option<u64>,
    /// Ticket of the job in `job`.
    ticket: u64,
    /// Callers sleeping on the condvar until the helper leaves their job. A count, not a
    /// flag: a caller woken late (after another caller's job was published and the other
    /// caller went to sleep) must not clear the other's mark, or the helper would leave that
    /// job without waking its caller, which would then sleep for ever.
    callers_sleeping: u32,
}

/// The helper thread's mailbox.
struct Helper {
    slot: Mutex<Slot>,
    wake: Condvar,
    /// The ticket of the last job the helper left (read without the lock by a caller that
    /// spins for it).
    done: AtomicU64,
}

/// How long a caller that has run out of streams spins for the helper to finish its last
/// one before it sleeps. The helper's last stream is one of a block's (about 20 us of zstd
/// here); sleeping instead costs a futex wait, the helper's wake-up call and this thread's
/// wake-up on its vCPU, 10-20 us on the VMs measured (BENCHMARKS.md, session 12).
const END_SPIN: Duration = Duration::from_micros(100);

/// The process's helper, started on first use; `None` when it cannot be started.
fn helper() -> Option<&'static Helper> {
    static HELPER: OnceLock<Option<&'static Helper>> = OnceLock::new();
    *HELPER.get_or_init(|| {
        let h: &'static Helper = Box::leak(Box::new(Helper {
            slot: Mutex::new(Slot {
                job: None,
                working: None,
                ticket: 0,
                callers_sleeping: 0,
            }),
            wake: Condvar::new(),
            done: AtomicU64::new(0),
        }));
        std::thread::Builder::new()
            .name("b2fs-streams".into())
            .spawn(move || h.serve())
            .ok()
            .map(|_| h)
    })
}

impl Helper {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The helper thread: takes published jobs and works on them beside their callers.
    fn serve(&self) {
        let mut streams = StreamDecoders::new();
        let mut slot = self.lock();
        loop {
            let Some(Handed(job)) = slot.job.take() else {
                slot = self.wake.wait(slot).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            let ticket = slot.ticket;
            slot.working = Some(ticket);
            drop(slot);
            // SAFETY: see `Handed`: the caller waits for `done` to reach its ticket or for
            // `working` to change before its job goes away.
            unsafe { &*job }.run(&mut streams);
            slot = self.lock();
            slot.working = None;
            self.done.store(ticket, Ordering::Release);
            if slot.callers_sleeping > 0 {
                self.wake.notify_all();
            }
        }
    }

    /// Runs `job` on this thread and on the helper when it is idle; returns when every
    /// stream is decoded and the helper has left the job.
    fn run_with(&self, job: &Job<'_>, streams: &mut StreamDecoders) {
        let ticket = {
            let mut slot = self.lock();
            if slot.job.is_some() || slot.working.is_some() {
                None
            } else {
                slot.ticket = slot.ticket.wrapping_add(1);
                slot.job = Some(Handed((job as *const Job<'_>).cast()));
                self.wake.notify_all();
                Some(slot.ticket)
            }
        };
        job.run(streams);
        let Some(ticket) = ticket else { return };
        let mut slot = self.lock();
        if slot.job.is_some() {
            // Ours, never picked up: nobody publishes into a slot that holds a job or whose
            // helper is working, and the helper works on ours until it leaves it.
            slot.job = None;
            return;
        }
        if slot.working != Some(ticket) {
            return;
        }
        // The helper is on its last stream of ours: spin for it a while rather than sleep.
        drop(slot);
        let start = Instant::now();
        while self.done.load(Ordering::Acquire) != ticket {
            if start.elapsed() >= END_SPIN {
                let mut slot = self.lock();
                slot.callers_sleeping += 1;
                while slot.working == Some(ticket) {
                    slot = self.wake.wait(slot).unwrap_or_else(|p| p.into_inner());
                }
                slot.callers_sleeping -= 1;
                return;
            }
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zstd_piece(data: &[u8]) -> Vec<u8> {
        zstd::bulk::compress(data, 3).unwrap()
    }

    #[test]
    fn every_stream_lands_in_its_place_with_or_without_the_helper() {
        let len = 16 * 1024;
        let plain: Vec<Vec<u8>> = (0..8u32)
            .map(|s| {
                (0..len as u32)
                    .map(|i| (i * 7 + s * 31 % 251) as u8)
                    .collect()
            })
            .collect();
        let coded: Vec<Vec<u8>> = plain.iter().map(|p| zstd_piece(p)).collect();
        let mut pieces: Vec<Piece<'_>> = coded.iter().map(|c| Piece::Coded(c)).collect();
        pieces[2] = Piece::Zeros;
        pieces[5] = Piece::Run(9);
        pieces[6] = Piece::Raw(&plain[6]);
        let mut want = plain.concat();
        want[2 * len..3 * len].fill(0);
        want[5 * len..6 * len].fill(9);
        let mut streams = StreamDecoders::new();
        for parallel in [false, true, true, true] {
            let mut out = vec![0xEEu8; 8 * len];
            decode_pieces(&mut streams, Codec::Zstd, None, &pieces, &mut out, parallel).unwrap();
            assert!(out == want, "parallel {parallel}");
        }
    }

    /// Callers that share the helper from several threads all return, with their bytes: each
    /// waits for the helper to leave its job and is woken when it does. Session 14's hang (a
    /// shared flag for the sleepers lost a wake-up when an earlier caller, woken late, left
    /// its wait after the next caller had gone to sleep; BENCHMARKS.md) needs that late
    /// wake-up: this stress did not reproduce it on the old code in a few runs (also with 8
    /// threads x 1,000 jobs), so it guards the hand-over in general, not that interleaving.
    #[test]
    fn many_callers_sharing_the_helper_all_return() {
        // A fast first stream (one byte repeated) for the caller and a slow second one (four
        // random bits per byte: all Huffman-coded literals) for the helper: the caller runs
        // out first and sleeps until the helper leaves the job.
        let len = 512 * 1024;
        let fast = vec![5u8; len];
        let mut x = 1u32;
        let slow: Vec<u8> = (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 28) as u8
            })
            .collect();
        let coded = [zstd_piece(&fast), zstd_piece(&slow)];
        let want = [fast, slow].concat();
        let (done, finished) = std::sync::mpsc::channel();
        for _ in 0..4 {
            let (coded, want, done) = (coded.clone(), want.clone(), done.clone());
            std::thread::spawn(move || {
                let pieces = [Piece::Coded(&coded[0]), Piece::Coded(&coded[1])];
                let mut streams = StreamDecoders::new();
                let mut out = vec![0u8; want.len()];
                for _ in 0..300 {
                    decode_pieces(&mut streams, Codec::Zstd, None, &pieces, &mut out, true)
                        .unwrap();
                    assert!(out == want);
                }
                done.send(()).unwrap();
            });
        }
        for caller in 0..4 {
            finished
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    panic!("only {caller} of 4 callers returned within 60 s: one sleeps for ever")
                });
        }
    }

    #[test]
    fn the_first_bad_stream_is_reported_and_the_others_still_decoded() {
        let len = 16 * 1024;
        let good = zstd_piece(&vec![3u8; len]);
        let bad = vec![0x28, 0xB5, 0x2F, 0xFD, 1, 2, 3];
        let mut pieces = vec![Piece::Coded(&good); 6];
        pieces[4] = Piece::Coded(&bad);
        pieces[1] = Piece::Coded(&bad);
        let mut streams = StreamDecoders::new();
        for parallel in [false, true] {
            let mut out = vec![0u8; 6 * len];
            let err = decode_pieces(&mut streams, Codec::Zstd, None, &pieces, &mut out, parallel)
                .unwrap_err();
            assert_eq!(err.0, 1, "parallel {parallel}: {err:?}");
            assert!(out[..len].iter().all(|&b| b == 3));
            assert!(out[5 * len..].iter().all(|&b| b == 3));
        }
    }
}
