//! Scans of an assembled file (`array.npy` of an N-dim array: `np.load`, `cp`, `cat`) served
//! a band at a time: the item rows one row of blocks covers ([`Layout::band`]), assembled by
//! decoding each of those blocks once into a small per-thread buffer and copying its rows
//! into a reused band buffer, the next bands decoded ahead on the prefetch threads.
//!
//! Why not whole chunks (the path before, still taken by handles that are not pinned): a
//! file-order read of a 2-D array needs one row of blocks of every chunk of a slab at a time,
//! so whole chunks were decoded into the chunk cache a slab ahead (up to the cache's size of
//! fresh memory, slow to touch on the target VMs) and copied out of memory long evicted from
//! the CPU's caches; a band's blocks are decoded into the same few buffers over and over and
//! copied while they are hot, and the first reply waits for one band, not a slab
//! (BENCHMARKS.md, "Session 32: `np.load` a band at a time").
//!
//! Subtleties:
//! - **One version.** A stream belongs to one handle that pinned its version (a read-only
//!   descriptor, [`super::ReadHint`] aside): its bands are of that version only, so no commit
//!   or other writer can make one stale, and it dies with the handle.
//! - **Single flight, with stealing.** A band is queued for the prefetch threads; a reader
//!   that needs it before a thread took it decodes it itself, one that finds it being decoded
//!   waits for it. A failed band is decoded again by its reader, which gets the error.
//! - **Out of order.** A read up to [`super::access::STREAM_GAP`] before the first band held
//!   (two threads reading one descriptor, the kernel's requests of one large read served out
//!   of order) decodes its own bands before them, which the stream does not keep, and leaves
//!   the bands decoded ahead where they are; only a read farther back starts the stream over
//!   (it dropped every band, those decoded ahead too, before session 33).
//! - **Bounded.** A stream holds the band being read and at most `AHEAD` bytes of bands
//!   after it (bands larger than `BAND_MAX` are not streamed), plus `SPARE` buffers.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::{ArrayId, At, Bytes, ChunkId, ChunkReader, ChunkStore, Core, ReadData};
use crate::container::ContainerError;
use crate::container::npy::{Layout, Npy};

/// Largest band streamed: a 2-D array with very wide rows, or a 3-D array whose first
/// block dimension spans large planes, goes the whole-chunk way instead.
pub const BAND_MAX: u64 = 4 << 20;

/// Bytes of bands decoded ahead of the one being read (at least one band): enough to keep
/// both prefetch threads busy while the reader's requests take the bands in turn.
pub const AHEAD: u64 = 6 << 20;

/// Band buffers a stream keeps for the next bands.
const SPARE: usize = 2;

/// Most bands one read may touch (rows so narrow that a band is a few KiB go the
/// whole-chunk way).
const WANT_BANDS: usize = 16;

/// Most streams alive at once (one per descriptor scanning): what bands hold stays within
/// a few tens of MiB however many descriptors read; the others take the whole-chunk path,
/// inside `cache_size`.
const MAX_STREAMS: usize = 4;

/// Streams alive now.
static STREAMS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Largest per-thread block buffer kept between bands.
const KEEP_BLOCKS: usize = 4 << 20;

/// What a band's decode got to.
enum State {
    /// Waiting for a thread, with the buffer to fill.
    Queued(Vec<u8>),
    /// Being decoded.
    Running,
    /// Decoded.
    Done(Bytes),
    /// Its decode failed: the reader decodes it again and reports the error.
    Failed,
}

/// One band of a stream.
pub(crate) struct Band {
    /// Data bytes of the file (after the NPY header).
    range: Range<u64>,
    state: Mutex<State>,
    settled: Condvar,
}

/// What a band's decode reads: the pinned version, the array and its NPY view (the layout).
#[derive(Clone)]
pub(crate) struct Source {
    store: Arc<dyn ChunkStore>,
    array: ArrayId,
    npy: Arc<Npy>,
}

impl Source {
    fn layout(&self) -> &Layout {
        self.npy.layout()
    }
}

/// One handle's scan of an assembled file: the bands from the one being read on.
pub struct BandStream {
    source: Source,
    bands: VecDeque<Arc<Band>>,
    spare: Vec<Vec<u8>>,
}

