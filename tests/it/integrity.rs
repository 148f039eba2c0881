//! Issue 21, integrity of what users see: times that move with content (rsync, `cp -u`,
//! `find -newer` through a real mount), bounded growth under repeated rewrites (the mount
//! compacts; an old descriptor keeps reading; every crash point of a compaction and SIGKILLs
//! of a mount leave the old or the new content for python-blosc2), and the small things
//! standard tools ran into (vim's `fchmod`, `cp file MNT/`, `df`, Python's `TCGETS`, xattrs
//! copied by `cp -a`/`rsync -aX`, `mv` of a chunk file).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use b2fs::commit::RECLAIM_SLACK;
use b2fs::container::{Container, write};
use b2fs::tree::Tree;

use crate::support::crash::{Rng, kill_delay};
use crate::support::ok as run;
use crate::support::tree_ino as ino_of;
use crate::support::{Mount, b2fs, fuse_and_python, python_says, run_python, wait_until};

/// Items of one chunk of the test sources (int64: 256 KiB chunks).
const ITEMS: usize = 32768;
/// Bytes of one chunk.
const CHUNK: usize = ITEMS * 8;

/// python-blosc2 writes a 1-D b2nd of `argv[2]` chunks of random int64 (incompressible, so a
/// rewrite leaves as much dead space as the chunk holds).
const GEN: &str = "import blosc2, numpy as np, sys\n\
rng = np.random.default_rng(7)\n\
n = int(sys.argv[2])\n\
a = rng.integers(0, 2**62, size=n * 32768, dtype=np.int64)\n\
blosc2.asarray(a, chunks=(32768,), blocks=(8192,), urlpath=sys.argv[1], mode='w')";

/// python-blosc2 prints the sha256 of every decompressed chunk of each file named, as JSON
/// (one list per file: one python start for many files).
const HASHES: &str = "import blosc2, hashlib, json, sys\n\
out = []\n\
for p in sys.argv[1:]:\n\
\x20   a = blosc2.open(p)\n\
\x20   s = a.schunk\n\
\x20   out.append([hashlib.sha256(s.decompress_chunk(i)).hexdigest() for i in range(s.nchunks)])\n\
print(json.dumps(out))";

fn make_source(py: &Path, path: &Path, nchunks: usize) {
    run_python(
        py,
        &["-c", GEN, path.to_str().unwrap(), &nchunks.to_string()],
    );
}

fn hashes_of(py: &Path, paths: &[PathBuf]) -> Vec<Vec<String>> {
    let mut args = vec!["-c", HASHES];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    serde_json::from_str(&python_says(py, &args)).unwrap()
}

fn hashes(py: &Path, path: &Path) -> Vec<String> {
    hashes_of(py, &[path.to_path_buf()]).remove(0)
}

fn sha(bytes: &[u8]) -> String {
    crate::support::sha256_hex(bytes)
}

/// `len` incompressible bytes made from `seed` (xorshift).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .modified()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn temp_root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    (dir, root)
}

fn rsync(args: &[&str], from: &Path, to: &Path) {
    let mut from = from.as_os_str().to_owned();
    from.push("/");
    run(Command::new("rsync").args(args).arg(from).arg(to));
}

