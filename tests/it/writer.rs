//! Write-back (`b2fs::container::write`): commits to copies of the reference fixtures, checked
//! by the reference libraries (python-blosc2, caterva, bcolz) including their own later
//! mutations; crash safety after every step of a commit; refusals leave the bytes untouched;
//! `compact`.
//!
//! The parts: this file holds the shared set-ups (fixture copies, chunk patterns, the
//! reference checker, a frame's and a carray's commit case); `frames.rs` and `bcolz.rs`
//! commit to each kind; `ctable.rs` to ctables; `edges.rs` sources in unusual states;
//! `failed.rs` commits that fail before their commit point and other writers' files;
//! `crash.rs` a crash after every step; `refusals.rs` refused edits and `compact`.

use std::path::{Path, PathBuf};

use b2fs::codec;
use b2fs::container::write::{
    Edit, check_writable, chunk_cparams, commit, commit_column, commit_column_with_crash_after,
    commit_table_attrs, commit_with_crash_after, compact, lock_source_for_mount, repair_table,
};
use b2fs::container::{self, Array, ChunkKind, Container, SourceKind};
use serde_json::{Value, json};

use crate::support::{copy_tree, data_dir, python, python_says, run_python, sha256_hex};

mod bcolz;
mod crash;
mod ctable;
mod edges;
mod failed;
mod frames;
mod refusals;

/// A tempdir holding a copy of fixture `rel` (relative to tests/data); returns the copy's path.
fn fixture_copy(tmp: &tempfile::TempDir, rel: &str) -> PathBuf {
    let src = data_dir().join(rel);
    let dst = tmp.path().join(src.file_name().expect("name"));
    copy_tree(&src, &dst);
    dst
}

fn open_array(path: &Path) -> Array {
    match container::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())) {
        Container::Array(a) => a,
        Container::Table(_) => panic!("{} is a table", path.display()),
    }
}

/// Every chunk of `a`, decompressed by b2fs (bcolz leftover: its first chunk_nbytes bytes).
fn chunks_of(a: &Array) -> Vec<Vec<u8>> {
    (0..a.nchunks())
        .map(|i| {
            let c = a.chunk_bytes(i).expect("chunk bytes");
            let mut d = codec::decompress(&c).expect("decompress");
            d.truncate(a.chunk_nbytes(i).expect("nbytes"));
            d
        })
        .collect()
}

/// `len` bytes of a pattern that depends on `seed` (compressible, never all zero).
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u32 / 8).wrapping_mul(seed | 1).wrapping_add(seed) % 251) as u8 + 1)
        .collect()
}

/// `data` compressed the way new chunks of `a` must be.
fn encode(a: &Array, data: &[u8]) -> Vec<u8> {
    let p = chunk_cparams(a).expect("chunk_cparams");
    codec::compress(data, &p).expect("compress")
}

/// sha256 over every file below `path` (names and contents).
fn tree_hash(path: &Path) -> String {
    fn walk(p: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        if p.is_dir() {
            let mut names: Vec<_> = std::fs::read_dir(p)
                .expect("read_dir")
                .map(|e| e.expect("entry").path())
                .collect();
            names.sort();
            for n in names {
                walk(&n, out);
            }
        } else {
            out.push((p.display().to_string(), std::fs::read(p).expect("read")));
        }
    }
    let mut files = Vec::new();
    walk(path, &mut files);
    let mut all = Vec::new();
    for (n, b) in files {
        all.extend_from_slice(n.as_bytes());
        all.extend_from_slice(sha256_hex(&b).as_bytes());
    }
    sha256_hex(&all)
}

/// Writes `chunks` as `dir/{i}.bin` (and `attrs.json` when given).
fn write_expect(dir: &Path, chunks: &[Vec<u8>], attrs: Option<&Value>) {
    std::fs::create_dir_all(dir).expect("mkdir");
    for (i, c) in chunks.iter().enumerate() {
        std::fs::write(dir.join(format!("{i}.bin")), c).expect("write");
    }
    if let Some(a) = attrs {
        std::fs::write(dir.join("attrs.json"), a.to_string()).expect("write");
    }
}