impl std::fmt::Debug for BandStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BandStream")
            .field("array", &self.source.array)
            .field("bands", &self.bands.len())
            .finish()
    }
}

impl BandStream {
    /// A stream over `array` of version `store`, assembled as its NPY view `npy` says;
    /// `None` when `MAX_STREAMS` are alive.
    pub fn new(store: Arc<dyn ChunkStore>, array: ArrayId, npy: Arc<Npy>) -> Option<BandStream> {
        use std::sync::atomic::Ordering;
        STREAMS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_STREAMS).then_some(n + 1)
            })
            .ok()?;
        Some(BandStream {
            source: Source { store, array, npy },
            bands: VecDeque::new(),
            spare: Vec::new(),
        })
    }

    /// Whether data bytes `want` can be read band by band: every band they touch is at most
    /// `BAND_MAX` bytes, they touch at most `WANT_BANDS` bands, and when the read starts a
    /// scan (`starts`: nothing is read ahead of it), they begin a band (a large read at a
    /// random place decodes only the blocks it touches, the other way).
    pub fn serves(layout: &Layout, want: &Range<u64>, starts: bool) -> bool {
        let mut at = want.start;
        let mut bands = 0;
        while at < want.end {
            let Some(band) = streamable(layout, at) else {
                return false;
            };
            if starts && bands == 0 && band.start != want.start {
                return false;
            }
            bands += 1;
            if bands > WANT_BANDS {
                return false;
            }
            at = band.end;
        }
        bands > 0
    }

    /// Drops the bands that end at or before `at` (their buffers kept for the next bands
    /// when nobody holds them any more), and every band when `at` lies farther than
    /// [`super::access::STREAM_GAP`] before the first (a new scan: the stream starts over
    /// there). Nearer before the first, a request of this scan served out of order, nothing
    /// is dropped: [`BandStream::behind`] serves it.
    fn retire_before(&mut self, at: u64) {
        let restart = self
            .bands
            .front()
            .is_some_and(|b| b.range.start > at.saturating_add(super::access::STREAM_GAP));
        while let Some(front) = self.bands.front() {
            if !restart && front.range.end > at {
                break;
            }
            let Some(band) = self.bands.pop_front() else {
                break;
            };
            let state = std::mem::replace(&mut *band.state.lock(), State::Failed);
            let buf = match state {
                State::Queued(buf) => Some(buf),
                State::Done(bytes) => Arc::try_unwrap(bytes).ok(),
                State::Running | State::Failed => None,
            };
            if let Some(buf) = buf
                && self.spare.len() < SPARE
            {
                self.spare.push(buf);
            }
        }
    }

    /// The bands from the one holding data byte `from` up to `to`, where the first band held
    /// begins (a read behind the stream: two threads reading one descriptor, the requests of
    /// one large read served out of order): new bands the stream does not hold, for the
    /// reader to decode, so that the bands decoded ahead stay. `None` when one is too large
    /// to stream.
    fn behind(&self, from: u64, to: u64) -> Option<Vec<Arc<Band>>> {
        let mut out = Vec::new();
        let mut at = from;
        while at < to {
            let range = streamable(self.source.layout(), at)?;
            at = range.end;
            out.push(Band::queued(range, Vec::new()));
        }
        Some(out)
    }

    /// Appends the bands after the last one held until `until` (data bytes) is covered,
    /// returning those new bands.
    fn extend_to(&mut self, from: u64, until: u64) -> Vec<Arc<Band>> {
        let mut added = Vec::new();
        let mut at = self.bands.back().map_or(from, |b| b.range.end);
        while at < until {
            let Some(range) = streamable(self.source.layout(), at) else {
                break;
            };
            at = range.end;
            let band = Band::queued(range, self.spare.pop().unwrap_or_default());
            self.bands.push_back(band.clone());
            added.push(band);
        }
        added
    }
}

/// The band holding data byte `at`, when it can be streamed: no larger than `BAND_MAX`.
fn streamable(layout: &Layout, at: u64) -> Option<Range<u64>> {
    layout
        .band(at)
        .filter(|band| band.end > at && band.end - band.start <= BAND_MAX)
}

