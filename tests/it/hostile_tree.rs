//! Hostile sizes through the filesystem API ([`Tree`]) and a real mount, not only the
//! container layer (`hostile.rs`): what `ls`, `stat`, `cat` and `statfs` do with a frame of
//! 2 GiB chunks, a carray of 2^60 rows, and the sources whose open is refused. Every
//! operation must end (data or an error, EIO for what cannot be read) within
//! [`TIME_BOUND`], with the heap of the calling thread peaking under the cache budget plus
//! [`HEAP_BOUND`] (the tree runs without prefetch or decode threads here, so every allocation
//! of a read happens on the thread that measures it), and a mount's resident set must stay
//! under its cache budget plus a constant.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use b2fs::tree::{ReaderOptions, Tree, TreeOptions};

use crate::hostile::{CHUNKSIZE_AT, HEAP_BOUND, NBYTES_AT, TIME_BOUND, measure, patched};
use crate::support::copy_tree;
use crate::support::frames::{ZEROS, build_frame, memcpyed, small_frame};
use crate::support::{data_dir, fuse, is_mounted};

/// The cache budget of the trees and the mount of these tests.
const CACHE: usize = 16 << 20;
/// The largest chunk a Blosc2 chunk header can declare (`BLOSC2_MAX_BUFFERSIZE`).
const BLOSC_MAX: i32 = i32::MAX - 32;

/// A tree of `src` that does everything on the calling thread, with a [`CACHE`] budget.
fn options() -> TreeOptions {
    TreeOptions {
        reader: ReaderOptions {
            cache_size: CACHE,
            prefetch_chunks: 0,
            prefetch_threads: 0,
            decode_threads: 1,
            ..ReaderOptions::default()
        },
        ..TreeOptions::default()
    }
}

/// `f` within the cache budget plus [`HEAP_BOUND`] and within [`TIME_BOUND`].
#[track_caller]
fn within_budget<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let (r, peak, took) = measure(f);
    eprintln!("{what}: peak heap {peak} bytes, {took:?}");
    assert!(
        peak < CACHE + HEAP_BOUND,
        "{what}: peak heap {peak} bytes >= the cache budget {CACHE} + {HEAP_BOUND}"
    );
    assert!(took < TIME_BOUND, "{what}: took {took:?}");
    r
}

use crate::support::tree_ino as ino;

/// A frame of four special zero chunks of the Blosc maximum (2 GiB - 33 bytes) each: 8 GiB of
/// zeros in a few hundred bytes, every size consistent (a source b2fs must serve).
fn zero_chunks_frame() -> Vec<u8> {
    build_frame(
        1,
        BLOSC_MAX,
        4 * i64::from(BLOSC_MAX),
        &[],
        &[ZEROS; 4],
        &[],
        &[],
    )
}

