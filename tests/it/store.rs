//! Collections: `.b2z`/`.b2d` stores written by python-blosc2 (TreeStore, DictStore, a
//! 4.0.0-style `b2embed` store, ZIP64 members, embedded values, SChunk leaves, attributes)
//! read leaf by leaf against python-blosc2's `decompress_chunk`; `.b2z` commits read back by
//! python-blosc2 in modes 'r' and 'a'; crashes at every commit step; damaged zips; directories
//! of sources. Oracle: `scripts/oracle/stores.py`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use b2fs::codec;
use b2fs::container::store::{Form, Location, Marker, Node, open_store};
use b2fs::container::write::{
    Edit, chunk_cparams, commit_group_attrs, commit_group_attrs_with_crash_after, commit_member,
    commit_member_with_crash_after,
};
use b2fs::container::{Collection, Opened, open_any};
use serde_json::{Value, json};

use crate::support;
use crate::support::steps::every_commit_step;

/// The stores of `stores.py gen`, made once per test run, and their manifest.
fn fixtures(test: &str) -> Option<(PathBuf, PathBuf, &'static Value)> {
    static DIR: OnceLock<(tempfile::TempDir, Value)> = OnceLock::new();
    let py = support::python(test)?;
    let (dir, manifest) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().to_str().unwrap().to_string();
        support::run_python(&py, &["scripts/oracle/stores.py", "gen", &d]);
        let m = std::fs::read_to_string(dir.path().join("manifest.json")).unwrap();
        (dir, serde_json::from_str(&m).unwrap())
    });
    Some((py, dir.path().to_path_buf(), manifest))
}

fn collection(path: &Path) -> Collection {
    match open_any(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        Opened::Collection(c) => c,
        Opened::Single(_) => panic!("{} opened as a single source", path.display()),
    }
}

fn chunk_shas(a: &b2fs::container::Array) -> Vec<String> {
    (0..a.nchunks())
        .map(|i| {
            let c = a.chunk_bytes(i).unwrap();
            support::sha256_hex(&codec::decompress(&c).unwrap())
        })
        .collect()
}

