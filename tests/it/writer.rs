//! Write-back (`b2fs::container::write`): commits to copies of the reference fixtures, checked
//! by the reference libraries (python-blosc2, caterva, bcolz) including their own later
//! mutations; crash safety after every step of a commit; refusals leave the bytes untouched;
//! `compact`.

use std::path::{Path, PathBuf};

use b2fs::codec;
use b2fs::container::write::{
    Edit, check_writable, chunk_cparams, commit, commit_column, commit_column_with_crash_after,
    commit_table_attrs, commit_with_crash_after, compact, lock_source_for_mount, repair_table,
};
use b2fs::container::{self, Array, ChunkKind, Container, SourceKind};
use serde_json::{Value, json};

use crate::support::{copy_tree, data_dir, python, python_says, run_python, sha256_hex};

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

#[test]
fn writer_cframe_update_append_after_partial_and_attrs() {
    frame_case(
        "frames/schunk_lz4.b2frame",
        |a| {
            assert_eq!(a.chunk_nbytes(2).expect("n"), 800, "last chunk is partial");
            let mut want = chunks_of(a);
            let new0 = pattern(64000, 7);
            let app = pattern(64000, 9);
            want[0] = new0.clone();
            want.push(app.clone());
            let edit = Edit {
                updates: vec![(0, b2fs::container::write::Chunk::from(encode(a, &new0)))],
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &app))],
                truncate: None,
                attrs: Some(json!({"made_by": "b2fs gen_fixtures", "unit": "m", "n": [1, 2]})),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({
            "keys": ["made_by", "unit", "n"],
            "values": {"made_by": "b2fs gen_fixtures", "unit": "m", "n": [1, 2]}
        })),
    );
}

#[test]
fn writer_cframe_append_switches_to_variable_mode() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_lz4.b2frame");
    let a = open_array(&path);
    let edit = Edit {
        appends: vec![b2fs::container::write::Chunk::from(encode(
            &a,
            &pattern(1000, 3),
        ))],
        ..Edit::default()
    };
    commit(&a, &edit).expect("commit");
    let b = open_array(&path);
    let info = b.frame_info().expect("frame");
    assert_eq!(info.chunksize, 0);
    assert_eq!(info.general_flags, 0x53);
    assert_eq!(info.header_len, a.frame_info().expect("frame").header_len);
    assert_eq!(b.nbytes(), a.nbytes() + 1000);
}

#[test]
fn writer_cframe_truncate_and_attrs_delete() {
    frame_case(
        "frames/schunk_zstd.b2frame",
        |a| {
            let mut want = chunks_of(a);
            want.truncate(a.nchunks() - 1);
            let edit = Edit {
                truncate: Some(a.nchunks() - 1),
                attrs: Some(json!({})),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({"keys": [], "values": {}})),
    );
}

#[test]
fn writer_sframe_update_append_attrs() {
    frame_case(
        "frames/schunk_sparse.b2frame",
        |a| {
            assert_eq!(a.kind(), SourceKind::Sframe);
            let mut want = chunks_of(a);
            let new1 = pattern(4000, 5);
            let app = pattern(4000, 11);
            want[1] = new1.clone();
            want.push(app.clone());
            let edit = Edit {
                updates: vec![(1, b2fs::container::write::Chunk::from(encode(a, &new1)))],
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &app))],
                truncate: None,
                attrs: Some(json!({"k": "v"})),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({"keys": ["k"], "values": {"k": "v"}})),
    );
}

#[test]
fn writer_sframe_truncate_removes_chunk_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    let a = open_array(&path);
    let mut want = chunks_of(&a);
    want.truncate(3);
    commit(
        &a,
        &Edit {
            truncate: Some(3),
            ..Edit::default()
        },
    )
    .expect("commit");
    // Removed once no version opened before the commit is open (`a` still is).
    assert!(path.join("00000003.chunk").exists());
    drop(a);
    assert!(!path.join("00000003.chunk").exists());
    assert_eq!(chunks_of(&open_array(&path)), want);
    if let Some(py) = python("writer_sframe_truncate") {
        let exp = tmp.path().join("expect");
        write_expect(&exp, &want, None);
        let p = path.to_str().expect("utf8");
        check_py(&py, &["frame", p, exp.to_str().expect("utf8"), "mutate"]);
    }
}

