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
//! Measured: BENCHMARKS.md, random cold 4 KiB reads.
//!
//! See: `docs/format/CHUNK.md` section 1 (header, flags, bstarts).

use super::store::ChunkStore;
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

/// Calls `f` with a compact chunk that holds what decoding `[offset, offset + len)` needs
/// (see above); `None` when the store cannot read parts of chunks or the chunk's layout
/// needs more.
///
/// # Errors
/// When a read fails.
pub(crate) fn with_partial_chunk<R>(
    store: &dyn ChunkStore,
    index: usize,
    offset: usize,
    len: usize,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<Option<R>, ContainerError> {
    PARTIAL.with(|cell| {
        let mut buf = cell.borrow_mut();
        let filled = fill(store, index, offset, len, &mut buf);
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
    let read = |at: u64, buf: &mut [u8]| matches!(store.chunk_read_at(index, at, buf), Ok(true));
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

/// Builds the compact chunk in `buf` (grown as needed) and returns its length, or `None`
/// (see above).
///
/// Works for 32-byte Blosc2 headers and 16-byte Blosc1 ones (bcolz): the block-start table
/// follows the header either way, and cbytes is bytes 12..16 of both.
fn fill(
    store: &dyn ChunkStore,
    index: usize,
    offset: usize,
    len: usize,
    buf: &mut Vec<u8>,
) -> Result<Option<usize>, ContainerError> {
    // The common 16 bytes first: they say how long the header and the chunk are.
    let mut head = [0u8; 16];
    if len == 0 || !store.chunk_read_at(index, 0, &mut head)? {
        return Ok(None);
    }
    let header_len = header_len(&head);
    let cbytes = i32::from_le_bytes([head[12], head[13], head[14], head[15]]);
    let Ok(cbytes) = usize::try_from(cbytes) else {
        return Ok(None); // let the whole-chunk path report it
    };
    if cbytes < header_len {
        return Ok(None);
    }
    // Header and table in one read when the table is small (the usual case).
    let eager = HEAD_READ.min(cbytes);
    if buf.len() < eager {
        buf.resize(eager, 0);
    }
    store.chunk_read_at(index, 0, &mut buf[..eager])?;
    if buf[..16] != head {
        return Ok(None); // changed underneath; let the whole-chunk path decide
    }
    let Ok(h) = codec::chunk_info(&buf[..eager]) else {
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
    if whole_chunk_only {
        return Ok(None);
    }
    let blocksize = h.block_size();
    let table_at = header_len;
    let data_at = table_at + h.nblocks() * 4;
    if data_at - table_at > MAX_BSTARTS || data_at > cbytes || offset + len > h.nbytes {
        return Ok(None);
    }
    if data_at > eager {
        buf.resize(data_at, 0);
        store.chunk_read_at(index, eager as u64, &mut buf[eager..data_at])?;
    }
    let bstart = |buf: &[u8], j: usize| {
        let at = table_at + 4 * j;
        u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize
    };
    let first = offset / blocksize;
    let last = (offset + len - 1) / blocksize;
    // Each needed block's streams run from its start to the next larger start (starts need
    // not be increasing: multi-threaded writers store blocks in completion order).
    let mut lo = usize::MAX;
    let mut hi = 0;
    for j in first..=last {
        let start = bstart(buf, j);
        let end = (0..h.nblocks())
            .map(|k| bstart(buf, k))
            .filter(|&s| s > start)
            .min()
            .unwrap_or(cbytes);
        if start < data_at || start >= end || end > cbytes {
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
    store.chunk_read_at(index, lo as u64, &mut buf[data_at..compact])?;
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
                    let decoded = with_partial_chunk(&a, index, off, len, |sparse| {
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
