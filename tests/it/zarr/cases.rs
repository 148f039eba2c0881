//! The Zarr view read back: every reference case of `scripts/oracle/npy_cases.py` and a ctable
//! through the tree API against what python-blosc2 and bcolz read, and numpy through a mount.

use std::path::Path;

use b2fs::tree::Tree;
use serde_json::Value;

use super::{assemble, dims, ino, json_at, names, npy_data, read_all};
use crate::support::no_prefetch as opts;
use crate::support::{Mount, fuse_and_python, npy_cases, python, python_says, sha256_hex};

/// Cases whose dtype has no portable Zarr type: left out of the view.
const OMITTED: &[&str] = &[
    "struct_2d",
    "nested_1d",
    "padded_2d",
    "aligned_1d",
    "titled_1d",
    "subfield_2d",
    "S5_2d",
    "S300_1d",
    "f16_2d",
    "c32_1d",
    "M8generic_1d",
    "carray_S3",
    "ctable_4cols.name",
];

/// The chunk shape the source records (`meta/storage`): b2nd chunkshape, bcolz chunklen and
/// trailing dimensions, a plain frame's chunk in items.
fn source_chunks(t: &Tree, meta: &Value, npy_shape: &[u64]) -> Vec<u64> {
    let storage = json_at(t, "meta/storage");
    let mut c = match (storage.get("chunkshape"), storage.get("chunklen")) {
        (Some(cs), _) => dims(cs),
        (None, Some(len)) => {
            let mut c = vec![len.as_u64().unwrap()];
            c.extend_from_slice(&npy_shape[1..]);
            c
        }
        _ => panic!("no chunk shape in {storage}"),
    };
    let zshape = dims(&meta["shape"]);
    c.extend_from_slice(&zshape[c.len()..]);
    c.iter().map(|&x| x.max(1)).collect()
}

/// Each b2nd case of `cases` that the Zarr view shows (a portable type), on a writable tree
/// with `-o zarr_shards`: (its source, the tree, the array's name in `zarr/`).
fn sharded_trees(cases: &[Value]) -> impl Iterator<Item = (&Path, Tree, String)> {
    cases.iter().filter_map(|case| {
        let src = Path::new(case["source"].as_str().unwrap());
        if src.extension().is_none_or(|e| e != "b2nd") {
            return None;
        }
        let mut o = opts(true);
        o.zarr_shards = true;
        let t = Tree::from_source(src, o).unwrap();
        let name = names(&t, "zarr").into_iter().find(|n| n != "zarr.json")?;
        Some((src, t, name))
    })
}

#[test]
fn every_reference_case_reads_back_through_the_zarr_view() {
    let py = or_skip!(python(
        "every_reference_case_reads_back_through_the_zarr_view"
    ));
    let (_dir, cases) = npy_cases(&py);
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let source = Path::new(case["source"].as_str().unwrap());
        if case["kind"] == "table" {
            continue; // its columns come as "column" cases, and below as a table
        }
        let t = Tree::from_source(source, opts(false)).unwrap();
        assert!(names(&t, "").contains(&"zarr".to_owned()), "{name}");
        let root = json_at(&t, "zarr/zarr.json");
        assert_eq!(root["node_type"], "group");
        let cm = &root["consolidated_metadata"];
        assert_eq!(
            (&cm["kind"], &cm["must_understand"]),
            (&"inline".into(), &false.into())
        );
        let stem = source.file_name().unwrap().to_str().unwrap().to_owned();
        let stem = if source.is_dir() {
            stem
        } else {
            Path::new(&stem)
                .file_stem()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        };
        if OMITTED.contains(&name) {
            assert!(names(&t, "zarr").iter().all(|n| n != &stem), "{name} shown");
            assert!(cm["metadata"].as_object().unwrap().is_empty(), "{name}");
            let why = t
                .getxattr(ino(&t, "zarr"), "user.b2fs.zarr_omitted")
                .unwrap()
                .unwrap();
            let why: Value = serde_json::from_slice(&why).unwrap();
            assert!(why.get(&stem).is_some(), "{name}: {why}");
            continue;
        }
        let meta = json_at(&t, &format!("zarr/{stem}/zarr.json"));
        assert_eq!(
            cm["metadata"][&stem], meta,
            "{name}: consolidated = the array's own"
        );
        assert_eq!(meta["node_type"], "array");
        assert!(!meta["fill_value"].is_null());
        let (data, header) = npy_data(Path::new(case["npy"].as_str().unwrap()));
        let zshape = dims(&meta["shape"]);
        let nd = meta["dimension_names"].as_array().unwrap();
        assert_eq!(nd.len(), zshape.len(), "{name}: dimension_names");
        let npy_shape: Vec<u64> = header
            .split("'shape': (")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap()
            .split(',')
            .filter_map(|d| d.trim().parse().ok())
            .collect();
        assert_eq!(zshape[..npy_shape.len()], npy_shape[..], "{name}: shape");
        let chunks = dims(&meta["chunk_grid"]["configuration"]["chunk_shape"]);
        assert_eq!(
            chunks,
            source_chunks(&t, &meta, &npy_shape),
            "{name}: chunk shape"
        );
        for v2 in [".zarray", ".zattrs", ".zgroup", ".zmetadata"] {
            assert_eq!(
                t.lookup(ino(&t, &format!("zarr/{stem}")), v2)
                    .unwrap_err()
                    .errno(),
                libc::ENOENT
            );
        }
        let got = assemble(&t, &stem, &meta, 1000);
        assert!(
            got == data,
            "{name}: the chunk objects differ from the reference's data"
        );
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} cases checked");
}

