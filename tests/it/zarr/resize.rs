//! Resizes through the Zarr view (`src/tree/zarr/resize.rs`): a `zarr.json` renamed over the
//! old one with another length of a 1-D array resizes the source in one commit, as
//! zarr-python's `resize`/`append` and xarray's `append_dim` do; checked by python-blosc2 and
//! bcolz reading the sources back.

use b2fs::tree::Tree;
use serde_json::{Value, json};

use super::metadata::{rename_json_over, temp_json_name};
use super::{ino, json_at};
use crate::support::no_prefetch as opts;
use crate::support::steps::every_commit_step;
use crate::support::{python, python_says, run_python};

/// `doc` with shape `[len]`.
fn with_len(doc: &Value, len: u64) -> Vec<u8> {
    let mut d = doc.clone();
    d["shape"] = json!([len]);
    serde_json::to_vec(&d).unwrap()
}

/// python-blosc2's 1-D float64 `arange(1000)` at `path`, chunks of 256 (the last one padded),
/// blocks of 64.
fn arange_1000(py: &std::path::Path, path: &std::path::Path) {
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(1000, dtype=np.float64), chunks=(256,), blocks=(64,), \
        urlpath=sys.argv[1], mode='w')\n";
    run_python(py, &["-c", make, path.to_str().unwrap()]);
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
}

/// The writer's new shape was made from the view it read: when another writer grows the
/// array between that read and the resize's commit (here python-blosc2 appends ten rows of
/// 7.0 and the mount follows it, as its follower thread does every second), the rename is
/// refused with ESTALE and the source keeps that writer's rows; it used to resize from the
/// old length and zero them.
#[test]
fn a_resize_refuses_a_shape_another_writer_changed_since_the_view_was_read() {
    let py = or_skip!(python(
        "a_resize_refuses_a_shape_another_writer_changed_since_the_view_was_read"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("temps.b2nd");
    arange_1000(&py, &src);
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let arr = "zarr/temps";
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    let (py2, src2) = (py.clone(), src.clone());
    t.on_zarr_resize(Box::new(move |t: &Tree| {
        let append = "import sys, numpy as np, blosc2\n\
            a = blosc2.open(sys.argv[1], mode='a')\n\
            a.resize((1010,))\n\
            a[1000:1010] = np.full(10, 7.0)\n";
        run_python(&py2, &["-c", append, src2.to_str().unwrap()]);
        assert!(t.follow_source(), "the mount follows the other writer");
    }));
    let stale = with_len(&doc, 1300);
    let err = rename_json_over(&t, arr, &stale).unwrap_err();
    assert_eq!(err.errno(), libc::ESTALE, "{err}");
    // The refused temp file stays, as after any refused rename: the writer removes it.
    t.unlink(ino(&t, arr), &temp_json_name(&stale)).unwrap();
    let out = python_says(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2; a = blosc2.open(sys.argv[1])[...]; \
             w = np.concatenate([np.arange(1000.0), np.full(10, 7.0)]); \
             print(a.shape, bool((a == w).all()) if a.shape == w.shape else a[995:1015].tolist())",
            src.to_str().unwrap(),
        ],
    );
    assert_eq!(out, "(1010,) True", "the other writer's rows are kept");
    assert_eq!(
        json_at(&t, &format!("{arr}/zarr.json"))["shape"],
        json!([1010])
    );
    // Made again from what the view shows now, the same resize goes through.
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    rename_json_over(&t, arr, &with_len(&doc, 1300)).unwrap();
    let out = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2; a = blosc2.open(sys.argv[1])[...]; \
             print(a.shape, a[1009], a[1010])",
            src.to_str().unwrap(),
        ],
    );
    assert_eq!(out, "(1300,) 7.0 0.0");
}