impl Drop for BandStream {
    fn drop(&mut self) {
        STREAMS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Band {
    /// A band of data bytes `range` waiting to be decoded into `buf`.
    fn queued(range: Range<u64>, buf: Vec<u8>) -> Arc<Band> {
        Arc::new(Band {
            range,
            state: Mutex::new(State::Queued(buf)),
            settled: Condvar::new(),
        })
    }

    /// Decodes the band on a prefetch thread, unless a reader took it or nobody wants it
    /// any more (its stream dropped it).
    pub(crate) fn run_ahead(self: &Arc<Band>, core: &Core, source: &Source) {
        if Arc::strong_count(self) == 1 {
            return;
        }
        let buf = {
            let mut state = self.state.lock();
            match std::mem::replace(&mut *state, State::Running) {
                State::Queued(buf) => buf,
                other => {
                    *state = other;
                    return;
                }
            }
        };
        if let Err(e) = self.decode(core, source, buf) {
            log::debug!(
                "decode ahead of bytes {:?}: {}",
                self.range,
                crate::error::display_chain(&e)
            );
        }
    }

    /// Decodes the band into `buf`, settles its state and wakes its waiters.
    fn decode(&self, core: &Core, source: &Source, buf: Vec<u8>) -> Result<Bytes, ContainerError> {
        core.bands_decoded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A panic must not leave the band running: its readers would wait for ever.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fill(core, source, self.range.clone(), buf)
        }))
        .unwrap_or_else(|_| {
            Err(ContainerError::Malformed {
                path: source.store.path().to_path_buf(),
                offset: self.range.start,
                what: "assembled file".into(),
                why: "the band's decode panicked (a b2fs bug)".into(),
            })
        })
        .map(Arc::new);
        *self.state.lock() = match &res {
            Ok(bytes) => State::Done(bytes.clone()),
            Err(_) => State::Failed,
        };
        self.settled.notify_all();
        res
    }

    /// The band's bytes: decoded by the caller if no thread has started it, waited for if
    /// one has.
    fn take(&self, core: &Core, source: &Source) -> Result<Bytes, ContainerError> {
        let mut state = self.state.lock();
        loop {
            match &*state {
                State::Done(bytes) => return Ok(bytes.clone()),
                State::Running => self.settled.wait(&mut state),
                State::Queued(_) | State::Failed => {
                    let buf = match std::mem::replace(&mut *state, State::Running) {
                        State::Queued(buf) => buf,
                        _ => Vec::new(),
                    };
                    drop(state);
                    return self.decode(core, source, buf);
                }
            }
        }
    }
}

