//! `-o passthrough` (read-only mounts): data files served from memory files the kernel reads
//! without asking b2fs. Through the tree API (no kernel): a backing file holds the file's
//! bytes, is filled once and reused, and respects its budget. Through real mounts (skipped
//! visibly without `/dev/fuse`, never under `B2FS_REQUIRE_FUSE=1`): `pread`, mmap and
//! `np.load` against python-blosc2, maps and `pread`s that never reach b2fs (its cache counters
//! stay still), one fill for several opens, first opens served by b2fs without waiting for a
//! fill (the file fills after they close; no open or map of it fails meanwhile, nor a stalled
//! remote source holds them), a file above the budget read the ordinary way, a source
//! python-blosc2 rewrote seen by the next open (and, by the kernel's rule, not while an
//! earlier passthrough descriptor of the file is open), `-o passthrough` refused on a
//! read-write mount, and a daemon without `CAP_SYS_ADMIN` falling back with one log line.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use b2fs::tree::{Tree, TreeOptions};

use crate::support::{Mount, fuse_and_python, python, python_says, run_python, wait_until};

/// A 2-D float64 b2nd array (300 x 1000, chunks 64 x 1000, so 5 chunks of 512,000 bytes
/// but the last) made by python-blosc2 with `seed`.
fn array(py: &Path, path: &Path, seed: u32) {
    let code = "import sys, numpy as np, blosc2\n\
        rng = np.random.default_rng(int(sys.argv[2]))\n\
        a = rng.standard_normal((300, 1000))\n\
        blosc2.asarray(a, urlpath=sys.argv[1], mode='w', chunks=(64, 1000), blocks=(16, 1000))\n";
    run_python(py, &["-c", code, path.to_str().unwrap(), &seed.to_string()]);
}

fn tree(src: &Path, budget: u64) -> Tree {
    let opts = TreeOptions {
        backing_budget: budget,
        ..TreeOptions::default()
    };
    Tree::from_source(src, opts).unwrap()
}

/// Inode of `path` in `t`, one name at a time from the root.
fn ino(t: &Tree, path: &str) -> u64 {
    path.split('/').fold(b2fs::tree::ROOT_INO, |dir, name| {
        t.lookup(dir, name).unwrap().ino
    })
}

/// The whole file `ino` read through the tree.
fn read_all(t: &Tree, ino: u64) -> Vec<u8> {
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let mut out = Vec::new();
    loop {
        let d = t.read(ino, fh, out.len() as u64, 1 << 20).unwrap();
        if d.is_empty() {
            break;
        }
        out.extend_from_slice(&d);
    }
    t.release(fh).unwrap();
    out
}

/// The content of a backing file.
fn content(f: &std::fs::File) -> Vec<u8> {
    let len = f.metadata().unwrap().len() as usize;
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, 0).unwrap();
    b
}

/// A backing file replaced by a newer version while an open still holds it keeps counting
/// against the budget until it is released: the budget bounds the memory the backing files
/// hold, versions included.
#[test]
fn passthrough_tree_backing_replaced_while_held_counts_until_released() {
    let t = "passthrough_tree_backing_replaced_while_held_counts_until_released";
    let py = or_skip!(python(t));
    let (_dir, src) = crate::support::temp_path("a.b2nd");
    array(&py, &src, 1);
    // array.npy: 2,404,096 bytes (a page of header); room for one version, not two.
    let t = tree(&src, 4 << 20);
    let npy = ino(&t, "array.npy");
    let fh1 = t.open(npy, libc::O_RDONLY).unwrap();
    let v1 = t.backing_file(npy, fh1).expect("version 1 fits");
    let size = content(&v1).len() as u64;
    array(&py, &src, 2); // python-blosc2 rewrites the source
    assert!(wait_until(Duration::from_secs(10), || t.follow_source()));
    let want = read_all(&t, npy);
    let fh2 = t.open(npy, libc::O_RDONLY).unwrap();
    assert!(
        t.backing_file(npy, fh2).is_none(),
        "version 1 is still held: version 2 does not fit beside it"
    );
    assert_eq!(t.backing_stats().bytes, size, "version 1 still counts");
    drop(v1);
    t.release(fh1).unwrap();
    let v2 = t.backing_file(npy, fh2).expect("version 1 was released");
    assert_eq!(content(&v2), want);
    let s = t.backing_stats();
    assert_eq!((s.bytes, s.files), (size, 1));
    t.release(fh2).unwrap();
}