/// bcolz writes a ctable at `path`: columns `a` (int64 0..30) and `b` (halves), chunks of 8
/// rows.
fn make_ctable(py: &std::path::Path, path: &std::path::Path) {
    let make = "import sys, numpy as np, bcolz\n\
        t = bcolz.ctable(columns=[np.arange(30, dtype=np.int64), np.arange(30) * 0.5], \
        names=['a', 'b'], chunklen=8, rootdir=sys.argv[1], mode='w'); t.flush()\n";
    run_python(py, &["-c", make, path.to_str().unwrap()]);
}

/// A bcolz carray (whose last chunk holds just its rows) resizes through the view: bcolz
/// reads the new lengths and values, and the attributes renamed in with a new length. A bcolz ctable's column does not (EPERM, the table
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
    // A shrink with new attributes: both land (bcolz reads them from its `__attrs__`).
    let mut doc = json_at(&t, &format!("{arr}/zarr.json"));
    doc["attributes"] = json!({"units": "m"});
    rename_json_over(&t, arr, &with_len(&doc, 130)).unwrap();
    let want: Vec<f64> = (0..130).map(|i| i as f64).collect();
    assert_eq!(read(&src), want);
    let attrs = python_says(
        &py,
        &[
            "-c",
            "import sys, bcolz; print(dict(bcolz.open(sys.argv[1]).attrs))",
            src.to_str().unwrap(),
        ],
    );
    assert_eq!(attrs, "{'units': 'm'}");
    assert_eq!(
        json_at(&t, &format!("{arr}/zarr.json"))["attributes"],
        json!({"units": "m"})
    );
    drop(t);

    let tsrc = dir.path().join("t.bcolz");
    make_ctable(&py, &tsrc);
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
    arange_1000(&py, &pristine);
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
        every_commit_step(&format!("a resize to {new_len}"), 1, |steps| {
            std::fs::copy(&pristine, &src).unwrap();
            let t = Tree::from_source(&src, opts(true)).unwrap();
            let doc = json_at(&t, "zarr/s/zarr.json");
            t.simulate_crash_after(steps);
            let res = rename_json_over(&t, "zarr/s", &with_len(&doc, new_len));
            drop(t);
            let (n, values_ok) = state();
            assert!(values_ok, "{new_len}, crash after {steps} steps: values");
            match res {
                Ok(()) => assert_eq!(n, new_len, "committed"),
                Err(_) => assert!(
                    n == 1000 || n == new_len,
                    "{new_len}, crash after {steps} steps: shape {n}"
                ),
            }
            res.is_ok()
        });
    }
}

/// A resize whose new `zarr.json` also changes the attributes (xarray appends with updated
/// attributes) is one commit: a daemon that dies at any durable step leaves the old length
/// with the old attributes or the new length with the new ones, as python-blosc2 reads them.
#[test]
fn a_crash_at_every_step_of_a_resize_with_new_attributes_leaves_both_old_or_both_new() {
    let py = or_skip!(python(
        "a_crash_at_every_step_of_a_resize_with_new_attributes_leaves_both_old_or_both_new"
    ));
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        a = blosc2.asarray(np.arange(1000, dtype=np.float64), chunks=(256,), blocks=(64,), \
        urlpath=sys.argv[1], mode='w')\n\
        a.vlmeta['units'] = 'K'\n";
    run_python(&py, &["-c", make, pristine.to_str().unwrap()]);
    let src = dir.path().join("s.b2nd");
    let state = || -> String {
        python_says(
            &py,
            &[
                "-c",
                "import sys, blosc2; a = blosc2.open(sys.argv[1]); \
                 print(a.shape[0], a.vlmeta.getall().get('units'))",
                src.to_str().unwrap(),
            ],
        )
    };
    every_commit_step("a resize with new attributes", 1, |steps| {
        std::fs::copy(&pristine, &src).unwrap();
        let t = Tree::from_source(&src, opts(true)).unwrap();
        let mut doc = json_at(&t, "zarr/s/zarr.json");
        assert_eq!(doc["attributes"], json!({"units": "K"}));
        doc["shape"] = json!([1300]);
        doc["attributes"] = json!({"units": "degC"});
        t.simulate_crash_after(steps);
        let res = rename_json_over(&t, "zarr/s", &serde_json::to_vec(&doc).unwrap());
        if res.is_ok() {
            // What the mount shows after the commit: the new attributes, the new shape.
            let shown = json_at(&t, "zarr/s/zarr.json");
            assert_eq!(shown["attributes"], json!({"units": "degC"}));
            assert_eq!(shown["shape"], json!([1300]));
            assert_eq!(json_at(&t, "__attrs__"), json!({"units": "degC"}));
        }
        drop(t);
        let now = state();
        match res {
            Ok(()) => assert_eq!(now, "1300 degC", "committed"),
            Err(_) => assert!(
                now == "1000 K" || now == "1300 degC",
                "crash after {steps} steps: {now}"
            ),
        }
        res.is_ok()
    });
}

