//! Resizes through the Zarr view (`src/tree/zarr/resize.rs`): a `zarr.json` renamed over the
//! old one with another length of a 1-D array resizes the source in one commit, as
//! zarr-python's `resize`/`append` and xarray's `append_dim` do; checked by python-blosc2 and
//! bcolz reading the sources back.
//!
//! Split by concern: here the resizes that commit (1-D and N-dim b2nd, bcolz carrays, plain
//! frames, store leaves) and a resize refused for a stale view; `resize/crash.rs` (a crash
//! at every commit step of a resize); `resize/refused.rs` (the resizes refused, and the take-back
//! of the chunk removals before a refused one).

use b2fs::tree::Tree;
use serde_json::{Value, json};

use super::metadata::{rename_json_over, temp_json_name};
use super::{ino, json_at};
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says, run_python};

mod crash;
mod refused;

/// `doc` with shape `[len]`.
pub(super) fn with_len(doc: &Value, len: u64) -> Vec<u8> {
    let mut d = doc.clone();
    d["shape"] = json!([len]);
    serde_json::to_vec(&d).unwrap()
}

/// python-blosc2's 1-D float64 `arange(1000)` at `path`, chunks of 256 (the last one padded),
/// blocks of 64.
pub(super) fn arange_1000(py: &std::path::Path, path: &std::path::Path) {
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(1000, dtype=np.float64), chunks=(256,), blocks=(64,), \
        urlpath=sys.argv[1], mode='w')\n";
    run_python(py, &["-c", make, path.to_str().unwrap()]);
}

/// Writes `values` (little-endian float64) at item `at` of Zarr array `dir` through its chunk
/// objects (of `per_chunk` items), as a Zarr writer does after an append.
pub(super) fn write_items(t: &Tree, dir: &str, per_chunk: u64, at: u64, values: &[f64]) {
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
pub(super) fn make_ctable(py: &std::path::Path, path: &std::path::Path) {
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
