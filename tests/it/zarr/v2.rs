//! The read-only Zarr v2 view `zarr2/` (`src/tree/zarr/v2.rs`, docs/ZARR.md "Zarr v2 view")
//! through the tree API: every reference case of `npy_cases.py` shows there with the v3
//! view's hierarchy, shape, chunks and dimension names in v2 metadata, and chunk objects
//! (`i.j`) that assemble to exactly what python-blosc2 and bcolz read, unsharded under
//! `-o zarr_shards` too; a ctable and a `.b2z` store (lazy, consolidated in every group);
//! every change refused with EROFS and the source untouched; commits and other writers shown
//! at the next open; a damaged chunk EIO, named by its v2 path.

use std::path::Path;

use b2fs::tree::Tree;
use serde_json::{Value, json};

use super::{assemble_keys, dims, float32_b2nd, ino, itemsize, json_at, names, npy_data, read_all};
use crate::support::no_prefetch as opts;
use crate::support::{npy_cases, python, sha256_hex};

/// The `.zarray` members the view always writes the same way.
fn assert_v2_constants(z: &Value, what: &str) {
    for (k, v) in [
        ("zarr_format", json!(2)),
        ("compressor", Value::Null),
        ("filters", Value::Null),
        ("fill_value", Value::Null),
        ("order", json!("C")),
        ("dimension_separator", json!(".")),
    ] {
        assert_eq!(z[k], v, "{what}: {k}");
    }
}

/// Bytes per element of a v2 typestr (`<f8`, `|b1`, `<U5`, `<M8[ns]`).
fn typestr_size(t: &str) -> u64 {
    let body = &t[2..];
    let n: u64 = body
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap();
    if t.as_bytes()[1] == b'U' { 4 * n } else { n }
}

/// The array at `zarr2/<array>` assembled from its `i.j` chunk objects.
fn assemble2(t: &Tree, array: &str, zarray: &Value, step: u32) -> Vec<u8> {
    let shape = dims(&zarray["shape"]);
    let chunks = dims(&zarray["chunks"]);
    let item = typestr_size(zarray["dtype"].as_str().unwrap());
    let path = |key: &[String]| match key.is_empty() {
        true => format!("zarr2/{array}/0"),
        false => format!("zarr2/{array}/{}", key.join(".")),
    };
    assemble_keys(t, &path, (&shape, &chunks, item), step)
}

/// The stem a case's source is shown under.
fn stem_of(source: &Path) -> String {
    let name = source.file_name().unwrap().to_str().unwrap();
    match source.is_dir() {
        true => name.to_owned(),
        false => Path::new(name)
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .into(),
    }
}

