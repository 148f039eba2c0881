//! Small random reads: the 4 KiB pages they asked for, and the decoded blocks those pages
//! were cut from, so that re-reads near the same place cost a lookup instead of a decode.
//!
//! Subtleties:
//! - **Generation counter.** A commit drops a chunk's blocks, bumps `page_gen`, then drops its
//!   pages ([`super::ChunkReader::forget`]). A reader that got a block before the bump and
//!   cuts pages from it afterwards finds the counter changed and removes the pages it just
//!   inserted, so no page outlives the block version it came from.
//! - **Pages wholly inside one block** only (blocks need not be page-aligned); the chunk's
//!   last page may be short.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{
    At, BlockKey, Bytes, ChunkId, ChunkKey, ChunkReader, ChunkStore, Core, ReadData, keep, partial,
};
use crate::codec;
use crate::container::ContainerError;
use crate::mem::PAGE;

/// Most chunks whose block size [`Core::block_size_for_cache`] remembers.
const MAX_BLOCK_SIZES: usize = 1 << 20;

impl ChunkReader {
    /// Window `r` of chunk `id` (of `nbytes`) from the page cache, or from its block (decoded
    /// and kept, with the pages this read wanted), or from the two blocks it straddles
    /// (both decoded and kept: a range decode of the window would decode the first block a
    /// second time); `None` when the window spans more than two blocks or the chunk is not
    /// cached by block (the caller range-decodes it).
    pub(super) fn small_read(
        &self,
        at: &At<'_>,
        nbytes: usize,
        r: Range<usize>,
    ) -> Result<Option<ReadData>, ContainerError> {
        let core = &self.core;
        let id = at.key;
        let (p0, p1) = (r.start / PAGE, (r.end - 1) / PAGE);
        if let Some(hit) = core.cached_pages(id, p0, p1, r.clone()) {
            return Ok(Some(hit));
        }
        // Read before the block: a commit that drops the block after we got it bumps it.
        let generation = core.page_gen.load(Ordering::SeqCst);
        if let Some(hit) = self.small_read_filtered(at, nbytes, r.clone(), generation)? {
            return Ok(Some(hit));
        }
        let Some((block, start)) = core.block_of(at, nbytes, r.start, true)? else {
            return Ok(None);
        };
        let end = start + block.len();
        if r.end <= end {
            self.keep(id, &block, (start, nbytes), p0..=p1, generation);
            return Ok(Some(ReadData::Chunk(block, r.start - start..r.end - start)));
        }
        let Some((next, next_start)) = core.block_of(at, nbytes, end, true)? else {
            return Ok(None);
        };
        if next_start != end || r.end > end + next.len() {
            return Ok(None);
        }
        self.keep(id, &block, (start, nbytes), p0..=p1, generation);
        self.keep(id, &next, (end, nbytes), p0..=p1, generation);
        let mut out = Vec::with_capacity(r.len());
        out.extend_from_slice(&block[r.start - start..]);
        out.extend_from_slice(&next[..r.end - end]);
        Ok(Some(ReadData::Owned(out)))
    }

    /// Window `r` of chunk `at` (of `nbytes`) when it lies in one block that is neither
    /// cached nor loading and whose filters are at most a byte shuffle: the block's streams
    /// are decoded (read in part, `partial.rs`) and only `r` is unshuffled; the pages thread
    /// unshuffles the whole block into the block cache and keeps the read's pages
    /// (`keep.rs`), and until then reads of the block unshuffle their bytes from it. `None`:
    /// the caller takes the block way (as do errors, which it then reports).
    fn small_read_filtered(
        &self,
        at: &At<'_>,
        nbytes: usize,
        r: Range<usize>,
        generation: u64,
    ) -> Result<Option<ReadData>, ContainerError> {
        let core = &self.core;
        let bs = core.block_size_for_cache(at, nbytes);
        if bs == 0 || bs > core.blocks.budget() {
            return Ok(None);
        }
        let j = r.start / bs;
        let start = j * bs;
        let len = codec::block_len(nbytes, bs, j);
        if r.end > start + len || len > keep::FILTERED_MAX {
            return Ok(None);
        }
        let key = (at.key, j);
        let part = r.start - start..r.end - start;
        let cut = |filtered: &[u8], t: usize| {
            let mut out = vec![0u8; part.len()];
            let ok = filtered.len() == len
                && codec::filter::shuffle::unshuffle_range(t, filtered, part.clone(), &mut out)
                    .is_ok();
            ok.then_some(ReadData::Owned(out))
        };
        let pages = r.start / PAGE..=(r.end - 1) / PAGE;
        if let Some((filtered, t, _)) = core.filtered.get(&key) {
            let data = cut(&filtered, t);
            keep::keep_filtered_later(core, key, filtered, t, (start, nbytes), pages, generation);
            return Ok(data);
        }
        if core.blocks.contains_or_loading(&key) || core.compressed.contains_or_loading(&at.key) {
            return Ok(None);
        }
        let mut buf = core.filtered.buffer(len);
        let got =
            partial::with_partial_chunk(at.store, &core.layouts, at.key, (start, len), |c| {
                super::decode::guarded(|| codec::decompress_block_filtered(c, j, &mut buf))
            })?;
        let Some(Ok(Some(t))) = got else {
            core.filtered.recycle(buf);
            return Ok(None);
        };
        let Some(data) = cut(&buf, t) else {
            core.filtered.recycle(buf);
            return Ok(None);
        };
        let buf = Arc::new(buf);
        keep::keep_filtered_later(core, key, buf, t, (start, nbytes), pages, generation);
        Ok(Some(data))
    }

