//! Following the objects of a prefix on S3 (moto) or on a WebDAV server (`rclone serve
//! webdav`): a sparse frame, a bcolz carray and ctable, and a `.b2d` store uploaded object by
//! object, mounted with `remote_recheck`, then changed on the server by python-blosc2 / bcolz
//! (chunks rewritten, appended, a ctable's root attributes set, members added and removed,
//! objects deleted). The mount shows the new version as the writer reads it within seconds,
//! a descriptor opened before keeps the bytes of its version, and an unchanged prefix costs
//! one listing per question; a question to a stalled server waits one `remote_timeout`.

use crate::support::remote::STORE_VERSION;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use b2fs::container::{self, Container, Relist};
use b2fs::remote::RemoteOptions;

use crate::support::remote::{BUCKET, Fault, Proxy, Server, http, moto, put_object, rclone_webdav};
use crate::support::{Mount, files_under, fuse, python, run_python, wait_until};

/// Uploads every file under `dir` as `key/REL` and deletes the objects of `before` (names
/// relative to `dir`) that are no longer there; returns the names uploaded.
fn sync(moto: &Server, dir: &Path, key: &str, before: &[PathBuf]) -> Vec<PathBuf> {
    let now = files_under(dir);
    for rel in &now {
        let bytes = std::fs::read(dir.join(rel)).unwrap();
        put_object(moto, &format!("{key}/{}", rel.display()), &bytes, true);
    }
    for gone in before.iter().filter(|r| !now.contains(r)) {
        let path = format!("/{BUCKET}/{key}/{}", gone.display());
        let (status, _) = http(moto.port, "DELETE", &path, &[], b"");
        assert!(status == 204 || status == 200, "DELETE {path}: {status}");
    }
    now
}

/// What `scripts/oracle/npy_ref.py` saves of `expr` (Python, over `p`: the source's path).
fn npy(py: &Path, path: &Path, expr: &str) -> Vec<u8> {
    let script = format!(
        "import sys, io, numpy as np, blosc2, bcolz\n\
         sys.path.insert(0, 'scripts/oracle'); import npy_ref\n\
         p = sys.argv[1]\n\
         b = io.BytesIO(); npy_ref.save(b, {expr}); sys.stdout.buffer.write(b.getvalue())\n"
    );
    let p = path.display().to_string();
    run_python(py, &["-c", &script, &p])
}

/// Asserts that the mount's `array.npy` reads `want` now.
fn assert_npy(m: &Mount, want: &[u8], what: &str) {
    assert!(
        std::fs::read(m.path("array.npy")).unwrap() == want,
        "{what}"
    );
}

/// Waits until the mounted file `rel` reads `want`.
fn shows(m: &Mount, rel: &str, want: &[u8]) {
    let now = || std::fs::read(m.path(rel));
    assert!(
        wait_until(Duration::from_secs(60), || now().is_ok_and(|g| g == want)),
        "{rel}: the mount never showed the new version ({:?} bytes, want {})",
        now().map(|g| g.len()),
        want.len()
    );
}

/// Options of the follow tests' mounts: checks every 0.3 s; a request may take 10 s (moto is
/// a Python server: on a machine loaded with other tests, 2 s timed reads out and the mount
/// showed EIO for the whole wait).
fn mount_opts(url: &str) -> String {
    format!("endpoint={url},no_sign_request,remote_timeout=10,remote_recheck=0.3")
}

