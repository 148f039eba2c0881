//! Resizes through the Zarr view (`src/tree/zarr/resize.rs`): a `zarr.json` renamed over the
//! old one with another length of a 1-D array resizes the source in one commit, as
//! zarr-python's `resize`/`append` and xarray's `append_dim` do; checked by python-blosc2 and
//! bcolz reading the sources back.

use b2fs::tree::Tree;
use serde_json::{Value, json};

use super::writes::rename_json_over;
use super::{ino, json_at};
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says, run_python};

/// `doc` with shape `[len]`.
fn with_len(doc: &Value, len: u64) -> Vec<u8> {
    let mut d = doc.clone();
    d["shape"] = json!([len]);
    serde_json::to_vec(&d).unwrap()
}

/// Writes `values` (little-endian float64) at item `at` of Zarr array `dir` through its chunk
/// objects (of `per_chunk` items), as a Zarr writer does after an append.
fn write_items(t: &Tree, dir: &str, per_chunk: u64, at: u64, values: &[f64]) {
    for (k, v) in values.iter().enumerate() {
        let i = at + k as u64;
        let obj = ino(t, &format!("{dir}/c/{}", i / per_chunk));
        let fh = t.open(obj, libc::O_WRONLY).unwrap();
        t.write(obj, fh, (i % per_chunk) * 8, &v.to_le_bytes())
            .unwrap();
        t.release(fh).unwrap();
    }
}

/// A 1-D b2nd of python-blosc2 (1,000 float64, chunks of 256: the last one padded) grows
/// within its last chunk, across chunks, shrinks mid-chunk and to a chunk boundary, each
/// through a `zarr.json` rename: python-blosc2 reads the new shape, the old values kept,
/// zeros in the new items (whatever the padding held), and values written through the
/// chunk objects after a growth; the view shows the new shape and chunk count at once.
/// An N-dim array's resize stays EPERM with the source byte-identical.
#[test]
fn zarr_json_shape_changes_resize_a_1d_b2nd_as_python_blosc2_reads_it() {
    let py = or_skip!(python(
        "zarr_json_shape_changes_resize_a_1d_b2nd_as_python_blosc2_reads_it"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("temps.b2nd");
    // Padding filled with non-zeros: b2nd pads the last chunk with whatever its writer had.
    let make = "import sys, numpy as np, blosc2\n\
        a = blosc2.asarray(np.arange(1024, dtype=np.float64) + 0.5, chunks=(256,), \
        blocks=(64,), urlpath=sys.argv[1], mode='w')\n\
        a.resize((1000,))\n\
        a.vlmeta['units'] = 'K'\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let read = |src: &std::path::Path| -> Value {
        let out = python_says(
            &py,
            &[
                "-c",
                "import sys, json, blosc2; a = blosc2.open(sys.argv[1]); \
                 print(json.dumps({'shape': list(a.shape), 'v': a[...].tolist(), \
                 'units': a.vlmeta['units']}))",
                src.to_str().unwrap(),
            ],
        );
        serde_json::from_str(&out).unwrap()
    };
    let expect = |len: usize, kept: usize| -> Vec<f64> {
        (0..len)
            .map(|i| if i < kept { i as f64 + 0.5 } else { 0.0 })
            .collect()
    };
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let arr = "zarr/temps";
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    assert_eq!(doc["shape"], json!([1000]));
    // Within the last chunk: the padding's old values become zeros.
    rename_json_over(&t, arr, &with_len(&doc, 1010)).unwrap();
    let got = read(&src);
    assert_eq!(got["shape"], json!([1010]));
    assert_eq!(got["v"], json!(expect(1010, 1000)));
    assert_eq!(got["units"], "K", "attributes kept");
    assert_eq!(
        json_at(&t, &format!("{arr}/zarr.json"))["shape"],
        json!([1010])
    );
    // Across chunks, then values written through the new chunk objects (as an append does).
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    rename_json_over(&t, arr, &with_len(&doc, 1300)).unwrap();
    assert_eq!(read(&src)["v"], json!(expect(1300, 1000)));
    assert_eq!(
        super::names(&t, &format!("{arr}/c")),
        ["0", "1", "2", "3", "4", "5"]
    );
    write_items(&t, arr, 256, 1290, &[7.0, 8.0]);
    let got = read(&src);
    let mut want = expect(1300, 1000);
    want[1290] = 7.0;
    want[1291] = 8.0;
    assert_eq!(got["v"], json!(want));
    // Shrinking mid-chunk, then to a chunk boundary, then growing by one item: the items
    // cut before come back as zeros.
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    rename_json_over(&t, arr, &with_len(&doc, 700)).unwrap();
    assert_eq!(read(&src)["v"], json!(expect(700, 700)));
    assert_eq!(super::names(&t, &format!("{arr}/c")), ["0", "1", "2"]);
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    rename_json_over(&t, arr, &with_len(&doc, 512)).unwrap();
    assert_eq!(read(&src)["v"], json!(expect(512, 512)));
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    rename_json_over(&t, arr, &with_len(&doc, 513)).unwrap();
    assert_eq!(read(&src)["v"], json!(expect(513, 512)));
    // The same shape and new attributes: both kept.
    let mut doc = json_at(&t, &format!("{arr}/zarr.json"));
    doc["attributes"] = json!({"units": "C"});
    rename_json_over(&t, arr, &with_len(&doc, 600)).unwrap();
    let got = read(&src);
    assert_eq!(got["shape"], json!([600]));
    assert_eq!(got["units"], "C");
    drop(t);

    // An N-dim array: EPERM, nothing changed.
    let src2 = dir.path().join("grid.b2nd");
    let make2 = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(600, dtype=np.float32).reshape(20, 30), chunks=(10, 15), \
        urlpath=sys.argv[1], mode='w')\n";
    run_python(&py, &["-c", make2, src2.to_str().unwrap()]);
    let before = std::fs::read(&src2).unwrap();
    let t = Tree::from_source(&src2, opts(true)).unwrap();
    let mut doc = json_at(&t, "zarr/grid/zarr.json");
    doc["shape"] = json!([40, 30]);
    let err = rename_json_over(&t, "zarr/grid", &serde_json::to_vec(&doc).unwrap()).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    assert!(
        std::fs::read(&src2).unwrap() == before,
        "the source changed"
    );
}