/// A 1-D leaf of a python-blosc2 `.b2z` TreeStore resizes through the view (the store
/// rebuilt around the resized member), with new attributes in the same rename:
/// python-blosc2 reads the new length, the old values kept and zeros after them, and the
/// attributes.
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
    let mut doc = json_at(&t, "zarr/x/v/zarr.json");
    assert_eq!(doc["shape"], json!([100]));
    doc["attributes"] = json!({"step": 2});
    rename_json_over(&t, "zarr/x/v", &with_len(&doc, 150)).unwrap();
    drop(t);
    let out = python_says(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2; a = blosc2.TreeStore(sys.argv[1], mode='r')['/x/v']; \
             v = a[:]; print(v.shape[0], bool((v[:100] == np.arange(100)).all() and \
             (v[100:] == 0).all()), a.vlmeta.getall())",
            src.to_str().unwrap(),
        ],
    );
    assert_eq!(out, "150 True {'step': 2}");
}

/// An N-dim b2nd (`time`, `y`, `x`; chunks that blocks do not divide) grows along its first
/// axis within its last row of chunks and across rows, and shrinks, each through a
/// `zarr.json` rename, as xarray appends along a leading `time`: python-blosc2 reads the new
/// shape, the old items kept and zeros in the new ones (whatever the padding held). A change
/// of another dimension stays EPERM, the source byte-identical.
#[test]
fn an_nd_b2nd_grows_and_shrinks_along_its_first_axis() {
    let py = or_skip!(python("an_nd_b2nd_grows_and_shrinks_along_its_first_axis"));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("cube.b2nd");
    // Made 12 long then cut to 10: the last row of chunks keeps its old items as padding.
    let make = "import sys, numpy as np, blosc2\n\
        a = blosc2.asarray(np.arange(12 * 12 * 10, dtype=np.float32).reshape(12, 12, 10) + 1, \
        chunks=(4, 6, 5), blocks=(3, 4, 5), urlpath=sys.argv[1], mode='w')\n\
        a.resize((10, 12, 10))\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let check = |len: u64, kept: u64| -> String {
        python_says(
            &py,
            &[
                "-c",
                "import sys, numpy as np, blosc2; a = blosc2.open(sys.argv[1]); \
                 n, k = int(sys.argv[2]), int(sys.argv[3]); v = a[...]; \
                 ref = np.arange(12 * 12 * 10, dtype=np.float32).reshape(12, 12, 10) + 1; \
                 print(a.shape, bool((v[:k] == ref[:k]).all() and (v[k:] == 0).all()) \
                 and v.shape[0] == n)",
                src.to_str().unwrap(),
                &len.to_string(),
                &kept.to_string(),
            ],
        )
    };
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let arr = "zarr/cube";
    let resize = |len: u64| {
        let mut doc = json_at(&t, &format!("{arr}/zarr.json"));
        doc["shape"][0] = json!(len);
        rename_json_over(&t, arr, &serde_json::to_vec(&doc).unwrap())
    };
    resize(11).unwrap();
    assert_eq!(check(11, 10), "(11, 12, 10) True");
    resize(19).unwrap();
    assert_eq!(check(19, 10), "(19, 12, 10) True");
    assert_eq!(
        json_at(&t, &format!("{arr}/zarr.json"))["shape"],
        json!([19, 12, 10])
    );
    resize(6).unwrap();
    assert_eq!(check(6, 6), "(6, 12, 10) True");
    resize(9).unwrap();
    assert_eq!(check(9, 6), "(9, 12, 10) True");
    let before = std::fs::read(&src).unwrap();
    let mut doc = json_at(&t, &format!("{arr}/zarr.json"));
    doc["shape"][1] = json!(13);
    let err = rename_json_over(&t, arr, &serde_json::to_vec(&doc).unwrap()).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
}

