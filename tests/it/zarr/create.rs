//! New arrays through the Zarr view (`src/tree/zarr/create.rs`, docs/ZARR.md "New arrays"),
//! through the tree API: `mkdir` of a new name in a directory of sources, the array's
//! `zarr.json` renamed in (as zarr-python writes it: zstd codec, xarray's NaN fill), chunk
//! objects compressed with the declared codec, a removed chunk reading as the declared fill;
//! python-blosc2 reads the new file. Refusals leave the directory as it was.

use std::path::Path;

use b2fs::tree::Tree;
use serde_json::{Value, json};

use super::{ino, json_at, names, read_all};
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says, run_python};

/// A directory of sources holding python-blosc2's `a.b2nd` (int32, 4x5).
pub(super) fn sources(py: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    run_python(
        py,
        &[
            "-c",
            "import sys, numpy as np, blosc2\n\
             blosc2.asarray(np.arange(20, dtype=np.int32).reshape(4, 5), \
             urlpath=sys.argv[1] + '/a.b2nd', mode='w')",
            dir.path().to_str().unwrap(),
        ],
    );
    dir
}

/// The entries of `dir` on disk, sorted.
pub(super) fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Writes `data` into a new temp file `tmp` of Zarr directory `dir` and renames it to `name`.
pub(super) fn put(t: &Tree, dir: u64, tmp: &str, name: &str, data: &[u8]) -> Result<(), i32> {
    let (attr, fh) = t.create(dir, tmp).map_err(|e| e.errno())?;
    t.write(attr.ino, fh, 0, data).unwrap();
    t.release(fh).unwrap();
    t.rename(dir, tmp, dir, name, false).map_err(|e| e.errno())
}

/// zarr-python's document of a new `(shape)` array of `dtype` with chunks `chunks`.
pub(super) fn doc(
    dtype: &str,
    shape: &[u64],
    chunks: &[u64],
    fill: Value,
    codecs: Value,
) -> Vec<u8> {
    let dims: Vec<String> = (0..shape.len()).map(|d| format!("d{d}")).collect();
    serde_json::to_vec(&json!({"shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill, "codecs": codecs, "attributes": {"units": "K"},
        "dimension_names": dims, "zarr_format": 3, "node_type": "array",
        "storage_transformers": []}))
    .unwrap()
}

