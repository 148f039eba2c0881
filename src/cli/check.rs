//! The checking engine behind `b2fs verify` and `b2fs salvage`: every array of an opened
//! source (a single array, a ctable's columns, every leaf of a store or directory of sources,
//! a store's `embed.b2e` and `__vlmeta__` carriers), every chunk decoded on every core, and a
//! [`Report`] of what is damaged: chunks (array label, index, reason) and structures (a leaf
//! that cannot be opened, with the reason).
//!
//! A chunk is sound when its stored bytes can be read, its header parses, it declares the
//! uncompressed size its slot needs (frames: exactly the slot's size; bcolz: at least the
//! leftover and at most a full chunk) and it decodes without error. Special index entries
//! (zeros, NaN, uninitialised) have no bytes and are sound by construction.
//!
//! Memory is bounded whatever the input: chunks are decoded into one reused buffer per
//! thread, whole up to `WHOLE_MAX` bytes and by windows of about `WINDOW` bytes (whole
//! blocks) beyond, so a chunk declaring gigabytes costs at most a window plus the codec's own
//! block scratch; compressed bytes of contiguous frames are decoded straight from the
//! mapping, others read into a reused per-thread buffer (at most the stored chunk's size).
//!
//! The parts: this file walks the chunks of every target on every core (and counts the
//! missing chunk files of bcolz arrays); `targets.rs` finds the arrays of a source;
//! `chunk.rs` checks one chunk; `report.rs` is what a check found.

use std::io::{IsTerminal, Write};
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::display_chain;
use chunk::{Outcome, Worker};
use targets::Target;

mod chunk;
mod report;
mod targets;

pub use report::{Damage, LenientLeaf, Missing, Problem, Report, damage_json};
pub(super) use targets::targets;

/// Sources with at least this many chunks get a progress bar (on a terminal).
const PROGRESS_MIN_CHUNKS: u64 = 64;
/// Chunks a thread claims at a time (a hostile frame may declare millions).
const BATCH: u64 = 256;
/// Damaged chunks listed at most (the rest are counted): a hostile frame whose millions of
/// index entries share one broken chunk must not need gigabytes of report.
pub const MAX_LISTED: usize = 100_000;
/// Missing chunk files `verify` lists as damaged chunks per array (all are counted, and
/// their runs summed up in [`Report::missing`]): a `meta/sizes` declaring 1e15 chunks beside
/// ten files is one damaged number, not a million-line report.
pub const MISSING_LISTED: usize = 1_000;
/// Runs of missing chunks listed per array in [`Missing::runs`].
pub const MISSING_RUNS: usize = 1_000;

/// One stretch of the walk: chunks `first..` of target `target`, from position `start` of
/// the whole walk up to the next segment's start.
struct Segment {
    target: usize,
    first: usize,
    start: u64,
}

