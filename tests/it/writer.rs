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

use crate::support::{data_dir, python, python_says, run_python, sha256_hex};

/// The reference-side checker, written to each test's tempdir (see its docstring).
const CHECK_PY: &str = r##"
"""Reference-library checks for tests/it/writer.rs (python-blosc2, caterva, bcolz).

Usage: writer_check.py MODE ARGS... ; prints OK, raises on any mismatch.

  frame PATH EXPDIR [mutate]     python-blosc2 reads the chunks EXPDIR/{i}.bin (and attrs,
                                 logical array, caterva view); with `mutate`, python-blosc2
                                 then updates, appends and sets vlmeta and everything is
                                 re-checked after reopening.
  crash LISTFILE                 every line `PATH OLDDIR NEWDIR`: the frame opens and is
                                 entirely the old or entirely the new content.
  bcolz PATH EXP.bin ATTRS|- [mutate]
                                 bcolz reads exactly EXP.bin (and attrs); with `mutate` bcolz
                                 appends, updates, flushes and everything is re-checked.
  bcolzcrash LISTFILE            every line `PATH OLD.bin NEW.bin CHUNKBYTES`: each chunk of
                                 the carray equals the old or the new content.
  ctable PATH COL=EXP.bin... [mutate]
                                 the ctable opens and each column COL reads EXP.bin; with
                                 `mutate` bcolz appends rows, flushes and re-checks.
"""

import json
import os
import sys

import numpy as np


def chunks_in(d):
    n = 0
    while os.path.exists(os.path.join(d, "%d.bin" % n)):
        n += 1
    return [open(os.path.join(d, "%d.bin" % i), "rb").read() for i in range(n)]