#[test]
fn a_ctable_is_one_array_per_column_sharing_the_row_dimension() {
    let py = or_skip!(python(
        "a_ctable_is_one_array_per_column_sharing_the_row_dimension"
    ));
    let (_dir, cases) = npy_cases(&py);
    let table = cases.iter().find(|c| c["kind"] == "table").unwrap();
    let t = Tree::from_source(Path::new(table["source"].as_str().unwrap()), opts(false)).unwrap();
    let mut shown = names(&t, "zarr");
    shown.sort();
    assert_eq!(shown, ["flag", "id", "val", "zarr.json"]); // `name` is S5: left out
    let root = json_at(&t, "zarr/zarr.json");
    for col in ["flag", "id", "val"] {
        let meta = &root["consolidated_metadata"]["metadata"][col];
        assert_eq!(meta["dimension_names"], serde_json::json!(["row"]), "{col}");
        let case = cases
            .iter()
            .find(|c| c["name"] == format!("ctable_4cols.{col}"))
            .unwrap();
        let (data, _) = npy_data(Path::new(case["npy"].as_str().unwrap()));
        assert!(assemble(&t, col, meta, 7) == data, "{col}");
    }
}

#[test]
fn a_mount_shows_the_view_to_numpy() {
    let py = or_skip!(fuse_and_python("a_mount_shows_the_view_to_numpy"));
    let (_dir, cases) = npy_cases(&py);
    for name in ["f8_3d", "u8_2d", "M8ns_1d", "carray_f8_2d"] {
        let case = cases.iter().find(|c| c["name"] == name).unwrap();
        let src = Path::new(case["source"].as_str().unwrap());
        let m = Mount::daemon(src, &[]);
        let said = python_says(
            &py,
            &[
                "scripts/oracle/zarr_check.py",
                m.path("zarr").to_str().unwrap(),
                src.to_str().unwrap(),
            ],
        );
        assert_eq!(said, "ok", "{name}");
        m.umount();
    }
}

