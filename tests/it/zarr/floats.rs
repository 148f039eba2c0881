//! NaN and infinite attributes through the Zarr view, as zarr-python writes and reads them
//! (bare `NaN`, `Infinity`, `-Infinity` in `zarr.json`, Python's `json.dumps`): shown so for
//! a python-blosc2 vlmeta float, committed as floats python-blosc2 reads back.

use b2fs::tree::Tree;

use super::{ino, read_all};
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says, run_python};

/// A b2nd whose vlmeta holds a NaN (python-blosc2): the view's `zarr.json` (the array's and
/// the root's consolidated copy) shows it bare, as zarr-python writes it, while `__attrs__`
/// keeps the tag its readers parse as JSON; a rewrite of the same text changes nothing; a
/// rewrite adding bare `Infinity`, `-Infinity` and `NaN` in a list (what zarr-python writes
/// for `attrs.update(...)`) commits them as floats python-blosc2 reads back (`math.isnan`,
/// `inf`). Tree API.
#[test]
fn nan_and_infinite_attributes_through_zarr_json_are_floats_in_the_vlmeta() {
    let py = or_skip!(python(
        "nan_and_infinite_attributes_through_zarr_json_are_floats_in_the_vlmeta"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("temps.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        a = blosc2.asarray(np.arange(600, dtype=np.float32).reshape(20, 30), chunks=(10, 15), \
        urlpath=sys.argv[1], mode='w')\n\
        a.vlmeta['units'] = 'm'\n\
        a.vlmeta['missing'] = float('nan')\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let text = |path: &str| String::from_utf8(read_all(&t, ino(&t, path), 1 << 20)).unwrap();
    let shown = text("zarr/temps/zarr.json");
    assert!(shown.contains("\"missing\": NaN"), "{shown}");
    assert!(text("zarr/zarr.json").contains("\"missing\": NaN"));
    let attrs: serde_json::Value = serde_json::from_str(&text("__attrs__")).unwrap();
    assert_eq!(
        attrs,
        serde_json::json!({"units": "m", "missing": {"__float__": "nan"}})
    );
    let before = std::fs::read(&src).unwrap();
    // zarr-python writes back what it read: nothing changes.
    super::metadata::rename_json_over(&t, "zarr/temps", shown.as_bytes()).unwrap();
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
    let edited = shown.replace(
        "\"missing\": NaN",
        "\"missing\": NaN,\n    \"hot\": Infinity,\n    \"cold\": -Infinity,\n    \
         \"some\": [1.5, NaN, \"NaN\"]",
    );
    assert_ne!(edited, shown);
    super::metadata::rename_json_over(&t, "zarr/temps", edited.as_bytes()).unwrap();
    let now = text("zarr/temps/zarr.json");
    assert!(now.contains("\"hot\": Infinity,"), "{now}");
    assert!(now.contains("\"cold\": -Infinity,"), "{now}");
    drop(t);
    let check = "import sys, math, json, blosc2\n\
        a = blosc2.open(sys.argv[1])\n\
        v = dict(a.vlmeta)\n\
        print(json.dumps(v, sort_keys=True), math.isnan(v['missing']), \
        math.isnan(v['some'][1]), type(v['hot']).__name__)\n";
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        r#"{"cold": -Infinity, "hot": Infinity, "missing": NaN, "some": [1.5, NaN, "NaN"], "units": "m"} True True float"#
    );
}
