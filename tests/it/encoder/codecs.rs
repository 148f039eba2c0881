//! Round trips through our own decoder, the codecs that are not byte-exact by construction
//! (LZ4/LZ4HC exact, zlib and zstd within 3%) against C-Blosc2, and `compress_zeros`.

use super::*;

/// The whole interop matrix, decoded by us (no python needed).
#[test]
fn round_trip_matrix() {
    let cases = interop_cases(0x2071_77a1, 600);
    let mut enc = b2fs::codec::encode::Encoder::new();
    for (i, case) in cases.iter().enumerate() {
        let chunk = enc.compress(&case.data, &case.params).unwrap();
        let back = b2fs::codec::decompress(&chunk)
            .unwrap_or_else(|e| panic!("case {i} {:?}: {e}", case.params));
        assert!(
            back == expected_output(case, &chunk),
            "case {i} {:?}: round trip differs",
            case.params
        );
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Random parameters (every codec, pipeline, split mode, clevel, blocksize mode) and
        /// random data of several shapes: our decoder gives the input back.
        #[test]
        fn round_trip_random(seed in any::<u64>(), small in any::<bool>()) {
            let mut case = interop_cases(seed, 1).pop().unwrap();
            if small {
                let n = case.data.len().min(3000);
                case.data.truncate(n);
            }
            let chunk = b2fs::codec::compress(&case.data, &case.params).unwrap();
            let back = b2fs::codec::decompress(&chunk).unwrap();
            prop_assert!(back == expected_output(&case, &chunk), "{:?} n={}", case.params, case.data.len());
        }

        /// Arbitrary (mostly invalid) parameters never panic: either a typed error or a chunk
        /// that decodes to the input.
        #[test]
        fn arbitrary_params_never_panic(
            data in proptest::collection::vec(0u8..4, 0..3000),
            codec in 0usize..6,
            clevel in 0u8..12,
            ts in prop_oneof![0usize..20, 250usize..270, Just(usize::MAX)],
            filters in proptest::array::uniform6(prop_oneof![0u8..6, Just(34u8), Just(35u8), any::<u8>()]),
            metas in proptest::array::uniform6(any::<u8>()),
            blocksize in prop_oneof![
                Just(Blocksize::Auto),
                prop_oneof![Just(0usize), 1usize..64, 64usize..100_000, Just(usize::MAX)]
                    .prop_map(Blocksize::Explicit),
            ],
            splitmode in 0usize..4,
            blosc1 in any::<bool>(),
            allow_special in any::<bool>(),
        ) {
            let p = CParams {
                format: if blosc1 { ChunkFormat::Blosc1 } else { ChunkFormat::Blosc2 },
                codec: [Codec::BloscLz, Codec::Lz4, Codec::Lz4Hc, Codec::Zlib, Codec::Zstd, Codec::Snappy][codec],
                clevel,
                typesize: ts,
                filters,
                filters_meta: metas,
                splitmode: SPLITMODES[splitmode],
                blocksize,
                allow_special,
            };
            if let Ok(chunk) = b2fs::codec::compress(&data, &p) {
                let back = b2fs::codec::decompress(&chunk).unwrap();
                let case = Case { params: p.clone(), data: data.clone() };
                // expected_output models TRUNC_PREC on the original layout, which is what it
                // sees only when every earlier slot is empty; after a reordering filter the
                // loss depends on the reordered bytes, and only the length is predictable.
                let trunc_slot = p.filters.iter().position(|&f| f == filter_id::TRUNC_PREC);
                match trunc_slot {
                    None => prop_assert_eq!(back, data),
                    Some(slot) if p.filters[..slot].iter().all(|&f| f == 0) => {
                        prop_assert_eq!(back, expected_output(&case, &chunk))
                    }
                    Some(_) => prop_assert_eq!(back.len(), data.len()),
                }
            }
        }

        /// Arbitrary bytes through every codec at random levels, Blosc1 and Blosc2.
        #[test]
        fn round_trip_arbitrary_bytes(
            data in proptest::collection::vec(any::<u8>(), 0..5000),
            codec in 0usize..5,
            clevel in 0u8..10,
            ts in 1usize..20,
            blosc1 in any::<bool>(),
        ) {
            let codec = CODECS[codec];
            let p = if blosc1 {
                CParams::blosc1(codec, clevel, ts, filter_id::SHUFFLE)
            } else {
                CParams::blosc2(codec, clevel, ts, filter_id::BITSHUFFLE)
            };
            let chunk = b2fs::codec::compress(&data, &p).unwrap();
            prop_assert_eq!(b2fs::codec::decompress(&chunk).unwrap(), data);
        }
    }
}

