//! One block of a chunk decoded up to its filters: the block's streams only, so that a
//! caller that needs a few bytes of the block undoes the filters on those bytes alone
//! ([`super::super::filter::shuffle::unshuffle_range`]). Only for chunks whose filters are at
//! most one byte shuffle ([`Pipeline::shuffle_only`]): what python-blosc2 writes by default.
//!
//! [`Pipeline::shuffle_only`]: super::super::filter::Pipeline::shuffle_only

use super::thread::with_thread_decoder;
use super::{Body, CodecError, Decoder, read_streams};
use crate::codec::Codec;

/// Decodes the streams of block `block` of `chunk` into `out` (exactly the block's size,
/// [`block_len`]) without undoing its filters, and returns the group size of the shuffle
/// that undoes them (1: none, `out` is the decoded block); `None` (nothing written) when the
/// chunk's blocks need more than that (other filters, VL blocks, special or memcpyed
/// chunks). Uses the per-thread decoder, with a second thread for the streams as for any
/// small read's block.
///
/// # Errors
/// As [`super::decompress_range`] for that block, and `OutputSize` when `out` does not have
/// the block's size.
pub fn decompress_block_filtered(
    chunk: &[u8],
    block: usize,
    out: &mut [u8],
) -> Result<Option<usize>, CodecError> {
    with_thread_decoder(|d| d.decompress_block_filtered(chunk, block, out))
}

/// The size of block `block` of a chunk of `nbytes` in blocks of `blocksize` (the last one
/// may be short); 0 past the end.
pub fn block_len(nbytes: usize, blocksize: usize, block: usize) -> usize {
    let start = block.saturating_mul(blocksize);
    blocksize.min(nbytes.saturating_sub(start))
}

impl Decoder {
    /// See [`decompress_block_filtered`].
    pub fn decompress_block_filtered(
        &mut self,
        chunk: &[u8],
        block: usize,
        out: &mut [u8],
    ) -> Result<Option<usize>, CodecError> {
        let (hdr, body) = self.prepare(chunk)?;
        let Body::Blocks(mut b) = body else {
            return Ok(None);
        };
        let Some(t) = b.pipeline.shuffle_only() else {
            return Ok(None);
        };
        if hdr.is_vl() || b.bs == 0 {
            return Ok(None);
        }
        let len = block_len(hdr.nbytes, b.bs, block);
        if len == 0 || block >= b.nblocks || out.len() != len {
            return Err(CodecError::OutputSize {
                expected: len,
                actual: out.len(),
            });
        }
        b.small = true;
        if b.codec == Codec::Zstd {
            self.streams
                .prepare_zstd(b.dict)
                .map_err(|reason| super::corrupt(0, 0, reason))?;
        }
        read_streams(&mut self.streams, &b, block, out, &mut |_, _| {})?;
        Ok(Some(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::filter::shuffle::unshuffle_range;
    use crate::codec::{decompress, decompress_range};

    /// Every chunk of `tests/data/chunks` (python-blosc2 and python-blosc: each codec,
    /// shuffle and typesize, multi-block and leftover blocks): every block's filtered bytes,
    /// unshuffled in parts, equal the chunk's decoded bytes there.
    #[test]
    fn parts_of_filtered_blocks_unshuffle_to_the_decoded_bytes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chunks");
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "chunk"))
            .collect();
        paths.sort();
        let (mut used, mut multi, mut other) = (0, 0, 0);
        for path in paths {
            let chunk = std::fs::read(&path).unwrap();
            let (Ok(h), Ok(whole)) = (crate::codec::chunk_info(&chunk), decompress(&chunk)) else {
                continue;
            };
            let bs = h.block_size();
            if bs == 0 {
                continue;
            }
            for j in 0..h.nblocks() {
                let len = block_len(h.nbytes, bs, j);
                let mut filtered = vec![0u8; len];
                let Some(t) = decompress_block_filtered(&chunk, j, &mut filtered).unwrap() else {
                    // Bitshuffle, delta, bytedelta (the whole pipeline is needed), or no
                    // blocks (special values, memcpyed).
                    let only = crate::codec::filter::Pipeline::new(
                        h.filters,
                        h.filters_meta,
                        usize::from(h.typesize),
                        h.version,
                    )
                    .map(|p| p.shuffle_only());
                    let plain = h.memcpyed() || h.special() != crate::codec::SpecialKind::None;
                    assert!(!matches!(only, Ok(Some(_))) || plain, "{path:?} block {j}");
                    other += usize::from(!plain);
                    continue;
                };
                let want = &whole[j * bs..j * bs + len];
                for (lo, hi) in [
                    (0, len),
                    (1, 4097.min(len)),
                    (len / 3, len / 3 + 4096),
                    (len.saturating_sub(13), len),
                ] {
                    let hi = hi.min(len);
                    if lo >= hi {
                        continue;
                    }
                    let mut got = vec![0u8; hi - lo];
                    unshuffle_range(t, &filtered, lo..hi, &mut got).unwrap();
                    assert!(got == want[lo..hi], "{path:?} block {j} {lo}..{hi} t {t}");
                    used += usize::from(t > 1);
                    multi += usize::from(t > 1 && j > 0);
                }
                let mut one = vec![0u8; 10.min(len)];
                decompress_range(&chunk, j * bs, &mut one).unwrap();
                assert_eq!(one[..], want[..one.len()]);
            }
        }
        assert!(
            used > 100 && multi > 10,
            "too few shuffled blocks tried ({used}, {multi})"
        );
        assert!(
            other > 10,
            "no chunk with other filters was refused ({other})"
        );
    }
}