/// A plain SChunk frame (typesize 1: shown 1-D) whose last chunk is partial grows past it
/// (the old last chunk filled to the chunk size, then new chunks), contiguous and sparse:
/// python-blosc2 reads the old bytes and zeros after them.
#[test]
fn a_plain_frame_grows_past_a_partial_last_chunk() {
    let py = or_skip!(python("a_plain_frame_grows_past_a_partial_last_chunk"));
    let dir = tempfile::tempdir().unwrap();
    for contiguous in ["True", "False"] {
        let src = dir.path().join(format!("p{contiguous}.b2frame"));
        let make = "import sys, numpy as np, blosc2\n\
            blosc2.SChunk(chunksize=800, data=(np.arange(2000) % 251 + 1).astype(np.uint8).tobytes(), \
            urlpath=sys.argv[1], mode='w', contiguous=sys.argv[2] == 'True', \
            cparams={'typesize': 1})\n";
        run_python(&py, &["-c", make, src.to_str().unwrap(), contiguous]);
        let t = Tree::from_source(&src, opts(true)).unwrap();
        let top = super::names(&t, "zarr");
        let arr = format!("zarr/{}", top.iter().find(|n| *n != "zarr.json").unwrap());
        for len in [2100u64, 3300] {
            let doc = json_at(&t, &format!("{arr}/zarr.json"));
            rename_json_over(&t, &arr, &with_len(&doc, len)).unwrap();
            let out = python_says(
                &py,
                &[
                    "-c",
                    "import sys, numpy as np, blosc2; s = blosc2.open(sys.argv[1]); \
                     v = np.frombuffer(s[:], dtype=np.uint8); \
                     ref = (np.arange(2000) % 251 + 1).astype(np.uint8); \
                     print(len(v), bool((v[:2000] == ref).all() and (v[2000:] == 0).all()))",
                    src.to_str().unwrap(),
                ],
            );
            assert_eq!(out, format!("{len} True"), "contiguous={contiguous}");
        }
    }
}

