//! Where a remote object's stored chunks lie ([`Extents`]) and how a read inside one is
//! served: the whole compressed chunk fetched in one GET (or found in the disk cache) into
//! the extent cache, reads in order noted, and the prefetch of the chunks that follow
//! (adjacent ones merged into GETs of up to [`MERGE_MAX`]). The request plan as a whole is
//! `plan.rs`'s module doc.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use object_store::GetRange;

use super::RemoteObject;
use crate::remote::cache::{Begin, Flight};
use crate::remote::client::{RemoteError, RemoteErrorKind};
use crate::remote::disk::{DiskCache, Entry};

/// The largest single GET a prefetch merges adjacent chunks into.
const MERGE_MAX: u64 = 8 << 20;

/// Where stored chunks lie: sorted, disjoint extents `starts[i]..ends[i]` (one frame's, or
/// the union of the frames of a `.b2z`'s members).
#[derive(Debug, Default)]
pub(super) struct Extents {
    pub(super) starts: Vec<u64>,
    pub(super) ends: Vec<u64>,
}

impl Extents {
    /// The extents of one frame: chunks at the sorted distinct `starts`, each up to the next,
    /// the last one up to `end` (the end of the frame's chunk area).
    pub(super) fn of_frame(starts: Vec<u64>, end: u64) -> Extents {
        let mut ends: Vec<u64> = starts.iter().skip(1).copied().collect();
        if !starts.is_empty() {
            ends.push(end);
        }
        Extents { starts, ends }
    }

    /// Adds the extents of another frame (one that does not overlap these, as the members of
    /// a zip do not; overlapping ones are left out).
    pub(super) fn merge(&mut self, other: Extents) {
        let mut all: Vec<(u64, u64)> = self
            .starts
            .iter()
            .copied()
            .zip(self.ends.iter().copied())
            .chain(other.starts.into_iter().zip(other.ends))
            .filter(|(s, e)| s < e)
            .collect();
        all.sort_unstable();
        self.starts.clear();
        self.ends.clear();
        for (s, e) in all {
            if self.ends.last().is_some_and(|&last| s < last) {
                continue;
            }
            self.starts.push(s);
            self.ends.push(e);
        }
    }

    /// The extent holding `offset`: its index and byte range.
    pub(super) fn find(&self, offset: u64) -> Option<(usize, Range<u64>)> {
        let i = self
            .starts
            .partition_point(|&s| s <= offset)
            .checked_sub(1)?;
        let r = self.range(i);
        r.contains(&offset).then_some((i, r))
    }

    pub(super) fn range(&self, i: usize) -> Range<u64> {
        self.starts[i]..self.ends[i]
    }
}

impl RemoteObject {
    /// Starts a GET of `range` that completes each flight `(extent, flight)` (adjacent
    /// extents covering the range, in order) with its own buffer of the cache's pool, filled
    /// as the body arrives. The task holds only the cache, never the object (whose runtime
    /// it runs on).
    pub(super) fn spawn_fetch(&self, range: Range<u64>, flights: Vec<(Range<u64>, Arc<Flight>)>) {
        let lens = flights
            .iter()
            .map(|(r, _)| (r.end - r.start) as usize)
            .collect();
        let split = Some((lens, self.cache.pool()));
        let fut = self.client.get_at(
            self.client.path(),
            GetRange::Bounded(range.clone()),
            &self.pin,
            split,
        );
        let cache = Arc::clone(&self.cache);
        let base = self.key_base;
        let disk = self.disk_entries(&flights);
        self.client.rt.spawn(async move {
            let got = fut.await.and_then(|g| {
                if g.range == range {
                    Ok(g.parts)
                } else {
                    Err(RemoteError::new(
                        RemoteErrorKind::Protocol,
                        format!("asked {range:?}, got {:?}", g.range),
                    ))
                }
            });
            match got {
                Ok(parts) => {
                    if let Some((d, entries)) = disk {
                        for (e, b) in entries.into_iter().zip(&parts) {
                            if let Some(e) = e {
                                d.put_later(e, b.clone());
                            }
                        }
                    }
                    for ((er, flight), b) in flights.into_iter().zip(parts) {
                        cache.finish(base + er.start, &flight, Ok(b));
                    }
                }
                Err(e) => {
                    for (er, flight) in flights {
                        cache.finish(base + er.start, &flight, Err(e.clone()));
                    }
                }
            }
        });
    }

    /// The disk cache entry of extent `range`, if there is a disk cache.
    pub(super) fn disk_entry(&self, range: &Range<u64>) -> Option<Entry> {
        let (d, version) = self.disk.as_ref()?;
        d.entry(&self.client.identity, version, range.clone())
    }

