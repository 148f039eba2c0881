//! The chunk encoder: the tuner and BloscLZ against the C libraries (python-blosc2 and
//! python-blosc as oracles), byte-exact chunks, interop (the reference decodes what we
//! write), round trips through our own decoder, and typed errors for invalid parameters.

use std::fmt::Write as _;
use std::path::Path;

use b2fs::codec::encode::{Blocksize, CParams, ChunkFormat, SplitMode};
use b2fs::codec::tune::{TuneInput, tune_blosc1, tune_blosc2};
use b2fs::codec::{Codec, filter_id};

use crate::support::{python, python_says, run_python};

/// A small deterministic generator (splitmix64) so that the case lists are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

const CODECS: [Codec; 5] = [
    Codec::BloscLz,
    Codec::Lz4,
    Codec::Lz4Hc,
    Codec::Zlib,
    Codec::Zstd,
];
const SPLITMODES: [SplitMode; 4] = [
    SplitMode::Always,
    SplitMode::Never,
    SplitMode::Auto,
    SplitMode::ForwardCompat,
];

fn splitmode_code(m: SplitMode) -> u8 {
    match m {
        SplitMode::Always => 1,
        SplitMode::Never => 2,
        SplitMode::Auto => 3,
        SplitMode::ForwardCompat => 4,
    }
}

/// Python: for each line `fmt codec clevel filter ts n splitmode forced`, compress zeros with
/// the reference and print the header's blocksize and flags.
const TUNE_PY: &str = r#"
import sys, blosc2, blosc
blosc.set_nthreads(1)
out = []
for line in open(sys.argv[1]):
    fmt, codec, clevel, filt, ts, n, sm, forced = map(int, line.split())
    data = bytes(n)
    if fmt == 2:
        filters = [filt] if filt else []
        c = blosc2.compress2(data, typesize=ts, clevel=clevel, codec=blosc2.Codec(codec),
                             filters=filters, filters_meta=[0] * len(filters),
                             splitmode=blosc2.SplitMode(sm), blocksize=forced, nthreads=1)
    else:
        blosc.set_blocksize(forced)
        c = blosc.compress(data, typesize=ts, clevel=clevel, shuffle=filt,
                           cname=blosc2.Codec(codec).name.lower())
    out.append("%d %d" % (int.from_bytes(c[8:12], "little"), c[2]))
print("\n".join(out))
"#;

