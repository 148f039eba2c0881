//! Page faults of `array.npy` through the tree API (as the fuse adapter calls it): the pages
//! offered after a fault hold the file's bytes (windows of the decoded blocks, not copies),
//! the blocks below a fault and ahead of a walk down a column are decoded once, a walk's
//! next rows are offered ahead until it stops, and a mapped scan steps a range at a time.

use super::*;

#[test]
fn npy_tree_pages_offered_after_a_page_fault_hold_the_file_bytes() {
    let py = or_skip!(support::python(
        "npy_tree_pages_offered_after_a_page_fault_hold_the_file_bytes"
    ));
    let (_dir, src, npy, whole) = wide(&py);
    // A fresh tree: nothing cached but what the fault decodes.
    let t = Tree::from_source(&src, opts(false)).unwrap();
    let fh = t.open(npy, libc::O_RDONLY).unwrap();
    let row = 1100 * 8;
    let mut below = 0;
    for fault in [16 * 4096u64, 100 * 4096, 5 * 4096 + 4096 * 64] {
        let got = t.read(npy, fh, fault, 4096).unwrap().to_vec();
        assert_eq!(got, whole[fault as usize..fault as usize + 4096]);
        let (pages, _) = t.pages_near(npy, fh, fault, 4096);
        assert!(!pages.is_empty(), "the fault's block holds more pages");
        for (at, bytes) in &pages {
            assert_eq!(at % 4096, 0);
            let at = *at as usize;
            let bytes = bytes.to_vec(0..bytes.len());
            assert_eq!(bytes[..], whole[at..at + bytes.len()], "page at {at}");
            below += usize::from(at as u64 >= fault + row);
        }
    }
    assert!(below > 0, "pages of the rows below are offered");
    // Not after reads that are no page faults, nor on a read-write tree.
    assert!(t.pages_near(npy, fh, 4097, 4096).0.is_empty());
    let w = Tree::from_source(&src, opts(true)).unwrap();
    let wfh = w.open(npy, libc::O_RDONLY).unwrap();
    w.read(npy, wfh, 16 * 4096, 4096).unwrap();
    assert!(w.pages_near(npy, wfh, 16 * 4096, 4096).0.is_empty());
}

#[test]
fn npy_tree_fault_ahead_blocks_decode_once_and_pages_hold_the_file_bytes() {
    let py = or_skip!(support::python(
        "npy_tree_fault_ahead_blocks_decode_once_and_pages_hold_the_file_bytes"
    ));
    let (_dir, src, npy, whole) = wide(&py);
    // With prefetch threads: the blocks below a fault decode on them, beside the fault's.
    let with_prefetch = TreeOptions {
        reader: ReaderOptions {
            prefetch_chunks: 4,
            ..opts(false).reader
        },
        ..opts(false)
    };
    let with_prefetch_rw = || TreeOptions {
        reader: ReaderOptions {
            prefetch_chunks: 4,
            ..opts(true).reader
        },
        ..opts(true)
    };
    let t = Tree::from_source(&src, with_prefetch).unwrap();
    let fh = t.open(npy, libc::O_RDONLY).unwrap();
    for fault in [16 * 4096u64, 100 * 4096, 400 * 4096] {
        t.fault_ahead(npy, fault, 4096);
        let got = t.read(npy, fh, fault, 4096).unwrap().to_vec();
        assert_eq!(got, whole[fault as usize..fault as usize + 4096]);
        let (pages, _) = t.pages_near(npy, fh, fault, 4096);
        assert!(pages.len() > 1, "pages below the fault at {fault}");
        for (at, bytes) in &pages {
            let at = *at as usize;
            let bytes = bytes.to_vec(0..bytes.len());
            assert_eq!(bytes[..], whole[at..at + bytes.len()], "page at {at}");
        }
    }
    assert!(t.block_cache_stats().loads > 0);
    // Nothing is asked for on a read-write tree (its pages are never offered), while the
    // same call on a read-only tree, made after it, decodes below the fault without any read:
    // once that has happened the read-write tree had as long to do the same.
    let w = Tree::from_source(&src, with_prefetch_rw()).unwrap();
    let r = Tree::from_source(&src, with_prefetch).unwrap();
    w.fault_ahead(npy, 16 * 4096, 4096);
    r.fault_ahead(npy, 16 * 4096, 4096);
    assert!(
        support::wait_until(Duration::from_secs(10), || r.block_cache_stats().loads > 0),
        "no block decoded ahead"
    );
    assert_eq!(w.block_cache_stats().loads, 0);
}

