//! The zip metadata of the members a `.b2z` commit writes, as python's `zipfile` reads it:
//! a member b2fs writes (an edited leaf, a group's new `__vlmeta__` carrier) gets the
//! commit's local time as its modification time, as python-blosc2's zip writes give theirs
//! (not the zip crate's default of 1980-01-01); the members it copies keep theirs.

use std::path::Path;

use b2fs::container::store::{Node, open_store};
use b2fs::container::write::{Edit, commit_group_attrs, commit_member};
use serde_json::{Value, json};

use crate::support;

/// The members of the zip at `path`: `{name: {"date_time": [...], "age": seconds}}`.
fn zip_dates(py: &Path, path: &Path) -> Value {
    let out = support::run_python(
        py,
        &[
            "scripts/oracle/stores.py",
            "zipdates",
            path.to_str().unwrap(),
        ],
    );
    serde_json::from_slice(&out).expect("zipdates JSON")
}

#[test]
fn store_b2z_members_b2fs_writes_get_the_commit_time() {
    let t = "store_b2z_members_b2fs_writes_get_the_commit_time";
    let py = or_skip!(support::python(t));
    let (_dir, p) = support::temp_path("dates.b2z");
    // python-blosc2's store, its members then dated 2001-02-03 04:05:06 (stored, as before).
    let script = "import sys, zipfile, numpy as np, blosc2\n\
        path = sys.argv[1]\n\
        with blosc2.TreeStore(path, mode='w', threshold=0) as ts:\n\
        \x20   ts['/a/b/x'] = np.arange(3)\n\
        \x20   ts['/y'] = np.arange(4)\n\
        with zipfile.ZipFile(path) as zf:\n\
        \x20   members = [(i.filename, zf.read(i)) for i in zf.infolist()]\n\
        with zipfile.ZipFile(path, 'w', zipfile.ZIP_STORED) as zf:\n\
        \x20   for name, data in members:\n\
        \x20       zf.writestr(zipfile.ZipInfo(name, (2001, 2, 3, 4, 5, 6)), data)\n";
    support::ok(std::process::Command::new(&py).args(["-c", script]).arg(&p));
    let old = json!([2001, 2, 3, 4, 5, 6]);
    let before = zip_dates(&py, &p);
    assert!(
        before
            .as_object()
            .unwrap()
            .values()
            .all(|m| m["date_time"] == old)
    );
    let recent = |m: &Value, what: &str| {
        let age = m["age"].as_f64().unwrap();
        // DOS times count even seconds.
        assert!((-2.0..600.0).contains(&age), "{what}: {m}");
    };

    // A group without attributes gets a carrier: a new member.
    let c = open_store(&p).unwrap();
    assert!(c.group("/a/b").unwrap().carrier().is_none());
    commit_group_attrs(&c, "/a/b", &json!({"units": "kg"})).unwrap();
    drop(c);
    let now = zip_dates(&py, &p);
    recent(&now["a/b/__vlmeta__.b2f"], "the new carrier");
    for name in before.as_object().unwrap().keys() {
        assert_eq!(now[name]["date_time"], old, "{name}: copied, its time kept");
    }

    // An edited member is written anew.
    let c = open_store(&p).unwrap();
    let Some(Node::Leaf(leaf)) = c.find("/y") else {
        panic!("/y");
    };
    let edit = Edit {
        attrs: Some(json!({"edited": true})),
        ..Edit::default()
    };
    commit_member(&c, leaf, &edit).unwrap();
    drop(c);
    let now = zip_dates(&py, &p);
    recent(&now["y.b2nd"], "the edited member");
    assert_eq!(now["a/b/x.b2nd"]["date_time"], old);
    assert_eq!(now["embed.b2e"]["date_time"], old);
}