/// Runs the reference-side checker (`scripts/oracle/writer_check.py`, modes in its docstring)
/// with `args`; it prints OK or fails.
fn check_py(py: &Path, args: &[&str]) {
    let mut all = vec!["scripts/oracle/writer_check.py"];
    all.extend_from_slice(args);
    let out = run_python(py, &all);
    assert!(String::from_utf8_lossy(&out).contains("OK"), "{args:?}");
}

/// Commits `edit` to the frame `rel`, then checks that b2fs and python-blosc2 read `want`
/// chunks (and the attrs, keys in order), and that python-blosc2 can mutate it afterwards.
fn frame_case(rel: &str, make: impl FnOnce(&Array) -> (Edit, Vec<Vec<u8>>), attrs: Option<Value>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, rel);
    let a = open_array(&path);
    assert!(check_writable(&a).is_none(), "{rel} writable");
    let (edit, want) = make(&a);
    commit(&a, &edit).unwrap_or_else(|e| panic!("{rel}: commit: {e}"));
    let b = open_array(&path);
    assert_eq!(chunks_of(&b), want, "{rel}: b2fs reads the new chunks");
    if let Some(Value::Object(m)) = &edit.attrs {
        let got: Vec<_> = b.vlmetalayers().iter().map(|v| v.name.clone()).collect();
        let keys: Vec<_> = m.keys().cloned().collect();
        assert_eq!(got, keys, "{rel}: vlmeta keys");
        for v in a.vlmetalayers() {
            if m.get(&v.name) == Some(&v.json) {
                let new = b.vlmetalayers().iter().find(|n| n.name == v.name);
                assert_eq!(
                    new.map(|n| &n.chunk),
                    Some(&v.chunk),
                    "{rel}: {} kept",
                    v.name
                );
            }
        }
    }
    let Some(py) = python(&format!("writer {rel}")) else {
        return;
    };
    let exp = tmp.path().join("expect");
    write_expect(&exp, &want, attrs.as_ref());
    let p = path.to_str().expect("utf8");
    check_py(&py, &["frame", p, exp.to_str().expect("utf8"), "mutate"]);
}

/// Commits `edit` to the carray `rel`; b2fs and bcolz read `want` (the whole array's bytes),
/// then bcolz appends, updates and flushes.
fn bcolz_case(rel: &str, make: impl FnOnce(&Array) -> (Edit, Vec<u8>), mutate: bool) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, rel);
    let a = open_array(&path);
    assert!(check_writable(&a).is_none(), "{rel} writable");
    let (edit, want) = make(&a);
    commit(&a, &edit).unwrap_or_else(|e| panic!("{rel}: commit: {e}"));
    let b = open_array(&path);
    assert_eq!(
        chunks_of(&b).concat(),
        want,
        "{rel}: b2fs reads the new carray"
    );
    if let Some(attrs) = &edit.attrs {
        assert_eq!(b.attrs(), attrs);
    }
    assert!(path.join("__attrs__").is_file(), "{rel}: __attrs__ exists");
    for i in b.nchunks()..a.nchunks() {
        let f = path.join(format!("data/__{i}.blp"));
        assert!(
            !f.exists(),
            "{rel}: {} removed after the commit",
            f.display()
        );
    }
    let sizes = std::fs::read_to_string(path.join("meta/sizes")).expect("sizes");
    assert!(
        sizes.starts_with("{\"shape\": [") && sizes.ends_with("}\n"),
        "{sizes}"
    );
    let Some(py) = python(&format!("writer {rel}")) else {
        return;
    };
    let exp = tmp.path().join("expect.bin");
    std::fs::write(&exp, &want).expect("write");
    let attrs = tmp.path().join("attrs.json");
    let attrs_arg = match &edit.attrs {
        Some(v) => {
            std::fs::write(&attrs, v.to_string()).expect("write");
            attrs.to_str().expect("utf8")
        }
        None => "-",
    };
    let p = path.to_str().expect("utf8");
    let mut args = vec!["bcolz", p, exp.to_str().expect("utf8"), attrs_arg];
    if mutate {
        args.push("mutate");
    }
    check_py(&py, &args);
}

/// An edit that replaces chunk `i` with `chunk`.
fn update(i: usize, chunk: Vec<u8>) -> Edit {
    Edit {
        updates: vec![(i, b2fs::container::write::Chunk::from(chunk))],
        ..Edit::default()
    }
}