#[test]
fn every_reference_case_reads_back_through_the_v2_view() {
    let py = or_skip!(python(
        "every_reference_case_reads_back_through_the_v2_view"
    ));
    let (_dir, cases) = npy_cases(&py);
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        if case["kind"] == "table" {
            continue;
        }
        let source = Path::new(case["source"].as_str().unwrap());
        let t = Tree::from_source(source, opts(false)).unwrap();
        let top = names(&t, "");
        assert!(top.contains(&"zarr".to_owned()) && top.contains(&"zarr2".to_owned()));
        let stem = stem_of(source);
        let zmeta = json_at(&t, "zarr2/.zmetadata");
        assert_eq!(zmeta["zarr_consolidated_format"], 1, "{name}");
        let md = zmeta["metadata"].as_object().unwrap();
        assert_eq!(md[".zgroup"], json!({"zarr_format": 2}));
        assert_eq!(json_at(&t, "zarr2/.zgroup"), json!({"zarr_format": 2}));
        let mut listed = names(&t, "zarr2");
        listed.sort();
        let v3 = json_at(&t, "zarr/zarr.json");
        if v3["consolidated_metadata"]["metadata"]
            .as_object()
            .unwrap()
            .is_empty()
        {
            // Left out of both views alike (no portable type), and said so on both roots.
            assert_eq!(listed, [".zattrs", ".zgroup", ".zmetadata"], "{name}");
            assert_eq!(md.len(), 2, "{name}");
            let why = t
                .getxattr(ino(&t, "zarr2"), "user.b2fs.zarr_omitted")
                .unwrap()
                .unwrap();
            let why: Value = serde_json::from_slice(&why).unwrap();
            assert!(why.get(&stem).is_some(), "{name}: {why}");
            continue;
        }
        assert_eq!(
            listed,
            [".zattrs", ".zgroup", ".zmetadata", &stem],
            "{name}"
        );
        let meta = json_at(&t, &format!("zarr/{stem}/zarr.json"));
        let zarray = json_at(&t, &format!("zarr2/{stem}/.zarray"));
        let zattrs = json_at(&t, &format!("zarr2/{stem}/.zattrs"));
        assert_eq!(md[&format!("{stem}/.zarray")], zarray, "{name}");
        assert_eq!(md[&format!("{stem}/.zattrs")], zattrs, "{name}");
        assert_v2_constants(&zarray, name);
        assert_eq!(zarray["shape"], meta["shape"], "{name}");
        assert_eq!(
            zarray["chunks"], meta["chunk_grid"]["configuration"]["chunk_shape"],
            "{name}"
        );
        let typestr = zarray["dtype"].as_str().unwrap();
        assert_eq!(
            typestr_size(typestr),
            itemsize(&meta["data_type"]),
            "{name}: {typestr}"
        );
        let (data, header) = npy_data(Path::new(case["npy"].as_str().unwrap()));
        // The reference's own typestr, unless the view shows raw items as bytes.
        let descr = header
            .split("'descr': '")
            .nth(1)
            .map(|d| d.split('\'').next().unwrap());
        if let Some(descr) = descr.filter(|d| !d.contains('V')) {
            assert_eq!(typestr, descr, "{name}");
        }
        assert_eq!(
            zattrs["_ARRAY_DIMENSIONS"], meta["dimension_names"],
            "{name}"
        );
        // The other attributes are the source's (`_FillValue` as stored).
        let mut own = zattrs.as_object().unwrap().clone();
        own.remove("_ARRAY_DIMENSIONS");
        let attrs = json_at(&t, "__attrs__");
        let mut want = attrs.as_object().cloned().unwrap_or_default();
        want.remove("_ARRAY_DIMENSIONS");
        assert_eq!(Value::Object(own), Value::Object(want), "{name}");
        // No v3 metadata in the v2 view, no v2 metadata in the v3 view.
        for (dir, probe) in [
            ("zarr2", "zarr.json"),
            (&*format!("zarr2/{stem}"), "zarr.json"),
            (&*format!("zarr2/{stem}"), "c"),
            (&*format!("zarr2/{stem}"), ".zgroup"),
            ("zarr2", ".zarray"),
            (&*format!("zarr/{stem}"), ".zarray"),
        ] {
            let err = t.lookup(ino(&t, dir), probe).unwrap_err();
            assert_eq!(err.errno(), libc::ENOENT, "{name}: {dir}/{probe}");
        }
        let got = assemble2(&t, &stem, &zarray, 1000);
        assert!(
            got == data,
            "{name}: the v2 chunk objects differ from the reference"
        );
        // Each object is the v3 view's object of the same chunk, byte for byte.
        let grid: Vec<u64> = dims(&zarray["shape"])
            .iter()
            .zip(dims(&zarray["chunks"]))
            .map(|(s, c)| s.div_ceil(c))
            .collect();
        if grid.contains(&0) {
            checked += 1;
            continue; // no chunk
        }
        let last: Vec<String> = grid.iter().map(|g| (g - 1).to_string()).collect();
        let (v2key, v3key) = match last.is_empty() {
            true => ("0".to_owned(), "c".to_owned()),
            false => (last.join("."), format!("c/{}", last.join("/"))),
        };
        assert_eq!(
            read_all(&t, ino(&t, &format!("zarr2/{stem}/{v2key}")), 1 << 20),
            read_all(&t, ino(&t, &format!("zarr/{stem}/{v3key}")), 1 << 20),
            "{name}: last chunk"
        );
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} cases checked");
}

