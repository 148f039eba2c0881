//! Decoding chunks: whole chunks into cache buffers (straight from a source's mapping when it
//! has one, else through a reused per-thread buffer of compressed bytes), split over threads
//! for a reader that waits, and range decodes of the blocks a small read overlaps. A whole
//! chunk decoded from a mapping that still needs its fingerprint hashes each block on the
//! thread that decodes it, right after its streams were read (`prints.rs`).

use std::borrow::Cow;

use super::prints::{self, Print, SeenBlock};
use super::{At, Core, partial};
use crate::codec::{self, CodecError};
use crate::container::ContainerError;

/// Largest compressed-chunk buffer a thread keeps for the next chunk.
const KEEP_COMPRESSED: usize = 64 << 20;

thread_local! {
    /// Each decoding thread's buffer for the compressed bytes of the chunk it decodes.
    static COMPRESSED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Core {
    /// Decodes chunk `at` whole into a cache buffer.
    pub(super) fn decode(&self, at: &At<'_>, split: bool) -> Result<Vec<u8>, ContainerError> {
        let store = at.store;
        let index = at.key.id.index;
        let chunk_err = |source| ContainerError::Chunk {
            path: store.path().to_path_buf(),
            index,
            source,
        };
        let nbytes = store.chunk_nbytes(index)?;
        // Straight from the source's mapping when it has one: no copy of the compressed
        // bytes, and no buffer for them.
        let mut from_map = None;
        let print = store.wants_print(index);
        let mapped = store.with_mapped_chunk(index, false, &mut |chunk| {
            let (res, took) = self.decode_chunk(chunk, nbytes, split, print);
            from_map = Some(res);
            took
        });
        match (mapped, from_map) {
            (Ok(true), Some(res)) => return res.map_err(chunk_err),
            (Err(e), res) => {
                // The source shrank while it was decoded: what came out is not its chunk.
                if let Some(Ok(buf)) = res {
                    self.cache.recycle(buf);
                }
                return Err(e);
            }
            _ => {}
        }
        // Else the compressed bytes go into this thread's reused buffer: a fresh multi-MiB
        // allocation per chunk costs page faults and zeroing on every decode.
        let res = COMPRESSED.with(|cell| {
            let mut compressed = cell.borrow_mut();
            let clen = store.chunk_bytes_into(index, &mut compressed)?;
            let (res, _) = self.decode_chunk(&compressed[..clen], nbytes, split, false);
            if compressed.capacity() > KEEP_COMPRESSED {
                *compressed = Vec::new(); // an outsized chunk: do not keep its buffer
            }
            Ok(res)
        });
        res?.map_err(chunk_err)
    }

    /// Decodes the compressed chunk `chunk` into a cache buffer and keeps its first `nbytes`.
    /// The chunk may hold more than the file shows (a bcolz leftover chunk rewritten full):
    /// then only the blocks of its first `nbytes` are decoded, into a buffer of that size,
    /// never one of the size its own header claims (up to 2 GiB for a chunk a hostile
    /// source shows as a few bytes; fuzz target `tree_walk`). With `print`, also the
    /// chunk's fingerprint, its blocks hashed as they are decoded (none when the decode
    /// failed).
    fn decode_chunk(
        &self,
        chunk: &[u8],
        nbytes: usize,
        split: bool,
        print: bool,
    ) -> (Result<Vec<u8>, CodecError>, Option<Print>) {
        let stored = match codec::chunk_info(chunk) {
            Ok(h) => h.nbytes,
            Err(e) => return (Err(e), None),
        };
        if stored < nbytes {
            let e = CodecError::OutputSize {
                expected: stored,
                actual: nbytes,
            };
            return (Err(e), None);
        }
        let mut buf = self.cache.buffer(nbytes);
        let res = match stored > nbytes {
            true => range_exact(chunk, 0, &mut buf, print),
            false => self.decode_into(chunk, &mut buf, split, print),
        };
        match res {
            Ok(seen) => {
                let print = print.then(|| prints::print_with(chunk, &seen));
                (Ok(buf), print)
            }
            Err(e) => {
                self.cache.recycle(buf);
                (Err(e), None)
            }
        }
    }

    /// Decodes a whole chunk into `out` (exactly its nbytes). A large chunk is cut at block
    /// boundaries and the parts are decoded on scoped threads with range decodes, so one cold
    /// chunk uses every core (C-Blosc2 does the same with its nthreads). With `print`, the
    /// hash of each block's bytes, taken by the thread that decoded it.
    fn decode_into(
        &self,
        chunk: &[u8],
        out: &mut [u8],
        split: bool,
        print: bool,
    ) -> Result<Vec<SeenBlock>, CodecError> {
        let parts = if split { self.decode_threads.max(1) } else { 1 };
        let blocksize = codec::chunk_info(chunk)?.blocksize;
        let special_or_small = out.len() < self.parallel_decode_min || blocksize == 0;
        let nblocks = out.len().div_ceil(blocksize.max(1));
        if !print && (parts < 2 || special_or_small || nblocks < 2) {
            return guarded(|| codec::decompress_into(chunk, out)).map(|_| Vec::new());
        }
        if parts < 2 || special_or_small || nblocks < 2 {
            return range_exact(chunk, 0, out, print);
        }
        let per = nblocks.div_ceil(parts) * blocksize;
        std::thread::scope(|scope| {
            let mut rest = &mut out[..];
            let mut offset = 0;
            let mut handles = Vec::new();
            while rest.len() > per {
                let (part, tail) = rest.split_at_mut(per);
                rest = tail;
                let at = offset;
                offset += per;
                handles.push(scope.spawn(move || range_exact(chunk, at, part, print)));
            }
            let first = range_exact(chunk, offset, rest, print);
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(panicked())))
                .fold(first, |acc, r| {
                    let (mut acc, r) = (acc?, r?);
                    acc.extend(r);
                    Ok(acc)
                })
        })
    }

    /// Bytes `[offset, offset + out.len())` of chunk `at` decoded into `out`, decoding only
    /// the blocks they overlap; truncated to what the chunk holds. `small`: a small read's
    /// (a `read` call of a chunk file), whose compressed bytes are read (`pread`) rather than
    /// taken from the source's mapping.
    pub(super) fn decode_range(
        &self,
        at: &At<'_>,
        offset: usize,
        mut out: Vec<u8>,
        small: bool,
    ) -> Result<Vec<u8>, ContainerError> {
        let n = self.decode_range_into(at, offset, &mut out, small)?;
        out.truncate(n);
        Ok(out)
    }

    /// [`Core::decode_range`] into a slice the caller holds (a band's buffer): the bytes
    /// decoded, fewer than `out.len()` when the chunk ends first.
    pub(super) fn decode_range_into(
        &self,
        at: &At<'_>,
        offset: usize,
        out: &mut [u8],
        small: bool,
    ) -> Result<usize, ContainerError> {
        let (store, id) = (at.store, at.key);
        let index = id.id.index;
        let len = out.len();
        let decode =
            |chunk: &[u8], out: &mut [u8]| guarded(|| codec::decompress_range(chunk, offset, out));
        let read_parts = |out: &mut [u8]| {
            partial::with_partial_chunk(store, &self.layouts, id, (offset, len), |c| decode(c, out))
        };
        let kept = self.compressed.contains_or_loading(&id);
        // A small read reads what it needs into a small buffer: through the mapping, it
        // faults in pages the mapping must later drop (its RSS is bounded), and the drops
        // and re-faults cost more than the copy (BENCHMARKS.md, session 13).
        let pread_first = small && !kept;
        let mut partial = if pread_first { read_parts(out)? } else { None };
        if partial.is_none() {
            // Straight from the source's mapping when it has one: the decode touches only
            // the pages of the header, the block-start table and the blocks it needs, with no
            // read call and no copy. Else a compressed chunk kept from earlier reads beats
            // partial reads from the source.
            let mut from_map = None;
            let mapped = store.with_mapped_chunk(index, true, &mut |c| {
                from_map = Some(decode(c, out));
                None
            })?;
            if mapped {
                partial = from_map;
            } else if !kept && !pread_first {
                partial = read_parts(out)?;
            }
        }
        let res = match partial {
            Some(res) => res,
            None => {
                let chunk = self
                    .compressed
                    .get_or_load(id, || store.chunk_bytes(index).map(Cow::into_owned))?;
                decode(&chunk, out)
            }
        };
        res.map_err(|source| ContainerError::Chunk {
            path: store.path().to_path_buf(),
            index,
            source,
        })
    }
}

