//! The chunk decoder against the reference: every fixture in `tests/data/chunks/MANIFEST.tsv`
//! (made by C-Blosc2 3.3.5 and C-Blosc 1.21) decodes to the manifest's sha256; `decompress_into`
//! and `decompress_range` agree with the full decode; the output buffer's old contents never
//! leak; hostile chunks (truncated, lying sizes, bad offsets, bad streams, mutated fixtures) are
//! errors, never panics.
//!
//! `B2FS_CHUNK_FIXTURES=/path/to/chunks` points the tests at another fixture directory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use b2fs::codec::{self, ChunkHeader, CodecError, Decoder, SpecialKind};
use proptest::prelude::*;

use crate::support::{data_dir, sha256_hex};

/// One manifest row and its chunk bytes.
struct Fixture {
    name: String,
    cols: HashMap<String, String>,
    bytes: Vec<u8>,
}

impl Fixture {
    fn col(&self, name: &str) -> &str {
        self.cols.get(name).map(String::as_str).unwrap_or("?")
    }

    /// The parameters a failure message needs.
    fn describe(&self) -> String {
        let parts: Vec<String> = crate::oracle::PARAMS
            .iter()
            .filter(|k| self.cols.contains_key(**k))
            .map(|k| format!("{k}={}", self.col(k)))
            .collect();
        format!("{} [{}]", self.name, parts.join(" "))
    }
}

fn chunks_dir() -> PathBuf {
    std::env::var_os("B2FS_CHUNK_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| data_dir().join("chunks"))
}

/// Reads a manifest (parsing columns by name) and the chunk files it lists; a missing manifest
/// of committed fixtures is a failure, not a skip.
fn load_manifest(dir: PathBuf) -> Vec<Fixture> {
    let mut out = Vec::new();
    for cols in crate::support::read_manifest(&dir.join("MANIFEST.tsv")) {
        let name = cols["name"].clone();
        let file = dir.join(format!("{}.chunk", name.trim_end_matches(".chunk")));
        let bytes = std::fs::read(&file)
            .unwrap_or_else(|e| panic!("{}: listed in the manifest: {e}", file.display()));
        out.push(Fixture { name, cols, bytes });
    }
    out
}

/// The main manifest's fixtures, loaded once.
fn fixtures() -> &'static [Fixture] {
    static F: OnceLock<Vec<Fixture>> = OnceLock::new();
    F.get_or_init(|| load_manifest(chunks_dir()))
}

/// The fixtures, or a visible SKIP line when there are none.
fn fixtures_or_skip(test: &str) -> Option<&'static [Fixture]> {
    let f = fixtures();
    if f.is_empty() {
        eprintln!(
            "SKIP {test}: no {}/MANIFEST.tsv (fixtures not generated)",
            chunks_dir().display()
        );
        None
    } else {
        Some(f)
    }
}

/// A small deterministic generator for windows and mutations outside proptest.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() as usize) % n
        }
    }
}