/// Checks `c` against python's description of the same store (`stores.py` describe).
fn check_against(c: &Collection, want: &Value, name: &str) {
    let keys = want["keys"].as_object().unwrap();
    let leaves: Vec<String> = c.leaves().iter().map(|l| l.key().to_string()).collect();
    let mut expected: Vec<String> = keys.keys().cloned().collect();
    expected.sort();
    assert_eq!(leaves, expected, "{name}: leaf keys");
    for (key, w) in keys {
        let Some(Node::Leaf(leaf)) = c.find(key) else {
            panic!("{name}: {key} is not a leaf");
        };
        let embedded = matches!(leaf.location(), Location::Embedded { .. });
        if c.form() == Form::Zip {
            assert_eq!(embedded, w["window"].is_null(), "{name}: {key} embedded");
        }
        let a = leaf
            .array()
            .unwrap_or_else(|e| panic!("{name}: {key}: {e}"));
        let want_chunks: Vec<String> = w["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        assert_eq!(chunk_shas(a), want_chunks, "{name}: {key} chunks");
        if let Some(shape) = w.get("shape") {
            let got: Vec<Value> = a.geometry().shape.iter().map(|&d| json!(d)).collect();
            assert_eq!(&Value::Array(got), shape, "{name}: {key} shape");
        }
    }
    for (gkey, attrs) in want["attrs"].as_object().unwrap() {
        let g = c
            .group(gkey)
            .unwrap_or_else(|| panic!("{name}: group {gkey}"));
        assert_eq!(&g.attrs().unwrap(), attrs, "{name}: attrs of {gkey}");
    }
}

#[test]
fn store_every_kind_matches_python() {
    let (_py, dir, manifest) = or_skip!(fixtures("store_every_kind_matches_python"));
    for (name, want) in manifest.as_object().unwrap() {
        let c = collection(&dir.join(name));
        let form = if name.ends_with(".b2z") {
            Form::Zip
        } else {
            Form::Dir
        };
        assert_eq!(c.form(), form, "{name}");
        let marker = match name.as_str() {
            "dict.b2z" => Some(Marker::Dict),
            "old.b2z" => Some(Marker::Embed),
            _ => Some(Marker::Tree),
        };
        assert_eq!(c.marker(), marker, "{name}");
        check_against(&c, want, name);
        // Carriers never show as leaves.
        assert!(
            c.leaves().iter().all(|l| l.name() != "__vlmeta__"),
            "{name}"
        );
    }
    // The ZIP64 fixture really has a ZIP64 local extra field on its first member.
    let z = std::fs::read(dir.join("zip64.b2z")).unwrap();
    assert_eq!(
        u16::from_le_bytes([z[28], z[29]]),
        20,
        "ZIP64 extra in fixture"
    );
}

#[test]
fn store_open_reads_no_leaf() {
    let (_py, dir, _) = or_skip!(fixtures("store_open_reads_no_leaf"));
    let c = open_store(&dir.join("deflt.b2z")).unwrap();
    assert!(c.leaves().iter().all(|l| !l.is_open()));
    let leaf = c.leaves()[0].clone();
    leaf.array().unwrap();
    assert!(leaf.is_open());
    assert_eq!(c.leaves().iter().filter(|l| l.is_open()).count(), 1);
}

#[test]
fn store_of_10000_members_opens_fast() {
    let py = or_skip!(support::python("store_of_10000_members_opens_fast"));
    let p = support::many_members_store(&py);
    let t = Instant::now();
    let c = open_store(p).unwrap();
    let took = t.elapsed();
    eprintln!("open_store of 10000 members: {took:?}");
    assert_eq!(c.leaves().len(), 10000);
    assert!(c.leaves().iter().all(|l| !l.is_open()));
    assert!(took.as_secs_f64() < 1.0, "took {took:?}");
    let Some(Node::Leaf(l)) = c.find("/g7/a4207") else {
        panic!("no /g7/a4207");
    };
    let a = l.array().unwrap();
    let data = codec::decompress(&a.chunk_bytes(0).unwrap()).unwrap();
    let want: Vec<u8> = (4207..4211i32).flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(data, want);
}

fn copy_store(from: &Path, tmp: &tempfile::TempDir) -> PathBuf {
    let to = tmp.path().join(from.file_name().unwrap());
    std::fs::copy(from, &to).unwrap();
    to
}

/// A new chunk 0 for `/temps` (float64, 2500 items): the values 0..2500 reversed.
fn new_chunk(a: &b2fs::container::Array) -> (Vec<u8>, Vec<u8>) {
    let data: Vec<u8> = (0..2500)
        .rev()
        .flat_map(|v| f64::from(v).to_le_bytes())
        .collect();
    let chunk = codec::compress(&data, &chunk_cparams(a).unwrap()).unwrap();
    (data, chunk)
}

fn python_reads(py: &Path, path: &Path) -> Value {
    let out = support::python_says(
        py,
        &["scripts/oracle/stores.py", "read", path.to_str().unwrap()],
    );
    serde_json::from_str(&out).unwrap()
}

#[test]
fn store_b2z_commit_read_by_python() {
    let (py, dir, manifest) = or_skip!(fixtures("store_b2z_commit_read_by_python"));
    let tmp = tempfile::tempdir().unwrap();
    for name in ["deflt.b2z", "zip64.b2z"] {
        let p = copy_store(&dir.join(name), &tmp);
        let c = open_store(&p).unwrap();
        let key = if name == "zip64.b2z" {
            "/little"
        } else {
            "/temps"
        };
        let Some(Node::Leaf(leaf)) = c.find(key) else {
            panic!("{key}");
        };
        let a = leaf.array().unwrap();
        let (data, chunk) = if name == "zip64.b2z" {
            let d: Vec<u8> = (0..10i8).rev().map(|v| v as u8).collect();
            let ch = codec::compress(&d, &chunk_cparams(a).unwrap()).unwrap();
            (d, ch)
        } else {
            new_chunk(a)
        };
        let edit = Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(chunk))],
            attrs: Some(json!({"edited": "by b2fs"})),
            ..Edit::default()
        };
        commit_member(&c, leaf, &edit).unwrap();
        drop(c);
        if name == "deflt.b2z" {
            let c = open_store(&p).unwrap();
            commit_group_attrs(&c, "/group", &json!({"units": "kg", "k": 2})).unwrap();
        }
        let got = python_reads(&py, &p);
        let mut want = manifest[name].clone();
        let w = &mut want["keys"][key];
        w["chunks"][0] = json!(support::sha256_hex(&data));
        assert_eq!(got["keys"][key]["chunks"], w["chunks"], "{name}");
        assert_eq!(got["keys"][key]["vlmeta"], json!({"edited": "by b2fs"}));
        for (k, v) in want["keys"].as_object().unwrap() {
            if k != key {
                assert_eq!(
                    got["keys"][k]["chunks"], v["chunks"],
                    "{name} {k} untouched"
                );
            }
        }
        if name == "deflt.b2z" {
            assert_eq!(got["attrs"]["/group"], json!({"units": "kg", "k": 2}));
            assert_eq!(got["attrs"]["/"], want["attrs"]["/"]);
        }
        let reopened = open_store(&p).unwrap();
        assert_eq!(
            got["append_keys"].as_u64().unwrap() as usize,
            reopened.leaves().len() + count_groups(&reopened),
            "{name}: mode 'a' opened (CRCs checked)"
        );
        // b2fs reads its own result.
        let c = open_store(&p).unwrap();
        let Some(Node::Leaf(leaf)) = c.find(key) else {
            panic!("{key}");
        };
        assert_eq!(
            codec::decompress(&leaf.array().unwrap().chunk_bytes(0).unwrap()).unwrap(),
            data
        );
        let names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| !n.contains("b2fs")),
            "temporary files left: {names:?}"
        );
    }
}

