//! `array.npy` and `table.npy` as files: through the tree API (no kernel) every reference case
//! of `scripts/oracle/npy_cases.py` reads back as `np.save` writes it, in reads of any size and
//! offset; the chunk files and `array.npy` share one cache and one edit buffer; edits through
//! `array.npy` commit in one commit that python-blosc2 reads; header and size changes are
//! refused. Through real mounts: `np.load`, `mmap_mode='r'` windows, `os.pwrite` and
//! `mmap_mode='r+'` edits read back by python-blosc2 after unmount, and a SIGKILL during a
//! multi-chunk commit leaves the old or the new array.

use std::path::{Path, PathBuf};
use std::time::Duration;

use b2fs::tree::{ROOT_INO, Tree, TreeOptions};
use serde_json::Value;

use crate::support::{self, Mount, fuse_and_python, python_says, run_python};

fn opts(writable: bool) -> TreeOptions {
    TreeOptions {
        writable,
        prefetch_chunks: 0,
        ..TreeOptions::default()
    }
}

fn ino(t: &Tree, path: &str) -> u64 {
    path.split('/')
        .filter(|p| !p.is_empty())
        .fold(ROOT_INO, |dir, name| {
            t.lookup(dir, name)
                .unwrap_or_else(|e| panic!("{path}: {e}"))
                .ino
        })
}