/// Checks every chunk of every target on `threads` threads, adding to `report`; draws a
/// progress bar on stderr when `progress` and stderr is a terminal. Of a bcolz array's
/// chunks whose file is missing, the first `missing_listed` are listed as damaged (all are
/// counted, and summed up in [`Report::missing`]). With `give_up_over`, the check stops as
/// soon as it has found more damaged chunks than that ([`Report::gave_up`]): before listing
/// any missing chunk or decoding anything when the missing chunks alone are more.
pub(super) fn check(
    targets: &[Target<'_>],
    threads: usize,
    progress: bool,
    missing_listed: usize,
    give_up_over: Option<u64>,
    report: &mut Report,
) {
    report.arrays += targets.len();
    let mut segments = Vec::with_capacity(targets.len());
    let mut total = 0u64;
    // Missing chunk files, listed before the walk (they take no decoding).
    let mut found_missing: Vec<(usize, Damage)> = Vec::new();
    let mut bcolz_runs: Vec<(usize, Vec<Range<usize>>)> = Vec::new();
    for (t, target) in targets.iter().enumerate() {
        let a = &target.array;
        let n = a.nchunks() as u64;
        // An index that is one repeated special entry (python-blosc2's `zeros` of any size):
        // every chunk is special, counted at once rather than walked (hostile inputs declare
        // hundreds of millions).
        if a.frame_repeated_entry().is_some_and(|e| e < 0) {
            report.chunks += n;
            report.special += n;
            continue;
        }
        // A bcolz array: only the chunks whose file is there are walked (its `meta/sizes`
        // may declare 1e15 chunks); the others are counted at once.
        let present = a.bcolz_present_chunks();
        let bcolz = present.is_some();
        let runs = match present {
            None => std::iter::once(0..a.nchunks()).collect(),
            Some(Ok(runs)) => runs,
            Some(Err(e)) => {
                report.structure.push(Problem {
                    array: target.label.clone(),
                    reason: display_chain(&e),
                });
                continue;
            }
        };
        for r in &runs {
            if !r.is_empty() {
                segments.push(Segment {
                    target: t,
                    first: r.start,
                    start: total,
                });
                total += r.len() as u64;
                report.chunks += r.len() as u64;
            }
        }
        if bcolz {
            bcolz_runs.push((t, runs));
        }
    }
    let missing_total: u64 = bcolz_runs
        .iter()
        .map(|(t, runs)| {
            let have: usize = runs.iter().map(ExactSizeIterator::len).sum();
            targets[*t].array.nchunks().saturating_sub(have) as u64
        })
        .sum();
    let over = |n: u64| give_up_over.is_some_and(|limit| n > limit);
    let listed = if over(missing_total) {
        0
    } else {
        missing_listed
    };
    for (t, runs) in &bcolz_runs {
        missing(*t, &targets[*t], runs, listed, report, &mut found_missing);
    }
    if over(missing_total) {
        report.gave_up = true;
        return;
    }
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let special = AtomicU64::new(0);
    let decoded = AtomicU64::new(0);
    let count = AtomicU64::new(0);
    let listed = std::sync::atomic::AtomicUsize::new(found_missing.len());
    let gave_up = std::sync::atomic::AtomicBool::new(false);
    let found: Mutex<Vec<(usize, Damage)>> = Mutex::new(Vec::new());
    let threads = threads
        .clamp(1, 256)
        .min(usize::try_from(total).unwrap_or(1).max(1));
    let bar = progress && total >= PROGRESS_MIN_CHUNKS && std::io::stderr().is_terminal();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut w = Worker::default();
                    loop {
                        if over(count.load(Ordering::Relaxed) + missing_total) {
                            gave_up.store(true, Ordering::Relaxed);
                            break;
                        }
                        let first = next.fetch_add(BATCH, Ordering::Relaxed);
                        if first >= total {
                            break;
                        }
                        let end = (first + BATCH).min(total);
                        let (mut n_special, mut n_decoded, mut n_bad) = (0u64, 0u64, 0u64);
                        let mut g = segments.partition_point(|sg| sg.start <= first) - 1;
                        for k in first..end {
                            while segments.get(g + 1).is_some_and(|sg| sg.start <= k) {
                                g += 1;
                            }
                            let Segment { target: t, .. } = segments[g];
                            let target = &targets[t];
                            let i = segments[g].first + (k - segments[g].start) as usize;
                            match w.check_memo(t, &target.array, i) {
                                Ok(Outcome::Special) => n_special += 1,
                                Ok(Outcome::Decoded(n)) => n_decoded += n as u64,
                                Err(reason) => {
                                    n_bad += 1;
                                    if listed.load(Ordering::Relaxed) < MAX_LISTED {
                                        listed.fetch_add(1, Ordering::Relaxed);
                                        let d = Damage {
                                            array: target.label.clone(),
                                            chunk: i,
                                            reason: reason.to_string(),
                                            missing: false,
                                        };
                                        found
                                            .lock()
                                            .unwrap_or_else(|e| e.into_inner())
                                            .push((t, d));
                                    }
                                }
                            }
                        }
                        special.fetch_add(n_special, Ordering::Relaxed);
                        count.fetch_add(n_bad, Ordering::Relaxed);
                        decoded.fetch_add(n_decoded, Ordering::Relaxed);
                        done.fetch_add((first + BATCH).min(total) - first, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        if bar {
            let started = Instant::now();
            while !handles.iter().all(|h| h.is_finished()) {
                draw(done.load(Ordering::Relaxed), total, started);
                std::thread::sleep(Duration::from_millis(100));
            }
            draw(total, total, started);
            eprintln!();
        }
        for h in handles {
            let _ = h.join();
        }
    });
    report.gave_up |= gave_up.into_inner();
    report.special += special.into_inner();
    report.decoded_bytes += decoded.into_inner();
    report.damaged_count += count.into_inner();
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    found.extend(found_missing);
    found.sort_by_key(|(t, d)| (*t, d.chunk));
    report.damaged.extend(found.into_iter().map(|(_, d)| d));
}

/// Counts and lists the chunks of bcolz target `t` that are in none of the sorted `present`
/// runs: a [`Missing`] summary in `report`, and the first `listed` as damaged chunks into
/// `found` (within [`MAX_LISTED`] in all). Costs the runs present and the chunks listed,
/// not the chunks missing.
fn missing(
    t: usize,
    target: &Target<'_>,
    present: &[Range<usize>],
    listed: usize,
    report: &mut Report,
    found: &mut Vec<(usize, Damage)>,
) {
    let n = target.array.nchunks();
    let have: usize = present.iter().map(ExactSizeIterator::len).sum();
    if have == n {
        return;
    }
    // The runs of missing chunks, from the runs present (and the end).
    let gaps = || {
        let mut at = 0;
        present
            .iter()
            .cloned()
            .chain(std::iter::once(n..n))
            .filter_map(move |r| {
                let gap = at..r.start;
                at = r.end;
                (!gap.is_empty()).then_some(gap)
            })
    };
    let count = (n - have) as u64;
    let budget = listed.min(MAX_LISTED.saturating_sub(found.len()));
    for i in gaps().flatten().take(budget) {
        let file = target.array.bcolz_chunk_path(i).unwrap_or_default();
        found.push((
            t,
            Damage {
                array: target.label.clone(),
                chunk: i,
                reason: format!("its chunk file {} is missing", file.display()),
                missing: true,
            },
        ));
    }
    report.damaged_count += count;
    report.missing.push(Missing {
        array: target.label.clone(),
        declared: n as u64,
        count,
        runs: gaps().take(MISSING_RUNS).collect(),
    });
}

fn draw(done: u64, total: u64, started: Instant) {
    let width = 40u64;
    let filled = (done.saturating_mul(width) / total.max(1)).min(width) as usize;
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r[{}{}] {done}/{total} chunks, {:.1}s",
        "#".repeat(filled),
        " ".repeat(width as usize - filled),
        started.elapsed().as_secs_f64()
    );
    let _ = err.flush();
}

/// Threads to check on: every core.
pub(super) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// A label for people: the array's label, or `the array`.
pub(super) fn label(a: &Option<String>) -> &str {
    a.as_deref().unwrap_or("(array)")
}