fn write_frame(dir: &Path, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join("hostile.b2frame");
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Reads `len` bytes at `offset` of `ino` through a new handle in `step`-byte reads, as `dd`
/// would (the second read on is sequential: the plan that decodes whole chunks).
fn read_span(t: &Tree, ino: u64, offset: u64, len: u64, step: u32) -> Result<Vec<u8>, i32> {
    let fh = t.open(ino, libc::O_RDONLY).map_err(|e| e.errno())?;
    let mut out = Vec::new();
    let res = loop {
        if out.len() as u64 >= len {
            break Ok(());
        }
        match t.read(ino, fh, offset + out.len() as u64, step) {
            Ok(d) if d.is_empty() => break Ok(()),
            Ok(d) => out.extend_from_slice(&d),
            Err(e) => break Err(e.errno()),
        }
    };
    t.release(fh).unwrap();
    res.map(|()| out)
}

#[test]
fn hostile_tree_chunks_of_2_gib_read_within_the_cache_budget() {
    let dir = tempfile::tempdir().unwrap();
    let src = write_frame(dir.path(), &zero_chunks_frame());
    let t = within_budget("2 GiB chunks: tree", || {
        Tree::from_source(&src, options()).unwrap()
    });
    let chunk = ino(&t, "data/00000000.bin");
    assert_eq!(t.getattr(chunk).unwrap().size, BLOSC_MAX as u64);
    // The start, a scan of 4 MiB (whole-chunk reads in the plan), the end, and again.
    for (what, offset) in [
        ("2 GiB chunks: chunk 0 from 0", 0),
        ("2 GiB chunks: chunk 0 at 1 GiB", 1 << 30),
        (
            "2 GiB chunks: chunk 0 to its end",
            BLOSC_MAX as u64 - (1 << 20),
        ),
        ("2 GiB chunks: chunk 0 from 0 again", 0),
    ] {
        let got = within_budget(what, || read_span(&t, chunk, offset, 4 << 20, 128 << 10));
        let got = got.unwrap_or_else(|e| panic!("{what}: errno {e}"));
        assert!(got.len() >= 1 << 20, "{what}: {} bytes", got.len());
        assert!(got.iter().all(|&b| b == 0), "{what}: not zeros");
    }
    let npy = ino(&t, "array.npy");
    let size = t.getattr(npy).unwrap().size;
    assert!(size > 4 * BLOSC_MAX as u64, "array.npy of {size} bytes");
    for (what, offset) in [
        ("2 GiB chunks: array.npy from 0", 0),
        (
            "2 GiB chunks: array.npy across chunks 1-2",
            2 * BLOSC_MAX as u64 - (2 << 20),
        ),
    ] {
        let got = within_budget(what, || read_span(&t, npy, offset, 4 << 20, 1 << 20));
        let got = got.unwrap_or_else(|e| panic!("{what}: errno {e}"));
        assert_eq!(got.len(), 4 << 20, "{what}");
    }
    let st = within_budget("2 GiB chunks: statfs", || t.statfs());
    assert!(st.blocks * u64::from(st.bsize) >= 4 * BLOSC_MAX as u64);
}

#[test]
fn hostile_tree_chunksize_of_2_gib_with_40_byte_chunks_is_eio() {
    // The frame declares chunks of i32::MAX bytes; the stored chunks decode to 40 bytes: a
    // read of the chunk file or array.npy is EIO, without a buffer of the declared size.
    let (f, _) = small_frame();
    let m = patched(&f, CHUNKSIZE_AT, &i32::MAX.to_be_bytes());
    let m = patched(&m, NBYTES_AT, &(4 * i64::from(i32::MAX)).to_be_bytes());
    let dir = tempfile::tempdir().unwrap();
    let src = write_frame(dir.path(), &m);
    let t = within_budget("declared 2 GiB: tree", || {
        Tree::from_source(&src, options()).unwrap()
    });
    for path in ["data/00000000.bin", "data/00000002.bin", "array.npy"] {
        let i = ino(&t, path);
        for offset in [0, 1 << 30] {
            let what = format!("declared 2 GiB: {path} at {offset}");
            let r = within_budget(&what, || read_span(&t, i, offset, 1 << 20, 128 << 10));
            // EIO, or (a small read's range decode) no more than the 40 bytes the chunk holds.
            match r {
                Ok(b) => assert!(b.len() <= 40 || path == "array.npy", "{what}: {}", b.len()),
                Err(e) => assert_eq!(e, libc::EIO, "{what}"),
            }
        }
    }
    // The special zero chunk (chunk 1) would be i32::MAX bytes of zeros: over the largest
    // chunk Blosc allows (2^31 - 33), so the decoder refuses it (EIO) rather than serving it.
    let zeros = ino(&t, "data/00000001.bin");
    let r = within_budget("declared 2 GiB: zero chunk", || {
        read_span(&t, zeros, 0, 2 << 20, 128 << 10)
    });
    assert_eq!(r.err(), Some(libc::EIO));
}

#[test]
fn hostile_tree_bcolz_of_2_pow_60_rows_lists_stats_and_fails_reads_in_bounds() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("carray");
    copy_tree(&data_dir().join("bcolz/carray_i4_leftover"), &d);
    std::fs::write(
        d.join("meta/sizes"),
        "{\"shape\": [1152921504606846976], \"nbytes\": 1, \"cbytes\": 1}",
    )
    .unwrap();
    let t = within_budget("2^60 rows: tree", || {
        Tree::from_source(&d, options()).unwrap()
    });
    let nchunks = (1u64 << 60).div_ceil(10);
    let data = ino(&t, "data");
    // The listing is positional: its end is reached without walking 10^17 entries.
    let tail: Vec<String> = within_budget("2^60 rows: readdir at the end", || {
        t.readdir(data, nchunks - 1)
            .unwrap()
            .map(|e| e.name)
            .collect()
    });
    assert_eq!(tail.len(), 3, "{tail:?}");
    let last = tail.last().unwrap().clone();
    let last_ino = within_budget("2^60 rows: lookup of the last chunk", || {
        t.lookup(data, &last).unwrap().ino
    });
    let r = within_budget("2^60 rows: read of the last chunk", || {
        read_span(&t, last_ino, 0, 40, 40)
    });
    assert_eq!(r.err(), Some(libc::EIO));
    let first = within_budget("2^60 rows: read of chunk 0", || {
        read_span(&t, ino(&t, "data/00000000.bin"), 0, 40, 40)
    });
    assert_eq!(first.unwrap().len(), 40);
    let npy = ino(&t, "array.npy");
    assert!(t.getattr(npy).unwrap().size > 4 << 60);
    let r = within_budget("2^60 rows: array.npy past the stored chunks", || {
        read_span(&t, npy, 1 << 40, 1 << 20, 128 << 10)
    });
    assert_eq!(r.err(), Some(libc::EIO));
    let st = within_budget("2^60 rows: statfs", || t.statfs());
    assert!(st.files >= nchunks, "{st:?}");
}

