//! Partial chunk reads for small random reads: fetch only the header, the block-start table
//! and the streams of the blocks a read overlaps, as C-Blosc2 does with its "lazy chunks",
//! instead of the whole compressed chunk (megabytes for a 4 KiB read).
//!
//! The result is a compact chunk in a reused per-thread buffer: the header with its cbytes
//! cut, the block-start table with the needed blocks' starts moved, and those blocks'
//! streams right after the table. It is a valid chunk for a range decode of the read's
//! window (the decoder reads no other block's start), and it takes a block's worth of
//! memory, always the same pages, instead of a chunk-sized buffer whose pages a run of
//! random reads would fault in one by one. Chunks whose range decode needs more than its own
//! blocks are not handled here and go the whole-chunk way: memcpyed, special, VL-block and
//! dictionary chunks, and DELTA (which also needs block 0).
//!
//! The bytes come from [`ChunkStore::chunk_read_at`] (for an [`crate::container::Array`]:
//! `Array::chunk_read_at`, which bound-checks every window against the chunk's cbytes), so
//! contiguous frames, sparse frames and bcolz carrays (16-byte Blosc1 headers) all qualify.
//! A chunk's header and block-start table are read once per chunk version and kept
//! ([`Layouts`]); later reads of the chunk read their streams alone, with
//! [`ChunkStore::chunk_read_at`] given the `cbytes` already known (a contiguous frame: one
//! `pread`, where the header, the table, the frame's check of the chunk's cbytes and the
//! streams took four). Measured:
//! BENCHMARKS.md, random cold 4 KiB reads (sessions 13 and 14).
//!
//! See: `docs/format/CHUNK.md` section 1 (header, flags, bstarts).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::store::ChunkStore;
use super::{ChunkId, ChunkKey};
use crate::codec::{self, SpecialKind, filter_id};
use crate::container::ContainerError;

/// Largest block-start table read eagerly (bytes); bigger tables mean tiny blocks, where a
/// whole-chunk read is as good.
const MAX_BSTARTS: usize = 64 * 1024;

