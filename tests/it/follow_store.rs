//! Issue 12 for collections and ctables: python-blosc2 changing a member of a `.b2d` store
//! or of a directory of sources, adding and removing members, replacing a `.b2z`; bcolz
//! changing a ctable's root attributes. In process (the Tree API), and one real mount for
//! the kernel side ("within 1 s").

use std::path::Path;
use std::time::Duration;

use b2fs::tree::Tree;

use crate::consistency::{ino_of, json, py_chunk, read_fh, read_path, ro};
use crate::follow::npy_is;
use crate::support::{Mount, fuse_and_python, python, run_python, wait_until};

/// Names listed in directory `path` of the tree (without `.` and `..`).
fn names(t: &Tree, path: &str) -> Vec<String> {
    let ino = if path.is_empty() {
        b2fs::tree::ROOT_INO
    } else {
        ino_of(t, path)
    };
    let mut v: Vec<String> = t
        .readdir(ino, 0)
        .unwrap()
        .map(|e| e.name)
        .filter(|n| n != "." && n != "..")
        .collect();
    v.sort();
    v
}

/// Whether `name` can be looked up in directory `parent` (a path of the tree).
fn exists(t: &Tree, parent: &str, name: &str) -> bool {
    let p = if parent.is_empty() {
        b2fs::tree::ROOT_INO
    } else {
        ino_of(t, parent)
    };
    match t.lookup(p, name) {
        Ok(_) => true,
        Err(e) => {
            assert_eq!(e.errno(), libc::ENOENT, "{name}");
            false
        }
    }
}

/// A `.b2d` TreeStore made by python-blosc2: `/a` (200,000 int64), `/g/b` (100,000 float64).
const MAKE_B2D: &str = "import sys, numpy as np, blosc2\n\
    with blosc2.TreeStore(sys.argv[1], mode='w') as ts:\n\
    \x20   ts['/a'] = np.arange(200000, dtype=np.int64)\n\
    \x20   ts['/g/b'] = np.arange(100000, dtype=np.float64)\n";

/// Member `key` of the store at `sys.argv[2]` as python-blosc2 reads it.
fn member(key: &str) -> String {
    format!("blosc2.TreeStore(sys.argv[2], mode='r')['{key}'][:]")
}

/// python-blosc2 changes a member of a mounted `.b2d` in place (its file opened directly),
/// then adds a member to a group and removes another through the TreeStore: the tree shows
/// each change once noticed (the first at the next open of the member's `array.npy`); the
/// removed member leaves the listing and its name no longer looks up; a member laid out
/// before keeps working.
#[test]
fn consistency_follow_b2d_member_changed_added_removed() {
    let py = or_skip!(python(
        "consistency_follow_b2d_member_changed_added_removed"
    ));
    let (_dir, src) = crate::support::temp_path("s.b2d");
    run_python(&py, &["-c", MAKE_B2D, src.to_str().unwrap()]);
    let t = Tree::from_source(&src, ro()).unwrap();
    // The `array.npy` of member `m` holds what python-blosc2 reads.
    let as_python = |t: &Tree, m: &str| {
        let npy = read_path(t, &format!("{m}/array.npy"));
        npy_is(&py, &npy, &member(&format!("/{m}")), &src)
    };
    assert!(as_python(&t, "a"));
    assert!(as_python(&t, "g/b"));
    let edit = "import sys, blosc2\n\
        a = blosc2.open(sys.argv[1] + '/a.b2nd', mode='a')\n\
        a[0:70000] = -1\n";
    run_python(&py, &["-c", edit, src.to_str().unwrap()]);
    // The next open of a file of the member notices (no call of the follower).
    assert!(as_python(&t, "a"));
    assert_eq!(
        json(&t, "a/meta/sizes")["shape"],
        serde_json::json!([200000])
    );
    assert!(!t.follow_source(), "already reloaded at the open");
    let members = "import sys, numpy as np, blosc2\n\
        with blosc2.TreeStore(sys.argv[1], mode='a') as ts:\n\
        \x20   ts['/g/c'] = np.arange(30000, dtype=np.int32) * 3\n\
        \x20   del ts['/g/b']\n";
    run_python(&py, &["-c", members, src.to_str().unwrap()]);
    assert!(t.follow_source(), "the members' change was not noticed");
    assert_eq!(names(&t, "g"), ["__attrs__", "c"]);
    assert!(!exists(&t, "g", "b"));
    assert!(as_python(&t, "g/c"));
    assert!(as_python(&t, "a"));
    assert!(!t.follow_source(), "nothing changed since");
    // The removed member comes back under its name.
    let again = "import sys, numpy as np, blosc2\n\
        with blosc2.TreeStore(sys.argv[1], mode='a') as ts:\n\
        \x20   ts['/g/b'] = np.arange(5000, dtype=np.float64) / 2\n";
    run_python(&py, &["-c", again, src.to_str().unwrap()]);
    assert!(t.follow_source());
    assert_eq!(names(&t, "g"), ["__attrs__", "b", "c"]);
    assert!(as_python(&t, "g/b"));
}