def deblock(chunks, shape, cs, bs, dtype):
    """The logical array of a b2nd/caterva frame from its decompressed chunks."""
    nd = len(shape)
    ext = [-(-c // b) * b for c, b in zip(cs, bs)]
    grid = [-(-s // c) if c else 0 for s, c in zip(shape, cs)]
    out = np.zeros(shape, dtype=dtype)
    for k, raw in enumerate(chunks):
        arr = np.frombuffer(raw, dtype=dtype)
        nb = [e // b for e, b in zip(ext, bs)]
        blk = arr.reshape(tuple(nb) + tuple(bs))
        perm = [x for d in range(nd) for x in (d, nd + d)]
        full = blk.transpose(perm).reshape(ext)
        idx = np.unravel_index(k, grid)
        sl_out, sl_in = [], []
        for d in range(nd):
            o = idx[d] * cs[d]
            n = min(cs[d], shape[d] - o)
            sl_out.append(slice(o, o + n))
            sl_in.append(slice(0, n))
        out[tuple(sl_out)] = full[tuple(sl_in)]
    return out


def check_frame(path, chunks, attrs, views=True):
    import blosc2

    o = blosc2.open(path, mode="r")
    s = o.schunk if hasattr(o, "schunk") else o
    assert s.nchunks == len(chunks), (s.nchunks, len(chunks))
    for i, want in enumerate(chunks):
        got = s.decompress_chunk(i)
        assert got == want, "chunk %d differs (%d vs %d bytes)" % (i, len(got), len(want))
    if attrs is not None:
        keys = list(s.vlmeta.keys())
        assert keys == attrs["keys"], (keys, attrs["keys"])
        for k, v in attrs["values"].items():
            assert s.vlmeta[k] == v, (k, s.vlmeta[k], v)
    if isinstance(o, blosc2.NDArray):
        want = deblock(chunks, o.shape, o.chunks, o.blocks, o.dtype)
        assert np.array_equal(o[...], want, equal_nan=o.dtype.kind == "f"), "array differs"
    meta = s.meta
    if views and "caterva" in meta and "b2nd" not in meta:
        import caterva

        c = caterva.open(path)
        _, _, shape, cs, bs = meta["caterva"]
        dt = np.dtype((np.void, c.itemsize))
        want = deblock(chunks, tuple(shape), cs, bs, dt)
        assert np.asarray(c[...]).tobytes() == want.tobytes(), "caterva view differs"
    return o


def mutate_frame(path, chunks, attrs):
    import blosc2

    o = blosc2.open(path, mode="a")
    if isinstance(o, blosc2.NDArray):
        before = o[...].copy()
        first = (0,) * o.ndim
        o[first] = 42
        before[first] = 42
        if o.ndim == 1:
            old = o.shape[0]
            o.resize((old + 7,))
            o[old:] = np.arange(7).astype(o.dtype)
            before = np.concatenate([before, np.arange(7).astype(o.dtype)])
        o.vlmeta["py"] = "yes"
        del o
        a = blosc2.open(path, mode="r")
        assert np.array_equal(a[...], before), "array after python mutation differs"
        keys = list(a.schunk.vlmeta.keys())
        assert keys == attrs["keys"] + ["py"], keys
        return
    s = o
    # Never all zeros: C-Blosc2 would store a zero chunk as a special offset, which it cannot
    # read back in a variable-size frame (docs/format/CONTAINERS.md 1.5, "Hazard").
    new0 = bytes((b + 1) % 256 or 1 for b in reversed(chunks[0]))
    s.update_data(0, new0, copy=True)
    extra = np.arange(100, dtype=np.uint8).tobytes() * s.typesize
    s.append_data(extra)
    s.vlmeta["py"] = "yes"
    del s, o
    want = [new0] + chunks[1:] + [extra]
    # An SChunk-level append makes a caterva view inconsistent: check the chunks only.
    check_frame(path, want, None, views=False)
    import blosc2 as b

    s = b.open(path, mode="r")
    s = s.schunk if hasattr(s, "schunk") else s
    if attrs is not None:
        assert list(s.vlmeta.keys()) == attrs["keys"] + ["py"]


def frame_mode(args):
    path, expdir = args[0], args[1]
    chunks = chunks_in(expdir)
    ap = os.path.join(expdir, "attrs.json")
    attrs = json.load(open(ap)) if os.path.exists(ap) else None
    check_frame(path, chunks, attrs)
    if "mutate" in args[2:]:
        if attrs is None:
            import blosc2

            o = blosc2.open(path, mode="r")
            s = o.schunk if hasattr(o, "schunk") else o
            attrs = {"keys": list(s.vlmeta.keys()), "values": {}}
        mutate_frame(path, chunks, attrs)


def crash_mode(args):
    import blosc2

    for line in open(args[0]):
        path, olddir, newdir = line.split()
        old, new = chunks_in(olddir), chunks_in(newdir)
        o = blosc2.open(path, mode="r")
        s = o.schunk if hasattr(o, "schunk") else o
        got = [s.decompress_chunk(i) for i in range(s.nchunks)]
        assert got == old or got == new, "%s: neither old nor new (%d chunks)" % (path, len(got))


def bcolz_mode(args):
    import bcolz

    path, exp, attrs = args[0], args[1], args[2]
    want = open(exp, "rb").read()
    c = bcolz.open(path, mode="r")
    got = c[:].tobytes()
    assert got == want, "carray differs (%d vs %d bytes)" % (len(got), len(want))
    if attrs != "-":
        wa = json.load(open(attrs))
        assert dict(c.attrs) == wa, (dict(c.attrs), wa)
    if "mutate" in args[3:]:
        dt = c.dtype
        arr = c[:].copy()
        del c
        c = bcolz.open(path, mode="a")
        add = np.arange(13).astype(dt)
        c.append(add)
        c[0] = 99
        c.flush()
        del c
        arr = np.concatenate([arr, add])
        arr[0] = 99
        c = bcolz.open(path, mode="r")
        assert c[:].tobytes() == arr.tobytes(), "carray after bcolz mutation differs"


def bcolzcrash_mode(args):
    import bcolz

    for line in open(args[0]):
        path, oldf, newf, cb = line.split()
        cb = int(cb)
        old, new = open(oldf, "rb").read(), open(newf, "rb").read()
        got = bcolz.open(path, mode="r")[:].tobytes()
        assert len(got) in (len(old), len(new)), (path, len(got))
        for k in range(0, len(got), cb):
            seg = got[k : k + cb]
            ok = seg in (old[k : k + len(seg)], new[k : k + len(seg)])
            assert ok, "%s: chunk at byte %d is neither old nor new" % (path, k)


def ctable_mode(args):
    import bcolz

    path, cols = args[0], [a for a in args[1:] if "=" in a]
    t = bcolz.open(path, mode="r")
    for c in cols:
        col, exp = c.split("=", 1)
        assert t[col][:].tobytes() == open(exp, "rb").read(), "column %s differs" % col
    rows = t[:]
    assert len(rows) == len(t), "table rows"
    if "mutate" in args:
        del t
        t = bcolz.open(path, mode="a")
        t.append(rows[:5])
        t.flush()
        del t
        t = bcolz.open(path, mode="r")
        assert len(t) == len(rows) + 5, (len(t), len(rows))
        assert t[:].tobytes() == rows.tobytes() + rows[:5].tobytes(), "table after append"


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    {
        "frame": frame_mode,
        "crash": crash_mode,
        "bcolz": bcolz_mode,
        "bcolzcrash": bcolzcrash_mode,
        "ctable": ctable_mode,
    }[mode](args)
    print("OK")


main()
"##;

/// Copies `src` (file or directory tree) to `dst`.
fn copy_tree(src: &Path, dst: &Path) {
    if src.is_dir() {
        std::fs::create_dir_all(dst).expect("mkdir");
        for e in std::fs::read_dir(src).expect("read_dir") {
            let e = e.expect("entry");
            copy_tree(&e.path(), &dst.join(e.file_name()));
        }
    } else {
        std::fs::create_dir_all(dst.parent().expect("parent")).expect("mkdir");
        std::fs::copy(src, dst).expect("copy");
    }
}

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

/// Runs the checker in `tmp` with `args`.
fn check_py(py: &Path, tmp: &Path, args: &[&str]) {
    let script = tmp.join("writer_check.py");
    if !script.exists() {
        std::fs::write(&script, CHECK_PY).expect("write script");
    }
    let mut all = vec![script.to_str().expect("utf8")];
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
    check_py(
        &py,
        tmp.path(),
        &["frame", p, exp.to_str().expect("utf8"), "mutate"],
    );
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
                updates: vec![(0, encode(a, &new0))],
                appends: vec![encode(a, &app)],
                truncate: None,
                attrs: Some(json!({"made_by": "b2fs gen_fixtures", "unit": "m", "n": [1, 2]})),
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
        appends: vec![encode(&a, &pattern(1000, 3))],
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
                updates: vec![(1, encode(a, &new1))],
                appends: vec![encode(a, &app)],
                truncate: None,
                attrs: Some(json!({"k": "v"})),
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
        check_py(
            &py,
            tmp.path(),
            &["frame", p, exp.to_str().expect("utf8"), "mutate"],
        );
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
                updates: vec![(1, encode(a, &new1)), (2, z)],
                appends: vec![encode(a, &app)],
                truncate: None,
                attrs: Some(attrs),
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
            appends: vec![app],
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
        check_py(
            &py,
            tmp.path(),
            &["frame", p, exp.to_str().expect("utf8"), "mutate"],
        );
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
            updates: vec![(0, z)],
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
                updates: vec![(1, encode(a, &new1))],
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
                updates: vec![(2, encode(a, &new2))],
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
    check_py(&py, tmp.path(), &args);
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
                updates: vec![(0, encode(a, &new0)), (2, encode(a, &full2))],
                appends: vec![encode(a, &tail)],
                truncate: None,
                attrs: Some(json!({"unit": "K\u{e9}lvin", "n": 3})),
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
            updates: vec![(0, encode(col, &new0))],
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
        check_py(
            &py,
            tmp.path(),
            &["ctable", p, "val", exp.to_str().expect("utf8")],
        );
    }
}

/// Runs `edit` on fresh copies of `rel` with a crash after every step count until the commit
/// completes; after each, b2fs and the reference library see entirely the old or the new
/// source (bcolz: every chunk old or new). Returns the number of steps of the full commit.
fn crash_case(rel: &str, make: &dyn Fn(&Array) -> Edit) -> usize {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = fixture_copy(&tmp, rel);
    let a = open_array(&pristine);
    let bcolz = a.kind() == SourceKind::BcolzCarray;
    let old = chunks_of(&a);
    let edit = make(&a);
    // The new content: a full commit on one more copy.
    let done = tmp.path().join("done");
    let full = done.join(pristine.file_name().expect("name"));
    copy_tree(&pristine, &full);
    commit(&open_array(&full), &edit).expect("full commit");
    let new = chunks_of(&open_array(&full));
    assert_ne!(old, new);
    let olddir = tmp.path().join("old");
    let newdir = tmp.path().join("new");
    write_expect(&olddir, &old, None);
    write_expect(&newdir, &new, None);
    std::fs::write(tmp.path().join("old.bin"), old.concat()).expect("write");
    std::fs::write(tmp.path().join("new.bin"), new.concat()).expect("write");
    let mut lines = String::new();
    let mut k = 0;
    loop {
        let dir = tmp.path().join(format!("k{k}"));
        let copy = dir.join(pristine.file_name().expect("name"));
        copy_tree(&pristine, &copy);
        let completed = commit_with_crash_after(&open_array(&copy), &edit, k)
            .unwrap_or_else(|e| panic!("{rel} k={k}: {e}"));
        let got = chunks_of(&open_array(&copy));
        if bcolz {
            let cb = a.chunksize();
            let (o, n, g) = (old.concat(), new.concat(), got.concat());
            assert!(g.len() == o.len() || g.len() == n.len(), "{rel} k={k}");
            for (c, seg) in g.chunks(cb).enumerate() {
                let at = c * cb;
                let is = |v: &[u8]| v.get(at..at + seg.len()) == Some(seg);
                assert!(
                    is(&o) || is(&n),
                    "{rel} k={k}: chunk {c} neither old nor new"
                );
            }
            lines += &format!(
                "{} {} {} {cb}\n",
                copy.display(),
                tmp.path().join("old.bin").display(),
                tmp.path().join("new.bin").display()
            );
        } else {
            assert!(got == old || got == new, "{rel} k={k}: neither old nor new");
            if copy.is_dir() {
                sparse_leftovers_go(&copy, &format!("{rel} k={k}"));
            }
            lines += &format!(
                "{} {} {}\n",
                copy.display(),
                olddir.display(),
                newdir.display()
            );
        }
        if completed {
            assert_eq!(got, new, "{rel}: completed commit");
            break;
        }
        k += 1;
    }
    eprintln!("{rel}: crash-tested after each of {k} steps");
    if let Some(py) = python(&format!("writer crash {rel}")) {
        let list = tmp.path().join("list.txt");
        std::fs::write(&list, lines).expect("write");
        let mode = if bcolz { "bcolzcrash" } else { "crash" };
        check_py(&py, tmp.path(), &[mode, list.to_str().expect("utf8")]);
    }
    k
}

/// After a crash of a sparse-frame commit: the next commit (of the attributes, here on a
/// copy) leaves only the chunk files its index references; a crash leaves none behind for good.
fn sparse_leftovers_go(src: &Path, what: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let copy = tmp.path().join("s.b2frame");
    copy_tree(src, &copy);
    let a = open_array(&copy);
    let edit = Edit {
        attrs: Some(json!({"after": "crash"})),
        ..Edit::default()
    };
    commit(&a, &edit).expect("commit after a crash");
    drop(a);
    let a = open_array(&copy);
    let mut want: Vec<String> = (0..a.nchunks())
        .filter_map(|i| a.frame_index_entry(i))
        .filter(|&e| e >= 0)
        .map(|e| format!("{e:08X}.chunk"))
        .collect();
    want.sort();
    want.dedup();
    let mut have: Vec<String> = std::fs::read_dir(&copy)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".chunk"))
        .collect();
    have.sort();
    assert_eq!(have, want, "{what}: chunk files after the next commit");
}

fn crash_edit(a: &Array) -> Edit {
    let cs = a.chunksize().max(a.chunk_nbytes(0).unwrap_or(1));
    Edit {
        updates: vec![(0, encode(a, &pattern(cs, 29)))],
        appends: vec![encode(a, &pattern(cs, 31))],
        truncate: None,
        attrs: Some(json!({"crash": "test"})),
    }
}

#[test]
fn writer_crash_at_every_step_cframe() {
    let steps = crash_case("frames/schunk_lz4.b2frame", &crash_edit);
    assert!(steps >= 6, "{steps} steps");
    crash_case("frames/b2nd_1d_f8.b2nd", &crash_edit);
    crash_case("frames/b2nd_1d_f8.b2nd", &|_: &Array| Edit {
        truncate: Some(2),
        ..Edit::default()
    });
}

#[test]
fn writer_crash_at_every_step_sframe() {
    crash_case("frames/schunk_sparse.b2frame", &crash_edit);
    crash_case("frames/schunk_sparse.b2frame", &|_: &Array| Edit {
        truncate: Some(2),
        ..Edit::default()
    });
}

#[test]
fn writer_crash_at_every_step_bcolz() {
    crash_case("bcolz/carray_i4_leftover", &|a: &Array| {
        let full2: Vec<u8> = (20..30i32).flat_map(|v| v.to_le_bytes()).collect();
        let app: Vec<u8> = (30..40i32).flat_map(|v| v.to_le_bytes()).collect();
        Edit {
            updates: vec![(2, encode(a, &full2))],
            appends: vec![encode(a, &app)],
            truncate: None,
            attrs: None,
        }
    });
    crash_case("bcolz/carray_i4_leftover", &|_: &Array| Edit {
        truncate: Some(1),
        ..Edit::default()
    });
}

/// `edit` on a copy of `rel` is refused and leaves every byte as it was.
fn refused(rel: &str, make: impl FnOnce(&Array) -> Edit, why: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, rel);
    let a = open_array(&path);
    let before = tree_hash(&path);
    let edit = make(&a);
    let err = commit(&a, &edit).expect_err("refused");
    assert!(
        matches!(err, container::ContainerError::Refused { .. }),
        "{rel}: refused by rule: {err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains(why), "{rel}: {msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "{rel}: names the source: {msg}"
    );
    assert_eq!(tree_hash(&path), before, "{rel}: bytes unchanged");
}

#[test]
fn writer_refusals_leave_source_unchanged() {
    refused(
        "frames/schunk_vlmeta16.b2frame",
        |a| {
            let mut attrs = a.attrs().clone();
            attrs
                .as_object_mut()
                .expect("object")
                .insert("key16".into(), json!(1));
            Edit {
                attrs: Some(attrs),
                ..Edit::default()
            }
        },
        "17 vlmetalayers",
    );
    refused(
        "frames/b2nd_2d_f8_lz4.b2nd",
        |a| Edit {
            appends: vec![encode(a, &pattern(a.chunksize(), 1))],
            ..Edit::default()
        },
        "2-dimensional",
    );
    refused(
        "frames/b2nd_1d_f8.b2nd",
        |a| Edit {
            updates: vec![(1, encode(a, &pattern(a.chunksize() - 8, 1)))],
            ..Edit::default()
        },
        "every chunk of this array has",
    );
    refused(
        "frames/schunk_lz4.b2frame",
        |a| Edit {
            updates: vec![(0, encode(a, &pattern(1000, 1)))],
            ..Edit::default()
        },
        "the chunk it replaces has 64000",
    );
    refused(
        "bcolz/carray_i4_leftover",
        |a| Edit {
            appends: vec![encode(a, &pattern(40, 1))],
            ..Edit::default()
        },
        "partial chunk can only be the last",
    );
    refused(
        "bcolz/carray_i4_leftover",
        |a| {
            // A Blosc2 chunk in a bcolz carray.
            let p = codec::CParams::blosc2(codec::Codec::Lz4, 5, 4, 1);
            let _ = a;
            Edit {
                updates: vec![(0, codec::compress(&pattern(40, 1), &p).expect("c"))],
                ..Edit::default()
            }
        },
        "Blosc1",
    );
    refused(
        "frames/schunk_lz4.b2frame",
        |a| Edit {
            updates: vec![(5, encode(a, &pattern(64000, 1)))],
            ..Edit::default()
        },
        "updating chunk 5",
    );
    refused(
        "frames/schunk_lz4.b2frame",
        |_| Edit {
            truncate: Some(0),
            ..Edit::default()
        },
        "0 chunks",
    );
}

#[test]
fn writer_read_only_source_is_not_writable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_lz4.b2frame");
    let mut perm = std::fs::metadata(&path).expect("meta").permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(&path, perm).expect("chmod");
    let a = open_array(&path);
    let why = check_writable(&a).expect("read-only").to_string();
    assert!(why.contains("read-only"), "{why}");
    assert!(commit(&a, &Edit::default()).is_err());
}

#[test]
fn writer_b2lock_counter_is_bumped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_lz4.b2frame");
    let lock = tmp.path().join("schunk_lz4.b2frame.b2lock");
    std::fs::write(&lock, [0u8; 16]).expect("sidecar");
    let a = open_array(&path);
    commit(
        &a,
        &Edit {
            attrs: Some(json!({"a": 1})),
            ..Edit::default()
        },
    )
    .expect("commit");
    let b = std::fs::read(&lock).expect("read");
    assert_eq!(u64::from_ne_bytes(b[8..16].try_into().expect("8")), 1);
}