#[test]
fn npy_tree_a_walk_down_a_column_gets_its_next_blocks_decoded_ahead() {
    let py = or_skip!(support::python(
        "npy_tree_a_walk_down_a_column_gets_its_next_blocks_decoded_ahead"
    ));
    // 256 x 1024 float64, blocks of 16 rows and one page of a row: a fault's own block and the
    // four below it hold all the 64 rows of pages it offers.
    let (_dir, src, whole) = generated_npy(&py, "gen2dtall");
    // A fresh tree: nothing cached but what the faults decode.
    let t = prefetching_tree(&src);
    let npy = ino(&t, "array.npy");
    // The page of row `r` at byte `col` of the row (8,192 bytes) as a mapped reader faults on
    // it: the data part starts on a page.
    let hlen = whole.len() as u64 - 256 * 8192;
    assert_eq!(hlen % 4096, 0);
    let page = |r: u64, col: u64| hlen + r * 8192 + col / 4096 * 4096;
    let fault = |at: u64| {
        // A handle per fault: the pages offered count as read by it, and the reads of one
        // handle could grow into a scan that decodes whole chunks ahead.
        let fh = t.open(npy, libc::O_RDONLY).unwrap();
        let walking = t.fault_ahead(npy, at, 4096);
        let got = t.read(npy, fh, at, 4096).unwrap().to_vec();
        assert_eq!(got, whole[at as usize..at as usize + 4096], "fault at {at}");
        for (p, bytes) in t.pages_near(npy, fh, at, 4096).0 {
            let bytes = bytes.to_vec(0..bytes.len());
            assert_eq!(
                bytes[..],
                whole[p as usize..p as usize + bytes.len()],
                "page at {p}"
            );
        }
        t.release(fh).unwrap();
        walking
    };
    // A 64-row window faults once; one of 130 rows twice down its column: no walk.
    assert!(!fault(page(10, 5000)));
    assert!(!fault(page(75, 5000)));
    // Another column (blocks of 16 rows: block k holds rows 16k..16k+15 of it): each fault at
    // most 65 rows below the one before. From the third on the reader walks, and each walking
    // fault asks at once for the blocks of the walk's next two faults (the fault 65 rows below
    // and its 64 rows of pages, and the same below those), skipping blocks cached or being
    // decoded. Block by block (the window's loads above are not counted):
    // - row 0: its own block 0 and the four below its pages (rows 1-64): 0, 1, 2, 3, 4;
    // - row 20: rows 21-84: block 5;
    // - row 53, walking: rows 54-117: 6, 7; ahead rows 118-182: 8, 9, 10, 11, and rows
    //   183-247: 12, 13, 14, 15 (the column's last block: the array has 256 rows).
    let before = t.block_cache_stats().loads;
    assert!(!fault(page(0, 100)));
    assert!(!fault(page(20, 100)));
    assert!(fault(page(53, 100)));
    // The prefetch queue drops requests while it is full (they are advice; the faults above
    // may have filled it): asked again until taken. A block asked for while it is being
    // decoded or cached is not asked for twice.
    let ahead = |at: u64, loads: u64| {
        assert!(
            support::wait_until(Duration::from_secs(10), || {
                t.walk_ahead(npy, at, 4096);
                t.block_cache_stats().loads >= before + loads
            }),
            "the blocks of the walk's next fault were not decoded ahead ({} loads)",
            t.block_cache_stats().loads - before
        );
        assert_eq!(
            t.block_cache_stats().loads - before,
            loads,
            "each block decoded once, none beyond the walk's next fault"
        );
    };
    ahead(page(53, 100), 16);
    // The next fault finds its own block and the blocks of its pages (rows 67-130: 4-8)
    // decoded, and those of its next two faults asked for: it decodes no block again.
    assert!(fault(page(66, 100)), "the walk goes on");
    ahead(page(66, 100), 16);
    // Rows further below than a fault's pages reach start a new walk.
    assert!(!fault(page(200, 100)));
}

