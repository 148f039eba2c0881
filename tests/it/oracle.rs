//! Fresh random chunk matrices made by the reference libraries at test time
//! (`scripts/oracle/random_matrix.py`), decoded with `b2fs::codec::decompress` and compared
//! with the sha256 of what the reference decompressed.
//!
//! The seed is new on every run (time based) unless `B2FS_SEED` is set; it is printed so a
//! failure can be replayed with `B2FS_SEED=<seed> cargo test oracle`. `B2FS_ORACLE_COUNT`
//! changes the number of chunks (default 300). Skips without the python oracle unless
//! `B2FS_REQUIRE_PYTHON=1`.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::support;

/// Manifest columns shown next to a failing chunk (here and in `codec.rs`), where present.
pub(crate) const PARAMS: &[&str] = &[
    "format",
    "codec",
    "clevel",
    "filters",
    "filters_meta",
    "typesize",
    "splitmode",
    "blocksize",
    "datakind",
    "nthreads",
    "nbytes",
    "cbytes",
    "hdr_version",
    "hdr_flags",
    "nblocks",
    "special",
    "dict",
    "note",
];

/// Stop decoding after this many panics (an unfinished decoder panics on every chunk).
const MAX_PANICS: usize = 10;

fn seed() -> u64 {
    if let Some(s) = std::env::var("B2FS_SEED")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        return s;
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // keep it short enough to type back in
    ((nanos as u64) ^ (u64::from(std::process::id()) << 20)) % 1_000_000_000
}

fn count() -> usize {
    crate::support::env_or("B2FS_ORACLE_COUNT", 300)
}

fn describe(row: &HashMap<String, String>) -> String {
    PARAMS
        .iter()
        .filter_map(|k| row.get(*k).map(|v| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Decodes every chunk listed in `dir/MANIFEST.tsv` and returns one line per failure.
fn check_dir(dir: &Path) -> (usize, Vec<String>) {
    let rows = support::read_manifest(&dir.join("MANIFEST.tsv"));
    let mut failures = Vec::new();
    let mut panics = 0;
    for row in &rows {
        let name = &row["name"];
        let chunk = std::fs::read(dir.join(format!("{name}.chunk")))
            .unwrap_or_else(|e| panic!("cannot read chunk {name}: {e}"));
        let want = &row["sha256"];
        let result = catch_unwind(AssertUnwindSafe(|| b2fs::codec::decompress(&chunk)));
        let problem = match result {
            Ok(Ok(out)) => {
                let got = support::sha256_hex(&out);
                if &got == want {
                    None
                } else {
                    Some(format!(
                        "sha256 mismatch: got {} bytes sha {got}, want {} bytes sha {want}",
                        out.len(),
                        row["nbytes"]
                    ))
                }
            }
            Ok(Err(e)) => Some(format!("decode error: {e:?}")),
            Err(_) => {
                panics += 1;
                Some("decoder panicked".to_string())
            }
        };
        if let Some(p) = problem {
            failures.push(format!("{name}: {p}\n    [{}]", describe(row)));
        }
        if panics >= MAX_PANICS {
            failures.push(format!(
                "stopped after {MAX_PANICS} panics ({} chunks not tried)",
                rows.len() - failures.len()
            ));
            break;
        }
    }
    (rows.len(), failures)
}

#[test]
fn random_chunks_decode_like_the_reference() {
    let test = "oracle::random_chunks_decode_like_the_reference";
    let py = or_skip!(support::python(test));
    let seed = seed();
    let count = count();
    eprintln!("{test}: seed {seed} (replay with B2FS_SEED={seed}), {count} chunks");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf-8 tempdir").to_string();
    let script = support::repo_root().join("scripts/oracle/random_matrix.py");
    let script = script.to_str().expect("utf-8 path").to_string();
    let seed_s = seed.to_string();
    let count_s = count.to_string();
    support::run_python(
        &py,
        &[
            &script, "--seed", &seed_s, "--count", &count_s, "--out", &out,
        ],
    );
    let (total, failures) = check_dir(dir.path());
    assert!(total > 0, "seed {seed}: the oracle wrote no chunks");
    assert!(
        failures.is_empty(),
        "seed {seed} (replay with B2FS_SEED={seed}): {} of {total} chunks failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The committed chunk fixtures agree with their manifests (no decoder involved): every row has
/// its file, the file is `cbytes` long, the header's nbytes matches, hashes look like sha256.
#[test]
fn committed_chunk_manifests_are_consistent() {
    for sub in ["chunks", "chunks/quirks"] {
        let dir = support::data_dir().join(sub);
        let rows = support::read_manifest(&dir.join("MANIFEST.tsv"));
        assert!(!rows.is_empty(), "{sub}: empty manifest");
        let mut listed = std::collections::HashSet::new();
        for row in &rows {
            let name = &row["name"];
            listed.insert(format!("{name}.chunk"));
            let chunk = std::fs::read(dir.join(format!("{name}.chunk")))
                .unwrap_or_else(|e| panic!("{sub}/{name}.chunk: {e}"));
            let cbytes: usize = row["cbytes"].parse().expect("cbytes");
            assert_eq!(chunk.len(), cbytes, "{sub}/{name}: file size vs cbytes");
            let nbytes = i32::from_le_bytes(chunk[4..8].try_into().unwrap());
            assert_eq!(
                nbytes.to_string(),
                row["nbytes"],
                "{sub}/{name}: header nbytes"
            );
            for col in ["sha256", "input_sha256"] {
                let v = &row[col];
                let ok = v == "-" || (v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()));
                assert!(ok, "{sub}/{name}: bad {col} {v:?}");
            }
            if sub == "chunks" {
                assert_eq!(row["check"], "ok", "{sub}/{name}: main manifest row not ok");
                assert_ne!(row["sha256"], "-", "{sub}/{name}: no expected sha256");
            }
        }
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let file = entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .to_string();
            if file.ends_with(".chunk") {
                assert!(
                    listed.contains(&file),
                    "{sub}/{file} is not in the manifest"
                );
            }
        }
    }
}

/// Every sidecar JSON parses and names an existing source.
#[test]
fn committed_sidecars_parse() {
    let mut seen = 0;
    for sub in ["frames", "bcolz", "refuse"] {
        let dir = support::data_dir().join(sub);
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read sidecar");
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = v["name"].as_str().expect("name");
            let source = v["source"].as_str().unwrap_or(name);
            assert!(
                dir.join(source).exists(),
                "{}: source {source} missing",
                path.display()
            );
            seen += 1;
        }
    }
    assert!(seen > 40, "only {seen} sidecars");
}
