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

use std::io::{IsTerminal, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::codec::{self, CodecError, Decoder};
use crate::container::store::{Group, Location, Node};
use crate::container::{Array, Collection, Container, Opened, SourceKind};
use crate::error::display_chain;

/// Chunks declaring up to this many bytes are decoded whole into the thread's buffer.
pub(super) const WHOLE_MAX: usize = 64 << 20;
/// Larger chunks are decoded by windows of about this many bytes (rounded to whole blocks).
pub(super) const WINDOW: usize = 16 << 20;
/// Sources with at least this many chunks get a progress bar (on a terminal).
const PROGRESS_MIN_CHUNKS: u64 = 64;
/// Larger compressed buffers are not kept for the thread's next chunk.
const KEEP_COMPRESSED: usize = 64 << 20;
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
/// Special chunks (a repeated value, zeros) are checked on their first bytes only.
const SPECIAL_CHECK: usize = 4096;

/// One array to check.
#[derive(Debug)]
pub(super) struct Target<'a> {
    /// The leaf key (`/a/b`), column name (`price`, `/t/price` in a collection), or `None` for
    /// a single array.
    pub label: Option<String>,
    /// The array.
    pub array: &'a Array,
}

/// A damaged chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The array's label (`Target::label`).
    pub array: Option<String>,
    /// The chunk index.
    pub chunk: usize,
    /// Why it cannot be read back.
    pub reason: String,
    /// Whether its chunk file is missing (a bcolz `.blp`; also in [`Report::missing`]).
    pub missing: bool,
}

/// A structure that cannot be read (a leaf that does not open, a whole source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The leaf key or array label; `None` for the source itself.
    pub array: Option<String>,
    /// Why.
    pub reason: String,
}

/// The chunk files a bcolz array lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The array's label (`Target::label`).
    pub array: Option<String>,
    /// Chunks its metadata declares.
    pub declared: u64,
    /// Chunks without a file (each is also a damaged chunk).
    pub count: u64,
    /// The missing chunks as runs of indices, the first [`MISSING_RUNS`] of them.
    pub runs: Vec<Range<usize>>,
}

/// What a check found.
#[derive(Debug, Default)]
pub struct Report {
    /// Arrays checked.
    pub arrays: usize,
    /// Chunks checked (read and decoded, or special): a bcolz chunk whose file is missing is
    /// not checked, it is counted in [`Report::missing`] ([`Report::missing_chunks`]).
    pub chunks: u64,
    /// Chunks stored as special index entries (no bytes to decode).
    pub special: u64,
    /// Uncompressed bytes of the chunks decoded.
    pub decoded_bytes: u64,
    /// Damaged chunks, in array order then chunk order (at most [`MAX_LISTED`]).
    pub damaged: Vec<Damage>,
    /// Damaged chunks in all, listed or not.
    pub damaged_count: u64,
    /// bcolz arrays with missing chunk files, in array order.
    pub missing: Vec<Missing>,
    /// Structures that cannot be read.
    pub structure: Vec<Problem>,
    /// Leaves not checked, and why (references to remote arrays).
    pub skipped: Vec<Problem>,
    /// Whether the check stopped early, its damaged chunks over the caller's limit
    /// (`damaged_count` is then a lower bound).
    pub gave_up: bool,
}

impl Report {
    /// Whether nothing is damaged.
    pub fn sound(&self) -> bool {
        self.damaged_count == 0 && self.structure.is_empty()
    }

    /// Chunks declared but not checked because their bcolz chunk file is missing (each is
    /// also a damaged chunk).
    pub fn missing_chunks(&self) -> u64 {
        self.missing.iter().map(|m| m.count).sum()
    }

    /// The JSON form `verify --json` prints (without `source` and `kind`).
    pub fn to_json(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("sound".into(), json!(self.sound()));
        m.insert("arrays".into(), json!(self.arrays));
        m.insert("chunks".into(), json!(self.chunks));
        m.insert("missing_chunks".into(), json!(self.missing_chunks()));
        m.insert("special_chunks".into(), json!(self.special));
        m.insert("decoded_bytes".into(), json!(self.decoded_bytes));
        m.insert("damaged_chunks".into(), json!(self.damaged_count));
        m.insert(
            "damaged_listed".into(),
            json!(self.damaged.len() as u64 == self.damaged_count),
        );
        m.insert(
            "damaged".into(),
            Value::Array(self.damaged.iter().map(damage_json).collect()),
        );
        let problems = |v: &[Problem]| {
            Value::Array(
                v.iter()
                    .map(|p| json!({"array": p.array, "reason": p.reason}))
                    .collect(),
            )
        };
        m.insert(
            "missing".into(),
            Value::Array(
                self.missing
                    .iter()
                    .map(|x| {
                        json!({
                            "array": x.array,
                            "declared_chunks": x.declared,
                            "missing_chunks": x.count,
                            "runs": x.runs.iter().map(|r| [r.start, r.end - 1]).collect::<Vec<_>>(),
                        })
                    })
                    .collect(),
            ),
        );
        m.insert("structure".into(), problems(&self.structure));
        m.insert("skipped".into(), problems(&self.skipped));
        m
    }
}