/// LZ4 and LZ4HC: our encoders follow LZ4 1.10's algorithms (fast with acceleration, mid for
/// HC levels 1-2, hash chain with pattern analysis above), so the chunks must equal C-Blosc2's
/// byte for byte. zlib and zstd come from other builds than C-Blosc2's (miniz_oxide or zlib-rs
/// vs zlib-ng, zstd-sys vs the bundled zstd): counted, and total sizes must stay within 3%.
#[test]
fn other_codecs_against_reference() {
    let py = or_skip!(python("encoder::other_codecs_against_reference"));
    let mut cases = byte_exact_cases(0x07e5_c0de, 400);
    let mut rng = Rng(99);
    for c in &mut cases {
        c.params.codec = rng.pick(&[Codec::Lz4, Codec::Lz4Hc, Codec::Zlib, Codec::Zstd]);
        c.params.blocksize = Blocksize::Auto;
    }
    let reference = reference_chunks(&py, &cases);
    let mut enc = b2fs::codec::encode::Encoder::new();
    let mut same = std::collections::BTreeMap::<&str, (usize, usize, usize, usize)>::new();
    for (case, c_chunk) in cases.iter().zip(&reference) {
        let ours = enc.compress(&case.data, &case.params).unwrap();
        let e = same.entry(case.params.codec.name()).or_default();
        e.0 += usize::from(&ours == c_chunk);
        e.1 += 1;
        e.2 += ours.len();
        e.3 += c_chunk.len();
        if &ours != c_chunk && std::env::var_os("B2FS_SHOW_DIFF").is_some() {
            eprintln!(
                "differs: {:?} cl={} ts={} n={} ours={} C={}",
                case.params.codec,
                case.params.clevel,
                case.params.typesize,
                case.data.len(),
                ours.len(),
                c_chunk.len()
            );
        }
    }
    for (codec, (eq, n, ours, c)) in &same {
        let size = *ours as f64 / *c as f64;
        eprintln!(
            "other_codecs_against_reference: {codec}: {eq}/{n} byte-identical, total size ours/C = {size:.4}"
        );
        if *codec == "lz4" || *codec == "lz4hc" {
            assert_eq!(
                eq, n,
                "{codec}: chunks differ from C-Blosc2's (B2FS_SHOW_DIFF=1 lists them)"
            );
        } else {
            assert!(
                (0.97..=1.03).contains(&size),
                "{codec}: total size ours/C = {size}"
            );
        }
    }
}

/// LZ4HC at every level on larger blocks of the data its match finder works hardest on
/// (float noise, random walks, mutated text, runs, small values), split and unsplit: the
/// chunks equal C-Blosc2's byte for byte. Guards optimisations of the hash-chain search.
#[test]
fn lz4hc_every_level_byte_exact() {
    let py = or_skip!(python("encoder::lz4hc_every_level_byte_exact"));
    let mut rng = Rng(0x4c5a_3448);
    let mut cases = Vec::new();
    for (kind, ts) in [(1, 4), (2, 8), (4, 1), (6, 1), (7, 2)] {
        let data = gen_data(&mut rng, 300_000, kind, ts);
        for clevel in 1..=9 {
            for splitmode in [SplitMode::Always, SplitMode::Never] {
                let mut params = CParams::blosc2(Codec::Lz4Hc, clevel, ts, filter_id::SHUFFLE);
                params.splitmode = splitmode;
                cases.push(Case {
                    params,
                    data: data.clone(),
                });
            }
        }
    }
    let reference = reference_chunks(&py, &cases);
    let mut enc = b2fs::codec::encode::Encoder::new();
    let bad: Vec<String> = cases
        .iter()
        .zip(&reference)
        .filter_map(|(case, c_chunk)| {
            let ours = enc.compress(&case.data, &case.params).unwrap();
            (&ours != c_chunk).then(|| {
                format!(
                    "clevel {} ts {} {:?}: ours {} bytes, C {}",
                    case.params.clevel,
                    case.params.typesize,
                    case.params.splitmode,
                    ours.len(),
                    c_chunk.len()
                )
            })
        })
        .collect();
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}

