//! What b2fs says about a source, in process (no kernel): `meta/storage` names and the named
//! `b2nd` metalayer against python-blosc2's own view of arrays it writes at test time, the
//! extended attributes of chunk files and of the root (`user.b2fs.*`), and the event log
//! behind `b2fs log`.

use std::path::Path;

use b2fs::tree::{ROOT_INO, ReaderOptions, Tree, TreeOptions, chunk_name};
use serde_json::Value;

use crate::support::{data_dir, python, repo_root, run_python};
use crate::tree::{ino_of, json_at};

/// Writes one 2-D float64 b2nd array per (codec, filters) case with python-blosc2 into
/// argv[1] and prints, per array, python-blosc2's own view of it.
const GEN: &str = r#"
import blosc2, numpy as np, json, sys
out = sys.argv[1]
cases = [("ZSTD", ["SHUFFLE"], [0]), ("LZ4", ["BITSHUFFLE"], [0]),
         ("BLOSCLZ", ["DELTA", "SHUFFLE"], [0, 0]), ("ZLIB", ["TRUNC_PREC", "SHUFFLE"], [20, 0]),
         ("LZ4HC", ["SHUFFLE", "BYTEDELTA"], [0, 8])]
res = []
rng = np.random.default_rng()
for i, (codec, filters, meta) in enumerate(cases):
    a = np.cumsum(rng.normal(size=(300, 100)), axis=1)
    cp = blosc2.CParams(codec=getattr(blosc2.Codec, codec), clevel=int(rng.integers(1, 10)),
                        filters=[getattr(blosc2.Filter, f) for f in filters], filters_meta=meta)
    p = f"{out}/c{i}.b2nd"
    blosc2.asarray(a, chunks=(100, 100), blocks=(20, 100), urlpath=p, mode="w", cparams=cp)
    b = blosc2.open(p)
    s = b.schunk
    c = s.cparams
    res.append({"path": p, "codec": c.codec.name, "filters": [f.name for f in c.filters],
                "clevel": c.clevel, "typesize": c.typesize, "blocksize": s.blocksize,
                "b2nd": s.meta["b2nd"], "shape": list(b.shape), "chunks": list(b.chunks),
                "blocks": list(b.blocks), "dtype": b.dtype.str,
                "cbytes": [blosc2.get_cbuffer_sizes(s.get_chunk(j))[1]
                           for j in range(s.nchunks)]})
print(json.dumps(res))
"#;

/// The extended attribute `key` (`user.b2fs.<key>`) of `ino` as text.
#[track_caller]
fn xattr(t: &Tree, ino: u64, key: &str) -> String {
    let v = t
        .getxattr(ino, &format!("user.b2fs.{key}"))
        .unwrap()
        .unwrap_or_else(|| panic!("no user.b2fs.{key} on inode {ino}"));
    String::from_utf8(v).unwrap()
}

fn listed(t: &Tree, ino: u64) -> Vec<String> {
    let raw = t.listxattr(ino).unwrap();
    raw.split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8(n.to_vec()).unwrap())
        .collect()
}

