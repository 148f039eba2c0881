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
//! reused output buffer, best of N) on the same files, checks the output's sha256 against C's,
//! and prints a table with both throughputs and the ratio ours/C (> 1 means faster than C).
//! The last column decodes the same chunk with its filter slots emptied: the codecs and the
//! block walk alone, without the backward pipeline.
//! `B2FS_BENCH_REUSE=1` skips the python step and reuses the files and C timings on disk.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use b2fs::codec::Decoder;
use sha2::Digest;

/// Repetitions per chunk (best of), and a time budget per chunk.
const REPS: usize = 30;
const BUDGET: Duration = Duration::from_millis(600);

fn python(root: &Path) -> PathBuf {
    std::env::var_os("B2FS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".venv/bin/python"))
}

/// One line of the table.
struct Row {
    row: String,
    dataset: String,
    ratio: f64,
    /// GB/s of C-Blosc2, of b2fs, and of b2fs with the filters skipped.
    c: f64,
    ours: f64,
    streams: f64,
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

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("bench-data/decode");
    if std::env::var("B2FS_BENCH_REUSE").map_or(true, |v| v != "1") {
        let status = Command::new(python(&root))
            .args(["scripts/bench_decode.py", "--out", "bench-data"])
            .current_dir(&root)
            .status()
            .expect("run scripts/bench_decode.py (needs .venv: scripts/setup.sh)");
        assert!(status.success(), "scripts/bench_decode.py failed");
    }
    let json = std::fs::read_to_string(dir.join("c_results.json"))
        .expect("bench-data/decode/c_results.json (run scripts/bench_decode.py)");
    let doc: serde_json::Value = serde_json::from_str(&json).expect("c_results.json is JSON");
    let results = doc["results"].as_array().expect("results array");

    let mut dec = Decoder::new();
    let mut buf = Vec::new();
    let mut rows = Vec::new();
    for r in results {
        let file = r["file"].as_str().expect("file");
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
        let best = best_time(&mut dec, &chunk, &mut buf);
        // The same chunk with its filters slots emptied: the codec and block walk alone.
        let mut unfiltered = chunk.clone();
        unfiltered[0x10..0x16].fill(0);
        let streams = best_time(&mut dec, &unfiltered, &mut buf);
        let c_best = r["c_best_s"].as_f64().expect("c_best_s");
        let gbs = |t: f64| nbytes as f64 / t / 1e9;
        rows.push(Row {
            row: r["row"].as_str().unwrap_or("?").to_string(),
            dataset: r["dataset"].as_str().unwrap_or("?").to_string(),
            ratio: nbytes as f64 / chunk.len() as f64,
            c: gbs(c_best),
            ours: gbs(best),
            streams: gbs(streams),
        });
    }

    println!(
        "\nDecode throughput, 4 MiB chunks, clevel 5, one thread ({} / C-Blosc2 {})\n",
        doc["blosc2"].as_str().unwrap_or("?"),
        doc["c_blosc2"]
            .as_str()
            .unwrap_or("?")
            .split_whitespace()
            .next()
            .unwrap_or("?"),
    );
    println!(
        "| codec + filters | dataset | ratio | C GB/s | b2fs GB/s | b2fs/C | b2fs codec only GB/s |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    let mut log_sum = 0.0;
    for r in &rows {
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            r.row,
            r.dataset,
            r.ratio,
            r.c,
            r.ours,
            r.ours / r.c,
            r.streams
        );
        log_sum += (r.ours / r.c).ln();
    }
    println!(
        "\ngeometric mean b2fs/C: {:.2}",
        (log_sum / rows.len().max(1) as f64).exp()
    );
}
