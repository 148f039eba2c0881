//! The `zarr/` view of real mounts read and written by the users' Zarr tools, against the
//! reference libraries: zarr-python 3.4 (Python 3.12), xarray (`open_zarr`, consolidated),
//! `dask.array.from_zarr` and TensorStore's `zarr3` driver in `.venv-zarr`, zarr-python 3.1
//! in `.venv-zarr311` (Python 3.11); python-blosc2 and bcolz in `.venv` made the sources and
//! read them back. The Python side is `scripts/oracle/zarr_cases.py` (sources, references,
//! crash checks; reference venv) and `scripts/oracle/zarr_readers.py` (the readers and writers;
//! Zarr venvs). Also: `dask.distributed` with two worker processes over the view of a source
//! on a local S3 server (moto), zarr-python and xarray region writes read back by
//! python-blosc2 and bcolz, a read-only mount refusing them, and SIGKILL of the daemon during
//! such writes leaving every chunk old or new. `zarr_readers/strict.rs`: the strict-JSON
//! view (`-o zarr_strict_json`) with TensorStore and strict parsers; `zarr_readers/fill.rs`: xarray
//! on float arrays with a CF `_FillValue` attribute; `zarr_readers/dirs.rs`: xarray on a
//! directory of `.b2nd` files; `zarr_readers/create.rs`: new arrays and groups made by
//! zarr-python and xarray; `zarr_readers/v2.rs`: the Zarr v2 view `zarr2/` with
//! zarr-python 2.18 (`.venv-zarr2`, Python 3.10) and xarray on it, and with zarr-python 3.4
//! told `zarr_format=2`. Without a Zarr venv the tests print SKIP (run
//! scripts/setup.sh), and fail under `B2FS_REQUIRE_PYTHON=1`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

mod create;
mod dirs;
mod fill;
mod strict;
mod v2;

use crate::support::crash::{Rng, kill_delay, kill_mount_after};
use crate::support::{Mount, fuse_and_python, python_says, repo_root, run_python};

/// The interpreter of a Zarr venv (`B2FS_<ENV>` or the repository's `DIR`) that imports
/// `imports`; `None` after a visible SKIP line, or a panic under `B2FS_REQUIRE_PYTHON=1`. The
/// import probe (3.3 CPU-s for `.venv-zarr`) runs once per venv and test process.
fn zarr_python(test: &str, env: &str, dir: &str, imports: &str) -> Option<PathBuf> {
    static FOUND: Mutex<Vec<(String, Option<PathBuf>)>> = Mutex::new(Vec::new());
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    let py = match found.iter().find(|(d, _)| d == dir) {
        Some((_, py)) => py.clone(),
        None => {
            let candidates = [
                std::env::var_os(env).map(PathBuf::from),
                Some(repo_root().join(dir).join("bin/python")),
            ];
            let py = candidates.into_iter().flatten().find(|py| {
                Command::new(py)
                    .args(["-c", &format!("import {imports}")])
                    .output()
                    .is_ok_and(|o| o.status.success())
            });
            found.push((dir.to_string(), py.clone()));
            py
        }
    };
    drop(found);
    if py.is_some() {
        return py;
    }
    if std::env::var("B2FS_REQUIRE_PYTHON").is_ok_and(|v| v == "1" || v == "true") {
        panic!("{test}: B2FS_REQUIRE_PYTHON=1 but no {dir} with {imports} (run scripts/setup.sh)");
    }
    eprintln!("SKIP {test}: no {dir} with {imports} (run scripts/setup.sh)");
    None
}

/// `.venv-zarr`: zarr-python 3.4, xarray, dask, distributed, TensorStore, python-blosc2.
fn zarr34(test: &str) -> Option<PathBuf> {
    zarr_python(
        test,
        "B2FS_ZARR_PYTHON",
        ".venv-zarr",
        "zarr, xarray, dask.array, distributed, tensorstore, blosc2",
    )
}