/// `compress_zeros` (salvage's chunks of zeros, built from one block) writes the very bytes
/// `compress` writes for a buffer of zeros: every codec, both formats, typesizes with and
/// without split, a leftover block, clevel 0 and inputs too small to compress (memcpyed).
/// A chunk declaring 2 GiB - 1 KiB of zeros is built without 2 GiB and decodes to zeros.
#[test]
fn compress_zeros_is_compress_of_zeros() {
    let codecs = [
        Codec::BloscLz,
        Codec::Lz4,
        Codec::Lz4Hc,
        Codec::Zlib,
        Codec::Zstd,
    ];
    for codec in codecs {
        for (ts, filter) in [(1, 0), (4, filter_id::SHUFFLE), (8, filter_id::BITSHUFFLE)] {
            for n in [0usize, 3, 100, 4096, 1 << 20, (3 << 20) + 8 * 17] {
                for clevel in [0u8, 5, 9] {
                    let zeros = vec![0u8; n];
                    for p in [
                        CParams::blosc1(codec, clevel, ts, filter),
                        CParams::blosc2(codec, clevel, ts, filter),
                    ] {
                        let want = b2fs::codec::compress(&zeros, &p).unwrap();
                        let got = b2fs::codec::compress_zeros(n, &p).unwrap();
                        assert!(
                            got == want,
                            "{codec:?} ts {ts} n {n} clevel {clevel} {:?}",
                            p.format
                        );
                    }
                }
            }
        }
    }
    let n = (2usize << 30) - 1024;
    let p = CParams::blosc1(Codec::BloscLz, 5, 8, filter_id::SHUFFLE);
    let chunk = b2fs::codec::compress_zeros(n, &p).unwrap();
    let info = b2fs::codec::chunk_info(&chunk).unwrap();
    assert_eq!((info.nbytes, info.cbytes), (n, chunk.len()));
    assert!(chunk.len() < n / 100, "{} bytes", chunk.len());
    let mut tail = vec![1u8; 1 << 20];
    let got = b2fs::codec::decompress_range(&chunk, n - tail.len(), &mut tail).unwrap();
    assert_eq!(got, tail.len());
    assert!(tail.iter().all(|&b| b == 0));
}

/// `compress_repeated` (a new array's fill chunk, built from one block of the fill value)
/// writes the very bytes `compress` writes for the whole chunk of that value: items of 1, 4,
/// 8 and 12 bytes (0, 7, NaN and 1.5; 12 bytes: blocks not starting at an item, built whole),
/// every codec, both formats, with shuffle, bitshuffle and delta, leftover blocks and chunks
/// smaller than a block; python-blosc2 decompresses such chunks to the repeated value.
#[test]
fn compress_repeated_is_compress_of_the_repeated_item() {
    let items: [Vec<u8>; 6] = [
        vec![0],
        vec![9],
        7i32.to_le_bytes().to_vec(),
        f64::NAN.to_le_bytes().to_vec(),
        1.5f64.to_le_bytes().to_vec(),
        [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12].to_vec(),
    ];
    let codecs = [Codec::BloscLz, Codec::Lz4, Codec::Zstd, Codec::Zlib];
    let mut samples = Vec::new();
    for item in &items {
        let ts = if item.len() == 12 { 4 } else { item.len() };
        for codec in codecs {
            for filter in [
                0,
                filter_id::SHUFFLE,
                filter_id::BITSHUFFLE,
                filter_id::DELTA,
            ] {
                for n_items in [1usize, 37, 4096, (1 << 20) / 8 + 5] {
                    let n = n_items * item.len();
                    let whole = item.repeat(n_items);
                    let mut ps = vec![CParams::blosc2(codec, 5, ts, filter)];
                    if filter != filter_id::DELTA {
                        ps.push(CParams::blosc1(codec, 5, ts, filter));
                    }
                    for p in ps {
                        let want = b2fs::codec::compress(&whole, &p).unwrap();
                        let got = b2fs::codec::compress_repeated(item, n, &p).unwrap();
                        assert!(
                            got == want,
                            "item {item:?} {codec:?} filter {filter} n {n} {:?}",
                            p.format
                        );
                        if n_items > 4000 && codec == Codec::Zstd && filter == filter_id::SHUFFLE {
                            samples.push((got, whole.clone()));
                        }
                    }
                }
            }
        }
    }
    assert!(b2fs::codec::compress_repeated(&[], 8, &CParams::default()).is_err());
    assert!(b2fs::codec::compress_repeated(&[1, 2, 3], 8, &CParams::default()).is_err());
    let Some(py) = python("compress_repeated_is_compress_of_the_repeated_item") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (i, (chunk, whole)) in samples.iter().enumerate() {
        std::fs::write(dir.path().join(format!("{i}.chunk")), chunk).unwrap();
        std::fs::write(dir.path().join(format!("{i}.raw")), whole).unwrap();
    }
    let said = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2\n\
             d, n = sys.argv[1], int(sys.argv[2])\n\
             same = [blosc2.decompress(open(f'{d}/{i}.chunk', 'rb').read()) == \
             open(f'{d}/{i}.raw', 'rb').read() for i in range(n)]\n\
             print(sum(same), n)",
            dir.path().to_str().unwrap(),
            &samples.len().to_string(),
        ],
    );
    assert_eq!(said, format!("{0} {0}", samples.len()));
}
