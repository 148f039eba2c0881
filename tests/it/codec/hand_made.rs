//! Chunks built by hand, for what no reference writes: each kind of stream decoded, hostile
//! streams and headers refused with an error (never a panic), unsupported codecs and filters
//! named, special chunks filled with their value.

use b2fs::codec::{self, CodecError, Decoder};

/// A Blosc2 (v5) chunk header with the given fields.
fn header(flags: u8, typesize: u8, nbytes: i32, blocksize: i32, cbytes: i32) -> Vec<u8> {
    let mut h = vec![5, 1, flags, typesize];
    h.extend_from_slice(&nbytes.to_le_bytes());
    h.extend_from_slice(&blocksize.to_le_bytes());
    h.extend_from_slice(&cbytes.to_le_bytes());
    h.extend_from_slice(&[0; 16]);
    h
}

/// A one-block, one-stream, no-filter Blosc2 BloscLZ chunk of `nbytes` with the stream given.
pub(super) fn one_stream_chunk(nbytes: i32, csize: i32, payload: &[u8]) -> Vec<u8> {
    let cbytes = 32 + 4 + 4 + payload.len() as i32;
    let mut c = header(0x15, 1, nbytes, nbytes, cbytes); // blosclz, dont-split
    c.extend_from_slice(&36i32.to_le_bytes());
    c.extend_from_slice(&csize.to_le_bytes());
    c.extend_from_slice(payload);
    c
}

#[test]
fn hand_made_streams_decode() {
    // A run stream, a zero stream, a raw stream and a BloscLZ stream.
    let run = one_stream_chunk(100, -0x41, &[1]);
    assert_eq!(codec::decompress(&run).unwrap(), vec![0x41; 100]);
    let zero = one_stream_chunk(100, 0, &[]);
    assert_eq!(codec::decompress(&zero).unwrap(), vec![0; 100]);
    let raw: Vec<u8> = (0..100u8).collect();
    assert_eq!(
        codec::decompress(&one_stream_chunk(100, 100, &raw)).unwrap(),
        raw
    );
    let lz = one_stream_chunk(
        128,
        11,
        &[
            0x23, 0x78, 0x78, 0x78, 0x78, 0xe0, 0x71, 0x03, 0x01, 0x78, 0x78,
        ],
    );
    assert_eq!(codec::decompress(&lz).unwrap(), vec![b'x'; 128]);
}

#[test]
fn hostile_streams_are_errors() {
    let corrupt = |c: &[u8]| matches!(codec::decompress(c), Err(CodecError::Corrupt { .. }));
    // BloscLZ match reaching before the start.
    assert!(corrupt(&one_stream_chunk(100, 3, &[0x00, 0x41, 0x20])));
    assert!(corrupt(&one_stream_chunk(
        100,
        4,
        &[0x00, 0x41, 0x3f, 0xff]
    )));
    // Stream longer than its block.
    assert!(corrupt(&one_stream_chunk(4, 5, &[0x03, 1, 2, 3, 4])));
    // Stream running past the chunk end.
    let mut c = one_stream_chunk(100, 3, &[0x01, 1, 2]);
    c[36..40].copy_from_slice(&50i32.to_le_bytes());
    assert!(corrupt(&c));
    // Stream decoding to fewer bytes than its block.
    assert!(corrupt(&one_stream_chunk(100, 3, &[0x01, 1, 2])));
    // Run streams: bad token, csize below -255, missing token.
    assert!(corrupt(&one_stream_chunk(100, -3, &[2])));
    assert!(corrupt(&one_stream_chunk(100, -256, &[1])));
    assert!(corrupt(&one_stream_chunk(100, -3, &[])));
    // Block offsets outside the chunk.
    for bstart in [0i32, -1, 41, 1000, i32::MAX, i32::MIN] {
        let mut c = one_stream_chunk(100, 0, &[]);
        c[32..36].copy_from_slice(&bstart.to_le_bytes());
        assert!(corrupt(&c), "bstart {bstart}");
    }
    // A codec that is not BloscLZ gets garbage: every codec reports corruption.
    for format in [1u8, 3, 4] {
        let mut c = one_stream_chunk(100, 4, &[0xde, 0xad, 0xbe, 0xef]);
        c[2] = 0x15 | (format << 5);
        assert!(corrupt(&c), "format {format}");
    }
}

