//! Names in the Zarr view of a directory of sources: each source is named after its stem, as
//! a single source's array is (`temp.b2nd` -> `temp`), unless that name is another member's
//! too; directory sources and nested stores keep their names.

use b2fs::tree::Tree;

use super::{assemble, float32_b2nd, ino, json_at, names};
use crate::support::no_prefetch as opts;
use crate::support::{python, run_python, try_tree_ino};

/// python-blosc2 (and bcolz) write a directory of sources: `temp.b2nd` shows as `temp`
/// (its old name is not found, its data is python-blosc2's, its made-up dimension names
/// are `temp_dim0`, ...); `same.b2nd` and the plain frame `same.b2frame` share a stem and
/// keep their file names, as does `a.b2nd` beside the subdirectory `a` (a group, whose
/// `x.b2nd` shows as `a/x`); the bcolz carray directory `bc.bcolz` keeps its whole name (a
/// directory source's, as when mounted alone), the store `st.b2z` its name and its keys;
/// `__h.b2nd`'s stem is a name Zarr reserves (left out). The consolidated metadata uses the
/// same names.
#[test]
fn zarr_names_the_sources_of_a_directory_after_their_stems() {
    let py = or_skip!(python(
        "zarr_names_the_sources_of_a_directory_after_their_stems"
    ));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    float32_b2nd(&py, &d.join("temp.b2nd"), &[]);
    float32_b2nd(&py, &d.join("same.b2nd"), &[]);
    float32_b2nd(&py, &d.join("a.b2nd"), &[]);
    float32_b2nd(&py, &d.join("__h.b2nd"), &[]);
    std::fs::create_dir(d.join("a")).unwrap();
    float32_b2nd(&py, &d.join("a/x.b2nd"), &[]);
    let make = "import sys, numpy as np, blosc2, bcolz\n\
        d = sys.argv[1]\n\
        s = blosc2.SChunk(chunksize=400, data=np.arange(300, dtype=np.int32), \
        urlpath=d + '/same.b2frame', mode='w', cparams={'typesize': 4})\n\
        bcolz.carray(np.arange(50, dtype=np.int64), chunklen=16, rootdir=d + '/bc.bcolz', \
        mode='w').flush()\n\
        with blosc2.DictStore(d + '/st.b2z', mode='w') as st:\n    \
        st['/inner'] = np.arange(10, dtype=np.int16)\n";
    run_python(&py, &["-c", make, d.to_str().unwrap()]);

    let t = Tree::from_source(d, opts(false)).unwrap();
    let mut top = names(&t, "zarr");
    top.sort();
    assert_eq!(
        top,
        [
            "a",
            "a.b2nd",
            "bc.bcolz",
            "same.b2frame",
            "same.b2nd",
            "st.b2z",
            "temp",
            "zarr.json"
        ],
        "the view's root"
    );
    assert_eq!(names(&t, "zarr/a"), ["zarr.json", "x"]);
    let gone = try_tree_ino(&t, "zarr/temp.b2nd").unwrap_err();
    assert!(gone.contains("no such file"), "{gone}");
    let temp = json_at(&t, "zarr/temp/zarr.json");
    assert_eq!(
        temp["dimension_names"],
        serde_json::json!(["temp_dim0", "temp_dim1"])
    );
    let want: Vec<u8> = (0..600).flat_map(|i| (i as f32).to_le_bytes()).collect();
    assert!(assemble(&t, "temp", &temp, 1 << 20) == want);
    assert!(assemble(&t, "a/x", &json_at(&t, "zarr/a/x/zarr.json"), 4096) == want);
    let root = json_at(&t, "zarr/zarr.json");
    let mut keys: Vec<&String> = root["consolidated_metadata"]["metadata"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "a",
            "a.b2nd",
            "a/x",
            "bc.bcolz",
            "same.b2frame",
            "same.b2nd",
            "st.b2z",
            "st.b2z/inner",
            "temp"
        ]
    );
    let omitted: serde_json::Value = serde_json::from_slice(
        &t.getxattr(ino(&t, "zarr"), "user.b2fs.zarr_omitted")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert!(omitted.get("__h").is_some(), "{omitted}");
}

/// An open of an array's `zarr.json` in a directory of sources follows that array: another
/// writer's new shape of `a.b2nd` shows at the next open of `zarr/a/zarr.json` (it used to
/// check every source of the directory at each such open, a `stat` each: 2,000 sources made
/// reading every array's `zarr.json` 13x slower, BENCHMARKS.md "Session 30: the lead").
#[test]
fn an_open_of_an_arrays_zarr_json_follows_that_array() {
    let py = or_skip!(python("an_open_of_an_arrays_zarr_json_follows_that_array"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    float32_b2nd(&py, &d.join("a.b2nd"), &[]);
    float32_b2nd(&py, &d.join("b.b2nd"), &[]);
    let t = Tree::from_source(d, opts(false)).unwrap();
    assert_eq!(
        json_at(&t, "zarr/a/zarr.json")["shape"],
        serde_json::json!([20, 30])
    );
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(50, dtype=np.float32).reshape(5, 10), chunks=(5, 5), \
        urlpath=sys.argv[1], mode='w')\n";
    run_python(&py, &["-c", make, d.join("a.b2nd").to_str().unwrap()]);
    assert_eq!(
        json_at(&t, "zarr/a/zarr.json")["shape"],
        serde_json::json!([5, 10])
    );
    assert_eq!(
        json_at(&t, "zarr/b/zarr.json")["shape"],
        serde_json::json!([20, 30])
    );
}
