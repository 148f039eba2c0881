//! The kernel's pages of `array.npy` on real mounts (issue 25), seen through `mincore(2)` of a
//! shared mapping: plain `pread`s of page-aligned 4 KiB are not taken for page faults (no
//! pages are stored for them); a fault still gets its neighbours stored; an `open` of the file
//! by another process keeps a mapped reader's pages; and a commit of a chunk the file shows
//! still drops them at the next open (a new mapping shows the new bytes). On `-o keep_cache`
//! a fault reads its own page, not the kernel's read-around of whole rows, and gets the rows
//! below stored as with direct I/O.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use crate::support::{Mount, fuse_and_python};

const PAGE: usize = 4096;

/// A read-only shared mapping of a whole file, unmapped on drop.
struct Map {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Map {
    fn new(f: &File) -> Map {
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a fresh read-only shared mapping of a file we keep open; checked for failure.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap of array.npy");
        Map { ptr, len }
    }

    /// The byte at `at`, read through the mapping (a page fault when its page is not cached).
    fn byte(&self, at: usize) -> u8 {
        assert!(at < self.len);
        // SAFETY: `at` is inside the mapping, which lives as long as `self`.
        unsafe { std::ptr::read_volatile((self.ptr as *const u8).add(at)) }
    }

    /// Bytes `at..at + n` read through the mapping.
    fn bytes(&self, at: usize, n: usize) -> Vec<u8> {
        (at..at + n).map(|i| self.byte(i)).collect()
    }