/// `-o zarr_shards` changes the v3 view only: the v2 view's objects stay whole chunks (no
/// shard index), and still assemble to the reference.
#[test]
fn the_v2_view_is_never_sharded() {
    let py = or_skip!(python("the_v2_view_is_never_sharded"));
    let (_dir, cases) = npy_cases(&py);
    let mut sharded = 0;
    for case in &cases {
        let source = Path::new(case["source"].as_str().unwrap());
        if source.extension().is_none_or(|e| e != "b2nd") {
            continue;
        }
        let mut o = opts(false);
        o.zarr_shards = true;
        let t = Tree::from_source(source, o).unwrap();
        let stem = stem_of(source);
        let Some(meta) = json_at(&t, "zarr/zarr.json")["consolidated_metadata"]["metadata"]
            .get(&stem)
            .cloned()
        else {
            continue;
        };
        if meta["codecs"][0]["name"] != "sharding_indexed" {
            continue;
        }
        let zarray = json_at(&t, &format!("zarr2/{stem}/.zarray"));
        let (data, _) = npy_data(Path::new(case["npy"].as_str().unwrap()));
        assert!(assemble2(&t, &stem, &zarray, 4096) == data, "{stem}");
        sharded += 1;
    }
    assert!(sharded >= 3, "only {sharded} sharded cases");
}

#[test]
fn a_ctable_is_a_group_of_columns_sharing_the_row_dimension_in_v2_too() {
    let py = or_skip!(python(
        "a_ctable_is_a_group_of_columns_sharing_the_row_dimension_in_v2_too"
    ));
    let (_dir, cases) = npy_cases(&py);
    let table = cases.iter().find(|c| c["kind"] == "table").unwrap();
    let t = Tree::from_source(Path::new(table["source"].as_str().unwrap()), opts(false)).unwrap();
    let mut shown = names(&t, "zarr2");
    shown.sort();
    assert_eq!(
        shown,
        [".zattrs", ".zgroup", ".zmetadata", "flag", "id", "val"]
    );
    let v3 = json_at(&t, "zarr/zarr.json");
    assert_eq!(json_at(&t, "zarr2/.zattrs"), v3["attributes"]);
    let md = json_at(&t, "zarr2/.zmetadata")["metadata"].clone();
    for col in ["flag", "id", "val"] {
        assert_eq!(
            md[format!("{col}/.zattrs")]["_ARRAY_DIMENSIONS"],
            json!(["row"])
        );
        let zarray = json_at(&t, &format!("zarr2/{col}/.zarray"));
        assert_eq!(md[format!("{col}/.zarray")], zarray);
        let case = cases
            .iter()
            .find(|c| c["name"] == format!("ctable_4cols.{col}"))
            .unwrap();
        let (data, _) = npy_data(Path::new(case["npy"].as_str().unwrap()));
        assert!(assemble2(&t, col, &zarray, 7) == data, "{col}");
    }
}

