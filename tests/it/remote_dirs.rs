//! Directory sources under an S3 prefix (moto): a sparse frame written by python-blosc2, a
//! bcolz carray and a ctable written by bcolz-zipline, uploaded object by object. Each opens
//! from one listing plus one parallel round of metadata GETs, reads every chunk with the
//! bytes of the same directory opened locally (one GET per cold chunk file, none when
//! cached), fails with EIO (never other bytes) when a chunk object is replaced, and mounts
//! through the CLI with every file equal to a local mount of the same directory. And `.b2z`
//! stores written by python-blosc2, over S3 and HTTP, through the tree: every chunk file,
//! `array.npy` and `__attrs__` as python-blosc2 reads them.

use crate::support::remote::STORE_VERSION;
use std::path::{Path, PathBuf};
use std::time::Duration;

use b2fs::container::{self, Array, Container};
use b2fs::remote::RemoteOptions;

use crate::support::remote::{BUCKET, Fault, Proxy, Server, moto, put_object};
use crate::support::{Mount, b2fs, fuse, member_npy, python};

const WRITE: &str = r#"
import sys, numpy as np, blosc2, bcolz
out = sys.argv[1]
rng = np.random.default_rng(3)
a = (rng.standard_normal(120000) * 100).round(1)
s = blosc2.asarray(a, chunks=(20000,), blocks=(5000,), urlpath=out + "/sp.b2frame",
                   contiguous=False, mode="w")
s.schunk.vlmeta["unit"] = "K"
c = bcolz.carray((np.arange(70000, dtype="i4") * 7919) % 100003, chunklen=8192,
                 rootdir=out + "/ca", mode="w")
c.attrs["note"] = "carray"
c.flush()
t = bcolz.ctable(columns=[np.arange(30000, dtype="i8"), rng.random(30000)],
                 names=["id", "x"], chunklen=4096, rootdir=out + "/ct", mode="w")
t.attrs["note"] = "ctable"
t.flush()
"#;

/// moto behind a proxy holding the three sources under `pre/` (and a decoy next to one).
struct Fixture {
    dir: tempfile::TempDir,
    moto: Server,
    proxy: Proxy,
}

impl Fixture {
    fn new(test: &str) -> Option<Fixture> {
        let py = python(test)?;
        let moto = moto(test)?;
        let dir = tempfile::tempdir().unwrap();
        crate::support::ok(
            std::process::Command::new(&py)
                .args(["-c", WRITE])
                .arg(dir.path()),
        );
        for rel in crate::support::files_under(dir.path()) {
            let bytes = std::fs::read(dir.path().join(&rel)).unwrap();
            put_object(&moto, &format!("pre/{}", rel.display()), &bytes, true);
        }
        // A sibling whose name extends the prefix's: not part of it.
        put_object(&moto, "pre/sp.b2frame.old", b"decoy", true);
        let proxy = Proxy::start(moto.port);
        Some(Fixture { dir, moto, proxy })
    }

    fn opts(&self) -> RemoteOptions {
        RemoteOptions {
            endpoint: Some(self.proxy.url.clone()),
            no_sign_request: true,
            ..RemoteOptions::default()
        }
    }