fn count_groups(c: &Collection) -> usize {
    fn walk(g: &b2fs::container::store::Group) -> usize {
        g.children
            .iter()
            .map(|n| match n {
                Node::Group(s) => 1 + walk(s),
                _ => 0,
            })
            .sum()
    }
    walk(c.root())
}

#[test]
fn store_refusals() {
    let (_py, dir, _) = or_skip!(fixtures("store_refusals"));
    let tmp = tempfile::tempdir().unwrap();
    let p = copy_store(&dir.join("tree.b2z"), &tmp);
    let before = std::fs::read(&p).unwrap();
    let c = open_store(&p).unwrap();
    // A group that does not exist.
    assert!(commit_group_attrs(&c, "/nope", &json!({"x": 1})).is_err());
    assert_eq!(std::fs::read(&p).unwrap(), before);
    // A group of a DictStore (no carrier: python-blosc2 has no group attributes there,
    // and a carrier would show as one more key).
    let p = copy_store(&dir.join("dict.b2z"), &tmp);
    let before = std::fs::read(&p).unwrap();
    let c = open_store(&p).unwrap();
    let e = commit_group_attrs(&c, "/y", &json!({"x": 1})).unwrap_err();
    assert!(e.to_string().contains("no TreeStore"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), before);
}

/// A TreeStore group that never had attributes (no `__vlmeta__` carrier) gets a carrier
/// when they are first written, as python-blosc2 does: in a `.b2z` a new member, in a
/// `.b2d` a new file; python-blosc2 reads the attributes and every leaf as before, mode 'a'
/// opens the zip (CRCs checked), b2fs reads them back, and no temporary file stays.
#[test]
fn store_a_group_without_attributes_gets_a_carrier_python_blosc2_reads() {
    let (py, dir, manifest) = or_skip!(fixtures(
        "store_a_group_without_attributes_gets_a_carrier_python_blosc2_reads"
    ));
    for name in ["tree.b2z", "tree.b2d"] {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join(name);
        support::copy_tree(&dir.join(name), &p);
        let c = open_store(&p).unwrap();
        assert!(c.group("/a/b").unwrap().carrier().is_none(), "{name}");
        assert!(c.group("/").unwrap().carrier().is_some(), "{name}");
        let attrs = json!({"title": "deep", "levels": [1, 2, 3]});
        commit_group_attrs(&c, "/a/b", &attrs).unwrap();
        drop(c);
        let got = python_reads(&py, &p);
        let want = &manifest[name];
        assert_eq!(got["attrs"]["/a/b"], attrs, "{name}");
        for (k, v) in want["attrs"].as_object().unwrap() {
            if k != "/a/b" {
                assert_eq!(&got["attrs"][k], v, "{name}: {k}");
            }
        }
        assert_eq!(got["keys"], want["keys"], "{name}: the leaves changed");
        // b2fs finds the new carrier, and a second edit goes through it.
        let c = open_store(&p).unwrap();
        let g = c.group("/a/b").unwrap();
        assert!(g.carrier().is_some(), "{name}");
        assert_eq!(g.attrs().unwrap(), attrs, "{name}");
        commit_group_attrs(&c, "/a/b", &json!({"title": "again"})).unwrap();
        drop(c);
        assert_eq!(
            python_reads(&py, &p)["attrs"]["/a/b"],
            json!({"title": "again"})
        );
        let stray: Vec<String> = walk_names(tmp.path())
            .into_iter()
            .filter(|n| n.contains("b2fs"))
            .collect();
        assert!(stray.is_empty(), "{name}: temporary files left: {stray:?}");
    }
}