#[test]
fn writer_b2nd_1d_update_zeros_append_attrs() {
    frame_case(
        "frames/b2nd_attrs.b2nd",
        |a| {
            let cs = a.chunksize();
            let mut want = chunks_of(a);
            let new1 = pattern(cs, 13);
            let zeros = vec![0u8; cs];
            let app = pattern(cs, 17);
            want[1] = new1.clone();
            want[2] = zeros.clone();
            want.push(app.clone());
            let z = encode(a, &zeros);
            assert_eq!(z.len(), 32, "an all-zero chunk encodes as a special chunk");
            let mut attrs = a.attrs().clone();
            let m = attrs.as_object_mut().expect("object");
            m.insert("int".into(), json!(43));
            m.shift_remove("neg");
            m.insert("added".into(), json!({"x": [1.5, "y"]}));
            let edit = Edit {
                updates: vec![
                    (1, b2fs::container::write::Chunk::from(encode(a, &new1))),
                    (2, b2fs::container::write::Chunk::from(z)),
                ],
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &app))],
                truncate: None,
                attrs: Some(attrs),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({
            "keys": ["str", "int", "big", "float", "bool", "none", "list", "dict", "bytes",
                     "tuple", "complex", "set", "ndarray", "ndarray2d", "added"],
            "values": {"str": "K\u{e9}lvin", "int": 43, "added": {"x": [1.5, "y"]}}
        })),
    );
}

#[test]
fn writer_b2nd_1d_shape_follows_chunks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/b2nd_1d_f8.b2nd");
    let a = open_array(&path);
    let app = encode(&a, &pattern(a.chunksize(), 1));
    commit(
        &a,
        &Edit {
            appends: vec![b2fs::container::write::Chunk::from(app)],
            ..Edit::default()
        },
    )
    .expect("append");
    let b = open_array(&path);
    assert_eq!(b.geometry().shape, vec![1500]);
    assert_eq!(b.frame_index_entry(4).map(|e| e >= 0), Some(true));
    commit(
        &b,
        &Edit {
            truncate: Some(2),
            ..Edit::default()
        },
    )
    .expect("truncate");
    let c = open_array(&path);
    assert_eq!(c.geometry().shape, vec![600]);
    assert_eq!(c.nchunks(), 2);
    if let Some(py) = python("writer_b2nd_1d_shape") {
        let exp = tmp.path().join("expect");
        write_expect(&exp, &chunks_of(&c), None);
        let p = path.to_str().expect("utf8");
        check_py(&py, &["frame", p, exp.to_str().expect("utf8"), "mutate"]);
    }
}

#[test]
fn writer_b2nd_zero_update_is_special_offset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/b2nd_1d_f8.b2nd");
    let a = open_array(&path);
    let z = encode(&a, &vec![0u8; a.chunksize()]);
    commit(
        &a,
        &Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(z))],
            ..Edit::default()
        },
    )
    .expect("commit");
    let b = open_array(&path);
    assert_eq!(b.frame_index_entry(0), Some((0x81u64 << 56) as i64));
    assert_eq!(b.chunk_kind(0).expect("kind"), ChunkKind::Zeros);
}

#[test]
fn writer_b2nd_2d_update() {
    frame_case(
        "frames/b2nd_2d_f8_lz4.b2nd",
        |a| {
            let mut want = chunks_of(a);
            let new1 = pattern(a.chunksize(), 19);
            want[1] = new1.clone();
            let edit = Edit {
                updates: vec![(1, b2fs::container::write::Chunk::from(encode(a, &new1)))],
                ..Edit::default()
            };
            (edit, want)
        },
        None,
    );
}

