//! Remote sources against real servers on 127.0.0.1 (moto's S3, `rclone serve http`), through
//! a fault-injecting proxy that counts requests: the request plan (2 requests to open, one
//! GET per cold chunk, none for a cached one, prefetch on sequential reads), faults (5xx,
//! reset, stall, truncated body: right bytes or an error, never wrong bytes, and recovery), an
//! object replaced under an open source (and a mount that follows it, `remote_recheck`),
//! `b2fs info URL` failures with their exit codes, and
//! real FUSE mounts of S3 and HTTP sources. Every compared byte comes from the same frame
//! opened locally (written by python-blosc2, or the committed sample with its reference
//! sha256s).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use b2fs::container::{self, Array, Container};
use b2fs::remote::{RemoteObject, RemoteOptions};

use crate::support::remote::{
    BUCKET, Fault, Proxy, fetched, local, moto, private_ca, put_object, python_frame, rclone,
    rclone_with, s3_fixture,
};
use crate::support::{Mount, b2fs, fuse, python, repo_root, sha256_hex, wait_until};

fn anon(endpoint: &str) -> RemoteOptions {
    RemoteOptions {
        endpoint: Some(endpoint.to_owned()),
        no_sign_request: true,
        ..RemoteOptions::default()
    }
}

fn s3(key: &str) -> String {
    format!("s3://{BUCKET}/{key}")
}

fn array(c: Container) -> Array {
    match c {
        Container::Array(a) => a,
        Container::Table(_) => panic!("a table"),
    }
}

fn open_remote(url: &str, opts: &RemoteOptions) -> (Arc<RemoteObject>, Array) {
    let obj = b2fs::remote::open(url, opts).unwrap_or_else(|e| panic!("{url}: {e}"));
    let a = array(container::open_bytes(obj.byte_source()).unwrap());
    (obj, a)
}

#[test]
fn remote_open_takes_two_requests_and_each_cold_chunk_one_get() {
    let t = "remote_open_takes_two_requests_and_each_cold_chunk_one_get";
    let f = or_skip!(s3_fixture(t, 12, 32 << 10, "plan.b2nd"));
    let (want, cold) = (f.local(), f.cold());
    let (obj, a) = open_remote(&s3("plan.b2nd"), &anon(&f.proxy.url));
    assert_eq!(f.proxy.requests(), 2, "open: head and tail, nothing else");
    assert_eq!(obj.stats().requests(), 2);
    assert_eq!(a.nchunks(), 12);
    assert_eq!(a.geometry(), want.geometry());
    // Random order (no two neighbours in a row, so nothing is prefetched).
    let mut expect = 2;
    for i in [5usize, 1, 9, 3, 11, 7, 0] {
        let got = a.chunk_bytes(i).unwrap();
        assert_eq!(got, want.chunk_bytes(i).unwrap(), "chunk {i}");
        expect += u64::from(cold.contains(&i));
        assert_eq!(
            f.proxy.requests(),
            expect,
            "one GET for cold chunk {i}, none in the tail"
        );
    }
    assert!(expect >= 7, "most chunks are fetched: {cold:?}");
    let before = f.proxy.requests();
    for i in [5usize, 1, 9] {
        assert_eq!(a.chunk_bytes(i).unwrap(), want.chunk_bytes(i).unwrap());
        let mut head = [0u8; 16];
        assert!(a.chunk_read_at(i, 0, &mut head, None).unwrap());
    }
    assert_eq!(f.proxy.requests(), before, "cached chunks cost no request");
}

#[test]
fn remote_sequential_reads_prefetch_within_the_cache_budget() {
    let t = "remote_sequential_reads_prefetch_within_the_cache_budget";
    let f = or_skip!(s3_fixture(t, 24, 32 << 10, "seq.b2nd"));
    let want = f.local();
    let budget = 2 << 20;
    let opts = RemoteOptions {
        cache_bytes: budget,
        ..anon(&f.proxy.url)
    };
    let (obj, a) = open_remote(&s3("seq.b2nd"), &opts);
    for i in 0..a.nchunks() {
        assert_eq!(
            a.chunk_bytes(i).unwrap(),
            want.chunk_bytes(i).unwrap(),
            "chunk {i}"
        );
        assert!(obj.cached_bytes() <= budget, "cache over budget");
    }
    // Prefetched chunks arrive in merged GETs, so fewer requests than chunks.
    let reqs = f.proxy.requests() - 2;
    assert!(
        reqs < a.nchunks() as u64,
        "{reqs} GETs for {} chunks read in order",
        a.nchunks()
    );
}