/// `{"array": ..., "chunk": N, "reason": ...}`.
pub fn damage_json(d: &Damage) -> Value {
    json!({"array": d.array, "chunk": d.chunk, "reason": d.reason})
}

/// The arrays of an opened source, and the problems met finding them (leaves that do not
/// open). Opens every leaf of a collection.
pub(super) fn targets<'a>(opened: &'a Opened, report: &mut Report) -> Vec<Target<'a>> {
    let mut out = Vec::new();
    match opened {
        Opened::Single(c) => container_targets(c, None, &mut out),
        Opened::Collection(c) => collection_targets(c, "", &mut out, report),
    }
    out
}

fn container_targets<'a>(c: &'a Container, label: Option<&str>, out: &mut Vec<Target<'a>>) {
    match c {
        Container::Array(a) => out.push(Target {
            label: label.map(str::to_owned),
            array: a,
        }),
        Container::Table(t) => {
            for (name, a) in &t.columns {
                out.push(Target {
                    label: Some(match label {
                        Some(l) => format!("{l}/{name}"),
                        None => name.clone(),
                    }),
                    array: a,
                });
            }
        }
    }
}

fn collection_targets<'a>(
    c: &'a Collection,
    prefix: &str,
    out: &mut Vec<Target<'a>>,
    report: &mut Report,
) {
    if let Some(e) = c.estore_array() {
        out.push(Target {
            label: Some(format!("{prefix}/embed.b2e")),
            array: e,
        });
    }
    group_targets(c.root(), prefix, out, report);
}

fn group_targets<'a>(g: &'a Group, prefix: &str, out: &mut Vec<Target<'a>>, report: &mut Report) {
    if let Some(carrier) = g.carrier() {
        let key = format!("{prefix}{}", carrier.key());
        match carrier.open() {
            Ok(c) => container_targets(c, Some(&key), out),
            Err(e) => report.structure.push(Problem {
                array: Some(key),
                reason: display_chain(&*e),
            }),
        }
    }
    for n in &g.children {
        match n {
            Node::Group(sub) => group_targets(sub, prefix, out, report),
            Node::Leaf(l) => {
                let key = format!("{prefix}{}", l.key());
                if let Location::Reference(v) = l.location() {
                    report.skipped.push(Problem {
                        array: Some(key),
                        reason: format!("a reference to a remote array ({v})"),
                    });
                    continue;
                }
                match l.open() {
                    Ok(c) => container_targets(c, Some(&key), out),
                    Err(e) => report.structure.push(Problem {
                        array: Some(key),
                        reason: display_chain(&*e),
                    }),
                }
            }
            Node::Store(s) => {
                let name = format!("{prefix}{}/{}", g_key(g), n.name());
                collection_targets(s, &name, out, report);
            }
        }
    }
}