#[test]
fn writer_caterva_cframe_update() {
    frame_case(
        "frames/caterva_cframe.caterva",
        |a| {
            let mut want = chunks_of(a);
            let new2 = pattern(a.chunksize(), 23);
            want[2] = new2.clone();
            let edit = Edit {
                updates: vec![(2, b2fs::container::write::Chunk::from(encode(a, &new2)))],
                ..Edit::default()
            };
            (edit, want)
        },
        None,
    );
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

#[test]
fn writer_bcolz_update_grow_leftover_append_attrs() {
    bcolz_case(
        "bcolz/carray_i4_leftover",
        |a| {
            // 25 int32 items, chunklen 10: chunks of 10, 10, 5.
            let new0: Vec<u8> = (100..110i32).flat_map(|v| v.to_le_bytes()).collect();
            let full2: Vec<u8> = (20..30i32).flat_map(|v| v.to_le_bytes()).collect();
            let tail: Vec<u8> = (30..33i32).flat_map(|v| v.to_le_bytes()).collect();
            let mut want = chunks_of(a);
            want[0] = new0.clone();
            want[2] = full2.clone();
            want.push(tail.clone());
            let edit = Edit {
                updates: vec![
                    (0, b2fs::container::write::Chunk::from(encode(a, &new0))),
                    (2, b2fs::container::write::Chunk::from(encode(a, &full2))),
                ],
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &tail))],
                truncate: None,
                attrs: Some(json!({"unit": "K\u{e9}lvin", "n": 3})),
                ..Edit::default()
            };
            (edit, want.concat())
        },
        true,
    );
}

#[test]
fn writer_bcolz_truncate_removes_chunk_files() {
    bcolz_case(
        "bcolz/carray_i4_leftover",
        |a| {
            let mut want = chunks_of(a);
            want.truncate(2);
            let edit = Edit {
                truncate: Some(2),
                ..Edit::default()
            };
            (edit, want.concat())
        },
        true,
    );
}

#[test]
fn writer_ctable_column_update_and_table_attrs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "bcolz/ctable_3cols");
    let Container::Table(t) = container::open(&path).expect("open") else {
        panic!("not a table");
    };
    let (_, col) = t.columns.iter().find(|(n, _)| n == "val").expect("val");
    let mut want = chunks_of(col);
    let new0: Vec<u8> = (0..1000)
        .flat_map(|v| (v as f64 * 0.5).to_le_bytes())
        .collect();
    want[0] = new0.clone();
    commit(
        col,
        &Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(encode(col, &new0)))],
            ..Edit::default()
        },
    )
    .expect("commit");
    let attrs = json!({"title": "edited", "rows": 2500});
    commit_table_attrs(&t, &attrs).expect("table attrs");
    let Container::Table(t2) = container::open(&path).expect("reopen") else {
        panic!("not a table");
    };
    assert_eq!(t2.attrs, attrs);
    let (_, col2) = t2.columns.iter().find(|(n, _)| n == "val").expect("val");
    assert_eq!(chunks_of(col2), want);
    if let Some(py) = python("writer_ctable") {
        let exp = tmp.path().join("val.bin");
        std::fs::write(&exp, want.concat()).expect("write");
        let p = path.to_str().expect("utf8");
        check_py(&py, &["ctable", p, "val", exp.to_str().expect("utf8")]);
    }
}

/// An edit that replaces chunk `i` with `chunk`.
fn update(i: usize, chunk: Vec<u8>) -> Edit {
    Edit {
        updates: vec![(i, b2fs::container::write::Chunk::from(chunk))],
        ..Edit::default()
    }
}

mod crash;
mod ctable;
mod edges;
mod refusals;

