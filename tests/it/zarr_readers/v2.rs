//! The Zarr v2 view `zarr2/` (docs/ZARR.md, "Zarr v2 view") of real mounts read by the v2
//! readers users have: zarr-python 2.18 and xarray 2025.6 on it in `.venv-zarr2` (Python
//! 3.10, the line Python <= 3.10 stays on), and zarr-python 3.4 and xarray told
//! `zarr_format=2` in `.venv-zarr`, over every source of `zarr_cases.py gen` (b2nd arrays of
//! 1-4 dimensions with edge chunks, a plain frame, bcolz carrays and a ctable, `.b2z` and
//! `.b2d` stores with nested groups) against python-blosc2's and bcolz's reads
//! (`scripts/oracle/zarr2_reads.py`), also on `-o zarr_shards` mounts (the v2 view stays plain
//! chunks); a directory of `.b2nd` files as one xarray Dataset with its time coordinate;
//! zarr-python's writes and the shell's changes refused with EROFS on a read-write mount.
//! Without `.venv-zarr2` (scripts/setup.sh makes it) the tests print SKIP, and fail under
//! `B2FS_REQUIRE_PYTHON=1`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::dirs::{SCRIPT, assert_one_dataset, b2nd_dir};
use super::{read_cases, run, with_mounted_cases, zarr_python, zarr34};
use crate::support::{Mount, fuse_and_python, run_python, sha256_hex};

/// `.venv-zarr2`: zarr-python 2.18 and xarray on Python 3.10.
fn zarr218(test: &str) -> Option<PathBuf> {
    zarr_python(
        test,
        "B2FS_ZARR2_PYTHON",
        ".venv-zarr2",
        "zarr, xarray, numcodecs",
    )
}

/// Mounts every case of `zarr_cases.py gen` with `opts` and runs `zarr2_reads.py read CASES
/// READERS` with `zpy`: no problem, every reader of `readers` (comma-separated) read back at
/// least 30 arrays, and zarr-python's version starts with `version` when one is given.
fn reads_every_case(
    t: &str,
    py: &Path,
    zpy: &Path,
    opts: &[&str],
    readers: &str,
    version: Option<&str>,
) {
    with_mounted_cases(py, opts, |cases| {
        let script = "scripts/oracle/zarr2_reads.py";
        let report = read_cases(t, zpy, script, "the Zarr v2 readers", cases, readers);
        if let Some(v) = version {
            assert!(report["zarr"].as_str().unwrap().starts_with(v), "{report}");
        }
        let checked = |reader: &str| report["checked"][reader].as_u64().unwrap_or(0);
        assert!(readers.split(',').all(|r| checked(r) >= 30), "{report}");
    });
}

#[test]
fn zarr_python_218_and_xarray_read_the_v2_view_like_the_references() {
    let t = "zarr_python_218_and_xarray_read_the_v2_view_like_the_references";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr218(t));
    reads_every_case(t, &py, &zpy, &["ro"], "zarr,xarray", Some("2.18"));
}

#[test]
fn zarr_python_34_and_xarray_read_the_v2_view_with_zarr_format_2() {
    let t = "zarr_python_34_and_xarray_read_the_v2_view_with_zarr_format_2";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    reads_every_case(t, &py, &zpy, &["ro"], "zarr,xarray", Some("3"));
}

/// `-o zarr_shards` shards the v3 view only: zarr-python 2.18 (which has no sharding) reads
/// every array of the v2 view, whole chunks of the stat'ed size.
#[test]
fn zarr_python_218_reads_the_v2_view_of_a_sharded_mount() {
    let t = "zarr_python_218_reads_the_v2_view_of_a_sharded_mount";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr218(t));
    reads_every_case(t, &py, &zpy, &["ro", "zarr_shards"], "zarr", None);
}