/// `.venv-zarr311`: zarr-python 3.1 on Python 3.11.
fn zarr31(test: &str) -> Option<PathBuf> {
    zarr_python(test, "B2FS_ZARR311_PYTHON", ".venv-zarr311", "zarr")
}

/// Runs `py script args...` in the repository; `(success, stdout, stderr)`.
fn run(py: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(py)
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("spawn python");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every source of `zarr_cases.py gen`, each mounted with `opts` (`ro`, and `zarr_shards`
/// for the sharded view); the cases with `"mnt"` (and `"sharded"`) set, written to
/// `cases.json` in the returned directory.
fn mounted_cases(py: &Path, opts: &[&str]) -> (tempfile::TempDir, Vec<Mount>, PathBuf, usize) {
    let dir = tempfile::tempdir().unwrap();
    let out = run_python(
        py,
        &[
            "scripts/oracle/zarr_cases.py",
            "gen",
            dir.path().join("src").to_str().unwrap(),
        ],
    );
    let mut cases: Vec<Value> = serde_json::from_slice(&out).expect("case list");
    assert!(cases.len() >= 25, "{} cases", cases.len());
    let mut mounts = Vec::new();
    for c in &mut cases {
        let m = Mount::daemon(Path::new(c["source"].as_str().unwrap()), opts);
        c["mnt"] = Value::from(m.mp.to_str().unwrap());
        c["sharded"] = Value::from(opts.contains(&"zarr_shards"));
        mounts.push(m);
    }
    let path = dir.path().join("cases.json");
    std::fs::write(&path, serde_json::to_vec(&cases).unwrap()).unwrap();
    let n = cases.len();
    (dir, mounts, path, n)
}

/// [`mounted_cases`] with `opts`, then `f` of the cases' list; the mounts are unmounted after.
fn with_mounted_cases<R>(py: &Path, opts: &[&str], f: impl FnOnce(&Path) -> R) -> R {
    let (_dir, mounts, cases, _) = mounted_cases(py, opts);
    let r = f(&cases);
    for m in &mounts {
        m.umount();
    }
    r
}

/// Runs `SCRIPT read CASES READERS` with `zpy` and asserts no problem (`who` disagree
/// otherwise); its report.
fn read_cases(
    test: &str,
    zpy: &Path,
    script: &str,
    who: &str,
    cases: &Path,
    readers: &str,
) -> Value {
    let t0 = Instant::now();
    let (ok, out, err) = run(zpy, &[script, "read", cases.to_str().unwrap(), readers]);
    assert!(ok, "{test}: {who} disagree:\n{out}\n{err}");
    eprintln!("{test}: {:.1} s\n{out}", t0.elapsed().as_secs_f64());
    serde_json::from_str(&out).expect("the readers' report")
}

/// Runs `zarr_readers.py read CASES READERS` with `zpy` and asserts no problem; its report.
fn read_all(test: &str, zpy: &Path, cases: &Path, readers: &str) -> Value {
    let script = "scripts/oracle/zarr_readers.py";
    read_cases(test, zpy, script, "the Zarr readers", cases, readers)
}

#[test]
fn zarr_python_34_xarray_dask_tensorstore_read_every_source_like_the_references() {
    let t = "zarr_python_34_xarray_dask_tensorstore_read_every_source_like_the_references";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    with_mounted_cases(&py, &["ro"], |cases| {
        read_all(t, &zpy, cases, "zarr,xarray,dask,tensorstore")
    });
}

/// `-o zarr_shards`: every b2nd array whose blocks tile its chunks shows as shards of its
/// chunks with its blocks as inner chunks (its objects the chunk as stored plus an index),
/// and zarr-python 3.4 and 3.1 (whole arrays and windows), xarray, Dask and TensorStore read
/// every case exactly as the references; at least three arrays are sharded.
#[test]
fn zarr_shards_view_reads_every_source_like_the_references() {
    let t = "zarr_shards_view_reads_every_source_like_the_references";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    with_mounted_cases(&py, &["ro", "zarr_shards"], |cases| {
        let report = read_all(t, &zpy, cases, "zarr,xarray,dask,tensorstore");
        let sharded = report["checked"]["sharded"].as_u64().unwrap_or(0);
        assert!(
            sharded >= 3,
            "{t}: only {sharded} arrays shown sharded: {report}"
        );
        if let Some(zpy31) = zarr31(t) {
            read_all(t, &zpy31, cases, "zarr");
        }
    });
}

#[test]
fn zarr_python_31_on_python_311_reads_every_source_like_the_references() {
    let t = "zarr_python_31_on_python_311_reads_every_source_like_the_references";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr31(t));
    with_mounted_cases(&py, &["ro"], |cases| read_all(t, &zpy, cases, "zarr"));
}

/// A 2-D float64 source made by `script cmd OUT` with the reference venv, in `dir`.
fn source(py: &Path, dir: &Path, script: &str, cmd: &str, name: &str) -> PathBuf {
    let src = dir.join(name);
    run_python(py, &[script, cmd, src.to_str().unwrap()]);
    src
}

/// What a `zarr_readers.py` child printed: its stdout, which tests check, and its stderr,
/// which every failed check prints too (`{said}` shows both).
struct Said {
    out: String,
    err: String,
}

impl std::fmt::Display for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\n--- stdout:\n{}\n--- stderr:\n{}", self.out, self.err)
    }
}

