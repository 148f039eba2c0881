//! Following a mounted Caterva2 directory against a real `cat2-server` (see `caterva2.rs`):
//! a `.b2z` store of the directory rewritten by python-blosc2 on the server shows its new
//! members (changed, added, removed) within seconds while a descriptor opened before keeps
//! its bytes; and a follow round whose server stalls costs about one `remote_timeout` for
//! every opened dataset together, not one each, while an unchanged round asks each opened
//! dataset once.

use crate::support::remote::STORE_VERSION;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use b2fs::container::Opened;
use b2fs::remote::RemoteOptions;
use b2fs::tree::{Tree, TreeOptions};

use crate::caterva2::{npy_of, started};
use crate::support::remote::{Fault, Proxy};
use crate::support::tree::{tree_ino, tree_read};
use crate::support::{Mount, run_python, wait_until};

#[test]
fn caterva2_directory_mount_follows_a_b2z_store_rewritten_on_the_server() {
    let t = "caterva2_directory_mount_follows_a_b2z_store_rewritten_on_the_server";
    let Some((py, srv)) = started(t) else {
        return;
    };
    let public = srv.root("public");
    let store = public.join("st.b2z");
    let s = store.display().to_string();
    run_python(&py, &["-c", STORE_VERSION, &s, "1"]);
    let ds = public.join("ds.b2nd");
    let write_ds = "import sys, numpy as np, blosc2\n\
                    blosc2.asarray(np.arange(30000, dtype='f4'), chunks=(7000,), \
                    urlpath=sys.argv[1], mode='w')\n";
    run_python(&py, &["-c", write_ds, &ds.display().to_string()]);
    let url = format!("{}/roots/@public", srv.url);
    let m = Mount::daemon(
        Path::new(&url),
        &["ro,remote_timeout=2,c2_relist=0,remote_recheck=0.3"],
    );
    let a1 = std::fs::read(m.path("st.b2z/a/array.npy")).unwrap();
    assert!(a1 == npy_of(&py, &store, Some("/a")), "version 1");
    assert!(m.path("st.b2z/g/b/array.npy").exists());
    let d = std::fs::read(m.path("ds.b2nd/array.npy")).unwrap();
    // A descriptor of /a opened (and read whole above) before the change.
    let held = std::fs::File::open(m.path("st.b2z/a/array.npy")).unwrap();
    run_python(&py, &["-c", STORE_VERSION, &s, "2"]);
    let a2 = npy_of(&py, &store, Some("/a"));
    assert!(a2.len() > a1.len());
    let now = || std::fs::read(m.path("st.b2z/a/array.npy"));
    assert!(
        wait_until(Duration::from_secs(30), || now().is_ok_and(|g| g == a2)),
        "the mount never showed the new /a ({:?} bytes, want {})",
        now().map(|g| g.len()),
        a2.len()
    );
    let c = std::fs::read(m.path("st.b2z/c/array.npy")).unwrap();
    assert!(c == npy_of(&py, &store, Some("/c")), "the member added");
    let e = std::fs::metadata(m.path("st.b2z/g/b")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "removed: {e}");
    let mut got = vec![0u8; a1.len()];
    held.read_exact_at(&mut got, 0).unwrap();
    assert!(got == a1, "the descriptor opened before keeps its version");
    assert!(std::fs::read(m.path("ds.b2nd/array.npy")).unwrap() == d);
    drop(held);
    m.umount();
}

/// Six opened datasets, the server stalled: one follow round asks them all at once, so it
/// takes about one `remote_timeout` (0.5 s), not six (3 s, one after the other as before);
/// a round while nothing changed asks each opened dataset once (one GET), and a dataset
/// rewritten is seen by the next round.
#[test]
fn caterva2_follow_round_with_the_server_stalled_waits_one_timeout_for_all_datasets() {
    let t = "caterva2_follow_round_with_the_server_stalled_waits_one_timeout_for_all_datasets";
    let Some((py, srv)) = started(t) else {
        return;
    };
    let public = srv.root("public");
    let write = "import sys, numpy as np, blosc2\n\
                 for i in range(6):\n    \
                 blosc2.asarray(np.arange(20000, dtype='i8') * (i + int(sys.argv[2])), \
                 chunks=(5000,), urlpath=f'{sys.argv[1]}/d{i}.b2nd', mode='w')\n";
    let p = public.display().to_string();
    run_python(&py, &["-c", write, &p, "1"]);
    let proxy = Proxy::start(srv.port);
    let opts = RemoteOptions {
        timeout: Duration::from_millis(500),
        retries: 3,
        remote_recheck: Some(Duration::ZERO),
        c2_relist: None,
        ..RemoteOptions::default()
    };
    let url = format!("{}/roots/@public", proxy.url);
    let Ok(Opened::Collection(c)) = b2fs::cli::remote::open(&url, &opts) else {
        panic!("{url} did not open as a directory")
    };
    let tree = Tree::from_collection(c, TreeOptions::default()).unwrap();
    let npy = |i: usize| {
        let ino = tree_ino(&tree, &format!("d{i}.b2nd/array.npy"));
        tree_read(&tree, ino, 1 << 20).unwrap()
    };
    for i in 0..6 {
        let want = npy_of(&py, &public.join(format!("d{i}.b2nd")), None);
        assert!(npy(i) == want, "d{i}");
    }
    let before = proxy.requests();
    assert!(!tree.follow_source(), "unchanged");
    assert_eq!(
        proxy.requests() - before,
        6,
        "one question per opened dataset"
    );
    proxy.set_fault(Fault::Stall, None);
    let t0 = Instant::now();
    let changed = tree.follow_source();
    let took = t0.elapsed();
    proxy.set_fault(Fault::None, None);
    assert!(!changed, "questions without an answer are no change");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let rewrite = "import sys, numpy as np, blosc2\n\
                   blosc2.asarray(np.arange(25000, dtype='i8') * -9, chunks=(5000,), \
                   urlpath=sys.argv[1], mode='w')\n";
    let d3 = public.join("d3.b2nd");
    run_python(&py, &["-c", rewrite, &d3.display().to_string()]);
    assert!(tree.follow_source(), "d3 rewritten");
    assert!(npy(3) == npy_of(&py, &d3, None), "the new d3");
}
