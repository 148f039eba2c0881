//! Servers for the remote-source tests, all on 127.0.0.1 and stopped (by their process id)
//! when dropped: moto's S3 server from the project's venv, `rclone serve http` (a plain HTTP
//! server that honours ranges), and a fault-injecting HTTP proxy (added delay, stall, reset,
//! error status, truncated body) that counts the requests it sees. A missing server is a
//! visible SKIP, or a failure under `B2FS_REQUIRE_REMOTE=1`.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use b2fs::container::{self, Array, Container};

use super::{python, repo_root};

/// The bucket every moto test uses.
pub const BUCKET: &str = "b2fs-test";

fn require_or_skip(test: &str, why: &str) {
    let required = std::env::var("B2FS_REQUIRE_REMOTE").is_ok_and(|v| v == "1" || v == "true");
    if required {
        panic!("{test}: B2FS_REQUIRE_REMOTE=1 but {why} (run scripts/setup.sh)");
    }
    eprintln!("SKIP {test}: {why} (run scripts/setup.sh)");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `port` accepts connections (at most 20 s).
fn wait_listening(port: u16, child: &mut Child, what: &str) {
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited ({status}) before listening");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{what} not listening after 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server process, killed by its pid on drop.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its port.
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts moto's S3 server with the bucket [`BUCKET`]; `None` (SKIP) when it is not installed.
pub fn moto(test: &str) -> Option<Server> {
    let exe = repo_root().join(".venv/bin/moto_server");
    if !exe.exists() {
        require_or_skip(test, "no .venv/bin/moto_server");
        return None;
    }
    let port = free_port();
    let mut child = Command::new(exe)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port, &mut child, "moto_server");
    let s = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        port,
    };
    let (status, _) = http(port, "PUT", &format!("/{BUCKET}"), &[], b"");
    assert_eq!(status, 200, "create bucket");
    Some(s)
}

/// Starts `rclone serve http DIR`; `None` (SKIP) when rclone is not installed.
pub fn rclone(test: &str, dir: &Path) -> Option<Server> {
    rclone_with(test, dir, None)
}

/// [`rclone`] over HTTPS with the PEM certificate and key `tls` (`url` is `https://`).
pub fn rclone_with(test: &str, dir: &Path, tls: Option<(&Path, &Path)>) -> Option<Server> {
    rclone_serve(test, "http", dir, tls)
}

/// Starts `rclone serve webdav DIR`: plain HTTP GETs, and the `PROPFIND` listings an HTTP
/// prefix mount needs (`rclone serve http` answers no listing); `None` (SKIP) without rclone.
pub fn rclone_webdav(test: &str, dir: &Path) -> Option<Server> {
    rclone_serve(test, "webdav", dir, None)
}

/// Starts `rclone serve MODE DIR` (`http` or `webdav`), over HTTPS with `tls`.
fn rclone_serve(test: &str, mode: &str, dir: &Path, tls: Option<(&Path, &Path)>) -> Option<Server> {
    let ok = Command::new("rclone")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        require_or_skip(test, "no rclone");
        return None;
    }
    let port = free_port();
    let mut cmd = Command::new("rclone");
    cmd.args(["serve", mode, "--addr", &format!("127.0.0.1:{port}")])
        .arg(dir)
        .args(["--config", "/dev/null"]);
    if mode == "webdav" {
        // rclone keeps directory listings for 5 minutes by default: a server that lists
        // what it holds now is what the follow tests need.
        cmd.args(["--dir-cache-time", "0s"]);
    }
    if let Some((cert, key)) = tls {
        cmd.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port, &mut child, &format!("rclone serve {mode}"));
    let scheme = if tls.is_some() { "https" } else { "http" };
    Some(Server {
        child,
        url: format!("{scheme}://127.0.0.1:{port}"),
        port,
    })
}

/// A private CA and a server certificate for 127.0.0.1 it signed, made with `openssl` in
/// `dir`: `(ca_cert, server_cert, server_key)`; `None` (SKIP) without openssl.
pub fn private_ca(test: &str, dir: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let p = |n: &str| dir.join(n);
    std::fs::write(
        p("leaf.ext"),
        "basicConstraints=critical,CA:FALSE\nsubjectAltName=IP:127.0.0.1\n\
         extendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    // Run in `dir`: the file names are relative.
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=b2fs test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "key.pem",
            "-out",
            "leaf.csr",
        ],
        &[
            "x509",
            "-req",
            "-days",
            "1",
            "-set_serial",
            "2",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-extfile",
            "leaf.ext",
            "-out",
            "cert.pem",
        ],
    ];
    for args in steps {
        match Command::new("openssl").args(args).current_dir(dir).output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!("openssl: {}", String::from_utf8_lossy(&o.stderr)),
            Err(_) => {
                require_or_skip(test, "no openssl");
                return None;
            }
        }
    }
    Some((p("ca.pem"), p("cert.pem"), p("key.pem")))
}

