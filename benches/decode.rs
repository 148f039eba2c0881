//! Chunk-decode benchmark: b2fs's [`Decoder`] against C-Blosc2 (python-blosc2, nthreads=1) on the
//! same chunk files, in the same run.
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench decode
//! ```
//!
//! It first runs `scripts/bench_decode.py` with the project's `.venv` python (or `B2FS_PYTHON`),
//! which writes 4 MiB chunks (5 codec/filter rows x 3 datasets, clevel 5) to
//! `bench-data/decode/` and times `blosc2.decompress2` with nthreads=1 into
//! `bench-data/decode/c_results.json`. Then it times `Decoder::decompress_into` (one thread,
//! reused output buffer, best of N) on the same files, after checking the output's sha256
//! against C's. C and b2fs are timed in alternating rounds ([`ROUNDS`]; the python script's
//! `--retime` mode), keeping each side's best, so both see the same machine load. It prints a
//! table with both throughputs and the ratio ours/C (> 1 means faster than C).
//!
//! The "codec only" columns decode the same chunk with its filter slots emptied (both sides):
//! the codecs and the block walk alone, without the backward filter pipeline.
//!
//! `B2FS_BENCH_REUSE=1` skips generating the chunks (reuses `bench-data/decode/`);
//! `B2FS_BENCH_FILTER=text` keeps only the chunk files whose name contains `text`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use b2fs::codec::Decoder;
use sha2::Digest;

/// Alternating rounds of C and b2fs timing.
const ROUNDS: usize = 3;
/// Repetitions per chunk and round (best of), and a time budget per chunk and round.
const REPS: usize = 20;
const BUDGET: Duration = Duration::from_millis(300);

fn python(root: &Path) -> PathBuf {
    std::env::var_os("B2FS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".venv/bin/python"))
}

/// Runs `scripts/bench_decode.py` with `extra` arguments.
fn run_c_side(root: &Path, extra: &[&str]) {
    let status = Command::new(python(root))
        .args(["scripts/bench_decode.py", "--out", "bench-data"])
        .args(extra)
        .current_dir(root)
        .status()
        .expect("run scripts/bench_decode.py (needs .venv: scripts/setup.sh)");
    assert!(status.success(), "scripts/bench_decode.py failed");
}

/// Best wall time of `decompress_into` over [`REPS`] runs (or the time budget).
fn best_time(dec: &mut Decoder, chunk: &[u8], buf: &mut [u8]) -> f64 {
    let mut best = f64::INFINITY;
    let start = Instant::now();
    for _ in 0..REPS {
        let t0 = Instant::now();
        dec.decompress_into(chunk, buf).expect("decode");
        best = best.min(t0.elapsed().as_secs_f64());
        if start.elapsed() > BUDGET {
            break;
        }
    }
    best
}

/// One chunk of the benchmark and the best times seen so far.
struct Case {
    row: String,
    dataset: String,
    chunk: Vec<u8>,
    /// The chunk with its filter slots emptied.
    unfiltered: Vec<u8>,
    nbytes: usize,
    /// Best times in seconds: ours whole, ours codec only.
    ours: f64,
    ours_codec: f64,
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("bench-data/decode");
    let reuse = std::env::var("B2FS_BENCH_REUSE").is_ok_and(|v| v == "1");
    if !reuse {
        run_c_side(&root, &[]);
    }
    let read_json = || -> serde_json::Value {
        let json = std::fs::read_to_string(dir.join("c_results.json"))
            .expect("bench-data/decode/c_results.json (run scripts/bench_decode.py)");
        serde_json::from_str(&json).expect("c_results.json is JSON")
    };
    let doc = read_json();
    let only = std::env::var("B2FS_BENCH_FILTER").unwrap_or_default();

    let mut dec = Decoder::new();
    let mut buf = Vec::new();
    let mut cases = Vec::new();
    for r in doc["results"].as_array().expect("results array") {
        let file = r["file"].as_str().expect("file");
        if !file.contains(only.as_str()) {
            continue;
        }
        let chunk = std::fs::read(dir.join(file)).expect("chunk file");
        let nbytes = r["nbytes"].as_u64().expect("nbytes") as usize;
        buf.resize(nbytes, 0);
        dec.decompress_into(&chunk, &mut buf)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let sha: String = sha2::Sha256::digest(&buf)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            sha,
            r["sha256"].as_str().unwrap_or(""),
            "{file}: output differs from C"
        );
        let mut unfiltered = chunk.clone();
        unfiltered[0x10..0x16].fill(0);
        cases.push(Case {
            row: r["row"].as_str().unwrap_or("?").to_string(),
            dataset: r["dataset"].as_str().unwrap_or("?").to_string(),
            chunk,
            unfiltered,
            nbytes,
            ours: f64::INFINITY,
            ours_codec: f64::INFINITY,
        });
    }

    for round in 0..ROUNDS {
        if round > 0 || reuse {
            run_c_side(&root, &["--retime"]);
        }
        for c in &mut cases {
            buf.resize(c.nbytes, 0);
            c.ours = c.ours.min(best_time(&mut dec, &c.chunk, &mut buf));
            c.ours_codec = c
                .ours_codec
                .min(best_time(&mut dec, &c.unfiltered, &mut buf));
        }
    }

    let doc = read_json();
    let c_times: Vec<(f64, f64)> = doc["results"]
        .as_array()
        .expect("results array")
        .iter()
        .filter(|r| r["file"].as_str().unwrap_or("").contains(only.as_str()))
        .map(|r| {
            (
                r["c_best_s"].as_f64().expect("c_best_s"),
                r["c_codec_only_s"].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect();

    println!(
        "\nDecode throughput, 4 MiB chunks, clevel 5, one thread, best of {ROUNDS} alternating \
         rounds (python-blosc2 {} / C-Blosc2 {})\n",
        doc["blosc2"].as_str().unwrap_or("?"),
        doc["c_blosc2"]
            .as_str()
            .unwrap_or("?")
            .split_whitespace()
            .next()
            .unwrap_or("?"),
    );
    println!(
        "| codec + filters | dataset | ratio | C GB/s | b2fs GB/s | b2fs/C \
         | C codec only | b2fs codec only | b2fs/C codec only |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut log_sum = 0.0;
    let mut log_sum_codec = 0.0;
    for (c, &(c_best, c_codec)) in cases.iter().zip(&c_times) {
        let gbs = |t: f64| c.nbytes as f64 / t / 1e9;
        let (cw, ow, cc, oc) = (gbs(c_best), gbs(c.ours), gbs(c_codec), gbs(c.ours_codec));
        println!(
            "| {} | {} | {:.2} | {cw:.2} | {ow:.2} | {:.2} | {cc:.2} | {oc:.2} | {:.2} |",
            c.row,
            c.dataset,
            c.nbytes as f64 / c.chunk.len() as f64,
            ow / cw,
            oc / cc,
        );
        log_sum += (ow / cw).ln();
        log_sum_codec += (oc / cc).ln();
    }
    let n = cases.len().max(1) as f64;
    println!(
        "\ngeometric mean b2fs/C: {:.2} (whole decode), {:.2} (codec only)",
        (log_sum / n).exp(),
        (log_sum_codec / n).exp()
    );
}