/// On a read-write mount, zarr-python 2.18's and 3.4's writes through `zarr2/` (a chunk, the
/// whole array, an attribute) fail with EROFS, as do the shell's changes there, and the source
/// keeps every byte.
#[test]
fn writes_through_the_v2_view_are_erofs_on_a_read_write_mount() {
    let t = "writes_through_the_v2_view_are_erofs_on_a_read_write_mount";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr218(t));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("slab.b2nd");
    run_python(
        &py,
        &[
            "scripts/oracle/zarr_cases.py",
            "slab2d",
            src.to_str().unwrap(),
        ],
    );
    let before = sha256_hex(&std::fs::read(&src).unwrap());
    let m = Mount::daemon(&src, &[]);
    let mp = m.mp.to_str().unwrap();
    let mut pythons = vec![zpy];
    pythons.extend(zarr34(t));
    for zpy in &pythons {
        let (ok, out, err) = run(
            zpy,
            &["scripts/oracle/zarr2_reads.py", "readonly", mp, "slab"],
        );
        assert!(ok, "{t}: {out}{err}");
        assert_eq!(out.trim(), "refused 3", "{err}");
    }
    let arr = m.path("zarr2/slab");
    let erofs = |what: &str, r: std::io::Result<()>| {
        let e = r.expect_err(what);
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{what}: {e}");
    };
    let open_w = |p: PathBuf| std::fs::OpenOptions::new().write(true).open(p).map(drop);
    erofs("open a chunk for writing", open_w(arr.join("0.0")));
    erofs("open .zarray for writing", open_w(arr.join(".zarray")));
    erofs("create", std::fs::write(arr.join("0.0.tmp"), b"x"));
    erofs("mkdir", std::fs::create_dir(m.path("zarr2/new")));
    erofs("unlink", std::fs::remove_file(arr.join("0.0")));
    erofs("rmdir", std::fs::remove_dir(&arr));
    erofs("rename", std::fs::rename(arr.join("0.0"), arr.join("0.1")));
    // Still read-only for the v2 view; the v3 view and the native tree stay writable.
    assert!(
        std::fs::OpenOptions::new()
            .write(true)
            .open(m.path("zarr/slab/c/0/0"))
            .is_ok()
    );
    m.umount();
    assert_eq!(
        sha256_hex(&std::fs::read(&src).unwrap()),
        before,
        "the source changed"
    );
}

/// A directory of `.b2nd` files through xarray on zarr-python 2.18 (and on zarr-python 3.4,
/// told `zarr_format=2`): one Dataset whose variables are named after the files' stems and
/// whose `time.b2nd` is the decoded coordinate of the dimension `time`, with python-blosc2's
/// values (the same lines as the v3 view gives, `zarr_readers/dirs.rs`).
#[test]
fn xarray_on_zarr_218_reads_a_directory_of_b2nd_files_through_zarr2() {
    let t = "xarray_on_zarr_218_reads_a_directory_of_b2nd_files_through_zarr2";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr218(t));
    let (_dir, src, check) = b2nd_dir(&py);
    let m = Mount::daemon(&src, &["ro"]);
    let mp = m.mp.to_str().unwrap();
    let mut pythons = vec![zpy];
    pythons.extend(zarr34(t));
    for zpy in &pythons {
        let (ok, out, err) = run(zpy, &[SCRIPT, "read", mp, "zarr2"]);
        assert!(ok, "{t}: {out}{err}");
        assert_one_dataset(&out, &check, &format!("{}: {err}", zpy.display()));
    }
    m.umount();
}

