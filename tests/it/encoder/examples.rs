//! The worked examples of docs/format/CHUNK.md, byte for byte (no python needed).

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn notes_run_stream_example() {
    // Section 2.3: np.full(10000, 0x41, uint8), zstd, clevel 5 -> 41-byte chunk.
    let p = CParams::blosc2(Codec::Zstd, 5, 1, filter_id::SHUFFLE);
    let chunk = b2fs::codec::compress(&[0x41; 10000], &p).unwrap();
    assert_eq!(
        chunk,
        hex(
            "05 01 85 01 10 27 00 00 10 27 00 00 29 00 00 00 00 00 00 00 00 01 05 00 00 00 00 00 \
             00 00 00 00 24 00 00 00 bf ff ff ff 01"
        )
    );
    // np.full(10000, 0x01020304, int32), BloscLZ, shuffle: four run streams.
    let data: Vec<u8> = std::iter::repeat_n(0x0102_0304u32.to_le_bytes(), 10000)
        .flatten()
        .collect();
    let p = CParams::blosc2(Codec::BloscLz, 5, 4, filter_id::SHUFFLE);
    let chunk = b2fs::codec::compress(&data, &p).unwrap();
    assert_eq!(
        &chunk[32..],
        &hex("24 00 00 00 fc ff ff ff 01 fd ff ff ff 01 fe ff ff ff 01 ff ff ff ff 01")[..]
    );
}

#[test]
fn notes_special_and_memcpy_examples() {
    // Section 2.7: zeros(10000) float64 with python-blosc2 defaults -> 32-byte zeros chunk.
    let chunk = b2fs::codec::compress(&[0u8; 80000], &CParams::default()).unwrap();
    assert_eq!(
        chunk,
        hex(
            "05 01 85 08 80 38 01 00 80 38 01 00 20 00 00 00 00 00 00 00 00 01 05 00 00 00 00 00 \
             00 00 00 10"
        )
    );
    // Without special chunks the zero runs stay.
    let p = CParams {
        allow_special: false,
        ..CParams::default()
    };
    let chunk = b2fs::codec::compress(&[0u8; 80000], &p).unwrap();
    assert_eq!(chunk.len(), 32 + 4 + 8 * 4);
    assert_eq!(b2fs::codec::decompress(&chunk).unwrap(), vec![0u8; 80000]);
    // NaN chunk (typesize 8), only when allowed.
    let nan: Vec<u8> = std::iter::repeat_n(f64::NAN.to_le_bytes(), 1000)
        .flatten()
        .collect();
    let chunk = b2fs::codec::compress(&nan, &CParams::default()).unwrap();
    assert_eq!(chunk.len(), 32);
    assert_eq!(chunk[31], 0x20);
    assert_eq!(b2fs::codec::decompress(&chunk).unwrap(), nan);
    let chunk = b2fs::codec::compress(&nan, &p).unwrap();
    assert!(chunk.len() > 32);
    assert_eq!(b2fs::codec::decompress(&chunk).unwrap(), nan);
    // Section 2.6: clevel 0 (4000 bytes, typesize 4, LZ4 + shuffle) and empty inputs.
    let p = CParams::blosc2(Codec::Lz4, 0, 4, filter_id::SHUFFLE);
    let data: Vec<u8> = (0..4000u32).map(|i| i as u8).collect();
    let chunk = b2fs::codec::compress(&data, &p).unwrap();
    assert_eq!(
        &chunk[..32],
        &hex(
            "05 01 07 04 a0 0f 00 00 a0 0f 00 00 c0 0f 00 00 00 00 00 00 00 01 01 00 00 00 00 00 \
              00 00 00 00"
        )[..]
    );
    assert_eq!(&chunk[32..], &data[..]);
    let chunk = b2fs::codec::compress(&[], &CParams::blosc2(Codec::BloscLz, 5, 1, 0)).unwrap();
    assert_eq!(
        &chunk[..16],
        &hex("05 01 07 01 00 00 00 00 01 00 00 00 20 00 00 00")[..]
    );
    let chunk = b2fs::codec::compress(
        &[],
        &CParams::blosc1(Codec::BloscLz, 5, 1, filter_id::SHUFFLE),
    )
    .unwrap();
    assert_eq!(
        chunk,
        hex("02 01 13 01 00 00 00 00 01 00 00 00 10 00 00 00")
    );
}

#[test]
fn notes_multiblock_blosclz_example() {
    // Section 2.5: arange(2048, int32), BloscLZ clevel 5, typesize 4, blocksize 4096.
    let data: Vec<u8> = (0..2048u32).flat_map(|i| i.to_le_bytes()).collect();
    let mut p = CParams::blosc2(Codec::BloscLz, 5, 4, filter_id::SHUFFLE);
    p.blocksize = Blocksize::Explicit(4096);
    let chunk = b2fs::codec::compress(&data, &p).unwrap();
    assert_eq!(chunk.len(), 678);
    assert_eq!(&chunk[32..40], &hex("28 00 00 00 67 01 00 00")[..]);
    assert_eq!(&chunk[40..48], &hex("11 01 00 00 3f 00 01 02")[..]);
    // Section 1.6, Blosc1: arange(50000, int32), blosclz clevel 5, shuffle -> 2100 bytes.
    let data: Vec<u8> = (0..50000u32).flat_map(|i| i.to_le_bytes()).collect();
    let p = CParams::blosc1(Codec::BloscLz, 5, 4, filter_id::SHUFFLE);
    let chunk = b2fs::codec::compress(&data, &p).unwrap();
    assert_eq!(chunk.len(), 2100);
    assert_eq!(
        &chunk[..26],
        &hex("02 01 01 04 40 0d 03 00 40 0d 03 00 34 08 00 00 14 00 00 00 d2 01 00 00 3f 00")[..]
    );
}