thread_local! {
    /// The decoded blocks of one chunk of a band, before their rows are copied out.
    static BLOCKS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Assembles data bytes `range` into `buf`: per chunk the band crosses, the span of its
/// decoded bytes the band's runs lie in (whole blocks) decoded once, then each run copied;
/// a chunk the cache holds whole is copied from there instead.
fn fill(
    core: &Core,
    source: &Source,
    range: Range<u64>,
    mut buf: Vec<u8>,
) -> Result<Vec<u8>, ContainerError> {
    let len = range.end - range.start;
    let store = source.store.as_ref();
    buf.resize(len as usize, 0);
    let mut runs: Vec<_> = source.layout().runs(range.start, len).collect();
    runs.sort_by_key(|r| r.chunk);
    for own in runs.chunk_by(|a, b| a.chunk == b.chunk) {
        let id = ChunkId::new(source.array, own[0].chunk as usize);
        let at = At::new(store, id);
        let short = || super::gather::short_chunk(store, id);
        if let Some(whole) = core.cache.get(&at.key) {
            // Decoded already (its chunk file was read, or a page fault's chunk).
            for run in own {
                let piece = whole
                    .get(run.src as usize..(run.src + run.len) as usize)
                    .ok_or_else(short)?;
                buf[run.dst as usize..(run.dst + run.len) as usize].copy_from_slice(piece);
            }
            continue;
        }
        if let [run] = own {
            // One run (a chunk as wide as the array): straight into the band.
            let dst = &mut buf[run.dst as usize..(run.dst + run.len) as usize];
            if core.decode_range_into(&at, run.src as usize, dst, false)? != dst.len() {
                return Err(short());
            }
            continue;
        }
        // The span of the chunk's decoded bytes its runs lie in: whole blocks.
        let lo = own.iter().map(|r| r.src).min().unwrap_or(0);
        let hi = own.iter().map(|r| r.src + r.len).max().unwrap_or(0);
        BLOCKS.with_borrow_mut(|blocks| {
            blocks.resize((hi - lo) as usize, 0);
            if core.decode_range_into(&at, lo as usize, blocks, false)? != blocks.len() {
                return Err(short());
            }
            for run in own {
                let from = (run.src - lo) as usize;
                let to = run.dst as usize;
                let n = run.len as usize;
                buf[to..to + n].copy_from_slice(&blocks[from..from + n]);
            }
            if blocks.capacity() > KEEP_BLOCKS {
                *blocks = Vec::new();
            }
            Ok(())
        })?;
    }
    Ok(buf)
}

impl ChunkReader {
    /// Data bytes `want` of an assembled file read through `stream` (its handle's scan): the
    /// bands they lie in, decoded by the prefetch threads ahead of the reader or by the
    /// reader itself, and when `ahead`, the bands of the next `AHEAD` bytes queued for
    /// the prefetch threads. `want` must be [`BandStream::serves`]. `None` when the bands
    /// held cannot cover it (a band past `BAND_MAX` after it) or no stream could be made
    /// (`MAX_STREAMS` alive): the caller reads it the other way.
    ///
    /// # Errors
    /// A chunk of a band that cannot be read or decoded.
    pub fn band_read(
        &self,
        stream: &Mutex<Option<BandStream>>,
        new_stream: impl FnOnce() -> Option<BandStream>,
        want: Range<u64>,
        ahead: bool,
    ) -> Result<Option<ReadData>, ContainerError> {
        let (needed, source) = {
            let mut guard = stream.lock();
            if guard.is_none() {
                *guard = new_stream();
            }
            let Some(s) = guard.as_mut() else {
                return Ok(None);
            };
            s.retire_before(want.start);
            let first = s.bands.front().map_or(want.start, |b| b.range.start);
            // Behind the bands held: its own bands before them, the bands ahead kept.
            let mut needed = match want.start < first {
                true => match s.behind(want.start, first.min(want.end)) {
                    Some(bands) => bands,
                    None => return Ok(None),
                },
                false => Vec::new(),
            };
            let reach = if ahead {
                // At least the band after the last one `want` touches.
                let last = s.source.layout().band(want.end - 1);
                let after = last.map_or(want.end, |b| b.end + 1);
                (want.end + AHEAD).max(after)
            } else {
                want.end
            };
            for band in s.extend_to(first, reach) {
                if band.range.start >= want.end {
                    self.queue_band(band, &s.source);
                }
            }
            needed.extend(
                s.bands
                    .iter()
                    .filter(|b| b.range.start < want.end && b.range.end > want.start)
                    .cloned(),
            );
            let covered = needed.first().is_some_and(|b| b.range.start <= want.start)
                && needed.last().is_some_and(|b| b.range.end >= want.end)
                && needed
                    .windows(2)
                    .all(|w| w[0].range.end == w[1].range.start);
            if !covered {
                return Ok(None);
            }
            (needed, s.source.clone())
        };
        let core = &self.core;
        // The bands are contiguous and cover `want`.
        if let [band] = needed.as_slice() {
            let bytes = band.take(core, &source)?;
            let at = (want.start - band.range.start) as usize;
            let len = (want.end - want.start) as usize;
            return Ok(Some(ReadData::Chunk(bytes, at..at + len)));
        }
        let mut out = super::Reused::take((want.end - want.start) as usize);
        for band in &needed {
            let bytes = band.take(core, &source)?;
            let from = want.start.max(band.range.start);
            let to = want.end.min(band.range.end);
            let piece =
                &bytes[(from - band.range.start) as usize..(to - band.range.start) as usize];
            let dst = (from - want.start) as usize;
            out[dst..dst + piece.len()].copy_from_slice(piece);
        }
        Ok(Some(ReadData::Reused(out)))
    }

    /// Hands `band` to the prefetch threads (nothing when there are none or their queue is
    /// full: its reader then decodes it).
    fn queue_band(&self, band: Arc<Band>, source: &Source) {
        if let Some(p) = &self.prefetch {
            p.request_band(band, source.clone());
        }
    }
}
