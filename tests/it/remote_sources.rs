//! A directory of sources under an S3 prefix (moto): frames, `.b2z` and `.b2d` stores and a
//! sparse frame written by python-blosc2, a bcolz carray and ctable written by bcolz-zipline, in
//! nested directories beside files that are not sources, uploaded object by object. The
//! prefix mounts as the same directory mounted locally (every file's bytes equal, a `.b2d`
//! store inside it included), its leaves opened on first use; followed (`remote_recheck`), a frame added and one deleted on the server show
//! and leave within seconds.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::remote::{BUCKET, Proxy, Server, http, moto, put_object};
use crate::support::{Mount, b2fs, fuse, python};

const WRITE: &str = r#"
import sys, os, numpy as np, blosc2, bcolz
out = sys.argv[1]
rng = np.random.default_rng(11)
os.makedirs(out + "/sub/deep", exist_ok=True)
a = blosc2.asarray(np.arange(60000, dtype="f8") / 3, chunks=(25000,), urlpath=out + "/a.b2nd",
                   mode="w")
a.schunk.vlmeta["unit"] = "K"
s = blosc2.SChunk(chunksize=40000, data=np.arange(30000, dtype="i8").tobytes(),
                  urlpath=out + "/sub/b.b2frame", mode="w", cparams={"typesize": 8})
blosc2.asarray((rng.standard_normal((300, 200)) * 100).astype("i4"), chunks=(100, 100),
               blocks=(50, 50), urlpath=out + "/sub/deep/c.b2nd", mode="w")
blosc2.asarray(rng.standard_normal(50000), chunks=(20000,), urlpath=out + "/sp.b2frame",
               contiguous=False, mode="w")
with blosc2.TreeStore(out + "/st.b2z", mode="w") as st:
    st["/x"] = blosc2.asarray(np.arange(5000, dtype="i2"), chunks=(1000,))
    st["/g/y"] = blosc2.asarray(np.linspace(0, 1, 3000), chunks=(1000,))
c = bcolz.carray((np.arange(20000, dtype="i4") * 7) % 1009, chunklen=4096,
                 rootdir=out + "/sub/ca", mode="w")
c.flush()
t = bcolz.ctable(columns=[np.arange(9000, dtype="i8"), rng.random(9000)], names=["id", "x"],
                 chunklen=2048, rootdir=out + "/ct", mode="w")
t.flush()
open(out + "/readme.txt", "w").write("not a source")
open(out + "/sub/notes.csv", "w").write("a,b\n1,2\n")
"#;

/// A `.b2d` store written by python-blosc2.
const WRITE_B2D: &str = r#"
import sys, numpy as np, blosc2
with blosc2.TreeStore(sys.argv[1], mode="w") as st:
    st["/z"] = blosc2.asarray(np.arange(100000, dtype="u4"), chunks=(40000,))
"#;

struct Fixture {
    dir: tempfile::TempDir,
    moto: Server,
    proxy: Proxy,
    py: PathBuf,
}

impl Fixture {
    fn new(test: &str) -> Option<Fixture> {
        let py = python(test)?;
        let moto = moto(test)?;
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        crate::support::ok(
            std::process::Command::new(&py)
                .args(["-c", WRITE])
                .arg(&src),
        );
        crate::support::ok(
            std::process::Command::new(&py)
                .args(["-c", WRITE_B2D])
                .arg(src.join("sub/inner.b2d")),
        );
        for rel in crate::support::files_under(&src) {
            let bytes = std::fs::read(src.join(&rel)).unwrap();
            put_object(&moto, &format!("pre/{}", rel.display()), &bytes, true);
        }
        let proxy = Proxy::start(moto.port);
        Some(Fixture {
            dir,
            moto,
            proxy,
            py,
        })
    }

    fn src(&self) -> PathBuf {
        self.dir.path().join("src")
    }

    /// `-o` options for the prefix through the proxy (requests counted).
    fn ep(&self) -> String {
        format!("endpoint={},no_sign_request", self.proxy.url)
    }
}

/// Every file of a mounted tree, relative, with its bytes.
fn mounted_files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    crate::support::files_under(root)
        .into_iter()
        .map(|r| {
            let b = std::fs::read(root.join(&r)).unwrap();
            (r, b)
        })
        .collect()
}

