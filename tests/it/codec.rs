//! The chunk decoder against the reference: every fixture in `tests/data/chunks/MANIFEST.tsv`
//! (made by C-Blosc2 3.3.5 and C-Blosc 1.21) decodes to the manifest's sha256; `decompress_into`
//! and `decompress_range` agree with the full decode; the output buffer's old contents never
//! leak; hostile chunks (truncated, lying sizes, bad offsets, bad streams, mutated fixtures) are
//! errors, never panics.
//!
//! `B2FS_CHUNK_FIXTURES=/path/to/chunks` points the tests at another fixture directory.
//!
//! This file holds the fixtures and the cases decoding them; `codec/hand_made.rs` the chunks
//! built by hand (streams, hostile headers and streams, unsupported codecs, special chunks);
//! `codec/mutated.rs` the mutated fixtures and hand-made chunks (proptest).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use b2fs::codec::{self, ChunkHeader, CodecError, Decoder, SpecialKind};

use crate::support::{data_dir, sha256_hex};

mod hand_made;
mod mutated;

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
        if let (Ok(ka), Ok(kb)) = (ka, kb)
            && (ka != kb || rz[..ka] != ro[..kb])
        {
            leaks.push(format!("{} (range)", f.name));
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