    /// Which pages of the file are in the kernel's page cache.
    fn residency(&self) -> Vec<bool> {
        let mut vec = vec![0u8; self.len.div_ceil(PAGE)];
        // SAFETY: `vec` has one byte per page of the mapping.
        let rc = unsafe { libc::mincore(self.ptr, self.len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        vec.iter().map(|&b| b & 1 == 1).collect()
    }

    /// How many pages of the file are in the kernel's page cache.
    fn resident(&self) -> usize {
        self.residency().into_iter().filter(|&r| r).count()
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A 300 x 1100 float64 b2nd (rows of 8,800 bytes, chunks 70 x 300, blocks 20 x 120): its
/// `array.npy` holds 645 pages.
fn gen_wide(py: &Path) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, src) = crate::support::temp_path("a.b2nd");
    crate::support::oracle(py, &[&"scripts/oracle/npy_check.py", &"gen2dwide", &src]);
    (dir, src)
}

/// A 256 x 1024 float64 b2nd written by python-blosc2 (rows of two pages, chunks of 128 rows,
/// blocks of 16 rows and one page of a row): item (r, c) is (r * 1024 + c) / 2.
fn gen_tall(py: &Path) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, src) = crate::support::temp_path("a.b2nd");
    crate::support::oracle(py, &[&"scripts/oracle/npy_check.py", &"gen2dtall", &src]);
    (dir, src)
}

#[test]
fn npy_pages_tall_column_strips_through_a_map_read_the_arrays_values() {
    let py = or_skip!(fuse_and_python(
        "npy_pages_tall_column_strips_through_a_map_read_the_arrays_values",
    ));
    let (_dir, src) = gen_tall(&py);
    let m = Mount::daemon(&src, &["ro"]);
    let mapped = File::open(m.path("array.npy")).unwrap();
    let map = Map::new(&mapped);
    let hlen = map.len - 256 * 1024 * 8;
    // Every row of 64 columns at a few places (the second straddles two pages): a walk down
    // each column, its later faults with the blocks below decoded ahead.
    for c0 in [0usize, 480, 700, 960] {
        for r in 0..256usize {
            let at = hlen + (r * 1024 + c0) * 8;
            let got = map.bytes(at, 64 * 8);
            for (k, item) in got.chunks_exact(8).enumerate() {
                let want = ((r * 1024 + c0 + k) as f64) / 2.0;
                assert_eq!(
                    f64::from_le_bytes(item.try_into().unwrap()),
                    want,
                    "item ({r}, {})",
                    c0 + k
                );
            }
        }
    }
    // Rows stored ahead of the walks (as far as their blocks were decoded in time, so how
    // many depends on timing: the tree-level test checks the counts) are counted at the root.
    let count = |key: &str| -> u64 {
        let v = xattr::get(m.path(""), format!("user.b2fs.{key}"))
            .unwrap()
            .unwrap();
        String::from_utf8(v).unwrap().parse().unwrap()
    };
    count("walk_lead_pages");
    count("walk_lead_reached");
    drop((map, mapped));
    m.umount();
}

#[test]
fn npy_pages_keep_cache_faults_read_their_page_and_store_the_rows_below() {
    let py = or_skip!(fuse_and_python(
        "npy_pages_keep_cache_faults_read_their_page_and_store_the_rows_below",
    ));
    // 2 MiB of data: less than one 4 MiB read-around.
    let (_dir, src) = gen_tall(&py);
    let m = Mount::daemon(&src, &["ro", "keep_cache"]);
    let path = m.path("array.npy");
    let mapped = File::open(&path).unwrap();
    let map = Map::new(&mapped);
    let hlen = map.len - 256 * 1024 * 8;
    let pages = map.len.div_ceil(PAGE);
    assert_eq!(map.resident(), 0, "a fresh mount");
    // Item (100, 600) through the mapping: one fault.
    let at = hlen + (100 * 1024 + 600) * 8;
    let item = f64::from_le_bytes(map.bytes(at, 8).try_into().unwrap());
    assert_eq!(item, (100.0 * 1024.0 + 600.0) / 2.0);
    // The 64 rows below are stored before the answer (the answer waits for the store
    // threads, boundedly): wait for them on a loaded machine.
    let page_of = |r: usize| (hlen + (r * 1024 + 600) * 8) / PAGE;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let stored = || {
        let res = map.residency();
        (101..=164).all(|r| res[page_of(r)])
    };
    while !stored() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(stored(), "a fault on keep_cache stores the rows below it");
    let resident = map.resident();
    assert!(
        resident < pages / 4,
        "one fault read {resident} of {pages} pages: the kernel's read-around of whole rows"
    );
    // The rows below read through the mapping without asking b2fs (a fault would store the
    // rows below it) and hold the array's values.
    for r in 101..=164 {
        let at = hlen + (r * 1024 + 600) * 8;
        let got = f64::from_le_bytes(map.bytes(at, 8).try_into().unwrap());
        assert_eq!(got, (r as f64 * 1024.0 + 600.0) / 2.0, "item ({r}, 600)");
    }
    // (A fault among them would store up to 64 more rows; pages after the fault's own in
    // its row may still be landing.)
    let after = map.resident();
    assert!(
        after < resident + 8,
        "rows below the fault faulted again ({after} resident, {resident} before)"
    );
    // keep_cache: another process opening the file keeps the pages.
    open_elsewhere(&path);
    assert!(map.resident() >= resident, "an open dropped the pages");
    drop((map, mapped));
    m.umount();
}

/// Another process opens and closes `path` (reading one byte).
fn open_elsewhere(path: &Path) {
    let st = Command::new("head")
        .args(["-c", "1"])
        .arg(path)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn npy_pages_plain_reads_store_nothing_and_opens_keep_a_mapped_readers_pages() {
    let py = or_skip!(fuse_and_python(
        "npy_pages_plain_reads_store_nothing_and_opens_keep_a_mapped_readers_pages",
    ));
    let (_dir, src) = gen_wide(&py);
    let m = Mount::daemon(&src, &["ro"]);
    let path = m.path("array.npy");
    let mapped = File::open(&path).unwrap();
    let map = Map::new(&mapped);
    assert_eq!(map.resident(), 0, "a fresh mapping of a direct-I/O file");
    // Plain page-aligned 4 KiB reads (fio psync, dd bs=4k): nothing stored around them.
    let plain = File::open(&path).unwrap();
    let mut page = vec![0u8; PAGE];
    for p in [16, 17, 100, 300] {
        plain.read_exact_at(&mut page, (p * PAGE) as u64).unwrap();
    }
    assert_eq!(
        map.resident(),
        0,
        "plain reads were served as page faults (pages stored for them)"
    );
    // A page fault: its page and the neighbours its decode holds.
    let got = map.bytes(100 * PAGE, PAGE);
    plain.read_exact_at(&mut page, (100 * PAGE) as u64).unwrap();
    assert_eq!(got, page, "the mapping and read(2) agree");
    // The store thread may finish after the answer (a loaded machine): wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while map.resident() <= 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let after_fault = map.resident();
    assert!(
        after_fault > 1,
        "a fault stores the pages near it ({after_fault} resident)"
    );
    // Another process opening the file (np.load(mmap_mode='r') in a worker) keeps them.
    open_elsewhere(&path);
    drop(plain);
    let _again = File::open(&path).unwrap();
    assert!(
        map.resident() >= after_fault,
        "an open dropped a mapped reader's pages ({} of {after_fault} left)",
        map.resident()
    );
    drop((map, mapped, _again));
    m.umount();
}

#[test]
fn npy_pages_a_commit_still_drops_the_pages_of_what_changed() {
    let py = or_skip!(fuse_and_python(
        "npy_pages_a_commit_still_drops_the_pages_of_what_changed"
    ));
    let (_dir, src) = gen_wide(&py);
    let m = Mount::daemon(&src, &[]);
    let path = m.path("array.npy");
    let mapped = File::open(&path).unwrap();
    let map = Map::new(&mapped);
    // NPY 1.0: magic, version, a little-endian u16 header length, the header.
    let mut head = vec![0u8; 10];
    mapped.read_exact_at(&mut head, 0).unwrap();
    let hlen = 10 + usize::from(u16::from_le_bytes([head[8], head[9]]));
    assert_eq!(hlen % PAGE, 0, "the data part starts on a page");
    // Item (0, 0) (0.0) and item (0, 1) of chunk 1 (column 300: 75.0) through the mapping.
    let first = |map: &Map| f64::from_le_bytes(map.bytes(hlen, 8).try_into().unwrap());
    let col300 = hlen + 300 * 8;
    let other = |map: &Map| f64::from_le_bytes(map.bytes(col300, 8).try_into().unwrap());
    assert_eq!(first(&map), 0.0);
    assert_eq!(other(&map), 75.0);
    let cached = map.resident();
    assert!(cached >= 1);
    // An open with nothing changed keeps them.
    open_elsewhere(&path);
    assert!(map.resident() >= cached, "an open dropped unchanged pages");
    // Item (0, 0) changed through chunk file 0 and committed at its close.
    {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(m.path("data/00000000.bin"))
            .unwrap();
        f.write_all_at(&42.5f64.to_le_bytes(), 0).unwrap();
    }
    // The next open of array.npy drops its pages (the mapping's own descriptor still reads
    // the version it opened); a new mapping shows the commit.
    open_elsewhere(&path);
    assert_eq!(
        map.resident(),
        0,
        "an open after a commit kept the file's pages"
    );
    let fresh = File::open(&path).unwrap();
    let new = Map::new(&fresh);
    assert_eq!(first(&new), 42.5);
    assert_eq!(other(&new), 75.0);
    drop((new, fresh, map, mapped));
    m.umount();
}

/// The sha256 of the data part (from `hlen` on) of `map`, read in file order as a sum reads
/// it (one byte per 512 touched first, so the reader faults page by page in order).
fn scan_sha(map: &Map, hlen: usize) -> String {
    use sha2::Digest;
    let mut order = 0u64;
    for at in (hlen..map.len).step_by(512) {
        order = order.wrapping_add(u64::from(map.byte(at)));
    }
    assert!(order > 0);
    let all = map.bytes(hlen, map.len - hlen);
    format!("{:x}", sha2::Sha256::digest(&all))
}

#[test]
fn npy_pages_a_mapped_scan_reads_python_blosc2s_bytes_and_a_source_change_still_shows() {
    let py = or_skip!(fuse_and_python(
        "npy_pages_a_mapped_scan_reads_python_blosc2s_bytes_and_a_source_change_still_shows"
    ));
    // 1024 x 2048 float64 (16 MiB), chunks 256 x 512, blocks 16 x 512.
    let (_dir, src) = crate::support::temp_path("a.b2nd");
    let generate = |seed: &str| {
        crate::support::oracle(
            &py,
            &[&"scripts/oracle/npy_check.py", &"gen2dscan", &src, &seed],
        );
        crate::support::oracle_says(&py, &[&"scripts/oracle/npy_check.py", &"sha", &src])
    };
    let want = generate("1");
    let m = Mount::daemon(&src, &["ro"]);
    let path = m.path("array.npy");
    let mapped = File::open(&path).unwrap();
    let map = Map::new(&mapped);
    let hlen = map.len - 1024 * 2048 * 8;
    assert_eq!(
        scan_sha(&map, hlen),
        want,
        "a mapped scan reads python-blosc2's bytes"
    );
    // The pages the scan was offered are cached.
    assert!(
        map.resident() * 2 > map.len / PAGE,
        "the scan's pages are cached"
    );
    drop((map, mapped));
    // Another writer rewrites the source: a new open and mapping show the new bytes (the
    // follower checks the source every second), however many pages the scan left cached.
    let changed = generate("2");
    assert_ne!(changed, want);
    let fresh = || {
        let f = File::open(&path).unwrap();
        let map = Map::new(&f);
        scan_sha(&map, hlen)
    };
    assert!(
        crate::support::wait_until(std::time::Duration::from_secs(20), || fresh() == changed),
        "a mapped scan after the source changed still read the old bytes"
    );
    m.umount();
}

#[test]
fn npy_pages_a_source_changed_under_faulting_readers_leaves_no_page_of_the_old_version() {
    let py = or_skip!(fuse_and_python(
        "npy_pages_a_source_changed_under_faulting_readers_leaves_no_page_of_the_old_version"
    ));
    // 1024 x 2048 float64 (rows of 4 pages), chunks 256 x 512, blocks 16 x 512.
    // Each version is written beside the source and renamed over it (descriptors opened
    // before keep reading the old file; one rewritten in place fails their reads with EIO).
    let (dir, src) = crate::support::temp_path("a.b2nd");
    let generate = |seed: &str| {
        let next = dir.path().join("next.b2nd");
        crate::support::oracle(
            &py,
            &[&"scripts/oracle/npy_check.py", &"gen2dscan", &next, &seed],
        );
        std::fs::rename(&next, &src).unwrap();
        crate::support::oracle_says(&py, &[&"scripts/oracle/npy_check.py", &"sha", &src])
    };
    generate("1");
    // On `-o keep_cache` (a mapping of a direct-I/O file drops the file's pages, which would
    // hide a stale page from the fresh mapping below).
    let m = Mount::daemon(&src, &["ro", "keep_cache"]);
    let path = m.path("array.npy");
    // Readers of 64 x 64 windows through maps of their own, opened again and again, so
    // that faults (and the rows stored below them) are in flight when the source changes.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2u64)
        .map(|k| {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ k;
                let mut next = |n: u64| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state % n
                };
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let f = File::open(&path).unwrap();
                    let map = Map::new(&f);
                    let hlen = map.len - 1024 * 2048 * 8;
                    for _ in 0..16 {
                        let (r, c) = (next(1024 - 64), next(2048 - 64));
                        for row in r..r + 64 {
                            map.byte(hlen + (row as usize * 2048 + c as usize) * 8);
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let changed = generate("2");
    // The follower notices within a second; the readers go on faulting meanwhile.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    readers.into_iter().for_each(|r| r.join().unwrap());
    // A new open and mapping read the new version in full: no page the kernel caches holds
    // the old one (a page stored from the old version after the invalidation would stay).
    let fresh = || {
        let f = File::open(&path).unwrap();
        let map = Map::new(&f);
        let hlen = map.len - 1024 * 2048 * 8;
        scan_sha(&map, hlen)
    };
    assert!(
        crate::support::wait_until(std::time::Duration::from_secs(10), || fresh() == changed),
        "after a source change, a new mapping still read pages of the old version"
    );
    m.umount();
}