/// One HTTP/1.1 request on a fresh connection: `(status, body)`.
pub fn http(port: u16, method: &str, path: &str, headers: &[&str], body: &[u8]) -> (u16, Vec<u8>) {
    // A server started by another test may still be binding or restarting its listener under
    // load, or close a connection before it took the whole body (moto under load: a broken
    // pipe in the middle of a PUT): the request is sent again, a few times, before failing.
    let mut last = String::new();
    for attempt in 0..50 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        match http_once(port, method, path, headers, body) {
            Ok(answer) => return answer,
            Err(e) => last = e.to_string(),
        }
    }
    panic!("{method} 127.0.0.1:{port}{path}: {last}");
}

/// One attempt of [`http`]: an I/O error before the answer was read is returned.
fn http_once(
    port: u16,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = match resp.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => resp[i + 4..].to_vec(),
        None => Vec::new(),
    };
    Ok((status, body))
}

/// Uploads `bytes` to `s3://BUCKET/key` on moto (`public`: readable without credentials).
pub fn put_object(moto: &Server, key: &str, bytes: &[u8], public: bool) {
    let acl = ["x-amz-acl: public-read"];
    let headers: &[&str] = if public { &acl } else { &[] };
    let (status, body) = http(
        moto.port,
        "PUT",
        &format!("/{BUCKET}/{key}"),
        headers,
        bytes,
    );
    assert_eq!(status, 200, "PUT {key}: {}", String::from_utf8_lossy(&body));
}

/// What the proxy does to the requests it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward untouched.
    None,
    /// Never answer (hold the connection).
    Stall,
    /// Hold the request until the fault is changed, then forward it.
    Hold,
    /// Close the connection without an answer.
    Reset,
    /// Answer this status with an empty body.
    Status(u16),
    /// Forward the head and half the body, then close.
    Truncate,
}

#[derive(Debug)]
struct ProxyState {
    fault: Fault,
    /// How many more requests get the fault (`None`: all).
    left: Option<u64>,
    delay: Duration,
}