/// `-o zarr_shards` through the tree API, on every b2nd case of `npy_cases.py`: an array whose
/// blocks tile its chunks is sharded (its `zarr.json` says `sharding_indexed` with the
/// blockshape as inner chunks); each shard object is `data/N.bin` byte for byte followed by an
/// index of `(k * block bytes, block bytes)`, and `stat` gives that size; a read straddling the
/// data's end and the index gives both; the other arrays keep the plain layout; on a writable
/// tree an in-place write to a shard is refused (EPERM) and the chunk stays as it was, while a
/// shard in a Zarr writer's layout renamed over it replaces the chunk's blocks (python-blosc2
/// reads them back) and removing it zeroes the chunk.
#[test]
fn sharded_view_objects_are_the_stored_chunks_and_their_block_index() {
    let py = or_skip!(python(
        "sharded_view_objects_are_the_stored_chunks_and_their_block_index"
    ));
    let (_dir, cases) = npy_cases(&py);
    let (mut sharded, mut plain, mut by_block) = (0, 0, 0);
    for (src, t, name) in sharded_trees(&cases) {
        let meta = json_at(&t, &format!("zarr/{name}/zarr.json"));
        let storage = json_at(&t, "meta/storage");
        let (cs, bs) = (dims(&storage["chunkshape"]), dims(&storage["blockshape"]));
        let tiles = !cs.is_empty() && cs.iter().zip(&bs).all(|(c, b)| *b > 0 && c % b == 0);
        let count: u64 = match tiles {
            true => cs.iter().zip(&bs).map(|(c, b)| c / b).product(),
            false => 0,
        };
        let codec = &meta["codecs"][0];
        let chunk_bytes = || t.getattr(ino(&t, "data/00000000.bin")).unwrap().size;
        // (Blocks under 128 bytes: an index over an eighth of the data, not sharded.)
        if !tiles || count < 2 || chunk_bytes() / count < 128 {
            assert_eq!(codec["name"], "bytes", "{name}: {meta}");
            plain += 1;
            continue;
        }
        sharded += 1;
        assert_eq!(codec["name"], "sharding_indexed", "{name}");
        let inner = dims(&codec["configuration"]["chunk_shape"]);
        assert_eq!(&inner[..bs.len()], &bs[..], "{name}");
        let first = format!("zarr/{name}/c/{}", vec!["0"; cs.len().max(1)].join("/"));
        let (object, chunk) = (ino(&t, &first), ino(&t, "data/00000000.bin"));
        // A Zarr reader's reads of inner chunks (the index, then two blocks from the second,
        // each handle's first read) decode those blocks only, never the whole chunk.
        let nbytes = t.getattr(object).unwrap().size - 16 * count;
        let block = nbytes / count;
        for (at, len) in [(nbytes, 16 * count), (block, 2 * block)] {
            let fh = t.open(object, libc::O_RDONLY).unwrap();
            let got = t.read(object, fh, at, len as u32).unwrap();
            t.release(fh).unwrap();
            assert_eq!(got.len() as u64, len, "{name}");
        }
        if block >= 4096 {
            // (Blocks smaller than a page: a small read keeps the page, which spans blocks.)
            assert_eq!(
                t.cache_stats().loads,
                0,
                "{name}: a whole chunk was decoded"
            );
            by_block += 1;
        }
        let data = super::read_all(&t, chunk, 1 << 20);
        let size = t.getattr(object).unwrap().size;
        assert_eq!(size, data.len() as u64 + 16 * count, "{name}");
        let whole = super::read_all(&t, object, 4099);
        assert!(whole[..data.len()] == data[..], "{name}: the shard's data");
        let block = data.len() as u64 / count;
        for (k, e) in whole[data.len()..].chunks(16).enumerate() {
            let w = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
            assert_eq!(
                (w(&e[..8]), w(&e[8..])),
                (k as u64 * block, block),
                "{name}: {k}"
            );
        }
        let fh = t.open(object, libc::O_RDONLY).unwrap();
        let at = data.len() as u64 - 5;
        let across = t.read(object, fh, at, 30).unwrap();
        t.release(fh).unwrap();
        assert!(across[..] == whole[at as usize..at as usize + 30], "{name}");
        let fh = t
            .open(object, libc::O_WRONLY)
            .map(|fh| (fh, t.write(object, fh, 0, b"x")));
        match fh {
            Ok((fh, Err(e))) => {
                assert_eq!(e.errno(), libc::EPERM, "{name}");
                t.release(fh).unwrap();
            }
            Err(e) => assert_eq!(e.errno(), libc::EPERM, "{name}"),
            Ok((_, Ok(_))) => panic!("{name}: a write to a shard was accepted"),
        }
        assert!(
            super::read_all(&t, chunk, 1 << 20) == data,
            "{name}: the chunk changed"
        );
        // A shard is replaced whole, as zarr-python and TensorStore write it: a temp file
        // with the inner chunks in another order and one left out (the fill value), renamed
        // over the shard; python-blosc2 then reads those blocks in chunk 0.
        let dir = ino(&t, first.rsplit_once('/').unwrap().0);
        let leaf = first.rsplit_once('/').unwrap().1;
        let block = block as usize;
        let mut written = Vec::new();
        let mut expect = vec![0u8; data.len()];
        let mut index = Vec::new();
        for k in (0..count as usize).rev() {
            let (offset, nbytes) = match k == 1 {
                true => (u64::MAX, u64::MAX),
                false => {
                    let new: Vec<u8> = (0..block).map(|i| (k * 37 + i % 251) as u8).collect();
                    expect[k * block..(k + 1) * block].copy_from_slice(&new);
                    written.extend_from_slice(&new);
                    ((written.len() - block) as u64, block as u64)
                }
            };
            index.push((k, offset, nbytes));
        }
        index.sort();
        for (_, offset, nbytes) in index {
            written.extend_from_slice(&offset.to_le_bytes());
            written.extend_from_slice(&nbytes.to_le_bytes());
        }
        // First one that is not a shard of this array (an inner chunk a byte short): EINVAL,
        // the chunk unchanged, the temp file still there.
        let mut bad = written.clone();
        let last = bad.len() - 8;
        bad[last..].copy_from_slice(&(block as u64 - 1).to_le_bytes());
        for (temp, bytes) in [("0.bad.partial", &bad), ("0.abc.partial", &written)] {
            let (attr, fh) = t.create(dir, temp).unwrap();
            t.write(attr.ino, fh, 0, bytes).unwrap();
            t.release(fh).unwrap();
        }
        let refused = t
            .rename(dir, "0.bad.partial", dir, leaf, false)
            .unwrap_err();
        assert_eq!(refused.errno(), libc::EINVAL, "{name}");
        assert!(t.lookup(dir, "0.bad.partial").is_ok(), "{name}");
        assert!(read_all(&t, chunk, 1 << 20) == data, "{name}: changed");
        t.rename(dir, "0.abc.partial", dir, leaf, false).unwrap();
        assert!(read_all(&t, chunk, 1 << 20) == expect, "{name}: replaced");
        let mut own = expect.clone();
        own.extend_from_slice(&whole[data.len()..]);
        assert!(
            read_all(&t, object, 4099) == own,
            "{name}: the view's layout"
        );
        let chunk0 = |src: &Path| {
            python_says(
                &py,
                &[
                    "-c",
                    "import sys, hashlib, blosc2; \
                     a = blosc2.open(sys.argv[1]); \
                     print(hashlib.sha256(a.schunk.decompress_chunk(0)).hexdigest())",
                    src.to_str().unwrap(),
                ],
            )
        };
        assert_eq!(chunk0(src), sha256_hex(&expect), "{name}: python-blosc2");
        // Removing a shard (a Zarr writer's way to say every inner chunk is the fill value).
        t.unlink(dir, leaf).unwrap();
        assert!(
            read_all(&t, chunk, 1 << 20).iter().all(|&b| b == 0),
            "{name}"
        );
        assert_eq!(
            chunk0(src),
            sha256_hex(&vec![0; data.len()]),
            "{name}: removed"
        );
    }
    assert!(
        sharded >= 2 && plain >= 2 && by_block >= 1,
        "sharded {sharded}, plain {plain}, checked by block {by_block}"
    );
}