#[test]
fn writer_compact_removes_dead_space() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_deadspace.b2frame");
    let a = open_array(&path);
    let want = chunks_of(&a);
    let before = std::fs::metadata(&path).expect("meta").len();
    let mut calls = Vec::new();
    compact(&path, &mut |d, t| calls.push((d, t))).expect("compact");
    assert_eq!(calls.last(), Some(&(want.len(), want.len())));
    let after = std::fs::metadata(&path).expect("meta").len();
    assert!(after < before, "{after} < {before}");
    let b = open_array(&path);
    assert_eq!(chunks_of(&b), want);
    assert_eq!(b.attrs(), a.attrs());
    if let Some(py) = python("writer_compact") {
        let exp = tmp.path().join("expect");
        write_expect(&exp, &want, None);
        let p = path.to_str().expect("utf8");
        check_py(
            &py,
            tmp.path(),
            &["frame", p, exp.to_str().expect("utf8"), "mutate"],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// ctables: row-count changes resize every column (`commit_column`), checked against bcolz
// doing the same row operations; crash at every step; repair
// ---------------------------------------------------------------------------------------------

fn open_table(path: &Path) -> container::Table {
    match container::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())) {
        Container::Table(t) => t,
        Container::Array(_) => panic!("{} is not a ctable", path.display()),
    }
}

