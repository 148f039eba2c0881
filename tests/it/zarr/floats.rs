//! NaN and infinite attributes through the Zarr view, as zarr-python writes and reads them
//! (bare `NaN`, `Infinity`, `-Infinity` in `zarr.json`, Python's `json.dumps`): shown so for
//! a python-blosc2 vlmeta float, committed as floats python-blosc2 reads back; and with
//! `-o zarr_strict_json`, as the strings `"NaN"`, `"Infinity"`, `"-Infinity"` in documents
//! every strict parser reads, edits keeping the source's floats where the writer left them.

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
    super::float32_b2nd(&py, &src, &[("units", "'m'"), ("missing", "float('nan')")]);
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

/// The tree of `src` with `-o zarr_strict_json` (`writable`: a read-write mount).
fn strict_tree(src: &std::path::Path, writable: bool) -> Tree {
    let o = b2fs::tree::TreeOptions {
        zarr_strict_json: true,
        ..opts(writable)
    };
    Tree::from_source(src, o).unwrap()
}

/// The tree paths of every `zarr.json` of `t`'s view (its groups and arrays, not their
/// chunk trees), each with its text.
fn every_zarr_json(t: &Tree) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut dirs = vec!["zarr".to_owned()];
    while let Some(dir) = dirs.pop() {
        for name in super::names(t, &dir) {
            let path = format!("{dir}/{name}");
            match name.as_str() {
                "zarr.json" => {
                    let text = read_all(t, ino(t, &path), 1 << 20);
                    out.push((path, String::from_utf8(text).unwrap()));
                }
                "c" => {}
                _ => dirs.push(path),
            }
        }
    }
    out.sort();
    out
}

/// Parses every `zarr.json` of `t`'s view with serde_json (strict JSON, RFC 8259: no
/// `NaN`); how many failed, of how many.
fn strict_failures(t: &Tree) -> (usize, usize) {
    let docs = every_zarr_json(t);
    let failed = docs
        .iter()
        .filter(|(_, text)| serde_json::from_str::<serde_json::Value>(text).is_err())
        .count();
    (failed, docs.len())
}

/// `-o zarr_strict_json` on a python-blosc2 b2nd whose vlmeta holds NaN, inf and -inf (in a
/// list too) and the string "NaN": every `zarr.json` of the view (the array's, the root's
/// consolidated copy) parses with serde_json, with the floats spelled "NaN", "Infinity",
/// "-Infinity" (`__attrs__` keeps its tags); without the option serde_json refuses them. An
/// identical rewrite changes nothing; a rewrite by a strict writer (another `units`, a changed
/// list holding a shown "NaN", new attributes "NaN" and a `__float__` tag, a whole float
/// written `1`) commits: python-blosc2 reads the untouched NaN and infinities as floats, the
/// string "NaN" it had as a string, the new "NaN" as a string, the tag as a float. Tree API.
#[test]
fn strict_json_view_spells_non_finite_attributes_as_strings_and_keeps_them_floats() {
    let py = or_skip!(python(
        "strict_json_view_spells_non_finite_attributes_as_strings_and_keeps_them_floats"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("temps.b2nd");
    super::float32_b2nd(
        &py,
        &src,
        &[
            ("units", "'m'"),
            ("missing", "float('nan')"),
            ("hot", "float('inf')"),
            ("cold", "float('-inf')"),
            ("label", "'NaN'"),
            ("range", "[float('nan'), 5.0]"),
            ("scale", "1.0"),
        ],
    );
    // Without the option: zarr-python's bare tokens, which serde_json refuses.
    let bare = Tree::from_source(&src, opts(false)).unwrap();
    assert_eq!(strict_failures(&bare), (2, 2));
    drop(bare);
    let t = strict_tree(&src, true);
    assert_eq!(strict_failures(&t), (0, 2));
    let text = |path: &str| String::from_utf8(read_all(&t, ino(&t, path), 1 << 20)).unwrap();
    let shown = text("zarr/temps/zarr.json");
    let doc: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        doc["attributes"],
        serde_json::json!({"units": "m", "missing": "NaN", "hot": "Infinity",
            "cold": "-Infinity", "label": "NaN", "range": ["NaN", 5.0], "scale": 1.0})
    );
    let root: serde_json::Value = serde_json::from_str(&text("zarr/zarr.json")).unwrap();
    assert_eq!(
        root["consolidated_metadata"]["metadata"]["temps"]["attributes"],
        doc["attributes"]
    );
    // The fill value is the type's zero, a number.
    assert_eq!(doc["fill_value"], serde_json::json!(0.0));
    let attrs: serde_json::Value = serde_json::from_str(&text("__attrs__")).unwrap();
    assert_eq!(attrs["missing"], serde_json::json!({"__float__": "nan"}));
    let before = std::fs::read(&src).unwrap();
    // A writer that rewrites what it read: nothing changes.
    super::metadata::rename_json_over(&t, "zarr/temps", shown.as_bytes()).unwrap();
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
    // A strict writer (JavaScript's JSON.stringify: 1.0 is 1) changes some attributes.
    let mut edited = doc.clone();
    let a = edited["attributes"].as_object_mut().unwrap();
    a.insert("units".into(), "K".into());
    a.insert("range".into(), serde_json::json!(["NaN", 6.0]));
    a.insert("scale".into(), serde_json::json!(1));
    a.insert("note".into(), "NaN".into());
    a.insert("tagged".into(), serde_json::json!({"__float__": "nan"}));
    let edited = serde_json::to_vec(&edited).unwrap();
    super::metadata::rename_json_over(&t, "zarr/temps", &edited).unwrap();
    assert_eq!(strict_failures(&t), (0, 2));
    let now: serde_json::Value = serde_json::from_str(&text("zarr/temps/zarr.json")).unwrap();
    assert_eq!(now["attributes"]["units"], "K");
    assert_eq!(now["attributes"]["tagged"], "NaN");
    assert_eq!(now["attributes"]["range"], serde_json::json!(["NaN", 6.0]));
    drop(t);
    let check = "import sys, math, blosc2\n\
        a = blosc2.open(sys.argv[1])\n\
        v = dict(a.vlmeta)\n\
        f = lambda x: 'nan' if isinstance(x, float) and math.isnan(x) else repr(x)\n\
        print(' '.join(f'{k}={f(v[k])}' for k in sorted(v)), f(v['range'][0]), \
        type(v['scale']).__name__)\n";
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        "cold=-inf hot=inf label='NaN' missing=nan note='NaN' range=[nan, 6.0] scale=1.0 \
         tagged=nan units='K' nan float"
    );
}