#[test]
fn passthrough_tree_backing_file_is_filled_once_and_bounded() {
    let py = or_skip!(python(
        "passthrough_tree_backing_file_is_filled_once_and_bounded"
    ));
    let (_dir, src) = crate::support::temp_path("a.b2nd");
    array(&py, &src, 1);
    // array.npy: 128-byte header + 2,400,000 bytes; chunk 0: 512,000 bytes.
    let t = tree(&src, 3 << 20);
    let npy = ino(&t, "array.npy");
    let want = read_all(&t, npy);
    let fh = t.open(npy, libc::O_RDONLY).unwrap();
    let f = t.backing_file(npy, fh).expect("array.npy fits the budget");
    assert_eq!(content(&f), want);
    // Sealed: the memory file cannot be written, even by b2fs.
    assert!(f.write_at(b"x", 0).is_err());
    let fh2 = t.open(npy, libc::O_RDONLY).unwrap();
    let f2 = t.backing_file(npy, fh2).unwrap();
    assert!(std::sync::Arc::ptr_eq(&f, &f2), "a second open reuses it");
    let s = t.backing_stats();
    assert_eq!((s.fills, s.reuses, s.files), (1, 1, 1));
    assert_eq!(s.bytes, want.len() as u64);
    // A chunk file fits beside it; a second array.npy-sized file would not while it is held.
    let c0 = ino(&t, "data/00000000.bin");
    let fc = t.open(c0, libc::O_RDONLY).unwrap();
    let chunk = t.backing_file(c0, fc).expect("a chunk fits");
    assert_eq!(content(&chunk), read_all(&t, c0));
    assert_eq!(t.backing_stats().files, 2);
    // Generated files are never backed.
    let sizes = ino(&t, "meta/sizes");
    let fs = t.open(sizes, libc::O_RDONLY).unwrap();
    assert!(t.backing_file(sizes, fs).is_none());
    for fh in [fh, fh2, fc, fs] {
        t.release(fh).unwrap();
    }

    // A budget below the file: never backed, counted, and reads go on the ordinary way.
    let small = tree(&src, 1 << 20);
    let npy = ino(&small, "array.npy");
    let fh = small.open(npy, libc::O_RDONLY).unwrap();
    assert!(small.backing_file(npy, fh).is_none());
    assert_eq!(small.backing_stats().refused, 1);
    // Two chunks fit the 1 MiB budget only once the first is no longer held: the held one
    // is never dropped for room, an unheld one is (least recently used first).
    let (c0, c1) = (
        ino(&small, "data/00000000.bin"),
        ino(&small, "data/00000001.bin"),
    );
    let (f0, f1) = (
        small.open(c0, libc::O_RDONLY).unwrap(),
        small.open(c1, libc::O_RDONLY).unwrap(),
    );
    let held = small.backing_file(c0, f0).unwrap();
    let c2 = ino(&small, "data/00000002.bin");
    let f2 = small.open(c2, libc::O_RDONLY).unwrap();
    let _held1 = small.backing_file(c1, f1).unwrap();
    assert!(
        small.backing_file(c2, f2).is_none(),
        "both kept ones are held"
    );
    drop(held);
    assert!(
        small.backing_file(c2, f2).is_some(),
        "the unheld chunk 0 made room"
    );
    assert_eq!(small.backing_stats().files, 2);
    assert!(small.backing_stats().bytes <= 1 << 20);
    drop(_held1);
    small.drop_backing_files();
    assert_eq!(
        (small.backing_stats().files, small.backing_stats().bytes),
        (0, 0)
    );

    // A writable tree never backs a file.
    let rw = Tree::from_source(
        &src,
        TreeOptions {
            backing_budget: 1 << 30,
            writable: true,
            ..TreeOptions::default()
        },
    )
    .unwrap();
    let npy = ino(&rw, "array.npy");
    let fh = rw.open(npy, libc::O_RDONLY).unwrap();
    assert!(rw.backing_file(npy, fh).is_none());
}