#[test]
fn hostile_tree_refused_sources_are_clear_errors_in_bounds() {
    let (f, _) = small_frame();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "nbytes 2^63-1",
            patched(&f, NBYTES_AT, &i64::MAX.to_be_bytes()),
        ),
        (
            "2^40 index entries",
            build_frame(1, 1, 1 << 40, &memcpyed(&[7], 1), &[0], &[], &[]),
        ),
    ];
    for (what, bytes) in cases {
        let dir = tempfile::tempdir().unwrap();
        let src = write_frame(dir.path(), &bytes);
        let r = within_budget(what, || Tree::from_source(&src, options()));
        let e = r.err().unwrap_or_else(|| panic!("{what}: opened"));
        assert!(
            e.to_string().contains("hostile.b2frame"),
            "{what}: no path in {e}"
        );
    }
}

/// The peak resident set of process `pid` (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn hostile_mount_of_2_gib_chunks_keeps_rss_under_the_cache_budget() {
    or_skip!(fuse(
        "hostile_mount_of_2_gib_chunks_keeps_rss_under_the_cache_budget"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = write_frame(dir.path(), &zero_chunks_frame());
    let mp = dir.path().join("mnt");
    std::fs::create_dir(&mp).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_b2fs"))
        .args(["mount", "-f", "-o", &format!("cache_size={CACHE}")])
        .arg(&src)
        .arg(&mp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !is_mounted(&mp) {
        assert!(Instant::now() < deadline, "mount did not come up");
        std::thread::sleep(Duration::from_millis(10));
    }
    let base = peak_rss(child.id());
    // `ls -l`, statfs, and 16 MiB of every chunk file and of array.npy, read as `cat` does.
    let t = Instant::now();
    let names: Vec<_> = std::fs::read_dir(mp.join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(names.len(), 4);
    let mut files = names.clone();
    files.push(mp.join("array.npy"));
    let mut buf = vec![0u8; 1 << 20];
    for p in &files {
        assert!(std::fs::metadata(p).unwrap().len() >= BLOSC_MAX as u64);
        let mut f = std::fs::File::open(p).unwrap();
        for i in 0..16 {
            f.read_exact(&mut buf).unwrap();
            // (array.npy's first MiB starts with its header.)
            let data = if i == 0 && p.ends_with("array.npy") {
                &buf[4096..]
            } else {
                &buf[..]
            };
            assert!(data.iter().all(|&b| b == 0), "{}", p.display());
        }
    }
    let df = Command::new("df").arg(&mp).output().unwrap();
    assert!(df.status.success());
    let peak = peak_rss(child.id());
    let took = t.elapsed();
    let _ = Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(&mp)
        .output();
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("mount of 2 GiB chunks: VmHWM {base} after mount, {peak} after reads ({took:?})");
    assert!(
        peak < (CACHE + (64 << 20)) as u64,
        "daemon peak RSS {peak} bytes over the cache budget {CACHE} + 64 MiB"
    );
    assert!(took < Duration::from_secs(60), "reads took {took:?}");
}

#[test]
fn hostile_tree_ctable_columns_of_2_pow_62_chunks_is_refused() {
    // Three int8 columns of 2^62 one-row chunks each: 3 * 2^62 chunk files, more than the
    // inode numbers below the scratch files (2^62). Before this was refused, the table opened
    // and the chunk files of every column after the first could not be looked up.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("ct");
    copy_tree(&data_dir().join("bcolz/ctable_3cols"), &d);
    for col in ["id", "val", "name"] {
        let storage = d.join(col).join("meta/storage");
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&storage).unwrap()).unwrap();
        v["chunklen"] = 1.into();
        v["dtype"] = "int8".into();
        v["dflt"] = 0.into();
        std::fs::write(&storage, v.to_string()).unwrap();
        std::fs::write(
            d.join(col).join("meta/sizes"),
            "{\"shape\": [4611686018427387904], \"nbytes\": 1, \"cbytes\": 1}",
        )
        .unwrap();
    }
    let r = within_budget("3 x 2^62 chunks: tree", || Tree::from_source(&d, options()));
    let e = r.expect_err("a table of 3 x 2^62 chunk files opened");
    let msg = e.to_string();
    assert!(
        msg.contains("ct") && msg.contains("more chunk files than b2fs can number"),
        "{msg}"
    );
    // One such column alone is numbered (2^62 - 1 chunks would be; 2^62 is one too many).
    let tmp = tempfile::tempdir().unwrap();
    let c = tmp.path().join("carray");
    copy_tree(&d.join("id"), &c);
    std::fs::write(
        c.join("meta/sizes"),
        "{\"shape\": [4611686018427387000], \"nbytes\": 1, \"cbytes\": 1}",
    )
    .unwrap();
    let t = within_budget("2^62 - 904 chunks: tree", || {
        Tree::from_source(&c, options()).unwrap()
    });
    let data = ino(&t, "data");
    let last = t
        .readdir(data, 4611686018427387000 + 1)
        .unwrap()
        .next()
        .unwrap();
    assert_eq!(t.lookup(data, &last.name).unwrap().ino, last.ino);
}
