//! Benchmarks of remote sources through real mounts, against a local mount of the same frame
//! or the server's own rate in the same run (BENCHMARKS.md, "Remote sources", records their
//! output). Harness-free; needs `--features remote`, `/dev/fuse`, the project's `.venv` (moto)
//! and rclone (scripts/setup.sh installs both):
//!
//! ```sh
//! cargo bench --features remote --bench remote            # all of them
//! cargo bench --features remote --bench remote -- mount   # those whose name contains "mount"
//! ```
//!
//! `B2FS_BENCH_MIB` sets the frame size of the streaming benchmark (default 512) and of the
//! sparse frame prefix one (default 128). They reuse the integration tests' helpers
//! (`tests/it/support/`: the servers, the fault-injecting proxy, mounts); a missing server or
//! FUSE prints a SKIP line, as in the tests.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[macro_use]
#[allow(unused_imports)] // the tests' re-exports that no benchmark uses
#[path = "../tests/it/support/mod.rs"]
mod support;

use support::mount::{daemon_pid, stream, vm_hwm_kib};
use support::remote::{BUCKET, Proxy, moto, put_object, python_frame, rclone, s3_fixture};
use support::{Mount, fuse, python};

/// The benchmarks, by name; `cargo bench --bench remote -- WORD` runs those whose name holds WORD.
const BENCHES: [(&str, fn()); 5] = [
    (
        "bench_remote_mount_requests_and_time_at_20ms_rtt",
        bench_remote_mount_requests_and_time_at_20ms_rtt,
    ),
    (
        "bench_remote_cold_sequential_read_and_memory",
        bench_remote_cold_sequential_read_and_memory,
    ),
    (
        "bench_remote_random_4k_reads_one_get_per_cold_chunk",
        bench_remote_random_4k_reads_one_get_per_cold_chunk,
    ),
    (
        "bench_remote_prefix_cold_sequential_read",
        bench_remote_prefix_cold_sequential_read,
    ),
    (
        "bench_remote_b2z_many_members_mount_time_and_requests",
        bench_remote_b2z_many_members_mount_time_and_requests,
    ),
];

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters by name.
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    for (name, bench) in BENCHES {
        if words.is_empty() || words.iter().any(|w| name.contains(w.as_str())) {
            println!("== {name}");
            bench();
        }
    }
}

/// `B2FS_BENCH_MIB`, else `default`: the size of a benchmark's frame in MiB (1 MiB chunks).
fn bench_mib(default: usize) -> usize {
    support::env_or("B2FS_BENCH_MIB", default)
}

fn bench_remote_mount_requests_and_time_at_20ms_rtt() {
    let t = "bench_remote_mount_requests_and_time_at_20ms_rtt";
    or_skip!(fuse(t));
    let f = or_skip!(s3_fixture(t, 64, 128 << 10, "rtt.b2nd"));
    let (proxy, frame) = (&f.proxy, &f.frame);
    proxy.set_delay(Duration::from_millis(20));
    let url = format!("s3://{BUCKET}/rtt.b2nd");
    let opts = format!("endpoint={},no_sign_request", proxy.url);
    let mut times = Vec::new();
    for _ in 0..5 {
        let m = Mount::empty();
        let before = proxy.requests();
        let t0 = Instant::now();
        let out = m.run_mount(Path::new(&url), &[&opts]);
        let dt = t0.elapsed().as_secs_f64() * 1e3;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        times.push((dt, proxy.requests() - before));
        m.umount();
    }
    // The same open in-process (no daemon start, no FUSE handshake).
    let ro = b2fs::remote::RemoteOptions {
        endpoint: Some(proxy.url.clone()),
        no_sign_request: true,
        ..Default::default()
    };
    let mut inproc = Vec::new();
    for delay in [20, 0, 20, 0, 20, 0] {
        proxy.set_delay(Duration::from_millis(delay));
        let t0 = Instant::now();
        let obj = b2fs::remote::open(&url, &ro).unwrap();
        let c = b2fs::container::open_bytes(obj.byte_source()).unwrap();
        inproc.push((
            delay,
            t0.elapsed().as_secs_f64() * 1e3,
            obj.stats().requests(),
        ));
        drop(c);
    }
    println!(
        "frame {} bytes, 64 chunks, 20 ms added per request\n  b2fs mount (daemon, until live): {:?} (ms, requests)\n  open in-process: {:?} (added delay ms, ms, requests)",
        std::fs::metadata(frame).unwrap().len(),
        times,
        inproc
    );
}