#[test]
fn tune_matches_reference() {
    let py = or_skip!(python("encoder::tune_matches_reference"));
    let mut rng = Rng(0x5eed_0001);
    let sizes = [
        0usize,
        5,
        31,
        32,
        100,
        127,
        128,
        1000,
        4099,
        32768,
        33333,
        100_000,
        262_147,
        1 << 20,
        3_000_001,
    ];
    let mut cases = Vec::new();
    for i in 0..1600 {
        let blosc1 = i % 4 == 3;
        let codec = rng.pick(&CODECS);
        let clevel = rng.below(10) as u8;
        let filt = rng.below(3) as u8; // 0 none, 1 shuffle, 2 bitshuffle
        // (typesize > 255 is refused by our encoder: `typesize_over_255_and_unaligned_blocksize_refused_unlike_c`.)
        let ts = rng.pick(&[1usize, 2, 3, 4, 8, 16, 17, 33, 255]);
        let n = rng.pick(&sizes);
        let sm = if blosc1 {
            SplitMode::ForwardCompat
        } else {
            rng.pick(&SPLITMODES)
        };
        let forced = if rng.below(5) == 0 {
            (rng.below(64) as usize + 1) * 1024 * ts.min(8)
        } else {
            0
        };
        cases.push((blosc1, codec, clevel, filt, ts, n, sm, forced));
    }
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("cases.txt");
    let mut text = String::new();
    for &(b1, codec, clevel, filt, ts, n, sm, forced) in &cases {
        writeln!(
            text,
            "{} {} {} {} {} {} {} {}",
            if b1 { 1 } else { 2 },
            codec.compcode(),
            clevel,
            filt,
            ts,
            n,
            splitmode_code(sm),
            forced
        )
        .unwrap();
    }
    std::fs::write(&list, text).unwrap();
    let out = run_python(&py, &["-c", TUNE_PY, list.to_str().unwrap()]);
    let out = String::from_utf8(out).unwrap();
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for (line, &(b1, codec, clevel, filt, ts, n, sm, forced)) in out.lines().zip(&cases) {
        let mut it = line.split_whitespace().map(|v| v.parse::<usize>().unwrap());
        let (c_bs, c_flags) = (it.next().unwrap(), it.next().unwrap() as u8);
        let mut filters = [0u8; 6];
        filters[0] = filt;
        let input = TuneInput {
            codec,
            clevel,
            typesize: ts,
            filters: &filters,
            splitmode: sm,
            blocksize: if forced > 0 {
                Blocksize::Explicit(forced)
            } else {
                Blocksize::Auto
            },
            nbytes: n,
        };
        let t = if b1 {
            tune_blosc1(&input)
        } else {
            // C writes the unrounded forced value (section 6.2): skip those.
            let f = forced.min(n);
            if forced > 0 && f > ts && f % ts != 0 {
                continue;
            }
            tune_blosc2(&input)
        };
        let memcpy_min = if b1 { 128 } else { 32 };
        let split_known = clevel > 0 && n >= memcpy_min && n >= ts;
        let c_split = c_flags & 0x10 == 0;
        checked += 1;
        if t.blocksize != c_bs || (split_known && t.split != c_split) {
            mismatches.push(format!(
                "b1={b1} {codec:?} cl={clevel} filt={filt} ts={ts} n={n} {sm:?} forced={forced}: \
                 ours bs={} split={} / C bs={c_bs} flags={c_flags:#x}",
                t.blocksize, t.split
            ));
        }
    }
    assert_eq!(out.lines().count(), cases.len());
    eprintln!("tune_matches_reference: {checked} cases checked");
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// Test data of one of several shapes, `n` bytes.
fn gen_data(rng: &mut Rng, n: usize, kind: u64, ts: usize) -> Vec<u8> {
    let ts = ts.clamp(1, 8);
    let mut out = Vec::with_capacity(n + 8);
    match kind {
        // arange of ts-byte integers
        0 => {
            let mut i = rng.below(1000);
            while out.len() < n {
                out.extend_from_slice(&i.to_le_bytes()[..ts]);
                i += 1;
            }
        }
        // random walk of ts-byte integers
        1 => {
            let mut v: i64 = 0;
            while out.len() < n {
                v += rng.below(21) as i64 - 10;
                out.extend_from_slice(&v.to_le_bytes()[..ts]);
            }
        }
        // float64 with noise
        2 => {
            let mut i = 0u64;
            while out.len() < n {
                let x = (i as f64 * 0.01).sin() + (rng.below(1000) as f64) * 1e-6;
                out.extend_from_slice(&x.to_le_bytes());
                i += 1;
            }
        }
        // random bytes
        3 => {
            while out.len() < n {
                out.extend_from_slice(&rng.next().to_le_bytes());
            }
        }
        // text with mutations
        4 => {
            let text = b"Blosc is a blocking, shuffling and lossless compression library. ";
            while out.len() < n {
                let mut t = text.to_vec();
                let k = rng.below(t.len() as u64) as usize;
                t[k] = b'a' + rng.below(26) as u8;
                out.extend_from_slice(&t);
            }
        }
        // mostly zeros with sparse values
        5 => {
            out.resize(n, 0);
            for _ in 0..n / 97 {
                let k = rng.below(n.max(1) as u64) as usize;
                out[k] = rng.next() as u8;
            }
        }
        // one repeated byte (runs)
        6 => {
            let v = if rng.below(2) == 0 {
                0
            } else {
                rng.next() as u8
            };
            out.resize(n, v);
        }
        // small values 0..4
        _ => {
            while out.len() < n {
                out.push((rng.next() & 3) as u8);
            }
        }
    }
    out.truncate(n);
    out
}

/// Python: compress each case with the reference (serial) and write `<path>.c`.
const COMPRESS_PY: &str = r#"
import sys, json, blosc2, blosc
blosc.set_nthreads(1)
for case in json.load(open(sys.argv[1])):
    data = open(case["path"], "rb").read()
    if case["fmt"] == 2:
        c = blosc2.compress2(data, typesize=case["ts"], clevel=case["clevel"],
                             codec=blosc2.Codec(case["codec"]),
                             filters=[blosc2.Filter(f) for f in case["filters"]],
                             filters_meta=case["metas"],
                             splitmode=blosc2.SplitMode(case["sm"]),
                             blocksize=case["bs"], nthreads=1)
    else:
        blosc.set_blocksize(case["bs"])
        c = blosc.compress(data, typesize=case["ts"], clevel=case["clevel"],
                           shuffle=case["shuffle"], cname=blosc2.Codec(case["codec"]).name.lower())
    open(case["path"] + ".c", "wb").write(c)
"#;

/// The forced blocksize as C's API takes it (0 = automatic).
fn forced(b: Blocksize) -> usize {
    match b {
        Blocksize::Auto => 0,
        Blocksize::Explicit(f) => f,
    }
}

/// One chunk-encoding case of a test matrix.
#[derive(Debug, Clone)]
struct Case {
    params: CParams,
    data: Vec<u8>,
}

fn case_json(i: usize, c: &Case, path: &Path) -> String {
    let p = &c.params;
    let shuffle = match p.filters.iter().find(|&&f| f != 0) {
        Some(&filter_id::SHUFFLE) => 1,
        Some(&filter_id::BITSHUFFLE) => 2,
        _ => 0,
    };
    format!(
        "{{\"id\":{i},\"fmt\":{},\"codec\":{},\"clevel\":{},\"filters\":{:?},\"metas\":{:?},\
         \"ts\":{},\"sm\":{},\"bs\":{},\"shuffle\":{shuffle},\"path\":\"{}\"}}",
        if p.format == ChunkFormat::Blosc2 {
            2
        } else {
            1
        },
        p.codec.compcode(),
        p.clevel,
        p.filters,
        p.filters_meta,
        p.typesize,
        splitmode_code(p.splitmode),
        forced(p.blocksize),
        path.display()
    )
}

/// Runs the reference compressor over `cases`; returns its chunks.
fn reference_chunks(py: &Path, cases: &[Case]) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let mut json = String::from("[");
    for (i, c) in cases.iter().enumerate() {
        let path = dir.path().join(format!("{i}.raw"));
        std::fs::write(&path, &c.data).unwrap();
        if i > 0 {
            json.push(',');
        }
        json.push_str(&case_json(i, c, &path));
    }
    json.push(']');
    let list = dir.path().join("cases.json");
    std::fs::write(&list, json).unwrap();
    run_python(py, &["-c", COMPRESS_PY, list.to_str().unwrap()]);
    (0..cases.len())
        .map(|i| std::fs::read(dir.path().join(format!("{i}.raw.c"))).unwrap())
        .collect()
}