/// A `.b2z` store: listing `zarr2/` opens no leaf, nor does a v3 probe there; the root's
/// `.zmetadata` holds every node at its path, each group's its own subtree keyed from it, and
/// each array's own `.zarray` equals its consolidated entry.
#[test]
fn a_store_shows_its_groups_lazily_with_consolidated_metadata_in_every_group() {
    let py = or_skip!(python(
        "a_store_shows_its_groups_lazily_with_consolidated_metadata_in_every_group"
    ));
    let dir = tempfile::tempdir().unwrap();
    crate::support::oracle(&py, &[&"scripts/oracle/stores.py", &"gen", &dir.path()]);
    let t = Tree::from_source(&dir.path().join("tree.b2z"), opts(false)).unwrap();
    let top = names(&t, "zarr2");
    assert!(
        top.contains(&"group".to_owned()) && top.contains(&"a".to_owned()),
        "{top:?}"
    );
    let z2 = ino(&t, "zarr2");
    assert_eq!(t.lookup(z2, "zarr.json").unwrap_err().errno(), libc::ENOENT);
    assert_eq!(t.leaves_opened(), Some(0), "listing zarr2/ opened a leaf");
    let md = json_at(&t, "zarr2/.zmetadata")["metadata"].clone();
    let v3 = json_at(&t, "zarr/zarr.json")["consolidated_metadata"]["metadata"].clone();
    assert_eq!(md[".zattrs"]["title"], "demo store");
    assert_eq!(md["group/.zgroup"], json!({"zarr_format": 2}));
    assert_eq!(md["group/.zattrs"]["units"], "counts");
    assert_eq!(md["a/b/c/leaf/.zarray"]["shape"], json!([20, 30]));
    assert_eq!(md["a/b/c/leaf/.zarray"]["chunks"], json!([10, 15]));
    assert_eq!(md["group/counts/.zarray"]["dtype"], "<i4");
    // The same nodes as the v3 view's consolidated metadata.
    let mut v2_nodes: Vec<String> = md
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.ends_with("/.zarray") || k.ends_with("/.zgroup"))
        .map(|k| k.rsplit_once('/').unwrap().0.to_owned())
        .collect();
    let mut v3_nodes: Vec<String> = v3.as_object().unwrap().keys().cloned().collect();
    v2_nodes.sort();
    v3_nodes.sort();
    assert_eq!(v2_nodes, v3_nodes);
    for (path, doc) in v3.as_object().unwrap() {
        if doc["node_type"] == "array" {
            let own = json_at(&t, &format!("zarr2/{path}/.zarray"));
            assert_eq!(own, md[format!("{path}/.zarray")], "{path}");
            assert_eq!(
                md[format!("{path}/.zattrs")]["_ARRAY_DIMENSIONS"],
                doc["dimension_names"],
                "{path}"
            );
            assert_eq!(own["shape"], doc["shape"], "{path}");
        }
    }
    // A group's own .zmetadata: its subtree keyed from it.
    let sub = json_at(&t, "zarr2/a/.zmetadata")["metadata"].clone();
    assert_eq!(sub["b/c/leaf/.zarray"], md["a/b/c/leaf/.zarray"]);
    assert_eq!(sub[".zgroup"], json!({"zarr_format": 2}));
    assert!(sub.get("group/.zgroup").is_none());
    let leaf = json_at(&t, "zarr/a/b/c/leaf/zarr.json");
    let zarray = json_at(&t, "zarr2/a/b/c/leaf/.zarray");
    let v3_bytes = super::assemble(&t, "a/b/c/leaf", &leaf, 1 << 16);
    assert!(assemble2(&t, "a/b/c/leaf", &zarray, 1 << 16) == v3_bytes);
}

/// Every change under `zarr2/` is EROFS, on a read-write mount too, and leaves the source
/// as it was; the same changes through `zarr/` are not refused for being there.
#[test]
fn every_change_under_zarr2_is_erofs_and_the_source_stays() {
    let py = or_skip!(python(
        "every_change_under_zarr2_is_erofs_and_the_source_stays"
    ));
    let (_dir, src) = crate::support::temp_path("t.b2nd");
    float32_b2nd(&py, &src, &[("units", "'m'")]);
    let before = sha256_hex(&std::fs::read(&src).unwrap());
    for writable in [true, false] {
        let t = Tree::from_source(&src, opts(writable)).unwrap();
        let root = ino(&t, "zarr2");
        let arr = ino(&t, "zarr2/t");
        let chunk = ino(&t, "zarr2/t/1.1");
        let meta = ino(&t, "zarr2/t/.zarray");
        let erofs = |what: &str, e: b2fs::tree::TreeError| {
            assert_eq!(e.errno(), libc::EROFS, "{what} (writable {writable}): {e}");
        };
        for f in [chunk, meta] {
            erofs("open for writing", t.open(f, libc::O_WRONLY).unwrap_err());
            erofs(
                "O_TRUNC",
                t.open(f, libc::O_RDONLY | libc::O_TRUNC).unwrap_err(),
            );
            erofs("truncate", t.set_size(f, 0).unwrap_err());
            erofs("setxattr", t.set_xattr(f, "user.x").unwrap_err());
        }
        erofs("create", t.create(arr, "1.1.abc.partial").unwrap_err());
        erofs("create in root", t.create(root, "new").unwrap_err());
        erofs("mkdir", t.mkdir(root, "g").unwrap_err());
        erofs("rmdir", t.rmdir(root, "t").unwrap_err());
        erofs("unlink", t.unlink(arr, "1.1").unwrap_err());
        erofs("unlink meta", t.unlink(arr, ".zarray").unwrap_err());
        erofs(
            "rename",
            t.rename(arr, "1.1", arr, "0.0", false).unwrap_err(),
        );
        erofs("setxattr dir", t.set_xattr(arr, "user.x").unwrap_err());
        assert_eq!(t.getattr(chunk).unwrap().perm, 0o444);
        assert_eq!(t.getattr(arr).unwrap().perm, 0o555);
        if writable {
            // A scratch file of the root moved into the v2 view.
            let (_, fh) = t.create(1, "scratch.tmp").unwrap();
            t.write(t.lookup(1, "scratch.tmp").unwrap().ino, fh, 0, b"x")
                .unwrap();
            t.release(fh).unwrap();
            erofs(
                "rename in",
                t.rename(1, "scratch.tmp", arr, "0.0", false).unwrap_err(),
            );
            // The v3 view still takes the write.
            let c = ino(&t, "zarr/t/c/1/1");
            let fh = t.open(c, libc::O_WRONLY).unwrap();
            t.release(fh).unwrap();
        }
        let read = read_all(&t, chunk, 1 << 20);
        assert_eq!(read.len(), 10 * 15 * 4);
    }
    assert_eq!(
        sha256_hex(&std::fs::read(&src).unwrap()),
        before,
        "the source changed"
    );
}

