//! Where the bytes of an array's C-order data live in its decoded chunks, for every array kind:
//! N-dim b2nd/caterva arrays through their [`Grid`], and "linear" sources whose chunks hold
//! consecutive stretches of the data (plain frames, 1-D sources, bcolz carrays of any rank,
//! whose chunks hold whole rows). Byte windows become [`Run`]s; prefetch gets the chunks a
//! window touches and the slab a scan enters next. Pure arithmetic, no I/O.

use std::ops::Range;

use crate::container::ndim::{Grid, NdRuns, Run};

/// The chunk layout of an array's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// A b2nd (or caterva) chunk grid; decoded chunks are `items_per_chunk * itemsize` bytes,
    /// padded.
    Nd {
        /// The chunk and block grid.
        grid: Grid,
        /// Bytes per item.
        itemsize: u64,
    },
    /// Chunk `k` holds data bytes `[k * chunk_bytes, (k + 1) * chunk_bytes)`; the last chunk
    /// may be shorter (a decoded chunk may be longer than its data: the rest is ignored).
    Linear {
        /// Data bytes per chunk (non-zero when `data_len` is).
        chunk_bytes: u64,
        /// Data bytes in total.
        data_len: u64,
    },
}

/// A slab: the chunks a scan in file order needs together, and the data bytes they cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slab {
    /// Chunk numbers (a contiguous range).
    pub chunks: Range<u64>,
    /// Data bytes (relative to the start of the data) whose runs all lie in these chunks.
    pub bytes: Range<u64>,
}

/// Runs of a byte window; see [`Layout::runs`].
// The grid variant carries a [u64; 16] index: it lives on the stack for one window, and
// boxing it would allocate on every read.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Runs<'a> {
    /// Over a chunk grid.
    Nd(NdRuns<'a>),
    /// Over linear chunks.
    Linear(LinearRuns),
}

/// Runs over linear chunks: one per chunk the window crosses.
#[derive(Debug, Clone)]
pub struct LinearRuns {
    chunk_bytes: u64,
    start: u64,
    pos: u64,
    end: u64,
}

impl Iterator for LinearRuns {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        if self.pos >= self.end || self.chunk_bytes == 0 {
            return None;
        }
        let chunk = self.pos / self.chunk_bytes;
        let src = self.pos % self.chunk_bytes;
        let len = (self.chunk_bytes - src).min(self.end - self.pos);
        let run = Run {
            chunk,
            src,
            len,
            dst: self.pos - self.start,
        };
        self.pos += len;
        Some(run)
    }
}

impl Iterator for Runs<'_> {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        match self {
            Runs::Nd(r) => r.next(),
            Runs::Linear(r) => r.next(),
        }
    }
}

impl Layout {
    /// Bytes of the C-order data (the NPY data part).
    pub fn data_len(&self) -> u64 {
        match self {
            Layout::Nd { grid, itemsize } => grid.items().saturating_mul(*itemsize),
            Layout::Linear { data_len, .. } => *data_len,
        }
    }

    /// Number of chunks the data spans.
    pub fn nchunks(&self) -> u64 {
        match self {
            Layout::Nd { grid, .. } => grid.nchunks(),
            Layout::Linear {
                chunk_bytes,
                data_len,
            } => match chunk_bytes {
                0 => 0,
                n => data_len.div_ceil(*n),
            },
        }
    }

    /// Bytes of decoded chunk `chunk` that runs may read (`src + len` never exceeds it): the
    /// padded chunk size for a grid, the chunk's share of the data for linear chunks. A decoded
    /// chunk shorter than this is corrupt.
    pub fn chunk_len(&self, chunk: u64) -> u64 {
        match self {
            Layout::Nd { grid, itemsize } => grid.items_per_chunk().saturating_mul(*itemsize),
            Layout::Linear {
                chunk_bytes,
                data_len,
            } => data_len
                .saturating_sub(chunk.saturating_mul(*chunk_bytes))
                .min(*chunk_bytes),
        }
    }

