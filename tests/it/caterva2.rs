//! Caterva2 sources against a real `cat2-server` (the `caterva2` package from the registry,
//! in `.venv-cat2`, made by scripts/setup.sh) started on 127.0.0.1 with login enabled, and
//! datasets written by python-blosc2: a public root mounted as a collection equal, file for
//! file, to a local mount of the same directory (and its arrays to what python-blosc2 reads),
//! from one listing request plus the `.b2z` store's open, leaves opened lazily; a
//! login-protected root refused without credentials and mounted with them (environment or
//! password file); a dataset changed on the server while mounted (EIO, never a mix); the
//! server stopped under a mount (EIO within the deadline, the mount alive); the login
//! cookie refused after a server restart with another secret (as an expired one is) and
//! renewed by one login; a plain DictStore `.b2z`, which the server answers 500 for, an EIO
//! leaf with the reason in `b2fs log` while the rest reads; datasets and stores added to and
//! removed from the server while mounted, shown and hidden by the next listing (`c2_relist`),
//! with nothing but listings while nothing changes. A missing
//! `.venv-cat2` is a visible SKIP, or a failure under `B2FS_REQUIRE_REMOTE=1`.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::remote::Proxy;
use crate::support::{Mount, b2fs, fuse_and_python, is_mounted, repo_root, run_python};

const USER: &str = "user@example.com";
const PASSWORD: &str = "foobar11";

/// A `cat2-server` with login, its state in a temporary directory; killed when dropped.
pub(crate) struct Cat2 {
    child: Child,
    pub(crate) port: u16,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    state: tempfile::TempDir,
}

impl Drop for Cat2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cat2 {
    /// The directory of root `@public` or `@shared`.
    pub(crate) fn root(&self, name: &str) -> PathBuf {
        self.state.path().join("server").join(name)
    }

    /// Stops the server (by its pid).
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the server and starts it again on the same port and state, signing cookies
    /// with `secret`: every cookie of the old secret is refused (401) from then on.
    fn restart(&mut self, secret: &str) {
        self.stop();
        self.child = serve(self.state.path(), self.port, secret);
    }
}

fn skip(test: &str, why: &str) {
    if std::env::var("B2FS_REQUIRE_REMOTE").is_ok_and(|v| v == "1" || v == "true") {
        panic!("{test}: B2FS_REQUIRE_REMOTE=1 but {why} (run scripts/setup.sh)");
    }
    eprintln!("SKIP {test}: {why} (run scripts/setup.sh)");
}

/// Starts `cat2-server` of the state in `state` (made by [`cat2`]) on `port`, signing its
/// login cookies with `secret`, and waits until it has answered one request (`/api/roots`:
/// neither a listing nor a fetch, which tests count); its access log goes to
/// `state/access.log`, the rest to `state/server.log`. The first answer of a fresh server is
/// its slowest (ten times the next ones here, and on a busy CI machine with cold caches once
/// over a mount's 1 s timeout): no mount meets it.
fn serve(state: &Path, port: u16, secret: &str) -> Child {
    let py = repo_root().join(".venv-cat2/bin/python");
    let mut child = Command::new(&py)
        .args(["-m", "caterva2.services.server"])
        .arg(format!("--conf={}", state.join("caterva2.toml").display()))
        .arg(format!("--statedir={}", state.join("server").display()))
        .arg(format!("--listen=127.0.0.1:{port}"))
        .env("CATERVA2_SECRET", secret)
        .env("PYTHONUNBUFFERED", "1")
        .current_dir(state)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(state.join("access.log")).unwrap())
        .stderr(std::fs::File::create(state.join("server.log")).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(st)) = child.try_wait() {
            panic!(
                "cat2-server exited ({st}): {}",
                std::fs::read_to_string(state.join("server.log")).unwrap_or_default()
            );
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "cat2-server not up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = answer_status(port, "/api/roots");
    assert!(
        status.starts_with("HTTP/1.1 200"),
        "cat2-server's first answer: {status:?}: {}",
        std::fs::read_to_string(state.join("server.log")).unwrap_or_default()
    );
    child
}