/// Runs `zarr_readers.py CMD MNT ARGS...` with `zpy` on the mount `m` and asserts that it
/// succeeded; what it printed.
fn readers_on(zpy: &Path, cmd: &str, m: &Mount, args: &[&str]) -> Said {
    let mp = m.mp.to_str().unwrap();
    let all = [&["scripts/oracle/zarr_readers.py", cmd, mp][..], args].concat();
    let (ok, out, err) = run(zpy, &all);
    let said = Said { out, err };
    assert!(ok, "zarr_readers.py {cmd} {args:?}: {said}");
    said
}

/// `name` in `dir`, made by python-blosc2 (the reference venv) running the Python lines
/// `make` after `import sys, numpy as np, blosc2`, the source's path in `sys.argv[1]`.
fn b2nd(py: &Path, dir: &Path, name: &str, make: &str) -> PathBuf {
    let src = dir.join(name);
    let code = format!("import sys, numpy as np, blosc2\n{make}");
    run_python(py, &["-c", &code, src.to_str().unwrap()]);
    src
}

/// `sst.b2nd` in `dir`: a 6x10 float64 python-blosc2 b2nd (item i holding i, chunks (3, 10))
/// whose vlmeta holds `units` "K" and what the Python lines `vlmeta` set (`a`: the array).
fn sst(py: &Path, dir: &Path, vlmeta: &str) -> PathBuf {
    let make = format!(
        "a = blosc2.asarray(np.arange(60, dtype='f8').reshape(6, 10), chunks=(3, 10), \
         urlpath=sys.argv[1], mode='w')\n\
         a.vlmeta['units'] = 'K'\n{vlmeta}"
    );
    b2nd(py, dir, "sst.b2nd", &make)
}

#[test]
fn zarr_region_writes_of_zarr_python_and_xarray_reach_the_source() {
    let t = "zarr_region_writes_of_zarr_python_and_xarray_reach_the_source";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let (z, n) = (
        "scripts/oracle/zarr_cases.py",
        "scripts/oracle/npy_check.py",
    );
    // (source, its array's name in zarr/): slab blocks, blocks that are not slabs, bcolz.
    let sources = [
        (source(&py, dir.path(), z, "slab2d", "slab.b2nd"), "slab"),
        (source(&py, dir.path(), n, "gen2d", "blocks.b2nd"), "blocks"),
        (source(&py, dir.path(), n, "genbcolz2d", "bc2d"), "bc2d"),
    ];
    for (src, name) in &sources {
        let m = Mount::daemon(src, &[]);
        let expect = dir.path().join(format!("{name}.expect.npy"));
        let said = readers_on(&zpy, "write", &m, &[name, expect.to_str().unwrap()]);
        assert_eq!(said.out.trim(), "ok 5", "{name}: {said}");
        m.umount();
        let says = python_says(
            &py,
            &[n, "same", src.to_str().unwrap(), expect.to_str().unwrap()],
        );
        assert_eq!(
            says, "same",
            "{name}: the reference does not read the writes"
        );
    }
}

