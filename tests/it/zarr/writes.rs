//! Writes of chunk data through the Zarr view (tree API and real mounts) committed as
//! python-blosc2 reads them back; SIGKILL during a chunk commit; another writer; chunk objects
//! written through their `.partial` files. Writes of `zarr.json`: `metadata.rs`.

use std::path::Path;
use std::time::Duration;

use b2fs::tree::Tree;
use serde_json::Value;

use super::{assemble, dims, ino, itemsize, json_at, npy_data, read_all};
use crate::support::crash::{OldOrNew, Rng, kill_delay, kill_mount_after};
use crate::support::no_prefetch as opts;
use crate::support::{self, Mount, fuse_and_python, npy_cases, python, python_says, run_python};

fn reference_sha(py: &Path, src: &Path) -> String {
    python_says(
        py,
        &[
            "-c",
            "import sys, hashlib, blosc2, numpy as np; \
             a = blosc2.open(sys.argv[1])[...]; \
             print(hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())",
            src.to_str().unwrap(),
        ],
    )
}

#[test]
fn writes_through_the_view_commit_what_python_blosc2_reads() {
    let py = or_skip!(python(
        "writes_through_the_view_commit_what_python_blosc2_reads"
    ));
    let (_dir, cases) = npy_cases(&py);
    // f4_2d: slab blocks? no: blocks (4,3) in chunks (10,7): a re-layout; u8_2d: blocks
    // (6,4) in chunks (13,4): slabs (a prefix).
    for name in ["f4_2d", "u8_2d", "f8_3d"] {
        let case = cases.iter().find(|c| c["name"] == name).unwrap();
        let src = Path::new(case["source"].as_str().unwrap());
        let (mut want, _) = npy_data(Path::new(case["npy"].as_str().unwrap()));
        let t = Tree::from_source(src, opts(true)).unwrap();
        let meta = json_at(&t, &format!("zarr/{name}/zarr.json"));
        let shape = dims(&meta["shape"]);
        let chunks = dims(&meta["chunk_grid"]["configuration"]["chunk_shape"]);
        let item = itemsize(&meta["data_type"]) as usize;
        let per: usize = chunks.iter().product::<u64>() as usize;
        let nd = shape.len();
        let zeros = vec!["0"; nd].join("/");
        let last: Vec<String> = shape
            .iter()
            .zip(&chunks)
            .map(|(s, c)| (s.div_ceil(*c) - 1).to_string())
            .collect();
        let last = last.join("/");
        // Applies object bytes `obj` of chunk `coords` to the expected array.
        let apply = |want: &mut Vec<u8>, coords: &[u64], obj: &[u8]| {
            for local in 0..per as u64 {
                let (mut rest, mut global, mut inside) = (local, 0u64, true);
                for d in (0..nd).rev() {
                    let l = rest % chunks[d];
                    rest /= chunks[d];
                    let g = coords[d] * chunks[d] + l;
                    inside &= g < shape[d];
                    global += g * shape[d + 1..].iter().product::<u64>();
                }
                if inside {
                    let (s, d) = (local as usize * item, global as usize * item);
                    want[d..d + item].copy_from_slice(&obj[s..s + item]);
                }
            }
        };
        let pattern = |seed: u8| -> Vec<u8> {
            (0..per * item)
                .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                .collect()
        };
        // 1. zarr-python's way: a temp file in the chunk's directory renamed over it.
        let cdir = format!(
            "zarr/{name}/c/{}",
            zeros.rsplit_once('/').map_or("", |p| p.0)
        );
        let cdir = cdir.trim_end_matches('/');
        let first = zeros.rsplit('/').next().unwrap();
        let (attr, fh) = t.create(ino(&t, cdir), "0.abc.partial").unwrap();
        let obj = pattern(1);
        t.write(attr.ino, fh, 0, &obj[..100]).unwrap();
        t.write(attr.ino, fh, 100, &obj[100..]).unwrap();
        t.release(fh).unwrap();
        // A temp file of the wrong size is refused, and stays.
        let (short, fh2) = t.create(ino(&t, cdir), "bad.partial").unwrap();
        t.write(short.ino, fh2, 0, &obj[..5]).unwrap();
        t.release(fh2).unwrap();
        let err = t
            .rename(ino(&t, cdir), "bad.partial", ino(&t, cdir), first, false)
            .unwrap_err();
        assert_eq!(err.errno(), libc::EINVAL);
        t.rename(ino(&t, cdir), "0.abc.partial", ino(&t, cdir), first, false)
            .unwrap();
        assert!(t.lookup(ino(&t, cdir), "0.abc.partial").is_err());
        apply(&mut want, &vec![0; nd], &obj);
        // Reads see it at once, through the view and the native files.
        let path0 = format!("zarr/{name}/c/{zeros}");
        assert!(read_all(&t, ino(&t, &path0), 4096) == obj);
        // 2. in place, in two writes across the object, O_TRUNC first.
        let lastp = format!("zarr/{name}/c/{last}");
        let o = ino(&t, &lastp);
        let fh = t.open(o, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        assert_eq!(t.getattr(o).unwrap().size, (per * item) as u64);
        let obj2 = pattern(7);
        let half = obj2.len() / 2 + 3;
        t.write(o, fh, 0, &obj2[..half]).unwrap();
        t.write(o, fh, half as u64, &obj2[half..]).unwrap();
        let past = t.write(o, fh, (per * item) as u64, &[1]).unwrap_err();
        assert_eq!(past.errno(), libc::EFBIG);
        t.release(fh).unwrap();
        let lc: Vec<u64> = last.split('/').map(|x| x.parse().unwrap()).collect();
        apply(&mut want, &lc, &obj2);
        // 3. a chunk that became all fill value is removed: it reads as zeros.
        let grid: Vec<u64> = shape
            .iter()
            .zip(&chunks)
            .map(|(s, c)| s.div_ceil(*c))
            .collect();
        let mut second = vec![0u64; nd];
        let mut rest = 1u64;
        for d in (0..nd).rev() {
            second[d] = rest % grid[d];
            rest /= grid[d];
        }
        let sp = format!(
            "zarr/{name}/c/{}",
            second
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("/")
        );
        let (parent, leaf) = sp.rsplit_once('/').unwrap();
        t.unlink(ino(&t, parent), leaf).unwrap();
        assert!(read_all(&t, ino(&t, &sp), 1 << 20).iter().all(|&b| b == 0));
        apply(&mut want, &second, &vec![0; per * item]);
        // Metadata cannot change through zarr.json; its own bytes written back change
        // nothing.
        let j = ino(&t, &format!("zarr/{name}/zarr.json"));
        let doc = read_all(&t, j, 1 << 20);
        let fh = t.open(j, libc::O_WRONLY).unwrap();
        assert_eq!(t.write(j, fh, 0, &doc).unwrap() as usize, doc.len());
        let mut changed = doc.clone();
        changed[1] ^= 1;
        assert_eq!(
            t.write(j, fh, 0, &changed).unwrap_err().errno(),
            libc::EPERM
        );
        assert_eq!(t.write(j, fh, 1, &doc).unwrap_err().errno(), libc::EPERM);
        t.release(fh).unwrap();
        assert_eq!(read_all(&t, j, 1 << 20), doc);
        drop(t);
        assert_eq!(
            reference_sha(&py, src),
            support::sha256_hex(&want),
            "{name}: python-blosc2 reads other data than was written"
        );
        // A read-only tree refuses every change with EROFS.
        let ro = Tree::from_source(src, opts(false)).unwrap();
        let o = ino(&ro, &path0);
        assert_eq!(ro.open(o, libc::O_WRONLY).unwrap_err().errno(), libc::EROFS);
        let (parent, leaf) = path0.rsplit_once('/').unwrap();
        assert_eq!(
            ro.unlink(ino(&ro, parent), leaf).unwrap_err().errno(),
            libc::EROFS
        );
    }
}

#[test]
fn zarr_python_style_writes_through_a_mount_are_read_back_by_python_blosc2() {
    let py = or_skip!(fuse_and_python(
        "zarr_python_style_writes_through_a_mount_are_read_back_by_python_blosc2"
    ));
    let (_dir, cases) = npy_cases(&py);
    let case = cases.iter().find(|c| c["name"] == "f8_3d").unwrap();
    let src = Path::new(case["source"].as_str().unwrap());
    let m = Mount::daemon(src, &["rw"]);
    let said = python_says(
        &py,
        &[
            "scripts/oracle/zarr_check.py",
            "--write",
            m.path("zarr").to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    m.umount();
    // The script printed the sha256 python-blosc2 must now read.
    assert_eq!(reference_sha(&py, src), said);
}

#[test]
fn a_sigkill_during_a_zarr_chunk_commit_leaves_the_old_or_the_new_chunk() {
    let py = or_skip!(fuse_and_python(
        "a_sigkill_during_a_zarr_chunk_commit_leaves_the_old_or_the_new_chunk"
    ));
    let runs = crate::support::env_or("B2FS_ZARR_CRASH_RUNS", 4);
    let (dir, src) = crate::support::temp_path("crash.b2nd");
    let raw = dir.path().join("raw");
    let (src_s, raw_s) = (src.to_str().unwrap(), raw.to_str().unwrap());
    run_python(&py, &["scripts/oracle/zarr_check.py", "gen", src_s]);
    run_python(&py, &["scripts/oracle/zarr_check.py", "raw", src_s, raw_s]);
    let mut old = std::fs::read(&raw).unwrap();
    let half = old.len() / 2;
    let runs = runs.max(2);
    let mut verdict = OldOrNew::default();
    let mut rng = Rng::per_run(6);
    for run in 0..runs {
        let log = dir.path().join(format!("log{run}"));
        let mut m = Mount::foreground(&src, &log);
        // Chunk (0, 0) is the first half of the array: zarr-python's temp file + rename.
        let obj: Vec<u8> = (0..half / 8)
            .flat_map(|i| ((i + run * 7) as f64 * -1.5).to_le_bytes())
            .collect();
        let mut new = obj.clone();
        new.extend_from_slice(&old[half..]);
        let (tmp, target) = (
            m.path("zarr/crash/c/0/0.x.partial"),
            m.path("zarr/crash/c/0/0"),
        );
        let (written, wait) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            std::fs::write(&tmp, &obj).ok()?;
            written.send(()).ok()?;
            std::fs::rename(&tmp, &target).ok()
        });
        // The kill lands 40 to 460 ms into the rename (the chunk decoded, patched, encoded
        // and written: 16 MiB), again and again in a long form (B2FS_ZARR_CRASH_RUNS).
        let delay = kill_delay(&mut rng, run, 40, 420);
        let _ = wait.recv_timeout(Duration::from_secs(60));
        // Run 0 is the control: the kill comes after the rename returned (new, for sure).
        let writer = if run == 0 {
            let done = writer.join().unwrap();
            std::thread::spawn(move || done)
        } else {
            writer
        };
        let acked = kill_mount_after(&mut m, delay, writer).is_some();
        assert!(run > 0 || acked, "the rename over the chunk object failed");
        run_python(&py, &["scripts/oracle/zarr_check.py", "raw", src_s, raw_s]);
        let now = std::fs::read(&raw).unwrap();
        verdict.check(run, (&now[..], &old[..], &new[..]), acked);
        old = now;
        drop(m);
    }
    println!(
        "zarr crash runs: {runs}, old {}, new {}",
        verdict.old, verdict.new
    );
}

#[test]
fn the_view_follows_another_writer_and_a_descriptor_keeps_its_version() {
    let py = or_skip!(python(
        "the_view_follows_another_writer_and_a_descriptor_keeps_its_version"
    ));
    let (_dir, src) = crate::support::temp_path("grow.b2nd");
    crate::support::int64_1000_b2nd(&py, &src);
    let t = Tree::from_source(&src, opts(false)).unwrap();
    let meta = json_at(&t, "zarr/grow/zarr.json");
    assert_eq!(meta["shape"], serde_json::json!([1000]));
    // A descriptor of zarr.json and one of chunk c/0 opened before the change.
    let j = ino(&t, "zarr/grow/zarr.json");
    let jfh = t.open(j, libc::O_RDONLY).unwrap();
    let c0 = ino(&t, "zarr/grow/c/0");
    let cfh = t.open(c0, libc::O_RDONLY).unwrap();
    crate::support::grow_to_1500(&py, &src, "m");
    assert!(t.follow_source());
    let meta = json_at(&t, "zarr/grow/zarr.json");
    assert_eq!(meta["shape"], serde_json::json!([1500]));
    assert_eq!(meta["attributes"]["units"], "m");
    let root = json_at(&t, "zarr/zarr.json");
    assert_eq!(root["consolidated_metadata"]["metadata"]["grow"], meta);
    let got = assemble(&t, "grow", &meta, 4096);
    let want: Vec<u8> = (0..1500i64).flat_map(|i| (i * 3).to_le_bytes()).collect();
    assert!(got == want, "the chunk objects show the new data");
    // The descriptors opened before read the version they opened, or fail; never a mix.
    let old: Value = serde_json::from_slice(&t.read(j, jfh, 0, 1 << 20).unwrap()).unwrap();
    assert_eq!(old["shape"], serde_json::json!([1000]));
    if let Ok(bytes) = t.read(c0, cfh, 0, 1 << 20) {
        let first: Vec<u8> = (0..300i64).flat_map(i64::to_le_bytes).collect();
        let now: Vec<u8> = (0..300i64).flat_map(|i| (i * 3).to_le_bytes()).collect();
        assert!(bytes.to_vec() == first || bytes.to_vec() == now);
    }
    t.release(jfh).unwrap();
    t.release(cfh).unwrap();
}

/// zarr-python writes a whole chunk object into a `.partial` file in the chunk's directory
/// and renames it over the object: a chunk object larger than the 64 MiB every other
/// scratch file may hold (`tree/edit.rs`, `MAX_BUFFERED`) still goes through, and a file past
/// the object's size is refused with EFBIG.
#[test]
fn a_chunk_object_over_64_mib_is_written_through_its_partial_file() {
    let py = or_skip!(python(
        "a_chunk_object_over_64_mib_is_written_through_its_partial_file"
    ));
    let (_dir, src) = support::temp_path("big.b2nd");
    // One chunk of 9,437,184 float64 (72 MiB), zeros.
    run_python(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2; \
             blosc2.zeros((9437184,), dtype=np.float64, urlpath=sys.argv[1], mode='w', \
             chunks=(9437184,), blocks=(65536,))",
            src.to_str().unwrap(),
        ],
    );
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let cdir = ino(&t, "zarr/big/c");
    let len = 9437184usize * 8;
    let (attr, fh) = t.create(cdir, "0.abc.partial").unwrap();
    let obj: Vec<u8> = (0..len / 8)
        .flat_map(|i| (i as f64).to_le_bytes())
        .collect();
    for (k, piece) in obj.chunks(1 << 20).enumerate() {
        t.write(attr.ino, fh, (k << 20) as u64, piece).unwrap();
    }
    let past = t.write(attr.ino, fh, len as u64, &[1]).unwrap_err();
    assert_eq!(past.errno(), libc::EFBIG);
    t.release(fh).unwrap();
    t.rename(cdir, "0.abc.partial", cdir, "0", false).unwrap();
    drop(t);
    let sha = reference_sha(&py, &src);
    use sha2::Digest;
    assert_eq!(sha, format!("{:x}", sha2::Sha256::digest(&obj)));
}