/// A crash at every durable step of an attribute commit to a `.b2d` group's existing
/// carrier file (an empty frame, rewritten whole through a temp file) leaves the attributes
/// old or new and python-blosc2's keys as they were: the temp file lies beside the store,
/// where python-blosc2 does not take it for a key (inside it, a crash left one).
#[test]
fn store_b2d_carrier_commit_crash_at_every_step_leaves_no_key_behind() {
    let (py, dir, manifest) = or_skip!(fixtures(
        "store_b2d_carrier_commit_crash_at_every_step_leaves_no_key_behind"
    ));
    let name = "deflt.b2d";
    let old = &manifest[name]["attrs"]["/group"];
    every_commit_step(name, 3, |steps| {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join(name);
        support::copy_tree(&dir.join(name), &p);
        let c = open_store(&p).unwrap();
        assert!(c.group("/group").unwrap().carrier().is_some());
        let attrs = json!({"units": "kg"});
        let done = commit_group_attrs_with_crash_after(&c, "/group", &attrs, steps).unwrap();
        drop(c);
        let got = python_reads(&py, &p);
        let now = &got["attrs"]["/group"];
        assert!(now == old || *now == attrs, "step {steps}: {now}");
        assert_eq!(got["keys"], manifest[name]["keys"], "step {steps}");
        if done {
            assert_eq!(*now, attrs);
        }
        done
    });
}