/// `-o zarr_shards` on a read-write mount: zarr-python (3.4 and 3.1) and xarray write whole
/// shards (a temp file renamed over the shard, inner chunks of the fill value left out, a
/// shard of fill values removed): the same regions as the plain view's test, by shard,
/// reach the source as python-blosc2 reads it.
#[test]
fn zarr_shard_writes_of_zarr_python_and_xarray_reach_the_source() {
    let t = "zarr_shard_writes_of_zarr_python_and_xarray_reach_the_source";
    let py = or_skip!(fuse_and_python(t));
    let dir = tempfile::tempdir().unwrap();
    let (z, n) = (
        "scripts/oracle/zarr_cases.py",
        "scripts/oracle/npy_check.py",
    );
    // (The zarr 3.1 venv has no xarray: zarr-python's four writes only.)
    for (zpy, version, steps) in [(zarr34(t), "3.4", 5), (zarr31(t), "3.1", 4)] {
        let zpy = or_skip!(zpy);
        // (source, its array's name in zarr/): slab blocks, then blocks narrower than the
        // chunk; edge chunks on both axes.
        let sources = [
            (source(&py, dir.path(), z, "slab2d", "slab.b2nd"), "slab"),
            (source(&py, dir.path(), z, "tiled2d", "tiled.b2nd"), "tiled"),
        ];
        for (src, name) in &sources {
            let m = Mount::daemon(src, &["zarr_shards"]);
            let expect = dir.path().join(format!("{name}.expect.npy"));
            let mp = m.mp.to_str().unwrap();
            let args = ["scripts/oracle/zarr_readers.py", "write", mp, name];
            let (ok, out, err) = run(&zpy, &[&args[..], &[expect.to_str().unwrap()]].concat());
            assert!(ok, "zarr {version}, {name}: {out}{err}");
            let said = format!("ok {steps} sharded");
            assert_eq!(out.trim(), said, "zarr {version}, {name}: stderr:\n{err}");
            // Every inner chunk of shard (0, 0) of the fill value: zarr-python removes it.
            let (ok, out, err) = run(
                &zpy,
                &[
                    "-c",
                    "import sys, zarr, numpy as np; \
                     z = zarr.open_array(sys.argv[1] + '/zarr/' + sys.argv[2], mode='r+'); \
                     s0, s1 = z.shards; z[:s0, :s1] = 0; \
                     assert not z[:s0, :s1].any(); print(s0, s1)",
                    mp,
                    name,
                ],
            );
            assert!(ok, "zarr {version}, {name}: {out}{err}");
            m.umount();
            let mut want = python_says(
                &py,
                &[
                    "-c",
                    "import sys, numpy as np; \
                     a = np.load(sys.argv[1]); s0, s1 = map(int, sys.argv[2:4]); \
                     a[:s0, :s1] = 0; np.save(sys.argv[1], a); print('saved')",
                    expect.to_str().unwrap(),
                    out.split_whitespace().next().unwrap(),
                    out.split_whitespace().nth(1).unwrap(),
                ],
            );
            assert_eq!(want, "saved");
            want = python_says(
                &py,
                &[n, "same", src.to_str().unwrap(), expect.to_str().unwrap()],
            );
            assert_eq!(
                want, "same",
                "zarr {version}, {name}: the reference does not read the writes"
            );
        }
    }
}

