//! A directory of sources through xarray (`scripts/oracle/zarr_dirs.py`; docs/ZARR.md,
//! "Layout"): one `.b2nd` file per variable, as scientists keep them, is one xarray Dataset
//! whose variables are named after the files' stems, so that `time.b2nd` is the coordinate of
//! the dimension `time`.

use std::path::{Path, PathBuf};

use super::{run, zarr34};
use crate::support::{Mount, fuse_and_python, python_says, run_python};

/// The script that writes, checks and reads the directory.
pub(super) const SCRIPT: &str = "scripts/oracle/zarr_dirs.py";

/// python-blosc2 writes the directory of `zarr_dirs.py gen` (`run` in a new temporary
/// directory): the temporary directory, `run`, and what `zarr_dirs.py check` says of it (the
/// sum of `temp` first).
pub(super) fn b2nd_dir(py: &Path) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("run");
    std::fs::create_dir(&src).unwrap();
    let src_s = src.to_str().unwrap();
    run_python(py, &[SCRIPT, "gen", src_s]);
    let check = python_says(py, &[SCRIPT, "check", src_s]);
    (dir, src, check)
}

/// Asserts what `zarr_dirs.py read` printed (`out`) of the directory `check` describes: the
/// variables `precip` and `temp`, the coordinate `time` as dates, python-blosc2's values.
pub(super) fn assert_one_dataset(out: &str, check: &str, why: &str) {
    let sum = check.split(' ').next().unwrap().to_owned();
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "vars ['precip', 'temp']",
            "coords ['time:datetime64[ns]']",
            &format!("temp {sum}"),
            "precip 119880000",
            "time3 2000-01-04",
        ],
        "{why}"
    );
}

/// python-blosc2 writes `temp.b2nd`, `precip.b2nd` and `time.b2nd` (CF time units) into a
/// directory; `xr.open_zarr` of the mount's view gives the variables `temp` and `precip` and
/// the coordinate `time` decoded to dates (with the file names as variable names, xarray saw
/// no coordinate and three variables `temp.b2nd`, ...), with python-blosc2's values; a
/// region write of `temp` through xarray reaches `temp.b2nd`, and an append of 10 days
/// (`to_zarr(append_dim="time")`) grows the three files, the coordinate with the next dates.
#[test]
fn xarray_reads_a_directory_of_b2nd_files_as_one_dataset_with_its_coordinate() {
    let t = "xarray_reads_a_directory_of_b2nd_files_as_one_dataset_with_its_coordinate";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let (_dir, src, before) = b2nd_dir(&py);
    let script = SCRIPT;
    let src_s = src.to_str().unwrap();
    let m = Mount::daemon(&src, &[]);
    let mp = m.mp.to_str().unwrap();
    let (ok, out, err) = run(&zpy, &[script, "read", mp]);
    assert!(ok, "{t}: {out}{err}");
    assert_one_dataset(&out, &before, &err);
    let (ok, out, err) = run(&zpy, &[script, "write", mp]);
    assert!(ok, "{t}: {out}{err}");
    m.umount();
    let shapes = python_says(&py, &[script, "shapes", src_s]);
    let after = python_says(&py, &[script, "check", src_s]);
    let want = python_says(
        &py,
        &[
            "-c",
            "import numpy as np; t = np.linspace(250, 300, 240000).reshape(120, 50, 40)\
             .astype('f4'); t[:30] += 1; print(float(t.astype('f8').sum()), float(t[0, 0, 0]))",
        ],
    );
    assert_eq!(after, want, "{err}");
    assert_ne!(after, before);
    assert_eq!(
        shapes.lines().collect::<Vec<_>>(),
        [
            "temp [120, 50, 40] 299.5835266113281",
            "precip [120, 50, 40] 0.0",
            "time [120] 119.0"
        ]
    );

    let m = Mount::daemon(&src, &[]);
    let (ok, out, err) = run(&zpy, &[script, "append", m.mp.to_str().unwrap()]);
    assert!(ok, "{t}: {out}{err}");
    m.umount();
    let shapes = python_says(&py, &[script, "shapes", src_s]);
    assert_eq!(
        shapes.lines().collect::<Vec<_>>(),
        [
            "temp [130, 50, 40] 7.0",
            "precip [130, 50, 40] 3.0",
            "time [130] 129.0"
        ],
        "{err}"
    );
}