#[test]
fn fixtures_decode_to_manifest_sha256() {
    let fx = or_skip!(fixtures_or_skip("fixtures_decode_to_manifest_sha256"));
    let mut dec = Decoder::new();
    let mut failures = Vec::new();
    for f in fx {
        match dec.decompress(&f.bytes) {
            Ok(out) => {
                let got = sha256_hex(&out);
                if got != f.col("sha256") {
                    failures.push(format!(
                        "{}: sha256 {got} (len {}) != manifest {}",
                        f.describe(),
                        out.len(),
                        f.col("sha256")
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: error: {e}", f.describe())),
        }
    }
    eprintln!(
        "decoded {}/{} chunk fixtures to the manifest sha256",
        fx.len() - failures.len(),
        fx.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        fx.len(),
        failures.join("\n")
    );
}

#[test]
fn fixture_headers_match_manifest() {
    let fx = or_skip!(fixtures_or_skip("fixture_headers_match_manifest"));
    let mut failures = Vec::new();
    for f in fx {
        let h = match codec::chunk_info(&f.bytes) {
            Ok(h) => h,
            Err(e) => {
                failures.push(format!("{}: {e}", f.describe()));
                continue;
            }
        };
        let special = match h.special() {
            SpecialKind::None => "-",
            SpecialKind::Zeros => "zeros",
            SpecialKind::Nan => "nan",
            SpecialKind::Value => "value",
            SpecialKind::Uninit => "uninit",
        };
        let checks = [
            ("nbytes", h.nbytes.to_string()),
            ("cbytes", h.cbytes.to_string()),
            ("hdr_version", h.version.to_string()),
            ("hdr_flags", format!("{:#04x}", h.flags)),
            ("hdr_blocksize", h.blocksize.to_string()),
            ("special", special.to_string()),
            ("dict", u8::from(h.use_dict()).to_string()),
            ("filters", h.filters.map(|x| x.to_string()).join(",")),
            (
                "filters_meta",
                h.filters_meta.map(|x| x.to_string()).join(","),
            ),
        ];
        for (col, ours) in checks {
            if f.cols.contains_key(col) && !f.col(col).eq_ignore_ascii_case(&ours) {
                failures.push(format!(
                    "{}: {col} = {ours}, manifest {}",
                    f.name,
                    f.col(col)
                ));
            }
        }
        // Only the header is needed.
        let hlen = h.header_len();
        assert_eq!(codec::chunk_info(&f.bytes[..hlen]).as_ref(), Ok(&h));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn quirk_fixtures_never_panic_and_ok_rows_match() {
    let quirks = load_manifest(chunks_dir().join("quirks"));
    if quirks.is_empty() {
        eprintln!("SKIP quirk_fixtures_never_panic_and_ok_rows_match: no quirks manifest");
        return;
    }
    let mut failures = Vec::new();
    for f in &quirks {
        let res = Decoder::new().decompress(&f.bytes);
        if let Ok(out) = &res {
            assert_eq!(out.len(), ChunkHeader::parse(&f.bytes).unwrap().nbytes);
        }
        // Rows C decodes correctly must decode to the same bytes.
        if f.col("check") == "ok" {
            match res {
                Ok(out) if sha256_hex(&out) == f.col("sha256") => {}
                Ok(_) => failures.push(format!("{}: sha256 mismatch", f.describe())),
                Err(e) => failures.push(format!("{}: error {e}", f.describe())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn into_and_range_match_full_decode() {
    let fx = or_skip!(fixtures_or_skip("into_and_range_match_full_decode"));
    let mut dec = Decoder::new();
    let mut rng = Lcg(0x5eed);
    let mut buf = Vec::new();
    let mut failures = Vec::new();
    for f in fx {
        let Ok(full) = codec::decompress(&f.bytes) else {
            continue; // reported by fixtures_decode_to_manifest_sha256
        };
        let n = full.len();
        // decompress_into, with a reused buffer holding the previous chunk's bytes.
        buf.resize(n, 0xA5);
        match dec.decompress_into(&f.bytes, &mut buf) {
            Ok(k) if k == n && buf == full => {}
            other => failures.push(format!("{}: decompress_into -> {other:?}", f.name)),
        }
        // Wrong output sizes are refused.
        let mut wrong = vec![0u8; n + 1];
        assert!(matches!(
            dec.decompress_into(&f.bytes, &mut wrong),
            Err(CodecError::OutputSize { .. })
        ));
        // Random windows, odd offsets and lengths, some past the end.
        let bs = ChunkHeader::parse(&f.bytes).unwrap().block_size().max(1);
        let mut windows = vec![(0, n), (n, 5), (n / 2, n), (n.saturating_sub(1), 7)];
        for _ in 0..12 {
            let off = rng.below(n + 1) | 1;
            let len = (rng.below(3 * bs) | 1).min(n + 16);
            windows.push((off.min(n), len));
        }
        // One window straddling a block boundary.
        if n > bs && bs >= 3 {
            windows.push((bs - 3, 7));
        }
        for (off, len) in windows {
            let mut out = vec![0x5Au8; len];
            match dec.decompress_range(&f.bytes, off, &mut out) {
                Ok(k) => {
                    let want = len.min(n.saturating_sub(off));
                    if k != want || out[..k] != full[off..off + k] {
                        failures.push(format!(
                            "{}: range ({off}, {len}) -> {k} bytes, mismatch",
                            f.describe()
                        ));
                    }
                    if out[k..].iter().any(|&b| b != 0x5A) {
                        failures.push(format!("{}: range wrote past {k}", f.name));
                    }
                }
                Err(e) => failures.push(format!("{}: range ({off}, {len}): {e}", f.name)),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn range_decodes_only_overlapping_blocks() {
    let fx = or_skip!(fixtures_or_skip("range_decodes_only_overlapping_blocks"));
    let mut checked = 0;
    for f in fx {
        let h = ChunkHeader::parse(&f.bytes).unwrap();
        if h.is_vl() || h.memcpyed() || h.special() != SpecialKind::None || h.nblocks() < 3 {
            continue;
        }
        let full = codec::decompress(&f.bytes).unwrap();
        // Break the last block's bstart: the whole chunk no longer decodes...
        let mut broken = f.bytes.clone();
        let at = h.header_len() + 4 * (h.nblocks() - 1);
        broken[at..at + 4].copy_from_slice(&0i32.to_le_bytes());
        assert!(codec::decompress(&broken).is_err(), "{}", f.name);
        // ...but a range inside block 1 (block 0 too for DELTA) still does.
        let bs = h.block_size();
        let mut out = vec![0u8; bs / 2 + 1];
        let k = codec::decompress_range(&broken, bs + 1, &mut out)
            .unwrap_or_else(|e| panic!("{}: {e}", f.describe()));
        assert_eq!(out[..k], full[bs + 1..bs + 1 + k], "{}", f.name);
        checked += 1;
    }
    assert!(checked > 10, "only {checked} multi-block fixtures");
}

#[test]
fn no_output_leak() {
    let fx = or_skip!(fixtures_or_skip("no_output_leak"));
    let mut dec = Decoder::new();
    let mut leaks = Vec::new();
    for f in fx {
        let Ok(h) = ChunkHeader::parse(&f.bytes) else {
            continue;
        };
        let mut zeros = vec![0u8; h.nbytes];
        let mut ones = vec![0xFFu8; h.nbytes];
        let a = dec.decompress_into(&f.bytes, &mut zeros);
        let b = dec.decompress_into(&f.bytes, &mut ones);
        if a.is_ok() != b.is_ok() || (a.is_ok() && zeros != ones) {
            leaks.push(f.name.clone());
        }
        // Range reads too.
        let off = h.nbytes / 3;
        let len = h.nbytes / 2 + 1;
        let mut rz = vec![0u8; len];
        let mut ro = vec![0xFFu8; len];
        let ka = dec.decompress_range(&f.bytes, off, &mut rz);
        let kb = dec.decompress_range(&f.bytes, off, &mut ro);
        if let (Ok(ka), Ok(kb)) = (ka, kb) {
            if ka != kb || rz[..ka] != ro[..kb] {
                leaks.push(format!("{} (range)", f.name));
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "output depends on the buffer's old contents: {leaks:?}"
    );
}

#[test]
fn limit_refuses_large_chunks_before_allocating() {
    let fx = or_skip!(fixtures_or_skip(
        "limit_refuses_large_chunks_before_allocating"
    ));
    let f = fx
        .iter()
        .max_by_key(|f| ChunkHeader::parse(&f.bytes).map(|h| h.nbytes).unwrap_or(0))
        .unwrap();
    let nbytes = ChunkHeader::parse(&f.bytes).unwrap().nbytes;
    let mut dec = Decoder::with_limit(nbytes - 1);
    assert_eq!(
        dec.decompress(&f.bytes),
        Err(CodecError::TooLarge {
            nbytes,
            limit: nbytes - 1
        })
    );
    assert!(Decoder::with_limit(nbytes).decompress(&f.bytes).is_ok());
}

/// Made at test time by python-blosc2: VL-block chunks with and without dictionaries (the
/// fixtures have no VL+dictionary chunk), every codec, shuffle and bitshuffle, and big
/// multi-threaded chunks (blocks out of order). Name, then sha256 of the reference's output.
const ORACLE_SCRIPT: &str = r#"
import sys, hashlib, numpy as np, blosc2, blosc2.blosc2_ext as e
out = sys.argv[1]
rng = np.random.default_rng(11)
text = b"Blosc is a high performance compressor optimized for binary data. " * 300
C, F = blosc2.Codec, blosc2.Filter
n = 0
def emit(chunk, ref):
    global n
    name = f"o{n:03d}"; n += 1
    open(f"{out}/{name}.chunk", "wb").write(bytes(chunk))
    print(f"{name}\t{hashlib.sha256(ref).hexdigest()}")
print("name\tsha256")
for codec in [C.ZSTD, C.LZ4, C.LZ4HC, C.BLOSCLZ, C.ZLIB]:
    for use_dict in [False, True]:
        for filters in [[], [F.SHUFFLE], [F.BITSHUFFLE]]:
            blocks = [text[: 5000 + k * 977] for k in range(5)]
            blocks += [rng.integers(0, 5, 3000, dtype=np.uint8).tobytes(), b"x"]
            c = e.vlcompress(blocks, codec=codec, clevel=5, typesize=4, use_dict=use_dict,
                             filters=filters, filters_meta=[0] * len(filters))
            emit(c, b"".join(e.vldecompress(c)))
walk = np.cumsum(rng.integers(-100, 101, 1 << 20)).astype(np.int32)
for codec in [C.ZSTD, C.LZ4, C.BLOSCLZ]:
    c = blosc2.compress2(walk, codec=codec, clevel=5, typesize=4, nthreads=4,
                         filters=[F.SHUFFLE])
    emit(c, blosc2.decompress2(c))
"#;

#[test]
fn vl_dictionary_and_threaded_chunks_match_the_reference() {
    let py = or_skip!(crate::support::python(
        "vl_dictionary_and_threaded_chunks_match_the_reference"
    ));
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let manifest = crate::support::run_python(&py, &["-c", ORACLE_SCRIPT, dir_arg]);
    std::fs::write(dir.path().join("MANIFEST.tsv"), manifest).unwrap();
    let fx = load_manifest(dir.path().to_path_buf());
    assert!(fx.len() >= 30, "{} oracle chunks", fx.len());
    let mut failures = Vec::new();
    for f in &fx {
        let h = ChunkHeader::parse(&f.bytes).unwrap();
        match codec::decompress(&f.bytes) {
            Ok(out) if sha256_hex(&out) == f.col("sha256") => {}
            Ok(_) => failures.push(format!("{}: mismatch ({h:?})", f.name)),
            Err(e) => failures.push(format!("{}: {e} ({h:?})", f.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Hand-made chunks.

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
fn one_stream_chunk(nbytes: i32, csize: i32, payload: &[u8]) -> Vec<u8> {
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

// ---------------------------------------------------------------------------------------------
// Mutated fixtures (proptest): no panic, and any Ok result has exactly nbytes bytes.

/// Indices of the small fixtures (cheap to decode thousands of times).
fn small_indices() -> &'static [usize] {
    static I: OnceLock<Vec<usize>> = OnceLock::new();
    I.get_or_init(|| {
        fixtures()
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                let nbytes = f.col("nbytes").parse::<usize>().unwrap_or(usize::MAX);
                f.bytes.len() <= 64 * 1024 && nbytes <= 512 * 1024
            })
            .map(|(i, _)| i)
            .collect()
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Flip one bit at a (scaled) position.
    BitFlip(u32, u8),
    /// Set one byte at a (scaled) position.
    SetByte(u32, u8),
    /// Set one byte in the header/bstarts region.
    SetHead(u8, u8),
    /// Cut the chunk at a (scaled) length.
    Truncate(u32),
    /// Overwrite a 32-bit field at a 4-aligned offset in the first 128 bytes.
    Forge(u8, i32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let interesting = prop_oneof![
        Just(0i32),
        Just(1),
        Just(-1),
        Just(-255),
        Just(-256),
        Just(i32::MAX),
        Just(i32::MIN),
        Just(16),
        Just(32),
        0i32..70_000,
        any::<i32>(),
    ];
    prop_oneof![
        (any::<u32>(), 0u8..8).prop_map(|(p, b)| Mutation::BitFlip(p, b)),
        (any::<u32>(), any::<u8>()).prop_map(|(p, v)| Mutation::SetByte(p, v)),
        (0u8..64, any::<u8>()).prop_map(|(p, v)| Mutation::SetHead(p, v)),
        any::<u32>().prop_map(Mutation::Truncate),
        (0u8..32, interesting).prop_map(|(f, v)| Mutation::Forge(f, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    if n == 0 {
        return;
    }
    let scale = |p: u32| (p as usize) % n;
    match *m {
        Mutation::BitFlip(p, b) => bytes[scale(p)] ^= 1 << b,
        Mutation::SetByte(p, v) => bytes[scale(p)] = v,
        Mutation::SetHead(p, v) => {
            if (p as usize) < n {
                bytes[p as usize] = v;
            }
        }
        Mutation::Truncate(p) => bytes.truncate(scale(p)),
        Mutation::Forge(f, v) => {
            let off = 4 * f as usize;
            if off + 4 <= n {
                bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// Decodes a mutated chunk every way; panics (the test failure) on a contract breach.
fn check_mutant(bytes: &[u8], window: (u32, u16)) {
    const LIMIT: usize = 4 << 20;
    let mut dec = Decoder::with_limit(LIMIT);
    let declared = ChunkHeader::parse(bytes).map(|h| h.nbytes).ok();
    if let Ok(out) = dec.decompress(bytes) {
        let n = declared.expect("Ok from a chunk whose header does not parse");
        assert_eq!(out.len(), n, "Ok result must have exactly nbytes bytes");
        assert!(n <= LIMIT);
    }
    let mut out = vec![0u8; window.1 as usize];
    if let Ok(k) = dec.decompress_range(bytes, window.0 as usize, &mut out) {
        assert!(k <= out.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 40_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_fixtures_never_panic(
        pick in any::<prop::sample::Index>(),
        muts in prop::collection::vec(mutation(), 1..4),
        window in (any::<u32>(), any::<u16>()),
    ) {
        let idx = small_indices();
        if idx.is_empty() {
            return Ok(());
        }
        let f = &fixtures()[idx[pick.index(idx.len())]];
        let mut bytes = f.bytes.clone();
        for m in &muts {
            apply(&mut bytes, m);
        }
        let n = bytes.len().max(1) as u32;
        check_mutant(&bytes, (window.0 % (4 * n), window.1));
    }

    #[test]
    fn mutated_hand_made_chunks_never_panic(
        payload in prop::collection::vec(any::<u8>(), 0..64),
        csize in -300i32..80,
        flags in any::<u8>(),
        typesize in any::<u8>(),
        nbytes in 0i32..5000,
        blocksize in 0i32..5000,
        tail in prop::collection::vec(any::<u8>(), 0..16),
    ) {
        let mut c = one_stream_chunk(nbytes, csize, &payload);
        c[2] = flags;
        c[3] = typesize;
        c[8..12].copy_from_slice(&blocksize.to_le_bytes());
        c.extend_from_slice(&tail);
        let cb = c.len() as i32;
        c[12..16].copy_from_slice(&cb.to_le_bytes());
        check_mutant(&c, (0, 64));
    }
}
