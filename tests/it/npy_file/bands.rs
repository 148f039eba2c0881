//! Scans of `array.npy` through a read-only descriptor, served a band (a row of blocks) at a
//! time with the next bands decoded ahead (`src/reader/bands.rs`): the bytes equal what
//! `np.save` writes of python-blosc2's array for every geometry (edge chunks, blocks narrower
//! than a chunk, short last blocks, 3-D, 1-D), in reads aligned or not to the bands, after a
//! seek back to the start, and no whole chunk is decoded into the cache on the way; reads
//! reaching into bands too large to stream are read the other way; a corrupt chunk fails the
//! reads of its bands only, naming the chunk.

use std::path::Path;

use b2fs::container::{self, Container};

use super::{ino, prefetching_tree, read_all};
use crate::support;
use crate::verify::chunk_at;

/// Generates `maker`'s array (with `seed` when it takes one) and the `np.save` bytes of what
/// python-blosc2 reads from it.
fn made(
    py: &Path,
    maker: &str,
    seed: Option<&str>,
) -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.b2nd");
    let want = dir.path().join("want.npy");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"scripts/oracle/npy_check.py", &maker, &src];
    if let Some(seed) = &seed {
        args.push(seed);
    }
    support::oracle(py, &args);
    support::oracle(py, &[&"scripts/oracle/npy_check.py", &"save", &src, &want]);
    let bytes = std::fs::read(&want).unwrap();
    (dir, src, bytes)
}

#[test]
fn npy_tree_scans_read_band_by_band_as_numpy_saves_them() {
    let py = or_skip!(support::python(
        "npy_tree_scans_read_band_by_band_as_numpy_saves_them"
    ));
    // (maker, seed, whether every read of a scan takes bands: a 1-D array's reads inside
    // one chunk take that chunk whole, as before)
    let cases = [
        ("gen2dscan", Some("3"), true),
        ("gen2dwide", None, true),
        ("gen3dbands", None, true),
        ("gen1dscan", Some("4"), false),
        // Bands over the largest streamed (5 MiB) between small ones: reads that reach
        // from a small band into a large one go the whole-chunk way (they failed with EIO
        // when only the first band was checked).
        ("gen2dbigbands", None, false),
    ];
    for (maker, seed, all_bands) in cases {
        let (_dir, src, want) = made(&py, maker, seed);
        assert!(want.len() > 1 << 20, "{maker}: {} bytes", want.len());
        for step in [1 << 20, 700 * 1024 + 3, 512 * 1024] {
            let t = prefetching_tree(&src);
            let npy = ino(&t, "array.npy");
            let got = read_all(&t, npy, step);
            assert!(got == want, "{maker}: a scan in reads of {step}");
            if all_bands {
                assert_eq!(
                    t.cache_stats().loads,
                    0,
                    "{maker}: reads of {step} decode bands, no whole chunk"
                );
            }
        }
        // One descriptor: part of the file, then back to its start (a new scan), then
        // reads that skip ahead.
        let t = prefetching_tree(&src);
        let npy = ino(&t, "array.npy");
        let fh = t.open(npy, libc::O_RDONLY).unwrap();
        let read = |at: u64, size: u32| t.read(npy, fh, at, size).unwrap().to_vec();
        let first = read(0, 1 << 20);
        assert!(first == want[..first.len()], "{maker}: first read");
        let mut at = first.len() as u64;
        for _ in 0..2 {
            let got = read(at, 1 << 20);
            assert!(
                got == want[at as usize..at as usize + got.len()],
                "{maker}: at {at}"
            );
            at += got.len() as u64;
        }
        let mut again = Vec::new();
        while again.len() < want.len() {
            let got = read(again.len() as u64, 1 << 20);
            assert!(!got.is_empty(), "{maker}: short file");
            again.extend_from_slice(&got);
        }
        assert!(again == want, "{maker}: the scan again from the start");
        let skip = (want.len() / 3) as u64 + 12_345;
        let got = read(skip, 600 * 1024);
        assert!(
            got == want[skip as usize..skip as usize + got.len()],
            "{maker}: skip"
        );
        let got = read(skip + 600 * 1024, 600 * 1024);
        let from = skip as usize + 600 * 1024;
        assert!(
            got == want[from..from + got.len()],
            "{maker}: after the skip"
        );
        t.release(fh).unwrap();
    }
}

#[test]
fn npy_tree_scan_of_a_corrupt_chunk_fails_its_bands_and_names_it() {
    let py = or_skip!(support::python(
        "npy_tree_scan_of_a_corrupt_chunk_fails_its_bands_and_names_it"
    ));
    let (_dir, src, want) = made(&py, "gen2dscan", Some("5"));
    // gen2dscan: 4 x 4 chunks of 256 x 512 float64; chunk 6 is in the second slab (rows
    // 256..512), third column.
    let Container::Array(a) = container::open(&src).unwrap() else {
        panic!("an array")
    };
    let (at, cbytes) = chunk_at(&a, 6);
    drop(a);
    let junk: Vec<u8> = (0..cbytes / 2)
        .map(|i| 0xF0 ^ (i as u8).wrapping_mul(37))
        .collect();
    std::os::unix::fs::FileExt::write_all_at(
        &std::fs::OpenOptions::new().write(true).open(&src).unwrap(),
        &junk,
        at + cbytes / 4,
    )
    .unwrap();
    let t = prefetching_tree(&src);
    let npy = ino(&t, "array.npy");
    let fh = t.open(npy, libc::O_RDONLY).unwrap();
    let hlen = want.len() - 1024 * 2048 * 8;
    let slab = 256 * 2048 * 8;
    let mut at = 0usize;
    let err = loop {
        match t.read(npy, fh, at as u64, 1 << 20) {
            Ok(got) => {
                assert!(!got.is_empty(), "the whole file read: no error");
                assert!(got[..] == want[at..at + got.len()], "bytes at {at}");
                at += got.len();
            }
            Err(e) => break e,
        }
    };
    assert!(
        at >= hlen + slab - (1 << 20) && at < hlen + 2 * slab,
        "the first failing read ({at}) is in the slab of chunk 6"
    );
    let text = b2fs::error::display_chain(&err);
    assert!(text.contains("chunk 6"), "{text}");
    // The slab after it reads well through the same descriptor.
    let after = hlen + 2 * slab;
    let got = t.read(npy, fh, after as u64, 1 << 20).unwrap();
    assert!(got[..] == want[after..after + got.len()]);
    t.release(fh).unwrap();
}