/// A commit that fails before its commit point leaves the source byte-identical: the sparse
/// frame's new chunk files go when its new index cannot be written, and a shrinking bcolz
/// carray's staged chunk files go when its `meta/sizes` cannot be replaced (each temp file's
/// creation failed by a directory made at its name just before, as a full disk fails it).
#[test]
fn writer_a_commit_failing_before_its_commit_point_leaves_the_source_as_it_was() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Sparse frame: an update makes a new chunk file, then the index's temp file fails.
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    let a = open_array(&path);
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![updated_chunk(&a, 1, &pattern(4000, 5))],
        ..Edit::default()
    };
    let (hook, blockers) = block_temp_files();
    let e = b2fs::container::write::commit_racing(&a, &edit, hook)
        .expect_err("the index cannot be written");
    assert!(e.to_string().contains("b2fs-tmp"), "{e}");
    remove_blockers(&blockers);
    assert_eq!(
        tree_hash(&path),
        before,
        "sparse frame: the new chunk file stays"
    );
    commit(&a, &edit).expect("the same commit once the disk allows it");
    assert_eq!(chunks_of(&open_array(&path))[1], pattern(4000, 5));

    // bcolz, shrinking: the chunks are staged, then `meta/sizes` (the commit point) fails.
    let path = fixture_copy(&tmp, "bcolz/carray_appended");
    let a = open_array(&path);
    let n = a.nchunks();
    assert!(n >= 3, "{n} chunks");
    let nbytes = a.chunk_nbytes(n - 2).expect("nbytes");
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![updated_chunk(&a, n - 2, &pattern(nbytes, 7))],
        truncate: Some(n - 1),
        ..Edit::default()
    };
    let (hook, blockers) = block_temp_files();
    b2fs::container::write::commit_racing(&a, &edit, hook)
        .expect_err("meta/sizes cannot be replaced");
    assert!(
        blockers
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.to_string_lossy().ends_with("sizes.b2fs-tmp")),
        "{blockers:?}"
    );
    remove_blockers(&blockers);
    assert_eq!(tree_hash(&path), before, "bcolz: a staged chunk file stays");
}

type Blockers = std::sync::Arc<std::sync::Mutex<Vec<PathBuf>>>;

/// A hook for `commit_racing` that makes a directory at the name of every whole-file
/// rewrite's temp file (`*.b2fs-tmp` but a bcolz chunk's `__N.blp.b2fs-tmp`) just before the
/// commit creates it, and the directories made.
fn block_temp_files() -> (b2fs::container::write::BeforeCreate, Blockers) {
    let made: Blockers = Default::default();
    let record = made.clone();
    let hook = Box::new(move |p: &Path| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".b2fs-tmp") && !name.contains(".blp") {
            std::fs::create_dir(p).expect("mkdir");
            record.lock().unwrap().push(p.to_path_buf());
        }
    });
    (hook, made)
}

fn remove_blockers(made: &Blockers) {
    for p in made.lock().unwrap().drain(..) {
        std::fs::remove_dir(&p).expect("rmdir");
    }
}

/// A carray's commit never writes or removes a temp file another writer made: one at
/// `data/__N.blp.b2fs-tmp` (the name b2fs used before session 26) of a chunk the commit
/// replaces stays, with their bytes, through a commit that fails after staging its chunks
/// (its `meta/sizes` cannot be replaced) and through a successful one.
#[test]
fn writer_a_bcolz_commit_leaves_another_writers_temp_files_alone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "bcolz/carray_appended");
    let a = open_array(&path);
    let n = a.nchunks();
    let nbytes = a.chunk_nbytes(n - 2).expect("nbytes");
    let theirs = path.join(format!("data/__{}.blp.b2fs-tmp", n - 2));
    std::fs::write(&theirs, b"their chunk").expect("their file");
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![updated_chunk(&a, n - 2, &pattern(nbytes, 11))],
        truncate: Some(n - 1),
        ..Edit::default()
    };
    let (hook, blockers) = block_temp_files();
    b2fs::container::write::commit_racing(&a, &edit, hook)
        .expect_err("meta/sizes cannot be replaced");
    remove_blockers(&blockers);
    assert_eq!(
        std::fs::read(&theirs).expect("theirs stays"),
        b"their chunk"
    );
    assert_eq!(tree_hash(&path), before, "the staged chunk file is gone");
    commit(&a, &edit).expect("the same commit once alone");
    assert_eq!(chunks_of(&open_array(&path))[n - 2], pattern(nbytes, 11));
    assert_eq!(
        std::fs::read(&theirs).expect("theirs stays"),
        b"their chunk"
    );
}