pub(super) fn zstd_codecs() -> Value {
    json!([{"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 0, "checksum": false}}])
}

#[test]
fn a_new_array_through_the_view_is_a_b2nd_python_blosc2_reads() {
    let py = or_skip!(python(
        "a_new_array_through_the_view_is_a_b2nd_python_blosc2_reads"
    ));
    let dir = sources(&py);
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let made = t.mkdir(z, "t2").unwrap();
    assert!(names(&t, "zarr").contains(&"t2".to_owned()));
    assert_eq!(t.lookup(z, "t2").unwrap().ino, made.ino);
    assert_eq!(t.mkdir(z, "t2").unwrap_err().errno(), libc::EEXIST);
    // Nothing on disk until the metadata lands.
    assert_eq!(listing(dir.path()), ["a.b2nd"]);
    // xarray's float64 variable: NaN fill, zstd, `_FillValue` in its spelling.
    let mut d: Value = serde_json::from_slice(&doc(
        "float64",
        &[5, 6],
        &[2, 4],
        json!("NaN"),
        zstd_codecs(),
    ))
    .unwrap();
    d["attributes"]["_FillValue"] = json!("AAAAAAAA+H8=");
    let d = serde_json::to_vec(&d).unwrap();
    put(&t, made.ino, "zarr.json.1.partial", "zarr.json", &d).unwrap();
    assert_eq!(listing(dir.path()), ["a.b2nd", "t2.b2nd"]);
    let meta = json_at(&t, "zarr/t2/zarr.json");
    assert_eq!(meta["shape"], json!([5, 6]));
    assert_eq!(meta["data_type"], json!("float64"));
    assert_eq!(meta["dimension_names"], json!(["d0", "d1"]));
    // Chunk (0, 0) compressed with zstd, as zarr-python writes it; (2, 1) raw.
    let c00: Vec<u8> = (0..8).flat_map(|i| f64::from(i).to_le_bytes()).collect();
    let packed = zstd::bulk::compress(&c00, 1).unwrap();
    assert_ne!(packed.len(), c00.len());
    t.lookup(ino(&t, "zarr/t2"), "c").unwrap();
    let c0 = ino(&t, "zarr/t2/c/0");
    put(&t, c0, "0.a.partial", "0", &packed).unwrap();
    let c21: Vec<u8> = (0..8)
        .flat_map(|i| (100.0 + f64::from(i)).to_le_bytes())
        .collect();
    put(&t, ino(&t, "zarr/t2/c/2"), "1.b.partial", "1", &c21).unwrap();
    // Junk that does not decode is refused, the chunk unchanged.
    assert_eq!(
        put(&t, c0, "1.c.partial", "1", b"not zstd").unwrap_err(),
        libc::EINVAL
    );
    assert_eq!(read_all(&t, ino(&t, "zarr/t2/c/0/0"), 4096), c00);
    // Chunk (0, 0) removed (all fill value to zarr-python): it reads as NaN again.
    t.unlink(c0, "0").unwrap();
    // (1, 0) written, then removed.
    put(&t, ino(&t, "zarr/t2/c/1"), "0.d.partial", "0", &c00).unwrap();
    t.unlink(ino(&t, "zarr/t2/c/1"), "0").unwrap();
    put(&t, ino(&t, "zarr/t2/c/0"), "1.e.partial", "1", &c21).unwrap();
    let got = python_says(
        &py,
        &[
            "-c",
            "import sys, json, blosc2, numpy as np\n\
             a = blosc2.open(sys.argv[1])\n\
             v = a[...]\n\
             print(json.dumps({'shape': list(a.shape), 'dtype': str(a.dtype), \
             'chunks': list(a.chunks), 'nan': int(np.isnan(v).sum()), \
             'v': [None if np.isnan(x) else float(x) for x in v.ravel()], \
             'attrs': {k: (None if isinstance(x, float) and x != x else x) \
             for k, x in a.vlmeta.getall().items()}}))",
            dir.path().join("t2.b2nd").to_str().unwrap(),
        ],
    );
    let got: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["shape"], json!([5, 6]));
    assert_eq!(got["dtype"], json!("float64"));
    assert_eq!(got["chunks"], json!([2, 4]));
    let v: Vec<Option<f64>> = serde_json::from_value(got["v"].clone()).unwrap();
    // Row-major 5x6: chunk (0,1) = rows 0-1, cols 4-5 (of a 2x4 chunk, 2 columns inside);
    // chunk (2,1) = row 4, cols 4-5.
    let at = |r: usize, c: usize| v[r * 6 + c];
    assert_eq!(at(0, 0), None);
    assert_eq!(at(1, 3), None);
    assert_eq!(at(2, 0), None);
    assert_eq!(at(0, 4), Some(100.0));
    assert_eq!(at(0, 5), Some(101.0));
    assert_eq!(at(1, 4), Some(104.0));
    assert_eq!(at(4, 4), Some(100.0));
    assert_eq!(at(4, 5), Some(101.0));
    assert_eq!(got["nan"], json!(30 - 6));
    assert_eq!(got["attrs"]["units"], json!("K"));
    assert_eq!(got["attrs"]["_ARRAY_DIMENSIONS"], json!(["d0", "d1"]));
    assert_eq!(got["attrs"]["_FillValue"], Value::Null, "a float NaN");
    // The new array is a leaf of the native tree too.
    t.lookup(ino(&t, "t2.b2nd"), "array.npy").unwrap();
}

#[test]
fn new_arrays_the_view_cannot_keep_are_refused_leaving_the_directory_as_it_was() {
    let py = or_skip!(python(
        "new_arrays_the_view_cannot_keep_are_refused_leaving_the_directory_as_it_was"
    ));
    let dir = sources(&py);
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let bytes_only = json!([{"name": "bytes", "configuration": {"endian": "little"}}]);
    let refused: Vec<(&str, Vec<u8>)> = vec![
        (
            "sharded",
            doc(
                "int32",
                &[8],
                &[4],
                json!(0),
                json!([{"name": "sharding_indexed", "configuration": {}}]),
            ),
        ),
        (
            "crc",
            doc(
                "int32",
                &[8],
                &[4],
                json!(0),
                json!([{"name": "bytes"}, {"name": "crc32c"}]),
            ),
        ),
        (
            "big",
            doc(
                "int32",
                &[8],
                &[4],
                json!(0),
                json!([{"name": "bytes", "configuration": {"endian": "big"}}]),
            ),
        ),
        (
            "strings",
            doc("string", &[8], &[4], json!(""), bytes_only.clone()),
        ),
        (
            "fill",
            doc("int8", &[8], &[4], json!(1000), bytes_only.clone()),
        ),
        (
            "empty",
            doc("int8", &[0], &[4], json!(0), bytes_only.clone()),
        ),
        ("junk", b"{not json".to_vec()),
        (
            "group",
            br#"{"zarr_format": 3, "node_type": "group", "attributes": {"a": 1}}"#.to_vec(),
        ),
    ];
    for (name, d) in &refused {
        let p = t.mkdir(z, name).unwrap();
        let err = put(&t, p.ino, "zarr.json.x.partial", "zarr.json", d).unwrap_err();
        assert_eq!(err, libc::EPERM, "{name}");
        assert_eq!(listing(dir.path()), ["a.b2nd"], "{name}");
        // The pending directory holds its temp file; once that goes, rmdir removes it.
        assert_eq!(t.rmdir(z, name).unwrap_err().errno(), libc::ENOTEMPTY);
        t.unlink(p.ino, "zarr.json.x.partial").unwrap();
        t.rmdir(z, name).unwrap();
        assert!(t.lookup(z, name).is_err());
    }
    // Names the view cannot hold, and places that take no array.
    assert_eq!(t.mkdir(z, "__x").unwrap_err().errno(), libc::EPERM);
    let temp = ".b2fs-1-0a0b0c0d-2-x.b2fs-tmp";
    assert_eq!(t.mkdir(z, temp).unwrap_err().errno(), libc::EPERM);
    assert_eq!(
        t.mkdir(ino(&t, "zarr/a"), "x").unwrap_err().errno(),
        libc::EPERM
    );
    assert_eq!(
        t.mkdir(ino(&t, "a.b2nd"), "x").unwrap_err().errno(),
        libc::EPERM
    );
    assert_eq!(t.rmdir(z, "a").unwrap_err().errno(), libc::EPERM);
    assert_eq!(listing(dir.path()), ["a.b2nd"]);
    // A read-only mount: EROFS; a mount of one source: EPERM.
    let ro = Tree::from_source(dir.path(), opts(false)).unwrap();
    assert_eq!(
        ro.mkdir(ino(&ro, "zarr"), "t").unwrap_err().errno(),
        libc::EROFS
    );
    let one = Tree::from_source(&dir.path().join("a.b2nd"), opts(true)).unwrap();
    assert_eq!(
        one.mkdir(ino(&one, "zarr"), "t").unwrap_err().errno(),
        libc::EPERM
    );
    assert_eq!(listing(dir.path()), ["a.b2nd"]);
}

/// A `.b2d` store takes a new array as the file `<name>.b2nd`, which python-blosc2's
/// `DictStore` opens as one more key; a `.b2z` store refuses (EPERM), its zip unchanged.
#[test]
fn a_b2d_store_takes_a_new_key_and_a_b2z_refuses() {
    let py = or_skip!(python("a_b2d_store_takes_a_new_key_and_a_b2z_refuses"));
    let dir = tempfile::tempdir().unwrap();
    let (b2d, b2z) = (dir.path().join("s.b2d"), dir.path().join("s.b2z"));
    run_python(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2\n\
             for p in sys.argv[1:]:\n\
             \x20   with blosc2.DictStore(p, mode='w') as s:\n\
             \x20       s['/a'] = np.arange(5)\n\
             \x20       s['/big'] = blosc2.asarray(np.arange(100000))",
            b2d.to_str().unwrap(),
            b2z.to_str().unwrap(),
        ],
    );
    let t = Tree::from_source(&b2d, opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let made = t.mkdir(z, "t").unwrap();
    let d = doc("int16", &[7], &[3], json!(-1), zstd_codecs());
    put(&t, made.ino, "zarr.json.1.partial", "zarr.json", &d).unwrap();
    let c = ino(&t, "zarr/t/c");
    let raw: Vec<u8> = [5i16, 6, 7].iter().flat_map(|x| x.to_le_bytes()).collect();
    put(&t, c, "1.a.partial", "1", &raw).unwrap();
    assert!(b2d.join("t.b2nd").is_file());
    let got = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2\n\
             with blosc2.DictStore(sys.argv[1], mode='r') as s:\n\
             \x20   print(sorted(s.keys()), s['/t'][...].tolist())",
            b2d.to_str().unwrap(),
        ],
    );
    assert_eq!(got, "['/a', '/big', '/t'] [-1, -1, -1, 5, 6, 7, -1]");
    let zip = std::fs::read(&b2z).unwrap();
    let t = Tree::from_source(&b2z, opts(true)).unwrap();
    assert_eq!(
        t.mkdir(ino(&t, "zarr"), "t").unwrap_err().errno(),
        libc::EPERM
    );
    assert_eq!(std::fs::read(&b2z).unwrap(), zip);
}