/// The error of a decode whose thread panicked.
fn panicked() -> CodecError {
    CodecError::Corrupt {
        block: 0,
        stream: 0,
        reason: "the decoder panicked on this chunk (a b2fs bug; treated as corrupt)".into(),
    }
}

/// Runs a decoder call, turning a panic into an error: a decoder bug on hostile input must
/// cost one file an EIO, not a FUSE worker thread (and with it the mount).
pub(super) fn guarded<T>(f: impl FnOnce() -> Result<T, CodecError>) -> Result<T, CodecError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| Err(panicked()))
}

/// Range-decodes exactly `out.len()` bytes at `offset`; with `print`, hashes each block's
/// bytes right after its streams were read.
fn range_exact(
    chunk: &[u8],
    offset: usize,
    out: &mut [u8],
    print: bool,
) -> Result<Vec<SeenBlock>, CodecError> {
    let mut seen = Vec::new();
    let mut note = |_, range| {
        if print {
            seen.extend(prints::seen_block(chunk, range));
        }
    };
    let n = guarded(|| codec::decompress_range_seen(chunk, offset, out, &mut note))?;
    if n == out.len() {
        Ok(seen)
    } else {
        Err(CodecError::OutputSize {
            expected: offset + n,
            actual: offset + out.len(),
        })
    }
}