/// Paths under `mp` newer than `stamp`, relative, as `find -newer` lists them.
fn newer(mp: &Path, stamp: &Path, kind: &str) -> Vec<String> {
    let out = run(Command::new("find")
        .arg(mp)
        .arg("-newer")
        .arg(stamp)
        .args(["-type", kind]));
    let mut v: Vec<String> = text(&out)
        .lines()
        .map(|l| {
            l.strip_prefix(mp.to_str().unwrap())
                .unwrap()
                .trim_start_matches('/')
                .to_owned()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn integrity_times_move_with_content_for_rsync_cp_u_and_find() {
    let py = or_skip!(fuse_and_python(
        "integrity_times_move_with_content_for_rsync_cp_u_and_find"
    ));
    let (_dir, root) = temp_root();
    let src = root.join("a.b2nd");
    make_source(&py, &src, 3);
    // An old source time, so that any change shows.
    run(Command::new("touch")
        .args(["-d", "2020-01-02 03:04:05"])
        .arg(&src));
    let old = mtime(&src);
    let m = Mount::daemon(&src, &[]);
    let chunk = |i: usize| m.path(&format!("data/{i:08}.bin"));
    for p in ["", "data", "data/00000001.bin", "array.npy", "meta/sizes"] {
        assert_eq!(mtime(&m.path(p)), old, "{p}: the source's time at mount");
    }
    let backup = root.join("backup");
    rsync(&["-a"], &m.mp, &backup);
    let copy1 = root.join("copy1.bin");
    run(Command::new("cp").arg("-a").arg(chunk(1)).arg(&copy1));
    let stamp = root.join("stamp");
    std::fs::write(&stamp, b"").unwrap();
    std::thread::sleep(Duration::from_millis(20));

    // A commit through the mount: chunk 1 rewritten whole.
    let new1 = noise(CHUNK, 1);
    std::fs::write(chunk(1), &new1).unwrap();
    let t1 = mtime(&chunk(1));
    assert!(t1 > mtime(&stamp), "the commit's time is after the stamp");
    assert_eq!(mtime(&chunk(0)), old, "an untouched chunk keeps its time");
    assert_eq!(mtime(&chunk(2)), old);
    assert_eq!(mtime(&m.path("meta/storage")), old);
    assert_eq!(
        mtime(&m.path("data")),
        old,
        "the listing did not change: the directory keeps its time"
    );
    assert!(mtime(&m.path("array.npy")) >= t1);
    {
        use std::os::unix::fs::MetadataExt;
        let ctime = std::fs::metadata(chunk(1)).unwrap().ctime();
        assert!(
            ctime >= std::fs::metadata(&stamp).unwrap().mtime(),
            "ctime moves with mtime"
        );
    }

    // A second rsync copies the change (before issue 21 it copied nothing and exited 0).
    rsync(&["-a"], &m.mp, &backup);
    assert_eq!(
        std::fs::read(backup.join("data/00000001.bin")).unwrap(),
        new1
    );
    assert_eq!(
        std::fs::read(backup.join("array.npy")).unwrap(),
        std::fs::read(m.path("array.npy")).unwrap()
    );
    run(Command::new("cmp")
        .arg(backup.join("array.npy"))
        .arg(m.path("array.npy")));
    // `cp -u` copies what is newer than the copy.
    run(Command::new("cp").arg("-u").arg(chunk(1)).arg(&copy1));
    assert_eq!(std::fs::read(&copy1).unwrap(), new1);
    // `find -newer` lists exactly what changed.
    let files = newer(&m.mp, &stamp, "f");
    assert!(files.contains(&"data/00000001.bin".to_owned()), "{files:?}");
    assert!(files.contains(&"array.npy".to_owned()), "{files:?}");
    for same in ["data/00000000.bin", "data/00000002.bin", "meta/storage"] {
        assert!(!files.contains(&same.to_owned()), "{same} in {files:?}");
    }

    // An appended chunk moves the directory's time too.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(chunk(3), noise(CHUNK, 3)).unwrap();
    assert!(mtime(&m.path("data")) > t1);
    assert!(mtime(&chunk(3)) > t1);
    assert!(newer(&m.mp, &stamp, "d").contains(&"data".to_owned()));
    // Every chunk read whole once more: the mount can prove which ones another writer left.
    rsync(&["-a"], &m.mp, &backup);

    // Another writer (python-blosc2) changes chunk 0 in the source; the mount follows it.
    let before2 = mtime(&chunk(2));
    run_python(
        &py,
        &[
            "-c",
            "import blosc2, numpy as np, sys; a = blosc2.open(sys.argv[1], mode='a'); \
             a[0:10] = np.arange(10, dtype=np.int64)",
            src.to_str().unwrap(),
        ],
    );
    assert!(
        wait_until(Duration::from_secs(10), || mtime(&chunk(0)) != old),
        "chunk 0's time never moved"
    );
    assert!(mtime(&chunk(0)) > t1);
    assert_eq!(
        mtime(&chunk(2)),
        before2,
        "a chunk whose bytes the other writer left keeps its time"
    );
    rsync(&["-a"], &m.mp, &backup);
    run(Command::new("cmp")
        .arg(backup.join("data/00000000.bin"))
        .arg(chunk(0)));
    m.umount();
}

/// The live bytes of the frame at `path` (python-blosc2 made, b2fs committed).
fn space(path: &Path) -> write::Space {
    match b2fs::container::open(path).unwrap() {
        Container::Array(a) => write::space(&a).unwrap().unwrap(),
        Container::Table(_) => panic!("not a frame"),
    }
}

fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().ino()
}

/// Rewrites chunk `index` of tree `t` whole with `data` and closes (one commit).
fn rewrite(t: &Tree, index: usize, data: &[u8]) {
    let ino = ino_of(t, &format!("data/{index:08}.bin"));
    let fh = t.open(ino, libc::O_WRONLY).unwrap();
    assert_eq!(t.write(ino, fh, 0, data).unwrap() as usize, data.len());
    t.release(fh).unwrap();
}

fn read_all(t: &Tree, ino: u64, fh: u64) -> Vec<u8> {
    crate::consistency::read_fh(t, ino, fh).unwrap()
}

#[test]
fn integrity_space_stays_bounded_under_a_rewrite_loop() {
    let py = or_skip!(crate::support::python(
        "integrity_space_stays_bounded_under_a_rewrite_loop"
    ));
    let (_dir, root) = temp_root();
    let src = root.join("a.b2nd");
    let n = 8;
    make_source(&py, &src, n);
    let start = std::fs::metadata(&src).unwrap().len();
    let t = crate::support::rw_tree(&src);
    // A descriptor opened before any commit pins the first version.
    let pinned_ino = ino_of(&t, "data/00000003.bin");
    let pinned = t.open(pinned_ino, libc::O_RDONLY).unwrap();
    let first3 = {
        let fh = t.open(pinned_ino, libc::O_RDONLY).unwrap();
        let v = read_all(&t, pinned_ino, fh);
        t.release(fh).unwrap();
        v
    };
    let mut last: HashMap<usize, u64> = HashMap::new();
    let mut inodes = vec![inode(&src)];
    let rounds = 160;
    let mut peak = 0;
    for k in 0..rounds as u64 {
        let i = (k as usize * 3) % n;
        rewrite(&t, i, &noise(CHUNK, k));
        last.insert(i, k);
        let s = space(&src);
        // Twice the live bytes, the slack, and one commit (its chunk, index and trailer).
        let bound = 2 * s.live + RECLAIM_SLACK + CHUNK as u64 + (64 << 10);
        assert!(
            s.len <= bound,
            "commit {k}: {} bytes, {} live (bound {bound})",
            s.len,
            s.live
        );
        peak = peak.max(s.len);
        if inodes.last() != Some(&inode(&src)) {
            inodes.push(inode(&src));
        }
    }
    let compactions = inodes.len() - 1;
    assert!(compactions >= 3, "{compactions} compactions");
    // Without compaction the file would hold every rewrite (40 MiB more).
    assert!(peak < start + 16 * CHUNK as u64, "peak {peak}");
    // The old descriptor still reads its version, across every compaction.
    assert_eq!(read_all(&t, pinned_ino, pinned), first3);
    t.release(pinned).unwrap();
    drop(t);
    // python-blosc2 reads the last content of every chunk.
    let got = hashes(&py, &src);
    for (i, h) in got.iter().enumerate() {
        let want = sha(&noise(CHUNK, last[&i]));
        assert_eq!(*h, want, "chunk {i}");
    }
    eprintln!(
        "{rounds} rewrites of 256 KiB chunks in a {start}-byte frame: {compactions} \
         compactions, peak {peak} bytes"
    );
}

#[test]
fn integrity_space_every_crash_point_of_a_compaction_leaves_the_content() {
    let py = or_skip!(crate::support::python(
        "integrity_space_every_crash_point_of_a_compaction_leaves_the_content",
    ));
    let (_dir, root) = temp_root();
    let pristine = root.join("pristine.b2nd");
    make_source(&py, &pristine, 4);
    {
        let t = crate::support::rw_tree(&pristine);
        // Dead space below the threshold: the mount has not compacted it.
        for k in 0..5 {
            rewrite(&t, k % 4, &noise(CHUNK, 100 + k as u64));
        }
    }
    let want = hashes(&py, &pristine);
    let grown = std::fs::metadata(&pristine).unwrap().len();
    let live = space(&pristine).live;
    assert!(grown > live + 4 * CHUNK as u64, "{grown} vs {live}");
    let mut completed_at = None;
    let mut files = Vec::new();
    for steps in 0..6 {
        let f = root.join(format!("s{steps}.b2nd"));
        std::fs::copy(&pristine, &f).unwrap();
        let array = match b2fs::container::open(&f).unwrap() {
            Container::Array(a) => a,
            Container::Table(_) => unreachable!(),
        };
        let done = write::compact_mounted_with_crash_after(&array, steps).unwrap();
        drop(array);
        let len = std::fs::metadata(&f).unwrap().len();
        assert!(len == grown || len == live, "step {steps}: {len}");
        if done {
            completed_at.get_or_insert(steps);
            assert_eq!(len, live);
        }
        // What the crash left, for python-blosc2 below.
        let crashed = root.join(format!("crashed{steps}.b2nd"));
        std::fs::copy(&f, &crashed).unwrap();
        files.push(crashed);
        // The next compaction (over a temp file a crash left) completes.
        let array = match b2fs::container::open(&f).unwrap() {
            Container::Array(a) => a,
            Container::Table(_) => unreachable!(),
        };
        write::compact_mounted(&array).unwrap();
        drop(array);
        assert_eq!(std::fs::metadata(&f).unwrap().len(), live);
        files.push(f);
    }
    assert_eq!(
        completed_at,
        Some(4),
        "write, fsync, rename, directory fsync"
    );
    for (f, got) in files.iter().zip(hashes_of(&py, &files)) {
        assert_eq!(got, want, "{}", f.display());
    }
}

/// One SIGKILL run: mount `src` in the foreground, rewrite chunks round robin with fsync
/// from a thread, kill the daemon after `delay`. Returns the (chunk, seed) of every
/// acknowledged write and the one in flight when it failed.
fn kill_run(
    src: &Path,
    mp: &Path,
    n: usize,
    seed: u64,
    delay: Duration,
) -> Vec<(usize, u64, bool)> {
    let mut child = crate::support::crash::foreground(src, mp);
    let data = mp.join("data");
    let writer = std::thread::spawn(move || {
        let mut writes = Vec::new();
        for k in 0.. {
            let i = k % n;
            let s = seed + k as u64;
            let res = std::fs::OpenOptions::new()
                .write(true)
                .open(data.join(format!("{i:08}.bin")))
                .and_then(|mut f| {
                    f.write_all(&noise(CHUNK, s))?;
                    f.sync_all()
                });
            writes.push((i, s, res.is_ok()));
            if res.is_err() {
                break;
            }
        }
        writes
    });
    crate::support::crash::kill_after(delay, &mut child, writer, mp)
}

#[test]
fn integrity_space_sigkill_during_rewrites_that_compact_keeps_old_or_new() {
    let py = or_skip!(fuse_and_python(
        "integrity_space_sigkill_during_rewrites_that_compact_keeps_old_or_new"
    ));
    let (_dir, root) = temp_root();
    let pristine = root.join("pristine.b2nd");
    let n = 4;
    make_source(&py, &pristine, n);
    let first = hashes(&py, &pristine);
    let runs = crate::support::env_or("B2FS_CRASH_RUNS", 4);
    let mut compacted_runs = 0;
    let mut acked_total = 0;
    let mut rng = Rng::per_run(3);
    let mut checks = Vec::new();
    for r in 0..runs {
        let (src, mp) = crate::support::crash::run_copy(&root, r, &pristine);
        let before = inode(&src);
        let seed = 1000 * (r as u64 + 1);
        // Late enough for a few compactions, spread over the next second.
        let delay = kill_delay(&mut rng, r, 400, 1000);
        let writes = kill_run(&src, &mp, n, seed, delay);
        if inode(&src) != before {
            compacted_runs += 1;
        }
        // Per chunk: the last acknowledged content (or the first), and the one in flight.
        let mut allowed: Vec<Vec<String>> = first.iter().map(|h| vec![h.clone()]).collect();
        for &(i, s, ok) in &writes {
            let h = sha(&noise(CHUNK, s));
            if ok {
                allowed[i] = vec![h];
                acked_total += 1;
            } else {
                allowed[i].push(h);
            }
        }
        checks.push((src.clone(), allowed));
        let s = space(&src);
        assert!(
            s.len <= 2 * s.live + RECLAIM_SLACK + CHUNK as u64 + (64 << 10),
            "run {r}: {} bytes, {} live",
            s.len,
            s.live
        );
    }
    let files: Vec<PathBuf> = checks.iter().map(|(p, _)| p.clone()).collect();
    for ((src, allowed), got) in checks.iter().zip(hashes_of(&py, &files)) {
        for (i, h) in got.iter().enumerate() {
            assert!(
                allowed[i].contains(h),
                "{}: chunk {i} holds neither its last acknowledged content nor the one in \
                 flight",
                src.display()
            );
        }
    }
    assert!(
        compacted_runs > 0,
        "no run compacted: the test exercised nothing"
    );
    eprintln!(
        "{runs} SIGKILL runs, {compacted_runs} compacted, {acked_total} acknowledged writes checked"
    );
}

/// `b2fs log MP`.
fn b2fs_log(mp: &Path) -> String {
    text(&run(b2fs().arg("log").arg(mp)))
}

#[test]
fn integrity_small_things_standard_tools_ran_into() {
    let py = or_skip!(fuse_and_python(
        "integrity_small_things_standard_tools_ran_into"
    ));
    let (_dir, root) = temp_root();
    let src = root.join("s.b2nd");
    std::fs::copy(
        crate::support::repo_root().join("examples/sample.b2nd"),
        &src,
    )
    .unwrap();
    let log = root.join("daemon.log");
    let m = Mount::foreground(&src, &log);
    let chunk = m.path("data/00000000.bin");

    // vim's fchmod to the file's own mode: no change, no error, nothing logged.
    let code = "import os, sys\n\
                fd = os.open(sys.argv[1], os.O_RDWR)\n\
                os.fchmod(fd, os.fstat(fd).st_mode & 0o7777)\n\
                os.close(fd)\n\
                try:\n\
                \x20   os.chmod(sys.argv[1], 0o600)\n\
                \x20   print('changed')\n\
                except PermissionError:\n\
                \x20   print('refused')";
    assert_eq!(
        python_says(&py, &["-c", code, chunk.to_str().unwrap()]),
        "refused"
    );
    let attrs = m.path("__attrs__");
    let vim = run(Command::new("vim")
        .args(["-es", "-u", "NONE", "-i", "NONE", "-n"])
        .args(["-c", "set nobackup nowritebackup backupcopy=yes"])
        .args(["-c", "%s/K/Kelvin/", "-c", "wq"])
        .arg(&attrs));
    assert!(
        vim.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&vim.stderr)
    );
    assert!(std::fs::read_to_string(&attrs).unwrap().contains("Kelvin"));
    let l = b2fs_log(&m.mp);
    // One refusal (the chmod to 0600 above), nothing for the fchmod or vim's save.
    let failures: Vec<&str> = l
        .lines()
        .skip(1)
        .filter(|e| !e.contains(": note: "))
        .collect();
    assert_eq!(failures.len(), 1, "{l}");
    assert!(failures[0].contains("chmod/chown"), "{l}");

    // Python's text-mode open asks TCGETS: ENOTTY, quietly.
    for _ in 0..3 {
        crate::support::oracle_says(
            &py,
            &[
                &"-c",
                &"import sys; print(open(sys.argv[1]).read(1))",
                &attrs,
            ],
        );
    }

    // `mv` of a chunk file: refused for its real reason, not as a "rename with flags".
    let mv = Command::new("mv")
        .arg(&chunk)
        .arg(m.path("data/x.bin"))
        .output()
        .unwrap();
    assert!(!mv.status.success());
    let l = b2fs_log(&m.mp);
    assert!(
        l.contains("only scratch files (editors' temp files) can be renamed"),
        "{l}"
    );
    assert!(!l.contains("with flags"), "{l}");

    // `cp file MNT/`: listed while it exists, logged as not persisting.
    run(Command::new("cp").arg(&log).arg(m.path("notes.txt")));
    let names: Vec<String> = std::fs::read_dir(&m.mp)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.contains(&"notes.txt".to_owned()), "{names:?}");
    let l = b2fs_log(&m.mp);
    assert!(
        l.contains("create /notes.txt: note: kept in memory only"),
        "{l}"
    );

    // df: the free space of the filesystem holding the source.
    let avail = |p: &Path| -> u64 {
        let out = run(Command::new("df").args(["-B1", "--output=avail"]).arg(p));
        text(&out).lines().nth(1).unwrap().trim().parse().unwrap()
    };
    let (mounted, host) = (avail(&m.mp), avail(&root));
    assert!(mounted > 0, "df shows nothing available");
    assert!(
        mounted.abs_diff(host) < 256 << 20,
        "df MNT {mounted} vs the source's filesystem {host}"
    );

    // The root's live counters are readable by name, and not copied by cp -a / rsync -aX.
    let hits = run(Command::new("getfattr")
        .args(["-n", "user.b2fs.cache_hits", "--only-values"])
        .arg(&m.mp));
    assert!(text(&hits).parse::<u64>().is_ok(), "{}", text(&hits));
    let dump = text(&run(Command::new("getfattr").arg("-d").arg(&m.mp)));
    assert!(dump.contains("user.b2fs.kind="), "{dump}");
    assert!(!dump.contains("cache_"), "{dump}");
    let cp_a = root.join("cp_a");
    run(Command::new("cp").arg("-a").arg(&m.mp).arg(&cp_a));
    let rs = root.join("rsync_ax");
    rsync(&["-aX"], &m.mp, &rs);
    for copy in [&cp_a, &rs] {
        let dump = text(&run(Command::new("getfattr").arg("-d").arg(copy)));
        assert!(dump.contains("user.b2fs.kind="), "xattrs copied: {dump}");
        for live in ["cache_", "pid", "version", "writable"] {
            assert!(
                !dump.contains(live),
                "{live} copied to {}: {dump}",
                copy.display()
            );
        }
    }

    m.umount();
    let daemon = std::fs::read_to_string(&log).unwrap();
    assert!(!daemon.contains("Not Implemented"), "{daemon}");
    assert!(!daemon.contains("ioctl"), "{daemon}");
    assert!(!daemon.contains("ERROR"), "{daemon}");
}