#[test]
fn npy_tree_a_walk_gets_its_next_rows_offered_ahead_until_it_stops() {
    let py = or_skip!(support::python(
        "npy_tree_a_walk_gets_its_next_rows_offered_ahead_until_it_stops"
    ));
    // 256 x 1024 float64: rows of two pages, blocks of 16 rows.
    let (_dir, src, whole) = generated_npy(&py, "gen2dtall");
    let hlen = whole.len() as u64 - 256 * 8192;
    let page = |r: u64, half: u64| hlen + r * 8192 + half * 4096;
    let check = |pages: &[(u64, b2fs::tree::Pieces)]| {
        for (p, bytes) in pages {
            let got = bytes.to_vec(0..bytes.len());
            assert_eq!(
                got[..],
                whole[*p as usize..*p as usize + got.len()],
                "page {p}"
            );
        }
    };
    let open = |writable: bool| Tree::from_source(&src, opts(writable)).unwrap();
    // A page fault as the FUSE adapter serves it: the rows below, then those ahead.
    let fault_in = |t: &Tree, at: u64| {
        let npy = ino(t, "array.npy");
        let fh = t.open(npy, libc::O_RDONLY).unwrap();
        let walking = t.fault_ahead(npy, at, 4096);
        let got = t.read(npy, fh, at, 4096).unwrap().to_vec();
        assert_eq!(got, whole[at as usize..at as usize + 4096], "fault at {at}");
        let (below, _) = t.pages_near(npy, fh, at, 4096);
        check(&below);
        let ahead = t.walk_lead(npy, at, 4096);
        check(&ahead);
        t.release(fh).unwrap();
        (walking, below, ahead)
    };
    let t = open(false);
    let fault = |at: u64| fault_in(&t, at);
    // The rows ahead are offered as far as their blocks are decoded (by the prefetch threads,
    // asked two faults ahead): decode those of rows 192-255 here, by reads that are no faults.
    let fh = t.open(ino(&t, "array.npy"), libc::O_RDONLY).unwrap();
    for r in 192..256 {
        for half in [0, 1] {
            t.read(ino(&t, "array.npy"), fh, page(r, half), 4096)
                .unwrap();
        }
    }
    t.release(fh).unwrap();
    let offsets =
        |pages: &[(u64, b2fs::tree::Pieces)]| pages.iter().map(|p| p.0).collect::<Vec<_>>();
    // A strip down the first page of each row: its first two faults offer the 64 rows below
    // them and nothing ahead.
    for r in [0, 65] {
        let (walking, below, ahead) = fault(page(r, 0));
        assert!(!walking && ahead.is_empty(), "row {r}: no walk yet");
        assert!(offsets(&below).contains(&page(r + 64, 0)));
    }
    // The third walks: the rows below it (131-194), then ahead, the rows below the page
    // where its next fault is expected (row 195), that page left out: 196-255.
    let (walking, below, ahead) = fault(page(130, 0));
    assert!(walking);
    assert!(offsets(&below).contains(&page(194, 0)));
    assert_eq!(
        offsets(&ahead),
        (196..256).map(|r| page(r, 0)).collect::<Vec<_>>()
    );
    assert_eq!(
        t.walk_leads(),
        b2fs::tree::Leads {
            pages: 60,
            reached: 0
        }
    );
    // The next fault comes there: the rows below it are offered already (none again), and
    // past the array's end there is nothing ahead.
    let (walking, below, ahead) = fault(page(195, 0));
    assert!(walking);
    assert!(
        below.iter().all(|(p, _)| *p < page(196, 0)),
        "rows offered twice"
    );
    assert!(ahead.is_empty());
    assert_eq!(
        t.walk_leads(),
        b2fs::tree::Leads {
            pages: 60,
            reached: 60
        }
    );
    // A walk down the other page of the rows that stops: its third fault offers its rows
    // ahead, then the reader faults elsewhere, which offers nothing ahead, and the walk's
    // rows ahead stay counted as not reached.
    for r in [10, 75] {
        assert!(fault(page(r, 1)).2.is_empty());
    }
    assert_eq!(fault(page(140, 1)).2.len(), 50, "rows 206-255");
    for r in [5, 100] {
        let (walking, _, ahead) = fault(page(r, 0));
        assert!(!walking && ahead.is_empty(), "row {r}: another walk");
    }
    assert_eq!(
        t.walk_leads(),
        b2fs::tree::Leads {
            pages: 110,
            reached: 60
        }
    );
    // Nothing ahead on a read-write tree.
    let w = open(true);
    for r in [0, 65, 130] {
        assert!(fault_in(&w, page(r, 0)).2.is_empty());
    }
    assert_eq!(w.walk_leads(), b2fs::tree::Leads::default());
}

#[test]
fn npy_tree_the_pages_below_a_page_fault_are_windows_of_their_blocks() {
    let py = or_skip!(support::python(
        "npy_tree_the_pages_below_a_page_fault_are_windows_of_their_blocks"
    ));
    // 256 x 1024 float64, blocks of 16 rows and one page of a row: each page of the data
    // lies in one block.
    let (_dir, src, whole) = generated_npy(&py, "gen2dtall");
    let t = Tree::from_source(&src, opts(false)).unwrap();
    let npy = ino(&t, "array.npy");
    let hlen = whole.len() as u64 - 256 * 8192;
    let fh = t.open(npy, libc::O_RDONLY).unwrap();
    let bytes_at = |at: u64, len: usize| &whole[at as usize..at as usize + len];
    let fault = hlen + 10 * 8192;
    assert_eq!(
        t.read(npy, fh, fault, 4096).unwrap()[..],
        *bytes_at(fault, 4096)
    );
    // The pages below it (rows 11-74, in its block and the four below it) are handed over
    // as windows of those blocks, not copies.
    let (pages, _) = t.pages_near(npy, fh, fault, 4096);
    let below: Vec<_> = pages.iter().filter(|(p, _)| *p >= fault + 8192).collect();
    assert_eq!(below.len(), 64, "pages below the fault");
    for (p, bytes) in &pages {
        let got = bytes.to_vec(0..bytes.len());
        assert_eq!(got[..], *bytes_at(*p, bytes.len()), "page at {p}");
    }
    for (p, bytes) in below {
        assert!(
            matches!(bytes.as_parts(), [ReadData::Chunk(..)]),
            "page at {p} was copied"
        );
    }
}