/// A `.b2d` TreeStore opened by python-blosc2 with `locking=True` and kept open: a group
/// without a directory (its leaves all in `embed.b2e`) gets a carrier (the directory made),
/// and the open handle, which rescans only when the lock's counter moves, then reads the
/// attributes and adds its own to them: nothing b2fs committed is lost.
#[test]
fn store_b2d_new_carrier_is_seen_by_a_locking_python_blosc2_handle() {
    let t = "store_b2d_new_carrier_is_seen_by_a_locking_python_blosc2_handle";
    let py = or_skip!(support::python(t));
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("lk.b2d");
    let script = "import sys, json, numpy as np, blosc2\n\
        path = sys.argv[1]\n\
        with blosc2.TreeStore(path, mode='w', threshold=None) as ts:\n\
        \x20   ts['/g/x'] = np.arange(3)\n\
        \x20   ts['/h/y'] = np.arange(4)\n\
        ts = blosc2.TreeStore(path, mode='a', locking=True)\n\
        print('ready', flush=True)\n\
        sys.stdin.readline()\n\
        seen = dict(ts.get_subtree('/g').vlmeta)\n\
        ts.get_subtree('/g').vlmeta['py'] = 1\n\
        ts.close()\n\
        with blosc2.TreeStore(path, mode='r') as ts:\n\
        \x20   print(json.dumps({'seen': seen, 'final': dict(ts.get_subtree('/g').vlmeta), \
        'keys': sorted(ts.keys())}))\n";
    let mut child = std::process::Command::new(&py)
        .args(["-c", script, p.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    assert!(!p.join("g").exists(), "the group has a directory already");
    let sidecar = p.join("embed.b2e.b2lock");
    // The generation counter, bytes 8..16 (python-blosc2 leaves the file empty until the
    // first count).
    let counter = || {
        let b = std::fs::read(&sidecar).unwrap();
        b.get(8..16)
            .map_or(0, |c| u64::from_ne_bytes(c.try_into().unwrap()))
    };
    let before = counter();
    let c = open_store(&p).unwrap();
    commit_group_attrs(&c, "/g", &json!({"fs": 1})).unwrap();
    drop(c);
    assert!(p.join("g/__vlmeta__.b2f").is_file());
    assert_eq!(counter(), before + 1, "the lock's counter did not move");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    let got: Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(got["seen"], json!({"fs": 1}), "{got}");
    assert_eq!(got["final"], json!({"fs": 1, "py": 1}), "{got}");
    assert_eq!(got["keys"], json!(["/g", "/g/x", "/h", "/h/y"]), "{got}");
}

/// Every file name under `dir`, recursively.
fn walk_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk_names(&e.path()));
        }
        out.push(e.file_name().to_string_lossy().into_owned());
    }
    out
}

/// A crash at every durable step of a new carrier's commit leaves the store old (the group
/// without attributes) or new (with them), as python-blosc2 reads it, in both forms.
#[test]
fn store_new_carrier_crash_at_every_step_leaves_old_or_new() {
    let (py, dir, manifest) = or_skip!(fixtures(
        "store_new_carrier_crash_at_every_step_leaves_old_or_new"
    ));
    for name in ["tree.b2z", "tree.b2d"] {
        every_commit_step(name, 3, |steps| {
            let tmp = tempfile::tempdir().unwrap();
            let p = tmp.path().join(name);
            support::copy_tree(&dir.join(name), &p);
            let c = open_store(&p).unwrap();
            let attrs = json!({"k": 1});
            let done = commit_group_attrs_with_crash_after(&c, "/a", &attrs, steps).unwrap();
            drop(c);
            let got = python_reads(&py, &p);
            let now = &got["attrs"]["/a"];
            assert!(
                *now == json!({}) || *now == attrs,
                "{name} step {steps}: {now}"
            );
            // No temporary file inside the store shows as a key (python-blosc2 opens any
            // file of a `.b2d` that reads as a frame).
            assert_eq!(got["keys"], manifest[name]["keys"], "{name} step {steps}");
            if done {
                assert_eq!(*now, attrs, "{name}");
            }
            let c = open_store(&p).unwrap();
            assert_eq!(c.leaves().len(), 6, "{name} step {steps}");
            done
        });
    }
}

