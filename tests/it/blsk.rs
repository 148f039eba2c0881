//! The 2012 `blsk` layout (seed 004) as `docs/BLSK.md` defines it: roots written by
//! `scripts/gen_blsk.py` with python-blosc's Blosc1 chunks open as an array (flat dtype) or a
//! table (nested dtype) whose chunks decode to python-blosc's bytes; damaged roots are refused
//! with one line.

use std::path::Path;

use b2fs::codec;
use b2fs::container::{Array, Container, open};
use serde_json::{Value, json};

use crate::support;

fn chunk_shas(a: &Array) -> Vec<Value> {
    (0..a.nchunks())
        .map(|i| {
            json!(support::sha256_hex(
                &codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap()
            ))
        })
        .collect()
}

fn rows(a: &Array) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..a.nchunks() {
        let d = codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap();
        out.extend_from_slice(&d[..a.chunk_nbytes(i).unwrap()]);
    }
    out
}

fn generate(test: &str) -> Option<(tempfile::TempDir, Value)> {
    let py = support::python(test)?;
    let tmp = tempfile::tempdir().unwrap();
    support::run_python(&py, &["scripts/gen_blsk.py", tmp.path().to_str().unwrap()]);
    let m = std::fs::read_to_string(tmp.path().join("manifest.json")).unwrap();
    Some((tmp, serde_json::from_str(&m).unwrap()))
}

#[test]
fn blsk_flat_root_is_an_array() {
    let (tmp, m) = or_skip!(generate("blsk_flat_root_is_an_array"));
    let Container::Array(a) = open(&tmp.path().join("flat")).unwrap() else {
        panic!("not an array");
    };
    assert_eq!(a.geometry().shape, [1000, 3]);
    assert_eq!(a.geometry().chunkshape.as_deref(), Some(&[128u64, 3][..]));
    assert_eq!(a.nchunks(), 8);
    assert_eq!(Value::Array(chunk_shas(&a)), m["flat"]["chunks"]);
    assert_eq!(json!(support::sha256_hex(&rows(&a))), m["flat"]["data"]);
    assert_eq!(a.attrs()["temperature"]["value"], json!(23.5));
    assert_eq!(a.attrs()["ids"]["value"], json!([1, 3, 6, 10]));
    assert_eq!(a.bcolz_storage().unwrap()["dtype"], json!("float64"));
    assert_eq!(a.bcolz_sizes().unwrap()["shape"], json!([1000, 3]));
    // A window of a chunk reads the same bytes as the whole chunk.
    let whole = a.chunk_bytes(4).unwrap();
    let mut part = vec![0u8; 20];
    assert!(a.chunk_read_at(4, 10, &mut part, None).unwrap());
    assert_eq!(part, whole[10..30]);
    // Read-only.
    assert!(b2fs::container::write::check_writable(&a).is_some());
}

#[test]
fn blsk_nested_root_is_a_table() {
    let (tmp, m) = or_skip!(generate("blsk_nested_root_is_a_table"));
    let Container::Table(t) = open(&tmp.path().join("nested")).unwrap() else {
        panic!("not a table");
    };
    let names: Vec<&str> = t.columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["col1", "col2"]);
    for (name, col) in &t.columns {
        assert_eq!(
            Value::Array(chunk_shas(col)),
            m["nested"][name]["chunks"],
            "{name}"
        );
        assert_eq!(
            json!(support::sha256_hex(&rows(col))),
            m["nested"][name]["data"]
        );
        assert_eq!(col.geometry().shape, [500]);
    }
    assert_eq!(t.attrs, json!({}));
}

fn refused(root: &Path, what: &str) {
    match open(root) {
        Ok(_) => panic!("{what}: opened"),
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "{what}: {msg}");
        }
    }
}