/// The requests of one descriptor's scan arriving out of order (two threads `pread`ing one
/// descriptor, the kernel's asynchronous requests of one large read): a read behind the
/// bands held is served without dropping the bands decoded ahead of it, so every band of the
/// scan is decoded about once, as in order (each band of the read behind was dropped, and the
/// bands ahead decoded again, when such a read restarted the stream).
#[test]
fn npy_tree_a_read_behind_the_scan_keeps_the_bands_decoded_ahead() {
    let py = or_skip!(support::python(
        "npy_tree_a_read_behind_the_scan_keeps_the_bands_decoded_ahead"
    ));
    // 1024 x 2048 float64 in blocks of 16 rows: 64 bands of 256 KiB.
    let (_dir, src, want) = made(&py, "gen2dscan", Some("7"));
    let bands = 64u64;
    let t = prefetching_tree(&src);
    let npy = ino(&t, "array.npy");
    let fh = t.open(npy, libc::O_RDONLY).unwrap();
    let mib = 1u64 << 20;
    let read = |at: u64| {
        let got = t.read(npy, fh, at, mib as u32).unwrap().to_vec();
        let end = (at as usize + got.len()).min(want.len());
        assert!(got == want[at as usize..end], "bytes at {at}");
        got.len() as u64
    };
    read(0);
    read(2 * mib);
    // The bands after the second read, decoded ahead on the prefetch threads (until the
    // count settles: they take at most 8 at a time).
    let settled = || {
        let before = t.bands_decoded();
        std::thread::sleep(std::time::Duration::from_millis(300));
        t.bands_decoded() == before
    };
    assert!(
        support::wait_until(std::time::Duration::from_secs(20), settled),
        "the decodes ahead never settled ({} decoded)",
        t.bands_decoded()
    );
    // The one behind it, then the rest in order.
    read(mib);
    let mut at = 3 * mib;
    while at < want.len() as u64 {
        at += read(at);
    }
    t.release(fh).unwrap();
    let decoded = t.bands_decoded();
    assert!(
        decoded <= bands + 2,
        "{decoded} band decodes for a scan of {bands} bands"
    );
}

/// Reads into the kernel's page cache (`read_shared`: `-o keep_cache` mounts read every
/// `read(2)` that way) through a descriptor whose version another writer replaced read the
/// version now, through one band stream the descriptor keeps for it: a scan of the new
/// version decodes each band once, as a scan through a fresh descriptor does (every such
/// read made a new stream, which decoded again the band the read before had ended in).
#[test]
fn npy_tree_cache_fills_of_a_replaced_version_keep_their_band_stream() {
    let py = or_skip!(support::python(
        "npy_tree_cache_fills_of_a_replaced_version_keep_their_band_stream"
    ));
    let (dir, src, old) = made(&py, "gen2dscan", Some("7"));
    let bands = 64u64;
    let t = prefetching_tree(&src);
    let npy = ino(&t, "array.npy");
    let fh = t.open(npy, libc::O_RDONLY).unwrap();
    let mib = 1u64 << 20;
    let first = t.read(npy, fh, 0, mib as u32).unwrap().to_vec();
    assert!(first == old[..first.len()]);
    // Another writer replaces the array (same shape, other values).
    let new_path = dir.path().join("new.npy");
    support::oracle(
        &py,
        &[&"scripts/oracle/npy_check.py", &"gen2dscan", &src, &"8"],
    );
    support::oracle(
        &py,
        &[&"scripts/oracle/npy_check.py", &"save", &src, &new_path],
    );
    let new = std::fs::read(&new_path).unwrap();
    assert_eq!(new.len(), old.len());
    assert!(new != old);
    assert!(t.follow_source(), "the new version was not noticed");
    let before = t.bands_decoded();
    let mut at = first.len() as u64;
    while at < new.len() as u64 {
        let got = t.read_shared(npy, fh, at, mib as u32).unwrap().to_vec();
        assert!(!got.is_empty());
        assert!(
            got == new[at as usize..at as usize + got.len()],
            "a cache fill at {at} did not read the version now"
        );
        at += got.len() as u64;
    }
    let decoded = t.bands_decoded() - before;
    assert!(
        decoded <= bands + 1,
        "{decoded} band decodes for a scan of the {bands} bands of the new version"
    );
    // Its plain reads still read the version it opened.
    let got = t.read(npy, fh, 3 * mib, mib as u32).unwrap().to_vec();
    assert!(got == old[3 * mib as usize..4 * mib as usize]);
    t.release(fh).unwrap();
}
