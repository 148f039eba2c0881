//! Crash safety of the read-write mount: a writer rewrites chunks through the mount with
//! fsync while the daemon is killed with SIGKILL at a random moment; afterwards the reference
//! library must open the source, every chunk must hold its old or its new content, and every
//! chunk whose fsync succeeded its new content. For a bcolz ctable the writer grows a column
//! that is not the first (every column grows with it): bcolz must open the table with a
//! length of whole acknowledged steps and read every row, and a new read-write mount must
//! leave every column at that length. A few runs in the default suite; hundreds in
//! `cargo test --test it -- --ignored crash` (or `B2FS_CRASH_RUNS=N`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::support::crash::{Rng, foreground, kill_after, kill_delay, run_copy};
use crate::support::{b2fs, fuse_and_python, ok, python_says};

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(7).wrapping_add(seed) & 255) as u8)
        .collect()
}

/// One run: mount `src` in the foreground, rewrite every chunk with fsync from a thread and
/// append one, SIGKILL the daemon after `delay`, lazily unmount. Returns the chunks whose
/// fsync succeeded.
fn crash_run(src: &Path, mp: &Path, seed: u64, delay: Duration) -> Vec<usize> {
    let mut child = foreground(src, mp);
    let data = mp.join("data");
    let writer = std::thread::spawn(move || {
        let mut acked = Vec::new();
        let mut full = 0;
        for i in 0.. {
            let path = data.join(format!("{i:08}.bin"));
            let Ok(len) = std::fs::metadata(&path).map(|m| m.len() as usize) else {
                // Append one chunk (as long as the first), then stop.
                let res = std::fs::File::create(&path).and_then(|mut f| {
                    f.write_all(&pattern(full, seed + i as u64))?;
                    f.sync_all()
                });
                if res.is_ok() {
                    acked.push(i);
                }
                break;
            };
            if i == 0 {
                full = len;
            }
            let res = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|mut f| {
                    f.write_all(&pattern(len, seed + i as u64))?;
                    f.sync_all()
                });
            match res {
                Ok(()) => acked.push(i),
                Err(_) => break,
            }
        }
        acked
    });
    kill_after(delay, &mut child, writer, mp)
}

fn crash_test(test: &str, runs: usize) {
    let py = or_skip!(fuse_and_python(test));
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let pristine = root.join("pristine");
    std::fs::create_dir(&pristine).unwrap();
    crate::support::oracle(&py, &[&"scripts/oracle/writeback.py", &"gen", &pristine]);
    let kinds = ["cframe.b2frame", "sframe.b2frame", "carr"];
    let mut rng = Rng::per_run(1);
    let mut manifest = Vec::new();
    for r in 0..runs {
        let kind = kinds[r % kinds.len()];
        let (src, mp) = run_copy(&root, r, &pristine.join(kind));
        let seed = 100 + (rng.next() % 100);
        let delay = kill_delay(&mut rng, r / kinds.len(), 0, 40);
        let acked = crash_run(&src, &mp, seed, delay);
        manifest.push(json!({
            "kind": if kind == "carr" { "carr" } else { "frame" },
            "src": src,
            "pristine": pristine.join(kind),
            "seed": seed,
            "acked": acked,
        }));
    }
    let m = root.join("MANIFEST.json");
    std::fs::write(&m, serde_json::to_vec(&manifest).unwrap()).unwrap();
    assert_eq!(
        python_says(&py, &["scripts/oracle/crash_check.py", m.to_str().unwrap()]),
        runs.to_string()
    );
    let acked: usize = manifest
        .iter()
        .map(|r| r["acked"].as_array().map_or(0, Vec::len))
        .sum();
    eprintln!("{test}: {runs} runs, {acked} acknowledged chunk commits checked");
}

#[test]
fn crash_sigkill_during_commits_small() {
    crash_test("crash_sigkill_during_commits_small", 12);
}

#[test]
#[ignore = "hundreds of mounts: run with --ignored crash"]
fn crash_sigkill_during_commits_many() {
    let runs = crate::support::env_or("B2FS_CRASH_RUNS", 300);
    crash_test("crash_sigkill_during_commits_many", runs);
}

/// One ctable run: mount `src` (the "ct2" table) in the foreground; a thread fills the partial
/// last chunk of column b (200 rows) and then appends whole chunks (300 rows) to it, each with
/// fsync; SIGKILL after `delay`. Returns how many of those steps were acknowledged.
fn crash_table_run(src: &Path, mp: &Path, seed: u64, delay: Duration) -> usize {
    let mut child = foreground(src, mp);
    let data = mp.join("b/data");
    let writer = std::thread::spawn(move || {
        let mut acked = 0;
        for k in 0..40u64 {
            let res = if k == 0 {
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(data.join("00000008.bin"))
                    .and_then(|mut f| {
                        f.write_all(&pattern(200 * 8, seed))?;
                        f.sync_all()
                    })
            } else {
                std::fs::File::create(data.join(format!("{:08}.bin", 8 + k))).and_then(|mut f| {
                    f.write_all(&pattern(300 * 8, seed + k))?;
                    f.sync_all()
                })
            };
            match res {
                Ok(()) => acked += 1,
                Err(_) => break,
            }
        }
        acked
    });
    kill_after(delay, &mut child, writer, mp)
}

fn crash_table_test(test: &str, runs: usize) {
    let py = or_skip!(fuse_and_python(test));
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    // The pristine table (named as each run's copy: ct2).
    let pristine = root.join("ct2");
    crate::support::oracle(&py, &[&"scripts/oracle/writeback.py", &"ctable", &pristine]);
    let mut rng = Rng::per_run(2);
    let mut manifest = Vec::new();
    for r in 0..runs {
        let (src, mp) = run_copy(&root, r, &pristine);
        let seed = 100 + (rng.next() % 100);
        let delay = kill_delay(&mut rng, r, 0, 150);
        let acked = crash_table_run(&src, &mp, seed, delay);
        manifest.push(json!({
            "kind": "ctable",
            "src": src,
            "pristine": pristine,
            "seed": seed,
            "acked": acked,
        }));
    }
    let m = root.join("MANIFEST.json");
    std::fs::write(&m, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let out = Command::new(&py)
        .arg("scripts/oracle/crash_check.py")
        .arg(&m)
        .current_dir(crate::support::repo_root())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        runs.to_string()
    );
    eprint!("{test}: {err}");
    // A read-write mount repairs what a cut commit left: every column at the table's length.
    for r in &manifest {
        let src = PathBuf::from(r["src"].as_str().unwrap());
        let mp = src.parent().unwrap().join("mnt");
        ok(b2fs().arg("mount").arg(&src).arg(&mp));
        ok(b2fs().arg("umount").arg(&mp));
    }
    assert_eq!(
        crate::support::oracle_says(&py, &[&"scripts/oracle/crash_check.py", &m, &"repaired"]),
        runs.to_string()
    );
    let acked: usize = manifest
        .iter()
        .map(|r| r["acked"].as_u64().unwrap_or(0) as usize)
        .sum();
    eprintln!("{test}: {runs} runs, {acked} acknowledged table growths checked");
}

#[test]
fn crash_sigkill_during_ctable_commits_small() {
    crash_table_test("crash_sigkill_during_ctable_commits_small", 6);
}

#[test]
#[ignore = "hundreds of mounts: run with --ignored crash"]
fn crash_sigkill_during_ctable_commits_many() {
    let runs = crate::support::env_or("B2FS_CRASH_RUNS", 200);
    crash_table_test("crash_sigkill_during_ctable_commits_many", runs);
}