/// A fault-injecting HTTP/1.1 proxy in front of one upstream server. Each request goes to
/// the upstream on a fresh connection; responses must carry a Content-Length.
pub struct Proxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<Mutex<ProxyState>>,
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Proxy {
    /// A proxy in front of `upstream_port`.
    pub fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(ProxyState {
            fault: Fault::None,
            left: None,
            delay: Duration::ZERO,
        }));
        let requests = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, rq, sp) = (Arc::clone(&state), Arc::clone(&requests), Arc::clone(&stop));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (st, rq, sp) = (Arc::clone(&st), Arc::clone(&rq), Arc::clone(&sp));
                std::thread::spawn(move || serve_conn(conn, upstream_port, &st, &rq, &sp));
            }
        });
        Proxy {
            url: format!("http://127.0.0.1:{port}"),
            state,
            requests,
            stop,
        }
    }

    /// Applies `fault` to the next `count` requests (`None`: to all until changed).
    pub fn set_fault(&self, fault: Fault, count: Option<u64>) {
        let mut s = self.state.lock().unwrap();
        s.fault = fault;
        s.left = count;
    }

    /// Delays every answer by `d` (an added round trip).
    pub fn set_delay(&self, d: Duration) {
        self.state.lock().unwrap().delay = d;
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// Reads one request head (through the blank line), or `None` at end of stream.
fn read_head(conn: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(head)
}

fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

fn serve_conn(
    mut conn: TcpStream,
    upstream: u16,
    state: &Mutex<ProxyState>,
    requests: &AtomicU64,
    stop: &AtomicBool,
) {
    while let Some(head) = read_head(&mut conn) {
        let head_text = String::from_utf8_lossy(&head).into_owned();
        let mut body = vec![0u8; content_length(&head_text)];
        if conn.read_exact(&mut body).is_err() {
            return;
        }
        requests.fetch_add(1, Ordering::Relaxed);
        let (fault, delay) = {
            let mut s = state.lock().unwrap();
            let fault = match s.left {
                Some(0) => Fault::None,
                Some(n) => {
                    s.left = Some(n - 1);
                    s.fault
                }
                None => s.fault,
            };
            (fault, s.delay)
        };
        std::thread::sleep(delay);
        match fault {
            Fault::Stall => {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                return;
            }
            Fault::Reset => {
                let _ = conn.shutdown(Shutdown::Both);
                return;
            }
            Fault::Status(code) => {
                let r = format!("HTTP/1.1 {code} Injected\r\nContent-Length: 0\r\n\r\n");
                if conn.write_all(r.as_bytes()).is_err() {
                    return;
                }
                continue;
            }
            Fault::Hold => {
                while !stop.load(Ordering::Relaxed) && state.lock().unwrap().fault == Fault::Hold {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            Fault::None | Fault::Truncate => {}
        }
        // Forward on a fresh upstream connection that closes after the answer.
        let mut req: Vec<u8> = Vec::new();
        for line in head_text.split("\r\n").filter(|l| !l.is_empty()) {
            if !line.to_ascii_lowercase().starts_with("connection:") {
                req.extend_from_slice(line.as_bytes());
                req.extend_from_slice(b"\r\n");
            }
        }
        req.extend_from_slice(b"Connection: close\r\n\r\n");
        req.extend_from_slice(&body);
        let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else {
            return;
        };
        let mut resp = Vec::new();
        if up.write_all(&req).is_err() || up.read_to_end(&mut resp).is_err() {
            return;
        }
        let split = or_skip!(resp.windows(4).position(|w| w == b"\r\n\r\n"));
        let (rhead, rbody) = (&resp[..split], &resp[split + 4..]);
        let mut out = Vec::new();
        for line in String::from_utf8_lossy(rhead).split("\r\n") {
            if !line.to_ascii_lowercase().starts_with("connection:") {
                out.extend_from_slice(line.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
        out.extend_from_slice(b"\r\n");
        if fault == Fault::Truncate {
            out.extend_from_slice(&rbody[..rbody.len() / 2]);
            let _ = conn.write_all(&out);
            let _ = conn.shutdown(Shutdown::Both);
            return;
        }
        out.extend_from_slice(rbody);
        if conn.write_all(&out).is_err() {
            return;
        }
    }
}

/// A frame written by python-blosc2 into `dir`: `nchunks` chunks of `chunk_items` f8 items
/// of hard-to-compress data (so chunks are large), returned with its path.
pub fn python_frame(py: &Path, dir: &Path, nchunks: usize, chunk_items: usize) -> PathBuf {
    let path = dir.join("big.b2nd");
    let script = format!(
        "import blosc2, numpy as np\n\
         rng = np.random.default_rng(7)\n\
         n = {nchunks} * {chunk_items}\n\
         a = (rng.standard_normal(n) * 1000).round(2)\n\
         blosc2.asarray(a, chunks=({chunk_items},), blocks=({chunk_items} // 4,), \
         urlpath={path:?}, mode='w', cparams={{'clevel': 1}})\n",
        path = path.display().to_string()
    );
    let out = Command::new(py).args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// A frame opened locally (the oracle of the remote reads).
pub fn local(path: &Path) -> Array {
    match container::open(path).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => panic!("a table"),
    }
}

/// The chunks of the local frame `a` (file length `len`) that are not entirely inside the
/// head (64 KiB) or tail (256 KiB) a remote open fetches: each costs one GET when cold.
pub fn fetched(a: &Array, len: u64) -> Vec<usize> {
    let info = a.frame_info().unwrap();
    let base = info.start + info.header_len;
    (0..a.nchunks())
        .filter(|&i| {
            let at = base + a.frame_index_entry(i).unwrap() as u64;
            let end = at + a.chunk_header(i).unwrap().cbytes as u64;
            end > 64 << 10 && at < len.saturating_sub(256 << 10)
        })
        .collect()
}

/// moto behind a proxy, with a python-written frame of `nchunks` chunks of `chunk_items` f8
/// uploaded as the public object `key`.
pub struct S3Fixture {
    _dir: tempfile::TempDir,
    /// The S3 server.
    pub moto: Server,
    /// The proxy in front of it.
    pub proxy: Proxy,
    /// The frame on disk.
    pub frame: PathBuf,
}

impl S3Fixture {
    /// The frame opened locally.
    pub fn local(&self) -> Array {
        local(&self.frame)
    }

    /// Its chunks that cost a GET when cold (see [`fetched`]).
    pub fn cold(&self) -> Vec<usize> {
        fetched(&self.local(), std::fs::metadata(&self.frame).unwrap().len())
    }
}

/// [`S3Fixture`]; `None` (SKIP) when python or moto is missing.
pub fn s3_fixture(test: &str, nchunks: usize, chunk_items: usize, key: &str) -> Option<S3Fixture> {
    let py = python(test)?;
    let moto = moto(test)?;
    let dir = tempfile::tempdir().unwrap();
    let frame = python_frame(&py, dir.path(), nchunks, chunk_items);
    put_object(&moto, key, &std::fs::read(&frame).unwrap(), true);
    let proxy = Proxy::start(moto.port);
    Some(S3Fixture {
        _dir: dir,
        moto,
        proxy,
        frame,
    })
}

/// Writes a python-blosc2 TreeStore at argv[1] (a `.b2z` file or a `.b2d` directory, replaced
/// whole): version argv[2] (1: `/a` and `/g/b`; 2: `/a` with other values and more chunks,
/// `/c` added, `/g/b` removed).
pub const STORE_VERSION: &str = r#"
import sys, os, shutil, numpy as np, blosc2
path, v = sys.argv[1], int(sys.argv[2])
if os.path.isdir(path):
    shutil.rmtree(path)
with blosc2.TreeStore(path, mode="w") as st:
    if v == 1:
        st["/a"] = blosc2.asarray(np.arange(6000, dtype="i4"), chunks=(2000,))
        st["/g/b"] = blosc2.asarray(np.linspace(0, 1, 3000), chunks=(1000,))
    else:
        st["/a"] = blosc2.asarray(np.arange(9000, dtype="i4") * -3, chunks=(2000,))
        st["/c"] = blosc2.asarray(np.arange(700, dtype="u2"), chunks=(300,))
"#;
