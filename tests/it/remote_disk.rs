//! The disk cache of remote chunks (`-o cache_dir=`), against moto's S3 and `rclone serve
//! http` behind the counting proxy, with frames written by python-blosc2: a source seen once
//! is read again (a new open, a remount) with no chunk GET; an object changed on the server
//! is fetched again, never served from the old entries; a corrupted entry is detected,
//! dropped and fetched again; the size bound holds while a source larger than it streams
//! through; two mounts share one directory at once. Every compared byte comes from the same
//! frame opened locally.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use b2fs::container::{self, Array, Container};
use b2fs::remote::{RemoteObject, RemoteOptions};

use crate::support::remote::{
    BUCKET, Proxy, fetched, local, put_object, python_frame, rclone, s3_fixture,
};
use crate::support::{Mount, fuse_and_python};

fn open_remote(url: &str, opts: &RemoteOptions) -> (Arc<RemoteObject>, Array) {
    let obj = b2fs::remote::open(url, opts).unwrap_or_else(|e| panic!("{url}: {e}"));
    match container::open_bytes(obj.byte_source()).unwrap() {
        Container::Array(a) => (obj, a),
        Container::Table(_) => panic!("a table"),
    }
}

/// The entry files of the disk cache under `dir`, with their sizes.
fn entries(dir: &Path) -> Vec<(PathBuf, u64)> {
    let root = dir.join("b2fs-cache-v1");
    let mut out = Vec::new();
    let Ok(subs) = std::fs::read_dir(&root) else {
        return out;
    };
    for sub in subs.flatten() {
        let name = sub.file_name().to_string_lossy().into_owned();
        if name.len() != 2 || !sub.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(sub.path()).unwrap().flatten() {
            out.push((f.path(), f.metadata().unwrap().len()));
        }
    }
    out.sort();
    out
}

