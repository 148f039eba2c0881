//! Collection leaves are opened on first access: a 10,000-member `.b2z` written by
//! python-blosc2 (`scripts/oracle/stores.py many`) is served by the in-process tree without
//! opening any member (the collection's open counter stays 0 through the mount, `stat` of
//! leaf directories, listings of groups, `statfs` and the root's xattrs); one leaf accessed
//! opens that leaf only, and its `array.npy` and chunk file equal what python-blosc2 reads.

use std::time::Instant;

use b2fs::tree::{ROOT_INO, Tree, TreeOptions};

use crate::support;

use crate::support::tree_ino as lookup;

fn read_all(t: &Tree, ino: u64) -> Vec<u8> {
    support::tree_read(t, ino, 1 << 20).unwrap()
}

#[test]
fn store_lazy_10000_members_mount_opens_none_and_one_access_opens_one() {
    let py = or_skip!(support::python(
        "store_lazy_10000_members_mount_opens_none_and_one_access_opens_one"
    ));
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("many.b2z");
    std::fs::copy(support::many_members_store(&py), &p).unwrap();
    let arg = p.to_str().unwrap();

    let start = Instant::now();
    let t = Tree::from_source(&p, TreeOptions::default()).unwrap();
    let took = start.elapsed();
    eprintln!("tree of a 10000-member .b2z built in {took:?}");
    assert_eq!(t.leaves_opened(), Some(0), "mounting opened a member");
    // Generous for a loaded 2-core CI machine; the counter above is what proves laziness.
    assert!(took.as_secs_f64() < 5.0, "took {took:?}");

    // Listing every group and stat-ing every leaf directory opens nothing.
    let groups: Vec<String> = t.readdir(ROOT_INO, 0).unwrap().map(|e| e.name).collect();
    assert_eq!(
        groups.len(),
        2 + 100 + 3,
        "., .., g0..g99, __attrs__, zarr, zarr2"
    );
    let mut leaves = 0;
    for g in groups.iter().filter(|n| n.starts_with('g')) {
        let gi = t.lookup(ROOT_INO, g).unwrap().ino;
        for e in t.readdir(gi, 2).unwrap().filter(|e| e.name != "__attrs__") {
            let a = t.getattr(e.ino).unwrap();
            assert_eq!(a.kind, b2fs::tree::EntryKind::Directory, "{g}/{}", e.name);
            leaves += 1;
        }
    }
    assert_eq!(leaves, 10000);
    let _ = t.statfs();
    let _ = t.listxattr(ROOT_INO).unwrap();
    assert_eq!(
        t.leaves_opened(),
        Some(0),
        "stat/readdir/statfs/xattr opened a member"
    );

    // One leaf accessed: only it is opened; its data is what python-blosc2 reads.
    let npy = lookup(&t, "g7/a4207/array.npy");
    assert_eq!(t.leaves_opened(), Some(1));
    let got = read_all(&t, npy);
    let chunk = read_all(&t, lookup(&t, "g7/a4207/data/00000000.bin"));
    let want = support::python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2; \
             ts = blosc2.TreeStore(sys.argv[1], mode='r'); \
             print(ts['/g7/a4207'][...].tobytes().hex())",
            arg,
        ],
    );
    let data = &got[got.len() - chunk.len()..];
    assert_eq!(hex(data), want, "array.npy data");
    assert_eq!(hex(&chunk), want, "chunk 0");
    // Inode numbers handed out before stay valid and unchanged.
    assert_eq!(lookup(&t, "g7/a4207/array.npy"), npy);
    let again = lookup(&t, "g7/a4207");
    assert_eq!(t.getattr(again).unwrap().ino, again);
    assert_eq!(t.leaves_opened(), Some(1));
    // The root's attributes open its __vlmeta__ carrier (a leaf of the collection) only now.
    let attrs: serde_json::Value =
        serde_json::from_slice(&read_all(&t, lookup(&t, "__attrs__"))).unwrap();
    assert_eq!(attrs, serde_json::json!({"n": 10000}));
    assert_eq!(t.leaves_opened(), Some(2));
}

/// A leaf that fails to open is EIO on its directory (lookups and listings), on first
/// access, while `stat` of it and every other leaf work.
#[test]
fn store_lazy_broken_leaf_is_eio_on_first_access_only_for_it() {
    let py = or_skip!(support::python(
        "store_lazy_broken_leaf_is_eio_on_first_access_only_for_it"
    ));
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("few.b2z");
    support::run_python(
        &py,
        &["scripts/oracle/stores.py", "many", p.to_str().unwrap(), "4"],
    );
    // Damage the frame magic of member g1/a1.b2nd (its bytes are stored as they are).
    let mut bytes = std::fs::read(&p).unwrap();
    let name = b"g1/a1.b2nd";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
    let magic = b"b2frame";
    let m = at
        + bytes[at..]
            .windows(magic.len())
            .position(|w| w == magic)
            .unwrap();
    bytes[m] = b'X';
    std::fs::write(&p, &bytes).unwrap();
    let t = Tree::from_source(&p, TreeOptions::default()).unwrap();
    let g1 = t.lookup(ROOT_INO, "g1").unwrap().ino;
    let leaf = t.lookup(g1, "a1").unwrap();
    assert_eq!(t.leaves_opened(), Some(0));
    assert_eq!(t.readdir(leaf.ino, 0).unwrap_err().errno(), libc::EIO);
    assert_eq!(t.lookup(leaf.ino, "data").unwrap_err().errno(), libc::EIO);
    assert_eq!(t.getattr(leaf.ino).unwrap().ino, leaf.ino);
    let g2 = t.lookup(ROOT_INO, "g2").unwrap().ino;
    let ok = t.lookup(g2, "a2").unwrap().ino;
    assert_eq!(
        t.readdir(ok, 0).unwrap().count(),
        2 + 4,
        "__attrs__ array.npy meta data"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// FUSE worker threads lay out leaves at the same time: each leaf is laid out once (the open
/// counter equals the number of distinct leaves), every thread gets the same inode numbers
/// for the same path, and every leaf's chunk holds its own values.
#[test]
fn store_lazy_leaves_laid_out_from_many_threads_once_each() {
    let py = or_skip!(support::python(
        "store_lazy_leaves_laid_out_from_many_threads_once_each"
    ));
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("some.b2z");
    crate::support::oracle(&py, &[&"scripts/oracle/stores.py", &"many", &p, &"200"]);
    let t = Tree::from_source(&p, TreeOptions::default()).unwrap();
    let seen: Vec<Vec<(u64, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let t = &t;
                s.spawn(move || {
                    // Every thread walks the same 50 leaves, each in its own order.
                    (0..50)
                        .map(|j| {
                            let i = (j * 7 + k * 13) % 50;
                            let path = format!("g{}/a{i}/data/00000000.bin", i % 100);
                            let f = lookup(t, &path);
                            let data = read_all(t, f);
                            let want: Vec<u8> =
                                (0..4i32).flat_map(|v| (v + i).to_le_bytes()).collect();
                            assert_eq!(data, want, "{path}");
                            (i as u64, f)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut by_leaf = std::collections::HashMap::new();
    for (i, ino) in seen.into_iter().flatten() {
        assert_eq!(
            *by_leaf.entry(i).or_insert(ino),
            ino,
            "leaf a{i}: two inode numbers"
        );
    }
    assert_eq!(by_leaf.len(), 50);
    assert_eq!(t.leaves_opened(), Some(50));
}
