//! Sources the references write at test time, read back: random frames from python-blosc2,
//! random carrays and ctables from bcolz, and attributes b2fs encodes that python-blosc2
//! reads.
//!
//! The parts: this file makes a random set and holds the attributes' interop test;
//! `frames.rs` random frames; `bcolz.rs` random carrays and ctables.

use super::*;

mod bcolz;
mod frames;

// ---------------------------------------------------------------------------------------------
// Interop: python-blosc2 reads attrs encoded by json_to_msgpack

/// The JSON -> msgpack direction writes what python-blosc2 expects: a hand-built frame whose
/// vlmetalayers were encoded from JSON (tags included) reads back in python-blosc2 as the
/// intended Python values, and its chunks as our data.
#[test]
fn container_attrs_json_to_msgpack_reads_back_in_python_blosc2() {
    let py = or_skip!(crate::support::python(
        "container_attrs_json_to_msgpack_reads_back_in_python_blosc2"
    ));
    let values = [
        ("s", json!("K\u{e9}lvin")),
        ("i", json!(42)),
        ("neg", json!(-129)),
        ("big", json!(u64::MAX)),
        ("small", json!(i64::MIN)),
        ("f", json!(2.5)),
        ("one", json!(1.0)),
        ("nan", json!({"__float__": "nan"})),
        ("inf", json!({"__float__": "-inf"})),
        ("m", json!({"x": [1, 2.5, null, true], "y": {}})),
        ("t", json!({"__tuple__": [1, "a", {"__tuple__": []}]})),
        ("b", json!({"__bytes__": "AAH/"})),
        ("c", json!({"__complex__": [1.5, -2.0]})),
        ("set", json!({"__set__": [1, 2, 3]})),
        (
            "nd",
            json!({"__ndarray__": {"dtype": {"str": "<i2"}, "shape": [3], "data": {"__bytes__": "AAABAAIA"}}}),
        ),
        // python-blosc2 accepts only str and bytes map keys (msgpack strict_map_key).
        (
            "keys",
            json!({"__map__": [[{"__bytes__": "AQ=="}, "one"], ["b", 2]]}),
        ),
        ("long", json!("x".repeat(300))),
        ("list", json!((0..20).collect::<Vec<_>>())),
    ];
    let vlmeta: Vec<(&str, Vec<u8>)> = values
        .iter()
        .map(|(k, v)| (*k, attrs::json_to_msgpack(v).unwrap()))
        .collect();
    let data: Vec<u8> = (0..64u8).collect();
    let f = build_frame(4, 64, 64, &memcpyed(&data, 4), &[0], &[], &vlmeta);
    let (_dir, p) = crate::support::temp_path("interop.b2frame");
    std::fs::write(&p, &f).unwrap();
    // Our own reader gives the same JSON back.
    let a = open_array(&p);
    for (k, v) in &values {
        assert_eq!(&a.attrs()[*k], v, "{k}");
    }
    let script = r#"
import sys, math, numpy as np, blosc2
s = blosc2.open(sys.argv[1])
v = s.vlmeta.getall()
assert v["s"] == "K\u00e9lvin", v["s"]
assert v["i"] == 42 and v["neg"] == -129
assert v["big"] == 2**64 - 1 and v["small"] == -2**63
assert v["f"] == 2.5 and isinstance(v["one"], float) and v["one"] == 1.0
assert math.isnan(v["nan"]) and v["inf"] == -math.inf
assert v["m"] == {"x": [1, 2.5, None, True], "y": {}}, v["m"]
assert v["t"] == (1, "a", ()), v["t"]
assert v["b"] == b"\x00\x01\xff", v["b"]
assert v["c"] == complex(1.5, -2.0), v["c"]
assert v["set"] == {1, 2, 3}, v["set"]
assert v["nd"].dtype == np.dtype("<i2") and v["nd"].tolist() == [0, 1, 2], v["nd"]
assert v["keys"] == {b"\x01": "one", "b": 2}, v["keys"]
assert v["long"] == "x" * 300 and v["list"] == list(range(20))
assert s.decompress_chunk(0) == bytes(range(64))
print("ok")
"#;
    let out = crate::support::run_python(&py, &["-c", script, p.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&out).trim(), "ok");
}

/// A fresh random set made by the python `code` (arguments: seed, count, output directory;
/// it writes `json` there): the seed (`B2FS_SEED` replays a run, printed), the directory and
/// the parsed records. The count comes from `count.0` (default `count.1`).
fn random_set(
    test: &str,
    py: &Path,
    code: &str,
    count: (&str, usize),
    (what, json): (&str, &str),
) -> (u64, tempfile::TempDir, Value) {
    let seed: u64 = std::env::var("B2FS_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 % 1_000_000_007)
        });
    let count: usize = crate::support::env_or(count.0, count.1);
    eprintln!("{test}: seed {seed} (replay with B2FS_SEED={seed}), {count} {what}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    crate::support::run_python(
        py,
        &["-c", code, &seed.to_string(), &count.to_string(), out],
    );
    let recs = load(&dir.path().join(json));
    (seed, dir, recs)
}
