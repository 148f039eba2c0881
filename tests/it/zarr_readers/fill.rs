//! The CF `_FillValue` attribute through real mounts with xarray itself
//! (`scripts/oracle/zarr_fill.py`; docs/ZARR.md, "Attributes"): xarray reads a float
//! array's only in its own spelling, which the view shows.

use serde_json::{Value, json};

use super::{run, zarr34};
use crate::support::{Mount, fuse_and_python, python_says, run_python};

/// A python-blosc2 store whose arrays hold `_FillValue` in their vlmeta as plain numbers
/// (float32 -9999.0, float64 -9999 as an integer, int16 -1, float16 -9999.9, which
/// float16 cannot hold: the view spells it rounded to float16, as xarray's encoder casts it,
/// else xarray masked nothing): `xr.open_zarr` opens the view
/// (it failed: xarray decodes a float array's `_FillValue` from base64 only, "expected str
/// or bytes") and reads what it reads from a plain Zarr store xarray wrote with the same data
/// and attributes: the fill items masked to NaN, every other value python-blosc2's, the same
/// `_FillValue` in the encoding. Then on the read-write mount a `zarr.json` written back
/// unchanged, a new `_FillValue` in xarray's spelling (its own encoder) and another array's
/// new "units": a fresh xarray reader sees them, `__attrs__` shows -1.5, and python-blosc2
/// reads plain floats after the unmount (-9999.0 kept where only "units" changed).
#[test]
fn xarray_opens_float_arrays_with_a_fill_value_and_masks_it() {
    let t = "xarray_opens_float_arrays_with_a_fill_value_and_masks_it";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let script = "scripts/oracle/zarr_fill.py";
    let src = dir.path().join("fill.b2z");
    run_python(&py, &[script, "gen", src.to_str().unwrap()]);
    let m = Mount::daemon(&src, &["ro"]);
    let (ok, out, err) = run(
        &zpy,
        &[
            script,
            "read",
            m.mp.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(ok, "{t}: {out}{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "t True 9 True",
            "d True 12 True",
            "n True 15 True",
            "h True 10 True"
        ],
        "{err}"
    );
    m.umount();

    let m = Mount::daemon(&src, &[]);
    let (ok, out, err) = run(&zpy, &[script, "edit", m.mp.to_str().unwrap()]);
    assert!(ok, "{t}: {out}{err}");
    let seen: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        seen,
        json!({"d": [-1.5, "K", 0], "t": [-9999.0, "degC", 9]}),
        "{err}"
    );
    let attrs: Value =
        serde_json::from_slice(&std::fs::read(m.mp.join("d/__attrs__")).unwrap()).unwrap();
    assert_eq!(attrs["_FillValue"], json!(-1.5));
    m.umount();
    let back: Value =
        serde_json::from_str(&python_says(&py, &[script, "check", src.to_str().unwrap()])).unwrap();
    assert_eq!(back["d"]["_FillValue"], json!(-1.5));
    assert_eq!(back["t"]["_FillValue"], json!(-9999.0));
    assert_eq!(back["t"]["units"], "degC");
    assert_eq!(back["n"]["_FillValue"], json!(-1));
}

/// A float array's `_FillValue` that xarray cannot read (a number-like string `"-9999"`, a
/// bool, another string): on a plain Zarr store zarr-python wrote, xarray fails to open the
/// whole dataset on each (as it failed on the view, which showed them as stored). The view
/// shows the number-like string as the number (xarray masks it as on a store it wrote with
/// -9999.0) and leaves the others out (xarray masks nothing); `__attrs__` keeps the stored
/// values, and a `zarr.json` written back unchanged, or with only "units" changed, keeps
/// them in the source.
#[test]
fn xarray_opens_float_arrays_whose_fill_value_it_cannot_read() {
    let t = "xarray_opens_float_arrays_whose_fill_value_it_cannot_read";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let script = "scripts/oracle/zarr_fill.py";
    let src = dir.path().join("odd.b2z");
    run_python(&py, &[script, "gen-odd", src.to_str().unwrap()]);
    let m = Mount::daemon(&src, &["ro"]);
    let (ok, out, err) = run(
        &zpy,
        &[
            script,
            "read-odd",
            m.mp.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(ok, "{t}: {out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    for (line, name) in lines.iter().zip(["s", "b", "x"]) {
        let plain = format!("plain {name} fails:");
        assert!(line.starts_with(&plain), "{line}\n{err}");
    }
    assert_eq!(
        lines[3..],
        ["s True 12 True", "b True 0 False", "x True 0 False"],
        "{err}"
    );
    let attrs: Value =
        serde_json::from_slice(&std::fs::read(m.mp.join("b/__attrs__")).unwrap()).unwrap();
    assert_eq!(attrs["_FillValue"], json!(true));
    m.umount();

    let m = Mount::daemon(&src, &[]);
    let (ok, out, err) = run(&zpy, &[script, "edit-odd", m.mp.to_str().unwrap()]);
    assert!(ok, "{t}: {out}{err}");
    m.umount();
    let back: Value = serde_json::from_str(&python_says(
        &py,
        &[script, "check", src.to_str().unwrap(), "s", "b", "x"],
    ))
    .unwrap();
    assert_eq!(back["s"]["_FillValue"], json!("-9999"));
    assert_eq!(back["b"]["_FillValue"], json!(true));
    assert_eq!(back["x"]["_FillValue"], json!("missing"));
    assert_eq!(back["s"]["units"], "degC");
    assert_eq!(back["b"]["units"], "degC");
}