#[test]
fn blsk_damaged_roots_refused() {
    let (tmp, _) = or_skip!(generate("blsk_damaged_roots_refused"));
    let flat = tmp.path().join("flat");
    let sc = flat.join("data/__2__.bin");
    let good = std::fs::read(&sc).unwrap();
    type Damage = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Damage)> = vec![
        ("index cut", Box::new(|b: &mut Vec<u8>| b.truncate(20))),
        (
            "nchunks huge",
            Box::new(|b: &mut Vec<u8>| b[12..16].copy_from_slice(&u32::MAX.to_le_bytes())),
        ),
        (
            "offset into header",
            Box::new(|b: &mut Vec<u8>| b[16..24].copy_from_slice(&3u64.to_le_bytes())),
        ),
        (
            "offset past end",
            Box::new(|b: &mut Vec<u8>| b[24..32].copy_from_slice(&u64::MAX.to_le_bytes())),
        ),
        ("bad magic", Box::new(|b: &mut Vec<u8>| b[0] = b'x')),
        ("typesize", Box::new(|b: &mut Vec<u8>| b[8] = 4)),
    ];
    for (what, damage) in cases {
        let mut b = good.clone();
        damage(&mut b);
        std::fs::write(&sc, &b).unwrap();
        refused(&flat, what);
    }
    std::fs::write(&sc, &good).unwrap();
    // A chunk whose cbytes overruns its room: the chunk read fails, the root opens.
    let mut b = good.clone();
    let o = u64::from_le_bytes(b[16..24].try_into().unwrap()) as usize;
    b[o + 12..o + 16].copy_from_slice(&i32::MAX.to_le_bytes());
    std::fs::write(&sc, &b).unwrap();
    let Container::Array(a) = open(&flat).unwrap() else {
        panic!("array");
    };
    assert!(a.chunk_bytes(3).is_err());
    std::fs::write(&sc, &good).unwrap();
    for (file, text) in [
        ("meta/nrows", "not a number"),
        ("meta/storage", "dtype: [unclosed"),
        (
            "meta/storage",
            "dtype: float64\nchunkshape: (10, 2)\nshape: (1000, 3)\n",
        ),
        (
            "meta/storage",
            "dtype: float64\nchunkshape: (128, 3)\nendianness: big\n",
        ),
        ("meta/nrows", "999"),
    ] {
        let p = flat.join(file);
        let old = std::fs::read(&p).unwrap();
        std::fs::write(&p, text).unwrap();
        refused(&flat, text);
        std::fs::write(&p, old).unwrap();
    }
}

/// Through the tree (no kernel): `__attrs__` and `meta/*` are JSON, `array.npy` loads in numpy
/// as the rows python-blosc compressed.
#[test]
fn blsk_tree_shows_json_meta_and_array_npy() {
    use b2fs::tree::{ROOT_INO, ReaderOptions, Tree, TreeOptions};
    let (tmp, m) = or_skip!(generate("blsk_tree_shows_json_meta_and_array_npy"));
    let py = support::python("blsk_tree_shows_json_meta_and_array_npy").unwrap();
    let opts = TreeOptions {
        reader: ReaderOptions {
            prefetch_chunks: 0,
            ..ReaderOptions::default()
        },
        ..TreeOptions::default()
    };
    let t = Tree::from_source(&tmp.path().join("flat"), opts).unwrap();
    let file = |path: &str| -> Vec<u8> {
        let ino = path.split('/').fold(ROOT_INO, |dir, name| {
            t.lookup(dir, name)
                .unwrap_or_else(|e| panic!("{path}: {e}"))
                .ino
        });
        let fh = t.open(ino, libc::O_RDONLY).unwrap();
        let mut out = Vec::new();
        loop {
            let got = t.read(ino, fh, out.len() as u64, 1 << 16).unwrap();
            if got.is_empty() {
                break;
            }
            out.extend_from_slice(&got);
        }
        t.release(fh).unwrap();
        out
    };
    let attrs: Value = serde_json::from_slice(&file("__attrs__")).unwrap();
    assert_eq!(attrs["ids"]["value"], json!([1, 3, 6, 10]));
    for meta in ["meta/sizes", "meta/storage"] {
        let v: Value = serde_json::from_slice(&file(meta)).unwrap();
        assert!(v.is_object(), "{meta}: {v}");
    }
    let npy = tmp.path().join("flat.npy");
    std::fs::write(&npy, file("array.npy")).unwrap();
    let said = support::python_says(
        &py,
        &[
            "-c",
            "import sys, hashlib, numpy as np\n\
             a = np.load(sys.argv[1])\n\
             print(list(a.shape), a.dtype, hashlib.sha256(a.tobytes()).hexdigest())",
            npy.to_str().unwrap(),
        ],
    );
    assert_eq!(
        said,
        format!("[1000, 3] float64 {}", m["flat"]["data"].as_str().unwrap())
    );
}