/// Hostile or oversized resizes are refused before anything is written (the source
/// byte-identical): a first dimension past an int64, more new chunks than one resize adds
/// (EFBIG); new attributes their commit would refuse (EINVAL); the column of a python-blosc2 CTable in a `.b2d` store (EPERM: its columns and
/// row mask share one length).
#[test]
fn oversized_resizes_and_ctable_columns_are_refused() {
    let py = or_skip!(python("oversized_resizes_and_ctable_columns_are_refused"));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("h.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(1000, dtype=np.float64), chunks=(256,), urlpath=sys.argv[1], \
        mode='w')\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let before = std::fs::read(&src).unwrap();
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let doc = json_at(&t, "zarr/h/zarr.json");
    let max_new = b2fs::tree::zarr::MAX_NEW_CHUNKS;
    for len in [1u64 << 63, 1 << 40, 1000 + 256 * (max_new + 1)] {
        let err = rename_json_over(&t, "zarr/h", &with_len(&doc, len)).unwrap_err();
        assert_eq!(err.errno(), libc::EFBIG, "{len}");
        assert!(
            std::fs::read(&src).unwrap() == before,
            "{len}: the source changed"
        );
    }
    // A resize with attributes their commit would refuse (20 vlmetalayers, 16 at most):
    // refused before the source is resized.
    let mut many = doc.clone();
    many["attributes"] = (0..20).map(|i| (format!("a{i}"), json!(i))).collect();
    let err = rename_json_over(&t, "zarr/h", &with_len(&many, 1100)).unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
    assert!(
        std::fs::read(&src).unwrap() == before,
        "attributes: the source changed"
    );
    drop(t);

    let ct = dir.path().join("ct.b2d");
    let make = "import sys, blosc2\n\
        from dataclasses import dataclass\n\
        @dataclass\n\
        class Row:\n    a: int = blosc2.field(blosc2.int64())\n    b: float = blosc2.field(blosc2.float64())\n\
        t = blosc2.CTable(Row, urlpath=sys.argv[1], mode='w')\n\
        [t.append(Row(a=i, b=i * 0.5)) for i in range(30)]\n";
    run_python(&py, &["-c", make, ct.to_str().unwrap()]);
    let t = Tree::from_source(&ct, opts(true)).unwrap();
    for arr in ["zarr/_cols/a", "zarr/_valid_rows"] {
        let doc = json_at(&t, &format!("{arr}/zarr.json"));
        let len = doc["shape"][0].as_u64().unwrap();
        let err = rename_json_over(&t, arr, &with_len(&doc, len / 2)).unwrap_err();
        assert_eq!(err.errno(), libc::EPERM, "{arr}");
    }
    drop(t);
    let out = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2, numpy as np; t = blosc2.open(sys.argv[1]); \
             print(len(t), np.asarray(t)['a'].tolist() == list(range(30)))",
            ct.to_str().unwrap(),
        ],
    );
    assert_eq!(out, "30 True");
}

/// Arrays with no chunk grid to resize along are refused (EPERM, the source as it was): an
/// empty array python-blosc2 made without a chunk shape (`blosc2.zeros((0,))` picks chunks
/// `(0,)`; python-blosc2's own `resize` refuses it), where the rename returned success and
/// changed nothing, and a plain frame without a fixed chunk size, which the resize left with
/// chunks the view no longer showed (both found by the `zarr_edit` fuzz target).
#[test]
fn arrays_without_a_chunk_grid_are_not_resized() {
    let py = or_skip!(python("arrays_without_a_chunk_grid_are_not_resized"));
    let dir = tempfile::tempdir().unwrap();
    for (name, shape) in [("e1", "(0,)"), ("e2", "(0, 5)")] {
        let src = dir.path().join(format!("{name}.b2nd"));
        let make = format!(
            "import sys, blosc2\n\
             a = blosc2.zeros({shape}, dtype='f8', urlpath=sys.argv[1], mode='w')\n\
             assert 0 in a.chunks, a.chunks\n\
             try:\n    a.resize((10,) + a.shape[1:])\nexcept ValueError:\n    pass\n\
             else:\n    raise SystemExit('python-blosc2 resized it')\n"
        );
        run_python(&py, &["-c", &make, src.to_str().unwrap()]);
        let before = std::fs::read(&src).unwrap();
        let t = Tree::from_source(&src, opts(true)).unwrap();
        let arr = format!("zarr/{name}");
        let mut doc = json_at(&t, &format!("{arr}/zarr.json"));
        doc["shape"][0] = json!(10);
        let err = rename_json_over(&t, &arr, &serde_json::to_vec(&doc).unwrap()).unwrap_err();
        assert_eq!(err.errno(), libc::EPERM, "{name}: {err}");
        assert_eq!(
            json_at(&t, &format!("{arr}/zarr.json"))["shape"][0],
            0,
            "{name}"
        );
        drop(t);
        assert!(
            std::fs::read(&src).unwrap() == before,
            "{name}: the source changed"
        );
    }
    // A plain frame without a fixed chunk size (`SChunk(chunksize=0)`, one chunk of 40
    // bytes): grown, it had three chunks, which the view cannot show (the array left it).
    let src = dir.path().join("v.b2frame");
    let make = "import sys, blosc2\n\
        s = blosc2.SChunk(chunksize=0, urlpath=sys.argv[1], mode='w', cparams={'typesize': 1})\n\
        s.append_data(bytes(range(40)))\n\
        assert s.chunksize == 0\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let before = std::fs::read(&src).unwrap();
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let doc = json_at(&t, "zarr/v/zarr.json");
    let err = rename_json_over(&t, "zarr/v", &with_len(&doc, 83)).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM, "{err}");
    drop(t);
    assert!(
        std::fs::read(&src).unwrap() == before,
        "chunksize 0: the source changed"
    );
}

