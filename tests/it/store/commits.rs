//! Commits to collections: `.b2z` members and group attributes read back by python-blosc2 in
//! modes 'r' and 'a'; a group's first attributes (a new carrier, in both forms, and seen by a
//! locking python-blosc2 handle); crashes at every commit step leaving the store old or new;
//! refusals that leave the store as it was; a `.b2d` leaf committed in place.
//! Oracle: `scripts/oracle/stores.py` (fixtures from `store.rs`).

use std::path::{Path, PathBuf};

use b2fs::codec;
use b2fs::container::Collection;
use b2fs::container::store::{Node, open_store};
use b2fs::container::write::{
    Edit, chunk_cparams, commit_group_attrs, commit_group_attrs_with_crash_after, commit_member,
    commit_member_with_crash_after,
};
use serde_json::{Value, json};

use super::fixtures;
use crate::support;
use crate::support::steps::every_commit_step;

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
    let child = support::Waiting::start(&py, script, &p);
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
    let got: Value = serde_json::from_str(&child.go()).unwrap();
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