/// A sparse frame under a prefix: chunk 0 rewritten and two chunks appended by python-blosc2
/// show; a descriptor of chunk 0 opened before keeps the old bytes; a bcolz carray appended
/// to by bcolz shows its new chunks.
#[test]
fn remote_prefix_mounts_follow_sparse_frames_and_bcolz_roots_changed_on_the_server() {
    let t = "remote_prefix_mounts_follow_sparse_frames_and_bcolz_roots_changed_on_the_server";
    or_skip!(fuse(t));
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    let (sp, ca) = (dir.path().join("sp.b2frame"), dir.path().join("ca"));
    let v1 = "import sys, numpy as np, blosc2, bcolz\n\
              blosc2.asarray(np.arange(60000, dtype='f8'), chunks=(10000,), \
              urlpath=sys.argv[1], contiguous=False, mode='w')\n\
              c = bcolz.carray(np.arange(50000, dtype='i4'), chunklen=8192, \
              rootdir=sys.argv[2], mode='w'); c.flush()\n";
    let (sps, cas) = (sp.display().to_string(), ca.display().to_string());
    run_python(&py, &["-c", v1, &sps, &cas]);
    let sp_files = sync(&moto, &sp, "f/sp", &[]);
    let ca_files = sync(&moto, &ca, "f/ca", &[]);
    let m = Mount::daemon(
        Path::new(&format!("s3://{BUCKET}/f/sp/")),
        &[&mount_opts(&moto.url)],
    );
    let mc = Mount::daemon(
        Path::new(&format!("s3://{BUCKET}/f/ca/")),
        &[&mount_opts(&moto.url)],
    );
    let npy_sp = |py: &Path| npy(py, &sp, "blosc2.open(p)[:]");
    let npy_ca = |py: &Path| npy(py, &ca, "bcolz.open(p)[:]");
    assert_npy(&m, &npy_sp(&py), "v1");
    assert_npy(&mc, &npy_ca(&py), "v1");
    // A descriptor of chunk 0, opened and read from before the change.
    let old0: Vec<u8> = (0..10000)
        .flat_map(|i| f64::from(i).to_le_bytes())
        .collect();
    let held = std::fs::File::open(m.path("data/00000000.bin")).unwrap();
    let mut head = [0u8; 16];
    held.read_exact_at(&mut head, 0).unwrap();
    assert_eq!(head[..], old0[..16]);
    let v2 = "import sys, numpy as np, blosc2, bcolz\n\
              s = blosc2.open(sys.argv[1], mode='a')\n\
              s[0:100] = -1.0\n\
              s.resize((80000,))\n\
              s[60000:] = 5.0\n\
              c = bcolz.open(sys.argv[2], mode='a')\n\
              c.append(np.arange(20000, dtype='i4') * -1); c.flush()\n";
    run_python(&py, &["-c", v2, &sps, &cas]);
    sync(&moto, &sp, "f/sp", &sp_files);
    sync(&moto, &ca, "f/ca", &ca_files);
    let want = npy_sp(&py);
    shows(&m, "array.npy", &want);
    let chunks = std::fs::read_dir(m.path("data")).unwrap().count();
    assert_eq!(chunks, 8, "80000 items in chunks of 10000");
    let new0 = std::fs::read(m.path("data/00000000.bin")).unwrap();
    assert_eq!(
        new0[..8],
        (-1.0f64).to_le_bytes(),
        "a new open: the new chunk 0"
    );
    let mut got = vec![0u8; old0.len()];
    held.read_exact_at(&mut got, 0).unwrap();
    assert!(
        got == old0,
        "the descriptor opened before keeps its version"
    );
    shows(&mc, "array.npy", &npy_ca(&py));
    drop(held);
    m.umount();
    mc.umount();
}

/// Waits until the mounted JSON file `rel` reads `want`.
fn shows_json(m: &Mount, rel: &str, want: &serde_json::Value) {
    let now = || {
        std::fs::read(m.path(rel))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    };
    assert!(
        wait_until(Duration::from_secs(60), || now().as_ref() == Some(want)),
        "{rel}: the mount never showed {want} (shows {:?})",
        now()
    );
}

/// A bcolz ctable under a prefix: bcolz rewrites the table's root attributes (only the root
/// `__attrs__` object is uploaded again) and the mount's root `__attrs__` shows them, as
/// bcolz reads them; then bcolz appends rows and `table.npy` shows them.
#[test]
fn remote_prefix_mount_follows_a_ctables_root_attrs_and_rows() {
    let t = "remote_prefix_mount_follows_a_ctables_root_attrs_and_rows";
    or_skip!(fuse(t));
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    let ct = dir.path().join("ct");
    let cts = ct.display().to_string();
    let v1 = "import sys, numpy as np, bcolz\n\
              t = bcolz.ctable(columns=[np.arange(20000, dtype='i8'), np.arange(20000.)], \
              names=['i', 'f'], chunklen=4096, rootdir=sys.argv[1], mode='w')\n\
              t.attrs['k'] = 1\n\
              t.flush()\n";
    run_python(&py, &["-c", v1, &cts]);
    let files = sync(&moto, &ct, "t/ct", &[]);
    let m = Mount::daemon(
        Path::new(&format!("s3://{BUCKET}/t/ct/")),
        &[&mount_opts(&moto.url)],
    );
    // What bcolz reads as the table's attributes.
    let attrs = |py: &Path| -> serde_json::Value {
        let script = "import sys, json, bcolz\n\
                      print(json.dumps(dict(bcolz.open(sys.argv[1]).attrs)))\n";
        serde_json::from_slice(&run_python(py, &["-c", script, &cts])).unwrap()
    };
    let a1 = attrs(&py);
    assert_eq!(a1["k"], 1);
    shows_json(&m, "__attrs__", &a1);
    let npy_ct = |py: &Path| npy(py, &ct, "bcolz.open(p)[:]");
    assert!(
        std::fs::read(m.path("table.npy")).unwrap() == npy_ct(&py),
        "v1"
    );
    let set = "import sys, bcolz\n\
               t = bcolz.open(sys.argv[1], mode='a')\n\
               t.attrs['k'] = 5\n\
               t.attrs['who'] = 'bcolz'\n\
               t.flush()\n";
    run_python(&py, &["-c", set, &cts]);
    let a2 = attrs(&py);
    assert_eq!((&a2["k"], &a2["who"]), (&5.into(), &"bcolz".into()));
    put_object(
        &moto,
        "t/ct/__attrs__",
        &std::fs::read(ct.join("__attrs__")).unwrap(),
        true,
    );
    shows_json(&m, "__attrs__", &a2);
    let append = "import sys, numpy as np, bcolz\n\
                  t = bcolz.open(sys.argv[1], mode='a')\n\
                  t.append([np.arange(7000, dtype='i8') * -1, np.full(7000, 2.5)])\n\
                  t.flush()\n";
    run_python(&py, &["-c", append, &cts]);
    sync(&moto, &ct, "t/ct", &files);
    shows(&m, "table.npy", &npy_ct(&py));
    shows_json(&m, "__attrs__", &a2);
    m.umount();
}