/// A daemon that dies at any durable step of a resize of a 3-D b2nd along its first axis
/// (within its last row of chunks, across rows, and back) leaves it old or new, as
/// python-blosc2 reads it.
#[test]
fn a_crash_at_every_step_of_an_nd_resize_leaves_the_old_or_the_new_array() {
    let py = or_skip!(python(
        "a_crash_at_every_step_of_an_nd_resize_leaves_the_old_or_the_new_array"
    ));
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(10 * 6 * 4, dtype=np.int32).reshape(10, 6, 4) + 1, \
        chunks=(4, 3, 4), blocks=(2, 3, 2), urlpath=sys.argv[1], mode='w')\n";
    run_python(&py, &["-c", make, pristine.to_str().unwrap()]);
    let src = dir.path().join("c.b2nd");
    let state = || -> (u64, bool) {
        let out = python_says(
            &py,
            &[
                "-c",
                "import sys, numpy as np, blosc2; a = blosc2.open(sys.argv[1]); n = a.shape[0]; \
                 v = a[...]; m = min(n, 10); \
                 ref = np.arange(10 * 6 * 4, dtype=np.int32).reshape(10, 6, 4) + 1; \
                 print(n, bool((v[:m] == ref[:m]).all() and (v[m:] == 0).all()))",
                src.to_str().unwrap(),
            ],
        );
        let (n, ok) = out.split_once(' ').unwrap();
        (n.parse().unwrap(), ok == "True")
    };
    for new_len in [11u64, 17, 5] {
        every_commit_step(&format!("an N-dim resize to {new_len}"), 1, |steps| {
            std::fs::copy(&pristine, &src).unwrap();
            let t = Tree::from_source(&src, opts(true)).unwrap();
            let mut doc = json_at(&t, "zarr/c/zarr.json");
            doc["shape"][0] = json!(new_len);
            t.simulate_crash_after(steps);
            let res = rename_json_over(&t, "zarr/c", &serde_json::to_vec(&doc).unwrap());
            drop(t);
            let (n, values_ok) = state();
            assert!(values_ok, "{new_len}, crash after {steps} steps: values");
            match res {
                Ok(()) => assert_eq!(n, new_len, "committed"),
                Err(_) => assert!(
                    n == 10 || n == new_len,
                    "{new_len}, crash after {steps} steps: shape {n}"
                ),
            }
            res.is_ok()
        });
    }
}

/// Removes Zarr chunk object `key` of `dir` (`c/0/1`), as zarr-python does.
fn unlink_chunk(t: &Tree, dir: &str, key: &str) {
    let path = format!("{dir}/{key}");
    let (parent, leaf) = path.rsplit_once('/').unwrap();
    t.unlink(ino(t, parent), leaf).unwrap();
}