    /// Keeps the pages of `pages` that lie wholly inside `block` (at `start` of a chunk of
    /// `nbytes`) in the page cache, off the read's path (`keep.rs`).
    fn keep(
        &self,
        id: ChunkKey,
        block: &Bytes,
        (start, nbytes): (usize, usize),
        pages: std::ops::RangeInclusive<usize>,
        generation: u64,
    ) {
        keep::keep_later(&self.core, id, block, (start, nbytes), pages, generation);
    }
}

impl Core {
    /// Keeps the pages of `p0..=p1` that lie wholly inside `block` (starting at `start` of a
    /// chunk of `nbytes`) in the page cache, unless a commit bumped the page generation since
    /// `generation` was read (the block may predate it: its pages must not outlive it).
    pub(super) fn keep_pages(
        &self,
        id: ChunkKey,
        block: &[u8],
        start: usize,
        nbytes: usize,
        pages: std::ops::RangeInclusive<usize>,
        generation: u64,
    ) {
        if self.page_gen.load(Ordering::SeqCst) != generation {
            return; // a commit came between the read and this copy
        }
        let len = block.len();
        let pages =
            pages.filter(|&p| p * PAGE >= start && ((p + 1) * PAGE).min(nbytes) <= start + len);
        for p in pages.clone() {
            let (lo, hi) = (p * PAGE, ((p + 1) * PAGE).min(nbytes));
            self.pages
                .insert((id, p), Arc::new(block[lo - start..hi - start].to_vec()));
        }
        if self.page_gen.load(Ordering::SeqCst) != generation {
            pages.for_each(|p| self.pages.remove(&(id, p)));
        }
    }

    /// The decoded block of chunk `at` (of `nbytes`) that byte `offset` falls in, from the
    /// block cache or decoded into it, and where it starts in the chunk; `None` when the chunk
    /// is not worth caching by block (one block, or a block larger than the block cache: a
    /// hostile or huge blocksize) or the decode came out short. `small`: for a small read
    /// ([`Core::decode_range`]).
    pub(super) fn block_of(
        &self,
        at: &At<'_>,
        nbytes: usize,
        offset: usize,
        small: bool,
    ) -> Result<Option<(Bytes, usize)>, ContainerError> {
        let bs = self.block_size_for_cache(at, nbytes);
        if bs == 0 || bs > self.blocks.budget() || offset >= nbytes {
            return Ok(None);
        }
        let start = offset / bs * bs;
        let len = bs.min(nbytes - start);
        // Into a recycled block buffer: a fresh 256 KiB allocation per read costs more page
        // faults than the decode.
        let block = self.blocks.get_or_load((at.key, offset / bs), || {
            self.decode_range(at, start, self.blocks.buffer(len), small)
        })?;
        Ok((block.len() == len).then_some((block, start)))
    }

    /// A prefetch of the block of chunk `id` of version `store` that byte `offset` falls in
    /// (nothing when the whole chunk is cached or loading, or it is not cached by block).
    pub(super) fn block_ahead(
        &self,
        store: &dyn ChunkStore,
        id: ChunkId,
        offset: usize,
    ) -> Result<(), ContainerError> {
        let at = At::new(store, id);
        if self.cache.contains_or_loading(&at.key) {
            return Ok(());
        }
        let nbytes = store.chunk_nbytes(id.index)?;
        if nbytes > self.cache.budget() {
            return Ok(());
        }
        // Taken already (by a fault's worker, `ChunkReader::steal_blocks`, or another
        // prefetch thread): no need to wait for it here.
        let bs = self.block_size_for_cache(&at, nbytes);
        if bs > 0 && self.blocks.contains_or_loading(&(at.key, offset / bs)) {
            return Ok(());
        }
        self.block_of(&at, nbytes, offset, false).map(drop)
    }

