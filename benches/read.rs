//! End-to-end read benchmark through a real FUSE mount, against python-blosc2 (nthreads=2) in
//! the same run. Harness-free: `cargo bench --bench read`. Needs `/dev/fuse`, `fusermount3`
//! and the project's `.venv` (scripts/setup.sh); sources are generated once into
//! `bench-data/` (gitignored) by `scripts/bench_read.py gen`.
//!
//! Measured:
//! 1. cold sequential read of every chunk file (1 MiB reads, like `dd bs=1M`) of a 1 GiB
//!    ZSTD+SHUFFLE float64 b2nd, vs python decompressing every chunk (measured before and
//!    after the mounts), for the default (direct I/O) and `keep_cache`;
//! 2. the re-read, and the warm read from b2fs's cache with `cache_size=2G` (after two
//!    passes: the second promotes the streamed chunks), against the FUSE ceiling of each
//!    mode: a trivial in-process fuser file served from one static buffer, read the same way;
//!    b2fs and the ceilings take turns for five rounds;
//! 3. 4 KiB reads at 2000 random offsets, cold (fresh mount) and warm, vs `get_slice`;
//! 4. `dd bs=1M` of one 8 MiB chunk file, cold and warm, `keep_cache` vs `direct_io`;
//! 5. the time `b2fs mount` takes to return for a 1,000,000-chunk frame, and to list it;
//! 6. peak RSS of the b2fs process while streaming a 4 GiB array with `cache_size=64M`.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{is_mounted, python, root};