#[test]
fn store_b2z_crash_at_every_step_leaves_old_or_new() {
    let (py, dir, manifest) = or_skip!(fixtures("store_b2z_crash_at_every_step_leaves_old_or_new"));
    let old = &manifest["deflt.b2z"]["keys"]["/temps"]["chunks"];
    every_commit_step("b2z", 3, |steps| {
        let tmp = tempfile::tempdir().unwrap();
        let p = copy_store(&dir.join("deflt.b2z"), &tmp);
        let c = open_store(&p).unwrap();
        let Some(Node::Leaf(leaf)) = c.find("/temps") else {
            panic!("temps");
        };
        let (data, chunk) = new_chunk(leaf.array().unwrap());
        let edit = Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(chunk))],
            ..Edit::default()
        };
        let done = commit_member_with_crash_after(&c, leaf, &edit, steps).unwrap();
        drop(c);
        let got = python_reads(&py, &p);
        let chunks = &got["keys"]["/temps"]["chunks"];
        let new0 = json!(support::sha256_hex(&data));
        assert!(
            chunks == old || (chunks[0] == new0 && chunks[1] == old[1]),
            "step {steps}: neither old nor new"
        );
        let c = open_store(&p).unwrap();
        assert_eq!(c.leaves().len(), 6, "step {steps}");
        if done {
            assert_eq!(chunks[0], new0);
            return true;
        }
        false
    });
}

/// A zip whose bytes were cut or patched: refused with one line, never a panic.
#[test]
fn store_damaged_zips_refused() {
    let (_py, dir, _) = or_skip!(fixtures("store_damaged_zips_refused"));
    let good = std::fs::read(dir.join("deflt.b2z")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let eocd = good
        .windows(4)
        .rposition(|w| w == b"PK\x05\x06")
        .expect("eocd");
    let cd = u32::from_le_bytes(good[eocd + 16..eocd + 20].try_into().unwrap()) as usize;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated central directory", good[..cd + 20].to_vec()),
        ("cut before the end record", good[..eocd + 10].to_vec()),
        ("empty", Vec::new()),
        ("bad central directory offset", {
            let mut b = good.clone();
            b[eocd + 16..eocd + 20].copy_from_slice(&(cd as u32 + 7).to_le_bytes());
            b
        }),
        ("bad local header offset of the first entry", {
            let mut b = good.clone();
            b[cd + 42..cd + 46].copy_from_slice(&0x00ff_ff00u32.to_le_bytes());
            b
        }),
    ];
    for (what, bytes) in cases {
        let p = tmp.path().join("bad.b2z");
        std::fs::write(&p, &bytes).unwrap();
        // Either the store is refused, or the damaged member fails on its own.
        match open_store(&p) {
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    !msg.contains('\n') && msg.contains("bad.b2z"),
                    "{what}: {msg}"
                );
            }
            Ok(c) => {
                let errs: Vec<String> = c
                    .leaves()
                    .iter()
                    .filter_map(|l| l.array().err().map(|e| e.to_string()))
                    .collect();
                assert!(!errs.is_empty(), "{what}: nothing failed");
                assert!(errs.iter().all(|m| !m.contains('\n')), "{what}: {errs:?}");
            }
        }
    }
    // A wrong CRC-32 is not checked on read (as upstream reads by offset); a damaged
    // member's chunk fails on decode, without a panic.
    let mut b = good.clone();
    b[cd + 16] ^= 0xff;
    let p = tmp.path().join("crc.b2z");
    std::fs::write(&p, &b).unwrap();
    assert_eq!(open_store(&p).unwrap().leaves().len(), 6);
    let mut b = good;
    b[200] ^= 0x55; // inside temps.b2nd's first chunk
    std::fs::write(&p, &b).unwrap();
    let c = open_store(&p).unwrap();
    let Some(Node::Leaf(l)) = c.find("/temps") else {
        panic!("temps");
    };
    if let Ok(a) = l.array() {
        let _ = a.chunk_bytes(0).map(|ch| codec::decompress(&ch));
    }
}