    fn local(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn arrays(c: &Container) -> Vec<(String, &Array)> {
    match c {
        Container::Array(a) => vec![(String::new(), a)],
        Container::Table(t) => t.columns.iter().map(|(n, a)| (n.clone(), a)).collect(),
    }
}

#[test]
fn remote_prefixes_of_sparse_frames_and_bcolz_roots_read_like_local_directories() {
    let t = "remote_prefixes_of_sparse_frames_and_bcolz_roots_read_like_local_directories";
    let f = or_skip!(Fixture::new(t));
    for name in ["sp.b2frame", "ca", "ct"] {
        let local_dir = f.local(name);
        let want = container::open(&local_dir).unwrap();
        let files = crate::support::files_under(&local_dir);
        let metadata = files
            .iter()
            .filter(|p| {
                let s = p.to_string_lossy();
                !s.ends_with(".chunk") && !s.ends_with(".blp")
            })
            .count() as u64;
        let before = f.proxy.requests();
        let url = format!("s3://{BUCKET}/pre/{name}/");
        let prefix = b2fs::remote::open_prefix(&url, &f.opts()).unwrap();
        assert_eq!(prefix.len(), files.len(), "{name}: the decoy is not listed");
        let got = container::open_tree(prefix.byte_tree()).unwrap();
        assert_eq!(
            f.proxy.requests() - before,
            1 + metadata,
            "{name}: one listing and one GET per metadata object, nothing more"
        );
        let (wa, ga) = (arrays(&want), arrays(&got));
        assert_eq!(wa.len(), ga.len(), "{name}: columns");
        if let (Container::Table(w), Container::Table(g)) = (&want, &got) {
            assert_eq!(w.attrs, g.attrs, "{name}: table attrs");
        }
        for ((wn, w), (gn, g)) in wa.iter().zip(&ga) {
            assert_eq!(wn, gn);
            assert_eq!(w.kind(), g.kind(), "{name}/{wn}");
            assert_eq!(w.geometry(), g.geometry(), "{name}/{wn}");
            assert_eq!(w.attrs(), g.attrs(), "{name}/{wn}");
            assert!(w.nchunks() > 2, "{name}/{wn}: several chunks");
            assert_eq!(w.nchunks(), g.nchunks(), "{name}/{wn}");
            // The chunk files present: from the prefix's listing, without a request.
            let before = f.proxy.requests();
            if let Some(present) = g.bcolz_present_chunks() {
                let all: Vec<_> = std::iter::once(0..w.nchunks()).collect();
                assert_eq!(present.unwrap(), all, "{name}/{wn}: chunk files listed");
                assert_eq!(w.bcolz_present_chunks().unwrap().unwrap(), all);
            }
            assert_eq!(f.proxy.requests(), before, "{name}/{wn}: listing");
            for i in (0..w.nchunks()).rev() {
                let before = f.proxy.requests();
                assert_eq!(w.chunk_bytes(i).unwrap(), g.chunk_bytes(i).unwrap());
                assert_eq!(f.proxy.requests() - before, 1, "{name}/{wn}: chunk {i}");
            }
            let before = f.proxy.requests();
            for i in 0..w.nchunks() {
                assert_eq!(w.chunk_bytes(i).unwrap(), g.chunk_bytes(i).unwrap());
            }
            assert_eq!(f.proxy.requests(), before, "{name}/{wn}: cached");
        }
        assert!(!got_changed(&got));
    }
    // A chunk object replaced after the listing: EIO naming it, never the new bytes.
    let url = format!("s3://{BUCKET}/pre/ca/");
    let prefix = b2fs::remote::open_prefix(&url, &f.opts()).unwrap();
    let got = container::open_tree(prefix.byte_tree()).unwrap();
    let other = std::fs::read(f.local("ca/data/__0.blp")).unwrap();
    put_object(&f.moto, "pre/ca/data/__1.blp", &other, true);
    let e = arrays(&got)[0].1.chunk_bytes(1).unwrap_err();
    assert!(e.to_string().contains("pre/ca/data/__1.blp"), "{e}");
    assert!(got_changed(&got));
}

fn got_changed(c: &Container) -> bool {
    arrays(c)
        .iter()
        .any(|(_, a)| a.changed_on_disk().unwrap_or(true))
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

#[test]
fn remote_prefix_mounts_and_info_match_local_mounts() {
    let t = "remote_prefix_mounts_and_info_match_local_mounts";
    or_skip!(fuse(t));
    let f = or_skip!(Fixture::new(t));
    let ep = format!("endpoint={},no_sign_request", f.moto.url);
    for (name, slash) in [("sp.b2frame", "/"), ("ct", "")] {
        let url = format!("s3://{BUCKET}/pre/{name}{slash}");
        let out = b2fs().args(["info", "-o", &ep, &url]).output().unwrap();
        assert!(
            out.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let remote = Mount::daemon(Path::new(&url), &[&ep]);
        let local = Mount::daemon(&f.local(name), &["ro"]);
        let (r, l) = (mounted_files(&remote.mp), mounted_files(&local.mp));
        assert!(l.len() > 3, "{name}: {} files", l.len());
        assert_eq!(
            r.iter().map(|x| &x.0).collect::<Vec<_>>(),
            l.iter().map(|x| &x.0).collect::<Vec<_>>(),
            "{name}: same names"
        );
        for ((p, rb), (_, lb)) in r.iter().zip(&l) {
            assert!(rb == lb, "{name}: {} differs", p.display());
        }
        remote.umount();
        local.umount();
    }
    // A prefix with nothing under it: the object's own 404, exit 3, one line.
    let url = format!("s3://{BUCKET}/pre/nothing");
    let out = b2fs().args(["info", "-o", &ep, &url]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn remote_b2z_stores_over_s3_and_http_show_python_blosc2_bytes_through_the_tree() {
    use b2fs::tree::{Tree, TreeOptions};
    let t = "remote_b2z_stores_over_s3_and_http_show_python_blosc2_bytes_through_the_tree";
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let (dir, manifest) = crate::store_tree::gen_stores(&py);
    let http = or_skip!(crate::support::remote::rclone(t, dir.path()));
    let proxy = Proxy::start(moto.port);
    let s3_opts = RemoteOptions {
        endpoint: Some(proxy.url.clone()),
        no_sign_request: true,
        ..RemoteOptions::default()
    };
    let mut checked = 0;
    for (name, desc) in manifest.as_object().unwrap() {
        if !name.ends_with(".b2z") {
            continue;
        }
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        put_object(&moto, name, &bytes, true);
        for url in [
            format!("s3://{BUCKET}/{name}"),
            format!("{}/{name}", http.url),
        ] {
            let before = proxy.requests();
            let obj = b2fs::remote::open(&url, &s3_opts).unwrap();
            let c = container::store::open_store_bytes(obj.byte_source())
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            let opened = obj.stats().requests();
            if url.starts_with("s3://") {
                assert_eq!(proxy.requests() - before, opened);
            }
            // These stores are smaller than the head and tail an open fetches: the central
            // directory and embed.b2e come from those two GETs.
            assert_eq!(opened, 2, "{url}: requests to open");
            let tree = Tree::from_collection(c, TreeOptions::default()).unwrap();
            let n = crate::store_tree::check_store(&tree, desc)
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            assert!(n > 0, "{url}: no leaf checked");
            checked += 1;
            // Everything read once is cached: reading it all again costs no request.
            let again = obj.stats().requests();
            crate::store_tree::check_store(&tree, desc).unwrap();
            assert_eq!(obj.stats().requests(), again, "{url}: cached");
        }
    }
    assert!(checked >= 4, "{checked} remote stores checked");
}

const WRITE_MANY: &str = r#"
import sys, numpy as np, blosc2, bcolz
out = sys.argv[1]
rng = np.random.default_rng(5)
a = (rng.standard_normal(40 * 8192) * 100).round(1)
blosc2.asarray(a, chunks=(8192,), blocks=(2048,), urlpath=out + "/sp.b2frame",
               contiguous=False, mode="w")
c = bcolz.carray((np.arange(24 * 1024, dtype="i8") * 7919) % 100003, chunklen=1024,
                 rootdir=out + "/ca", mode="w")
c.flush()
"#;

#[test]
fn remote_prefix_sequential_reads_prefetch_the_next_chunk_objects_once_each() {
    let t = "remote_prefix_sequential_reads_prefetch_the_next_chunk_objects_once_each";
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    crate::support::run_python(&py, &["-c", WRITE_MANY, &dir.path().to_string_lossy()]);
    for rel in crate::support::files_under(dir.path()) {
        let bytes = std::fs::read(dir.path().join(&rel)).unwrap();
        put_object(&moto, &format!("many/{}", rel.display()), &bytes, true);
    }
    let proxy = Proxy::start(moto.port);
    let opts = RemoteOptions {
        endpoint: Some(proxy.url.clone()),
        no_sign_request: true,
        ..RemoteOptions::default()
    };
    // The bcolz carray has more than ten chunk objects: `__10.blp` is listed before
    // `__2.blp`, but read after `__9.blp`.
    for name in ["sp.b2frame", "ca"] {
        let local_dir = dir.path().join(name);
        let want = container::open(&local_dir).unwrap();
        let objects = crate::support::files_under(&local_dir)
            .iter()
            .filter(|p| {
                let s = p.to_string_lossy();
                s.ends_with(".chunk") || s.ends_with(".blp")
            })
            .count() as u64;
        let prefix =
            b2fs::remote::open_prefix(&format!("s3://{BUCKET}/many/{name}/"), &opts).unwrap();
        let got = container::open_tree(prefix.byte_tree()).unwrap();
        let (w, g) = (arrays(&want)[0].1, arrays(&got)[0].1);
        assert!(w.nchunks() > 12, "{name}: {} chunks", w.nchunks());
        assert_eq!(w.nchunks() as u64, objects, "{name}: one object per chunk");
        let before = (proxy.requests(), prefix.stats().prefetches());
        for i in 0..w.nchunks() {
            assert_eq!(
                w.chunk_bytes(i).unwrap(),
                g.chunk_bytes(i).unwrap(),
                "{name} {i}"
            );
        }
        let gets = proxy.requests() - before.0;
        let ahead = prefix.stats().prefetches() - before.1;
        assert_eq!(gets, objects, "{name}: every chunk object fetched once");
        assert_eq!(
            ahead,
            objects - 2,
            "{name}: every chunk object after the first two fetched ahead of its read"
        );
    }
}

#[test]
fn remote_b2d_stores_under_s3_prefixes_show_python_blosc2_bytes_and_open_leaves_lazily() {
    use b2fs::tree::{Tree, TreeOptions};
    let t = "remote_b2d_stores_under_s3_prefixes_show_python_blosc2_bytes_and_open_leaves_lazily";
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let (dir, manifest) = crate::store_tree::gen_stores(&py);
    let proxy = Proxy::start(moto.port);
    let opts = RemoteOptions {
        endpoint: Some(proxy.url.clone()),
        no_sign_request: true,
        ..RemoteOptions::default()
    };
    let ep = format!("endpoint={},no_sign_request", moto.url);
    let mut checked = 0;
    for (name, desc) in manifest.as_object().unwrap() {
        if !name.ends_with(".b2d") {
            continue;
        }
        let files = crate::support::files_under(&dir.path().join(name));
        for rel in &files {
            let bytes = std::fs::read(dir.path().join(name).join(rel)).unwrap();
            put_object(&moto, &format!("{name}/{}", rel.display()), &bytes, true);
        }
        let url = format!("s3://{BUCKET}/{name}/");
        let before = proxy.requests();
        let prefix = b2fs::remote::open_prefix(&url, &opts).unwrap();
        let c = container::store::dir::open_store_tree(prefix.byte_tree())
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        // The listing, then embed.b2e and any other small object that is not a leaf frame:
        // leaves are fetched when first opened.
        let leaves = files
            .iter()
            .filter(|p| {
                let s = p.to_string_lossy();
                [".b2nd", ".b2f", ".b2b"].iter().any(|x| s.ends_with(x))
            })
            .count();
        assert!(leaves > 0, "{name}: no leaf frame");
        let others = (files.len() - leaves) as u64;
        assert_eq!(
            proxy.requests() - before,
            1 + others,
            "{url}: requests to open"
        );
        assert_eq!(c.leaves_opened(), 0, "{url}: leaves open lazily");
        let tree = Tree::from_collection(c, TreeOptions::default()).unwrap();
        let n =
            crate::store_tree::check_store(&tree, desc).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(n > 0, "{url}: no leaf checked");
        // The command line opens the prefix as the same store.
        let out = b2fs().args(["info", "-o", &ep, &url]).output().unwrap();
        assert!(
            out.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    assert!(checked >= 2, "{checked} remote .b2d stores checked");
}

/// A `.b2z` mounted from S3 and replaced there by python-blosc2 (a member changed and
/// grown, one added, one removed) is asked about every `remote_recheck` and opened again:
/// within seconds the mount shows the new store as python-blosc2 reads it.
#[test]
fn remote_b2z_mount_follows_a_store_replaced_on_the_server() {
    let t = "remote_b2z_mount_follows_a_store_replaced_on_the_server";
    or_skip!(fuse(t));
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("st.b2z");
    let write = |v: &str| {
        crate::support::run_python(&py, &["-c", STORE_VERSION, &store.to_string_lossy(), v]);
        put_object(&moto, "followed.b2z", &std::fs::read(&store).unwrap(), true);
    };
    write("1");
    let m = Mount::daemon(
        Path::new(&format!("s3://{BUCKET}/followed.b2z")),
        &[&format!(
            "endpoint={},no_sign_request,remote_timeout=2,remote_recheck=0.3",
            moto.url
        )],
    );
    let a1 = std::fs::read(m.path("a/array.npy")).unwrap();
    assert!(a1 == member_npy(&py, &store, "/a"), "version 1");
    assert!(m.path("g/b/array.npy").exists());
    write("2");
    let a2 = member_npy(&py, &store, "/a");
    assert!(a2.len() > a1.len());
    let now = || std::fs::read(m.path("a/array.npy"));
    assert!(
        crate::support::wait_until(Duration::from_secs(20), || now().is_ok_and(|got| got == a2)),
        "the mount never showed the new /a ({:?} bytes, want {})",
        now().map(|g| g.len()),
        a2.len()
    );
    let c = std::fs::read(m.path("c/array.npy")).unwrap();
    assert!(c == member_npy(&py, &store, "/c"), "the member added");
    let e = std::fs::metadata(m.path("g/b")).unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::ENOENT),
        "the member removed: {e}"
    );
    m.umount();
}

/// Two incompressible members, each larger than the head and tail an open of the store
/// fetches, so opening `/a` asks the server for its bytes.
const FLAKY_STORE: &str = r#"
import sys, numpy as np, blosc2
rng = np.random.default_rng(11)
with blosc2.TreeStore(sys.argv[1], mode="w") as st:
    st["/a"] = blosc2.asarray(rng.random(100_000), chunks=(25_000,))
    st["/b"] = blosc2.asarray(rng.random(100_000), chunks=(25_000,))
"#;

/// A `.b2z` python-blosc2 writes with a script (the store's path its first argument), on
/// moto behind a proxy that can fail every request, opened as a tree with no retries: where
/// the tests of leaves that fail to open start.
struct FailingStore {
    tree: b2fs::tree::Tree,
    proxy: Proxy,
    py: PathBuf,
    store: PathBuf,
    _dir: tempfile::TempDir,
    _moto: Server,
}

impl FailingStore {
    fn new(test: &str, name: &str, script: &str) -> Option<FailingStore> {
        use b2fs::tree::{Tree, TreeOptions};
        let py = python(test)?;
        let moto = moto(test)?;
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join(name);
        crate::support::run_python(&py, &["-c", script, &store.to_string_lossy()]);
        put_object(&moto, name, &std::fs::read(&store).unwrap(), true);
        let proxy = Proxy::start(moto.port);
        let opts = RemoteOptions {
            endpoint: Some(proxy.url.clone()),
            no_sign_request: true,
            retries: 0,
            timeout: Duration::from_secs(5),
            ..RemoteOptions::default()
        };
        let obj = b2fs::remote::open(&format!("s3://{BUCKET}/{name}"), &opts).unwrap();
        let c = container::store::open_store_bytes(obj.byte_source()).unwrap();
        let tree = Tree::from_collection(c, TreeOptions::default()).unwrap();
        Some(FailingStore {
            tree,
            proxy,
            py,
            store,
            _dir: dir,
            _moto: moto,
        })
    }
}

/// The members the Zarr view's consolidated metadata names, sorted.
fn consolidated_members(t: &b2fs::tree::Tree) -> Vec<String> {
    let root = crate::tree::json_at(t, "zarr/zarr.json");
    let md = root["consolidated_metadata"]["metadata"]
        .as_object()
        .unwrap();
    let mut keys: Vec<String> = md.keys().cloned().collect();
    keys.sort();
    keys
}

/// A `.b2z` leaf whose open fails for a server error (HTTP 500, no retries) gives EIO, and
/// keeps giving it without asking the server again until its back-off has passed (ended
/// here by the test hook: no timed test); then one access opens it, and it reads
/// python-blosc2's bytes (src/tree/collection.rs, `LeafBuild`).
#[test]
fn remote_b2z_leaf_that_failed_to_open_opens_after_its_back_off() {
    let t = "remote_b2z_leaf_that_failed_to_open_opens_after_its_back_off";
    let s = or_skip!(FailingStore::new(t, "flaky.b2z", FLAKY_STORE));
    // The server and the store's folder stay in `s` until the test ends.
    let FailingStore {
        tree,
        proxy,
        py,
        store,
        ..
    } = s;
    let a = crate::support::tree_ino(&tree, "a");
    let opened = || tree.leaves_opened().unwrap();
    assert_eq!(opened(), 0, "a mount opens no leaf");
    // The hiccup: every request fails.
    proxy.set_fault(Fault::Status(500), None);
    let e = tree.lookup(a, "array.npy").unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert_eq!(opened(), 1);
    // Its back-off (1 s) made long enough that a slow or stopped test cannot outlive it.
    tree.delay_leaf_retries(Duration::from_secs(3600));
    // The server answers again, but the back-off has not passed: the failure, no attempt.
    proxy.set_fault(Fault::None, None);
    let asked = proxy.requests();
    for _ in 0..3 {
        let e = tree.lookup(a, "array.npy").unwrap_err();
        assert_eq!(e.errno(), libc::EIO, "{e}");
        assert_eq!(tree.readdir(a, 0).err().map(|e| e.errno()), Some(libc::EIO));
    }
    assert_eq!(
        (opened(), proxy.requests()),
        (1, asked),
        "tried again too soon"
    );
    // The other leaf was never tried: it opens.
    let b = crate::support::tree_ino(&tree, "b/array.npy");
    assert!(crate::support::tree_read(&tree, b, 1 << 20).unwrap() == member_npy(&py, &store, "/b"));
    // The Zarr view's consolidated metadata built meanwhile leaves the failing leaf out.
    assert_eq!(consolidated_members(&tree), ["b"], "while /a fails");
    // Past the back-off: the next access opens the leaf, and it reads python-blosc2's bytes.
    tree.end_leaf_back_offs();
    let npy = tree.lookup(a, "array.npy").unwrap().ino;
    let got = crate::support::tree_read(&tree, npy, 1 << 20).unwrap();
    assert!(
        got == member_npy(&py, &store, "/a"),
        "the recovered leaf's bytes"
    );
    assert_eq!(opened(), 3, "one more attempt for /a, one for /b");
    // ... and the view's documents built while it failed are made again: it is back.
    assert_eq!(consolidated_members(&tree), ["a", "b"], "after /a opened");
}

/// Four members of a `.b2z` whose server answers every request with an error: the Zarr
/// view's consolidated metadata, built again and again, tries each leaf once at the first
/// build (its header; not a second time by laying it out), none while they are in their
/// back-off, and past it one per build while they keep failing (one wait per document, not
/// one per dead leaf); once the server answers, one build takes them all back, as
/// python-blosc2 wrote them.
#[test]
fn remote_b2z_consolidation_tries_one_dead_leaf_per_build() {
    let t = "remote_b2z_consolidation_tries_one_dead_leaf_per_build";
    let write = r#"
import sys, numpy as np, blosc2
rng = np.random.default_rng(5)
with blosc2.TreeStore(sys.argv[1], mode="w") as st:
    for k in "abcd":
        st["/" + k] = blosc2.asarray(rng.random(100_000), chunks=(25_000,))
"#;
    let s = or_skip!(FailingStore::new(t, "dead.b2z", write));
    // The server and the store's folder stay in `s` until the test ends.
    let FailingStore {
        tree,
        proxy,
        py,
        store,
        ..
    } = s;
    let opened = || tree.leaves_opened().unwrap();
    proxy.set_fault(Fault::Status(500), None);
    assert!(consolidated_members(&tree).is_empty(), "every leaf fails");
    assert_eq!(opened(), 4, "each leaf tried once, from its header");
    // In their back-off (made long: no timed test): no attempt.
    tree.delay_leaf_retries(Duration::from_secs(3600));
    tree.zarr_rebuild_documents();
    assert!(consolidated_members(&tree).is_empty());
    assert_eq!(opened(), 4, "no attempt in the back-off");
    // Past it, still failing: one attempt per build.
    for build in 1..=3 {
        tree.end_leaf_back_offs();
        tree.zarr_rebuild_documents();
        assert!(consolidated_members(&tree).is_empty());
        assert_eq!(opened(), 4 + build, "build {build}: one dead leaf tried");
    }
    // The server answers: one build takes every leaf back.
    proxy.set_fault(Fault::None, None);
    tree.end_leaf_back_offs();
    tree.zarr_rebuild_documents();
    assert_eq!(consolidated_members(&tree), ["a", "b", "c", "d"]);
    for k in ["a", "b", "c", "d"] {
        let npy = crate::support::tree_ino(&tree, &format!("{k}/array.npy"));
        let got = crate::support::tree_read(&tree, npy, 1 << 20).unwrap();
        assert!(got == member_npy(&py, &store, &format!("/{k}")), "/{k}");
    }
}