/// zarr-python's `resize` removes the chunk objects outside the new shape, then renames the
/// new `zarr.json` over the old one; when that rename is refused (another axis of a 2-D b2nd,
/// a bcolz ctable's column), the removals are taken back in one commit and the references
/// read every old value. A write to the array between the removals and the rename ends
/// that: the removed chunk keeps the fill value (and the log says so). A chunk removed twice
/// comes back as it was before its last removal.
#[test]
fn a_refused_resize_takes_back_the_chunk_removals_before_it() {
    let py = or_skip!(python(
        "a_refused_resize_takes_back_the_chunk_removals_before_it"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(10000, dtype=np.float64).reshape(100, 100), chunks=(50, 50), \
        blocks=(25, 25), urlpath=sys.argv[1], mode='w')\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let check = "import sys, numpy as np, blosc2; a = blosc2.open(sys.argv[1])[...]; \
        w = np.arange(10000, dtype=np.float64).reshape(100, 100); \
        print(a.shape, int((a != w).sum()), int((a[:, 50:] == 0).all()))";
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let arr = "zarr/m";
    let mut doc = json_at(&t, &format!("{arr}/zarr.json"));
    for key in ["c/0/1", "c/1/1"] {
        unlink_chunk(&t, arr, key);
    }
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        "(100, 100) 5000 1",
        "the removals commit at once"
    );
    doc["shape"] = json!([100, 50]);
    let err = rename_json_over(&t, arr, &serde_json::to_vec(&doc).unwrap()).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        "(100, 100) 0 0",
        "the removed chunks are back"
    );
    assert_eq!(
        json_at(&t, &format!("{arr}/zarr.json"))["shape"],
        json!([100, 100])
    );

    // A write in between: the removal stays.
    unlink_chunk(&t, arr, "c/1/1");
    let c00 = ino(&t, &format!("{arr}/c/0/0"));
    let fh = t.open(c00, libc::O_WRONLY).unwrap();
    t.write(c00, fh, 8, &7.0f64.to_le_bytes()).unwrap();
    t.release(fh).unwrap();
    doc["attributes"] = json!({"try": 2}); // another temp file: the first stays after a refusal
    let err = rename_json_over(&t, arr, &serde_json::to_vec(&doc).unwrap()).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        "(100, 100) 2501 0",
        "chunk (1, 1) stays zeros, item (0, 1) is 7 as written"
    );
    // A chunk removed twice (zeroed on purpose, then removed again by the resize) is put
    // back as it was before the last removal: zeros.
    for key in ["c/0/1", "c/0/1", "c/1/1"] {
        unlink_chunk(&t, arr, key);
    }
    doc["attributes"] = json!({"try": 3});
    let err = rename_json_over(&t, arr, &serde_json::to_vec(&doc).unwrap()).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        "(100, 100) 5001 1",
        "chunk (0, 1) keeps the zeros its first removal committed"
    );
    drop(t);

    // A bcolz ctable's column (its length is the table's): `resize(10)` of column `a`.
    let tsrc = dir.path().join("t.bcolz");
    make_ctable(&py, &tsrc);
    let t = Tree::from_source(&tsrc, opts(true)).unwrap();
    let a = json_at(&t, "zarr/a/zarr.json");
    let per = a["chunk_grid"]["configuration"]["chunk_shape"][0]
        .as_u64()
        .unwrap();
    // Chunks wholly past row 10.
    let first_out = 10u64.div_ceil(per);
    let n = 30u64.div_ceil(per);
    assert!(first_out < n, "chunks of {per} rows");
    for k in first_out..n {
        unlink_chunk(&t, "zarr/a", &format!("c/{k}"));
    }
    let err = rename_json_over(&t, "zarr/a", &with_len(&a, 10)).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    drop(t);
    let out = python_says(
        &py,
        &[
            "-c",
            "import sys, bcolz; t = bcolz.open(sys.argv[1]); \
             print(len(t), list(t['a'][:]) == list(range(30)))",
            tsrc.to_str().unwrap(),
        ],
    );
    assert_eq!(out, "30 True");
}