/// A bcolz carray (whose last chunk holds just its rows) resizes through the view: bcolz
/// reads the new lengths and values. A bcolz ctable's column does not (EPERM, the table
/// byte-identical): its columns share one length, which xarray's `append_dim` would grow
/// once per column.
#[test]
fn zarr_json_shape_changes_resize_bcolz_carrays_but_not_ctable_columns() {
    let py = or_skip!(python(
        "zarr_json_shape_changes_resize_bcolz_carrays_but_not_ctable_columns"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("c.bcolz");
    let make = "import sys, numpy as np, bcolz\n\
        bcolz.carray(np.arange(250, dtype=np.float64), chunklen=100, rootdir=sys.argv[1], \
        mode='w').flush()\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let read = |src: &std::path::Path| -> Vec<f64> {
        let out = python_says(
            &py,
            &[
                "-c",
                "import sys, json, bcolz; print(json.dumps(bcolz.open(sys.argv[1])[:].tolist()))",
                src.to_str().unwrap(),
            ],
        );
        serde_json::from_str(&out).unwrap()
    };
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let arr = "zarr/c.bcolz";
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    assert_eq!(doc["shape"], json!([250]));
    rename_json_over(&t, arr, &with_len(&doc, 420)).unwrap();
    let mut want: Vec<f64> = (0..420)
        .map(|i| if i < 250 { i as f64 } else { 0.0 })
        .collect();
    assert_eq!(read(&src), want);
    write_items(&t, arr, 100, 419, &[5.0]);
    want[419] = 5.0;
    assert_eq!(read(&src), want);
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    rename_json_over(&t, arr, &with_len(&doc, 130)).unwrap();
    let want: Vec<f64> = (0..130).map(|i| i as f64).collect();
    assert_eq!(read(&src), want);
    drop(t);

    let tsrc = dir.path().join("t.bcolz");
    let make = "import sys, numpy as np, bcolz\n\
        t = bcolz.ctable(columns=[np.arange(30, dtype=np.int64), np.arange(30) * 0.5], \
        names=['a', 'b'], chunklen=8, rootdir=sys.argv[1], mode='w'); t.flush()\n";
    run_python(&py, &["-c", make, tsrc.to_str().unwrap()]);
    let files = |d: &std::path::Path| -> Vec<(std::path::PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![d.to_path_buf()];
        while let Some(p) = stack.pop() {
            for e in std::fs::read_dir(&p).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let bytes = std::fs::read(&p).unwrap();
                    out.push((p, bytes));
                }
            }
        }
        out.sort();
        out
    };
    let before = files(&tsrc);
    let t = Tree::from_source(&tsrc, opts(true)).unwrap();
    let a = json_at(&t, "zarr/a/zarr.json");
    let err = rename_json_over(&t, "zarr/a", &with_len(&a, 45)).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    assert!(files(&tsrc) == before, "the table changed");
    assert_eq!(json_at(&t, "zarr/b/zarr.json")["shape"], json!([30]));
}