    /// The block size by which chunk `id` is worth caching: the header's, when the chunk has
    /// at least two blocks; 0 otherwise (or when the header cannot be read here: the decode
    /// path then reports any error). Reads only the header, once per chunk.
    pub(super) fn block_size_for_cache(&self, at: &At<'_>, nbytes: usize) -> usize {
        let id = at.key;
        if let Some(&bs) = self.block_sizes.lock().get(&id) {
            return bs;
        }
        let bs = partial::read_header(at.store, id.id.index)
            .map(|h| (h.block_size(), h.nbytes))
            .filter(|&(b, n)| b > 0 && b.saturating_mul(2) <= nbytes && n == nbytes)
            .map_or(0, |(b, _)| b);
        let mut sizes = self.block_sizes.lock();
        if sizes.len() >= MAX_BLOCK_SIZES {
            sizes.clear();
        }
        sizes.insert(id, bs);
        bs
    }

    /// Window `r` of chunk `id` when every page `p0..=p1` it covers is in the page cache:
    /// zero-copy for one page, assembled for several.
    fn cached_pages(
        &self,
        id: ChunkKey,
        p0: usize,
        p1: usize,
        r: Range<usize>,
    ) -> Option<ReadData> {
        if p0 == p1 {
            let page = self.pages.get(&(id, p0))?;
            let at = p0 * PAGE;
            return (page.len() >= r.end - at)
                .then(|| ReadData::Chunk(page, r.start - at..r.end - at));
        }
        let mut out = Vec::with_capacity(r.len());
        for p in p0..=p1 {
            let page = self.pages.get(&(id, p))?;
            let at = p * PAGE;
            let (from, to) = (
                r.start.max(at) - at,
                (r.end.min(at + PAGE) - at).min(page.len()),
            );
            out.extend_from_slice(page.get(from..to)?);
        }
        (out.len() == r.len()).then_some(ReadData::Owned(out))
    }
}