#[test]
fn hostile_headers_are_errors() {
    let good = one_stream_chunk(100, 0, &[]);
    assert!(codec::decompress(&good).is_ok());
    // Every truncation.
    for len in 0..good.len() {
        assert!(
            codec::decompress(&good[..len]).is_err(),
            "truncated to {len}"
        );
    }
    // Lying sizes.
    let set = |off: usize, v: i32| {
        let mut c = good.clone();
        c[off..off + 4].copy_from_slice(&v.to_le_bytes());
        c
    };
    for (off, v) in [
        (4, -1),
        (8, 0),
        (8, -5),
        (12, 1000),
        (12, 8),
        (12, -1),
        (8, 536_866_817),
    ] {
        assert!(
            codec::decompress(&set(off, v)).is_err(),
            "field at {off} = {v}"
        );
    }
    // More blocks than bstarts fit.
    assert!(matches!(
        codec::decompress(&set(8, 1)),
        Err(CodecError::Truncated {
            what: "bstarts",
            ..
        })
    ));
    // A forged nbytes beyond the limit: refused before allocating.
    let huge = set(4, i32::MAX - 64);
    assert!(matches!(
        Decoder::with_limit(1 << 20).decompress(&huge),
        Err(CodecError::TooLarge { .. })
    ));
    // typesize 0, reserved special kind, memcpyed with the wrong cbytes.
    let mut c = good.clone();
    c[3] = 0;
    assert!(matches!(
        codec::decompress(&c),
        Err(CodecError::BadHeader { .. })
    ));
    let mut c = good.clone();
    c[31] = 0x50;
    assert!(matches!(
        codec::decompress(&c),
        Err(CodecError::BadHeader { .. })
    ));
    let mut c = good.clone();
    c[2] |= 0x02;
    assert!(matches!(
        codec::decompress(&c),
        Err(CodecError::BadHeader { .. })
    ));
    // Lazy chunks are not decodable from the buffer.
    let mut c = good.clone();
    c[31] = 0x08;
    assert!(matches!(
        codec::decompress(&c),
        Err(CodecError::UnsupportedChunk { .. })
    ));
}

#[test]
fn unsupported_codecs_and_filters_are_named() {
    let mut c = one_stream_chunk(100, 4, &[0, 0, 0, 0]);
    c[2] = 0x15 | (6 << 5);
    for id in [32u8, 38, 40, 160, 255] {
        c[0x16] = id;
        assert!(
            matches!(codec::decompress(&c), Err(CodecError::UnsupportedCodec { id: i, .. }) if i == id),
            "codec {id}"
        );
    }
    // Snappy exists only in Blosc1 chunks.
    let mut b1 = vec![2, 1, 0x40 | 0x10, 1];
    b1.extend_from_slice(&100i32.to_le_bytes());
    b1.extend_from_slice(&100i32.to_le_bytes());
    b1.extend_from_slice(&28i32.to_le_bytes());
    b1.extend_from_slice(&20i32.to_le_bytes());
    b1.extend_from_slice(&4i32.to_le_bytes());
    b1.extend_from_slice(&[0, 0, 0, 0]);
    assert!(matches!(
        codec::decompress(&b1),
        Err(CodecError::UnsupportedCodec { id: 3, .. })
    ));
    // A plugin filter.
    let mut c = one_stream_chunk(100, 0, &[]);
    c[0x10] = 33;
    assert!(matches!(
        codec::decompress(&c),
        Err(CodecError::UnsupportedFilter {
            id: 33,
            slot: 0,
            ..
        })
    ));
}

#[test]
fn special_chunks_fill_their_value() {
    // Value special: element size is cbytes - 32, not the typesize byte.
    let mut c = header(0x05, 8, 48, 48, 35);
    c[31] = 0x30;
    c.extend_from_slice(&[1, 2, 3]);
    let out = codec::decompress(&c).unwrap();
    assert_eq!(out, [1, 2, 3].repeat(16));
    let mut part = [0u8; 7];
    assert_eq!(codec::decompress_range(&c, 4, &mut part), Ok(7));
    assert_eq!(part, [2, 3, 1, 2, 3, 1, 2]);
    // NaN float64 and float32; NaN with typesize 2 is an error.
    let mut c = header(0x05, 8, 16, 16, 32);
    c[31] = 0x20;
    assert_eq!(
        codec::decompress(&c).unwrap(),
        [f64::NAN.to_le_bytes(); 2].concat()
    );
    c[3] = 4;
    assert_eq!(
        codec::decompress(&c).unwrap(),
        [0x7fc0_0000u32.to_le_bytes(); 4].concat()
    );
    c[3] = 2;
    assert!(codec::decompress(&c).is_err());
    // Uninit reads as zeros, into a dirty buffer too.
    let mut c = header(0x05, 4, 16, 16, 32);
    c[31] = 0x40;
    let mut out = [0xEEu8; 16];
    assert_eq!(codec::decompress_into(&c, &mut out), Ok(16));
    assert_eq!(out, [0; 16]);
}
