//! The chunk encoder: the tuner and BloscLZ against the C libraries (python-blosc2 and
//! python-blosc as oracles), byte-exact chunks, interop (the reference decodes what we
//! write), round trips through our own decoder, and typed errors for invalid parameters.

use std::fmt::Write as _;
use std::path::Path;

use b2fs::codec::encode::{CParams, ChunkFormat, SplitMode};
use b2fs::codec::tune::{TuneInput, tune_blosc1, tune_blosc2};
use b2fs::codec::{Codec, filter_id};

use crate::support::{python, run_python};

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
    let Some(py) = python("encoder::tune_matches_reference") else {
        return;
    };
    let mut rng = Rng(0x5eed_0001);
    let sizes = [
        0usize, 5, 31, 32, 100, 127, 128, 1000, 4099, 32768, 33333, 100_000, 262_147, 1 << 20,
        3_000_001,
    ];
    let mut cases = Vec::new();
    for i in 0..1600 {
        let blosc1 = i % 4 == 3;
        let codec = rng.pick(&CODECS);
        let clevel = rng.below(10) as u8;
        let filt = rng.below(3) as u8; // 0 none, 1 shuffle, 2 bitshuffle
        let ts = if blosc1 {
            rng.pick(&[1usize, 2, 3, 4, 8, 16, 17, 33, 255])
        } else {
            rng.pick(&[1usize, 2, 3, 4, 8, 16, 17, 33, 255, 300])
        };
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
            forced_blocksize: forced,
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

#[allow(dead_code)]
fn unused(_: &Path, _: &CParams, _: ChunkFormat, _: u8) {
    let _ = filter_id::SHUFFLE;
}