/// The status line of the server's answer to `GET PATH` (waiting up to 60 s for it).
fn answer_status(port: u16, path: &str) -> String {
    use std::io::{BufRead, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(s).read_line(&mut line).unwrap();
    line.trim_end().to_owned()
}

/// Starts `cat2-server` with login and a user; `None` (SKIP) without `.venv-cat2`.
fn cat2(test: &str) -> Option<Cat2> {
    let py = repo_root().join(".venv-cat2/bin/python");
    if !py.exists() {
        skip(test, "no .venv-cat2 (caterva2's server)");
        return None;
    }
    let state = tempfile::tempdir().unwrap();
    let server = state.path().join("server");
    for root in ["public", "shared"] {
        std::fs::create_dir_all(server.join(root)).unwrap();
    }
    let conf = state.path().join("caterva2.toml");
    std::fs::write(
        &conf,
        "[server]\nlogin = true\nregister = false\nmaxusers = 5\n",
    )
    .unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = serve(state.path(), port, "b2fs-test-secret");
    let add = format!(
        "import pathlib, sys\nfrom caterva2.services import srv_utils\n\
         srv_utils.add_user({USER:?}, password={PASSWORD:?}, is_superuser=True, \
         state_dir=pathlib.Path(sys.argv[1]))\n"
    );
    crate::support::ok(
        Command::new(&py)
            .args(["-c", &add])
            .arg(&server)
            .env("CATERVA2_SECRET", "b2fs-test-secret"),
    );
    Some(Cat2 {
        child,
        port,
        url: format!("http://127.0.0.1:{port}"),
        state,
    })
}

/// Writes the datasets with python-blosc2 into `public` and `shared` (see the module doc).
const WRITE: &str = r#"
import sys, os, numpy as np, blosc2
pub, shared = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(11)
os.makedirs(pub + "/dir1/sub", exist_ok=True)
blosc2.asarray(np.arange(100000, dtype="f8") / 7, chunks=(10000,), blocks=(2500,),
               urlpath=pub + "/ds-1d.b2nd", mode="w")
a = blosc2.asarray((rng.standard_normal((400, 300)) * 100).astype("i4"), chunks=(100, 150),
                   blocks=(50, 50), urlpath=pub + "/dir1/ds-2d.b2nd", mode="w")
a.schunk.vlmeta["unit"] = "mK"
blosc2.asarray(rng.standard_normal(400000), chunks=(50000,), urlpath=pub + "/big.b2nd",
               mode="w", cparams={"clevel": 1})
s = blosc2.SChunk(chunksize=40000, data=np.arange(50000, dtype="i8").tobytes(),
                  urlpath=pub + "/dir1/sub/sc.b2frame", mode="w", cparams={"typesize": 8})
with blosc2.TreeStore(pub + "/st.b2z", mode="w") as st:
    st["/a"] = blosc2.asarray(np.arange(5000, dtype="i2"), chunks=(1000,))
    st["/g/b"] = blosc2.asarray(np.linspace(0, 1, 3000), chunks=(1000,))
open(pub + "/readme.txt", "w").write("not a dataset")
blosc2.asarray(np.arange(30000, dtype="u2"), chunks=(7000,), urlpath=shared + "/secret.b2nd",
               mode="w")
"#;

/// `np.save` of what python-blosc2 reads from the array at `path` (`key`: a store member),
/// the data aligned to a page as in `array.npy` (`scripts/oracle/npy_ref.py`).
pub(crate) fn npy_of(py: &Path, path: &Path, key: Option<&str>) -> Vec<u8> {
    let script = "import sys, io, numpy as np, blosc2\n\
                  sys.path.insert(0, 'scripts/oracle'); import npy_ref\n\
                  p, k = sys.argv[1], sys.argv[2]\n\
                  a = blosc2.TreeStore(p, mode='r')[k] if k else blosc2.open(p)\n\
                  b = io.BytesIO(); npy_ref.save(b, a[:]); sys.stdout.buffer.write(b.getvalue())\n";
    let p = path.display().to_string();
    run_python(py, &["-c", script, &p, key.unwrap_or("")])
}

/// `b2fs mount -o OPTS URL MP` with `env`; the command's output.
fn mount_with(m: &Mount, url: &str, opts: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut c = b2fs();
    c.args(["mount", "-o", opts, url]).arg(&m.mp);
    c.env_remove("B2FS_CATERVA2_USER");
    c.env_remove("B2FS_CATERVA2_PASSWORD");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The reference Python and a started server, when FUSE, Python and `.venv-cat2` are there
/// (else a SKIP, or a failure under the `B2FS_REQUIRE_*` variables).
pub(crate) fn started(t: &str) -> Option<(PathBuf, Cat2)> {
    let py = fuse_and_python(t)?;
    cat2(t).map(|srv| (py, srv))
}

/// `b2fs mount -o ro URL MP` logged in as the test user through the environment.
fn mount_logged_in(m: &Mount, url: &str) {
    let env = [
        ("B2FS_CATERVA2_USER", USER),
        ("B2FS_CATERVA2_PASSWORD", PASSWORD),
    ];
    let out = mount_with(m, url, "ro", &env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn caterva2_public_and_login_roots_mount_as_collections_with_reference_bytes() {
    let t = "caterva2_public_and_login_roots_mount_as_collections_with_reference_bytes";
    let py = or_skip!(fuse_and_python(t));
    let srv = or_skip!(cat2(t));
    let (public, shared) = (srv.root("public"), srv.root("shared"));
    run_python(
        &py,
        &[
            "-c",
            WRITE,
            &public.display().to_string(),
            &shared.display().to_string(),
        ],
    );
    let proxy = Proxy::start(srv.port);
    // The public root as the web UI names it: one listing, and the store's open.
    let url = format!("{}/roots/@public", proxy.url);
    let before = proxy.requests();
    // Not listed again while the requests are counted (that is the next test's).
    let m = Mount::daemon(Path::new(&url), &["remote_timeout=5,c2_relist=0"]);
    let at_mount = proxy.requests() - before;
    assert_eq!(at_mount, 3, "one listing, two GETs to open st.b2z");
    let mut top: Vec<String> = std::fs::read_dir(&m.mp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(
        top,
        [
            "__attrs__",
            "big.b2nd",
            "dir1",
            "ds-1d.b2nd",
            "st.b2z",
            "zarr",
            "zarr2"
        ],
        "datasets keep their names; readme.txt is not shown"
    );
    for name in &top {
        std::fs::metadata(m.path(name)).unwrap();
    }
    assert_eq!(proxy.requests() - before, at_mount, "listing opens no leaf");
    // Each leaf opens on first access with two requests.
    std::fs::read_dir(m.path("ds-1d.b2nd")).unwrap().count();
    assert_eq!(proxy.requests() - before, at_mount + 2);
    // Every file equals a local mount's of the same directory.
    let local = Mount::daemon(&public, &["ro"]);
    let files = crate::support::files_under(&local.mp);
    assert_eq!(crate::support::files_under(&m.mp), files);
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("dir1/sub/sc.b2frame/data/00000000.bin"))
    );
    assert!(files.iter().any(|f| f.ends_with("st.b2z/g/b/array.npy")));
    for f in &files {
        let (got, want) = (
            std::fs::read(m.mp.join(f)).unwrap(),
            std::fs::read(local.mp.join(f)).unwrap(),
        );
        assert!(got == want, "{}", f.display());
    }
    local.umount();
    // And the arrays are what python-blosc2 reads.
    for (file, path, key) in [
        ("ds-1d.b2nd/array.npy", public.join("ds-1d.b2nd"), None),
        (
            "dir1/ds-2d.b2nd/array.npy",
            public.join("dir1/ds-2d.b2nd"),
            None,
        ),
        ("big.b2nd/array.npy", public.join("big.b2nd"), None),
        ("st.b2z/g/b/array.npy", public.join("st.b2z"), Some("/g/b")),
    ] {
        let got = std::fs::read(m.path(file)).unwrap();
        assert!(got == npy_of(&py, &path, key), "{file}");
    }
    let attrs = std::fs::read_to_string(m.path("dir1/ds-2d.b2nd/__attrs__")).unwrap();
    assert!(attrs.contains("mK"), "{attrs}");
    let w = std::fs::OpenOptions::new()
        .write(true)
        .open(m.path("ds-1d.b2nd/data/00000000.bin"));
    assert_eq!(w.unwrap_err().raw_os_error(), Some(libc::EROFS));
    m.umount();

    // The login-protected root: refused without credentials, one line saying how to log in.
    let shared_url = format!("{}/roots/@shared", srv.url);
    let m = Mount::empty();
    let out = mount_with(&m, &shared_url, "ro", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("401") && err.contains("c2_user"), "{err}");
    let out = mount_with(
        &m,
        &shared_url,
        "ro",
        &[
            ("B2FS_CATERVA2_USER", USER),
            ("B2FS_CATERVA2_PASSWORD", "wrong-pass"),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("wrong user or password"), "{err}");
    // With the environment: mounted, the password nowhere in the daemon's command line.
    mount_logged_in(&m, &shared_url);
    let got = std::fs::read(m.path("secret.b2nd/array.npy")).unwrap();
    assert!(got == npy_of(&py, &shared.join("secret.b2nd"), None));
    let cmdlines = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains(&shared_url))
        .collect::<Vec<_>>();
    assert!(!cmdlines.is_empty(), "the daemon runs");
    for c in cmdlines {
        assert!(!String::from_utf8_lossy(&c).contains(PASSWORD));
    }
    m.umount();
    // With a password file, through `b2fs info` of one dataset.
    let pw = srv.state.path().join("c2pass");
    std::fs::write(&pw, format!("{PASSWORD}\n")).unwrap();
    let out = b2fs()
        .args(["info", "-o"])
        .arg(format!("c2_user={USER},c2_password_file={}", pw.display()))
        .arg(format!("{shared_url}/secret.b2nd"))
        .env_remove("B2FS_CATERVA2_USER")
        .env_remove("B2FS_CATERVA2_PASSWORD")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("30000"), "{text}");
}

/// A dataset of a mounted Caterva2 directory rewritten on the server (more chunks, other
/// values) is asked about every `remote_recheck` and opened again: within seconds the mount
/// reads the new version as python-blosc2 reads it; a dataset left alone keeps its bytes.
#[test]
fn caterva2_directory_mount_follows_a_dataset_rewritten_on_the_server() {
    let t = "caterva2_directory_mount_follows_a_dataset_rewritten_on_the_server";
    let Some((py, srv)) = started(t) else {
        return;
    };
    let (public, shared) = (srv.root("public"), srv.root("shared"));
    let (p, s) = (public.display().to_string(), shared.display().to_string());
    run_python(&py, &["-c", WRITE, &p, &s]);
    let url = format!("{}/roots/@public", srv.url);
    let m = Mount::daemon(
        Path::new(&url),
        &["ro,remote_timeout=10,c2_relist=0,remote_recheck=0.3"],
    );
    let big = public.join("big.b2nd");
    let old = std::fs::read(m.path("big.b2nd/array.npy")).unwrap();
    assert!(old == npy_of(&py, &big, None), "the version mounted");
    let ds1 = std::fs::read(m.path("ds-1d.b2nd/array.npy")).unwrap();
    let rewrite = "import sys, numpy as np, blosc2\n\
                   rng = np.random.default_rng(5)\n\
                   blosc2.asarray(rng.standard_normal(470000), chunks=(50000,), \
                   urlpath=sys.argv[1], mode='w', cparams={'clevel': 1})\n";
    run_python(&py, &["-c", rewrite, &big.display().to_string()]);
    let want = npy_of(&py, &big, None);
    assert!(want.len() > old.len(), "the new version has more chunks");
    let now = || std::fs::read(m.path("big.b2nd/array.npy"));
    assert!(
        crate::support::wait_until(Duration::from_secs(60), || now()
            .is_ok_and(|got| got == want)),
        "the mount never showed the new version ({:?} bytes, want {})",
        now().map(|g| g.len()),
        want.len()
    );
    let chunks = std::fs::read_dir(m.path("big.b2nd/data")).unwrap().count();
    assert_eq!(chunks, 10, "470000 items in chunks of 50000");
    assert!(std::fs::read(m.path("ds-1d.b2nd/array.npy")).unwrap() == ds1);
    m.umount();
}

#[test]
fn caterva2_changed_dataset_and_stopped_server_fail_with_eio_and_the_mount_lives() {
    let t = "caterva2_changed_dataset_and_stopped_server_fail_with_eio_and_the_mount_lives";
    let Some((py, mut srv)) = started(t) else {
        return;
    };
    let (public, shared) = (srv.root("public"), srv.root("shared"));
    let (p, s) = (public.display().to_string(), shared.display().to_string());
    run_python(&py, &["-c", WRITE, &p, &s]);
    let url = format!("{}/roots/@public", srv.url);
    let m = Mount::daemon(
        Path::new(&url),
        // Not followed (`remote_recheck=0`): that is the next test's; here a read of the
        // changed dataset must meet the change.
        &["remote_timeout=3,remote_retries=1,cache_size=0,remote_recheck=0"],
    );
    let chunk = |name: &str, i: usize| std::fs::read(m.path(&format!("{name}/data/{i:08}.bin")));
    let want_big0 = chunk("big.b2nd", 0).unwrap();
    assert_eq!(want_big0.len(), 50000 * 8);
    // Rewritten on the server: other values, same geometry. A chunk not read before fails
    // with EIO (the server ignores If-Match: the answer's ETag tells), never new bytes.
    let rewrite = "import sys, numpy as np, blosc2\n\
                   rng = np.random.default_rng(99)\n\
                   blosc2.asarray(rng.standard_normal(400000), chunks=(50000,), \
                   urlpath=sys.argv[1], mode='w', cparams={'clevel': 1})\n\
                   blosc2.asarray((rng.standard_normal((400, 300)) * 100).astype('i4'), \
                   chunks=(100, 150), blocks=(50, 50), urlpath=sys.argv[2], mode='w')\n";
    let big = public.join("big.b2nd");
    let ds2 = public.join("dir1/ds-2d.b2nd");
    run_python(
        &py,
        &[
            "-c",
            rewrite,
            &big.display().to_string(),
            &ds2.display().to_string(),
        ],
    );
    let e = chunk("big.b2nd", 5).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert!(is_mounted(&m.mp));
    // A leaf first opened after the change shows the new version, as python-blosc2 reads it.
    let got = std::fs::read(m.path("dir1/ds-2d.b2nd/array.npy")).unwrap();
    assert!(got == npy_of(&py, &ds2, None), "the new version");
    // The server stopped: reads that need it fail with EIO within the deadline (3 s x 2
    // attempts + 2 s; a stopped server refuses at once); what was read before still reads;
    // the mount stays.
    let ds1 = std::fs::read(m.path("ds-1d.b2nd/array.npy")).unwrap();
    srv.stop();
    let t0 = Instant::now();
    let e = std::fs::read(m.path("dir1/sub/sc.b2frame/data/00000000.bin")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(
        TcpStream::connect(("127.0.0.1", srv.port)).is_err(),
        "the server is gone"
    );
    assert_eq!(std::fs::read(m.path("ds-1d.b2nd/array.npy")).unwrap(), ds1);
    assert!(std::fs::read_dir(&m.mp).unwrap().count() >= 4);
    assert!(is_mounted(&m.mp), "the mount lives");
    m.umount();
}

#[test]
fn caterva2_a_refused_login_cookie_is_renewed_by_logging_in_again() {
    let t = "caterva2_a_refused_login_cookie_is_renewed_by_logging_in_again";
    let Some((py, mut srv)) = started(t) else {
        return;
    };
    let shared = srv.root("shared");
    let write = "import sys, numpy as np, blosc2\n\
                 rng = np.random.default_rng(5)\n\
                 blosc2.asarray(rng.standard_normal(400000), chunks=(50000,), \
                 urlpath=sys.argv[1], mode='w', cparams={'clevel': 1})\n";
    let src = shared.join("noisy.b2nd");
    run_python(&py, &["-c", write, src.to_str().unwrap()]);
    // A plain DictStore .b2z, which the server fails on (HTTP 500 to its fetch).
    let dict = "import sys, numpy as np, blosc2\n\
                with blosc2.DictStore(sys.argv[1], mode='w') as d:\n\
                \x20   d['/a'] = blosc2.asarray(np.arange(5000, dtype='i2'), chunks=(1000,))\n";
    run_python(
        &py,
        &["-c", dict, shared.join("dict.b2z").to_str().unwrap()],
    );
    let m = Mount::empty();
    let url = format!("{}/roots/@shared", srv.url);
    mount_logged_in(&m, &url);
    // One chunk read with the first login's cookie (the last one: no prefetch after it).
    let last = std::fs::read(m.path("noisy.b2nd/data/00000007.bin")).unwrap();
    assert_eq!(last.len(), 50000 * 8);
    // The server restarts with another secret: the mount's cookie is refused from now on,
    // as an expired one is. The other chunks' GETs are refused once, the mount logs in
    // again, and every byte equals what python-blosc2 reads.
    srv.restart("another-secret");
    let got = std::fs::read(m.path("noisy.b2nd/array.npy")).unwrap();
    assert!(
        got == npy_of(&py, &src, None),
        "array.npy after the renewal"
    );
    let access = std::fs::read_to_string(srv.state.path().join("access.log")).unwrap();
    let refused = access
        .lines()
        .filter(|l| l.contains("/noisy.b2nd") && l.contains(" 401"))
        .count();
    let logins = access
        .lines()
        .filter(|l| l.contains("/auth/jwt/login"))
        .count();
    assert!(refused >= 1, "the old cookie was never refused:\n{access}");
    assert_eq!(logins, 1, "one login after the restart:\n{access}");
    // The DictStore: a leaf giving EIO, with the server's failure named in the mount's log;
    // the rest of the mount works.
    let e = std::fs::read_dir(m.path("dict.b2z")).and_then(|mut d| d.next().transpose());
    assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EIO));
    let log = b2fs().arg("log").arg(&m.mp).output().unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    // The server answers its failure with a 500, or (seen once under heavy load) resets
    // the connection: either way the leaf's line names what failed.
    assert!(
        (log.contains("DictStore") && log.contains("500"))
            || (log.contains("dict.b2z") && log.contains("Connection reset")),
        "{log}"
    );
    assert!(is_mounted(&m.mp));
    m.umount();
}

/// Requests of the server's access log whose line holds `what` (`/api/list/`, `/api/fetch/`).
fn logged(srv: &Cat2, what: &str) -> usize {
    std::fs::read_to_string(srv.state.path().join("access.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(what))
        .count()
}

/// The names the mount's root directory lists now.
fn listed(m: &Mount) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(&m.mp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn caterva2_datasets_added_and_removed_on_the_server_show_and_leave() {
    let t = "caterva2_datasets_added_and_removed_on_the_server_show_and_leave";
    let Some((py, srv)) = started(t) else {
        return;
    };
    let (public, shared) = (srv.root("public"), srv.root("shared"));
    let (p, s) = (public.display().to_string(), shared.display().to_string());
    run_python(&py, &["-c", WRITE, &p, &s]);
    let url = format!("{}/roots/@public", srv.url);
    let log = srv.state.path().join("b2fs.log");
    let m = Mount::foreground_with(
        Path::new(&url),
        &["ro,remote_timeout=3,remote_retries=0,c2_relist=0.3"],
        &log,
    );
    let before = listed(&m);
    assert!(before.contains(&"big.b2nd".to_owned()), "{before:?}");
    // A leaf opened before the change, and one listed but never opened (removed later).
    let ds1 = std::fs::read(m.path("ds-1d.b2nd/array.npy")).unwrap();
    // Listed again with nothing changed: only listings, no dataset or store opened again.
    let (lists, fetches) = (logged(&srv, "/api/list/"), logged(&srv, "/api/fetch/"));
    assert!(
        crate::support::wait_until(Duration::from_secs(20), || logged(&srv, "/api/list/")
            >= lists + 3),
        "not listed again: {}",
        std::fs::read_to_string(srv.state.path().join("access.log")).unwrap_or_default()
    );
    assert_eq!(
        logged(&srv, "/api/fetch/"),
        fetches,
        "an unchanged listing opens nothing"
    );
    assert_eq!(listed(&m), before);
    // The server's directory changes: a dataset and a store added (each written beside the
    // root, then renamed in, as an upload lands), one in a new directory, one removed.
    let add = "import sys, os, numpy as np, blosc2\n\
               pub, tmp = sys.argv[1], sys.argv[2]\n\
               def land(name, write):\n    \
                   t = os.path.join(tmp, os.path.basename(name)); write(t)\n    \
                   os.makedirs(os.path.dirname(os.path.join(pub, name)), exist_ok=True)\n    \
                   os.replace(t, os.path.join(pub, name))\n\
               land('new.b2nd', lambda p: blosc2.asarray(np.arange(12000, dtype='i4') * 3, \
                    chunks=(5000,), urlpath=p, mode='w'))\n\
               land('dir2/deep.b2nd', lambda p: blosc2.asarray(np.linspace(-1, 1, 7000), \
                    chunks=(2000,), urlpath=p, mode='w'))\n\
               def store(p):\n    \
                   with blosc2.TreeStore(p, mode='w') as st:\n        \
                       st['/x'] = blosc2.asarray(np.arange(900, dtype='u8'), chunks=(400,))\n\
               land('st2.b2z', store)\n\
               os.remove(os.path.join(pub, 'big.b2nd'))\n";
    let tmp = srv.state.path().join("landing");
    std::fs::create_dir_all(&tmp).unwrap();
    run_python(&py, &["-c", add, &p, &tmp.display().to_string()]);
    let want: Vec<String> = {
        let mut w: Vec<String> = before
            .iter()
            .filter(|n| *n != "big.b2nd")
            .cloned()
            .chain(["dir2", "new.b2nd", "st2.b2z"].map(String::from))
            .collect();
        w.sort();
        w
    };
    assert!(
        crate::support::wait_until(Duration::from_secs(20), || listed(&m) == want),
        "the mount lists {:?}, the server holds {want:?}",
        listed(&m)
    );
    // What was added reads as python-blosc2 reads it.
    for (file, path, key) in [
        ("new.b2nd/array.npy", public.join("new.b2nd"), None),
        (
            "dir2/deep.b2nd/array.npy",
            public.join("dir2/deep.b2nd"),
            None,
        ),
        ("st2.b2z/x/array.npy", public.join("st2.b2z"), Some("/x")),
    ] {
        let got = std::fs::read(m.path(file)).unwrap();
        assert!(got == npy_of(&py, &path, key), "{file}");
    }
    // What was removed is gone; what was opened before still reads the same.
    let e = std::fs::metadata(m.path("big.b2nd")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    assert!(std::fs::read(m.path("ds-1d.b2nd/array.npy")).unwrap() == ds1);
    // A listing that fails (the server gone) keeps what the mount shows, said once in the log.
    let mut srv = srv;
    srv.stop();
    let said = |what: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches(what)
            .count()
    };
    assert!(
        crate::support::wait_until(Duration::from_secs(20), || said("cannot be listed again")
            > 0),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(listed(&m), want);
    assert!(std::fs::read(m.path("ds-1d.b2nd/array.npy")).unwrap() == ds1);
    assert!(is_mounted(&m.mp));
    assert!(said("listed again:") >= 1, "the change was logged");
    m.umount();
    assert_eq!(
        said("cannot be listed again"),
        1,
        "one line, however many failures"
    );
}