/// Random cases whose chunks C-Blosc2 / C-Blosc 1.x produce deterministically and that we
/// reproduce byte for byte: BloscLZ, shuffle / bitshuffle / none (plus DELTA in front and
/// BYTEDELTA after SHUFFLE on whole elements), every split mode, auto and forced blocksize.
fn byte_exact_cases(seed: u64, count: usize) -> Vec<Case> {
    let mut rng = Rng(seed);
    let mut cases = Vec::new();
    while cases.len() < count {
        let blosc1 = rng.below(3) == 0;
        // (Our encoder takes typesize <= 255 only; C-Blosc2 also accepts larger ones.)
        let ts = rng.pick(&[1usize, 2, 4, 8, 8, 3, 16, 17, 255]);
        let clevel = rng.below(10) as u8;
        let n = match rng.below(4) {
            0 => rng.below(300) as usize,
            1 => rng.below(20_000) as usize,
            _ => rng.below(300_000) as usize,
        };
        let kind = rng.below(8);
        let filt = rng.pick(&[0u8, filter_id::SHUFFLE, filter_id::BITSHUFFLE]);
        let mut params = if blosc1 {
            CParams::blosc1(Codec::BloscLz, clevel, ts, filt)
        } else {
            let mut p = CParams::blosc2(Codec::BloscLz, clevel, ts, filt);
            p.splitmode = rng.pick(&SPLITMODES);
            let extra = rng.below(6);
            if extra == 0 && n % 8 == 0 {
                p.filters = [filter_id::DELTA, filt, 0, 0, 0, 0];
            } else if extra == 1 && filt == filter_id::SHUFFLE {
                p.filters = [filter_id::SHUFFLE, filter_id::BYTEDELTA, 0, 0, 0, 0];
            } else {
                p.filters = [filt, 0, 0, 0, 0, 0];
            }
            p
        };
        if rng.below(4) == 0 {
            params.blocksize = Blocksize::Explicit(ts * (rng.below(64) as usize + 1) * 256);
        }
        let data = gen_data(&mut rng, n, kind, ts);
        cases.push(Case { params, data });
    }
    cases
}

