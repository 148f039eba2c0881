//! `-o zarr_strict_json` through real mounts: TensorStore and strict JSON parsers read the
//! Zarr view of a source with NaN and infinite attributes only with the option, zarr-python
//! and xarray either way, and a strict writer's attribute edit leaves the source's floats
//! (`scripts/oracle/zarr_strict.py`; docs/ZARR.md, "Strict JSON").

use std::path::Path;

use serde_json::Value;

use super::{run, sst, zarr34};
use crate::support::{Mount, fuse_and_python, python_says};

/// `-o zarr_strict_json` on a python-blosc2 b2nd whose vlmeta holds NaN, inf and -inf (in a
/// list too), through real mounts: with the option, TensorStore's `zarr3` driver reads the
/// array (its values, and the attributes as "NaN", "Infinity", "-Infinity"), every
/// `zarr.json` parses with strict parsers (Python's `json` with no constants, serde_json),
/// and zarr-python and xarray still open it; without it TensorStore refuses the array
/// ("Invalid JSON") and the strict parsers every document, so the option is what makes it
/// work. A strict writer (`allow_nan=False`, a temp file renamed over `zarr.json`) that
/// changes "units" through the read-write strict mount leaves the others floats:
/// TensorStore reads the new units, python-blosc2 the NaN and infinities as floats after
/// the unmount.
#[test]
fn zarr_strict_json_lets_tensorstore_read_nan_attributes_and_strict_writers_keep_floats() {
    let t = "zarr_strict_json_lets_tensorstore_read_nan_attributes_and_strict_writers_keep_floats";
    let py = or_skip!(fuse_and_python(t));
    let zpy = or_skip!(zarr34(t));
    let dir = tempfile::tempdir().unwrap();
    let vlmeta = "a.vlmeta['missing'] = float('nan')\n\
        a.vlmeta['hot'] = float('inf')\n\
        a.vlmeta['cold'] = float('-inf')\n\
        a.vlmeta['range'] = [float('nan'), 5.0]\n";
    let src = sst(&py, dir.path(), vlmeta);
    let readers = |mp: &Path| {
        let (ok, out, err) = run(
            &zpy,
            &[
                "scripts/oracle/zarr_strict.py",
                "read",
                mp.to_str().unwrap(),
                "sst",
            ],
        );
        assert!(ok, "{t}: {out}{err}");
        out.trim().to_owned()
    };
    // serde_json (strict) on the two documents: the root's and the array's.
    let serde_parses = |mp: &Path| {
        ["zarr/zarr.json", "zarr/sst/zarr.json"]
            .iter()
            .filter(|p| {
                serde_json::from_slice::<Value>(&std::fs::read(mp.join(p)).unwrap()).is_ok()
            })
            .count()
    };
    let bare = r#"{"cold": -Infinity, "hot": Infinity, "missing": NaN, "range": [NaN, 5.0], "units": "K"}"#;
    let strict = r#"{"cold": "-Infinity", "hot": "Infinity", "missing": "NaN", "range": ["NaN", 5.0], "units": "K"}"#;
    // Without the option: zarr-python's bare tokens, which TensorStore refuses.
    let m = Mount::daemon(&src, &["ro"]);
    assert_eq!(serde_parses(&m.mp), 0);
    assert_eq!(
        readers(&m.mp),
        format!("docs 0 2\ntensorstore refused True\nzarr True {bare}\nxarray True {bare}")
    );
    m.umount();
    let m = Mount::daemon(&src, &["zarr_strict_json"]);
    assert_eq!(serde_parses(&m.mp), 2);
    assert_eq!(
        readers(&m.mp),
        format!("docs 2 2\ntensorstore True {strict}\nzarr True {strict}\nxarray True {strict}")
    );
    let (ok, out, err) = run(
        &zpy,
        &[
            "scripts/oracle/zarr_strict.py",
            "write",
            m.mp.to_str().unwrap(),
            "sst",
            "degC",
        ],
    );
    assert!(ok && out.trim() == "written", "{t}: {out}{err}");
    let now = strict.replace("\"K\"", "\"degC\"");
    assert_eq!(
        readers(&m.mp),
        format!("docs 2 2\ntensorstore True {now}\nzarr True {now}\nxarray True {now}")
    );
    m.umount();
    let check = "import sys, blosc2\n\
        a = blosc2.open(sys.argv[1])\n\
        v = dict(a.vlmeta)\n\
        print(sorted(v.items()), [type(v[k]).__name__ for k in ('missing', 'hot', 'cold')])\n";
    assert_eq!(
        python_says(&py, &["-c", check, src.to_str().unwrap()]),
        "[('cold', -inf), ('hot', inf), ('missing', nan), ('range', [nan, 5.0]), \
         ('units', 'degC')] ['float', 'float', 'float']"
    );
}