#[test]
fn store_b2d_leaf_commit_in_place() {
    let (py, dir, manifest) = or_skip!(fixtures("store_b2d_leaf_commit_in_place"));
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("deflt.b2d");
    let status = std::process::Command::new("cp")
        .args([
            "-r",
            dir.join("deflt.b2d").to_str().unwrap(),
            p.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let c = open_store(&p).unwrap();
    let Some(Node::Leaf(leaf)) = c.find("/temps") else {
        panic!("temps");
    };
    let (data, chunk) = new_chunk(leaf.array().unwrap());
    commit_member(
        &c,
        leaf,
        &Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(chunk))],
            ..Edit::default()
        },
    )
    .unwrap();
    commit_group_attrs(&c, "/", &json!({"title": "renamed"})).unwrap();
    let got = python_reads(&py, &p);
    assert_eq!(
        got["keys"]["/temps"]["chunks"][0],
        json!(support::sha256_hex(&data))
    );
    assert_eq!(
        got["keys"]["/temps"]["chunks"][1],
        manifest["deflt.b2d"]["keys"]["/temps"]["chunks"][1]
    );
    assert_eq!(got["attrs"]["/"], json!({"title": "renamed"}));
}

#[test]
fn directory_of_sources_is_a_collection() {
    let (py, dir, _) = or_skip!(fixtures("directory_of_sources_is_a_collection"));
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let code = format!(
        "import blosc2, numpy as np, bcolz, os\n\
         r = {root:?}\n\
         os.makedirs(r + '/sub/deeper')\n\
         blosc2.asarray(np.arange(100, dtype=np.int32), urlpath=r + '/a.b2nd', mode='w')\n\
         blosc2.SChunk(chunksize=400, data=np.arange(300, dtype=np.int32).tobytes(), \
           urlpath=r + '/sub/s.b2frame', mode='w')\n\
         blosc2.asarray(np.arange(50, dtype=np.int16), urlpath=r + '/sub/sparse', \
           contiguous=False, mode='w')\n\
         bcolz.carray(np.arange(1000, dtype=np.float64), rootdir=r + '/sub/deeper/carr', \
           mode='w').flush()\n\
         os.makedirs(r + '/plain.b2d')\n\
         blosc2.asarray(np.arange(9, dtype=np.int8), urlpath=r + '/plain.b2d/x.b2nd', mode='w')\n\
         open(r + '/notes.txt', 'w').write('hello')\n\
         b = open(r + '/a.b2nd', 'rb').read()\n\
         open(r + '/broken.b2nd', 'wb').write(b[:60])\n",
        root = root.to_str().unwrap()
    );
    support::run_python(&py, &["-c", &code]);
    std::fs::copy(dir.join("tree.b2z"), root.join("sub/store.b2z")).unwrap();
    let c = collection(root);
    assert_eq!(c.form(), Form::Frames);
    let keys: Vec<&str> = c.leaves().iter().map(|l| l.key()).collect();
    assert_eq!(
        keys,
        [
            "/a.b2nd",
            "/broken.b2nd",
            "/plain.b2d/x.b2nd",
            "/sub/deeper/carr",
            "/sub/s.b2frame",
            "/sub/sparse"
        ]
    );
    assert!(
        c.find("/notes.txt").is_none(),
        "non-source files are hidden"
    );
    let Some(Node::Store(s)) = c.find("/sub/store.b2z") else {
        panic!("nested store");
    };
    assert_eq!(s.leaves().len(), 6);
    let mut failures = 0;
    for l in c.leaves() {
        match l.open() {
            Ok(b2fs::container::Container::Array(a)) => {
                assert!(a.nchunks() > 0, "{}", l.key());
                for i in 0..a.nchunks() {
                    a.chunk_bytes(i).unwrap();
                }
            }
            Ok(_) => {}
            Err(e) => {
                assert_eq!(l.key(), "/broken.b2nd", "{e}");
                failures += 1;
            }
        }
    }
    assert_eq!(failures, 1);
    assert_eq!(c.root().attrs().unwrap(), json!({}));
}