/// Lines of the daemon's log `log` saying a backing file of inode `ino` was filled.
fn fills(log: &Path, ino: u64) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let needle = format!("passthrough: inode {ino}: backing file filled");
    text.lines().filter(|l| l.contains(&needle)).count()
}

/// The python check of a mounted array: `np.load` with and without mmap, 200 random
/// `pread`s of `array.npy` against python-blosc2's array (after the header), every chunk file
/// against `decompress_chunk`, and whether the map and the `pread`s of `array.npy` were served
/// without b2fs (its cache counters did not move). With `wait` (argv 3), the map waits until a
/// new open of `array.npy` passes through (its backing file is filled after the first opens,
/// which are served the ordinary way, are closed; at most 30 s). Prints "ok BYPASSED INO".
const CHECK: &str = r#"
import io, os, sys, time, numpy as np, blosc2
src, mp, wait = sys.argv[1], sys.argv[2], sys.argv[3] == "wait"
def counters():
    return [os.getxattr(mp, "user.b2fs." + k) for k in ("cache_hits", "cache_loads")]
def passes_through(path):
    # Whether a new open of `path` is served without b2fs: a whole read of it leaves b2fs's
    # chunk cache counters (every read through b2fs looks there) where they were.
    fd = os.open(path, os.O_RDONLY)
    try:
        before = counters()
        os.pread(fd, os.fstat(fd).st_size, 0)
        return counters() == before
    finally:
        os.close(fd)
def wait_through(path, seconds=30.0):
    end = time.monotonic() + seconds
    while not passes_through(path) and time.monotonic() < end:
        time.sleep(0.02)
ref = blosc2.open(src)[:]
path = os.path.join(mp, "array.npy")
with open(path, "rb") as f:
    # b2fs pads the header so that the data is page-aligned (tests/it/npy.rs checks it).
    np.lib.format.read_magic(f); np.lib.format.read_array_header_1_0(f); h = f.tell()
    header = os.pread(f.fileno(), h, 0)
want = header + ref.tobytes()
assert np.array_equal(np.load(path), ref)
if wait:
    wait_through(path)
m = np.load(path, mmap_mode="r")
# Whether b2fs saw any read of array.npy once it was open: its chunk cache counters stay the
# same when the kernel serves the map and the preads from the memory file.
# (/proc/self/maps shows the mount's path, device and inode for a passthrough mapping too.)
before = counters()
assert np.array_equal(m, ref)
del m
rng = np.random.default_rng(0)
fd = os.open(path, os.O_RDONLY)
assert os.fstat(fd).st_size == len(want)
for off in rng.integers(0, len(want) - 1, 200):
    off = int(off); n = int(rng.integers(1, 65536))
    assert os.pread(fd, n, off) == want[off:off + n], off
os.close(fd)
bypassed = counters() == before
arr = blosc2.open(src); s = arr.schunk  # keep arr: its schunk must not outlive it
for i in range(s.nchunks):
    with open(os.path.join(mp, "data", "%08d.bin" % i), "rb") as f:
        assert f.read() == s.decompress_chunk(i), i
print("ok", bypassed, os.stat(path).st_ino)
"#;

/// [`CHECK`] on the mount at `mp` of `src`; `wait`: for `array.npy` to pass through.
fn check(py: &Path, src: &Path, mp: &Path, wait: bool) -> (bool, u64) {
    let wait = if wait { "wait" } else { "nowait" };
    let out = python_says(
        py,
        &[
            "-c",
            CHECK,
            src.to_str().unwrap(),
            mp.to_str().unwrap(),
            wait,
        ],
    );
    let w: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(w.first(), Some(&"ok"), "{out}");
    (w[1] == "True", w[2].parse().unwrap())
}

fn logged(dir: &Path) -> PathBuf {
    dir.join("b2fs.log")
}