#[test]
fn remote_faults_give_right_bytes_or_an_error_and_recover() {
    let t = "remote_faults_give_right_bytes_or_an_error_and_recover";
    let f = or_skip!(s3_fixture(t, 16, 32 << 10, "faults.b2nd"));
    let (want, cold) = (f.local(), f.cold());
    assert!(
        [0, 3, 6, 9, 12, 14].iter().all(|i| cold.contains(i)),
        "{cold:?}"
    );
    let opts = RemoteOptions {
        timeout: Duration::from_millis(500),
        retries: 2,
        ..anon(&f.proxy.url)
    };
    let (_obj, a) = open_remote(&s3("faults.b2nd"), &opts);
    let check = |i: usize, expect_ok: bool, what: &str| {
        let t0 = Instant::now();
        let r = a.chunk_bytes(i);
        assert!(t0.elapsed() < Duration::from_secs(8), "{what}: too slow");
        match r {
            Ok(b) => {
                assert!(expect_ok, "{what}: should have failed");
                assert_eq!(b, want.chunk_bytes(i).unwrap(), "{what}: wrong bytes");
            }
            Err(e) => assert!(!expect_ok, "{what}: {e}"),
        }
    };
    // Transient faults are retried away (chunks far apart: no prefetch).
    f.proxy.set_fault(Fault::Status(503), Some(2));
    check(0, true, "two 503s");
    f.proxy.set_fault(Fault::Reset, Some(1));
    check(3, true, "one reset");
    f.proxy.set_fault(Fault::Truncate, Some(1));
    check(6, true, "one truncated body");
    // Persistent faults fail the read within the deadline, then the source recovers.
    for (i, fault) in [
        (9, Fault::Status(500)),
        (12, Fault::Truncate),
        (14, Fault::Stall),
    ] {
        f.proxy.set_fault(fault, None);
        check(i, false, &format!("{fault:?}"));
        f.proxy.set_fault(Fault::None, None);
        check(i, true, &format!("after {fault:?}"));
    }
}

#[test]
fn remote_replaced_object_fails_every_read_never_mixes_versions() {
    let t = "remote_replaced_object_fails_every_read_never_mixes_versions";
    let f = or_skip!(s3_fixture(t, 8, 32 << 10, "replaced.b2nd"));
    let want = f.local();
    let (_obj, a) = open_remote(&s3("replaced.b2nd"), &anon(&f.proxy.url));
    assert_eq!(a.chunk_bytes(2).unwrap(), want.chunk_bytes(2).unwrap());
    assert!(!a.changed_on_disk().unwrap());
    // Same length, other bytes: only the ETag tells.
    let mut other = std::fs::read(&f.frame).unwrap();
    let n = other.len();
    other[n / 2] ^= 0xff;
    put_object(&f.moto, "replaced.b2nd", &other, true);
    let e = a.chunk_bytes(5).unwrap_err();
    assert!(e.to_string().contains("replaced.b2nd"), "{e}");
    assert!(a.changed_on_disk().unwrap());
    // A chunk fetched before the change is not served any more either.
    assert!(a.chunk_bytes(2).is_err());
}

#[test]
fn remote_http_range_server_reads_like_a_local_file() {
    let t = "remote_http_range_server_reads_like_a_local_file";
    let py = or_skip!(python(t));
    let dir = tempfile::tempdir().unwrap();
    let frame = python_frame(&py, dir.path(), 10, 32 << 10);
    let server = or_skip!(rclone(t, dir.path()));
    let proxy = Proxy::start(server.port);
    let want = local(&frame);
    let cold = fetched(&want, std::fs::metadata(&frame).unwrap().len());
    let url = format!("{}/big.b2nd", proxy.url);
    let (_obj, a) = open_remote(&url, &RemoteOptions::default());
    assert_eq!(proxy.requests(), 2);
    let order = [7usize, 2, 5, 0, 9];
    for i in order {
        assert_eq!(
            a.chunk_bytes(i).unwrap(),
            want.chunk_bytes(i).unwrap(),
            "chunk {i}"
        );
    }
    let gets = order.iter().filter(|i| cold.contains(i)).count() as u64;
    assert_eq!(proxy.requests(), 2 + gets);
}