/// A `.b2d` store under a prefix rewritten by python-blosc2 (a member changed and grown,
/// one added, one removed: objects uploaded and deleted) shows as python-blosc2 reads it.
#[test]
fn remote_b2d_prefix_mount_follows_members_changed_added_and_removed() {
    let t = "remote_b2d_prefix_mount_follows_members_changed_added_and_removed";
    or_skip!(fuse(t));
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("st.b2d");
    let s = store.display().to_string();
    run_python(&py, &["-c", STORE_VERSION, &s, "1"]);
    let v1_files = sync(&moto, &store, "st.b2d", &[]);
    let m = Mount::daemon(
        Path::new(&format!("s3://{BUCKET}/st.b2d/")),
        &[&mount_opts(&moto.url)],
    );
    let member = |key: &str| {
        npy(
            &py,
            &store,
            &format!("blosc2.TreeStore(p, mode='r')['{key}'][:]"),
        )
    };
    let a1 = std::fs::read(m.path("a/array.npy")).unwrap();
    assert!(a1 == member("/a"), "version 1");
    assert!(m.path("g/b/array.npy").exists());
    run_python(&py, &["-c", STORE_VERSION, &s, "2"]);
    sync(&moto, &store, "st.b2d", &v1_files);
    let a2 = member("/a");
    assert!(a2.len() > a1.len());
    shows(&m, "a/array.npy", &a2);
    shows(&m, "c/array.npy", &member("/c"));
    let e = std::fs::metadata(m.path("g/b")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "removed: {e}");
    m.umount();
}

/// The follower's question about a prefix is one listing (no GET), answered "unchanged"
/// while nothing changed; a stalled server costs one `remote_timeout`, not a read's
/// deadline, and is no change; a chunk object rewritten is a change, and the prefix opened
/// again reads the new chunk while the version opened before still reads its unchanged
/// chunks (their ETags still match) and fails on the rewritten one, never new bytes; the
/// prefix opened again reads the unchanged chunks the old one held without a request.
#[test]
fn remote_prefix_follow_question_is_one_listing_and_waits_one_attempt() {
    let t = "remote_prefix_follow_question_is_one_listing_and_waits_one_attempt";
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let dir = tempfile::tempdir().unwrap();
    let sp = dir.path().join("sp.b2frame");
    let sps = sp.display().to_string();
    let v1 = "import sys, numpy as np, blosc2\n\
              blosc2.asarray(np.arange(40000, dtype='i8'), chunks=(10000,), \
              urlpath=sys.argv[1], contiguous=False, mode='w')\n";
    run_python(&py, &["-c", v1, &sps]);
    let files = sync(&moto, &sp, "q/sp", &[]);
    let proxy = Proxy::start(moto.port);
    let opts = RemoteOptions {
        endpoint: Some(proxy.url.clone()),
        no_sign_request: true,
        timeout: Duration::from_millis(500),
        retries: 3,
        ..RemoteOptions::default()
    };
    let prefix = b2fs::remote::open_prefix(&format!("s3://{BUCKET}/q/sp/"), &opts).unwrap();
    prefix.follow_every(Duration::ZERO, &opts);
    let tree = prefix.byte_tree();
    let Container::Array(old) = container::open_tree(tree.clone()).unwrap() else {
        panic!("not an array")
    };
    // Chunks 1-3 read (and cached) before the change; chunk 0 not.
    for i in 1..4 {
        old.chunk_bytes(i).unwrap();
    }
    let before = proxy.requests();
    for _ in 0..3 {
        assert!(!tree.poll_changed(true), "unchanged");
    }
    assert_eq!(proxy.requests() - before, 3, "one listing per question");
    proxy.set_fault(Fault::Stall, None);
    let t0 = Instant::now();
    let changed = tree.poll_changed(true);
    let took = t0.elapsed();
    proxy.set_fault(Fault::None, None);
    assert!(!changed, "a question without an answer is no change");
    // A read's deadline: 4 attempts of 0.5 s; one attempt: 0.5 s.
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let v2 = "import sys, numpy as np, blosc2\n\
              s = blosc2.open(sys.argv[1], mode='a'); s[0:10] = -7\n";
    run_python(&py, &["-c", v2, &sps]);
    sync(&moto, &sp, "q/sp", &files);
    assert!(tree.poll_changed(true), "rewritten on the server");
    let Some(Ok(Relist::Changed(now, _))) = tree.reopen() else {
        panic!("not opened again")
    };
    let Container::Array(new) = container::open_tree(now).unwrap() else {
        panic!("not an array")
    };
    let Container::Array(local) = container::open(&sp).unwrap() else {
        panic!("not an array")
    };
    // The prefix opened again starts with the unchanged objects the old one held: their
    // reads cost no request; the rewritten chunk costs its GET.
    let before = proxy.requests();
    for i in 1..4 {
        assert_eq!(new.chunk_bytes(i).unwrap(), local.chunk_bytes(i).unwrap());
    }
    assert_eq!(
        proxy.requests() - before,
        0,
        "unchanged chunks come from memory"
    );
    assert_eq!(new.chunk_bytes(0).unwrap(), local.chunk_bytes(0).unwrap());
    assert_eq!(proxy.requests() - before, 1, "the rewritten chunk: one GET");
    for i in 0..local.nchunks() {
        assert_eq!(
            new.chunk_bytes(i).unwrap(),
            local.chunk_bytes(i).unwrap(),
            "{i}"
        );
    }
    // The version opened before: an unchanged chunk reads, the rewritten one fails.
    assert_eq!(old.chunk_bytes(2).unwrap(), local.chunk_bytes(2).unwrap());
    assert!(old.chunk_bytes(0).is_err(), "never the new bytes");
}