/// The group's key without its trailing `/` (the root is ``).
fn g_key(g: &Group) -> &str {
    g.key.trim_end_matches('/')
}

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
        let a = target.array;
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
                            match w.check_memo(t, target.array, i) {
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

/// What checking one sound chunk did.
enum Outcome {
    /// A special index entry (nothing stored).
    Special,
    /// Decoded this many bytes.
    Decoded(usize),
}

/// Which stored chunk a memo is for: (target, index entry, last chunk of its array).
type MemoKey = (usize, i64, bool);

/// One checking thread's decoder and buffers.
#[derive(Default)]
struct Worker {
    decoder: Decoder,
    out: Vec<u8>,
    compressed: Vec<u8>,
    /// The last stored chunk checked: (target, index entry, last chunk of its array) and the
    /// outcome. Index entries sharing stored bytes (a repeated index) are decoded once.
    memo: Option<(MemoKey, Result<usize, Arc<str>>)>,
}

impl Worker {
    /// [`Worker::check`] through the memo of the last stored chunk.
    fn check_memo(&mut self, t: usize, a: &Array, i: usize) -> Result<Outcome, Arc<str>> {
        let Some(entry) = a.frame_index_entry(i) else {
            return self.check(a, i).map_err(Arc::from);
        };
        if entry < 0 {
            return Ok(Outcome::Special);
        }
        let key = (t, entry, i + 1 == a.nchunks());
        if let Some((k, r)) = &self.memo {
            if *k == key {
                return r.clone().map(Outcome::Decoded);
            }
        }
        let r = self.check(a, i).map_err(Arc::<str>::from);
        if let Ok(Outcome::Decoded(n)) = &r {
            self.memo = Some((key, Ok(*n)));
        } else if let Err(e) = &r {
            self.memo = Some((key, Err(e.clone())));
        }
        r
    }

    /// Checks chunk `i` of `a`: `Err(reason)` when it cannot be read back.
    fn check(&mut self, a: &Array, i: usize) -> Result<Outcome, String> {
        if a.frame_index_entry(i).is_some_and(|e| e < 0) {
            return Ok(Outcome::Special);
        }
        let expected = a.chunk_nbytes(i).map_err(|e| display_chain(&e))?;
        let bcolz = a.kind() == SourceKind::BcolzCarray;
        let full = a.chunksize();
        let Worker {
            decoder,
            out,
            compressed,
            ..
        } = self;
        let mut res = None;
        let mapped = a.with_mapped_chunk(i, false, &mut |c| {
            res = Some(guarded(|| decode(decoder, out, c, expected, bcolz, full)));
        });
        match (mapped, res) {
            (Ok(true), Some(r)) => return r.map(Outcome::Decoded),
            (Err(e), _) => return Err(display_chain(&e)),
            _ => {}
        }
        let n = a
            .chunk_bytes_into(i, compressed)
            .map_err(|e| display_chain(&e))?;
        let r = guarded(|| decode(decoder, out, &compressed[..n], expected, bcolz, full));
        if compressed.capacity() > KEEP_COMPRESSED {
            *compressed = Vec::new();
        }
        if out.capacity() > WHOLE_MAX {
            *out = Vec::new();
        }
        r.map(Outcome::Decoded)
    }
}

/// Runs a decode, turning a panic (a decoder bug on hostile input) into a damaged chunk.
fn guarded(f: impl FnOnce() -> Result<usize, String>) -> Result<usize, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err("the decoder panicked on this chunk (a b2fs bug; treated as damaged)".into())
    })
}

/// Decodes `chunk` (which must hold `expected` bytes; a bcolz chunk may hold more, up to a
/// full chunk of `full` bytes) into `out`, whole or by windows. Returns the bytes decoded.
fn decode(
    dec: &mut Decoder,
    out: &mut Vec<u8>,
    chunk: &[u8],
    expected: usize,
    bcolz: bool,
    full: usize,
) -> Result<usize, String> {
    let codec_err = |e: CodecError| e.to_string();
    let h = codec::chunk_info(chunk).map_err(codec_err)?;
    let size_ok = if bcolz {
        h.nbytes >= expected && h.nbytes <= full.max(expected)
    } else {
        h.nbytes == expected
    };
    if !size_ok {
        return Err(format!(
            "the chunk header says {} bytes, its slot holds {expected}",
            h.nbytes
        ));
    }
    if h.cbytes > chunk.len() {
        return Err(format!(
            "the chunk header says {} compressed bytes, {} are stored",
            h.cbytes,
            chunk.len()
        ));
    }
    let n = h.nbytes;
    if h.special() != codec::SpecialKind::None {
        // A pattern: its first bytes show the pattern is there; the rest repeats it.
        let len = n.min(SPECIAL_CHECK);
        crate::mem::grow_discarding(out, len);
        let got = dec
            .decompress_range(chunk, 0, &mut out[..len])
            .map_err(codec_err)?;
        return if got == len {
            Ok(n)
        } else {
            Err(format!("decoded {got} bytes, the header says {n}"))
        };
    }
    if n <= WHOLE_MAX {
        crate::mem::grow_discarding(out, n);
        dec.decompress_into(chunk, &mut out[..n])
            .map_err(codec_err)?;
        return Ok(n);
    }
    let bs = h.blocksize.max(1);
    let window = (WINDOW / bs).max(1).saturating_mul(bs);
    crate::mem::grow_discarding(out, window.min(n));
    let mut at = 0;
    while at < n {
        let len = window.min(n - at);
        let got = dec
            .decompress_range(chunk, at, &mut out[..len])
            .map_err(codec_err)?;
        if got != len {
            return Err(format!("decoded {} bytes, the header says {n}", at + got));
        }
        at += len;
    }
    Ok(n)
}

/// Threads to check on: every core.
pub(super) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// A label for people: the array's label, or `the array`.
pub(super) fn label(a: &Option<String>) -> &str {
    a.as_deref().unwrap_or("(array)")
}
