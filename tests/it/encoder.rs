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

mod codecs;
mod examples;
mod params;