thread_local! {
    /// The buffer partial reads build their compact chunk in, reused.
    static PARTIAL: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Largest partial-read buffer a thread keeps for the next read (a read of many blocks
/// may need more, once).
const KEEP_PARTIAL: usize = 4 << 20;

/// Bytes read eagerly with the header: enough for the block-start table of up to 1024 blocks.
const HEAD_READ: usize = 32 + 4096;

/// Most bytes of chunk layouts [`Layouts`] keeps (a chunk of 64 blocks takes about 600);
/// past it, it starts over.
const LAYOUTS_BUDGET: usize = 4 << 20;

/// What a chunk's partial reads need besides its streams.
#[derive(Debug, Clone)]
enum Layout {
    /// Its range decodes need more than their blocks' streams (see above), or the store
    /// cannot read parts of it: the whole-chunk way.
    Whole,
    /// Its header and block-start table.
    Parts(Arc<Table>),
}

/// A chunk's header and block-start table, as stored, and what partial reads take from them.
#[derive(Debug)]
struct Table {
    /// The chunk's bytes before its first stream: the header, then the table.
    head: Box<[u8]>,
    /// Every block's start, sorted: a block's streams end at the next larger start.
    sorted: Box<[u32]>,
    cbytes: usize,
    blocksize: usize,
    nbytes: usize,
}

impl Layout {
    /// Bytes this entry takes in [`Layouts`] (counted against [`LAYOUTS_BUDGET`]).
    fn weight(&self) -> usize {
        64 + match self {
            Layout::Whole => 0,
            Layout::Parts(t) => t.head.len() + 4 * t.sorted.len(),
        }
    }
}

/// The layouts of the chunks partial reads have seen, by chunk version ([`ChunkKey`]): a
/// cold small read of a chunk seen before reads only its blocks' streams, with one `pread`,
/// instead of the header and table again first (three more). Bounded by
/// [`LAYOUTS_BUDGET`]; a commit or another writer's change gives changed chunks new keys,
/// and [`Layouts::forget`] drops the entries of chunks whose key outlives a change.
#[derive(Debug, Default)]
pub(super) struct Layouts {
    /// The entries, and the bytes they take.
    inner: Mutex<(HashMap<ChunkKey, Layout>, usize)>,
}

impl Layouts {
    fn get(&self, key: &ChunkKey) -> Option<Layout> {
        self.inner.lock().0.get(key).cloned()
    }

    fn insert(&self, key: ChunkKey, layout: Layout) {
        let mut inner = self.inner.lock();
        let (map, bytes) = &mut *inner;
        if *bytes + layout.weight() > LAYOUTS_BUDGET {
            map.clear();
            *bytes = 0;
        }
        *bytes += layout.weight();
        if let Some(old) = map.insert(key, layout) {
            *bytes -= old.weight();
        }
    }

    /// Drops the layouts of the chunks `which` selects (every version).
    pub(super) fn forget(&self, which: impl Fn(ChunkId) -> bool) {
        let mut inner = self.inner.lock();
        let (map, bytes) = &mut *inner;
        map.retain(|k, layout| {
            let keep = !which(k.id);
            if !keep {
                *bytes -= layout.weight();
            }
            keep
        });
    }
}

/// Calls `f` with a compact chunk of chunk `key` (of version `store`) that holds what
/// decoding `[offset, offset + len)` needs (see above); `None` when the store cannot read
/// parts of chunks or the chunk's layout needs more. The chunk's layout comes from
/// `layouts`, or is read and kept there.
///
/// # Errors
/// When a read fails.
pub(crate) fn with_partial_chunk<R>(
    store: &dyn ChunkStore,
    layouts: &Layouts,
    key: ChunkKey,
    (offset, len): (usize, usize),
    f: impl FnOnce(&[u8]) -> R,
) -> Result<Option<R>, ContainerError> {
    let layout = match layouts.get(&key) {
        Some(layout) => layout,
        None => match read_layout(store, key.id.index)? {
            Some(layout) => {
                layouts.insert(key, layout.clone());
                layout
            }
            None => return Ok(None),
        },
    };
    let Layout::Parts(table) = layout else {
        return Ok(None);
    };
    PARTIAL.with(|cell| {
        let mut buf = cell.borrow_mut();
        let filled = fill(store, key.id.index, &table, offset, len, &mut buf);
        let res = match filled {
            Ok(Some(n)) => Ok(Some(f(&buf[..n]))),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        };
        if buf.capacity() > KEEP_PARTIAL {
            *buf = Vec::new();
        }
        res
    })
}

/// Length of the header whose first 16 bytes are `head`: 32 with the extended-header flag
/// (Blosc2), else 16 (Blosc1).
fn header_len(head: &[u8; 16]) -> usize {
    if head[2] & codec::header::FLAG_EXTENDED == codec::header::FLAG_EXTENDED {
        32
    } else {
        16
    }
}

/// The parsed header of chunk `index`, reading only the header; `None` when the store cannot
/// read parts of chunks, the chunk stores no bytes (special) or the header does not parse
/// (the whole-chunk path then reports why).
pub(crate) fn read_header(store: &dyn ChunkStore, index: usize) -> Option<codec::ChunkHeader> {
    let read =
        |at: u64, buf: &mut [u8]| matches!(store.chunk_read_at(index, at, buf, None), Ok(true));
    let mut head = [0u8; 32];
    let mut first = [0u8; 16];
    if !read(0, &mut first) {
        return None;
    }
    head[..16].copy_from_slice(&first);
    let len = header_len(&first);
    if len == 32 && !read(16, &mut head[16..]) {
        return None;
    }
    codec::chunk_info(&head[..len]).ok()
}

/// Reads chunk `index`'s layout: its header and block-start table, or [`Layout::Whole`];
/// `None` (nothing to keep) when they do not parse or changed while they were read (the
/// whole-chunk path then reports why).
///
/// Works for 32-byte Blosc2 headers and 16-byte Blosc1 ones (bcolz): the block-start table
/// follows the header either way, and cbytes is bytes 12..16 of both.
fn read_layout(store: &dyn ChunkStore, index: usize) -> Result<Option<Layout>, ContainerError> {
    // The common 16 bytes first: they say how long the header and the chunk are.
    let mut head = [0u8; 16];
    if !store.chunk_read_at(index, 0, &mut head, None)? {
        return Ok(Some(Layout::Whole));
    }
    let header_len = header_len(&head);
    let cbytes = i32::from_le_bytes([head[12], head[13], head[14], head[15]]);
    let Ok(cbytes) = usize::try_from(cbytes) else {
        return Ok(None);
    };
    if cbytes < header_len {
        return Ok(None);
    }
    // Header and table in one read when the table is small (the usual case).
    let mut buf = vec![0u8; HEAD_READ.min(cbytes)];
    store.chunk_read_at(index, 0, &mut buf, None)?;
    if buf[..16] != head {
        return Ok(None); // changed underneath
    }
    let Ok(h) = codec::chunk_info(&buf) else {
        return Ok(None);
    };
    let whole_chunk_only = h.cbytes != cbytes
        || h.memcpyed()
        || h.is_vl()
        || h.use_dict()
        || h.is_lazy()
        || h.is_instrumented()
        || h.special() != SpecialKind::None
        || h.flags & codec::header::FLAG_DELTA != 0
        || h.has_delta()
        || h.filters.contains(&filter_id::DELTA)
        || h.block_size() == 0;
    let data_at = header_len + h.nblocks() * 4;
    if whole_chunk_only || data_at - header_len > MAX_BSTARTS || data_at > cbytes {
        return Ok(Some(Layout::Whole));
    }
    let eager = buf.len();
    if data_at > eager {
        buf.resize(data_at, 0);
        store.chunk_read_at(index, eager as u64, &mut buf[eager..], None)?;
    }
    buf.truncate(data_at);
    let mut sorted: Box<[u32]> = buf[header_len..]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    sorted.sort_unstable();
    Ok(Some(Layout::Parts(Arc::new(Table {
        head: buf.into_boxed_slice(),
        sorted,
        cbytes,
        blocksize: h.block_size(),
        nbytes: h.nbytes,
    }))))
}

/// Builds the compact chunk of chunk `index`, whose layout is `t`, in `buf` (grown as
/// needed) and returns its length, or `None` (see above). Reads the needed blocks' streams
/// only.
fn fill(
    store: &dyn ChunkStore,
    index: usize,
    t: &Table,
    offset: usize,
    len: usize,
    buf: &mut Vec<u8>,
) -> Result<Option<usize>, ContainerError> {
    let data_at = t.head.len();
    let table_at = data_at - 4 * t.sorted.len();
    if len == 0 || offset + len > t.nbytes {
        return Ok(None);
    }
    let bstart = |buf: &[u8], j: usize| {
        let at = table_at + 4 * j;
        u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize
    };
    let first = offset / t.blocksize;
    let last = (offset + len - 1) / t.blocksize;
    // Each needed block's streams run from its start to the next larger start (starts need
    // not be increasing: multi-threaded writers store blocks in completion order).
    let mut lo = usize::MAX;
    let mut hi = 0;
    for j in first..=last {
        let start = bstart(&t.head, j);
        let next = t.sorted.partition_point(|&s| s as usize <= start);
        let end = t.sorted.get(next).map_or(t.cbytes, |&s| s as usize);
        if start < data_at || start >= end || end > t.cbytes {
            return Ok(None); // let the whole-chunk path report it
        }
        lo = lo.min(start);
        hi = hi.max(end);
    }
    // The compact chunk: header and table, then bytes [lo, hi) of the chunk (every needed
    // stream), with the needed starts and cbytes moved to match.
    let compact = data_at + (hi - lo);
    if buf.len() < compact {
        buf.resize(compact, 0);
    }
    buf[..data_at].copy_from_slice(&t.head);
    let streams = &mut buf[data_at..compact];
    if !store.chunk_read_at(index, lo as u64, streams, Some(t.cbytes as u64))? {
        return Ok(None);
    }
    for j in first..=last {
        let moved = bstart(buf, j) - lo + data_at;
        let at = table_at + 4 * j;
        buf[at..at + 4].copy_from_slice(&(moved as u32).to_le_bytes());
    }
    buf[12..16].copy_from_slice(&(compact as u32).to_le_bytes());
    Ok(Some(compact))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decompress_range;
    use crate::container::{self, Container};
    use std::path::PathBuf;

    fn fixture(name: &str) -> container::Array {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        match container::open(&p).unwrap() {
            Container::Array(a) => a,
            Container::Table(_) => panic!("not an array"),
        }
    }

    #[test]
    fn sparse_chunk_decodes_like_the_whole_chunk() {
        let mut used = 0;
        for name in [
            "frames/schunk_zstd.b2frame",
            "frames/schunk_lz4.b2frame",
            "frames/b2nd_2d_f8_lz4.b2nd",
            "frames/schunk_zlib.b2frame",
            "frames/schunk_sparse.b2frame",
            "frames/b2nd_sparse.b2nd",
            "bcolz/carray_zstd_s1",
            "bcolz/carray_f8",
        ] {
            let mut used_here = 0;
            let a = fixture(name);
            let layouts = Layouts::default();
            for index in 0..a.nchunks() {
                let full = a.chunk_bytes(index).unwrap().into_owned();
                let nbytes = a.chunk_nbytes(index).unwrap();
                for (off, len) in [
                    (0, 1),
                    (nbytes / 3, 4096),
                    (nbytes.saturating_sub(100), 100),
                    (4095, 2),
                ] {
                    let len = len.min(nbytes - off.min(nbytes));
                    if len == 0 {
                        continue;
                    }
                    let mut got = vec![0u8; len];
                    let key = ChunkKey {
                        id: ChunkId::new(super::super::ArrayId(0), index),
                        stamp: 0,
                    };
                    let decoded = with_partial_chunk(&a, &layouts, key, (off, len), |sparse| {
                        decompress_range(sparse, off, &mut got)
                    })
                    .unwrap();
                    let Some(decoded) = decoded else { continue };
                    decoded.unwrap();
                    used += 1;
                    used_here += 1;
                    let mut want = vec![0u8; len];
                    decompress_range(&full, off, &mut want).unwrap();
                    assert_eq!(got, want, "{name} chunk {index} ({off}, {len})");
                }
            }
            assert!(
                used_here > 0,
                "{name}: the partial-read path was never taken"
            );
        }
        assert!(used > 10, "the partial-read path was never taken ({used})");
    }
}
