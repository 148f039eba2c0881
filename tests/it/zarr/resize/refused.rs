//! Resizes through the Zarr view that are refused (oversized, hostile, ctable columns, arrays
//! without a chunk grid) leave the source as it was, and a refused one takes back the chunk
//! removals zarr-python made before it.

use b2fs::tree::Tree;
use serde_json::json;

use super::super::metadata::rename_json_over;
use super::super::{ino, json_at};
use super::{make_ctable, with_len};
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says, run_python};

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
