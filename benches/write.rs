//! Write benchmark through a real read-write FUSE mount. Harness-free:
//! `cargo bench --bench write`. Needs `/dev/fuse`, `fusermount3` and the project's `.venv`;
//! sources are generated once into `bench-data/` (gitignored) by `scripts/bench_write.py`.
//!
//! Measured:
//! 1. updating chunk 0 (8 MiB, write + fsync) of a 1 GiB contiguous frame through the mount,
//!    against python-blosc2's `update_data(0)` on the same frame;
//! 2. the cost of one such commit as a function of the frame size (16 MiB .. 1 GiB).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{is_mounted, python, root};

/// The source of `mib` MiB, generated once.
fn source(mib: u64) -> PathBuf {
    let dir = root().join("bench-data");
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(format!("write_{mib}m.b2frame"));
    if !p.exists() {
        eprintln!("generating {}", p.display());
        let st = Command::new(python())
            .args(["scripts/bench_write.py", "gen"])
            .arg(&p)
            .arg(mib.to_string())
            .current_dir(root())
            .status()
            .expect("python");
        assert!(st.success(), "bench_write.py gen failed");
    }
    p
}

/// A fresh copy of `src` in `dir`, already on disk.
fn copy(src: &Path, dir: &Path) -> PathBuf {
    let dst = dir.join(src.file_name().unwrap_or_default());
    std::fs::copy(src, &dst).expect("copy");
    // Flush the copy now: otherwise the first fsync (b2fs's commit) pays for writing it.
    std::fs::File::open(&dst)
        .and_then(|f| f.sync_all())
        .expect("sync");
    dst
}

/// Mounts `src` read-write, rewrites chunk 0 and fsyncs; returns the write + fsync time.
fn mount_update(src: &Path, dir: &Path) -> Duration {
    let mp = std::fs::canonicalize(dir).unwrap().join("mnt");
    let _ = std::fs::create_dir(&mp);
    let st = Command::new(env!("CARGO_BIN_EXE_b2fs"))
        .arg("mount")
        .arg(src)
        .arg(&mp)
        .status()
        .expect("b2fs");
    assert!(st.success() && is_mounted(&mp));
    let chunk = mp.join("data/00000000.bin");
    let len = std::fs::metadata(&chunk).unwrap().len() as usize;
    let data: Vec<u8> = (0..len / 8).flat_map(|_| 1.5f64.to_le_bytes()).collect();
    let t = Instant::now();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&chunk)
        .unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    let el = t.elapsed();
    drop(f);
    let _ = Command::new(env!("CARGO_BIN_EXE_b2fs"))
        .arg("umount")
        .arg(&mp)
        .status();
    el
}

fn python_update(src: &Path) -> Duration {
    let out = Command::new(python())
        .args(["scripts/bench_write.py", "update"])
        .arg(src)
        .current_dir(root())
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0.0);
    Duration::from_secs_f64(s)
}

fn main() {
    if !Path::new("/dev/fuse").exists() {
        eprintln!("SKIP: no /dev/fuse");
        return;
    }
    let sizes: Vec<u64> = std::env::var("B2FS_BENCH_WRITE_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| vec![16, 64, 256, 1024]);
    let reps = 3;
    println!("| frame | b2fs write+fsync of chunk 0 (8 MiB) | python-blosc2 update_data(0) |");
    println!("| --- | --- | --- |");
    for mib in sizes {
        let src = source(mib);
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..reps {
            let d = tempfile::tempdir().unwrap();
            ours.push(mount_update(&copy(&src, d.path()), d.path()));
            let d = tempfile::tempdir().unwrap();
            theirs.push(python_update(&copy(&src, d.path())));
        }
        ours.sort();
        theirs.sort();
        println!(
            "| {mib} MiB | {:.1} ms (median of {reps}) | {:.1} ms |",
            ours[reps / 2].as_secs_f64() * 1e3,
            theirs[reps / 2].as_secs_f64() * 1e3
        );
    }
}