/// A commit through `zarr/` and another writer's change both show in `zarr2/` at the next
/// open: the chunk object's bytes, `.zarray`'s shape, `.zattrs` and `.zmetadata`.
#[test]
fn the_v2_view_follows_commits_and_other_writers() {
    let py = or_skip!(python("the_v2_view_follows_commits_and_other_writers"));
    let (_dir, src) = crate::support::temp_path("grow.b2nd");
    crate::support::int64_1000_b2nd(&py, &src);
    let t = Tree::from_source(&src, opts(true)).unwrap();
    assert_eq!(json_at(&t, "zarr2/grow/.zarray")["shape"], json!([1000]));
    // A chunk written through the v3 view (committed at its release).
    let c1 = ino(&t, "zarr/grow/c/1");
    let fh = t.open(c1, libc::O_WRONLY).unwrap();
    let new: Vec<u8> = (0..300i64).flat_map(|i| (-i).to_le_bytes()).collect();
    t.write(c1, fh, 0, &new).unwrap();
    t.release(fh).unwrap();
    assert_eq!(read_all(&t, ino(&t, "zarr2/grow/1"), 1 << 20), new);
    // Another writer grows the array and sets an attribute.
    crate::support::grow_to_1500(&py, &src, "m");
    assert!(t.follow_source());
    let zarray = json_at(&t, "zarr2/grow/.zarray");
    assert_eq!(zarray["shape"], json!([1500]));
    assert_eq!(json_at(&t, "zarr2/grow/.zattrs")["units"], "m");
    let md = json_at(&t, "zarr2/.zmetadata")["metadata"].clone();
    assert_eq!(md["grow/.zarray"], zarray);
    let mut listed = names(&t, "zarr2/grow");
    listed.sort();
    assert_eq!(listed, [".zarray", ".zattrs", "0", "1", "2", "3", "4"]);
    let got = assemble2(&t, "grow", &zarray, 4096);
    let want: Vec<u8> = (0..1500i64).flat_map(|i| (i * 3).to_le_bytes()).collect();
    assert!(got == want, "the v2 chunk objects show the new data");
    // No page cache kept across opens of the view's files.
    assert!(!t.keep_cache(ino(&t, "zarr2/grow/0")));
}

/// A chunk that does not decode is EIO through the v2 view, as through the v3 view, and the
/// error names the object by its v2 path; the other chunks still read.
#[test]
fn a_damaged_chunk_is_eio_in_the_v2_view() {
    let py = or_skip!(python("a_damaged_chunk_is_eio_in_the_v2_view"));
    let (_dir, src) = crate::support::temp_path("t.b2nd");
    float32_b2nd(&py, &src, &[]);
    super::damaged::break_chunk(&src, 1);
    let t = Tree::from_source(&src, opts(false)).unwrap();
    let bad = ino(&t, "zarr2/t/0.1");
    let fh = t.open(bad, libc::O_RDONLY).unwrap();
    let err = t.read(bad, fh, 0, 1 << 20).unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "{err}");
    t.release(fh).unwrap();
    assert_eq!(t.path_of(bad), "/zarr2/t/0.1");
    let v3 = ino(&t, "zarr/t/c/0/1");
    let fh = t.open(v3, libc::O_RDONLY).unwrap();
    assert_eq!(t.read(v3, fh, 0, 1 << 20).unwrap_err().errno(), libc::EIO);
    t.release(fh).unwrap();
    let good = read_all(&t, ino(&t, "zarr2/t/1.0"), 1 << 20);
    let want: Vec<u8> = (10..20)
        .flat_map(|r| (0..15).map(move |c| (r * 30 + c) as f32))
        .flat_map(f32::to_le_bytes)
        .collect();
    assert_eq!(good, want);
}