/// A directory of sources: python-blosc2 updates a chunk of one frame, adds a b2nd in a new
/// sub-directory and removes another: the tree shows the new chunk, the new group and
/// member, and no longer the removed one.
#[test]
fn consistency_follow_directory_of_sources() {
    let py = or_skip!(python("consistency_follow_directory_of_sources"));
    let (_dir, root) = crate::support::temp_path("sources");
    std::fs::create_dir(&root).unwrap();
    crate::consistency::small_frame(&py, &root.join("f.b2frame"));
    let b2nd = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(int(sys.argv[2]), dtype=np.float32), urlpath=sys.argv[1], \
        mode='w')\n";
    let two = root.join("two.b2nd");
    run_python(&py, &["-c", b2nd, two.to_str().unwrap(), "50000"]);
    let t = Tree::from_source(&root, ro()).unwrap();
    assert_eq!(
        names(&t, ""),
        ["__attrs__", "f.b2frame", "two.b2nd", "zarr", "zarr2"]
    );
    let frame = root.join("f.b2frame");
    assert!(read_path(&t, "f.b2frame/data/00000002.bin") == py_chunk(&py, &frame, 2));
    let update = "import sys, numpy as np, blosc2\n\
        s = blosc2.open(sys.argv[1], mode='a')\n\
        s.update_chunk(2, blosc2.compress2(np.full(100000, 5, dtype=np.int32).tobytes(), \
        typesize=4))\n";
    run_python(&py, &["-c", update, frame.to_str().unwrap()]);
    std::fs::create_dir(root.join("sub")).unwrap();
    let three = root.join("sub/three.b2nd");
    run_python(&py, &["-c", b2nd, three.to_str().unwrap(), "7000"]);
    std::fs::remove_file(&two).unwrap();
    assert!(t.follow_source());
    assert!(read_path(&t, "f.b2frame/data/00000002.bin") == py_chunk(&py, &frame, 2));
    assert_eq!(
        names(&t, ""),
        ["__attrs__", "f.b2frame", "sub", "zarr", "zarr2"]
    );
    assert!(!exists(&t, "", "two.b2nd"));
    let npy = read_path(&t, "sub/three.b2nd/array.npy");
    assert!(npy_is(&py, &npy, "blosc2.open(sys.argv[2])[:]", &three));
    assert!(!t.follow_source(), "nothing changed since");
}

/// A `.b2z` rewritten by python-blosc2 (it writes a new zip and renames it over the old
/// one): the tree reloads the members it laid out from the new zip and shows the added
/// member; a descriptor opened before reads its old version exactly (the old zip stays open).
#[test]
fn consistency_follow_b2z_replaced() {
    let py = or_skip!(python("consistency_follow_b2z_replaced"));
    let (_dir, src) = crate::support::temp_path("s.b2z");
    run_python(&py, &["-c", MAKE_B2D, src.to_str().unwrap()]);
    let t = Tree::from_source(&src, ro()).unwrap();
    let old = read_path(&t, "a/array.npy");
    assert!(npy_is(&py, &old, &member("/a"), &src));
    let ino = ino_of(&t, "a/array.npy");
    let before = t.open(ino, libc::O_RDONLY).unwrap();
    let head = t.read(ino, before, 0, 4096).unwrap().to_vec();
    let edit = "import sys, numpy as np, blosc2\n\
        with blosc2.TreeStore(sys.argv[1], mode='a') as ts:\n\
        \x20   ts['/a'][0:150000] = -7\n\
        \x20   ts['/c'] = np.arange(3000, dtype=np.int16)\n";
    run_python(&py, &["-c", edit, src.to_str().unwrap()]);
    assert!(t.follow_source(), "the new zip was not noticed");
    let new = read_path(&t, "a/array.npy");
    assert!(new != old);
    assert!(npy_is(&py, &new, &member("/a"), &src));
    assert!(npy_is(
        &py,
        &read_path(&t, "c/array.npy"),
        &member("/c"),
        &src
    ));
    let mut rest = read_fh(&t, ino, before).unwrap();
    rest.splice(..4096, head);
    assert!(
        rest == old,
        "the descriptor opened before keeps its version"
    );
    t.release(before).unwrap();
    assert!(!t.follow_source(), "nothing changed since");
}