/// A rename over a shard that is refused (not a shard of the array) keeps another handle's
/// pending edit of the chunk (review of session 23: it was dropped).
#[test]
fn a_refused_rename_over_a_shard_keeps_another_handles_edit() {
    let py = or_skip!(python(
        "a_refused_rename_over_a_shard_keeps_another_handles_edit"
    ));
    let (_dir, cases) = npy_cases(&py);
    for (_, t, name) in sharded_trees(&cases) {
        let meta = json_at(&t, &format!("zarr/{name}/zarr.json"));
        if meta["codecs"][0]["name"] != "sharding_indexed" {
            continue;
        }
        let storage = json_at(&t, "meta/storage");
        let cs = dims(&storage["chunkshape"]);
        let first = format!("zarr/{name}/c/{}", vec!["0"; cs.len().max(1)].join("/"));
        let chunk = ino(&t, "data/00000000.bin");
        let (dirp, leaf) = first.rsplit_once('/').unwrap();
        let dir = ino(&t, dirp);
        // Another process edits chunk 0 through its chunk file, not yet closed.
        let cfh = t.open(chunk, libc::O_RDWR).unwrap();
        let before = super::read_all(&t, chunk, 1 << 20);
        let mark = before[0].wrapping_add(1);
        t.write(chunk, cfh, 0, &[mark]).unwrap();
        // A zarr writer renames garbage over shard 0: refused.
        let (attr, fh) = t.create(dir, "0.bad.partial").unwrap();
        t.write(attr.ino, fh, 0, b"not a shard").unwrap();
        t.release(fh).unwrap();
        let e = t
            .rename(dir, "0.bad.partial", dir, leaf, false)
            .unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        // Its close commits it (a dropped edit would commit nothing).
        t.release(cfh).unwrap();
        let now = super::read_all(&t, chunk, 1 << 20);
        assert_eq!(now[0], mark, "{name}: the other handle's edit was dropped");
        assert!(now[1..] == before[1..], "{name}");
        return;
    }
    panic!("no sharded case");
}