/// `create_group` in a directory of sources: a subdirectory (a group without attributes),
/// which then takes new arrays of its own.
#[test]
fn a_new_group_is_a_subdirectory_that_takes_new_arrays() {
    let py = or_skip!(python(
        "a_new_group_is_a_subdirectory_that_takes_new_arrays"
    ));
    let dir = sources(&py);
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let g = t.mkdir(ino(&t, "zarr"), "sub").unwrap();
    let group = br#"{"zarr_format": 3, "node_type": "group", "attributes": {}}"#;
    put(&t, g.ino, "zarr.json.1.partial", "zarr.json", group).unwrap();
    assert!(dir.path().join("sub").is_dir());
    assert_eq!(
        json_at(&t, "zarr/sub/zarr.json")["node_type"],
        json!("group")
    );
    let a = t.mkdir(g.ino, "t").unwrap();
    let d = doc("uint8", &[3], &[2], json!(9), zstd_codecs());
    put(&t, a.ino, "zarr.json.2.partial", "zarr.json", &d).unwrap();
    let got = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2; print(blosc2.open(sys.argv[1])[...].tolist())",
            dir.path().join("sub/t.b2nd").to_str().unwrap(),
        ],
    );
    assert_eq!(got, "[9, 9, 9]");
    assert!(names(&t, "zarr/sub").contains(&"t".to_owned()));
}

