//! The CF `_FillValue` attribute through the Zarr view (`src/tree/zarr/fill.rs`): a float
//! array's is shown in xarray's spelling (base64 of the little-endian float64) and mapped
//! back on an edit, so python-blosc2 keeps reading the plain number; `__attrs__` shows the
//! plain value. xarray itself reads it through a mount in `zarr_readers/fill.rs`.

use b2fs::tree::Tree;
use serde_json::{Value, json};

use super::metadata::rename_json_over;
use super::{ino, json_at, read_all};
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says};

/// A float32 b2nd whose vlmeta holds `_FillValue: -9999` (an integer, as python-blosc2 users
/// store it too): the view's `zarr.json` (the array's and the root's consolidated copy) shows
/// `"AAAAAICHw8A="`, `__attrs__` the plain -9999. Written back unchanged, the source stays
/// byte-identical; with another attribute changed, `_FillValue` stays the integer -9999 for
/// python-blosc2; xarray's spelling of NaN written in its place is stored as a float NaN,
/// and a plain number (a writer that does not know xarray's spelling) as written. An integer
/// array's `_FillValue` is shown plain, as xarray reads it. Tree API.
#[test]
fn fill_value_attributes_show_in_xarrays_spelling_and_store_plain_numbers() {
    let py = or_skip!(python(
        "fill_value_attributes_show_in_xarrays_spelling_and_store_plain_numbers"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("temps.b2nd");
    super::float32_b2nd(&py, &src, &[("_FillValue", "-9999"), ("units", "'K'")]);
    let vlmeta = || {
        python_says(
            &py,
            &[
                "-c",
                "import sys, json, blosc2; a = blosc2.open(sys.argv[1]); v = dict(a.vlmeta); \
                 print(json.dumps(v, sort_keys=True), type(v['_FillValue']).__name__)",
                src.to_str().unwrap(),
            ],
        )
    };
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let arr = "zarr/temps";
    let text = |path: &str| String::from_utf8(read_all(&t, ino(&t, path), 1 << 20)).unwrap();
    let shown = text(&format!("{arr}/zarr.json"));
    let doc: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(doc["attributes"]["_FillValue"], "AAAAAICHw8A=", "{shown}");
    let root = json_at(&t, "zarr/zarr.json");
    assert_eq!(
        root["consolidated_metadata"]["metadata"]["temps"]["attributes"]["_FillValue"],
        "AAAAAICHw8A="
    );
    assert_eq!(json_at(&t, "__attrs__")["_FillValue"], json!(-9999));

    let before = std::fs::read(&src).unwrap();
    rename_json_over(&t, arr, shown.as_bytes()).unwrap();
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
    let with = |attrs: Value| {
        let mut d = doc.clone();
        d["attributes"] = attrs;
        serde_json::to_vec(&d).unwrap()
    };
    rename_json_over(
        &t,
        arr,
        &with(json!({"_FillValue": "AAAAAICHw8A=", "units": "degC"})),
    )
    .unwrap();
    assert_eq!(vlmeta(), r#"{"_FillValue": -9999, "units": "degC"} int"#);
    // xarray's spelling of NaN: a float NaN in the source and in `__attrs__`'s tag.
    rename_json_over(
        &t,
        arr,
        &with(json!({"_FillValue": "AAAAAAAA+H8=", "units": "degC"})),
    )
    .unwrap();
    assert_eq!(
        json_at(&t, "__attrs__")["_FillValue"],
        json!({"__float__": "nan"})
    );
    assert_eq!(
        json_at(&t, &format!("{arr}/zarr.json"))["attributes"]["_FillValue"],
        "AAAAAAAA+H8="
    );
    assert_eq!(vlmeta(), r#"{"_FillValue": NaN, "units": "degC"} float"#);
    // A plain number: stored as written, shown in xarray's spelling.
    rename_json_over(&t, arr, &with(json!({"_FillValue": 2.5}))).unwrap();
    assert_eq!(
        json_at(&t, &format!("{arr}/zarr.json"))["attributes"]["_FillValue"],
        "AAAAAAAABEA="
    );
    drop(t);
    assert_eq!(vlmeta(), r#"{"_FillValue": 2.5} float"#);

    // An integer array: shown plain (xarray reads integers so).
    let isrc = dir.path().join("counts.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        a = blosc2.asarray(np.arange(20, dtype=np.int16), chunks=(10,), urlpath=sys.argv[1], \
        mode='w')\n\
        a.vlmeta['_FillValue'] = -1\n";
    crate::support::run_python(&py, &["-c", make, isrc.to_str().unwrap()]);
    let t = Tree::from_source(&isrc, opts(true)).unwrap();
    assert_eq!(
        json_at(&t, "zarr/counts/zarr.json")["attributes"]["_FillValue"],
        json!(-1)
    );
}