/// An HTTP prefix on a WebDAV server (`rclone serve webdav`: its `PROPFIND` lists the
/// prefix), named without and with the trailing '/': a sparse frame and a bcolz carray
/// mount and read as python-blosc2 and bcolz read them; rewritten and appended to in place
/// on the server, both mounts show the new versions.
#[test]
fn http_prefix_mounts_list_through_webdav_and_follow_changes_on_the_server() {
    let t = "http_prefix_mounts_list_through_webdav_and_follow_changes_on_the_server";
    or_skip!(fuse(t));
    let py = or_skip!(python(t));
    let dir = tempfile::tempdir().unwrap();
    let (sp, ca) = (dir.path().join("sp.b2frame"), dir.path().join("ca"));
    let v1 = "import sys, numpy as np, blosc2, bcolz\n\
              blosc2.asarray(np.arange(60000, dtype='f8').reshape(600, 100), \
              chunks=(200, 100), urlpath=sys.argv[1], contiguous=False, mode='w')\n\
              c = bcolz.carray(np.arange(50000, dtype='i4'), chunklen=8192, \
              rootdir=sys.argv[2], mode='w'); c.flush()\n";
    let (sps, cas) = (sp.display().to_string(), ca.display().to_string());
    run_python(&py, &["-c", v1, &sps, &cas]);
    let server = or_skip!(rclone_webdav(t, dir.path()));
    let opts = "remote_timeout=10,remote_recheck=0.3";
    // No trailing '/': the GET of the collection fails (405), and the listing finds it.
    let m = Mount::daemon(Path::new(&format!("{}/sp.b2frame", server.url)), &[opts]);
    let mc = Mount::daemon(Path::new(&format!("{}/ca/", server.url)), &[opts]);
    let npy_sp = |py: &Path| npy(py, &sp, "blosc2.open(p)[:]");
    let npy_ca = |py: &Path| npy(py, &ca, "bcolz.open(p)[:]");
    assert_npy(&m, &npy_sp(&py), "v1");
    assert_npy(&mc, &npy_ca(&py), "v1");
    let v2 = "import sys, numpy as np, blosc2, bcolz\n\
              s = blosc2.open(sys.argv[1], mode='a')\n\
              s[0:10] = -1.0\n\
              s.resize((800, 100))\n\
              s[600:] = 5.0\n\
              c = bcolz.open(sys.argv[2], mode='a')\n\
              c.append(np.arange(20000, dtype='i4') * -1); c.flush()\n";
    run_python(&py, &["-c", v2, &sps, &cas]);
    shows(&m, "array.npy", &npy_sp(&py));
    let chunks = std::fs::read_dir(m.path("data")).unwrap().count();
    assert_eq!(chunks, 4, "800 rows in chunks of 200");
    shows(&mc, "array.npy", &npy_ca(&py));
    m.umount();
    mc.umount();
}