/// The names a mounted directory lists now, sorted.
fn listed(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn remote_prefix_of_sources_mounts_as_the_local_directory_does() {
    let t = "remote_prefix_of_sources_mounts_as_the_local_directory_does";
    or_skip!(fuse(t));
    let f = or_skip!(Fixture::new(t));
    let url = format!("s3://{BUCKET}/pre/");
    let out = b2fs().args(["info", "-o", &f.ep(), &url]).output().unwrap();
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(info.contains("sub/deep/c.b2nd"), "{info}");

    let log = f.dir.path().join("b2fs.log");
    let before = f.proxy.requests();
    let remote = Mount::foreground_with(Path::new(&url), &[&format!("ro,{}", f.ep())], &log);
    let at_mount = f.proxy.requests() - before;
    let top = listed(&remote.mp);
    assert_eq!(
        top,
        [
            "__attrs__",
            "a.b2nd",
            "ct",
            "sp.b2frame",
            "st.b2z",
            "sub",
            "zarr",
            "zarr2"
        ],
        "sources keep their names; readme.txt is not shown"
    );
    assert_eq!(
        listed(&remote.mp.join("sub")),
        ["__attrs__", "b.b2frame", "ca", "deep", "inner.b2d"],
        "notes.csv is not shown"
    );
    assert_eq!(
        f.proxy.requests() - before,
        at_mount,
        "listing opens no leaf"
    );
    // A leaf opens on first use: its frame's head and tail.
    std::fs::read_dir(remote.mp.join("a.b2nd")).unwrap().count();
    assert!(f.proxy.requests() - before > at_mount, "a.b2nd opened");

    // Every file equals the local mount's of the same directory.
    let local = Mount::daemon(&f.src(), &["ro"]);
    let (r, l) = (mounted_files(&remote.mp), mounted_files(&local.mp));
    assert!(l.len() > 40, "{} files", l.len());
    assert_eq!(
        r.iter().map(|x| &x.0).collect::<Vec<_>>(),
        l.iter().map(|x| &x.0).collect::<Vec<_>>(),
        "same names"
    );
    for ((p, rb), (_, lb)) in r.iter().zip(&l) {
        assert!(rb == lb, "{} differs", p.display());
    }
    // And as python-blosc2 reads them.
    for (file, path, key) in [
        (
            "sub/deep/c.b2nd/array.npy",
            f.src().join("sub/deep/c.b2nd"),
            None,
        ),
        ("st.b2z/g/y/array.npy", f.src().join("st.b2z"), Some("/g/y")),
        (
            "sub/inner.b2d/z/array.npy",
            f.src().join("sub/inner.b2d"),
            Some("/z"),
        ),
    ] {
        let got = std::fs::read(remote.mp.join(file)).unwrap();
        assert!(got == crate::caterva2::npy_of(&f.py, &path, key), "{file}");
    }
    local.umount();
    remote.umount();
}

#[test]
fn remote_prefix_of_sources_followed_shows_frames_added_and_deleted() {
    let t = "remote_prefix_of_sources_followed_shows_frames_added_and_deleted";
    or_skip!(fuse(t));
    let f = or_skip!(Fixture::new(t));
    let url = format!("s3://{BUCKET}/pre/");
    let m = Mount::daemon(
        Path::new(&url),
        &[&format!("ro,remote_recheck=0.3,{}", f.ep())],
    );
    let before = listed(&m.mp);
    assert!(before.contains(&"a.b2nd".to_owned()), "{before:?}");
    let kept = std::fs::read(m.mp.join("sub/b.b2frame/data/00000000.bin")).unwrap();
    // python-blosc2 writes a new frame beside the source, uploaded; a.b2nd is deleted.
    let new = f.dir.path().join("new.b2nd");
    crate::support::run_python(
        &f.py,
        &[
            "-c",
            "import sys, numpy as np, blosc2\n\
             blosc2.asarray(np.arange(7000, dtype='i4') * 3, chunks=(3000,), \
             urlpath=sys.argv[1], mode='w')\n",
            new.to_str().unwrap(),
        ],
    );
    put_object(&f.moto, "pre/new.b2nd", &std::fs::read(&new).unwrap(), true);
    let (status, _) = http(
        f.moto.port,
        "DELETE",
        &format!("/{BUCKET}/pre/a.b2nd"),
        &[],
        b"",
    );
    assert!(status == 204 || status == 200, "DELETE: {status}");
    let want: Vec<String> = before
        .iter()
        .filter(|n| *n != "a.b2nd")
        .cloned()
        .chain(["new.b2nd".to_owned()])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(
        crate::support::wait_until(Duration::from_secs(20), || listed(&m.mp) == want),
        "the mount lists {:?}, the server holds {want:?}",
        listed(&m.mp)
    );
    let got = std::fs::read(m.mp.join("new.b2nd/array.npy")).unwrap();
    assert!(
        got == crate::caterva2::npy_of(&f.py, &new, None),
        "new.b2nd"
    );
    assert_eq!(
        std::fs::read(m.mp.join("sub/b.b2frame/data/00000000.bin")).unwrap(),
        kept
    );
    m.umount();
}

/// A `.b2d` store's leaf frames under a prefix are read as a frame mounted alone is: opening
/// a 4 MiB leaf and reading one chunk file fetches that chunk and the frame's head and tail,
/// not the whole leaf (it was fetched whole at its first open), and the chunk is the one
/// python-blosc2 decompresses.
#[test]
fn remote_b2d_leaves_are_read_by_ranges_not_fetched_whole() {
    use b2fs::remote::RemoteOptions;
    use b2fs::tree::{Tree, TreeOptions};
    let t = "remote_b2d_leaves_are_read_by_ranges_not_fetched_whole";
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("big.b2d");
    let make = "import sys, numpy as np, blosc2\n\
        rng = np.random.default_rng(5)\n\
        with blosc2.TreeStore(sys.argv[1], mode='w') as st:\n\
        \x20   st['/noise'] = blosc2.asarray(rng.standard_normal(1 << 19), chunks=(1 << 15,), \
        cparams={'clevel': 1})\n";
    crate::support::run_python(&py, &["-c", make, store.to_str().unwrap()]);
    let mut leaf_len = 0;
    for rel in crate::support::files_under(&store) {
        let bytes = std::fs::read(store.join(&rel)).unwrap();
        if rel.to_string_lossy().ends_with(".b2nd") {
            leaf_len = leaf_len.max(bytes.len() as u64);
        }
        put_object(&moto, &format!("big.b2d/{}", rel.display()), &bytes, true);
    }
    assert!(leaf_len > 3 << 20, "a leaf of {leaf_len} bytes");
    let opts = RemoteOptions {
        endpoint: Some(moto.url.clone()),
        no_sign_request: true,
        ..RemoteOptions::default()
    };
    let prefix = b2fs::remote::open_prefix(&format!("s3://{BUCKET}/big.b2d/"), &opts).unwrap();
    let c = b2fs::container::store::dir::open_store_tree(prefix.byte_tree()).unwrap();
    let tree = Tree::from_collection(c, TreeOptions::default()).unwrap();
    let before = prefix.stats().bytes();
    let ino = crate::support::tree_ino(&tree, "noise/data/00000000.bin");
    let got = crate::support::tree_read(&tree, ino, 1 << 20).unwrap();
    let fetched = prefix.stats().bytes() - before;
    let want = crate::support::python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2\n\
             a = blosc2.TreeStore(sys.argv[1], mode='r')['/noise']\n\
             print(a.schunk.decompress_chunk(0).hex())\n",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(
        got.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        want.trim(),
        "chunk 0"
    );
    assert!(
        fetched < leaf_len / 3,
        "{fetched} bytes fetched for one chunk of a {leaf_len}-byte leaf"
    );
}