/// A daemon that dies at any durable step of a resize through the view (a growth across
/// chunks and within the last one, a shrink) leaves the b2nd old or new, as python-blosc2
/// reads it: never another shape, never other values.
#[test]
fn a_crash_at_every_step_of_a_resize_leaves_the_old_or_the_new_array() {
    let py = or_skip!(python(
        "a_crash_at_every_step_of_a_resize_leaves_the_old_or_the_new_array"
    ));
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(1000, dtype=np.float64), chunks=(256,), blocks=(64,), \
        urlpath=sys.argv[1], mode='w')\n";
    run_python(&py, &["-c", make, pristine.to_str().unwrap()]);
    let src = dir.path().join("s.b2nd");
    let state = || -> (u64, bool) {
        let out = python_says(
            &py,
            &[
                "-c",
                "import sys, numpy as np, blosc2; a = blosc2.open(sys.argv[1]); n = a.shape[0]; \
                 v = a[...]; m = min(n, 1000); \
                 print(n, bool((v[:m] == np.arange(m)).all() and (v[m:] == 0).all()))",
                src.to_str().unwrap(),
            ],
        );
        let (n, ok) = out.split_once(' ').unwrap();
        (n.parse().unwrap(), ok == "True")
    };
    for new_len in [1300, 1010, 700] {
        let mut crashed_at_some_step = false;
        for steps in 0.. {
            std::fs::copy(&pristine, &src).unwrap();
            let t = Tree::from_source(&src, opts(true)).unwrap();
            let doc = json_at(&t, "zarr/s/zarr.json");
            t.simulate_crash_after(steps);
            let res = rename_json_over(&t, "zarr/s", &with_len(&doc, new_len));
            drop(t);
            let (n, values_ok) = state();
            assert!(values_ok, "{new_len}, crash after {steps} steps: values");
            match res {
                Ok(()) => {
                    assert_eq!(n, new_len, "committed");
                    break;
                }
                Err(_) => {
                    crashed_at_some_step = true;
                    assert!(
                        n == 1000 || n == new_len,
                        "{new_len}, crash after {steps} steps: shape {n}"
                    );
                }
            }
            assert!(steps < 64, "the resize never completed");
        }
        assert!(crashed_at_some_step, "{new_len}: no step was cut short");
    }
}

/// A 1-D leaf of a python-blosc2 `.b2z` TreeStore resizes through the view (the store
/// rebuilt around the resized member): python-blosc2 reads the new length, the old values
/// kept and zeros after them.
#[test]
fn a_store_leaf_resizes_through_the_view() {
    let py = or_skip!(python("a_store_leaf_resizes_through_the_view"));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("st.b2z");
    let make = "import sys, numpy as np, blosc2\n\
        s = blosc2.TreeStore(sys.argv[1], mode='w')\n\
        s['/x/v'] = blosc2.asarray(np.arange(100, dtype=np.int32), chunks=(32,))\n\
        s.close()\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let doc = json_at(&t, "zarr/x/v/zarr.json");
    assert_eq!(doc["shape"], json!([100]));
    rename_json_over(&t, "zarr/x/v", &with_len(&doc, 150)).unwrap();
    drop(t);
    let out = python_says(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2; v = blosc2.TreeStore(sys.argv[1], mode='r')['/x/v'][:]; \
             print(v.shape[0], bool((v[:100] == np.arange(100)).all() and (v[100:] == 0).all()))",
            src.to_str().unwrap(),
        ],
    );
    assert_eq!(out, "150 True");
}