/// A `.partial` file's bound is its chunk object's size, which comes from the source's
/// header, but never more than the 1 GiB all scratch files may hold together
/// (`tree/scratch.rs`, `MAX_SCRATCH_BYTES`): for a source whose chunk object has 1.2 GB
/// (python-blosc2 writes such a chunk of zeros in a few bytes, and a hostile header may
/// declare any size), growing the file past 1 GiB is EFBIG, not an allocation of the
/// object's size. Before, `truncate` of the `.partial` file to the object's size allocated it.
#[test]
fn a_partial_file_is_bounded_by_the_scratch_bound_whatever_its_object_size() {
    let py = or_skip!(python(
        "a_partial_file_is_bounded_by_the_scratch_bound_whatever_its_object_size"
    ));
    let (_dir, src) = support::temp_path("huge.b2nd");
    let len: u64 = 1_200_000_000;
    run_python(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2; \
             n = int(sys.argv[2]); \
             blosc2.zeros((n,), dtype=np.int8, urlpath=sys.argv[1], mode='w', \
             chunks=(n,), blocks=(1 << 20,))",
            src.to_str().unwrap(),
            &len.to_string(),
        ],
    );
    let before = std::fs::read(&src).unwrap();
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let cdir = ino(&t, "zarr/huge/c");
    assert_eq!(t.getattr(ino(&t, "zarr/huge/c/0")).unwrap().size, len);
    let (attr, fh) = t.create(cdir, "0.abc.partial").unwrap();
    let cap = 1u64 << 30;
    for size in [len, cap + 1] {
        let err = t.set_size(attr.ino, size).unwrap_err();
        assert_eq!(err.errno(), libc::EFBIG, "truncate to {size}: {err}");
    }
    let err = t.write(attr.ino, fh, cap, &[1]).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG, "a write at 1 GiB: {err}");
    assert_eq!(t.getattr(attr.ino).unwrap().size, 0);
    // Below the bound it is an ordinary scratch file.
    assert_eq!(t.write(attr.ino, fh, 4096, b"abc").unwrap(), 3);
    assert_eq!(t.getattr(attr.ino).unwrap().size, 4099);
    t.release(fh).unwrap();
    t.unlink(cdir, "0.abc.partial").unwrap();
    drop(t);
    assert!(
        std::fs::read(&src).unwrap() == before,
        "the source is unchanged"
    );
}