fn bench_remote_cold_sequential_read_and_memory() {
    let t = "bench_remote_cold_sequential_read_and_memory";
    let (Some(py), Some(moto)) = (python(t), moto(t)) else {
        return;
    };
    or_skip!(fuse(t));
    let mib = bench_mib(512);
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB (131072 f8) chunks.
    let frame = python_frame(&py, dir.path(), mib, 128 << 10);
    let size = std::fs::metadata(&frame).unwrap().len();
    put_object(&moto, "big.b2nd", &std::fs::read(&frame).unwrap(), true);
    let http = rclone(t, dir.path()).unwrap();
    let delayed = Proxy::start(moto.port);
    delayed.set_delay(Duration::from_millis(20));
    // The server's own range-GET rate.
    let curl_rate = |url: &str| {
        let t0 = Instant::now();
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-r",
                &format!("0-{}", size - 1),
                url,
            ])
            .status()
            .unwrap();
        assert!(out.success());
        size as f64 / t0.elapsed().as_secs_f64() / 1e6
    };
    let moto_curl = curl_rate(&format!("{}/{BUCKET}/big.b2nd", moto.url));
    let http_curl = curl_rate(&format!("{}/big.b2nd", http.url));
    let caches = "cache_size=64M,remote_cache=64M";
    let s3_opts = format!("endpoint={},no_sign_request,{caches}", moto.url);
    let s3_slow = format!("endpoint={},no_sign_request,{caches}", delayed.url);
    let s3_url = format!("s3://{BUCKET}/big.b2nd");
    let http_url = format!("{}/big.b2nd", http.url);
    let runs: [(&str, &Path, String); 4] = [
        ("local", frame.as_path(), "cache_size=64M".to_owned()),
        ("s3 loopback", Path::new(&s3_url), s3_opts),
        ("http loopback", Path::new(&http_url), caches.to_owned()),
        ("s3 +20 ms", Path::new(&s3_url), s3_slow),
    ];
    println!(
        "frame {size} bytes ({mib} chunks of 1 MiB decoded); server range-GET rate with curl: moto {moto_curl:.0} MB/s, rclone {http_curl:.0} MB/s (compressed bytes)"
    );
    let only = std::env::var("B2FS_BENCH_ONLY").unwrap_or_default();
    for (name, src, opts) in runs {
        if !only.is_empty() && name != "local" && !name.starts_with(only.as_str()) {
            continue;
        }
        let m = Mount::daemon(src, &[&opts]);
        let pid = daemon_pid(&m.mp);
        let (bytes, secs) = stream(&m);
        let hwm = pid.map_or(0, vm_hwm_kib);
        println!(
            "  {name:14} {:7.1} MB/s decoded ({:6.1} MB/s compressed), {secs:.2} s, daemon VmHWM {} MiB",
            bytes as f64 / secs / 1e6,
            size as f64 / secs / 1e6,
            hwm / 1024
        );
        m.umount();
    }
}

fn bench_remote_random_4k_reads_one_get_per_cold_chunk() {
    let t = "bench_remote_random_4k_reads_one_get_per_cold_chunk";
    or_skip!(fuse(t));
    let f = or_skip!(s3_fixture(t, 64, 128 << 10, "rand.b2nd"));
    let proxy = &f.proxy;
    let url = format!("s3://{BUCKET}/rand.b2nd");
    let m = Mount::daemon(
        Path::new(&url),
        &[&format!("endpoint={},no_sign_request", proxy.url)],
    );
    let after_mount = proxy.requests();
    let mut seen = std::collections::HashSet::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let t0 = Instant::now();
    let n = 2000;
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 4096];
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let chunk = (x % 64) as usize;
        let off = ((x >> 8) % ((1 << 20) / 4096)) * 4096;
        let f = std::fs::File::open(m.path(&format!("data/{chunk:08}.bin"))).unwrap();
        f.read_exact_at(&mut buf, off).unwrap();
        seen.insert(chunk);
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{n} random 4 KiB reads over 64 chunks: {} distinct chunks, {} GETs after mount, {:.0} reads/s",
        seen.len(),
        proxy.requests() - after_mount,
        n as f64 / secs
    );
    m.umount();
}