#[test]
fn describe_names_metalayer_and_xattrs_match_python_blosc2() {
    let py = or_skip!(python(
        "describe_names_metalayer_and_xattrs_match_python_blosc2"
    ));
    let dir = tempfile::tempdir().unwrap();
    let out = run_python(&py, &["-c", GEN, dir.path().to_str().unwrap()]);
    let cases: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(cases.len(), 5);
    for want in &cases {
        let src = Path::new(want["path"].as_str().unwrap());
        let ctx = format!("{} {}", want["codec"], want["filters"]);
        let t = Tree::from_source(src, TreeOptions::default()).unwrap();

        // meta/storage: python-blosc2's names beside the ids.
        let cp = &json_at(&t, "meta/storage")["cparams"];
        assert_eq!(cp["codec"], want["codec"], "{ctx}");
        assert_eq!(cp["filter_names"], want["filters"], "{ctx}");
        assert_eq!(cp["clevel"], want["clevel"], "{ctx}");
        assert!(cp["codec_id"].is_u64() && cp["filters"].is_array(), "{ctx}");

        // meta/metalayers/b2nd: named fields, equal to the stored layer and the array's view.
        let ml = json_at(&t, "meta/metalayers/b2nd");
        let raw = want["b2nd"].as_array().unwrap();
        assert_eq!(ml["version"], raw[0], "{ctx}");
        assert_eq!(ml["ndim"], raw[1], "{ctx}");
        assert_eq!(ml["dtype_format"], raw[5], "{ctx}");
        assert_eq!(ml["shape"], want["shape"], "{ctx}");
        assert_eq!(ml["chunkshape"], want["chunks"], "{ctx}");
        assert_eq!(ml["blockshape"], want["blocks"], "{ctx}");
        assert_eq!(ml["dtype"], want["dtype"], "{ctx}");

        // Chunk files: the header's story, as python-blosc2 tells it.
        let active: Vec<&str> = want["filters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .filter(|f| *f != "NOFILTER")
            .collect();
        let cbytes = want["cbytes"].as_array().unwrap();
        assert_eq!(cbytes.len(), 3);
        for (i, cb) in cbytes.iter().enumerate() {
            let ino = ino_of(&t, &format!("data/{}", chunk_name(i)));
            assert_eq!(xattr(&t, ino, "codec"), want["codec"].as_str().unwrap());
            assert_eq!(xattr(&t, ino, "filters"), active.join(","), "{ctx}");
            assert_eq!(xattr(&t, ino, "clevel"), want["clevel"].to_string());
            assert_eq!(xattr(&t, ino, "typesize"), want["typesize"].to_string());
            assert_eq!(xattr(&t, ino, "blocksize"), want["blocksize"].to_string());
            assert_eq!(xattr(&t, ino, "cbytes"), cb.to_string(), "{ctx} chunk {i}");
            assert_eq!(xattr(&t, ino, "nbytes"), "80000");
            assert_eq!(xattr(&t, ino, "special"), "no");
            assert_eq!(xattr(&t, ino, "index"), i.to_string());
            let info: Value = serde_json::from_str(&xattr(&t, ino, "inodeinfo")).unwrap();
            assert_eq!(info["cbytes"], *cb);
            assert_eq!(info["codec"], want["codec"]);
            let names = listed(&t, ino);
            for key in [
                "codec",
                "filters",
                "clevel",
                "typesize",
                "blocksize",
                "cbytes",
            ] {
                assert!(names.contains(&format!("user.b2fs.{key}")), "{names:?}");
            }
            assert_eq!(t.getxattr(ino, "user.b2fs.nonsense").unwrap(), None);
            assert_eq!(t.getxattr(ino, "user.b2fs.log").unwrap(), None);
        }
        // The root: what the mount is.
        assert_eq!(xattr(&t, ROOT_INO, "source"), src.display().to_string());
        assert_eq!(xattr(&t, ROOT_INO, "kind"), "cframe+b2nd");
        assert_eq!(xattr(&t, ROOT_INO, "version"), env!("CARGO_PKG_VERSION"));
        assert_eq!(xattr(&t, ROOT_INO, "writable"), "no");
    }
}

#[test]
fn describe_special_chunks_and_other_files() {
    let src = data_dir().join("frames/schunk_fill_special.b2frame");
    let sc: Value = serde_json::from_slice(
        &std::fs::read(data_dir().join("frames/schunk_fill_special.json")).unwrap(),
    )
    .unwrap();
    let t = Tree::from_source(&src, TreeOptions::default()).unwrap();
    for c in sc["chunk_list"].as_array().unwrap() {
        let i = c["index"].as_u64().unwrap() as usize;
        let ino = ino_of(&t, &format!("data/{}", chunk_name(i)));
        let want = c["special"].as_str().unwrap_or("no");
        assert_eq!(xattr(&t, ino, "special"), want, "chunk {i}");
        assert_eq!(xattr(&t, ino, "cbytes"), c["cbytes"].to_string());
        assert_eq!(xattr(&t, ino, "nbytes"), c["nbytes"].to_string());
    }
    // Metadata files and directories have no attributes; unknown inodes are ENOENT.
    for path in ["__attrs__", "meta/storage", "meta", "data"] {
        let ino = ino_of(&t, path);
        assert!(listed(&t, ino).is_empty(), "{path}");
        assert_eq!(t.getxattr(ino, "user.b2fs.codec").unwrap(), None, "{path}");
    }
    assert_eq!(t.listxattr(1 << 40).unwrap_err().errno(), libc::ENOENT);
}

#[test]
fn describe_root_cache_counters_follow_reads() {
    let t = Tree::from_source(
        &repo_root().join("examples/sample.b2nd"),
        TreeOptions {
            reader: ReaderOptions {
                cache_size: 8 << 20,
                prefetch_chunks: 0,
                ..ReaderOptions::default()
            },
            ..TreeOptions::default()
        },
    )
    .unwrap();
    assert_eq!(xattr(&t, ROOT_INO, "cache_size"), (8 << 20).to_string());
    assert_eq!(xattr(&t, ROOT_INO, "cache_hit_rate"), "n/a");
    let ino = ino_of(&t, "data/00000000.bin");
    for _ in 0..4 {
        let fh = t.open(ino, libc::O_RDONLY).unwrap();
        assert_eq!(t.read(ino, fh, 0, 1 << 20).unwrap().len(), 2736);
        t.release(fh).unwrap();
    }
    // One load, three hits.
    assert_eq!(xattr(&t, ROOT_INO, "cache_loads"), "1");
    assert_eq!(xattr(&t, ROOT_INO, "cache_hits"), "3");
    assert_eq!(xattr(&t, ROOT_INO, "cache_hit_rate"), "0.750");
    assert_eq!(xattr(&t, ROOT_INO, "cache_bytes"), "2736");
    // Issue 21: what describes the mount, not the data, is read by name and never listed
    // (`cp -a` and `rsync -aX` copy every listed attribute).
    let names = listed(&t, ROOT_INO);
    assert!(names.contains(&"user.b2fs.source".to_owned()), "{names:?}");
    for live in [
        "pid",
        "version",
        "writable",
        "cache_hits",
        "cache_size",
        "walk_lead_pages",
        "stats",
    ] {
        assert!(!names.contains(&format!("user.b2fs.{live}")), "{names:?}");
    }
    assert_eq!(xattr(&t, ROOT_INO, "pid"), std::process::id().to_string());
    let stats: serde_json::Value = serde_json::from_str(&xattr(&t, ROOT_INO, "stats")).unwrap();
    assert_eq!(stats["cache_hits"], 3);
    assert_eq!(stats["cache_loads"], 1);
    // No page of array.npy was stored ahead of a walk down a column: no faults.
    assert_eq!(stats["walk_lead_pages"], 0);
    assert_eq!(stats["walk_lead_reached"], 0);
    let info: serde_json::Value = serde_json::from_str(&xattr(&t, ROOT_INO, "inodeinfo")).unwrap();
    assert!(info.get("cache_hits").is_none(), "{info}");
    assert!(info.get("kind").is_some(), "{info}");
    assert!(
        !names.contains(&"user.b2fs.log".to_owned()),
        "the log is not listed"
    );
}

#[test]
fn describe_event_log_keeps_refusals_with_their_path_and_reason() {
    let (_dir, src) = crate::support::temp_path("s.b2nd");
    std::fs::copy(repo_root().join("examples/sample.b2nd"), &src).unwrap();
    let t = crate::support::rw_tree(&src);
    let log = |t: &Tree| {
        String::from_utf8(t.getxattr(ROOT_INO, "user.b2fs.log").unwrap().unwrap()).unwrap()
    };
    assert!(log(&t).starts_with("# 0 refusals/errors"), "{}", log(&t));

    // What the fuse adapter does with a failed flush: hand it to the tree's log.
    let attrs = ino_of(&t, "__attrs__");
    let fh = t.open(attrs, libc::O_WRONLY | libc::O_TRUNC).unwrap();
    t.write(attrs, fh, 0, b"bad\n").unwrap();
    let e = t.flush(attrs, fh).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    t.note_error("flush", attrs, &e);
    t.release(fh).unwrap();
    // Probes are not kept.
    let probe = t.lookup(ROOT_INO, "nope").unwrap_err();
    t.note_error("lookup", ROOT_INO, &probe);
    // A refused chunk write names the chunk file.
    let chunk = ino_of(&t, "data/00000001.bin");
    let fh = t.open(chunk, libc::O_WRONLY).unwrap();
    let big = t.write(chunk, fh, 1 << 20, b"x").unwrap_err();
    t.note_error("write", chunk, &big);
    t.release(fh).unwrap();

    let text = log(&t);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("# 2 refusals/errors"), "{text}");
    assert!(
        lines[1].contains(" flush /__attrs__: EINVAL (Invalid argument): ")
            && lines[1].contains("JSON"),
        "{text}"
    );
    assert!(
        lines[2].contains(" write /data/00000001.bin: EFBIG (File too large): "),
        "{text}"
    );
    assert_eq!(t.path_of(chunk), "/data/00000001.bin");
    assert_eq!(t.path_of(ROOT_INO), "/");
}