/// A group holding a python-blosc2 CTable (a `.b2d` store that is one, a TreeStore group
/// holding one) takes no new member.
#[test]
fn a_group_holding_a_ctable_takes_no_new_array() {
    let py = or_skip!(python("a_group_holding_a_ctable_takes_no_new_array"));
    let dir = tempfile::tempdir().unwrap();
    run_python(
        &py,
        &[
            "scripts/oracle/ctables.py",
            "gen",
            dir.path().to_str().unwrap(),
        ],
    );
    for (store, group) in [("plain.b2d", "zarr"), ("nested.b2d", "zarr/g/tab")] {
        let src = dir.path().join(store);
        let before = listing(&src);
        let t = Tree::from_source(&src, opts(true)).unwrap();
        let err = t.mkdir(ino(&t, group), "new").unwrap_err();
        assert_eq!(err.errno(), libc::EPERM, "{store}");
        assert_eq!(listing(&src), before);
    }
}

/// A new array is the file `NAME.b2nd`, which the view names `NAME` after its stem; where
/// other members already share the stem `NAME` (`q.b2f` and `q.b2frame`, each shown under
/// its file name), a new `q.b2nd` would join them under its file name, not the name the
/// writer asked for: its `zarr.json` is refused (EEXIST), nothing written.
#[test]
fn a_new_array_whose_stem_other_members_share_is_refused() {
    let py = or_skip!(python(
        "a_new_array_whose_stem_other_members_share_is_refused"
    ));
    let dir = sources(&py);
    for f in ["q.b2f", "q.b2frame"] {
        std::fs::copy(dir.path().join("a.b2nd"), dir.path().join(f)).unwrap();
    }
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let mut top = names(&t, "zarr");
    top.sort();
    assert_eq!(top, ["a", "q.b2f", "q.b2frame", "zarr.json"]);
    let p = t.mkdir(z, "q").unwrap();
    let d = doc("int32", &[8], &[4], json!(0), zstd_codecs());
    let err = put(&t, p.ino, "zarr.json.x.partial", "zarr.json", &d).unwrap_err();
    assert_eq!(err, libc::EEXIST);
    assert_eq!(listing(dir.path()), ["a.b2nd", "q.b2f", "q.b2frame"]);
    // A name no member's stem takes is made as `r.b2nd` and shown as `r`.
    let p = t.mkdir(z, "r").unwrap();
    put(&t, p.ino, "zarr.json.x.partial", "zarr.json", &d).unwrap();
    assert_eq!(
        listing(dir.path()),
        ["a.b2nd", "q.b2f", "q.b2frame", "r.b2nd"]
    );
    assert_eq!(json_at(&t, "zarr/r/zarr.json")["shape"], json!([8]));
}