/// Waits until the object's disk stores are done (they run after the reads answered).
fn settle(obj: &RemoteObject) {
    let t0 = Instant::now();
    while obj.disk_stats().unwrap().pending() > 0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "stores never done");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `dir` holds at least `n` entries and no more arrive for 300 ms (stores of a
/// mount daemon).
fn settle_dir(dir: &Path, n: usize) {
    let t0 = Instant::now();
    let mut last = (0, Instant::now());
    loop {
        let now = entries(dir).len();
        if now != last.0 {
            last = (now, Instant::now());
        } else if now >= n && last.1.elapsed() > Duration::from_millis(300) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{now} entries, expected {n}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The byte range an entry file holds (from the key in its header).
fn entry_range(path: &Path) -> (u64, u64) {
    let raw = std::fs::read(path).unwrap();
    let klen = u32::from_le_bytes(raw[8..12].try_into().unwrap()) as usize;
    let key = String::from_utf8_lossy(&raw[36..36 + klen]).into_owned();
    let (a, b) = key.rsplit('\n').next().unwrap().split_once('-').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

/// Reads every chunk of `a` and compares it with `want`'s.
fn read_all(a: &Array, want: &Array, what: &str) {
    assert_eq!(a.nchunks(), want.nchunks(), "{what}");
    for i in 0..a.nchunks() {
        assert_eq!(
            a.chunk_bytes(i).unwrap(),
            want.chunk_bytes(i).unwrap(),
            "{what}: chunk {i}"
        );
    }
}

#[test]
fn disk_cache_remount_reads_a_seen_source_with_no_chunk_get_on_s3_and_http() {
    let t = "disk_cache_remount_reads_a_seen_source_with_no_chunk_get_on_s3_and_http";
    let f = or_skip!(s3_fixture(t, 10, 32 << 10, "seen.b2nd"));
    let server = or_skip!(rclone(t, f.frame.parent().unwrap()));
    let http = Proxy::start(server.port);
    let want = f.local();
    let cold = f.cold();
    assert!(cold.len() >= 6, "{cold:?}");
    let cache = tempfile::tempdir().unwrap();
    let with_cache = |endpoint: Option<&str>| RemoteOptions {
        endpoint: endpoint.map(str::to_owned),
        no_sign_request: endpoint.is_some(),
        cache_dir: Some(cache.path().to_path_buf()),
        ..RemoteOptions::default()
    };
    let s3_url = format!("s3://{BUCKET}/seen.b2nd");
    let http_url = format!("{}/big.b2nd", http.url);
    let cases = [
        (
            "s3",
            s3_url.as_str(),
            &f.proxy,
            with_cache(Some(&f.proxy.url)),
        ),
        ("http", http_url.as_str(), &http, with_cache(None)),
    ];
    let mut seen = 0;
    for (what, url, proxy, opts) in &cases {
        let before = proxy.requests();
        let (obj, a) = open_remote(url, opts);
        read_all(&a, &want, what);
        assert!(
            proxy.requests() - before > 2,
            "{what}: cold: chunks fetched"
        );
        settle(&obj);
        let stored = entries(cache.path()).len() - seen;
        seen += stored;
        assert!(stored >= cold.len(), "{what}: an entry per chunk fetched");
        assert_eq!(obj.disk_stats().unwrap().stored(), stored as u64);
        drop((obj, a));
        // Opened again (what a remount does): the open's two requests, no chunk GET.
        let before = proxy.requests();
        let (obj, a) = open_remote(url, opts);
        read_all(&a, &want, what);
        assert_eq!(proxy.requests() - before, 2, "{what}: warm: the open only");
        assert!(obj.stats().disk_hits() >= cold.len() as u64, "{what}");
    }
    // The two servers' entries are told apart (another identity, another version).
    assert_eq!(entries(cache.path()).len(), seen);
    assert!(seen >= 2 * cold.len());
}

#[test]
fn disk_cache_refetches_changed_objects_and_corrupt_entries() {
    let t = "disk_cache_refetches_changed_objects_and_corrupt_entries";
    let f = or_skip!(s3_fixture(t, 8, 32 << 10, "changing.b2nd"));
    let cache = tempfile::tempdir().unwrap();
    let opts = RemoteOptions {
        endpoint: Some(f.proxy.url.clone()),
        no_sign_request: true,
        cache_dir: Some(cache.path().to_path_buf()),
        ..RemoteOptions::default()
    };
    let url = format!("s3://{BUCKET}/changing.b2nd");
    let want = f.local();
    let cold = f.cold().len() as u64;
    let (obj, a) = open_remote(&url, &opts);
    read_all(&a, &want, "first");
    settle(&obj);
    drop((obj, a));
    let first: Vec<PathBuf> = entries(cache.path()).into_iter().map(|e| e.0).collect();
    assert!(first.len() as u64 >= cold);
    // The object replaced on the server (same length, other bytes in one chunk): the
    // entries of the old version are never served, every chunk is fetched again.
    let mut other = std::fs::read(&f.frame).unwrap();
    let n = other.len();
    other[n / 2] ^= 0xff;
    let changed = f.frame.with_file_name("changed.b2nd");
    std::fs::write(&changed, &other).unwrap();
    put_object(&f.moto, "changing.b2nd", &other, true);
    let want2 = local(&changed);
    let before = f.proxy.requests();
    let (obj, a) = open_remote(&url, &opts);
    read_all(&a, &want2, "changed");
    assert!(f.proxy.requests() - before > 2, "fetched again");
    assert_eq!(
        obj.stats().disk_hits(),
        0,
        "no entry of the old version served"
    );
    settle(&obj);
    drop((obj, a));
    // Flip one byte inside an entry of the new version: detected, dropped, fetched again
    // (one GET), right bytes; the other entries still serve.
    let now = entries(cache.path());
    assert_eq!(now.len(), 2 * first.len(), "both versions' entries");
    // One of a chunk outside the head and tail buffers of the open (read through the cache).
    let frame_len = other.len() as u64;
    let victim = now
        .iter()
        .map(|e| e.0.clone())
        .find(|p| {
            let (start, end) = entry_range(p);
            !first.contains(p) && start >= 64 << 10 && end <= frame_len - (256 << 10)
        })
        .unwrap();
    let mut raw = std::fs::read(&victim).unwrap();
    let len = raw.len();
    raw[len - 10] ^= 0x55;
    std::fs::write(&victim, &raw).unwrap();
    let before = f.proxy.requests();
    let (obj, a) = open_remote(&url, &opts);
    read_all(&a, &want2, "one entry corrupted");
    assert_eq!(
        f.proxy.requests() - before,
        2 + 1,
        "the bad entry fetched again"
    );
    assert_eq!(obj.disk_stats().unwrap().dropped(), 1);
    assert!(obj.stats().disk_hits() >= cold - 1);
    settle(&obj);
    // Stored again, good: a new open reads it from disk.
    drop((obj, a));
    let before = f.proxy.requests();
    let (_obj, a) = open_remote(&url, &opts);
    read_all(&a, &want2, "repaired");
    assert_eq!(f.proxy.requests() - before, 2);
}

#[test]
fn disk_cache_size_bound_holds_while_a_larger_source_streams() {
    let t = "disk_cache_size_bound_holds_while_a_larger_source_streams";
    let f = or_skip!(s3_fixture(t, 24, 32 << 10, "big.b2nd"));
    let want = f.local();
    let frame_len = std::fs::metadata(&f.frame).unwrap().len();
    let bound: u64 = 1 << 20;
    assert!(frame_len > 3 * bound, "the source is larger than the bound");
    let cache = tempfile::tempdir().unwrap();
    let opts = RemoteOptions {
        endpoint: Some(f.proxy.url.clone()),
        no_sign_request: true,
        cache_dir: Some(cache.path().to_path_buf()),
        cache_dir_size: bound,
        ..RemoteOptions::default()
    };
    let url = format!("s3://{BUCKET}/big.b2nd");
    let (obj, a) = open_remote(&url, &opts);
    for i in 0..a.nchunks() {
        assert_eq!(a.chunk_bytes(i).unwrap(), want.chunk_bytes(i).unwrap());
        settle(&obj);
        let total: u64 = entries(cache.path()).iter().map(|e| e.1).sum();
        assert!(total <= bound, "{total} bytes on disk after chunk {i}");
    }
    let d = obj.disk_stats().unwrap();
    assert!(d.evicted() > 0, "entries were evicted");
    assert!(d.stored() > d.evicted(), "and the newest kept");
    // The newest chunks are what is left: read again from disk.
    drop((obj, a));
    let (obj, a) = open_remote(&url, &opts);
    let last = a.nchunks() - 1;
    assert_eq!(
        a.chunk_bytes(last).unwrap(),
        want.chunk_bytes(last).unwrap()
    );
    assert!(
        obj.stats().disk_hits() >= 1 || !fetched(&want, frame_len).contains(&last),
        "the last chunk read is kept"
    );
}

#[test]
fn disk_cache_two_mounts_share_one_directory_and_a_remount_gets_no_chunk() {
    let t = "disk_cache_two_mounts_share_one_directory_and_a_remount_gets_no_chunk";
    let py = or_skip!(fuse_and_python(t));
    let dir = tempfile::tempdir().unwrap();
    let frame = python_frame(&py, dir.path(), 12, 32 << 10);
    let server = or_skip!(rclone(t, dir.path()));
    let proxy = Proxy::start(server.port);
    let want = local(&frame);
    let cold = fetched(&want, std::fs::metadata(&frame).unwrap().len());
    let decoded: Vec<Vec<u8>> = (0..want.nchunks())
        .map(|i| b2fs::codec::decompress(&want.chunk_bytes(i).unwrap()).unwrap())
        .collect();
    let cache = tempfile::tempdir().unwrap();
    // Not asked whether it changed (`remote_recheck`): the requests are counted below.
    let opt = format!(
        "cache_dir={},cache_dir_size=64M,remote_recheck=0",
        cache.path().display()
    );
    let url = format!("{}/big.b2nd", proxy.url);
    // Two mounts at once, read concurrently (each in its own order): right bytes.
    let a = Mount::daemon(Path::new(&url), &[&opt]);
    let b = Mount::daemon(Path::new(&url), &[&opt]);
    std::thread::scope(|s| {
        for (m, rev) in [(&a, false), (&b, true)] {
            let decoded = &decoded;
            s.spawn(move || {
                let mut order: Vec<usize> = (0..decoded.len()).collect();
                if rev {
                    order.reverse();
                }
                for i in order {
                    let got = std::fs::read(m.path(&format!("data/{i:08}.bin"))).unwrap();
                    assert_eq!(got, decoded[i], "chunk {i}");
                }
            });
        }
    });
    settle_dir(cache.path(), cold.len());
    let n = entries(cache.path()).len();
    assert!(
        n >= cold.len() && n <= decoded.len(),
        "one entry per chunk fetched: {n}"
    );
    a.umount();
    b.umount();
    // A remount reads everything with the open's two requests.
    let before = proxy.requests();
    let c = Mount::daemon(Path::new(&url), &[&opt]);
    for (i, d) in decoded.iter().enumerate() {
        let got = std::fs::read(c.path(&format!("data/{i:08}.bin"))).unwrap();
        assert_eq!(&got, d, "remount: chunk {i}");
    }
    assert_eq!(proxy.requests() - before, 2, "remount: no chunk GET");
    c.umount();
}
