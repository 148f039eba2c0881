//! Partial chunk reads for small random reads: fetch only the header, the block-start table
//! and the streams of the blocks a read overlaps, as C-Blosc2 does with its "lazy chunks",
//! instead of the whole compressed chunk (megabytes for a 4 KiB read).
//!
//! The result is a buffer the size of the whole chunk in which only those bytes are filled
//! (the rest stays zero, untouched pages of a fresh allocation); a range decode of the read's
//! window looks at nothing else. Chunks whose range decode needs more than its own blocks
//! are not handled here and go the whole-chunk way: memcpyed, special, VL-block and
//! dictionary chunks, and DELTA (which also needs block 0).
//!
//! See: `shared/spec/CHUNK_FORMAT_NOTES.md` section 1 (header, flags, bstarts).

use super::store::ChunkStore;
use crate::codec::{self, filter_id};
use crate::container::ContainerError;

/// Largest block-start table read eagerly (bytes); bigger tables mean tiny blocks, where a
/// whole-chunk read is as good.
const MAX_BSTARTS: usize = 64 * 1024;

/// A chunk-sized buffer holding only what decoding `[offset, offset + len)` needs, or
/// `None` when the store cannot read parts of chunks or the chunk's layout needs more.
///
/// # Errors
/// When a read fails.
pub(crate) fn sparse_chunk(
    store: &dyn ChunkStore,
    index: usize,
    offset: usize,
    len: usize,
) -> Result<Option<Vec<u8>>, ContainerError> {
    let mut head = [0u8; 32];
    if len == 0 || !store.chunk_read_at(index, 0, &mut head)? {
        return Ok(None);
    }
    let Ok(h) = codec::chunk_info(&head) else {
        return Ok(None); // let the whole-chunk path report it
    };
    let extended = h.flags & 0x05 == 0x05;
    let memcpyed = h.flags & 0x02 != 0;
    let vl_blocks = h.flags2 & 0x01 != 0;
    let dict = h.blosc2_flags & 0x01 != 0;
    let special = (h.blosc2_flags >> 4) & 0x07 != 0;
    let delta = h.flags & 0x08 != 0 || h.filters.contains(&filter_id::DELTA);
    if !extended || memcpyed || vl_blocks || dict || special || delta || h.blocksize == 0 {
        return Ok(None);
    }
    let nblocks = h.nbytes.div_ceil(h.blocksize);
    let table = nblocks * 4;
    if table > MAX_BSTARTS || 32 + table > h.cbytes || offset + len > h.nbytes {
        return Ok(None);
    }
    let mut bstarts_raw = vec![0u8; table];
    store.chunk_read_at(index, 32, &mut bstarts_raw)?;
    let bstarts: Vec<usize> = bstarts_raw
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .collect();
    let first = offset / h.blocksize;
    let last = (offset + len - 1) / h.blocksize;
    // Each needed block's streams run from its start to the next larger start (starts need
    // not be increasing: multi-threaded writers store blocks in completion order).
    let mut lo = usize::MAX;
    let mut hi = 0;
    for &start in &bstarts[first..=last] {
        let end = bstarts
            .iter()
            .copied()
            .filter(|&s| s > start)
            .min()
            .unwrap_or(h.cbytes);
        if start < 32 + table || end > h.cbytes {
            return Ok(None);
        }
        lo = lo.min(start);
        hi = hi.max(end);
    }
    let mut buf = vec![0u8; h.cbytes];
    buf[..32].copy_from_slice(&head);
    buf[32..32 + table].copy_from_slice(&bstarts_raw);
    store.chunk_read_at(index, lo as u64, &mut buf[lo..hi])?;
    Ok(Some(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decompress_range;
    use crate::container::{self, Container};
    use std::path::PathBuf;

    fn fixture(name: &str) -> container::Array {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/frames")
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
            "schunk_zstd.b2frame",
            "schunk_lz4.b2frame",
            "b2nd_2d_f8_lz4.b2nd",
            "schunk_zlib.b2frame",
        ] {
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
                    let Some(sparse) = sparse_chunk(&a, index, off, len).unwrap() else {
                        continue;
                    };
                    used += 1;
                    let mut want = vec![0u8; len];
                    let mut got = vec![0u8; len];
                    decompress_range(&full, off, &mut want).unwrap();
                    decompress_range(&sparse, off, &mut got).unwrap();
                    assert_eq!(got, want, "{name} chunk {index} ({off}, {len})");
                }
            }
        }
        assert!(used > 10, "the partial-read path was never taken ({used})");
    }
}