/// `-o zarr_strict_json` on a python-blosc2 TreeStore (`.b2z`) with NaN and infinite
/// attributes on the store, a group and an array: every `zarr.json` of the view (the
/// root's and the group's with their consolidated metadata, the groups', the arrays')
/// parses with serde_json (without the option the root's, the group's and the array's do
/// not); an edit of the group's attributes through its `zarr.json` keeps the NaN it left a
/// float in the group's carrier (python-blosc2 reads it back). Tree API.
#[test]
fn strict_json_view_of_a_store_parses_everywhere_and_group_edits_keep_floats() {
    let py = or_skip!(python(
        "strict_json_view_of_a_store_parses_everywhere_and_group_edits_keep_floats"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("store.b2z");
    let make = "import sys, numpy as np, blosc2\n\
        with blosc2.TreeStore(sys.argv[1], mode='w') as ts:\n\
        \x20   sst = blosc2.asarray(np.arange(60, dtype='f8').reshape(6, 10), chunks=(3, 10))\n\
        \x20   sst.vlmeta['missing'] = float('nan')\n\
        \x20   ts['/ocean/sst'] = sst\n\
        \x20   ts['/atm/wind'] = np.ones((4, 5), dtype='i2')\n\
        \x20   ts.vlmeta['title'] = 'demo'\n\
        \x20   ts.vlmeta['top'] = float('inf')\n\
        \x20   ts.get_subtree('/ocean').vlmeta['fill'] = float('-inf')\n\
        \x20   ts.get_subtree('/ocean').vlmeta['source'] = 'model'\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let bare = Tree::from_source(&src, opts(false)).unwrap();
    let docs = every_zarr_json(&bare);
    let names: Vec<&str> = docs.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        names,
        [
            "zarr/atm/wind/zarr.json",
            "zarr/atm/zarr.json",
            "zarr/ocean/sst/zarr.json",
            "zarr/ocean/zarr.json",
            "zarr/zarr.json"
        ]
    );
    assert_eq!(strict_failures(&bare), (3, 5));
    drop(bare);
    let t = strict_tree(&src, true);
    assert_eq!(strict_failures(&t), (0, 5));
    let json = |path: &str| super::json_at(&t, path);
    let root = json("zarr/zarr.json");
    assert_eq!(root["attributes"]["top"], "Infinity");
    let meta = &root["consolidated_metadata"]["metadata"];
    assert_eq!(meta["ocean"]["attributes"]["fill"], "-Infinity");
    assert_eq!(meta["ocean/sst"]["attributes"]["missing"], "NaN");
    let ocean = json("zarr/ocean/zarr.json");
    assert_eq!(
        ocean["consolidated_metadata"]["metadata"]["sst"]["attributes"]["missing"],
        "NaN"
    );
    let mut edited = ocean.clone();
    edited["attributes"]["source"] = "obs".into();
    let edited = serde_json::to_vec(&edited).unwrap();
    super::metadata::rename_json_over(&t, "zarr/ocean", &edited).unwrap();
    assert_eq!(
        json("zarr/ocean/zarr.json")["attributes"]["fill"],
        "-Infinity"
    );
    assert_eq!(strict_failures(&t), (0, 5));
    drop(t);
    let check = "import sys, blosc2\n\
        with blosc2.TreeStore(sys.argv[1], mode='r') as ts:\n\
        \x20   v = dict(ts.get_subtree('/ocean').vlmeta)\n\
        \x20   print(sorted(v.items()), type(v['fill']).__name__)\n";
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        "[('fill', -inf), ('source', 'obs')] float"
    );
}