/// A read-only mount, whose kernel keeps entries and attributes for a day, shows another
/// writer's resize in `zarr2/` at the next read (the follower makes the kernel forget the v2
/// view's directories and metadata files): `.zarray`'s shape, the root's `.zmetadata`, the new
/// chunk object and every object's new bytes; with `-o keep_cache` too, where a stale size
/// would cut the longer `.zarray` short.
#[test]
fn a_read_only_mount_shows_another_writers_resize_in_zarr2() {
    let t = "a_read_only_mount_shows_another_writers_resize_in_zarr2";
    let py = or_skip!(fuse_and_python(t));
    let json =
        |p: PathBuf| -> Option<Value> { serde_json::from_slice(&std::fs::read(p).ok()?).ok() };
    for opts in [&["ro"][..], &["ro", "keep_cache"]] {
        let (_dir, src) = crate::support::temp_path("grow.b2nd");
        crate::support::int64_1000_b2nd(&py, &src);
        let m = Mount::daemon(&src, opts);
        let zarray = m.path("zarr2/grow/.zarray");
        assert_eq!(
            json(zarray.clone()).unwrap()["shape"],
            serde_json::json!([1000])
        );
        let md = json(m.path("zarr2/.zmetadata")).unwrap();
        assert_eq!(
            md["metadata"]["grow/.zarray"]["shape"],
            serde_json::json!([1000])
        );
        let first = std::fs::read(m.path("zarr2/grow/0")).unwrap();
        assert_eq!(first[8..16], 1i64.to_le_bytes());
        crate::support::grow_to_1500(&py, &src, "metres");
        let grown = |p: PathBuf, key: &str| {
            json(p).is_some_and(|v| {
                let v = if key.is_empty() {
                    v
                } else {
                    v["metadata"][key].clone()
                };
                v["shape"] == serde_json::json!([1500])
            })
        };
        // The follower's invalidations reach the kernel after the open that followed the
        // change: every file read until they have (a stale size cuts a file short).
        let shown = || {
            grown(zarray.clone(), "")
                && grown(m.path("zarr2/.zmetadata"), "grow/.zarray")
                && json(m.path("zarr2/grow/.zattrs")).is_some_and(|a| a["units"] == "metres")
        };
        assert!(
            crate::support::wait_until(std::time::Duration::from_secs(10), shown),
            "{opts:?}: the new shape and attributes never showed: {:?} {:?}",
            std::fs::read_to_string(&zarray),
            std::fs::read_to_string(m.path("zarr2/.zmetadata"))
        );
        let last = std::fs::read(m.path("zarr2/grow/4")).unwrap();
        let want: Vec<u8> = (1200..1500i64)
            .flat_map(|i| (i * 3).to_le_bytes())
            .collect();
        assert_eq!(last, want, "{opts:?}");
        let first = std::fs::read(m.path("zarr2/grow/0")).unwrap();
        assert_eq!(first[8..16], 3i64.to_le_bytes(), "{opts:?}");
        m.umount();
    }
}

/// A read-only mount keeps entries for a day, but a v2 chunk object's name is its rank in the
/// chunk grid: after another writer grows an array along its second axis (grid `[2, 2]` to
/// `[2, 3]`), the name `1.0` must give chunk (1, 0) of the new grid, not the object the kernel
/// cached under that name (rank 2, now chunk (0, 2)). Before the fix (review, session 31)
/// the kernel answered `1.0` from its entry cache with the old rank's inode.
#[test]
fn a_read_only_mount_names_v2_chunks_by_the_new_grid_after_another_writers_resize() {
    let t = "a_read_only_mount_names_v2_chunks_by_the_new_grid_after_another_writers_resize";
    let py = or_skip!(fuse_and_python(t));
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(16, dtype=np.int64).reshape(4, 4), chunks=(2, 2), \
        blocks=(2, 2), urlpath=sys.argv[1], mode='w')\n";
    let widen = "import sys, numpy as np, blosc2\n\
        a = blosc2.open(sys.argv[1], mode='a')\n\
        a.resize((4, 6))\n\
        a[:] = np.arange(24, dtype=np.int64).reshape(4, 6) + 100\n";
    let (_dir, src) = crate::support::temp_path("wide.b2nd");
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let m = Mount::daemon(&src, &["ro"]);
    let chunk = |key: &str| std::fs::read(m.path(&format!("zarr2/wide/{key}"))).unwrap();
    let items = |v: &[i64]| -> Vec<u8> { v.iter().flat_map(|i| i.to_le_bytes()).collect() };
    // Chunk (1, 0) of the 4x4 grid: rows 2-3, columns 0-1.
    assert_eq!(chunk("1.0"), items(&[8, 9, 12, 13]));
    run_python(&py, &["-c", widen, src.to_str().unwrap()]);
    // Chunk (1, 0) of the 4x6 array: rows 2-3, columns 0-1, of the new values.
    let want = items(&[112, 113, 118, 119]);
    assert!(
        crate::support::wait_until(std::time::Duration::from_secs(10), || chunk("1.0") == want),
        "zarr2/wide/1.0 still reads {:?}",
        chunk("1.0")
    );
    assert_eq!(chunk("0.2"), items(&[104, 105, 110, 111]));
    m.umount();
}