/// bcolz sets a root attribute of a ctable the tree serves: `__attrs__` shows it.
#[test]
fn consistency_follow_ctable_root_attrs() {
    let py = or_skip!(python("consistency_follow_ctable_root_attrs"));
    let (_dir, src) = crate::support::temp_path("t.bcolz");
    let make = "import sys, numpy as np, bcolz\n\
        t = bcolz.ctable(columns=[np.arange(1000), np.arange(1000.)], names=['i', 'f'], \
        rootdir=sys.argv[1], mode='w')\n\
        t.attrs['k'] = 1\n\
        t.flush()\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let t = Tree::from_source(&src, ro()).unwrap();
    assert_eq!(json(&t, "__attrs__")["k"], 1);
    let set = "import sys, bcolz\n\
        t = bcolz.open(sys.argv[1], mode='a')\n\
        t.attrs['k'] = 5\n\
        t.attrs['who'] = 'bcolz'\n\
        t.flush()\n";
    run_python(&py, &["-c", set, src.to_str().unwrap()]);
    assert!(t.follow_source(), "the attributes' change was not noticed");
    assert_eq!(json(&t, "__attrs__")["k"], 5);
    assert_eq!(json(&t, "__attrs__")["who"], "bcolz");
    assert!(!t.follow_source(), "nothing changed since");
}

/// Through a real read-only mount of a `.b2d`: python-blosc2 changes a member and adds one;
/// within about a second (no open needed for the listing) `ls` shows the new member and
/// numpy reads both as python-blosc2 does; then it removes a member the kernel had looked
/// up: within about a second it is gone from the listing and `stat` says ENOENT.
#[test]
fn consistency_mount_follows_a_b2d_store() {
    let py = or_skip!(fuse_and_python("consistency_mount_follows_a_b2d_store"));
    let (_dir, src) = crate::support::temp_path("s.b2d");
    run_python(&py, &["-c", MAKE_B2D, src.to_str().unwrap()]);
    let m = Mount::daemon(&src, &["ro"]);
    let a = m.path("a/array.npy");
    assert!(npy_is(
        &py,
        &std::fs::read(&a).unwrap(),
        &member("/a"),
        &src
    ));
    let listed = |p: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(listed(&m.mp), ["__attrs__", "a", "g", "zarr", "zarr2"]);
    let edit = "import sys, numpy as np, blosc2\n\
        a = blosc2.open(sys.argv[1] + '/a.b2nd', mode='a')\n\
        a[100:200] = 42\n\
        with blosc2.TreeStore(sys.argv[1], mode='a') as ts:\n\
        \x20   ts['/d'] = np.arange(40000, dtype=np.uint16)\n";
    run_python(&py, &["-c", edit, src.to_str().unwrap()]);
    assert!(
        wait_until(Duration::from_secs(10), || listed(&m.mp).len() == 6),
        "the new member was not listed"
    );
    assert_eq!(listed(&m.mp), ["__attrs__", "a", "d", "g", "zarr", "zarr2"]);
    assert!(npy_is(
        &py,
        &std::fs::read(&a).unwrap(),
        &member("/a"),
        &src
    ));
    let d = std::fs::read(m.path("d/array.npy")).unwrap();
    assert!(npy_is(&py, &d, &member("/d"), &src));
    // A member the kernel has looked up (its entry cached) is removed.
    assert!(m.path("a").is_dir());
    let remove = "import sys, blosc2\n\
        with blosc2.TreeStore(sys.argv[1], mode='a') as ts:\n\
        \x20   del ts['/a']\n";
    run_python(&py, &["-c", remove, src.to_str().unwrap()]);
    // The entry of a read-only mount is cached for a day: only the follower's invalidation
    // makes `stat` ask again.
    assert!(
        wait_until(Duration::from_secs(10), || m
            .path("a")
            .symlink_metadata()
            .is_err()),
        "the removed member is still there"
    );
    let gone = std::fs::metadata(m.path("a")).unwrap_err();
    assert_eq!(gone.raw_os_error(), Some(libc::ENOENT));
    assert_eq!(listed(&m.mp), ["__attrs__", "d", "g", "zarr", "zarr2"]);
    m.umount();
}