/// A 2012 `blsk` root (`meta/nrows`, written by `scripts/gen_blsk.py`: an array and a table)
/// and a lone `blsk` superchunk object in a prefix of sources are left out (logged), not
/// shown as leaves whose open fails with EIO ("a 2012 blsk root is not read from a remote
/// prefix"); the python-blosc2 frame beside them reads as before.
#[test]
fn remote_prefix_of_sources_leaves_out_blsk_roots_and_objects() {
    use b2fs::remote::RemoteOptions;
    use b2fs::tree::{ROOT_INO, Tree, TreeOptions};
    let t = "remote_prefix_of_sources_leaves_out_blsk_roots_and_objects";
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    crate::support::run_python(
        &py,
        &["scripts/gen_blsk.py", src.join("old").to_str().unwrap()],
    );
    std::fs::copy(src.join("old/flat/data/__1__.bin"), src.join("lone.blsk")).unwrap();
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(5000, dtype='i8'), chunks=(2000,), urlpath=sys.argv[1], \
        mode='w')\n";
    let frame = src.join("a.b2nd");
    crate::support::run_python(&py, &["-c", make, frame.to_str().unwrap()]);
    for rel in crate::support::files_under(&src) {
        let bytes = std::fs::read(src.join(&rel)).unwrap();
        put_object(&moto, &format!("bl/{}", rel.display()), &bytes, true);
    }
    let opts = RemoteOptions {
        endpoint: Some(moto.url.clone()),
        no_sign_request: true,
        ..RemoteOptions::default()
    };
    let prefix = b2fs::remote::open_prefix(&format!("s3://{BUCKET}/bl/"), &opts).unwrap();
    let (tree, stores) = prefix.sources(&opts).unwrap();
    let c = b2fs::container::store::dir::open_listed(tree, stores);
    let tree = Tree::from_collection(c, TreeOptions::default()).unwrap();
    let top: Vec<String> = tree
        .readdir(ROOT_INO, 0)
        .unwrap()
        .map(|e| e.name)
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(top.contains(&"a.b2nd".to_owned()), "{top:?}");
    for gone in ["old", "lone.blsk"] {
        assert!(!top.contains(&gone.to_owned()), "{gone} is shown: {top:?}");
    }
    let got = crate::support::tree_read(
        &tree,
        crate::support::tree_ino(&tree, "a.b2nd/array.npy"),
        1 << 20,
    )
    .unwrap();
    assert!(got == crate::caterva2::npy_of(&py, &frame, None), "a.b2nd");
}