/// `b2fs info -o OPTS URL` with moto's test credentials in the environment.
fn info(url: &str, opts: &str) -> std::process::Output {
    b2fs()
        .args(["info", "-o", opts, url])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap()
}

fn one_line_naming(out: &std::process::Output, url: &str, code: i32) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{url}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(url), "names the URL: {err}");
}

#[test]
fn remote_info_signed_and_its_failures_exit_with_documented_codes() {
    let t = "remote_info_signed_and_its_failures_exit_with_documented_codes";
    let moto = or_skip!(moto(t));
    let sample = std::fs::read(repo_root().join("examples/sample.b2nd")).unwrap();
    put_object(&moto, "private.b2nd", &sample, false);
    put_object(&moto, "text.b2nd", b"not a frame at all", true);
    let ep = format!("endpoint={}", moto.url);
    // Signed with the AWS_* credentials: works.
    let out = info(&s3("private.b2nd"), &ep);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("data/"));
    // Anonymous on a private object: 403.
    let url = s3("private.b2nd");
    one_line_naming(&info(&url, &format!("{ep},no_sign_request")), &url, 3);
    let url = s3("missing.b2nd");
    one_line_naming(&info(&url, &ep), &url, 3);
    let url = s3("text.b2nd");
    one_line_naming(&info(&url, &ep), &url, 3);
    // Nothing listens on port 1 (a free ephemeral port could be taken meanwhile by a server
    // another test starts).
    let url = s3("sample.b2nd");
    let dead = "endpoint=http://127.0.0.1:1,remote_timeout=1,remote_retries=0";
    one_line_naming(&info(&url, dead), &url, 6);
}

#[test]
fn remote_mounts_of_s3_and_http_read_reference_bytes_and_refuse_writes() {
    let t = "remote_mounts_of_s3_and_http_read_reference_bytes_and_refuse_writes";
    or_skip!(fuse(t));
    let moto = or_skip!(moto(t));
    let src = repo_root().join("examples/sample.b2nd");
    let sc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo_root().join("examples/sample.json")).unwrap())
            .unwrap();
    put_object(&moto, "sample.b2nd", &std::fs::read(&src).unwrap(), true);
    let http = or_skip!(rclone(t, src.parent().unwrap()));
    let ep = format!("endpoint={},no_sign_request", moto.url);
    let s3_url = s3("sample.b2nd");
    let http_url = format!("{}/sample.b2nd", http.url);
    for (url, opts) in [
        (s3_url.as_str(), vec![ep.as_str()]),
        (http_url.as_str(), vec![]),
    ] {
        let m = Mount::daemon(Path::new(url), &opts);
        for c in sc["chunk_list"].as_array().unwrap() {
            let f = m.path(&format!("data/{:08}.bin", c["index"].as_u64().unwrap()));
            let bytes = std::fs::read(&f).unwrap();
            assert_eq!(sha256_hex(&bytes), c["sha256"].as_str().unwrap(), "{url}");
        }
        let w = std::fs::OpenOptions::new()
            .write(true)
            .open(m.path("data/00000000.bin"));
        assert_eq!(
            w.unwrap_err().raw_os_error(),
            Some(libc::EROFS),
            "{url}: read-only"
        );
        m.umount();
    }
}