/// A new array whose chunk is larger than a block (here 250x500 float64, 1,000,000 bytes,
/// blocks of at most 256 KiB) gets blocks that divide the chunk: the view shows it and
/// python-blosc2 reads it. Blocks of 65 rows (what a plain cap picked) would have padded the
/// chunk to 260 rows, and the file made was one the view could not show.
#[test]
fn a_new_array_with_chunks_larger_than_a_block_is_shown_and_read() {
    let py = or_skip!(python(
        "a_new_array_with_chunks_larger_than_a_block_is_shown_and_read"
    ));
    let dir = sources(&py);
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let p = t.mkdir(z, "big").unwrap();
    let d = doc(
        "float64",
        &[1000, 1000],
        &[250, 500],
        json!(0),
        zstd_codecs(),
    );
    put(&t, p.ino, "zarr.json.x.partial", "zarr.json", &d).unwrap();
    let meta = json_at(&t, "zarr/big/zarr.json");
    assert_eq!(meta["shape"], json!([1000, 1000]));
    let chunk = ino(&t, "zarr/big/c/3/1");
    assert_eq!(t.getattr(chunk).unwrap().size, 250 * 500 * 8);
    assert!(read_all(&t, chunk, 1 << 20).iter().all(|&b| b == 0));
    drop(t);
    let said = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2; a = blosc2.open(sys.argv[1]); \
             print(a.shape, a.chunks, a.blocks, float(a[...].sum()))",
            dir.path().join("big.b2nd").to_str().unwrap(),
        ],
    );
    assert_eq!(said, "(1000, 1000) (250, 500) (50, 500) 0.0");
}

/// What a writer declared for an array it made (its fill value NaN, its zstd objects) stops
/// applying when another writer replaces the file by one of another data type under the same
/// name: a chunk object removed then reads as the new array's zeros, not as the old NaN
/// pattern written into int64 items, and a raw object is taken as raw.
#[test]
fn what_was_declared_for_a_made_array_stops_when_another_writer_replaces_it() {
    let py = or_skip!(python(
        "what_was_declared_for_a_made_array_stops_when_another_writer_replaces_it"
    ));
    let dir = sources(&py);
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let p = t.mkdir(z, "t").unwrap();
    let d = doc("float64", &[8], &[4], json!("NaN"), zstd_codecs());
    put(&t, p.ino, "zarr.json.x.partial", "zarr.json", &d).unwrap();
    let nan: Vec<u8> = (0..4).flat_map(|_| f64::NAN.to_le_bytes()).collect();
    t.lookup(ino(&t, "zarr/t"), "c").unwrap();
    assert_eq!(read_all(&t, ino(&t, "zarr/t/c/0"), 4096), nan);
    // Another writer: an int64 array of the same shape and chunks, under the same name.
    run_python(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2\n\
             blosc2.asarray(np.arange(1, 9, dtype=np.int64), chunks=(4,), blocks=(4,), \
             urlpath=sys.argv[1], mode='w')",
            dir.path().join("t.b2nd").to_str().unwrap(),
        ],
    );
    assert!(t.follow_source(), "the mount follows the other writer");
    assert_eq!(json_at(&t, "zarr/t/zarr.json")["data_type"], json!("int64"));
    t.unlink(ino(&t, "zarr/t/c"), "1").unwrap();
    let c1 = read_all(&t, ino(&t, "zarr/t/c/1"), 4096);
    assert_eq!(
        c1,
        vec![0u8; 32],
        "the removed chunk holds the old NaN fill"
    );
    let c0: Vec<u8> = (1..5i64).flat_map(i64::to_le_bytes).collect();
    assert_eq!(read_all(&t, ino(&t, "zarr/t/c/0"), 4096), c0);
}