#[test]
fn passthrough_mount_reads_python_blosc2_bytes_from_one_fill() {
    let py = or_skip!(fuse_and_python(
        "passthrough_mount_reads_python_blosc2_bytes_from_one_fill"
    ));
    let (dir, src) = crate::support::temp_path("a.b2nd");
    array(&py, &src, 2);
    let log = logged(dir.path());
    let m = Mount::foreground_with(&src, &["ro,passthrough"], &log);
    let (bypassed, npy) = check(&py, &src, &m.mp, true);
    let text = std::fs::read_to_string(&log).unwrap();
    if text.contains("every file is served through b2fs") {
        // The kernel refused (no CAP_SYS_ADMIN, Linux < 6.9): the ordinary path served the
        // right bytes; say so rather than pass silently.
        assert!(!bypassed);
        eprintln!("passthrough refused by the kernel here; ordinary path checked: {text}");
        return;
    }
    assert!(
        bypassed,
        "the map and preads of array.npy reached b2fs: {text}"
    );
    // The header's open, np.load twice, the waits' and the pread loop's opens: one decode.
    assert_eq!(fills(&log, npy), 1, "{text}");
    // Again, in a new process: no new fill.
    check(&py, &src, &m.mp, true);
    assert_eq!(fills(&log, npy), 1, "{text}");
    m.umount();
}

/// The life of `array.npy` on a passthrough mount (python): its first open and a second one
/// while the first is live are served by b2fs (their reads and maps move its cache counters,
/// and give python-blosc2's bytes) and fill nothing meanwhile (the log has no fill line for
/// it: neither open waited for one); after both close, the file fills, and a new open and a
/// second one beside it pass through (their maps and `pread`s give the same bytes, the
/// counters stay still). Every open and map succeeds (the kernel fails an open with EIO, or a
/// map with ENODEV, when the two kinds of open mix on one inode). Prints "ok INO".
const LIFE: &str = r#"
import mmap, os, sys, time, numpy as np, blosc2
src, mp, log = sys.argv[1], sys.argv[2], sys.argv[3]
path = os.path.join(mp, "array.npy")
ino = os.stat(path).st_ino
ref = blosc2.open(src)[:]
def counters():
    return [os.getxattr(mp, "user.b2fs." + k) for k in ("cache_hits", "cache_loads")]
def fills():
    line = "passthrough: inode %d: backing file filled" % ino
    return sum(line in l for l in open(log))
def check(fd, want=None):
    # A map of the whole file and 50 preads, against python-blosc2's array after the header.
    size = os.fstat(fd).st_size
    m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    data = np.frombuffer(m, dtype=ref.dtype, offset=size - ref.nbytes).reshape(ref.shape)
    assert np.array_equal(data, ref)
    del data
    got = bytes(m)
    m.close()
    rng = np.random.default_rng(fd)
    for off in rng.integers(0, size - 1, 50):
        off = int(off); n = int(rng.integers(1, 65536))
        assert os.pread(fd, n, off) == got[off:off + n], off
    return got
before = counters()
first = os.open(path, os.O_RDONLY)
whole = check(first)
second = os.open(path, os.O_RDONLY)
assert check(second) == whole
assert counters() != before, "the first opens were served by b2fs"
assert fills() == 0, "nothing filled while the first opens are live"
os.close(first); os.close(second)
end = time.monotonic() + 30
while fills() == 0 and time.monotonic() < end:
    time.sleep(0.02)
assert fills() == 1, "filled after the last close"
before = counters()
third = os.open(path, os.O_RDONLY)
if "every file is served through b2fs" in open(log).read():
    print("refused")  # no CAP_SYS_ADMIN: the kernel refused the backing file
    sys.exit(0)
assert check(third) == whole
fourth = os.open(path, os.O_RDONLY)
assert check(fourth) == whole
assert np.array_equal(np.load(path), ref)
assert counters() == before, "opens after the fill pass through"
os.close(third); os.close(fourth)
print("ok", ino)
"#;