/// A sparse frame's commit never writes, renames or removes a temp file another writer
/// made: a `chunks.b2frame.b2fs-tmp` of theirs (the name b2fs used before session 26) stays
/// through a failed commit and a successful one, and a file they made at the name of the
/// commit's own temp file fails the commit (`ContainerError::Io` with EEXIST, EIO at the
/// mount) and stays with their bytes; the source is as it was.
#[test]
fn writer_a_sparse_commit_leaves_another_writers_temp_files_alone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    let theirs = path.join("chunks.b2frame.b2fs-tmp");
    std::fs::write(&theirs, b"another writer's index").expect("their file");
    let a = open_array(&path);
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![updated_chunk(&a, 1, &pattern(4000, 9))],
        ..Edit::default()
    };
    // They make a file at the name of the commit's own temp file just before it does.
    let taken: Blockers = Default::default();
    let record = taken.clone();
    let hook = Box::new(move |p: &Path| {
        if p.to_string_lossy().ends_with(".b2fs-tmp") {
            // Old b2fs: the shared name, theirs already (left as it is).
            if !p.exists() {
                std::fs::write(p, b"theirs too").expect("their temp file");
                record.lock().unwrap().push(p.to_path_buf());
            }
        }
    });
    let e = b2fs::container::write::commit_racing(&a, &edit, hook).expect_err("a taken name");
    let b2fs::container::ContainerError::Io { source, .. } = &e else {
        panic!("an I/O error: {e}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
    assert_eq!(
        std::fs::read(&theirs).expect("theirs stays"),
        b"another writer's index"
    );
    let taken = taken.lock().unwrap().clone();
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!(std::fs::read(&taken[0]).expect("stays"), b"theirs too");
    std::fs::remove_file(&taken[0]).expect("rm");
    assert_eq!(tree_hash(&path), before, "the commit's chunk file is gone");
    commit(&a, &edit).expect("the same commit once alone");
    assert_eq!(chunks_of(&open_array(&path))[1], pattern(4000, 9));
    assert_eq!(
        std::fs::read(&theirs).expect("theirs stays"),
        b"another writer's index"
    );
}

/// A sparse frame's commit removes, when it fails before its commit point, only the chunk
/// files it made: a file another writer made meanwhile at a name it planned is theirs (the
/// commit fails as for another writer's change, ESTALE) and stays, with their bytes.
#[test]
fn writer_a_failed_sparse_commit_removes_only_the_chunk_files_it_made() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    let a = open_array(&path);
    let before = tree_hash(&path);
    let edit = Edit {
        updates: vec![
            updated_chunk(&a, 0, &pattern(a.chunk_nbytes(0).expect("nbytes"), 3)),
            updated_chunk(&a, 1, &pattern(a.chunk_nbytes(1).expect("nbytes"), 5)),
        ],
        ..Edit::default()
    };
    // Another writer's temp file too (at the name b2fs used before session 26): left alone.
    let blocker = path.join("chunks.b2frame.b2fs-tmp");
    std::fs::write(&blocker, b"their index").expect("their temp file");
    let mut planned = Vec::new();
    let theirs: std::sync::Arc<std::sync::Mutex<Option<PathBuf>>> = Default::default();
    let placed = theirs.clone();
    let hook = Box::new(move |p: &Path| {
        planned.push(p.to_path_buf());
        if planned.len() == 2 {
            std::fs::write(p, b"another writer's chunk").expect("their file");
            *placed.lock().expect("lock") = Some(p.to_path_buf());
        }
    });
    let e = b2fs::container::write::commit_racing(&a, &edit, hook).expect_err("a conflict");
    let theirs = theirs.lock().expect("lock").clone().expect("placed");
    assert_eq!(
        std::fs::read(&theirs).expect("their file stays"),
        b"another writer's chunk"
    );
    assert!(
        matches!(e, b2fs::container::ContainerError::Changed { .. }),
        "another writer's change: {e}"
    );
    std::fs::remove_file(&theirs).expect("rm");
    assert_eq!(
        std::fs::read(&blocker).expect("their temp file stays"),
        b"their index"
    );
    std::fs::remove_file(&blocker).expect("rm");
    assert_eq!(
        tree_hash(&path),
        before,
        "the commit's own chunk file is gone"
    );
    commit(&a, &edit).expect("the same commit once alone");
    let now = chunks_of(&open_array(&path));
    assert_eq!(now[0], pattern(now[0].len(), 3));
    assert_eq!(now[1], pattern(now[1].len(), 5));
}

/// An update of chunk `index` of `a` to `data`, compressed as `a`'s chunks are.
fn updated_chunk(a: &Array, index: usize, data: &[u8]) -> (usize, b2fs::container::write::Chunk) {
    (index, b2fs::container::write::Chunk::from(encode(a, data)))
}