/// TensorStore writes (its file kvstore renames a locked temp file over the object and closes
/// the temp file's descriptor after the rename) on both layouts of the view reach the source
/// as python-blosc2 reads it.
#[test]
fn tensorstore_writes_through_both_layouts_reach_the_source() {
    let t = "tensorstore_writes_through_both_layouts_reach_the_source";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    for opts in [&[][..], &["zarr_shards"][..]] {
        let src = source(
            &py,
            dir.path(),
            "scripts/oracle/zarr_cases.py",
            "tiled2d",
            "t.b2nd",
        );
        let m = Mount::daemon(&src, opts);
        let expect = dir.path().join("t.expect.npy");
        let args = [
            "scripts/oracle/zarr_readers.py",
            "tswrite",
            m.mp.to_str().unwrap(),
            "t",
        ];
        let (ok, out, err) = run(&zpy, &[&args[..], &[expect.to_str().unwrap()]].concat());
        assert!(ok, "{opts:?}: {out}{err}");
        assert_eq!(out.trim(), "ok", "{opts:?}: stderr:\n{err}");
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
        assert_eq!(
            says, "same",
            "{opts:?}: the reference does not read the writes"
        );
    }
}

#[test]
fn zarr_writes_on_a_read_only_mount_fail_with_erofs_and_change_nothing() {
    let t = "zarr_writes_on_a_read_only_mount_fail_with_erofs_and_change_nothing";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let src = source(
        &py,
        dir.path(),
        "scripts/oracle/zarr_cases.py",
        "slab2d",
        "slab.b2nd",
    );
    let before = std::fs::read(&src).unwrap();
    let m = Mount::daemon(&src, &["ro"]);
    let said = readers_on(&zpy, "readonly", &m, &["slab"]);
    assert_eq!(said.out.trim(), "refused 3", "{said}");
    m.umount();
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
}