/// A temp file whose name a member takes afterwards: `zarr.json` written in place in a
/// directory `mkdir` made (`cp meta.json t/zarr.json`) before a temp file is renamed over it
/// and makes the array, and a temp file of the view's root named as the source another
/// writer adds then. Lookups find the member, so such a file could not be removed (`unlink`
/// reaches the member) and it counted toward the mount's 1,024 temp files until unmount:
/// the one the rename replaced goes with it, the other when the mount runs out of room, and
/// 1,024 new temp files fit.
#[test]
fn temp_files_whose_names_members_took_do_not_hold_the_mounts_room() {
    let py = or_skip!(python(
        "temp_files_whose_names_members_took_do_not_hold_the_mounts_room"
    ));
    let dir = sources(&py);
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let p = t.mkdir(z, "t").unwrap().ino;
    let (early, fh) = t.create(p, "zarr.json").unwrap();
    t.write(early.ino, fh, 0, b"{\"zarr_format\": 3").unwrap();
    t.release(fh).unwrap();
    let d = doc("float64", &[6], &[3], json!("NaN"), zstd_codecs());
    put(&t, p, "zarr.json.1.partial", "zarr.json", &d).unwrap();
    assert_eq!(listing(dir.path()), ["a.b2nd", "t.b2nd"]);
    let member = t.lookup(p, "zarr.json").unwrap();
    assert_ne!(member.ino, early.ino);
    assert!(
        t.getattr(early.ino).is_err(),
        "the replaced temp file stays"
    );
    let listed = names(&t, "zarr/t");
    assert_eq!(listed.iter().filter(|n| *n == "zarr.json").count(), 1);
    // A temp file of the root, then another writer's source of that name.
    let (u, fh) = t.create(z, "u").unwrap();
    t.write(u.ino, fh, 0, b"scratch").unwrap();
    t.release(fh).unwrap();
    run_python(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2\n\
             blosc2.asarray(np.arange(3), urlpath=sys.argv[1], mode='w')",
            dir.path().join("u.b2nd").to_str().unwrap(),
        ],
    );
    t.follow_source();
    assert_ne!(
        t.lookup(z, "u").unwrap().ino,
        u.ino,
        "the member, not the temp file"
    );
    // The mount's room: 1,024 temp files, in the new array's directory.
    for i in 0..1024 {
        let (_, fh) = t
            .create(p, &format!("f{i}.partial"))
            .unwrap_or_else(|e| panic!("temp file {i}: {e}"));
        t.release(fh).unwrap();
    }
    let err = t.create(p, "one.more").unwrap_err();
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert!(t.getattr(u.ino).is_err(), "the hidden temp file stays");
}

/// A scratch file renamed while the mount looks for scratch files a member hides (an editor
/// saving `notes`: `notes` -> `notes~`, then another file takes `notes`) is reached by its
/// new name: it stays, with its bytes, and the creation that asked for room is refused.
#[test]
fn a_scratch_file_renamed_during_the_search_for_hidden_ones_stays() {
    let py = or_skip!(python(
        "a_scratch_file_renamed_during_the_search_for_hidden_ones_stays"
    ));
    let dir = sources(&py);
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let (notes, fh) = t.create(z, "notes").unwrap();
    t.write(notes.ino, fh, 0, b"keep me").unwrap();
    t.release(fh).unwrap();
    let (other, fh) = t.create(z, "other").unwrap();
    t.release(fh).unwrap();
    // The mount's room: 1,024 scratch files in all.
    for i in 0..1022 {
        let (_, fh) = t
            .create(z, &format!("f{i}.partial"))
            .unwrap_or_else(|e| panic!("temp file {i}: {e}"));
        t.release(fh).unwrap();
    }
    t.on_scratch_drop(Box::new(|t| {
        let z = t.lookup(1, "zarr").unwrap().ino;
        t.rename(z, "notes", z, "notes~", true).unwrap();
        t.rename(z, "other", z, "notes", true).unwrap();
    }));
    let err = t.create(z, "one.more").unwrap_err();
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    let kept = t.lookup(z, "notes~").expect("the renamed file is there");
    assert_eq!(kept.ino, notes.ino);
    assert_eq!(read_all(&t, notes.ino, 64), b"keep me");
    assert_eq!(t.lookup(z, "notes").unwrap().ino, other.ino);
}