    /// The runs assembling data bytes `[start, start + len)` (clipped to the data), in window
    /// order, `dst` relative to `start`. No allocation.
    pub fn runs(&self, start: u64, len: u64) -> Runs<'_> {
        match self {
            Layout::Nd { grid, itemsize } => Runs::Nd(grid.runs(*itemsize, start, len)),
            Layout::Linear {
                chunk_bytes,
                data_len,
            } => {
                let start = start.min(*data_len);
                Runs::Linear(LinearRuns {
                    chunk_bytes: *chunk_bytes,
                    start,
                    pos: start,
                    end: start.saturating_add(len).min(*data_len),
                })
            }
        }
    }

    /// The chunks data bytes `[start, start + len)` touch, ascending, without repeats (exact:
    /// a chunk is listed only when a run of the window reads it).
    pub fn chunks(&self, start: u64, len: u64) -> Vec<u64> {
        match self {
            Layout::Nd { grid, itemsize } => {
                if *itemsize == 0 {
                    return Vec::new();
                }
                let end = start.saturating_add(len).min(self.data_len());
                if start >= end {
                    return Vec::new();
                }
                grid.chunks_of_items(start / itemsize, end.div_ceil(*itemsize))
            }
            Layout::Linear { .. } => {
                let mut out: Vec<u64> = self.runs(start, len).map(|r| r.chunk).collect();
                out.dedup();
                out
            }
        }
    }

    /// The slab holding data byte `offset`, or `None` past the end. Grid: the chunks of one
    /// row of the chunk grid along the first axis (every item row of the slab crosses all of
    /// them, so a scan needs them together); linear: the one chunk.
    pub fn slab(&self, offset: u64) -> Option<Slab> {
        if offset >= self.data_len() {
            return None;
        }
        match self {
            Layout::Nd { grid, itemsize } => {
                let (chunks, items) = grid.slab_of_item(offset / itemsize)?;
                let bytes = items.start * itemsize..items.end * itemsize;
                Some(Slab { chunks, bytes })
            }
            Layout::Linear {
                chunk_bytes,
                data_len,
            } => {
                let k = offset.checked_div(*chunk_bytes)?;
                let start = k * chunk_bytes;
                Some(Slab {
                    chunks: k..k + 1,
                    bytes: start..(start + chunk_bytes).min(*data_len),
                })
            }
        }
    }

    /// The band holding data byte `offset`: for a grid, the data bytes of the item rows one
    /// row of blocks covers ([`Grid::band_of_item`]; every block they need lies wholly
    /// inside, so a scan that decodes band after band decodes each block once). `None` past
    /// the end, and for linear chunks (their reads take whole chunks).
    pub fn band(&self, offset: u64) -> Option<Range<u64>> {
        match self {
            Layout::Nd { grid, itemsize } if *itemsize > 0 => {
                let items = grid.band_of_item(offset / itemsize)?;
                Some(items.start * itemsize..items.end * itemsize)
            }
            _ => None,
        }
    }

    /// The slab after the one holding data byte `offset`: what a scan in file order reads
    /// next, and so what it should prefetch. `None` when that is the last slab.
    pub fn next_slab(&self, offset: u64) -> Option<Slab> {
        let cur = self.slab(offset)?;
        self.slab(cur.bytes.end)
    }
}

/// Fills `out` from `runs` (a reference assembler for tests and tools: the filesystem reads
/// through its cache instead). `chunk(k)` returns decoded chunk `k`; consecutive runs of one
/// chunk fetch it once.
///
/// # Errors
///
/// The closure's error, or a message when a run falls outside `out` or the decoded chunk.
pub fn assemble(
    runs: impl IntoIterator<Item = Run>,
    out: &mut [u8],
    chunk: &mut dyn FnMut(u64) -> Result<Vec<u8>, String>,
) -> Result<(), String> {
    let mut held: Option<(u64, Vec<u8>)> = None;
    for r in runs {
        if held.as_ref().is_none_or(|(k, _)| *k != r.chunk) {
            held = Some((r.chunk, chunk(r.chunk)?));
        }
        let Some((_, bytes)) = &held else {
            continue;
        };
        let src = slice_at(bytes, r.src, r.len).ok_or_else(|| {
            format!(
                "chunk {}: {} bytes, run needs {}",
                r.chunk,
                bytes.len(),
                r.src + r.len
            )
        })?;
        let len = src.len();
        let dst = usize::try_from(r.dst)
            .ok()
            .and_then(|d| out.get_mut(d..d.checked_add(len)?))
            .ok_or_else(|| format!("run at {} + {len} outside the window", r.dst))?;
        dst.copy_from_slice(src);
    }
    Ok(())
}

/// `bytes[at..at + len]`, or `None` when out of range.
pub(crate) fn slice_at(bytes: &[u8], at: u64, len: u64) -> Option<&[u8]> {
    let at = usize::try_from(at).ok()?;
    let len = usize::try_from(len).ok()?;
    bytes.get(at..at.checked_add(len)?)
}