fn bench_remote_prefix_cold_sequential_read() {
    let t = "bench_remote_prefix_cold_sequential_read";
    let (Some(py), Some(moto)) = (python(t), moto(t)) else {
        return;
    };
    or_skip!(fuse(t));
    let mib = bench_mib(128);
    let dir = tempfile::tempdir().unwrap();
    let sparse = dir.path().join("sparse.b2frame");
    // A sparse frame of 1 MiB (131072 f8) chunks, one object each.
    let script = format!(
        "import numpy as np, blosc2\n\
         ci, n = 128 << 10, {mib} * (128 << 10)\n\
         a = blosc2.empty((n,), dtype='f8', chunks=(ci,), blocks=(ci // 4,), urlpath={p:?}, \
         mode='w', contiguous=False, cparams={{'clevel': 1, 'codec': blosc2.Codec.LZ4}})\n\
         rng = np.random.default_rng(7)\n\
         for i in range(0, n, 32 * ci):\n    \
             a[i:i + 32 * ci] = (rng.standard_normal(min(32 * ci, n - i)) * 1000).round(2)\n",
        p = sparse.display().to_string()
    );
    support::run_python(&py, &["-c", &script]);
    let mut size = 0;
    for e in std::fs::read_dir(&sparse).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        size += bytes.len();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        put_object(&moto, &format!("sparse/{name}"), &bytes, true);
    }
    let delayed = Proxy::start(moto.port);
    delayed.set_delay(Duration::from_millis(20));
    let url = format!("s3://{BUCKET}/sparse/");
    let runs: [(&str, &Path, String); 3] = [
        ("local", sparse.as_path(), "ro".to_owned()),
        (
            "s3 loopback",
            Path::new(&url),
            format!("endpoint={},no_sign_request", moto.url),
        ),
        (
            "s3 +20 ms",
            Path::new(&url),
            format!("endpoint={},no_sign_request", delayed.url),
        ),
    ];
    println!("sparse frame: {mib} chunk objects of 1 MiB decoded, {size} bytes stored");
    for round in 0..2 {
        for (name, src, opts) in &runs {
            let before = delayed.requests();
            let t0 = Instant::now();
            let m = Mount::daemon(src, &[opts]);
            let mount_s = t0.elapsed().as_secs_f64();
            let (bytes, secs) = stream(&m);
            println!(
                "  round {round} {name:12} mount {mount_s:5.2} s, read {secs:6.2} s, \
                 {:7.1} MB/s decoded, {} requests through the delaying proxy",
                bytes as f64 / secs / 1e6,
                delayed.requests() - before
            );
            m.umount();
        }
    }
}

fn bench_remote_b2z_many_members_mount_time_and_requests() {
    let t = "bench_remote_b2z_many_members_mount_time_and_requests";
    let (Some(py), Some(moto)) = (python(t), moto(t)) else {
        return;
    };
    or_skip!(fuse(t));
    let delayed = Proxy::start(moto.port);
    delayed.set_delay(Duration::from_millis(20));
    let dir = tempfile::tempdir().unwrap();
    for members in [1000, 10000] {
        let name = format!("many{members}.b2z");
        let p = dir.path().join(&name);
        let arg = p.to_str().unwrap();
        support::run_python(
            &py,
            &[
                "scripts/oracle/stores.py",
                "many",
                arg,
                &members.to_string(),
            ],
        );
        let bytes = std::fs::read(&p).unwrap();
        put_object(&moto, &name, &bytes, true);
        let url = format!("s3://{BUCKET}/{name}");
        for (label, ep) in [("loopback", &moto.url), ("+20 ms", &delayed.url)] {
            for _ in 0..2 {
                let m = Mount::empty();
                let before = delayed.requests();
                let t0 = Instant::now();
                let out = m.run_mount(
                    Path::new(&url),
                    &[&format!("endpoint={ep},no_sign_request")],
                );
                let secs = t0.elapsed().as_secs_f64();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                // One leaf read: its array.npy (opens that member only).
                let t1 = Instant::now();
                let npy = std::fs::read(m.path("g7/a7/array.npy")).map(|b| b.len());
                let leaf = t1.elapsed().as_secs_f64();
                println!(
                    "{members} members, {} bytes, {label:8}: mount {secs:.2} s ({} requests \
                     through the delaying proxy), first leaf array.npy {:?} in {leaf:.3} s",
                    bytes.len(),
                    delayed.requests() - before,
                    npy
                );
                m.umount();
            }
        }
    }
}