#[test]
fn describe_setxattr_is_refused_the_way_copying_tools_expect() {
    let (_dir, src) = crate::support::temp_path("s.b2nd");
    std::fs::copy(repo_root().join("examples/sample.b2nd"), &src).unwrap();
    let rw = crate::support::rw_tree(&src);
    let errno = |r: Result<(), b2fs::tree::TreeError>| r.unwrap_err().errno();
    let (_attr, fh) = rw.create(ROOT_INO, "sedXYZ").unwrap();
    let scratch = rw.lookup(ROOT_INO, "sedXYZ").unwrap().ino;
    // sed -i copies the original's ACL to its temp file: "not supported" lets it fall back
    // to chmod silently (ENOENT or EPERM made it warn).
    let acl = "system.posix_acl_access";
    assert_eq!(errno(rw.set_xattr(scratch, acl)), libc::EOPNOTSUPP);
    assert_eq!(errno(rw.set_xattr(scratch, "user.x")), libc::EOPNOTSUPP);
    assert_eq!(errno(rw.set_xattr(ROOT_INO, acl)), libc::EOPNOTSUPP);
    rw.release(fh).unwrap();
    let chunk = ino_of(&rw, "data/00000000.bin");
    assert_eq!(errno(rw.set_xattr(chunk, "user.b2fs.codec")), libc::EPERM);
    assert_eq!(errno(rw.set_xattr(1 << 40, "user.x")), libc::ENOENT);
    let ro = Tree::from_source(&src, TreeOptions::default()).unwrap();
    assert_eq!(errno(ro.set_xattr(chunk, "user.x")), libc::EROFS);
    assert_eq!(errno(ro.set_xattr(chunk, acl)), libc::EROFS);
}
