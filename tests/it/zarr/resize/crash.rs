//! A daemon that dies at any durable step of a resize through the Zarr view (a 1-D b2nd,
//! with new attributes, an N-dim b2nd) leaves the source old or new, as python-blosc2 reads
//! it.

use b2fs::tree::Tree;
use serde_json::json;

use super::super::json_at;
use super::super::metadata::rename_json_over;
use super::{arange_1000, with_len};
use crate::support::no_prefetch as opts;
use crate::support::steps::every_commit_step;
use crate::support::{python, python_says, run_python};

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