/// Under `-o zarr_strict_json`, `.zattrs` and `.zmetadata` are strict JSON with a NaN
/// attribute as the string `"NaN"`; by default the bare token zarr-python 2 writes.
#[test]
fn nan_attributes_are_spelled_as_in_zarr_json() {
    let py = or_skip!(python("nan_attributes_are_spelled_as_in_zarr_json"));
    let (_dir, src) = crate::support::temp_path("t.b2nd");
    float32_b2nd(
        &py,
        &src,
        &[("missing", "float('nan')"), ("_FillValue", "-9999.0")],
    );
    let t = Tree::from_source(&src, opts(false)).unwrap();
    let text = String::from_utf8(read_all(&t, ino(&t, "zarr2/t/.zattrs"), 1 << 20)).unwrap();
    assert!(text.contains("\"missing\": NaN"), "{text}");
    // `_FillValue` as stored: the plain number zarr-python 2 and xarray write in v2.
    assert!(text.contains("\"_FillValue\": -9999.0"), "{text}");
    let mut o = opts(false);
    o.zarr_strict_json = true;
    let t = Tree::from_source(&src, o).unwrap();
    for f in ["zarr2/t/.zattrs", "zarr2/.zmetadata"] {
        let v: Value = serde_json::from_slice(&read_all(&t, ino(&t, f), 1 << 20)).unwrap();
        let attrs = match f.ends_with(".zattrs") {
            true => v,
            false => v["metadata"]["t/.zattrs"].clone(),
        };
        assert_eq!(attrs["missing"], "NaN", "{f}");
        assert_eq!(attrs["_FillValue"], -9999.0, "{f}");
    }
}

/// A directory of sources with members called `zarr` and `zarr2`: the members keep their
/// names in the root, the views move to `zarr_view` and `zarr2_view`, and each view shows
/// both members at their own names.
#[test]
fn members_called_zarr_and_zarr2_keep_their_names_and_the_views_move() {
    let py = or_skip!(python(
        "members_called_zarr_and_zarr2_keep_their_names_and_the_views_move"
    ));
    let dir = tempfile::tempdir().unwrap();
    for sub in ["zarr", "zarr2"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
        float32_b2nd(&py, &dir.path().join(sub).join("t.b2nd"), &[]);
    }
    // A source named after its stem `.zattrs`: not in the v2 view (its name is the group's
    // metadata file), which lists and looks up the metadata file once.
    float32_b2nd(&py, &dir.path().join(".zattrs.b2nd"), &[]);
    let t = Tree::from_source(dir.path(), opts(false)).unwrap();
    let mut top = names(&t, "");
    top.sort();
    assert_eq!(
        top,
        [
            ".zattrs.b2nd",
            "__attrs__",
            "zarr",
            "zarr2",
            "zarr2_view",
            "zarr_view"
        ]
    );
    let mut shown = names(&t, "zarr2_view");
    shown.sort();
    assert_eq!(shown, [".zattrs", ".zgroup", ".zmetadata", "zarr", "zarr2"]);
    let md = json_at(&t, "zarr2_view/.zmetadata")["metadata"].clone();
    assert_eq!(md["zarr2/t/.zarray"]["shape"], json!([20, 30]));
    assert_eq!(md["zarr/t/.zarray"]["chunks"], json!([10, 15]));
    assert!(md.get(".zattrs/.zarray").is_none(), "{md}");
    assert_eq!(md[".zattrs"], json!({}));
    assert_eq!(json_at(&t, "zarr2_view/.zattrs"), json!({}));
    let want: Vec<u8> = (0..10)
        .flat_map(|r| (0..15).map(move |c| (r * 30 + c) as f32))
        .flat_map(f32::to_le_bytes)
        .collect();
    assert_eq!(
        read_all(&t, ino(&t, "zarr2_view/zarr2/t/0.0"), 1 << 20),
        want
    );
    assert_eq!(
        t.path_of(ino(&t, "zarr2_view/zarr2/t/0.0")),
        "/zarr2_view/zarr2/t/0.0"
    );
}