#[test]
fn passthrough_mount_first_opens_are_served_by_b2fs_until_their_last_close() {
    let py = or_skip!(fuse_and_python(
        "passthrough_mount_first_opens_are_served_by_b2fs_until_their_last_close"
    ));
    let (dir, src) = crate::support::temp_path("a.b2nd");
    array(&py, &src, 8);
    let log = logged(dir.path());
    let m = Mount::foreground_with(&src, &["ro,passthrough"], &log);
    let probe = std::fs::read_to_string(&log).unwrap();
    if probe.contains("every file is served through b2fs") {
        eprintln!("passthrough refused by the kernel here: nothing to check: {probe}");
        return;
    }
    let (s, mp, l) = (
        src.to_str().unwrap(),
        m.mp.to_str().unwrap(),
        log.to_str().unwrap(),
    );
    let out = python_says(&py, &["-c", LIFE, s, mp, l]);
    if out == "refused" {
        eprintln!("passthrough refused by the kernel here: the ordinary opens were checked");
        return;
    }
    let w: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(w.first(), Some(&"ok"), "{out}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("every file is served through b2fs"),
        "{text}"
    );
    assert_eq!(fills(&log, w[1].parse().unwrap()), 1, "{text}");
    m.umount();
}

#[test]
fn passthrough_mount_serves_a_file_above_the_budget_the_ordinary_way() {
    let py = or_skip!(fuse_and_python(
        "passthrough_mount_serves_a_file_above_the_budget_the_ordinary_way"
    ));
    let (dir, src) = crate::support::temp_path("a.b2nd");
    array(&py, &src, 3);
    let log = logged(dir.path());
    // array.npy (2.4 MB) is above 1 MiB; its 512,000-byte chunk files fit.
    let m = Mount::foreground_with(&src, &["ro,passthrough,passthrough_budget=1M"], &log);
    let (bypassed, npy) = check(&py, &src, &m.mp, false);
    assert!(!bypassed, "array.npy is not backed: its reads reach b2fs");
    assert_eq!(fills(&log, npy), 0);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(&format!("inode {npy} (")) && text.contains("does not fit"),
        "{text}"
    );
    m.umount();
}

#[test]
fn passthrough_mount_new_open_sees_a_source_python_blosc2_rewrote() {
    let py = or_skip!(fuse_and_python(
        "passthrough_mount_new_open_sees_a_source_python_blosc2_rewrote"
    ));
    let (dir, src) = crate::support::temp_path("a.b2nd");
    array(&py, &src, 4);
    let log = logged(dir.path());
    let m = Mount::foreground_with(&src, &["ro,passthrough"], &log);
    let (_, npy) = check(&py, &src, &m.mp, true);
    // python-blosc2 writes another array over the source (same shape: same size).
    array(&py, &src, 5);
    let now = || {
        let code = "import sys, numpy as np, blosc2\n\
            print(np.array_equal(np.load(sys.argv[2]), blosc2.open(sys.argv[1])[:]))\n";
        let p = m.path("array.npy");
        python_says(
            &py,
            &["-c", code, src.to_str().unwrap(), p.to_str().unwrap()],
        ) == "True"
    };
    assert!(
        wait_until(Duration::from_secs(10), now),
        "a new open of array.npy never showed the rewritten source"
    );
    check(&py, &src, &m.mp, true);
    let text = std::fs::read_to_string(&log).unwrap();
    if !text.contains("every file is served through b2fs") {
        assert_eq!(fills(&log, npy), 2, "one fill per version: {text}");
    }
    m.umount();
}