#[test]
fn zarr_sigkill_during_zarr_python_writes_leaves_every_chunk_old_or_new() {
    let t = "zarr_sigkill_during_zarr_python_writes_leaves_every_chunk_old_or_new";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let runs: usize = crate::support::env_or("B2FS_ZARR_CRASH_RUNS", 4);
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let pristine = root.join("pristine");
    crate::support::oracle(
        &py,
        &[&"scripts/oracle/zarr_cases.py", &"crashgen", &pristine],
    );
    let mut rng = Rng::per_run(7);
    let (mut olds, mut news) = (0, 0);
    for r in 0..runs {
        let run = root.join(format!("run{r}"));
        std::fs::create_dir(&run).unwrap();
        let src = run.join("src.b2nd");
        std::fs::copy(pristine.join("src.b2nd"), &src).unwrap();
        let mut m = Mount::foreground(&src, &run.join("log"));
        // The writer opens the array, says "ready", then writes every chunk; the daemon is
        // killed at a random moment of that.
        let mut writer = Command::new(&zpy)
            .args([
                "scripts/oracle/zarr_readers.py",
                "crashwrite",
                m.mp.to_str().unwrap(),
                "src",
            ])
            .arg(pristine.join("new.npy"))
            .current_dir(repo_root())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(writer.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
        let done = std::thread::spawn(move || {
            let rest: Vec<String> = lines.map_while(Result::ok).collect();
            let _ = writer.wait();
            rest.iter().any(|l| l == "done")
        });
        let delay = kill_delay(&mut rng, r, 0, 400);
        let finished = kill_mount_after(&mut m, delay, done);
        let says = crate::support::oracle_says(
            &py,
            &[
                &"scripts/oracle/zarr_cases.py",
                &"crashcheck",
                &src,
                &pristine,
            ],
        );
        let n: Vec<usize> = says
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        assert_eq!(n.len(), 2, "{says}");
        if finished {
            eprintln!("{t}: run {r}: the writer finished before the kill ({says})");
        }
        olds += n[0];
        news += n[1];
        drop(m);
    }
    eprintln!("{t}: {runs} runs, chunks old {olds}, new {news}");
}

#[cfg(feature = "remote")]
#[test]
fn zarr_dask_distributed_two_workers_over_a_mounted_s3_source() {
    use crate::support::remote::{BUCKET, moto, put_object};

    let t = "zarr_dask_distributed_two_workers_over_a_mounted_s3_source";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    let src = source(
        &py,
        dir.path(),
        "scripts/oracle/npy_check.py",
        "gen2d",
        "remote2d.b2nd",
    );
    put_object(&moto, "remote2d.b2nd", &std::fs::read(&src).unwrap(), true);
    let url = format!("s3://{BUCKET}/remote2d.b2nd");
    let ep = format!("endpoint={},no_sign_request", moto.url);
    let m = Mount::daemon(Path::new(&url), &[ep.as_str()]);
    let t0 = Instant::now();
    let said = readers_on(
        &zpy,
        "distributed",
        &m,
        &["remote2d", src.to_str().unwrap()],
    );
    assert!(said.out.starts_with("ok "), "{said}");
    eprintln!(
        "{t}: {} ({:.1} s)",
        said.out.trim(),
        t0.elapsed().as_secs_f64()
    );
    m.umount();
}

/// Attribute edits as zarr-python and xarray make them (a new `zarr.json` in a temp file
/// renamed over the old one) reach the source's vlmeta, as python-blosc2 reads it: an
/// array's, a group's (its `__vlmeta__` carrier, made for a group that had none) and the
/// store's own; a resize of an axis but the first is refused (EPERM) and does not change
/// the source.
#[test]
fn zarr_attribute_edits_of_zarr_python_and_xarray_reach_the_source() {
    let t = "zarr_attribute_edits_of_zarr_python_and_xarray_reach_the_source";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let z = "scripts/oracle/zarr_cases.py";
    let src = source(&py, dir.path(), z, "attrgen", "attrs.b2z");
    let check = |src: &Path| -> Value {
        serde_json::from_str(&python_says(&py, &[z, "attrcheck", src.to_str().unwrap()])).unwrap()
    };
    let before = check(&src);
    assert_eq!(before["/"], serde_json::json!({"title": "demo"}));
    assert_eq!(before["/ocean"], serde_json::json!({"source": "model"}));
    let m = Mount::daemon(&src, &[]);
    let said = readers_on(&zpy, "attrs", &m, &[]);
    assert_eq!(
        said.out.lines().collect::<Vec<_>>(),
        [
            "array ok",
            r#"xarray ok {"history": "xarray", "source": "model"}"#,
            "resize refused",
            "no carrier ok",
            r#"view {"/": {"title": "edited"}, "/ocean/sst": {"scale": [1, 2.5], "units": "degC"}}"#,
        ],
        "{said}"
    );
    m.umount();
    let after = check(&src);
    assert_eq!(after["/"], serde_json::json!({"title": "edited"}));
    assert_eq!(
        after["/ocean"],
        serde_json::json!({"source": "model", "history": "xarray"})
    );
    assert_eq!(
        after["/ocean/sst"],
        serde_json::json!({"units": "degC", "scale": [1, 2.5]})
    );
    assert_eq!(before["/atm"], serde_json::json!({}));
    assert_eq!(after["/atm"], serde_json::json!({"x": 1}));
    assert_eq!(after["/atm/wind"], before["/atm/wind"]);
    assert_eq!(after["shape"], serde_json::json!([6, 10]));
}

/// Resizes as zarr-python (`append`, `resize`) and xarray (`to_zarr(append_dim=...)`) make
/// them on a read-write mount of a python-blosc2 1-D b2nd: each reader sees the new length
/// and values, python-blosc2 reads the source back with them, and nothing is refused.
#[test]
fn zarr_appends_of_zarr_python_and_xarray_resize_the_source() {
    let t = "zarr_appends_of_zarr_python_and_xarray_resize_the_source";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let make = "a = blosc2.asarray(np.arange(1000, dtype=np.float64), chunks=(256,), \
        blocks=(64,), urlpath=sys.argv[1], mode='w')\n\
        a.vlmeta['_ARRAY_DIMENSIONS'] = ['time']\n";
    let src = b2nd(&py, dir.path(), "series.b2nd", make);
    let m = Mount::daemon(&src, &[]);
    let said = readers_on(&zpy, "append", &m, &["series"]);
    assert_eq!(
        said.out.lines().collect::<Vec<_>>(),
        ["append 1300 True", "xarray 1350 True", "resize 1200 True"],
        "{said}"
    );
    let log = crate::support::b2fs()
        .args(["log", m.mp.to_str().unwrap()])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout).into_owned();
    m.umount();
    assert!(log.contains("# 0 refusals"), "{log}");
    let back = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2, numpy as np; a = blosc2.open(sys.argv[1]); \
             print(a.shape, bool((a[...] == np.arange(1200)).all()), a.vlmeta['_ARRAY_DIMENSIONS'])",
            src.to_str().unwrap(),
        ],
    );
    assert_eq!(back, "(1200,) True ['time']");
}