fn col_index(t: &container::Table, name: &str) -> usize {
    t.columns
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

/// Rows per chunk and bytes per row of a carray.
fn chunk_geometry(a: &Array) -> (usize, usize) {
    let cl = a.geometry().chunkshape.as_ref().expect("chunkshape")[0] as usize;
    (cl, a.chunksize() / cl)
}

fn rows_of(a: &Array) -> usize {
    a.geometry().shape[0] as usize
}

/// `n` rows of valid values of column `a`: its own rows, starting at row `shift`, cycled.
fn rows_like(a: &Array, n: usize, shift: usize) -> Vec<u8> {
    let (_, atom) = chunk_geometry(a);
    let all = chunks_of(a).concat();
    let have = all.len() / atom;
    (0..n)
        .flat_map(|r| {
            let at = (r + shift) % have * atom;
            all[at..at + atom].to_vec()
        })
        .collect()
}

/// A fresh ctable "ct2" of the reference generator (6 columns, chunklens 300..4000, dflts).
fn gen_ctable(py: &Path, dir: &Path) -> PathBuf {
    let path = dir.join("ct2");
    run_python(
        py,
        &[
            "scripts/oracle/writeback.py",
            "ctable",
            path.to_str().expect("utf8"),
        ],
    );
    path
}

/// Every column of the ctable at `path` has `rows` rows (b2fs's view).
fn assert_table_rows(path: &Path, rows: usize, what: &str) {
    let t = open_table(path);
    for (name, a) in &t.columns {
        assert_eq!(rows_of(a), rows, "{what}: column {name}");
    }
}

#[test]
fn writer_ctable_commit_column_resizes_every_column() {
    let Some(py) = python("writer_ctable_commit_column_resizes_every_column") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = gen_ctable(&py, tmp.path());
    let work = tmp.path().join("t");
    copy_tree(&pristine, &work);
    let mut steps = Vec::new();
    let mut snap = |ops: Value, k: usize| {
        let dir = tmp.path().join(format!("snap{k}"));
        copy_tree(&work, &dir);
        steps.push(json!({"path": dir, "ops": ops}));
    };
    let raw = |name: &str, bytes: &[u8]| -> String {
        let f = tmp.path().join(name);
        std::fs::write(&f, bytes).expect("write");
        f.display().to_string()
    };

    // 1. Column b (not the first; 300 rows per chunk, 2500 = 8 x 300 + 100): its partial
    //    last chunk filled and one chunk appended: 3000 rows in every column.
    let t = open_table(&work);
    let b = col_index(&t, "b");
    let col = &t.columns[b].1;
    let (cl, _) = chunk_geometry(col);
    let n = col.nchunks();
    let fill = rows_like(col, cl, 11);
    let app = rows_like(col, cl, 23);
    let edit = Edit {
        updates: vec![(n - 1, encode(col, &fill))],
        appends: vec![encode(col, &app)],
        ..Edit::default()
    };
    commit_column(&t, b, &edit).expect("grow b");
    assert_table_rows(&work, 3000, "after growing b");
    let a = &open_table(&work).columns[0].1;
    let new_a = chunks_of(a).concat();
    assert!(
        new_a[2500 * 4..]
            .chunks(4)
            .all(|v| v == (-1i32).to_le_bytes()),
        "new rows of a hold its dflt -1"
    );
    let f = raw("b1.bin", &[fill, app].concat());
    snap(
        json!([{"resize": 3000}, {"set": "b", "start": 2400, "file": f}]),
        0,
    );

    // 2. The first column a (3 full chunks of 1000) loses its last chunk: 2000 rows, other
    //    columns cut inside a chunk (b: 6 x 300 + 200, s: 2 x 700 + 600, ...).
    let t = open_table(&work);
    commit_column(
        &t,
        0,
        &Edit {
            truncate: Some(2),
            ..Edit::default()
        },
    )
    .expect("shrink a");
    assert_table_rows(&work, 2000, "after removing a's last chunk");
    snap(json!([{"resize": 2000}]), 1);

    // 3. Column s (700 rows per chunk): its last chunk (600 rows) rewritten with 350: 1750.
    let t = open_table(&work);
    let s = col_index(&t, "s");
    let col = &t.columns[s].1;
    let short = rows_like(col, 350, 5);
    commit_column(
        &t,
        s,
        &Edit {
            updates: vec![(2, encode(col, &short))],
            ..Edit::default()
        },
    )
    .expect("shrink s");
    assert_table_rows(&work, 1750, "after shrinking s");
    let f = raw("s3.bin", &short);
    snap(
        json!([{"resize": 1750}, {"set": "s", "start": 1400, "file": f}]),
        2,
    );

    // 4. Column f (one chunk of 4000 rows holding 1750) extended to 2100 rows, and column u
    //    (not resized) gets chunk 0 rewritten: two commits, one length change.
    let t = open_table(&work);
    let fc = col_index(&t, "f");
    let col = &t.columns[fc].1;
    let ext = rows_like(col, 2100, 1);
    commit_column(
        &t,
        fc,
        &Edit {
            updates: vec![(0, encode(col, &ext))],
            ..Edit::default()
        },
    )
    .expect("grow f");
    assert_table_rows(&work, 2100, "after growing f");
    let t = open_table(&work);
    let u = col_index(&t, "u");
    let col = &t.columns[u].1;
    let (cl, _) = chunk_geometry(col);
    let u0 = rows_like(col, cl, 77);
    commit_column(
        &t,
        u,
        &Edit {
            updates: vec![(0, encode(col, &u0))],
            ..Edit::default()
        },
    )
    .expect("update u");
    assert_table_rows(&work, 2100, "after updating u");
    let fe = raw("f4.bin", &ext);
    let fu = raw("u4.bin", &u0);
    snap(
        json!([{"resize": 2100}, {"set": "f", "start": 0, "file": fe},
               {"set": "u", "start": 0, "file": fu}]),
        3,
    );

    let spec = tmp.path().join("spec.json");
    let workdir = tmp.path().join("oracle");
    std::fs::create_dir(&workdir).expect("mkdir");
    let body = json!({"pristine": pristine, "work": workdir, "steps": steps, "mutate": true});
    std::fs::write(&spec, body.to_string()).expect("write");
    assert_eq!(
        python_says(
            &py,
            &[
                "scripts/oracle/writeback.py",
                "ctable_ops",
                spec.to_str().expect("utf8"),
            ],
        ),
        "4"
    );
}

/// `edit` of column `col` on fresh copies of `pristine` with a crash after every step until
/// the commit completes: the table bcolz opens has the old or the new length and rows, no
/// column shorter; `repair_table` on a copy leaves every column at the table's length.
fn ctable_crash_case(py: &Path, tmp: &Path, pristine: &Path, col: usize, edit: &Edit) -> usize {
    let done = tmp.join("done");
    copy_tree(pristine, &done);
    commit_column(&open_table(&done), col, edit).expect("full commit");
    let mut runs = Vec::new();
    let mut k = 0;
    loop {
        let copy = tmp.join(format!("k{k}"));
        copy_tree(pristine, &copy);
        let completed = commit_column_with_crash_after(&open_table(&copy), col, edit, k)
            .unwrap_or_else(|e| panic!("k={k}: {e}"));
        let t = open_table(&copy);
        let len = rows_of(&t.columns[0].1);
        for (name, a) in &t.columns {
            assert!(
                rows_of(a) >= len,
                "k={k}: column {name} shorter than the first"
            );
        }
        let rep = tmp.join(format!("r{k}"));
        copy_tree(&copy, &rep);
        let fixed = repair_table(&open_table(&rep)).expect("repair");
        assert!(fixed.short.is_empty());
        assert_table_rows(&rep, len, &format!("k={k} repaired"));
        runs.push(json!({"path": copy, "repaired": rep}));
        if completed {
            assert_eq!(
                rows_of(&t.columns[0].1),
                rows_of(&open_table(&done).columns[0].1),
                "completed commit"
            );
            break;
        }
        k += 1;
    }
    let spec = tmp.join("crash.json");
    let body = json!({"old": pristine, "new": done, "runs": runs});
    std::fs::write(&spec, body.to_string()).expect("write");
    assert_eq!(
        python_says(
            py,
            &[
                "scripts/oracle/writeback.py",
                "ctable_crash",
                spec.to_str().expect("utf8"),
            ],
        ),
        (k + 1).to_string()
    );
    k
}

#[test]
fn writer_ctable_crash_at_every_step() {
    let Some(py) = python("writer_ctable_crash_at_every_step") else {
        return;
    };
    // Growing through a column that is not the first: every other column first, then the
    // first column's meta/sizes. The partial last chunk keeps its rows and gets more (a
    // changed existing row would be visible as soon as its chunk file is renamed in: bcolz
    // has no multi-file transaction, see docs/SEMANTICS.md).
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = gen_ctable(&py, tmp.path());
    let t = open_table(&pristine);
    let b = col_index(&t, "b");
    let col = &t.columns[b].1;
    let (cl, atom) = chunk_geometry(col);
    let mut last = chunks_of(col).pop().expect("chunks");
    last.extend(rows_like(col, cl - last.len() / atom, 3));
    let edit = Edit {
        updates: vec![(col.nchunks() - 1, encode(col, &last))],
        appends: vec![encode(col, &rows_like(col, cl, 4))],
        ..Edit::default()
    };
    let steps = ctable_crash_case(&py, tmp.path(), &pristine, b, &edit);
    assert!(steps > 20, "{steps} steps");
    // Shrinking through the first column: its meta/sizes first.
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = gen_ctable(&py, tmp.path());
    let edit = Edit {
        truncate: Some(2),
        ..Edit::default()
    };
    ctable_crash_case(&py, tmp.path(), &pristine, 0, &edit);
}

#[test]
fn writer_ctable_refusals_leave_the_table_unchanged() {
    let Some(py) = python("writer_ctable_refusals_leave_the_table_unchanged") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = gen_ctable(&py, tmp.path());
    let before = tree_hash(&path);
    let t = open_table(&path);
    let b = col_index(&t, "b");
    let col = &t.columns[b].1;
    let (cl, _) = chunk_geometry(col);
    let grow = Edit {
        appends: vec![encode(col, &rows_like(col, cl, 1))],
        ..Edit::default()
    };
    let refused = |e: container::ContainerError, why: &str| {
        assert!(
            matches!(e, container::ContainerError::Refused { .. }),
            "{e}"
        );
        assert!(e.to_string().contains(why), "{e}");
    };
    // The carray API does not change one column's row count alone.
    let full = Edit {
        updates: vec![(col.nchunks() - 1, encode(col, &rows_like(col, cl, 1)))],
        ..Edit::default()
    };
    refused(
        commit(col, &full).expect_err("one column alone"),
        "commit_column",
    );
    // After a partial last chunk only the last chunk may be partial.
    refused(
        commit_column(&t, b, &grow).expect_err("append after a partial chunk"),
        "partial chunk can only be the last",
    );
    assert_eq!(tree_hash(&path), before);
    // A dflt that does not fit the dtype: nothing written.
    let storage = path.join("be/meta/storage");
    let text = std::fs::read_to_string(&storage).expect("storage");
    std::fs::write(&storage, text.replace("\"dflt\": 7", "\"dflt\": 70000")).expect("write");
    let before = tree_hash(&path);
    let t = open_table(&path);
    refused(
        commit_column(&t, b, &full).expect_err("bad dflt"),
        "dflt 70000",
    );
    assert_eq!(tree_hash(&path), before);
    std::fs::write(&storage, text).expect("write");
    // A column shorter than the first: the table's length is left alone.
    let t = open_table(&path);
    let col = &t.columns[b].1;
    commit(
        col,
        &Edit {
            attrs: Some(json!({})),
            ..Edit::default()
        },
    )
    .expect("attrs only");
    let sizes = path.join("u/meta/sizes");
    let orig = std::fs::read_to_string(&sizes).expect("sizes");
    std::fs::write(&sizes, orig.replace("[2500]", "[2400]")).expect("write");
    let before = tree_hash(&path);
    let t = open_table(&path);
    refused(
        commit_column(&t, b, &full).expect_err("short column"),
        "fewer than the 2500 of the first column",
    );
    assert_eq!(tree_hash(&path), before);
    let r = repair_table(&t).expect("repair");
    assert_eq!(r.short, vec![("u".to_string(), 2400)]);
    assert!(r.trimmed.is_empty());
    assert_eq!(tree_hash(&path), before);
}

#[test]
fn writer_compact_refuses_a_locked_source() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_deadspace.b2frame");
    let before = std::fs::read(&path).expect("read");
    let lock = lock_source_for_mount(&path).expect("lock");
    // A second mount shares the lock.
    let lock2 = lock_source_for_mount(&path).expect("shared");
    let err = compact(&path, &mut |_, _| {}).expect_err("mounted");
    assert!(
        matches!(err, container::ContainerError::Busy { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("mounted by a running b2fs"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), before);
    drop((lock, lock2));
    compact(&path, &mut |_, _| {}).expect("compact once unlocked");
    assert!(std::fs::read(&path).expect("read").len() < before.len());
}

#[test]
fn writer_variable_mode_materialises_special_offsets() {
    frame_case(
        "frames/schunk_fill_special.b2frame",
        |a| {
            // Three zero chunks stored as special offsets, the last one partial.
            assert_eq!(a.frame_index_entry(0), Some((0x81u64 << 56) as i64));
            let mut want = chunks_of(a);
            let app = pattern(8000, 41);
            want.push(app.clone());
            let edit = Edit {
                appends: vec![encode(a, &app)],
                ..Edit::default()
            };
            (edit, want)
        },
        None,
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_fill_special.b2frame");
    let a = open_array(&path);
    commit(
        &a,
        &Edit {
            appends: vec![encode(&a, &vec![0u8; 8000])],
            ..Edit::default()
        },
    )
    .expect("commit");
    let b = open_array(&path);
    assert_eq!(b.frame_info().expect("frame").chunksize, 0);
    for i in 0..b.nchunks() {
        let e = b.frame_index_entry(i).expect("entry");
        assert!(e >= 0, "chunk {i}: no special offsets in variable mode");
        // Neither a special offset nor a stored 32-byte special chunk: C-Blosc2 reads
        // neither in a variable-size frame.
        assert_eq!(b.chunk_kind(i).expect("kind"), ChunkKind::Regular);
    }
    let want = chunks_of(&b);
    assert!(want.iter().all(|c| c.iter().all(|&x| x == 0)));
    if let Some(py) = python("writer_variable_mode_zeros") {
        let exp = tmp.path().join("expect");
        write_expect(&exp, &want, None);
        let p = path.to_str().expect("utf8");
        check_py(
            &py,
            tmp.path(),
            &["frame", p, exp.to_str().expect("utf8"), "mutate"],
        );
    }
}

#[test]
fn writer_chunk_cparams_follow_existing_chunks() {
    let a = open_array(&data_dir().join("frames/b2nd_2d_f8_lz4.b2nd"));
    let p = chunk_cparams(&a).expect("cparams");
    assert_eq!(p.format, codec::ChunkFormat::Blosc2);
    assert_eq!(p.codec, codec::Codec::Lz4);
    assert_eq!(p.clevel, 1);
    assert_eq!(p.typesize, 8);
    assert_eq!(
        p.blocksize,
        codec::Blocksize::Explicit(8 * 40 * 8),
        "b2nd blocks are the blockshape"
    );
    let a = open_array(&data_dir().join("frames/schunk_zstd.b2frame"));
    let p = chunk_cparams(&a).expect("cparams");
    assert_eq!(
        (p.codec, p.clevel, p.blocksize),
        (codec::Codec::Zstd, 5, codec::Blocksize::Auto)
    );
    let a = open_array(&data_dir().join("bcolz/carray_lz4hc_s2"));
    let p = chunk_cparams(&a).expect("cparams");
    assert_eq!(p.format, codec::ChunkFormat::Blosc1);
    assert_eq!(
        p.codec,
        codec::Codec::Lz4Hc,
        "from storage: the Blosc1 header says lz4"
    );
    assert_eq!(p.filters[5], codec::filter_id::BITSHUFFLE);
}

#[test]
fn writer_bcolz_without_attrs_gets_one() {
    // bcolz-zipline cannot open a carray without `__attrs__`: a commit creates it.
    bcolz_case(
        "refuse/bcolz_no_attrs",
        |a| {
            let mut want = chunks_of(a);
            let new0 = pattern(want[0].len(), 43);
            want[0] = new0.clone();
            let edit = Edit {
                updates: vec![(0, encode(a, &new0))],
                ..Edit::default()
            };
            (edit, want.concat())
        },
        false,
    );
}

#[test]
fn writer_empty_frame_first_appends_set_chunksize() {
    frame_case(
        "frames/schunk_empty.b2frame",
        |a| {
            assert_eq!(a.frame_info().expect("frame").chunksize, -1);
            let want = vec![pattern(4000, 47), pattern(4000, 53), pattern(1200, 59)];
            let edit = Edit {
                appends: want.iter().map(|c| encode(a, c)).collect(),
                ..Edit::default()
            };
            (edit, want)
        },
        None,
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_empty.b2frame");
    let a = open_array(&path);
    commit(
        &a,
        &Edit {
            appends: vec![encode(&a, &pattern(4000, 1)), encode(&a, &pattern(100, 2))],
            ..Edit::default()
        },
    )
    .expect("commit");
    let info = open_array(&path).frame_info().expect("frame").clone();
    assert_eq!(
        (info.chunksize, info.nbytes, info.general_flags),
        (4000, 4100, 0x12)
    );
}

#[test]
fn writer_frame_with_junk_tail_commits_over_it() {
    frame_case(
        "frames/schunk_junk_tail.b2frame",
        |a| {
            let info = a.frame_info().expect("frame");
            let file = std::fs::metadata(a.path()).expect("meta").len();
            assert!(
                file > info.frame_len,
                "the fixture has bytes after frame_len"
            );
            let mut want = chunks_of(a);
            let n = a.chunk_nbytes(0).expect("n");
            want[0] = pattern(n, 61);
            let edit = Edit {
                updates: vec![(0, encode(a, &want[0]))],
                attrs: Some(json!({"tail": true})),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({"keys": ["tail"], "values": {"tail": true}})),
    );
}