#[test]
fn remote_mount_network_faults_are_eio_and_the_mount_recovers() {
    let t = "remote_mount_network_faults_are_eio_and_the_mount_recovers";
    or_skip!(fuse(t));
    let f = or_skip!(s3_fixture(t, 8, 32 << 10, "mounted.b2nd"));
    let m = Mount::daemon(
        Path::new(&s3("mounted.b2nd")),
        &[&format!(
            "endpoint={},no_sign_request,remote_timeout=0.5,remote_retries=1,cache_size=0,\
             remote_recheck=0",
            f.proxy.url
        )],
    );
    let want = f.local();
    let decoded = |i: usize| b2fs::codec::decompress(&want.chunk_bytes(i).unwrap()).unwrap();
    let file = |i: usize| m.path(&format!("data/{i:08}.bin"));
    assert_eq!(std::fs::read(file(0)).unwrap(), decoded(0));
    f.proxy.set_fault(Fault::Status(500), None);
    let e = std::fs::read(file(4)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    f.proxy.set_fault(Fault::None, None);
    assert_eq!(std::fs::read(file(4)).unwrap(), decoded(4), "recovered");
    // The object replaced under the mount: EIO, never the new bytes.
    let mut other = std::fs::read(&f.frame).unwrap();
    let n = other.len();
    other[n / 2] ^= 0xff;
    put_object(&f.moto, "mounted.b2nd", &other, true);
    let e = std::fs::read(file(6)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert!(crate::support::is_mounted(&m.mp), "the daemon is still up");
}

/// A read whose fetch the server holds keeps one FUSE worker waiting; the mount still answers
/// `stat`, a listing and another file's read meanwhile (another worker reads the device), and
/// the held read gets its bytes once the server answers. A guard for any change to how the
/// workers take requests (BENCHMARKS.md, "Session 17: one hot FUSE worker").
#[test]
fn remote_mount_answers_others_while_a_read_waits_on_a_held_fetch() {
    let t = "remote_mount_answers_others_while_a_read_waits_on_a_held_fetch";
    or_skip!(fuse(t));
    let f = or_skip!(s3_fixture(t, 8, 32 << 10, "held.b2nd"));
    let m = Mount::daemon(
        Path::new(&s3("held.b2nd")),
        &[&format!(
            "endpoint={},no_sign_request,remote_timeout=120,cache_size=0,remote_recheck=0",
            f.proxy.url
        )],
    );
    let want = f.local();
    let decoded = |i: usize| b2fs::codec::decompress(&want.chunk_bytes(i).unwrap()).unwrap();
    let file = |i: usize| m.path(&format!("data/{i:08}.bin"));
    // Requests enough for both workers to have taken turns (one then waits for the other).
    for _ in 0..8 {
        std::fs::metadata(file(1)).unwrap();
        assert_eq!(std::fs::read_dir(m.path("data")).unwrap().count(), 8);
    }
    let before = f.proxy.requests();
    f.proxy.set_fault(Fault::Hold, Some(1));
    let held = {
        let p = file(3);
        std::thread::spawn(move || std::fs::read(p))
    };
    assert!(
        wait_until(Duration::from_secs(60), || f.proxy.requests() > before),
        "the read's fetch never reached the server"
    );
    let others = {
        let (zero, data, five) = (file(0), m.path("data"), file(5));
        std::thread::spawn(move || {
            let len = std::fs::metadata(zero).unwrap().len();
            let names = std::fs::read_dir(data).unwrap().count();
            (len, names, std::fs::read(five).unwrap())
        })
    };
    // A bound to fail rather than hang: the others need no held request.
    assert!(
        wait_until(Duration::from_secs(60), || others.is_finished()),
        "the mount stopped answering while one read waited"
    );
    let (len, names, five) = others.join().unwrap();
    assert_eq!(len, decoded(0).len() as u64);
    assert_eq!(names, 8);
    assert_eq!(five, decoded(5));
    assert!(
        !held.is_finished(),
        "the held read was answered before its fetch"
    );
    f.proxy.set_fault(Fault::None, None);
    assert_eq!(held.join().unwrap().unwrap(), decoded(3));
    m.umount();
}

#[test]
fn remote_mount_follows_an_object_replaced_on_the_server() {
    let t = "remote_mount_follows_an_object_replaced_on_the_server";
    or_skip!(fuse(t));
    let py = or_skip!(python(t));
    let f = or_skip!(s3_fixture(t, 6, 32 << 10, "followed.b2nd"));
    let m = Mount::daemon(
        Path::new(&s3("followed.b2nd")),
        &[&format!(
            "endpoint={},no_sign_request,remote_timeout=2,remote_recheck=0.3",
            f.proxy.url
        )],
    );
    let chunks = |m: &Mount| std::fs::read_dir(m.path("data")).unwrap().count();
    let v1 = f.local();
    assert_eq!(chunks(&m), 6);
    let first = std::fs::read(m.path("data/00000000.bin")).unwrap();
    assert_eq!(
        first,
        b2fs::codec::decompress(&v1.chunk_bytes(0).unwrap()).unwrap()
    );
    // Nothing changed: the checks (one GET of a byte each) reload nothing.
    let asked = f.proxy.requests();
    assert!(crate::support::wait_until(Duration::from_secs(20), || {
        f.proxy.requests() >= asked + 3
    }));
    assert_eq!(std::fs::read(m.path("data/00000000.bin")).unwrap(), first);
    // Replaced by another python-blosc2 frame, with more chunks and other values.
    let dir = tempfile::tempdir().unwrap();
    let v2_path = python_frame(&py, dir.path(), 9, 16 << 10);
    put_object(
        &f.moto,
        "followed.b2nd",
        &std::fs::read(&v2_path).unwrap(),
        true,
    );
    let v2 = local(&v2_path);
    assert!(
        crate::support::wait_until(Duration::from_secs(20), || chunks(&m) == 9),
        "the mount still shows {} chunks",
        chunks(&m)
    );
    for i in 0..9 {
        let got = std::fs::read(m.path(&format!("data/{i:08}.bin"))).unwrap();
        let want = b2fs::codec::decompress(&v2.chunk_bytes(i).unwrap()).unwrap();
        assert!(got == want, "chunk {i} is the new version's");
    }
    let sizes = std::fs::read_to_string(m.path("meta/sizes")).unwrap();
    assert!(sizes.contains(&format!("{}", 9 * (16 << 10))), "{sizes}");
    m.umount();
}

#[test]
fn remote_https_with_a_private_ca_is_trusted_only_when_told() {
    let t = "remote_https_with_a_private_ca_is_trusted_only_when_told";
    let py = or_skip!(python(t));
    let dir = tempfile::tempdir().unwrap();
    let tls = tempfile::tempdir().unwrap();
    let (ca_cert, cert, key) = or_skip!(private_ca(t, tls.path()));
    let frame = python_frame(&py, dir.path(), 6, 32 << 10);
    let server = or_skip!(rclone_with(t, dir.path(), Some((&cert, &key))));
    let url = format!("{}/big.b2nd", server.url);
    assert!(url.starts_with("https://"));
    // Not trusted: refused, one line naming the URL.
    let out = b2fs()
        .args(["info", "-o", "remote_retries=0", &url])
        .env_remove("SSL_CERT_FILE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "an untrusted certificate was accepted"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&url), "{err}");
    // Trusted with -o ca_file=, or the usual SSL_CERT_FILE.
    let ca = format!("ca_file={}", ca_cert.display());
    for (opts, env) in [(ca.as_str(), None), ("remote_retries=0", Some(&ca_cert))] {
        let mut c = b2fs();
        c.args(["info", "-o", opts, &url]);
        if let Some(e) = env {
            c.env("SSL_CERT_FILE", e);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{opts} {env:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("data/"));
    }
    // Every chunk over TLS equals the local frame's.
    let opts = RemoteOptions {
        ca_file: Some(ca_cert.clone()),
        ..RemoteOptions::default()
    };
    let (_obj, a) = open_remote(&url, &opts);
    let want = local(&frame);
    assert_eq!(a.nchunks(), want.nchunks());
    for i in 0..a.nchunks() {
        assert_eq!(
            a.chunk_bytes(i).unwrap(),
            want.chunk_bytes(i).unwrap(),
            "chunk {i}"
        );
    }
}

/// The follower's question whether an object changed gets one attempt's time
/// (`remote_timeout`), not a read's deadline with its retries: a stalled server costs the
/// follower (which asks every followed object in turn) half a second here, not two, and a
/// question without an answer is no change; a replaced object is one.
#[test]
fn remote_follow_question_to_a_stalled_server_waits_one_attempt() {
    let t = "remote_follow_question_to_a_stalled_server_waits_one_attempt";
    let f = or_skip!(s3_fixture(t, 4, 32 << 10, "asked.b2nd"));
    let opts = RemoteOptions {
        timeout: Duration::from_millis(500),
        retries: 3,
        ..anon(&f.proxy.url)
    };
    let obj = b2fs::remote::open(&s3("asked.b2nd"), &opts).unwrap();
    obj.follow_every(Duration::ZERO, &opts);
    let bytes = obj.byte_source();
    assert!(!bytes.poll_changed(true), "unchanged");
    f.proxy.set_fault(Fault::Stall, None);
    let t0 = Instant::now();
    let changed = bytes.poll_changed(true);
    let took = t0.elapsed();
    f.proxy.set_fault(Fault::None, None);
    assert!(!changed, "a question without an answer is no change");
    // A read's deadline here: 4 attempts of 0.5 s (2.2 s measured before this was bounded);
    // one attempt: 0.52 s.
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let mut other = std::fs::read(&f.frame).unwrap();
    let n = other.len();
    other[n / 2] ^= 0xff;
    put_object(&f.moto, "asked.b2nd", &other, true);
    assert!(bytes.poll_changed(true), "replaced on the server");
}