/// The whole file `ino` read through one handle in reads of `step` bytes.
fn read_all(t: &Tree, ino: u64, step: u32) -> Vec<u8> {
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let mut out = Vec::new();
    loop {
        let got = t.read(ino, fh, out.len() as u64, step).unwrap();
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    t.release(fh).unwrap();
    out
}

/// The first `len` bytes of file `ino` read through open handle `fh`.
fn read_fh(t: &Tree, ino: u64, fh: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < len {
        let got = t.read(ino, fh, out.len() as u64, 1 << 20).unwrap();
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    out
}

fn read_at(t: &Tree, ino: u64, offset: u64, size: u32) -> Vec<u8> {
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let got = t.read(ino, fh, offset, size).unwrap().to_vec();
    t.release(fh).unwrap();
    got
}

/// The reference cases: (temp dir holding them, the case list).
fn cases(py: &Path) -> (tempfile::TempDir, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let out = run_python(
        py,
        &["scripts/oracle/npy_cases.py", dir.path().to_str().unwrap()],
    );
    let cases: Value = serde_json::from_slice(&out).expect("case list");
    (dir, cases.as_array().expect("a list").clone())
}

#[test]
fn npy_tree_files_equal_numpy_save_in_reads_of_any_size() {
    let Some(py) = support::python("npy_tree_files_equal_numpy_save_in_reads_of_any_size") else {
        return;
    };
    let (_dir, cases) = cases(&py);
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut checked = 0;
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let source = Path::new(c["source"].as_str().unwrap());
        let want = std::fs::read(c["npy"].as_str().unwrap()).unwrap();
        let file = match c["kind"].as_str().unwrap() {
            "table" => "table.npy",
            _ => "array.npy",
        };
        let t = Tree::from_source(source, opts(false)).unwrap();
        let npy = ino(&t, file);
        assert_eq!(
            t.getattr(npy).unwrap().size,
            want.len() as u64,
            "{name}: size"
        );
        for step in [1 << 20, 4096, 1000, 64 * 1024 + 7] {
            assert!(read_all(&t, npy, step) == want, "{name}: reads of {step}");
        }
        // Windows at odd offsets, each through its own handle (random access).
        let mut x = name.len() as u64 * 2_654_435_761 + 1;
        for _ in 0..40 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = x % (want.len() as u64 + 1);
            let size = ((x >> 32) % 9000) as u32 + 1;
            let end = (off + u64::from(size)).min(want.len() as u64) as usize;
            let got = read_at(&t, npy, off, size);
            assert!(
                got == want[off as usize..end],
                "{name}: window {off}+{size}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, cases.len());
}

/// A fresh 2-D float64 b2nd (230 x 170, chunks 60 x 50, blocks 16 x 24) in a temp dir.
fn gen2d(py: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.b2nd");
    run_python(
        py,
        &[
            "scripts/oracle/npy_check.py",
            "gen2d",
            src.to_str().unwrap(),
        ],
    );
    (dir, src)
}

#[test]
fn npy_tree_chunk_files_and_array_npy_share_one_decode_per_chunk() {
    let Some(py) = support::python("npy_tree_chunk_files_and_array_npy_share_one_decode_per_chunk")
    else {
        return;
    };
    let (_dir, src) = gen2d(&py);
    let t = Tree::from_source(&src, opts(false)).unwrap();
    let nchunks = t.readdir(ino(&t, "data"), 0).unwrap().len() as u64 - 2;
    assert_eq!(nchunks, 4 * 4);
    read_all(&t, ino(&t, "array.npy"), 1 << 20);
    let after_npy = t.cache_stats().loads;
    assert_eq!(after_npy, nchunks, "array.npy decodes each chunk once");
    for i in 0..nchunks {
        read_all(&t, ino(&t, &format!("data/{i:08}.bin")), 1 << 20);
    }
    assert_eq!(
        t.cache_stats().loads,
        nchunks,
        "the chunk files reuse those decodes"
    );
}

#[test]
fn npy_tree_edits_show_in_both_views_and_commit_as_one() {
    let Some(py) = support::python("npy_tree_edits_show_in_both_views_and_commit_as_one") else {
        return;
    };
    let (dir, src) = gen2d(&py);
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let npy = ino(&t, "array.npy");
    let before = read_all(&t, npy, 1 << 20);
    let hlen = before.len() - 230 * 170 * 8;
    // Rows 55..65 cross the first chunk-row edge (60); columns 45..55 the first column edge.
    let fh = t.open(npy, libc::O_RDWR).unwrap();
    let mut want = before.clone();
    for row in 55..65u64 {
        let at = hlen as u64 + (row * 170 + 45) * 8;
        let vals: Vec<u8> = (0..10)
            .flat_map(|i| (f64::from(i) - 99.5).to_le_bytes())
            .collect();
        assert_eq!(t.write(npy, fh, at, &vals).unwrap(), 80);
        want[at as usize..at as usize + 80].copy_from_slice(&vals);
    }
    // Descriptors opened for writing see the buffers: array.npy shows it, and so does chunk
    // 0's file (row 55, column 45: inside chunk 0's block grid at block (3, 1), item
    // (7, 21)) before any commit. A read-only descriptor reads the committed version.
    assert_eq!(read_fh(&t, npy, fh, want.len()), want);
    assert_eq!(read_all(&t, npy, 4096), before);
    let c0 = ino(&t, "data/00000000.bin");
    let cfh = t.open(c0, libc::O_RDWR).unwrap();
    let block_items = 16 * 24;
    let item = (3 * 3 + 1) * block_items + 7 * 24 + 21; // blocks per chunk row: ceil(50/24)=3
    let got = t.read(c0, cfh, (item * 8) as u64, 8).unwrap().to_vec();
    assert_eq!(got, (-99.5f64).to_le_bytes());
    // An edit through the chunk file shows in array.npy at once: item (0, 0) of chunk 0.
    t.write(c0, cfh, 0, &123.0f64.to_le_bytes()).unwrap();
    want[hlen..hlen + 8].copy_from_slice(&123.0f64.to_le_bytes());
    assert_eq!(
        t.read(npy, fh, hlen as u64, 8).unwrap().to_vec(),
        123.0f64.to_le_bytes()
    );
    // One fsync of array.npy commits every edited chunk of the array (four here).
    t.fsync(npy, fh).unwrap();
    t.release(fh).unwrap();
    t.release(cfh).unwrap();
    let fresh = Tree::from_source(&src, opts(false)).unwrap();
    assert_eq!(read_all(&fresh, ino(&fresh, "array.npy"), 1 << 20), want);
    let expect = dir.path().join("expect.npy");
    std::fs::write(&expect, &want).unwrap();
    let says = python_says(
        &py,
        &[
            "scripts/oracle/npy_check.py",
            "same",
            src.to_str().unwrap(),
            expect.to_str().unwrap(),
        ],
    );
    assert_eq!(says, "same", "python-blosc2 reads the edited array");
}

#[test]
fn npy_tree_header_and_size_changes_are_refused_and_change_nothing() {
    let Some(py) =
        support::python("npy_tree_header_and_size_changes_are_refused_and_change_nothing")
    else {
        return;
    };
    let (_dir, src) = gen2d(&py);
    let stored = std::fs::read(&src).unwrap();
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let npy = ino(&t, "array.npy");
    let size = t.getattr(npy).unwrap().size;
    let header = read_at(&t, npy, 0, 64);
    let fh = t.open(npy, libc::O_RDWR).unwrap();
    // Rewriting the header with its own bytes is accepted (a full-file writer does that).
    assert_eq!(t.write(npy, fh, 0, &header).unwrap(), 64);
    let mut other = header.clone();
    other[20] ^= 1;
    assert_eq!(
        t.write(npy, fh, 0, &other).unwrap_err().errno(),
        libc::EINVAL
    );
    assert_eq!(
        t.write(npy, fh, size - 4, &[0; 8]).unwrap_err().errno(),
        libc::EFBIG
    );
    assert_eq!(t.set_size(npy, size + 1).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(t.set_size(npy, 0).unwrap_err().errno(), libc::EINVAL);
    t.set_size(npy, size).unwrap();
    assert_eq!(
        t.open(npy, libc::O_WRONLY | libc::O_TRUNC)
            .unwrap_err()
            .errno(),
        libc::EINVAL
    );
    t.release(fh).unwrap();
    assert_eq!(t.getattr(npy).unwrap().size, size);
    assert!(std::fs::read(&src).unwrap() == stored, "the source changed");
    let ro = Tree::from_source(&src, opts(false)).unwrap();
    let npy = ino(&ro, "array.npy");
    assert_eq!(ro.open(npy, libc::O_RDWR).unwrap_err().errno(), libc::EROFS);
}

#[test]
fn npy_mount_np_load_and_mmap_windows_in_every_cache_mode() {
    let Some(py) = fuse_and_python("npy_mount_np_load_and_mmap_windows_in_every_cache_mode") else {
        return;
    };
    let (_dir, src) = gen2d(&py);
    let bcolz = support::data_dir().join("bcolz/carray_f8");
    for source in [src.as_path(), bcolz.as_path()] {
        for mode in [&[][..], &["keep_cache"][..], &["ro"][..]] {
            let m = Mount::daemon(source, mode);
            let says = python_says(
                &py,
                &[
                    "scripts/oracle/npy_check.py",
                    "mount",
                    m.mp.to_str().unwrap(),
                    source.to_str().unwrap(),
                ],
            );
            assert_eq!(says, "ok 200", "{} {mode:?}", source.display());
            m.umount();
        }
    }
}

#[test]
fn npy_mount_pwrite_and_mmap_r_plus_edits_reach_the_source() {
    let Some(py) = fuse_and_python("npy_mount_pwrite_and_mmap_r_plus_edits_reach_the_source")
    else {
        return;
    };
    for mode in [&[][..], &["keep_cache"][..]] {
        let (dir, src) = gen2d(&py);
        let expect = dir.path().join("expect.npy");
        let m = Mount::daemon(&src, mode);
        let says = python_says(
            &py,
            &[
                "scripts/oracle/npy_check.py",
                "edit",
                m.mp.to_str().unwrap(),
                expect.to_str().unwrap(),
            ],
        );
        assert_eq!(says, "ok", "{mode:?}");
        m.umount();
        let says = python_says(
            &py,
            &[
                "scripts/oracle/npy_check.py",
                "same",
                src.to_str().unwrap(),
                expect.to_str().unwrap(),
            ],
        );
        assert_eq!(says, "same", "{mode:?}: python-blosc2 reads the edits");
    }
}

#[test]
fn npy_mount_sigkill_during_a_multi_chunk_commit_leaves_old_or_new() {
    let Some(py) =
        fuse_and_python("npy_mount_sigkill_during_a_multi_chunk_commit_leaves_old_or_new")
    else {
        return;
    };
    let runs = std::env::var("B2FS_NPY_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let (dir, src) = gen2d(&py);
    let old = dir.path().join("old.npy");
    run_python(
        &py,
        &[
            "scripts/oracle/npy_check.py",
            "save",
            src.to_str().unwrap(),
            old.to_str().unwrap(),
        ],
    );
    let mut old_bytes = std::fs::read(&old).unwrap();
    let (mut saw_old, mut saw_new) = (0, 0);
    for run in 0..runs {
        let log = dir.path().join(format!("log{run}"));
        let mut m = Mount::foreground(&src, &log);
        let npy = m.path("array.npy");
        // Every item of the array changes: all 16 chunks in one commit.
        let mut new_bytes = std::fs::read(&npy).unwrap();
        let hlen = new_bytes.len() - 230 * 170 * 8;
        for (i, item) in new_bytes[hlen..].chunks_exact_mut(8).enumerate() {
            item.copy_from_slice(&((i + run * 7) as f64 * -1.5).to_le_bytes());
        }
        let new_path = dir.path().join(format!("new{run}.npy"));
        std::fs::write(&new_path, &new_bytes).unwrap();
        let writer = {
            let (npy, data) = (npy.clone(), new_bytes.clone());
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(&npy).ok()?;
                f.write_all(&data).ok()?;
                f.sync_all().ok()
            })
        };
        let delay = Duration::from_millis(5 + 13 * run as u64);
        let mut child = m.child.take().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        let acked = writer.join().unwrap().is_some();
        let _ = std::process::Command::new("fusermount3")
            .args(["-u", "-z"])
            .arg(&m.mp)
            .output();
        let now = dir.path().join("now.npy");
        run_python(
            &py,
            &[
                "scripts/oracle/npy_check.py",
                "save",
                src.to_str().unwrap(),
                now.to_str().unwrap(),
            ],
        );
        let now_bytes = std::fs::read(&now).unwrap();
        if now_bytes == new_bytes {
            saw_new += 1;
        } else {
            assert!(
                now_bytes == old_bytes,
                "run {run}: neither the old nor the new array"
            );
            assert!(!acked, "run {run}: an fsync-acknowledged edit was lost");
            saw_old += 1;
        }
        // The next run starts from what is stored now.
        old_bytes = now_bytes;
        let _ = std::fs::remove_file(&new_path);
        drop(m);
    }
    println!("npy crash runs: {runs}, old {saw_old}, new {saw_new}");
}