const MIB: f64 = 1024.0 * 1024.0;

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// A foreground `b2fs mount -f` child (so its pid is known), unmounted on drop.
struct Mounted {
    mp: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Mounted {
    fn new(src: &Path, opts: &str) -> Mounted {
        let dir = tempfile::tempdir().unwrap();
        let mp = std::fs::canonicalize(dir.path()).unwrap().join("mnt");
        std::fs::create_dir(&mp).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_b2fs"))
            .args(["mount", "-f", "-o", opts])
            .arg(src)
            .arg(&mp)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !is_mounted(&mp) {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "mount did not come up"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        Mounted {
            mp,
            child,
            _dir: dir,
        }
    }

    fn chunk_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.mp.join("data"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }

    /// Peak resident set of the serving process, in bytes.
    fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_b2fs"))
            .arg("umount")
            .arg(&self.mp)
            .output();
        if is_mounted(&self.mp) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mp)
                .output();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads every file in 1 MiB reads; returns (bytes, seconds).
fn read_files(files: &[PathBuf]) -> (u64, f64) {
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    let mut total = 0u64;
    for f in files {
        let mut file = File::open(f).unwrap();
        loop {
            let n = file.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            total += n as u64;
        }
    }
    (total, t.elapsed().as_secs_f64())
}

fn rate(bytes: u64, secs: f64) -> String {
    format!("{:8.1} MiB/s ({:6.3} s)", bytes as f64 / MIB / secs, secs)
}

fn python_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(python())
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// SplitMix64: deterministic offsets without a dependency.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The FUSE ceiling: a trivial filesystem with one 1 GiB file `f` whose bytes come from a
/// static 8 MiB buffer (no decoding, no cache lookups), mounted in this process with the same
/// fuser configuration as b2fs.
mod ceiling {
    use super::*;
    use fuser::{
        FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
        OpenFlags, ReplyAttr, ReplyData, ReplyEntry, ReplyOpen, Request,
    };
    use std::time::SystemTime;

    pub const SIZE: u64 = 1 << 30;

    pub struct Trivial {
        pub direct_io: bool,
        pub buf: Vec<u8>,
    }

    fn attr(ino: u64) -> FileAttr {
        let t = SystemTime::UNIX_EPOCH;
        FileAttr {
            ino: INodeNo(ino),
            size: if ino == 1 { 0 } else { SIZE },
            blocks: SIZE / 512,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind: if ino == 1 {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: 0o555,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 1 << 20,
            flags: 0,
        }
    }

    impl Filesystem for Trivial {
        fn lookup(&self, _r: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
            if parent.0 == 1 && name == "f" {
                reply.entry(&Duration::from_secs(60), &attr(2), Generation(0));
            } else {
                reply.error(fuser::Errno::ENOENT);
            }
        }
        fn getattr(&self, _r: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
            reply.attr(&Duration::from_secs(60), &attr(ino.0));
        }
        fn open(&self, _r: &Request, _ino: INodeNo, _f: OpenFlags, reply: ReplyOpen) {
            let flags = if self.direct_io {
                FopenFlags::FOPEN_DIRECT_IO
            } else {
                FopenFlags::FOPEN_KEEP_CACHE
            };
            reply.opened(FileHandle(1), flags);
        }
        fn read(
            &self,
            _r: &Request,
            _ino: INodeNo,
            _fh: FileHandle,
            offset: u64,
            size: u32,
            _flags: OpenFlags,
            _lock: Option<LockOwner>,
            reply: ReplyData,
        ) {
            let end = (offset + u64::from(size)).min(SIZE);
            let len = end.saturating_sub(offset) as usize;
            let at = (offset % self.buf.len() as u64) as usize;
            let len = len.min(self.buf.len() - at);
            reply.data(&self.buf[at..at + len]);
        }
    }

    /// A mounted trivial file, read in 1 MiB reads one pass at a time. Its bytes come from a
    /// buffer of `buf` bytes: 8 MiB stays in the CPU's last-level cache, 1 GiB is read from
    /// memory like b2fs's cached chunks.
    pub struct Ceiling {
        mp: PathBuf,
        _session: fuser::BackgroundSession,
        _dir: tempfile::TempDir,
    }

    impl Ceiling {
        pub fn new(direct_io: bool, buf: usize) -> Ceiling {
            let dir = tempfile::tempdir().unwrap();
            let mp = std::fs::canonicalize(dir.path()).unwrap().join("mnt");
            std::fs::create_dir(&mp).unwrap();
            let cfg = b2fs::fuse::MountConfig::default();
            let fs = Trivial {
                direct_io,
                buf: (0..buf).map(|i| (i * 7) as u8).collect(),
            };
            let session = fuser::Session::new(fs, &mp, &cfg.to_fuser())
                .unwrap()
                .spawn()
                .unwrap();
            Ceiling {
                mp,
                _session: session,
                _dir: dir,
            }
        }

        /// One pass over the file: (bytes, seconds).
        pub fn pass(&self) -> (u64, f64) {
            read_files(&[self.mp.join("f")])
        }
    }
}

/// The fastest of `passes` (bytes, seconds), by rate: a pass is the whole file unless a read
/// came up short.
fn fastest(passes: &[(u64, f64)]) -> (u64, f64) {
    passes
        .iter()
        .copied()
        .max_by(|a, b| (a.0 as f64 / a.1).total_cmp(&(b.0 as f64 / b.1)))
        .unwrap()
}

/// The median of `v` (the mean of the middle two for an even length).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Whether part `name` runs: all by default, or those listed in `B2FS_BENCH` (comma list of
/// seq, rand, dd, mount, rss).
fn part(name: &str) -> bool {
    std::env::var("B2FS_BENCH").map_or(true, |v| v.split(',').any(|p| p == name))
}

fn main() {
    if !Path::new("/dev/fuse").exists() || sh("sh", &["-c", "command -v fusermount3"]).is_empty() {
        eprintln!("SKIP bench read: needs /dev/fuse and fusermount3");
        return;
    }
    let data = root().join("bench-data");
    let generated = Command::new(python())
        .arg(root().join("scripts/bench_read.py"))
        .arg("gen")
        .arg(&data)
        .status()
        .unwrap();
    assert!(generated.success(), "bench data generation failed");
    let f1g = data.join("f1g.b2nd");
    let f4g = data.join("f4g.b2nd");
    let m1m = data.join("m1m.b2frame");

    let cpu = sh(
        "sh",
        &["-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
    );
    println!("# b2fs read benchmark");
    println!(
        "machine: {} x{} | {} | b2fs {} | python-blosc2 {}",
        cpu.trim(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        sh("rustc", &["--version"]),
        sh(
            "git",
            &[
                "-C",
                root().to_str().unwrap(),
                "rev-parse",
                "--short",
                "HEAD"
            ]
        ),
        sh(
            python().to_str().unwrap(),
            &["-c", "import blosc2; print(blosc2.__version__)"]
        ),
    );

    // 1 + 2: sequential, cold then warm, for both cache policies.
    if part("seq") {
        let python_seq = || {
            let py = python_json(&["scripts/bench_read.py", "seq", f1g.to_str().unwrap()]);
            let (pb, ps) = (
                py["bytes"].as_u64().unwrap(),
                py["seconds"].as_f64().unwrap(),
            );
            println!(
                "seq 1 GiB python-blosc2 decompress_chunk (nthreads=2)      {}",
                rate(pb, ps)
            );
            pb as f64 / ps
        };
        // Both sides read the source from the page cache: load it once, untimed.
        let _ = std::fs::read(&f1g).map(|b| b.len());
        let py_before = python_seq();
        let mut ours = Vec::new();
        for (label, opts) in [
            ("default", "ro"),
            ("keep_cache", "ro,keep_cache"),
            ("direct_io", "ro,direct_io"),
        ] {
            let m = Mounted::new(&f1g, opts);
            let files = m.chunk_files();
            let (bytes, cold) = read_files(&files);
            let (_, again) = read_files(&files);
            println!(
                "seq 1 GiB via mount [{label:10}] cold    {}",
                rate(bytes, cold)
            );
            println!(
                "seq 1 GiB via mount [{label:10}] re-read {}",
                rate(bytes, again)
            );
            ours.push((label, bytes as f64 / cold));
        }
        let py_after = python_seq();
        let py = (py_before + py_after) / 2.0;
        for (label, r) in ours {
            println!(
                "seq cold [{label:10}] / python-blosc2 (mean of before and after): {:.2}x",
                r / py
            );
        }
        // Warm: the chunks are in b2fs's cache (default mode) or in the page cache
        // (keep_cache), against the trivial file's ceiling in the same mode.
        for (label, opts, direct) in [
            ("default", "ro,cache_size=2G", true),
            ("keep_cache", "ro,keep_cache", false),
        ] {
            let m = Mounted::new(&f1g, opts);
            let files = m.chunk_files();
            // Two passes fill the cache (the first streams, so the second keeps). Then b2fs
            // and the two ceilings take turns, five rounds, so that all three see the same
            // minutes of the machine; the fastest pass of each, by rate.
            for _ in 0..2 {
                read_files(&files);
            }
            let ceilings = [("8 MiB buffer", 8usize << 20), ("1 GiB buffer", 1 << 30)]
                .map(|(what, buf)| (what, ceiling::Ceiling::new(direct, buf)));
            let mut ours = Vec::new();
            let mut theirs = [Vec::new(), Vec::new()];
            for _ in 0..5 {
                ours.push(read_files(&files));
                for (i, (_, c)) in ceilings.iter().enumerate() {
                    theirs[i].push(c.pass());
                }
            }
            let (bytes, warm) = fastest(&ours);
            println!("seq 1 GiB warm [{label:10}] {}", rate(bytes, warm));
            for (i, (what, _)) in ceilings.iter().enumerate() {
                let (cb, cs) = fastest(&theirs[i]);
                let per_round: Vec<f64> = ours
                    .iter()
                    .zip(&theirs[i])
                    .map(|(o, c)| (o.0 as f64 / o.1) / (c.0 as f64 / c.1))
                    .collect();
                println!(
                    "    FUSE ceiling [{label:10}] trivial file from a {what}: {} ; b2fs warm / ceiling {:.2} (fastest passes; per round, median {:.2})",
                    rate(cb, cs),
                    (bytes as f64 / warm) / (cb as f64 / cs),
                    median(per_round)
                );
            }
        }
    }
    // 3: random 4 KiB reads.
    if part("rand") {
        let nbytes = std::fs::metadata(&f1g).map(|_| 1u64 << 30).unwrap();
        let chunk = 8u64 << 20;
        let mut st = 7u64;
        let offsets: Vec<u64> = (0..2000)
            .map(|_| (splitmix(&mut st) % ((nbytes - 4096) / 4096)) * 4096)
            .collect();
        let list = data.join("offsets.txt");
        std::fs::write(
            &list,
            offsets.iter().map(|o| format!("{o}\n")).collect::<String>(),
        )
        .unwrap();
        for (label, opts) in [("default", "ro"), ("keep_cache", "ro,keep_cache")] {
            let m = Mounted::new(&f1g, opts);
            let files: Vec<File> = m
                .chunk_files()
                .iter()
                .map(|f| File::open(f).unwrap())
                .collect();
            let mut buf = vec![0u8; 4096];
            for pass in ["cold", "warm"] {
                let t = Instant::now();
                for &o in &offsets {
                    let f = &files[(o / chunk) as usize];
                    f.read_exact_at(&mut buf, o % chunk).unwrap();
                }
                let s = t.elapsed().as_secs_f64();
                println!(
                    "rand 4 KiB x{} via mount [{label:10}] {pass} {:9.1} reads/s ({s:6.3} s)",
                    offsets.len(),
                    offsets.len() as f64 / s
                );
            }
        }
        let py = python_json(&[
            "scripts/bench_read.py",
            "rand",
            f1g.to_str().unwrap(),
            list.to_str().unwrap(),
        ]);
        for pass in ["cold", "warm"] {
            let s = py[pass]["seconds"].as_f64().unwrap();
            println!(
                "rand 4 KiB x{} python-blosc2 get_slice      {pass} {:9.1} reads/s ({s:6.3} s)",
                offsets.len(),
                offsets.len() as f64 / s
            );
        }
    }
    // 4: dd bs=1M of one large chunk file, both policies.
    if part("dd") {
        for (label, opts) in [("default", "ro"), ("keep_cache", "ro,keep_cache")] {
            let m = Mounted::new(&f1g, opts);
            let f = m.mp.join("data/00000005.bin");
            for pass in ["cold", "warm"] {
                let out = Command::new("dd")
                    .arg(format!("if={}", f.display()))
                    .args(["of=/dev/null", "bs=1M"])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stderr);
                let last = text.lines().last().unwrap_or_default().to_owned();
                println!("dd bs=1M 8 MiB chunk [{label:10}] {pass}: {last}");
            }
        }
    }
    // 5: mount time of a million-chunk frame.
    if part("mount") {
        {
            let dir = tempfile::tempdir().unwrap();
            let mp = std::fs::canonicalize(dir.path()).unwrap().join("mnt");
            std::fs::create_dir(&mp).unwrap();
            let t = Instant::now();
            let st = Command::new(env!("CARGO_BIN_EXE_b2fs"))
                .arg("mount")
                .arg(&m1m)
                .arg(&mp)
                .status()
                .unwrap();
            let mount_s = t.elapsed().as_secs_f64();
            assert!(st.success());
            let t = Instant::now();
            let n = std::fs::read_dir(mp.join("data")).unwrap().count();
            let list_s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let last = std::fs::metadata(mp.join(format!("data/{:08}.bin", n - 1))).unwrap();
            let stat_s = t.elapsed().as_secs_f64();
            println!(
                "1,000,000-chunk frame: b2fs mount returned in {mount_s:.3} s; listing {n} entries {list_s:.3} s; stat last ({} B) {:.6} s",
                last.len(),
                stat_s
            );
            let _ = Command::new(env!("CARGO_BIN_EXE_b2fs"))
                .arg("umount")
                .arg(&mp)
                .status();
        }
    }
    // 6: peak RSS while streaming 4 GiB with a 64 MiB cache.
    if part("rss") {
        {
            let m = Mounted::new(&f4g, "ro,cache_size=64M");
            let before = m.peak_rss();
            let files = m.chunk_files();
            let (bytes, secs) = read_files(&files);
            println!(
                "stream 4 GiB cache_size=64M: {} ; peak RSS {:.1} MiB (after mount {:.1} MiB)",
                rate(bytes, secs),
                m.peak_rss() as f64 / MIB,
                before as f64 / MIB
            );
        }
    }
}
