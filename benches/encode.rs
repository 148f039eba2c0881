//! Encode benchmark: our chunk encoder against C-Blosc2 (python-blosc2, nthreads=1) on the
//! same data in the same run.
//!
//! `cargo bench --bench encode [-- --clevel N --repeat R]` runs `scripts/bench_encode.py`,
//! which writes the datasets (4 MiB each: int arange, float with noise, int random walk) into
//! `bench-data/` and times C-Blosc2's `compress2`; this program then compresses the same
//! files with the same parameters, single-threaded, and prints one table row per dataset and
//! codec/filter row: compression ratio and speed for C and for us, and our/C quotients.
//! C and we are timed row by row, alternately (`--rounds` times `--repeat` runs each, best
//! kept), because the machine is shared. `B2FS_PYTHON` selects the interpreter (default
//! `.venv/bin/python`). `--no-python` reuses the previous `bench-data/c_encode.json`; `--only
//! TEXT` keeps the rows whose "dataset row" contains TEXT (both for profiling).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use b2fs::codec::Codec;
use b2fs::codec::encode::{CParams, Encoder};

/// CPU time of the calling thread, in seconds (leaves out time spent waiting for a core).
#[allow(unsafe_code)] // benchmark-only libc call; the product has no unsafe here
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass, which lives on our stack.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

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

    // The python side writes the data and C's sizes, then serves timing requests, so that C
    // and we are timed row by row, alternately, under the same machine load.
    let mut server = if no_python {
        None
    } else {
        let child = Command::new(&py)
            .arg(root.join("scripts/bench_encode.py"))
            .arg(&outdir)
            .args(["--clevel", &clevel.to_string(), "--repeat", "1", "--serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!(
                "encode bench: cannot run scripts/bench_encode.py with {}; run scripts/setup.sh",
                py.display()
            );
            std::process::exit(1);
        };
        let stdin = child.stdin.take().expect("python stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("python stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("python ready");
        if line.trim() != "ready" {
            eprintln!("encode bench: python side failed (see its error above)");
            std::process::exit(1);
        }
        Some((child, stdin, stdout))
    };
    let json = std::fs::read(outdir.join("c_encode.json")).expect("read c_encode.json");
    let c_json: serde_json::Value = serde_json::from_slice(&json).expect("parse c_encode.json");
    let rows = c_json["rows"].as_array().cloned().unwrap_or_default();
    let mut c_best: Vec<f64> = rows
        .iter()
        .map(|r| r["seconds"].as_f64().unwrap_or(f64::INFINITY))
        .collect();
    let mut our_best = vec![f64::INFINITY; rows.len()];
    let mut c_cpu = vec![f64::INFINITY; rows.len()];
    let mut our_cpu = vec![f64::INFINITY; rows.len()];
    let mut enc = Encoder::new();
    let mut out = Vec::new();
    for round in 0..rounds {
        for (i, row) in rows.iter().enumerate() {
            if !selected(row, only.as_deref()) {
                continue;
            }
            if let Some((_, stdin, stdout)) = server.as_mut() {
                writeln!(stdin, "{i} {repeat}").expect("ask python");
                stdin.flush().expect("ask python");
                let mut line = String::new();
                stdout.read_line(&mut line).expect("python answer");
                let mut t = line
                    .split_whitespace()
                    .map(|v| v.parse::<f64>().expect("time"));
                c_best[i] = c_best[i].min(t.next().unwrap_or(f64::INFINITY));
                c_cpu[i] = c_cpu[i].min(t.next().unwrap_or(f64::INFINITY));
            }
            let (params, data) = row_setup(&outdir, &c_json, row);
            enc.compress_into(&data, &params, &mut out)
                .expect("compress");
            for _ in 0..repeat {
                let (t0, c0) = (Instant::now(), thread_cpu_seconds());
                enc.compress_into(&data, &params, &mut out)
                    .expect("compress");
                our_best[i] = our_best[i].min(t0.elapsed().as_secs_f64());
                our_cpu[i] = our_cpu[i].min(thread_cpu_seconds() - c0);
            }
        }
        eprintln!("encode bench: round {} of {rounds} done", round + 1);
    }
    if let Some((mut child, stdin, _)) = server {
        drop(stdin);
        let _ = child.wait();
    }
    print_table(
        &outdir,
        &c_json,
        [&c_best, &our_best, &c_cpu, &our_cpu],
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

fn print_table(
    outdir: &Path,
    c: &serde_json::Value,
    [c_best, our_best, c_cpu, our_cpu]: [&[f64]; 4],
    repeat: u32,
    rounds: u32,
    only: Option<&str>,
) {
    let clevel = c["clevel"].as_u64().unwrap_or(5);
    println!(
        "encode, clevel {clevel}, 4 MiB chunks, single thread, best of {rounds} rounds x {repeat} runs \
         (C = C-Blosc2 {} via python-blosc2, nthreads=1); MB/s from thread CPU time, \
         last column from wall time",
        c["c_version"].as_str().unwrap_or("?")
    );
    println!(
        "| dataset | row | C ratio | ours ratio | ratio ours/C | C MB/s | ours MB/s | speed ours/C | wall ours/C |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
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
        let c_speed = nbytes / c_cpu[i] / 1e6;
        let our_speed = nbytes / our_cpu[i] / 1e6;
        let wall = c_best[i] / our_best[i];
        println!(
            "| {} | {} | {c_ratio:.2} | {our_ratio:.2} | {:.3} | {c_speed:.0} | {our_speed:.0} | {:.2} | {wall:.2} |",
            row["dataset"].as_str().unwrap_or("?"),
            row["row"].as_str().unwrap_or("?"),
            our_ratio / c_ratio,
            our_speed / c_speed
        );
    }
}
