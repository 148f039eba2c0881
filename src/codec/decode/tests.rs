//! The decoder's own unit tests (the format's cases are in tests/it).

use super::*;

#[test]
fn decoder_is_send() {
    fn send<T: Send>() {}
    send::<Decoder>();
}

#[test]
fn debug_shows_sizes_not_contents() {
    let mut d = Decoder::new();
    d.scratch.filtered = vec![7; 1000];
    let text = format!("{d:?}");
    assert!(text.contains("filtered: 1000"), "{text}");
    assert!(text.len() < 300, "{text}");
}

#[test]
fn shrink_scratch_frees_large_buffers() {
    let mut d = Decoder::new();
    d.scratch.filtered = vec![0; 100];
    d.scratch.block = vec![0; 10];
    d.shrink_scratch(50);
    assert_eq!(d.scratch.filtered.capacity(), 0);
    assert_eq!(d.scratch.block.len(), 10);
}

#[test]
fn pattern_fill_phases() {
    let p = [1u8, 2, 3];
    for phase in 0..3 {
        for n in 0..20 {
            let mut out = vec![0u8; n];
            fill_pattern(&mut out, &p, phase);
            for (i, &v) in out.iter().enumerate() {
                assert_eq!(v, p[(phase + i) % 3]);
            }
        }
    }
}

/// A range inside one block of 32 MiB (shuffled: a filtered block beside it) needs 64 MiB of
/// scratch; the decoder takes a grant of it from the process-wide budget and frees the
/// scratch before giving it back, even a decoder of the caller's own (before, it kept both
/// buffers, and N decoding threads could each hold 1.5 GiB for a hostile chunk).
#[test]
fn a_range_inside_a_large_block_frees_its_scratch_after_the_call() {
    use crate::codec::{Blocksize, CParams, compress};
    let bs = 32 << 20;
    let data: Vec<u8> = (0..2 * bs).map(|i| (i / 4096 % 251) as u8).collect();
    let params = CParams {
        codec: Codec::Lz4,
        blocksize: Blocksize::Explicit(bs),
        allow_special: false,
        ..CParams::default()
    };
    let chunk = compress(&data, &params).unwrap();
    assert_eq!(chunk_info(&chunk).unwrap().blocksize, bs);
    let mut d = Decoder::new();
    let mut out = vec![0u8; 10_000];
    let at = bs + 12_345;
    assert_eq!(d.decompress_range(&chunk, at, &mut out).unwrap(), out.len());
    assert_eq!(out, data[at..at + out.len()]);
    let (block, filtered) = (d.scratch.block.capacity(), d.scratch.filtered.capacity());
    assert!(
        block <= THREAD_SCRATCH_KEEP,
        "kept a block scratch of {block} bytes"
    );
    assert!(
        filtered <= THREAD_SCRATCH_KEEP,
        "kept {filtered} filtered bytes"
    );
    // A small block's scratch is kept for the next call, as before.
    let small = compress(&data[..1 << 20], &CParams::default()).unwrap();
    d.decompress_range(&small, 100, &mut out).unwrap();
    assert!(d.scratch.filtered.capacity() > 0);
}