    /// The disk cache and the entries of `flights`' extents, if there is a disk cache.
    pub(super) fn disk_entries(
        &self,
        flights: &[(Range<u64>, Arc<Flight>)],
    ) -> Option<(Arc<DiskCache>, Vec<Option<Entry>>)> {
        let (d, _) = self.disk.as_ref()?;
        let entries = flights.iter().map(|(r, _)| self.disk_entry(r)).collect();
        Some((Arc::clone(d), entries))
    }

    /// Extent `range` read from the disk cache, checked.
    pub(super) fn read_disk(&self, range: &Range<u64>) -> Option<Bytes> {
        let e = self.disk_entry(range)?;
        let (d, _) = self.disk.as_ref()?;
        let len = usize::try_from(range.end - range.start).ok()?;
        let b = d.get(&e, len, Some(&self.cache.pool()))?;
        self.client.stats.count_disk_hit();
        Some(b)
    }

    /// Whether extent `range` is in the disk cache (not checked).
    pub(super) fn on_disk(&self, range: &Range<u64>) -> bool {
        match (self.disk_entry(range), &self.disk) {
            (Some(e), Some((d, _))) => d.has(&e),
            _ => false,
        }
    }

    /// The bytes of extent `i` (`range`): cached, awaited, read from disk, or fetched now.
    pub(super) fn extent(&self, i: usize, range: Range<u64>) -> std::io::Result<Bytes> {
        self.note_sequential(i);
        let flight = match self.cache.begin(self.key_base + range.start) {
            Begin::Hit(b) => return Ok(b),
            Begin::Wait(f) => f,
            Begin::Lead(f) => {
                if let Some(b) = self.read_disk(&range) {
                    self.cache
                        .finish(self.key_base + range.start, &f, Ok(b.clone()));
                    return Ok(b);
                }
                self.spawn_fetch(range.clone(), vec![(range.clone(), Arc::clone(&f))]);
                f
            }
        };
        flight
            .wait(self.client.deadline + std::time::Duration::from_secs(1))
            .map_err(|e| self.failed(e, &range))
    }

    /// Records a read of extent `i`; two in order grow the window and prefetch after it.
    pub(super) fn note_sequential(&self, i: usize) {
        let ext = self.extents.read();
        if ext.starts.is_empty() {
            return;
        }
        let len = |j: usize| {
            let r = ext.range(j);
            r.end - r.start
        };
        // Top up only once at least MERGE_MAX (or half the window) can go in one GET: one
        // small GET per chunk read would cost a request's overhead per chunk.
        let top_up =
            |new: Range<usize>| new.map(len).sum::<u64>() >= MERGE_MAX.min(self.window_max / 2);
        let todo = self.seq.lock().unwrap_or_else(|p| p.into_inner()).read(
            i,
            ext.starts.len(),
            self.window_max,
            len,
            |_, _| true,
            top_up,
        );
        if let Some(todo) = todo {
            self.prefetch(todo, &ext);
        }
    }

    /// Fetches the extents `todo` that are neither cached nor under way, adjacent ones merged.
    pub(super) fn prefetch(&self, todo: Range<usize>, ext: &Extents) {
        let mut run: Vec<(Range<u64>, Arc<Flight>)> = Vec::new();
        let mut span: Option<Range<u64>> = None;
        for j in todo {
            let r = ext.range(j);
            let adjacent = span
                .as_ref()
                .is_some_and(|s| s.end == r.start && r.end - s.start <= MERGE_MAX);
            if !adjacent && let Some(s) = span.take() {
                self.spawn_prefetch(s, std::mem::take(&mut run));
            }
            // On disk: left to the read, which finds it there.
            if self.on_disk(&r) {
                if let Some(s) = span.take() {
                    self.spawn_prefetch(s, std::mem::take(&mut run));
                }
                continue;
            }
            match self.cache.begin(self.key_base + r.start) {
                Begin::Lead(f) => {
                    run.push((r.clone(), f));
                    span = Some(span.map_or(r.clone(), |s| s.start..r.end));
                }
                Begin::Hit(_) | Begin::Wait(_) => {
                    if let Some(s) = span.take() {
                        self.spawn_prefetch(s, std::mem::take(&mut run));
                    }
                }
            }
        }
        if let Some(s) = span {
            self.spawn_prefetch(s, run);
        }
    }

    /// [`RemoteObject::spawn_fetch`], counted as a prefetch.
    pub(super) fn spawn_prefetch(
        &self,
        range: Range<u64>,
        flights: Vec<(Range<u64>, Arc<Flight>)>,
    ) {
        self.client.stats.count_prefetch();
        self.spawn_fetch(range, flights);
    }
}