#[test]
fn passthrough_is_refused_on_a_read_write_mount() {
    or_skip!(crate::support::fuse(
        "passthrough_is_refused_on_a_read_write_mount"
    ));
    let (_dir, src) = crate::support::temp_path("a.b2nd");
    std::fs::copy(
        crate::support::repo_root().join("examples/sample.b2nd"),
        &src,
    )
    .unwrap();
    let m = Mount::empty();
    let out = m.run_mount(&src, &["passthrough"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'passthrough' needs a read-only mount"),
        "{err}"
    );
    assert!(!crate::support::is_mounted(&m.mp));
}

/// The kernel's rule (docs/SEMANTICS.md): while a passthrough descriptor of `array.npy` is
/// open, a new open of it reads the same backing file, the version that descriptor opened,
/// even after the mount followed python-blosc2's rewrite of the source; once it is closed, a
/// new open reads the new version.
#[test]
fn passthrough_mount_open_descriptor_keeps_its_version_for_new_opens() {
    let py = or_skip!(fuse_and_python(
        "passthrough_mount_open_descriptor_keeps_its_version_for_new_opens"
    ));
    let (dir, src) = crate::support::temp_path("a.b2nd");
    array(&py, &src, 6);
    let log = logged(dir.path());
    let m = Mount::foreground_with(&src, &["ro,passthrough"], &log);
    let npy = m.path("array.npy");
    // The first open is served the ordinary way; its backing file fills after its close.
    let first = std::fs::read(&npy).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&npy).unwrap());
    assert!(
        wait_until(Duration::from_secs(30), || fills(&log, ino) == 1),
        "array.npy was never filled after its first open closed"
    );
    let held = std::fs::File::open(&npy).unwrap();
    let old = std::fs::read(&npy).unwrap();
    assert_eq!(old, first);
    if std::fs::read_to_string(&log)
        .unwrap()
        .contains("every file is served through b2fs")
    {
        eprintln!("passthrough refused by the kernel here: nothing to check");
        return;
    }
    array(&py, &src, 7);
    // The mount has followed once a chunk file (not held open) shows the new chunk 0.
    let code = "import sys, blosc2\n\
        a = blosc2.open(sys.argv[1])\n\
        print(open(sys.argv[2], 'rb').read() == a.schunk.decompress_chunk(0))\n";
    let chunk0 = m.path("data/00000000.bin");
    let args = ["-c", code, src.to_str().unwrap(), chunk0.to_str().unwrap()];
    assert!(
        wait_until(Duration::from_secs(10), || python_says(&py, &args)
            == "True"),
        "the mount never showed the rewritten chunk 0"
    );
    assert_eq!(
        std::fs::read(&npy).unwrap(),
        old,
        "a new open while one is live reads the live one's version"
    );
    drop(held);
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read(&npy).unwrap()
            != old),
        "after the last close a new open reads the new version"
    );
    let code = "import sys, numpy as np, blosc2\n\
        print(np.array_equal(np.load(sys.argv[2]), blosc2.open(sys.argv[1])[:]))\n";
    let args = ["-c", code, src.to_str().unwrap(), npy.to_str().unwrap()];
    assert_eq!(python_says(&py, &args), "True");
    m.umount();
}

/// A daemon without `CAP_SYS_ADMIN` (mount.fuse3's `drop_privileges`: it mounts, then runs
/// b2fs on the `/dev/fuse` descriptor with no capabilities): the kernel refuses the backing
/// file (EPERM) at the first open after a fill, the daemon says so once, and every read is
/// served the ordinary way with the same bytes as a mount without the option.
#[test]
fn passthrough_without_cap_sys_admin_falls_back_with_one_log_line() {
    let test = "passthrough_without_cap_sys_admin_falls_back_with_one_log_line";
    let (src, m, tab) = or_skip!(crate::system::mount_t_setup(test, ""));
    let logs = tempfile::tempdir().unwrap();
    let script = format!(
        r#"export XDG_RUNTIME_DIR='{}'
mount -t fuse.b2fs "$SRC" "$MP" -o ro,passthrough,drop_privileges
echo "npy $(sha256sum < "$MP/array.npy" | cut -c1-64)"
# The first open is served by b2fs and fills the file at its close: the next open asks the
# kernel for the backing file.
for i in $(seq 200); do
  [ "$(getfattr --only-values -n user.b2fs.backing_fills "$MP" 2>/dev/null)" -ge 1 ] 2>/dev/null && break
  sleep 0.05
done
echo "again $(sha256sum < "$MP/array.npy" | cut -c1-64)"
echo "chunk $(sha256sum < "$MP/data/00000003.bin" | cut -c1-64)"
umount "$MP"
"#,
        logs.path().display()
    );
    let (lines, report) = crate::system::namespace_lines(&script, &src, &m.mp, tab.path());
    let plain = Mount::daemon(&src, &["ro"]);
    let sha = |p: &str| crate::support::sha256_hex(&std::fs::read(plain.path(p)).unwrap());
    let npy = sha("array.npy");
    assert_eq!(
        lines,
        [
            format!("npy {npy}"),
            format!("again {npy}"),
            format!("chunk {}", sha("data/00000003.bin"))
        ],
        "{report}"
    );
    let log: String = std::fs::read_dir(logs.path())
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let refused = "the kernel refused a backing file";
    assert_eq!(log.matches(refused).count(), 1, "{log}");
    assert!(log.contains("every file is served through b2fs"), "{log}");
}