/// NaN and infinite attributes set with zarr-python through a read-write mount's view
/// (zarr-python writes them bare, `NaN`, `Infinity`, `-Infinity`, which strict JSON lacks)
/// are committed as floats: a fresh zarr-python reader of the view reads them back, and
/// python-blosc2 reads them from the source after the unmount (`math.isnan`, `inf`).
#[test]
fn zarr_nan_attributes_of_zarr_python_reach_the_source_as_floats() {
    let t = "zarr_nan_attributes_of_zarr_python_reach_the_source_as_floats";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let src = sst(&py, dir.path(), "");
    let m = Mount::daemon(&src, &[]);
    let said = readers_on(&zpy, "nanattrs", &m, &["sst"]);
    assert_eq!(said.out.trim(), "view True inf -inf K", "{said}");
    m.umount();
    let check = "import sys, math, blosc2\n\
        a = blosc2.open(sys.argv[1])\n\
        v = a.vlmeta\n\
        print(math.isnan(v['x']), v['hot'], v['cold'], v['units'])\n";
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        "True inf -inf K"
    );
}

/// xarray appending along a leading `time` dimension of a 3-D python-blosc2 b2nd (chunks
/// that blocks do not divide, the last row of chunks partial) through a read-write mount:
/// a fresh xarray reader sees the new steps, and python-blosc2 reads the source back with
/// them.
#[test]
fn xarray_appends_along_time_of_a_3d_b2nd_reach_the_source() {
    let t = "xarray_appends_along_time_of_a_3d_b2nd_reach_the_source";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let make = "a = blosc2.asarray(np.arange(10 * 12 * 10, dtype=np.float32).reshape(10, 12, 10), \
        chunks=(4, 6, 5), blocks=(3, 4, 5), urlpath=sys.argv[1], mode='w')\n\
        a.vlmeta['_ARRAY_DIMENSIONS'] = ['time', 'y', 'x']\n";
    let src = b2nd(&py, dir.path(), "cube.b2nd", make);
    let m = Mount::daemon(&src, &[]);
    let said = readers_on(&zpy, "append3d", &m, &["cube"]);
    assert_eq!(said.out.trim(), "xarray 17 True", "{said}");
    m.umount();
    let back = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2, numpy as np; a = blosc2.open(sys.argv[1]); \
             ref = np.arange(17 * 12 * 10, dtype=np.float32).reshape(17, 12, 10); \
             print(a.shape, bool((a[...] == ref).all()))",
            src.to_str().unwrap(),
        ],
    );
    assert_eq!(back, "(17, 12, 10) True");
}