#[test]
fn npy_tree_a_mapped_scan_steps_a_range_at_a_time_and_its_pages_hold_python_blosc2s_bytes() {
    let py = or_skip!(support::python(
        "npy_tree_a_mapped_scan_steps_a_range_at_a_time_and_its_pages_hold_python_blosc2s_bytes"
    ));
    // 1024 x 2048 float64 (16 MiB), chunks 256 x 512, blocks 16 x 512.
    mapped_scan_steps_by_ranges(&py, "gen2dscan");
}

#[test]
fn npy_tree_a_mapped_scan_of_a_1d_array_steps_a_range_at_a_time_too() {
    let py = or_skip!(support::python(
        "npy_tree_a_mapped_scan_of_a_1d_array_steps_a_range_at_a_time_too"
    ));
    // The same 16 MiB as one axis: rows shorter than a page, yet a scan in file order.
    mapped_scan_steps_by_ranges(&py, "gen1dscan");
}

/// A tree-level reader summing `array.npy` of the 16 MiB float64 array `npy_check.py MAKER`
/// makes, through a map: the pages offered hold python-blosc2's bytes, and once the reader
/// is seen scanning, a range (1 MiB) a step, each offered past the next fault's page.
fn mapped_scan_steps_by_ranges(py: &std::path::Path, maker: &str) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.b2nd");
    support::oracle(py, &[&"scripts/oracle/npy_check.py", &maker, &src, &"1"]);
    let want = support::oracle_says(py, &[&"scripts/oracle/npy_check.py", &"sha", &src]);
    let t = prefetching_tree(&src);
    let npy = ino(&t, "array.npy");
    let len = t.getattr(npy).unwrap().size as usize;
    let hlen = len - 1024 * 2048 * 8;
    assert_eq!(hlen % 4096, 0, "the data part starts on a page");
    // A reader summing the file through a map: it faults on the first page of the data not
    // in the kernel's cache (here: not offered yet), in file order.
    let fh = t.open(npy, libc::O_RDONLY).unwrap();
    let mut file = vec![0u8; len];
    let mut have = vec![false; len.div_ceil(4096)];
    let (mut faults, mut later_ranges) = (0, 0);
    let mut at = hlen as u64;
    while (at as usize) < len {
        faults += 1;
        t.fault_ahead(npy, at, 4096);
        let got = t.read(npy, fh, at, 4096).unwrap();
        file[at as usize..at as usize + got.len()].copy_from_slice(&got);
        have[at as usize / 4096] = true;
        let (now, later) = t.pages_near(npy, fh, at, 4096);
        later_ranges += later.len();
        for (p, bytes) in now.iter().chain(&later) {
            assert_eq!(p % 4096, 0);
            let p = *p as usize;
            file[p..p + bytes.len()].copy_from_slice(&bytes.to_vec(0..bytes.len()));
            (p / 4096..(p + bytes.len()).div_ceil(4096)).for_each(|k| have[k] = true);
            // Windows of the decoded blocks (one per row and block), not a copy.
            if bytes.len() >= 1 << 20 {
                assert!(
                    bytes
                        .as_parts()
                        .iter()
                        .all(|w| matches!(w, ReadData::Chunk(..))),
                    "a range of {} bytes at {p} was copied",
                    bytes.len()
                );
            }
        }
        match (at as usize / 4096..have.len()).find(|&k| !have[k]) {
            Some(k) => at = (k * 4096) as u64,
            None => break,
        }
    }
    use sha2::Digest;
    let got = format!("{:x}", sha2::Sha256::digest(&file[hlen..]));
    assert_eq!(got, want, "the pages offered are python-blosc2's bytes");
    // Once the reader is seen scanning (a few faults along the first row: how many depends
    // on the blocks the prefetch threads have decoded by then, so on the machine's load), a
    // range (1 MiB) a step, each offered past the next fault's page while the reader sums
    // the one before: at least half of the 16 (9 on a machine whose other work stopped and
    // resumed this test; none when the scan is not recognised).
    assert!(faults <= 48, "{faults} faults for 16 MiB");
    assert!(
        later_ranges >= 8,
        "{later_ranges} ranges offered after the answer"
    );
}