#[test]
fn blosclz_chunks_byte_exact() {
    let py = or_skip!(python("encoder::blosclz_chunks_byte_exact"));
    let cases = byte_exact_cases(0x0b10_c1a2, 1000);
    let reference = reference_chunks(&py, &cases);
    let mut enc = b2fs::codec::encode::Encoder::new();
    let mut bad = Vec::new();
    let mut skipped = 0;
    let mut blosc1 = 0;
    for (i, (case, c_chunk)) in cases.iter().zip(&reference).enumerate() {
        blosc1 += usize::from(case.params.format == ChunkFormat::Blosc1);
        let ours = enc.compress(&case.data, &case.params).unwrap();
        // Explicit blocksizes are multiples of the typesize, but C caps one above the input
        // size to the unrounded input size (section 6.2, a C bug): not comparable.
        let (f, n, ts) = (
            forced(case.params.blocksize),
            case.data.len(),
            case.params.typesize,
        );
        if case.params.format == ChunkFormat::Blosc2 && f > 0 && f.min(n) > ts && f.min(n) % ts != 0
        {
            skipped += 1;
            continue;
        }
        if &ours != c_chunk {
            let first = ours.iter().zip(c_chunk).position(|(a, b)| a != b);
            bad.push(format!(
                "case {i}: n={} {:?}: ours {} bytes, C {} bytes, first difference at {:?}",
                case.data.len(),
                case.params,
                ours.len(),
                c_chunk.len(),
                first
            ));
        }
    }
    eprintln!(
        "blosclz_chunks_byte_exact: {}/{} identical ({blosc1} of them Blosc1 vs C-Blosc 1.x; \
         {skipped} skipped: C's unrounded forced blocksize)",
        cases.len() - skipped - bad.len(),
        cases.len() - skipped
    );
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}

/// The pipelines the interop matrix uses for Blosc2 chunks (slot 0 first).
fn blosc2_pipelines(ts: usize) -> Vec<([u8; 6], [u8; 6])> {
    use filter_id::*;
    let mut v = vec![
        ([0; 6], [0; 6]),
        ([SHUFFLE, 0, 0, 0, 0, 0], [0; 6]),
        ([BITSHUFFLE, 0, 0, 0, 0, 0], [0; 6]),
        ([DELTA, 0, 0, 0, 0, 0], [0; 6]),
        ([DELTA, SHUFFLE, 0, 0, 0, 0], [0; 6]),
        ([DELTA, BITSHUFFLE, 0, 0, 0, 0], [0; 6]),
        ([SHUFFLE, BYTEDELTA, 0, 0, 0, 0], [0; 6]),
        ([0, 0, 0, 0, 0, SHUFFLE], [0; 6]),
    ];
    if ts == 4 || ts == 8 {
        let p = if ts == 4 { 10 } else { 20 };
        v.push(([TRUNC_PREC, SHUFFLE, 0, 0, 0, 0], [p, 0, 0, 0, 0, 0]));
        v.push(([TRUNC_PREC, BITSHUFFLE, 0, 0, 0, 0], [0xfb, 0, 0, 0, 0, 0]));
    }
    if ts == 8 {
        v.push(([SHUFFLE, 0, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0]));
        v.push(([SHUFFLE, BYTEDELTA, 0, 0, 0, 0], [4, 4, 0, 0, 0, 0]));
    }
    v
}

/// A random matrix over every codec, filter pipeline, split mode, clevel and blocksize mode.
fn interop_cases(seed: u64, count: usize) -> Vec<Case> {
    let mut rng = Rng(seed);
    let mut cases = Vec::new();
    while cases.len() < count {
        let blosc1 = rng.below(4) == 0;
        let codec = rng.pick(&CODECS);
        let ts = rng.pick(&[1usize, 2, 4, 4, 8, 8, 3, 12, 16, 24, 255]);
        let clevel = rng.below(10) as u8;
        let n = match rng.below(5) {
            0 => rng.below(200) as usize,
            1 => rng.below(5_000) as usize,
            2 => 1001,
            _ => rng.below(if codec == Codec::Zstd && clevel == 9 {
                60_000
            } else {
                200_000
            }) as usize,
        };
        let kind = rng.below(8);
        let mut params = if blosc1 {
            let filt = rng.pick(&[0u8, filter_id::SHUFFLE, filter_id::BITSHUFFLE]);
            CParams::blosc1(codec, clevel, ts, filt)
        } else {
            let mut p = CParams::blosc2(codec, clevel, ts, 0);
            let (f, m) = rng.pick(&blosc2_pipelines(ts));
            p.filters = f;
            p.filters_meta = m;
            p.splitmode = rng.pick(&SPLITMODES);
            p.allow_special = rng.below(2) == 0;
            p
        };
        if rng.below(4) == 0 {
            params.blocksize = Blocksize::Explicit(ts * (rng.below(64) as usize + 1) * 128);
        }
        let data = gen_data(&mut rng, n, kind, ts);
        cases.push(Case { params, data });
    }
    cases
}

