//! Encode benchmark: our chunk encoder against C-Blosc2 (python-blosc2, nthreads=1) on the
//! same data in the same run.
//!
//! `cargo bench --bench encode [-- --clevel N --repeat R]` runs `scripts/bench_encode.py`,
//! which writes the datasets (4 MiB each: int arange, float with noise, int random walk) into
//! `bench-data/` and times C-Blosc2's `compress2`; this program then compresses the same
//! files with the same parameters, single-threaded, and prints one table row per dataset and
//! codec/filter row: compression ratio and speed for C and for us, and our/C quotients.
//! `B2FS_PYTHON` selects the interpreter (default `.venv/bin/python`). `--no-python` reuses
//! the previous `bench-data/c_encode.json`; `--only TEXT` keeps the rows whose
//! "dataset row" contains TEXT (both for profiling).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use b2fs::codec::Codec;
use b2fs::codec::encode::{CParams, Encoder};

fn arg_value(args: &[String], name: &str, default: u32) -> u32 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let clevel = arg_value(&args, "--clevel", 5);
    let repeat = arg_value(&args, "--repeat", 5);
    let rounds = arg_value(&args, "--rounds", 3).max(1);
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let no_python = args.iter().any(|a| a == "--no-python");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let outdir = root.join("bench-data");
    let py = std::env::var_os("B2FS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".venv/bin/python"));
    // Rounds alternate C and us so that both see the same machine load; each side keeps its
    // best time per row over all rounds.
    let mut c_best: Vec<f64> = Vec::new();
    let mut our_best: Vec<f64> = Vec::new();
    let mut c_json = serde_json::Value::Null;
    for round in 0..rounds {
        if !no_python {
            let status = Command::new(&py)
                .arg(root.join("scripts/bench_encode.py"))
                .arg(&outdir)
                .args([
                    "--clevel",
                    &clevel.to_string(),
                    "--repeat",
                    &repeat.to_string(),
                ])
                .status();
            if !matches!(status, Ok(s) if s.success()) {
                eprintln!(
                    "encode bench: cannot run scripts/bench_encode.py with {} ({status:?}); \
                     run scripts/setup.sh",
                    py.display()
                );
                std::process::exit(1);
            }
        }
        let json = std::fs::read(outdir.join("c_encode.json")).expect("read c_encode.json");
        c_json = serde_json::from_slice(&json).expect("parse c_encode.json");
        let rows = c_json["rows"].as_array().cloned().unwrap_or_default();
        c_best.resize(rows.len(), f64::INFINITY);
        our_best.resize(rows.len(), f64::INFINITY);
        for (i, row) in rows.iter().enumerate() {
            c_best[i] = c_best[i].min(row["seconds"].as_f64().unwrap_or(f64::INFINITY));
        }
        time_ours(
            &outdir,
            &c_json,
            repeat as usize,
            only.as_deref(),
            &mut our_best,
        );
        eprintln!("encode bench: round {} of {rounds} done", round + 1);
    }
    print_table(
        &outdir,
        &c_json,
        &c_best,
        &our_best,
        repeat,
        rounds,
        only.as_deref(),
    );
}

/// The parameters and data of one row.
fn row_setup(outdir: &Path, c: &serde_json::Value, row: &serde_json::Value) -> (CParams, Vec<u8>) {
    let clevel = c["clevel"].as_u64().unwrap_or(5) as u8;
    let dataset = row["dataset"].as_str().unwrap_or("?");
    let ts = c["datasets"][dataset].as_u64().unwrap_or(8) as usize;
    let codec =
        Codec::from_compcode(row["codec"].as_u64().unwrap_or(0) as u8).unwrap_or(Codec::BloscLz);
    let mut filters = [0u8; 6];
    for (slot, f) in row["filters"].as_array().into_iter().flatten().enumerate() {
        if slot < 6 {
            filters[slot] = f.as_u64().unwrap_or(0) as u8;
        }
    }
    let data = std::fs::read(outdir.join(format!("{dataset}.bin"))).expect("dataset");
    let mut params = CParams::blosc2(codec, clevel, ts, 0);
    params.filters = filters;
    (params, data)
}

fn selected(row: &serde_json::Value, only: Option<&str>) -> bool {
    let label = format!(
        "{} {}",
        row["dataset"].as_str().unwrap_or("?"),
        row["row"].as_str().unwrap_or("?")
    );
    only.is_none_or(|o| label.contains(o))
}

fn time_ours(
    outdir: &Path,
    c: &serde_json::Value,
    repeat: usize,
    only: Option<&str>,
    best: &mut [f64],
) {
    let mut enc = Encoder::new();
    let mut out = Vec::new();
    for (i, row) in c["rows"].as_array().into_iter().flatten().enumerate() {
        if !selected(row, only) {
            continue;
        }
        let (params, data) = row_setup(outdir, c, row);
        enc.compress_into(&data, &params, &mut out)
            .expect("compress");
        for _ in 0..repeat {
            let t0 = Instant::now();
            enc.compress_into(&data, &params, &mut out)
                .expect("compress");
            best[i] = best[i].min(t0.elapsed().as_secs_f64());
        }
    }
}

fn print_table(
    outdir: &Path,
    c: &serde_json::Value,
    c_best: &[f64],
    our_best: &[f64],
    repeat: u32,
    rounds: u32,
    only: Option<&str>,
) {
    let clevel = c["clevel"].as_u64().unwrap_or(5);
    println!(
        "encode, clevel {clevel}, 4 MiB chunks, single thread, best of {rounds} rounds x {repeat} runs \
         (C = C-Blosc2 {} via python-blosc2, nthreads=1)",
        c["c_version"].as_str().unwrap_or("?")
    );
    println!(
        "| dataset | row | C ratio | ours ratio | ratio ours/C | C MB/s | ours MB/s | speed ours/C |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut enc = Encoder::new();
    for (i, row) in c["rows"].as_array().into_iter().flatten().enumerate() {
        if !selected(row, only) {
            continue;
        }
        let (params, data) = row_setup(outdir, c, row);
        let ours = enc.compress(&data, &params).expect("compress");
        let nbytes = data.len() as f64;
        let c_ratio = nbytes / row["cbytes"].as_f64().unwrap_or(1.0);
        let our_ratio = nbytes / ours.len() as f64;
        let c_speed = nbytes / c_best[i] / 1e6;
        let our_speed = nbytes / our_best[i] / 1e6;
        println!(
            "| {} | {} | {c_ratio:.2} | {our_ratio:.2} | {:.3} | {c_speed:.0} | {our_speed:.0} | {:.2} |",
            row["dataset"].as_str().unwrap_or("?"),
            row["row"].as_str().unwrap_or("?"),
            our_ratio / c_ratio,
            our_speed / c_speed
        );
    }
}