impl ChunkReader {
    /// Decodes here, into the block cache, blocks of version `store` that the byte positions
    /// `wants` (chunk, offset in it) fall in: of the first `max` distinct blocks among them
    /// that are not cached (those being decoded count), the ones nobody has started (neither
    /// cached nor loading), from the last. What a page fault's worker does once its own block
    /// is decoded, rather than sleep until the prefetch threads, which take the blocks asked
    /// for ([`ChunkReader::prefetch_blocks`]) from the first, reach them: measured, the two
    /// prefetch threads and the stream helper are often woken onto one vCPU, and the fault's
    /// blocks then decode one after the other there while the worker's vCPU idles
    /// (BENCHMARKS.md, "Session 20: windows"). Returns how many it decoded.
    pub fn steal_blocks(
        &self,
        store: &dyn ChunkStore,
        wants: impl IntoIterator<Item = (ChunkId, usize)>,
        max: usize,
    ) -> usize {
        let core = &self.core;
        let mut blocks: Vec<(ChunkId, usize, BlockKey)> = Vec::new();
        for (id, offset) in wants {
            if blocks.len() >= max {
                break;
            }
            let at = At::new(store, id);
            let Ok(nbytes) = store.chunk_nbytes(id.index) else {
                continue;
            };
            let bs = core.block_size_for_cache(&at, nbytes);
            if bs == 0 || offset >= nbytes || core.cache.contains_or_loading(&at.key) {
                continue;
            }
            let b = (at.key, offset / bs);
            if blocks.iter().any(|x| x.2 == b) || self.covering_cached(store, id, offset).is_some()
            {
                continue;
            }
            blocks.push((id, offset, b));
        }
        let mut n = 0;
        for (id, offset, b) in blocks.into_iter().rev() {
            if !core.blocks.contains_or_loading(&b) && core.block_ahead(store, id, offset).is_ok() {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ArrayId, ChunkId, ReadHint, ReaderOptions};
    use super::*;
    use crate::container::{self, Container};
    use std::time::{Duration, Instant};

    /// A reader without prefetch over one python-blosc2 fixture (`tests/data/frames`).
    fn reader(name: &str) -> (ChunkReader, Arc<dyn ChunkStore>) {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/frames")
            .join(name);
        let Container::Array(a) = container::open(&p).unwrap() else {
            panic!("{name}: not an array");
        };
        let store: Arc<dyn ChunkStore> = Arc::new(a);
        let options = ReaderOptions {
            cache_size: 64 << 20,
            prefetch_chunks: 0,
            prefetch_threads: 0,
            range_factor: 2,
            decode_threads: 1,
            parallel_decode_min: usize::MAX,
        };
        (ChunkReader::new(vec![store.clone()], options), store)
    }

    /// Chunk `index` of `store` decoded whole by the codec, and its block size.
    fn decoded_chunk(store: &dyn ChunkStore, index: usize) -> (Vec<u8>, usize) {
        let chunk = store.chunk_bytes(index).unwrap();
        let whole = codec::decompress(&chunk).unwrap();
        (whole, codec::chunk_info(&chunk).unwrap().block_size())
    }

    /// Small reads of every block of chunk 1, at unaligned offsets, equal the whole chunk's
    /// decode; then waits for the pages thread and says whether it recycled buffers of
    /// blocks decoded up to their shuffle (only the filtered way makes them).
    fn small_reads_went_filtered(name: &str) -> bool {
        let (r, store) = reader(name);
        let id = ChunkId::new(ArrayId(0), 1);
        let (whole, bs) = decoded_chunk(store.as_ref(), 1);
        assert!(whole.len() >= 4 * bs, "{name}: too few blocks");
        for pass in 0..2 {
            for (k, j) in [2usize, 0, 3, 1].into_iter().enumerate() {
                let off = j * bs + 13 + 7 * k + pass;
                let got = r.read(id, off as u64, 50, ReadHint::RANDOM, || false);
                assert_eq!(got.unwrap()[..], whole[off..off + 50], "{name} pass {pass}");
            }
        }
        let start = Instant::now();
        while !r.pages_settled() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "pages never settled"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let core = &r.core;
        assert!(
            core.filtered.pending.lock().is_empty(),
            "{name}: blocks left pending"
        );
        let key = At::new(store.as_ref(), id).key;
        for j in 0..4 {
            assert!(
                core.blocks.contains_or_loading(&(key, j)),
                "{name}: block {j} not cached"
            );
        }
        !core.filtered.pool.lock().is_empty()
    }

    /// A python-blosc2 float64 array with SHUFFLE alone (its default): small reads decode
    /// a block up to its shuffle, unshuffle their own bytes, and the pages thread caches
    /// the whole block.
    #[test]
    fn small_reads_of_shuffled_blocks_unshuffle_only_their_bytes() {
        assert!(small_reads_went_filtered("b2nd_2d_f8_lz4.b2nd"));
        assert!(small_reads_went_filtered("b2nd_2d_i8_zstd9.b2nd"));
    }

    /// A fault's worker decodes the blocks below it that no prefetch thread took, from the
    /// last: each lands in the block cache with the chunk's bytes, the first `max` not cached
    /// are all it takes, and a block cached already is neither decoded again nor counted.
    #[test]
    fn stolen_blocks_land_in_the_block_cache_with_their_bytes() {
        let (r, store) = reader("b2nd_2d_f8_lz4.b2nd");
        let id = ChunkId::new(ArrayId(0), 1);
        let (whole, bs) = decoded_chunk(store.as_ref(), 1);
        assert!(whole.len() >= 4 * bs, "too few blocks");
        let wants = |blocks: &[usize]| blocks.iter().map(|&j| (id, j * bs + 8)).collect::<Vec<_>>();
        let cached = |j: usize| r.covering_cached(store.as_ref(), id, j * bs + 8);
        assert_eq!(
            r.steal_blocks(store.as_ref(), wants(&[0, 0, 1, 2, 3]), 3),
            3
        );
        for j in 0..3 {
            let (bytes, start) = cached(j).expect("a stolen block is cached");
            assert_eq!(start, j * bs);
            assert_eq!(bytes[..], whole[j * bs..(j + 1) * bs], "block {j}");
        }
        assert!(cached(3).is_none(), "past the first 3 blocks not cached");
        assert_eq!(r.steal_blocks(store.as_ref(), wants(&[0, 1, 2, 3]), 3), 1);
        assert_eq!(cached(3).unwrap().0[..], whole[3 * bs..4 * bs]);
        assert_eq!(r.steal_blocks(store.as_ref(), wants(&[0, 1, 2, 3]), 3), 0);
    }
}