/// What a chunk must decode to: the input, with TRUNC_PREC applied where the pipeline has it
/// and the chunk is not memcpyed (memcpyed chunks hold the raw input, as C's do).
fn expected_output(case: &Case, chunk: &[u8]) -> Vec<u8> {
    let p = &case.params;
    let mut data = case.data.clone();
    if chunk[2] & 0x02 != 0 {
        return data;
    }
    for (&f, &m) in p.filters.iter().zip(&p.filters_meta) {
        if f == filter_id::TRUNC_PREC {
            let src = data.clone();
            b2fs::codec::filter::truncprec::trunc_prec(p.typesize, m, &src, &mut data).unwrap();
        }
    }
    data
}

#[test]
fn reference_decodes_our_chunks() {
    let py = or_skip!(python("encoder::reference_decodes_our_chunks"));
    let mut cases = interop_cases(0x1e7e_0a11, 700);
    // The tails C leaves uninitialised (section 3.4, 3.5): a partial DELTA word and a partial
    // TRUNC_PREC element in the leftover block, for every codec.
    let mut rng = Rng(7);
    for codec in CODECS {
        for (filters, metas, ts, n) in [
            (
                [filter_id::DELTA, filter_id::SHUFFLE, 0, 0, 0, 0],
                [0; 6],
                4,
                1001,
            ),
            ([filter_id::DELTA, 0, 0, 0, 0, 0], [0; 6], 8, 40_005),
            (
                [filter_id::TRUNC_PREC, filter_id::SHUFFLE, 0, 0, 0, 0],
                [12, 0, 0, 0, 0, 0],
                4,
                1003,
            ),
        ] {
            let mut params = CParams::blosc2(codec, 5, ts, 0);
            params.filters = filters;
            params.filters_meta = metas;
            params.blocksize = if n > 10_000 {
                Blocksize::Explicit(8192)
            } else {
                Blocksize::Auto
            };
            let data = gen_data(&mut rng, n, 2, ts);
            cases.push(Case { params, data });
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut enc = b2fs::codec::encode::Encoder::new();
    let mut blosc1 = 0;
    for (i, case) in cases.iter().enumerate() {
        let chunk = enc
            .compress(&case.data, &case.params)
            .unwrap_or_else(|e| panic!("case {i} {:?}: {e}", case.params));
        blosc1 += usize::from(chunk[0] == 2);
        std::fs::write(dir.path().join(format!("{i:04}.chunk")), &chunk).unwrap();
        std::fs::write(
            dir.path().join(format!("{i:04}.expect")),
            expected_output(case, &chunk),
        )
        .unwrap();
    }
    let out = crate::support::oracle(&py, &[&"scripts/oracle/decompress_dir.py", &dir.path()]);
    let report: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let passed = report["passed"].as_u64().unwrap() as usize;
    let failed = report["failed"].as_array().unwrap();
    let details: Vec<String> = failed
        .iter()
        .map(|f| {
            let i: usize = f["name"].as_str().unwrap().parse().unwrap();
            format!(
                "case {i}: n={} {:?}: {}",
                cases[i].data.len(),
                cases[i].params,
                f["error"]
            )
        })
        .collect();
    eprintln!(
        "reference_decodes_our_chunks: {passed}/{} decoded by the reference ({blosc1} Blosc1 chunks via C-Blosc 1.x)",
        cases.len()
    );
    assert!(
        failed.is_empty() && passed == cases.len(),
        "{} failed:\n{}",
        failed.len(),
        details.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Worked examples of docs/format/CHUNK.md, byte for byte (no python needed).

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

// ---------------------------------------------------------------------------------------------
// Invalid parameters are typed errors.

#[test]
fn invalid_params_are_typed_errors() {
    use b2fs::codec::CodecError;
    use b2fs::codec::encode::MAX_BLOCKSIZE;
    let data = vec![1u8; 1000];
    let base = CParams::blosc2(Codec::Lz4, 5, 4, filter_id::SHUFFLE);
    let b1 = CParams::blosc1(Codec::Lz4, 5, 4, filter_id::SHUFFLE);
    let err = |p: &CParams| b2fs::codec::compress(&data, p).unwrap_err();
    let with = |p: &CParams, f: &dyn Fn(&mut CParams)| {
        let mut p = p.clone();
        f(&mut p);
        p
    };
    for fmt in [&base, &b1] {
        // clevel > 9.
        assert_eq!(
            err(&with(fmt, &|p| p.clevel = 10)),
            CodecError::InvalidClevel(10)
        );
        assert_eq!(
            err(&with(fmt, &|p| p.clevel = 255)),
            CodecError::InvalidClevel(255)
        );
        // typesize 0 or > 255, in both formats.
        for ts in [0, 256, 300, usize::MAX] {
            assert_eq!(
                err(&with(fmt, &|p| p.typesize = ts)),
                CodecError::InvalidTypesize(ts)
            );
        }
        // An explicit blocksize of 0, not a multiple of the typesize, or above the maximum.
        for bs in [0, 1, 2, 4098, MAX_BLOCKSIZE + 4, usize::MAX] {
            assert_eq!(
                err(&with(fmt, &|p| p.blocksize = Blocksize::Explicit(bs))),
                CodecError::InvalidBlocksize {
                    blocksize: bs,
                    typesize: 4,
                    max: MAX_BLOCKSIZE
                },
                "{bs}"
            );
        }
        // ... while the same values are fine where they are valid.
        for (ts, bs) in [(1, 1), (1, 4098), (2, 4098), (4, 4), (4, MAX_BLOCKSIZE)] {
            let p = with(fmt, &|p| {
                p.typesize = ts;
                p.blocksize = Blocksize::Explicit(bs);
            });
            let chunk = b2fs::codec::compress(&data, &p).unwrap();
            assert_eq!(b2fs::codec::decompress(&chunk).unwrap(), data);
        }
        // Snappy is decode-only; other unknown codecs cannot be named (`Codec` is closed).
        assert_eq!(
            err(&with(fmt, &|p| p.codec = Codec::Snappy)),
            CodecError::UnsupportedCodec {
                id: 3,
                name: "snappy (decode only)"
            }
        );
        // Unknown and decode-only filter ids.
        assert!(matches!(
            err(&with(fmt, &|p| p.filters = [0, 7, 0, 0, 0, 0])),
            CodecError::UnsupportedFilter { id: 7, slot: 1, .. }
        ));
        assert!(matches!(
            err(&with(fmt, &|p| p.filters = [0, 0, 0, 0, 0, 200])),
            CodecError::UnsupportedFilter {
                id: 200,
                slot: 5,
                ..
            }
        ));
        assert!(matches!(
            err(&with(fmt, &|p| p.filters =
                [filter_id::BYTEDELTA_BUGGY, 0, 0, 0, 0, 0])),
            CodecError::UnsupportedFilter {
                id: 34,
                slot: 0,
                ..
            }
        ));
    }
    // Blosc2 only: DELTA after another filter, TRUNC_PREC beyond the mantissa or on a
    // typesize other than 4 or 8.
    assert!(matches!(
        err(&with(&base, &|p| p.filters =
            [filter_id::SHUFFLE, filter_id::DELTA, 0, 0, 0, 0])),
        CodecError::InvalidParams(_)
    ));
    assert!(matches!(
        err(&with(&base, &|p| {
            p.typesize = 2;
            p.filters = [filter_id::TRUNC_PREC, 0, 0, 0, 0, 0];
            p.filters_meta = [10, 0, 0, 0, 0, 0];
        })),
        CodecError::InvalidParams(_)
    ));
    assert!(matches!(
        err(&with(&base, &|p| p.filters =
            [filter_id::TRUNC_PREC, 0, 0, 0, 0, 0])),
        CodecError::InvalidParams(_)
    ));
    // A Blosc1 request for a Blosc2-only feature: DELTA, TRUNC_PREC, BYTEDELTA, more than one
    // filter, a shuffle group size.
    for (filters, feature) in [
        ([0, 0, 0, 0, 0, filter_id::DELTA], "the DELTA filter"),
        (
            [filter_id::TRUNC_PREC, 0, 0, 0, 0, 0],
            "the TRUNC_PREC filter",
        ),
        (
            [0, 0, 0, 0, 0, filter_id::BYTEDELTA],
            "the BYTEDELTA filter",
        ),
        (
            [0, 0, 0, 0, filter_id::DELTA, filter_id::SHUFFLE],
            "more than one filter",
        ),
        (
            [filter_id::SHUFFLE, filter_id::DELTA, 0, 0, 0, 0],
            "more than one filter",
        ),
        (
            [filter_id::SHUFFLE, filter_id::BITSHUFFLE, 0, 0, 0, 0],
            "more than one filter",
        ),
    ] {
        assert_eq!(
            err(&with(&b1, &|p| p.filters = filters)),
            CodecError::NeedsBlosc2 { feature },
            "{filters:?}"
        );
    }
    assert_eq!(
        err(&with(&b1, &|p| p.filters_meta = [0, 0, 0, 0, 0, 2])),
        CodecError::NeedsBlosc2 {
            feature: "filters_meta (a shuffle group size)"
        }
    );
    // One SHUFFLE or BITSHUFFLE in any slot is a Blosc1 chunk.
    for filters in [
        [filter_id::SHUFFLE, 0, 0, 0, 0, 0],
        [0, 0, filter_id::BITSHUFFLE, 0, 0, 0],
    ] {
        let chunk = b2fs::codec::compress(&data, &with(&b1, &|p| p.filters = filters)).unwrap();
        assert_eq!(chunk[0], 2);
        assert_eq!(b2fs::codec::decompress(&chunk).unwrap(), data);
    }
}

/// Python: C-Blosc2's behaviour on the two parameter sets our encoder refuses. Prints, for
/// typesize 300 (accepted by C), the header's typesize and blocksize, whether C decodes its own
/// chunk, and writes the chunk; for a forced blocksize 8192 with typesize 3, whether C decodes
/// its own chunk.
const REFUSED_BY_US_PY: &str = r#"
import sys, blosc2
data = open(sys.argv[1], "rb").read()
c = blosc2.compress2(data, typesize=300, clevel=5, codec=blosc2.Codec.BLOSCLZ, nthreads=1)
open(sys.argv[1] + ".c", "wb").write(c)
print(c[3], int.from_bytes(c[8:12], "little"), blosc2.decompress2(c) == data)
c = blosc2.compress2(data[:30000], typesize=3, clevel=5, codec=blosc2.Codec.BLOSCLZ,
                     blocksize=8192, nthreads=1)
try:
    ok = blosc2.decompress2(c) == data[:30000]
except Exception:
    ok = False
print(int.from_bytes(c[8:12], "little"), ok)
"#;

/// Deliberate differences from C-Blosc2 (section 6.1 and 6.2), with C's behaviour checked:
///
/// - typesize > 255: C-Blosc2 accepts it, tunes the blocksize on the real size (40000 bytes of
///   typesize 300 -> 39900) and stores typesize 1. We refuse it with `InvalidTypesize`; the
///   same chunk is written by passing what C stores (typesize 1) and C's blocksize, byte for
///   byte. That is what b2fs does when it re-encodes a chunk of such an array: it reads both
///   from the existing chunk's header.
/// - a forced blocksize that is not a multiple of the typesize: C-Blosc2 writes a chunk its own
///   decoder rejects. We refuse it with `InvalidBlocksize`.
#[test]
fn typesize_over_255_and_unaligned_blocksize_refused_unlike_c() {
    use b2fs::codec::CodecError;
    let data: Vec<u8> = (0..40_000u32).map(|i| (i / 7 % 251) as u8).collect();
    let p300 = CParams::blosc2(Codec::BloscLz, 5, 300, filter_id::SHUFFLE);
    assert_eq!(
        b2fs::codec::compress(&data, &p300),
        Err(CodecError::InvalidTypesize(300))
    );
    let p3 = CParams {
        blocksize: Blocksize::Explicit(8192),
        ..CParams::blosc2(Codec::BloscLz, 5, 3, filter_id::SHUFFLE)
    };
    assert!(matches!(
        b2fs::codec::compress(&data[..30_000], &p3),
        Err(CodecError::InvalidBlocksize {
            blocksize: 8192,
            typesize: 3,
            ..
        })
    ));
    // What C stores for typesize 300, passed explicitly.
    let as_c_stores = CParams {
        typesize: 1,
        blocksize: Blocksize::Explicit(39_900),
        ..p300
    };
    let ours = b2fs::codec::compress(&data, &as_c_stores).unwrap();
    assert_eq!((ours[3], &ours[8..12]), (1, &39_900u32.to_le_bytes()[..]));
    assert_eq!(b2fs::codec::decompress(&ours).unwrap(), data);

    let py = or_skip!(python(
        "encoder::typesize_over_255_and_unaligned_blocksize_refused_unlike_c"
    ));
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("data.raw");
    std::fs::write(&raw, &data).unwrap();
    let out = run_python(&py, &["-c", REFUSED_BY_US_PY, raw.to_str().unwrap()]);
    let out = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        ["1 39900 True", "8192 False"],
        "C-Blosc2's behaviour"
    );
    let c_chunk = std::fs::read(dir.path().join("data.raw.c")).unwrap();
    assert_eq!(ours, c_chunk, "typesize 1 + C's blocksize gives C's chunk");
}

/// A b2nd array of a 300-byte structured dtype written by python-blosc2 (its chunks store
/// typesize 1 and blocksize blockshape x 300): b2fs re-encodes a chunk with the parameters
/// read from the existing chunk header (`chunk_cparams`) and commits it, and python-blosc2
/// reads the array back. The same with an array of only zero chunks, where the parameters come
/// from the frame header (typesize 300 there).
#[test]
fn itemsize_over_255_b2nd_writes_back() {
    use b2fs::container::write::{Edit, chunk_cparams, commit};
    use b2fs::container::{self, Container};
    let py = or_skip!(python("encoder::itemsize_over_255_b2nd_writes_back"));
    const WRITE_PY: &str = r#"
import sys, blosc2, numpy as np
dt = np.dtype([("a", "i4"), ("b", "S296")])
a = np.zeros(100, dtype=dt)
a["a"] = np.arange(100)
a["b"] = [b"row %d " % i * (i % 9 + 1) for i in range(100)]
blosc2.asarray(a, urlpath=sys.argv[1], mode="w", chunks=(40,), blocks=(10,),
               cparams={"codec": blosc2.Codec.LZ4, "clevel": 5})
blosc2.zeros((100,), dtype=dt, urlpath=sys.argv[2], mode="w", chunks=(40,), blocks=(10,))
"#;
    const READ_PY: &str = r#"
import sys, blosc2, numpy as np
for path in sys.argv[1:]:
    a = blosc2.open(path, mode="r")
    s = a.schunk
    assert a.dtype.itemsize == 300 and a.shape == (100,), (a.dtype, a.shape)
    for i in range(s.nchunks):
        want = open("%s.%d.expect" % (path, i), "rb").read()
        assert s.decompress_chunk(i) == want, (path, i)
    whole = b"".join(open("%s.%d.expect" % (path, i), "rb").read() for i in range(s.nchunks))
    assert a[:].tobytes() == whole[: 100 * 300], path
print("OK")
"#;
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().join("rec.b2nd"), dir.path().join("zeros.b2nd")];
    let p: Vec<&str> = paths.iter().map(|p| p.to_str().unwrap()).collect();
    run_python(&py, &["-c", WRITE_PY, p[0], p[1]]);
    for (k, path) in paths.iter().enumerate() {
        let Container::Array(a) = container::open(path).unwrap() else {
            panic!("not an array")
        };
        let params = chunk_cparams(&a).unwrap();
        assert_eq!(params.typesize, 1, "{params:?}");
        assert_eq!(params.blocksize, Blocksize::Explicit(3000), "{params:?}");
        let mut updates = Vec::new();
        for i in 0..a.nchunks() {
            let mut raw = b2fs::codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap();
            assert_eq!(raw.len(), 40 * 300);
            if i != 1 {
                // New content for chunks 0 and 2: every record changed.
                for (j, b) in raw.iter_mut().enumerate() {
                    *b = b.wrapping_add((j % 300 / 4 + i + k) as u8);
                }
                let chunk = b2fs::codec::compress(&raw, &params).unwrap();
                assert_eq!((chunk[3], &chunk[8..12]), (1, &3000u32.to_le_bytes()[..]));
                updates.push((i, chunk));
            }
            std::fs::write(format!("{}.{i}.expect", path.display()), &raw).unwrap();
        }
        commit(
            &a,
            &Edit {
                updates,
                ..Edit::default()
            },
        )
        .unwrap();
    }
    assert_eq!(python_says(&py, &["-c", READ_PY, p[0], p[1]]), "OK");
}

// ---------------------------------------------------------------------------------------------
// Round trips through our own decoder.

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