#[test]
fn store_info_lists_groups_and_leaves() {
    let (_py, dir, manifest) = or_skip!(fixtures("store_info_lists_groups_and_leaves"));
    let out = crate::support::ok(support::b2fs().args([
        "info",
        "--json",
        dir.join("tree.b2z").to_str().unwrap(),
    ]));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["kind"], json!("collection"));
    assert_eq!(doc["marker"], json!("b2tree"));
    let want = &manifest["tree.b2z"];
    let keys: Vec<&str> = doc["leaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    let expected = sorted_keys(&want["keys"]);
    assert_eq!(keys, expected);
    let root = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == json!("/"))
        .unwrap();
    assert_eq!(root["attrs"], want["attrs"]["/"]);
}

/// A CTable in a TreeStore shows as its internal subtree (docs/COLLECTIONS.md: its columns keep deleted
/// rows, masked only by `_valid_rows`): every member opens with python's chunks.
#[test]
fn store_ctable_shows_its_subtree() {
    let (_py, dir, _) = or_skip!(fixtures("store_ctable_shows_its_subtree"));
    let want: Value =
        serde_json::from_slice(&std::fs::read(dir.join("ctab/manifest.json")).unwrap()).unwrap();
    assert_eq!(
        want["keys"],
        json!(["/data", "/data/table"]),
        "python hides the internals"
    );
    let c = open_store(&dir.join("ctab/ctab.b2z")).unwrap();
    let keys: Vec<&str> = c.leaves().iter().map(|l| l.key()).collect();
    let expected = sorted_keys(&want["members"]);
    assert_eq!(keys, expected);
    for l in c.leaves() {
        let shas: Vec<Value> = chunk_shas(l.array().unwrap())
            .into_iter()
            .map(Value::from)
            .collect();
        assert_eq!(Value::Array(shas), want["members"][l.key()], "{}", l.key());
    }
}

/// Members repacked with deflate: a deflated leaf fails alone, a deflated `embed.b2e` refuses
/// the store (python-blosc2 4.14.1 does the same).
#[test]
fn store_deflated_members() {
    let (py, dir, _) = or_skip!(fixtures("store_deflated_members"));
    let tmp = tempfile::tempdir().unwrap();
    let (leaf, all) = (tmp.path().join("leaf.b2z"), tmp.path().join("all.b2z"));
    let code = format!(
        "import zipfile\n\
         src = zipfile.ZipFile({src:?})\n\
         for out, only in (({leaf:?}, 'temps.b2nd'), ({all:?}, None)):\n\
         \x20   with zipfile.ZipFile(out, 'w') as z:\n\
         \x20       for i in src.infolist():\n\
         \x20           deflate = only is None or i.filename == only\n\
         \x20           z.writestr(i.filename, src.read(i.filename),\n\
         \x20                      zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED)\n",
        src = dir.join("deflt.b2z").to_str().unwrap(),
        leaf = leaf.to_str().unwrap(),
        all = all.to_str().unwrap(),
    );
    support::run_python(&py, &["-c", &code]);
    let c = open_store(&leaf).unwrap();
    let Some(Node::Leaf(t)) = c.find("/temps") else {
        panic!("temps");
    };
    let e = t.array().unwrap_err();
    assert!(e.to_string().contains("compressed"), "{e}");
    let Some(Node::Leaf(r)) = c.find("/raw") else {
        panic!("raw");
    };
    assert_eq!(r.array().unwrap().nchunks(), 3);
    let e = open_store(&all).unwrap_err().to_string();
    assert!(e.contains("embed.b2e") && e.contains("compressed"), "{e}");
}

/// The keys of JSON object `v`, sorted.
fn sorted_keys(v: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    keys
}