/// No first open waits for its file's fill, nor for the source: four first opens of chunk
/// files held by a stalled S3 server (more than the mount's two workers) return while it
/// stalls, and the mount keeps answering `stat`, `ls` and reads of a file opened before;
/// once the server answers, each of the four descriptors reads python-blosc2's bytes (served
/// by b2fs: their backing files fill after they close). (Session 17: these opens waited for
/// the fill, on threads of their own.)
#[cfg(feature = "remote")]
#[test]
fn passthrough_first_opens_held_by_a_stalled_source_leave_the_mount_answering() {
    use crate::support::remote::{BUCKET, Fault, s3_fixture};
    let t = "passthrough_first_opens_held_by_a_stalled_source_leave_the_mount_answering";
    or_skip!(crate::support::fuse(t));
    let f = or_skip!(s3_fixture(t, 12, 32 << 10, "held.b2nd"));
    let m = Mount::daemon(
        Path::new(&format!("s3://{BUCKET}/held.b2nd")),
        &[&format!(
            "ro,passthrough,endpoint={},no_sign_request,remote_timeout=3,remote_retries=20,\
             remote_recheck=0",
            f.proxy.url
        )],
    );
    let want = f.local();
    let decoded = |i: usize| b2fs::codec::decompress(&want.chunk_bytes(i).unwrap()).unwrap();
    let cold = f.cold();
    assert!(cold.len() >= 5, "chunks that cost a GET: {cold:?}");
    let first = m.path(&format!("data/{:08}.bin", cold[0]));
    let opened = std::fs::File::open(&first).unwrap();
    let mut head = vec![0u8; 4096];
    opened.read_exact_at(&mut head, 0).unwrap();
    assert_eq!(head, decoded(cold[0])[..4096]);
    let paths: Vec<(usize, PathBuf)> = cold[1..5]
        .iter()
        .map(|&i| (i, m.path(&format!("data/{i:08}.bin"))))
        .collect();
    for (_, p) in &paths {
        std::fs::metadata(p).unwrap(); // looked up before the stall
    }

    f.proxy.set_fault(Fault::Stall, None);
    let (sent, opens) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let files: Vec<_> = paths
            .into_iter()
            .map(|(i, p)| (i, std::fs::File::open(p)))
            .collect();
        let _ = sent.send(files);
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let (root, mp_first) = (m.mp.clone(), first.clone());
    std::thread::spawn(move || {
        let listed = std::fs::read_dir(root.join("data")).map(|d| d.count());
        let size = std::fs::metadata(&mp_first).map(|md| md.len());
        let mut again = vec![0u8; 4096];
        let read = opened.read_exact_at(&mut again, 8192).map(|_| again);
        let _ = tx.send((listed, size, read));
    });
    // A deadline that only a mount waiting for the server misses (its attempts time out
    // every 3 s and are retried 20 times): the answers come in milliseconds otherwise.
    let got = rx.recv_timeout(Duration::from_secs(20));
    let files = opens.recv_timeout(Duration::from_secs(20));
    f.proxy.set_fault(Fault::None, None);
    let (listed, size, read) = got.expect("the mount answers while the server stalls");
    assert_eq!(listed.unwrap(), 12);
    assert_eq!(size.unwrap(), decoded(cold[0]).len() as u64);
    assert_eq!(read.unwrap(), decoded(cold[0])[8192..8192 + 4096]);
    let files = files.expect("first opens return while the server stalls");
    for (i, file) in files {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file.unwrap(), &mut bytes).unwrap();
        assert_eq!(bytes, decoded(i), "chunk {i} through b2fs");
    }
    m.umount();
}
