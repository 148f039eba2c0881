//! python-blosc2 CTables in stores (`scripts/oracle/ctables.py gen`: `.b2z` and `.b2d`, the
//! store as the table and a table in a TreeStore group, with and without deleted rows, ten
//! column kinds, several chunks per column): the group's `table.npy` holds exactly
//! `numpy.asarray(table)` (numpy loads it with `mmap_mode='r'`: same dtype, same rows), read
//! whole and in odd windows through the tree API, and once through a real mount; writes are
//! refused (EROFS); a damaged column or mask gives EIO on `table.npy` alone; a mask with too
//! many runs gives EFBIG; another writer's edit is shown after the mount follows it. A mapped
//! scan of `table.npy` is told by its page faults and offered a range at a time, assembled
//! from the columns' blocks, and its pages are python-blosc2's rows (through the tree, and
//! slices and a scan through a kernel mount).

use std::path::{Path, PathBuf};

use b2fs::tree::{ReaderOptions, Tree, TreeOptions};
use serde_json::Value;

use crate::support::{self, Mount, fuse_and_python, oracle, oracle_says, tree_ino, tree_read};

fn ro() -> TreeOptions {
    TreeOptions {
        writable: false,
        ..TreeOptions::default()
    }
}

/// The stores python-blosc2 wrote and their manifest.
fn gen_tables(py: &Path) -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().unwrap();
    oracle(py, &[&"scripts/oracle/ctables.py", &"gen", &dir.path()]);
    let manifest = std::fs::read(dir.path().join("manifest.json")).unwrap();
    (dir, serde_json::from_slice(&manifest).unwrap())
}

/// The path of `table.npy` in the tree for a table at `group` ("" for the root).
fn table_path(group: &str) -> String {
    match group {
        "" => "table.npy".into(),
        g => format!("{g}/table.npy"),
    }
}

/// The data part of the NPY file `bytes` (after its header).
fn npy_data(bytes: &[u8]) -> &[u8] {
    let (major, hlen) = match bytes[6] {
        1 => (2, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        _ => (
            4,
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
        ),
    };
    &bytes[8 + major + hlen..]
}

/// numpy's verdict on `bytes` as the `table.npy` of the table at `group` of `store`.
fn numpy_agrees(py: &Path, bytes: &[u8], store: &Path, group: &str) -> String {
    let (_tmp, file) = support::temp_path("table.npy");
    std::fs::write(&file, bytes).unwrap();
    oracle_says(
        py,
        &[
            &"scripts/oracle/ctables.py",
            &"check",
            &file,
            &store,
            &group,
        ],
    )
}

#[test]
fn store_ctable_table_npy_is_numpy_asarray_of_the_valid_rows() {
    let py = or_skip!(support::python(
        "store_ctable_table_npy_is_numpy_asarray_of_the_valid_rows"
    ));
    let (dir, manifest) = gen_tables(&py);
    let mut checked = 0;
    for (name, m) in manifest.as_object().unwrap() {
        let src = dir.path().join(name);
        let group = m["group"].as_str().unwrap();
        let t = Tree::from_source(&src, ro()).unwrap();
        let f = tree_ino(&t, &table_path(group));
        let whole = tree_read(&t, f, 1 << 20).unwrap();
        assert_eq!(t.getattr(f).unwrap().size, whole.len() as u64, "{name}");
        assert_eq!(t.getattr(f).unwrap().perm, 0o444, "{name}");
        // numpy loads it (header, dtype, shape) and it is the table python-blosc2 reads.
        assert_eq!(numpy_agrees(&py, &whole, &src, group), "ok", "{name}");
        let want = std::fs::read(dir.path().join(format!("{name}.npy"))).unwrap();
        assert!(npy_data(&whole) == npy_data(&want), "{name}: rows differ");
        // Odd windows (across records, runs and chunks) read the same bytes.
        for step in [4099u32, 65536 + 7, 333] {
            let by_steps = tree_read(&t, f, step).unwrap();
            assert!(by_steps == whole, "{name}: reads of {step} bytes");
        }
        // The group's own subtree is still there.
        tree_ino(&t, &format!("{group}/_valid_rows/array.npy"));
        checked += 1;
    }
    assert!(checked >= 7, "{checked} tables");
}

/// `table.npy` is read-only: opens for writing and truncation are refused with EROFS, on a
/// read-write tree too.
#[test]
fn store_ctable_table_npy_refuses_writes() {
    let py = or_skip!(support::python("store_ctable_table_npy_refuses_writes"));
    let (dir, _) = gen_tables(&py);
    let src = dir.path().join("holes.b2d");
    let t = support::rw_tree(&src);
    let f = tree_ino(&t, "table.npy");
    for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_WRONLY | libc::O_TRUNC] {
        let e = t.open(f, flags).unwrap_err();
        assert_eq!(e.errno(), libc::EROFS, "flags {flags:#x}: {e}");
    }
    let e = t.set_size(f, 0).unwrap_err();
    assert_eq!(e.errno(), libc::EROFS, "{e}");
    // Still readable, and the store unchanged for python-blosc2.
    let whole = tree_read(&t, f, 1 << 20).unwrap();
    assert_eq!(numpy_agrees(&py, &whole, &src, ""), "ok");
}

/// The offset of the first chunk of the frame file `path` in it.
fn first_chunk_offset(path: &Path) -> usize {
    let b2fs::container::Container::Array(a) = b2fs::container::open(path).unwrap() else {
        panic!("{}: not an array", path.display());
    };
    let chunk = a.chunk_bytes(0).unwrap().into_owned();
    let file = std::fs::read(path).unwrap();
    file.windows(chunk.len())
        .position(|w| w == chunk.as_slice())
        .expect("chunk 0 in its file")
}

/// Overwrites the first block start of chunk 0 of frame file `path` (after its 32-byte
/// header) with a value past any chunk: the chunk no longer decodes.
fn break_first_chunk(path: &Path) {
    let at = first_chunk_offset(path) + 32;
    let mut file = std::fs::read(path).unwrap();
    file[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(path, file).unwrap();
}

#[test]
fn store_ctable_a_damaged_column_or_mask_gives_eio_on_table_npy_alone() {
    let py = or_skip!(support::python(
        "store_ctable_a_damaged_column_or_mask_gives_eio_on_table_npy_alone"
    ));
    let (dir, _) = gen_tables(&py);
    // A column chunk that does not decode: table.npy is shown, its reads give EIO.
    let src: PathBuf = dir.path().join("plain.b2d");
    break_first_chunk(&src.join("_cols/f64.b2nd"));
    let t = Tree::from_source(&src, ro()).unwrap();
    let f = tree_ino(&t, "table.npy");
    assert!(t.getattr(f).unwrap().size > 0);
    let e = tree_read(&t, f, 1 << 20).unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    // Every other column, and the rest of the store, reads.
    tree_read(&t, tree_ino(&t, "_cols/i8/array.npy"), 1 << 20).unwrap();
    tree_read(&t, tree_ino(&t, "_valid_rows/array.npy"), 1 << 20).unwrap();
    // A mask that does not decode: table.npy's stat gives EIO (the mask is read first).
    let src = dir.path().join("holes.b2d");
    break_first_chunk(&src.join("_valid_rows.b2nd"));
    let t = Tree::from_source(&src, ro()).unwrap();
    let root = b2fs::tree::ROOT_INO;
    let e = t.lookup(root, "table.npy").unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    tree_read(&t, tree_ino(&t, "_cols/f64/array.npy"), 1 << 20).unwrap();
    // A column gone from the store: EIO too.
    let src = dir.path().join("nested.b2d");
    std::fs::remove_file(src.join("g/tab/_cols/s.b2nd")).unwrap();
    let t = Tree::from_source(&src, ro()).unwrap();
    let g = tree_ino(&t, "g/tab");
    assert_eq!(t.lookup(g, "table.npy").unwrap_err().errno(), libc::EIO);
    tree_read(&t, tree_ino(&t, "x/array.npy"), 1 << 20).unwrap();
}

/// A mask of 1,050,001 runs of valid rows (every other row of 2.1 M deleted) passes the
/// bound of runs b2fs keeps: EFBIG, not 16 MiB+ of runs.
#[test]
fn store_ctable_a_mask_of_too_many_runs_gives_efbig() {
    let py = or_skip!(support::python(
        "store_ctable_a_mask_of_too_many_runs_gives_efbig"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.b2d");
    oracle(&py, &[&"scripts/oracle/ctables.py", &"bigmask", &src]);
    let t = Tree::from_source(&src, ro()).unwrap();
    let e = t.lookup(b2fs::tree::ROOT_INO, "table.npy").unwrap_err();
    assert_eq!(e.errno(), libc::EFBIG, "{e}");
    tree_read(&t, tree_ino(&t, "_cols/a/array.npy"), 1 << 20).unwrap();
}

/// Another writer (python-blosc2, mode 'a') deletes and appends rows: once the tree follows
/// the store, `table.npy` shows the new rows; a descriptor opened before reads the old ones.
#[test]
fn store_ctable_table_npy_follows_another_writer() {
    let py = or_skip!(support::python(
        "store_ctable_table_npy_follows_another_writer"
    ));
    let (dir, _) = gen_tables(&py);
    for name in ["holes.b2d", "holes.b2z"] {
        let src = dir.path().join(name);
        let t = Tree::from_source(&src, ro()).unwrap();
        let f = tree_ino(&t, "table.npy");
        let before = tree_read(&t, f, 1 << 20).unwrap();
        let old_fh = t.open(f, libc::O_RDONLY).unwrap();
        let first = t.read(f, old_fh, 0, 65536).unwrap().to_vec();
        assert!(first[..] == before[..65536], "{name}");
        oracle(&py, &[&"scripts/oracle/ctables.py", &"edit", &src]);
        t.follow_source();
        let after = tree_read(&t, f, 1 << 20).unwrap();
        assert!(after != before, "{name}: table.npy not rendered again");
        assert_eq!(t.getattr(f).unwrap().size, after.len() as u64, "{name}");
        assert_eq!(numpy_agrees(&py, &after, &src, ""), "ok", "{name}");
        // The descriptor opened (and read from) before reads its version, or fails: never
        // bytes of two versions.
        let mut old = first;
        let res = loop {
            match t.read(f, old_fh, old.len() as u64, 1 << 20) {
                Ok(d) if d.is_empty() => break Ok(()),
                Ok(d) => old.extend_from_slice(&d),
                Err(e) => break Err(e),
            }
        };
        t.release(old_fh).unwrap();
        if let Err(e) = res {
            eprintln!("{name}: the old descriptor's read failed: {e}");
            old.truncate(0);
        }
        assert!(
            old.is_empty() || old == before,
            "{name}: the old descriptor read {} bytes unlike its version ({} bytes)",
            old.len(),
            before.len()
        );
    }
}

#[test]
fn store_ctable_mount_numpy_memmaps_table_npy() {
    let py = or_skip!(fuse_and_python(
        "store_ctable_mount_numpy_memmaps_table_npy"
    ));
    let (dir, _) = gen_tables(&py);
    for (name, group) in [("holes.b2z", ""), ("nested.b2d", "g/tab")] {
        let src = dir.path().join(name);
        let m = Mount::daemon(&src, &["ro"]);
        let file = m.mp.join(table_path(group));
        let said = oracle_says(
            &py,
            &[&"scripts/oracle/ctables.py", &"check", &file, &src, &group],
        );
        assert_eq!(said, "ok", "{name}");
        let e = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{name}");
    }
}

/// A `.b2z` held in memory whose reads fail while `fail` is set (an S3 or HTTP hiccup),
/// opened as a remote store is ([`b2fs::container::store::open_store_bytes`]).
#[derive(Debug)]
struct Flaky {
    bytes: Vec<u8>,
    fail: std::sync::atomic::AtomicBool,
}

impl b2fs::container::ByteSource for Flaky {
    fn name(&self) -> &str {
        "flaky.b2z"
    }
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn mtime(&self) -> std::time::SystemTime {
        std::time::SystemTime::UNIX_EPOCH
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("injected: the server is away"));
        }
        let at = usize::try_from(offset).map_err(std::io::Error::other)?;
        let src = at
            .checked_add(buf.len())
            .and_then(|end| self.bytes.get(at..end))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// A read of the mask that fails once (the store's server away for a moment) gives EIO, but
/// not for good: once the reads work again, `table.npy` is shown (after at most the retry
/// interval), and holds the rows python-blosc2 reads. Before, the failure was kept until an
/// array the view read was reloaded, which a remote store never does by itself.
#[test]
fn store_ctable_a_failed_mask_read_is_tried_again() {
    use std::sync::atomic::Ordering;
    let py = or_skip!(support::python(
        "store_ctable_a_failed_mask_read_is_tried_again"
    ));
    let (dir, _) = gen_tables(&py);
    let src = dir.path().join("holes.b2z");
    let flaky = std::sync::Arc::new(Flaky {
        bytes: std::fs::read(&src).unwrap(),
        fail: false.into(),
    });
    let c = b2fs::container::store::open_store_bytes(flaky.clone()).unwrap();
    let t = Tree::from_collection(c, ro()).unwrap();
    // Every leaf laid out (their headers read) while the server answers.
    tree_ino(&t, "_meta/array.npy");
    tree_ino(&t, "_valid_rows/array.npy");
    let cols = tree_ino(&t, "_cols");
    let names: Vec<String> = t
        .readdir(cols, 0)
        .unwrap()
        .filter(|e| matches!(e.kind, b2fs::tree::EntryKind::Directory) && !e.name.starts_with('.'))
        .map(|e| e.name)
        .collect();
    assert_eq!(names.len(), 10, "{names:?}");
    for name in &names {
        tree_ino(&t, &format!("_cols/{name}/array.npy"));
    }
    flaky.fail.store(true, Ordering::SeqCst);
    let root = b2fs::tree::ROOT_INO;
    let e = t.lookup(root, "table.npy").unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    flaky.fail.store(false, Ordering::SeqCst);
    let shown = support::wait::wait_until(std::time::Duration::from_secs(30), || {
        t.lookup(root, "table.npy").is_ok()
    });
    assert!(shown, "table.npy still fails after the reads work again");
    let f = tree_ino(&t, "table.npy");
    let whole = tree_read(&t, f, 1 << 20).unwrap();
    let want = std::fs::read(dir.path().join("holes.b2z.npy")).unwrap();
    assert!(npy_data(&whole) == npy_data(&want), "rows differ");
    assert_eq!(numpy_agrees(&py, &whole, &src, ""), "ok");
}

/// python-blosc2 stores a mask chunk whose rows are all deleted as a special all-zero chunk
/// (`ctables.py zeromask` checks that it does: 20 of 30 chunks): laying out `table.npy`
/// loads only the other 10 (the chunk cache's loads), and its rows are the 10,000 valid
/// ones python-blosc2 reads. Before, every mask chunk was loaded and decoded.
#[test]
fn store_ctable_all_zero_mask_chunks_are_not_read() {
    let py = or_skip!(support::python(
        "store_ctable_all_zero_mask_chunks_are_not_read"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("zeros.b2d");
    let stored: u64 = oracle_says(&py, &[&"scripts/oracle/ctables.py", &"zeromask", &src])
        .trim()
        .parse()
        .unwrap();
    assert_eq!(stored, 10);
    let t = Tree::from_source(&src, ro()).unwrap();
    let root = b2fs::tree::ROOT_INO;
    // Every leaf laid out first: what the lookup of table.npy loads is the mask alone.
    tree_ino(&t, "_valid_rows/array.npy");
    tree_ino(&t, "_cols/a/array.npy");
    let before = t.cache_stats().loads;
    let f = t.lookup(root, "table.npy").unwrap();
    let loads = t.cache_stats().loads - before;
    assert_eq!(loads, stored, "mask chunks loaded to lay out table.npy");
    let whole = tree_read(&t, f.ino, 1 << 20).unwrap();
    assert_eq!(whole.len() as u64, f.size);
    assert_eq!(npy_data(&whole).len(), 10_000 * 8);
    assert_eq!(numpy_agrees(&py, &whole, &src, ""), "ok");
}

/// The `scan` table of `scripts/oracle/ctables.py` (400,000 rows, six column kinds, deleted
/// rows scattered and in a range) as `name` (`.b2d` or `.b2z`) in `dir`, and its rows as
/// python-blosc2 reads them (an NPY file).
fn scan_table(py: &Path, dir: &Path, name: &str) -> (PathBuf, Vec<u8>) {
    let src = dir.join(name);
    oracle(py, &[&"scripts/oracle/ctables.py", &"scan", &src]);
    let want = std::fs::read(dir.join(format!("{name}.npy"))).unwrap();
    (src, want)
}

/// A tree-level reader summing `table.npy` through a map (it faults on the first page not
/// offered yet, in file order): the pages offered hold python-blosc2's rows, and once the
/// reader is seen scanning, a range (1 MiB) is offered a step, past the next fault's page,
/// assembled from the columns' blocks.
#[test]
fn store_ctable_a_mapped_scan_of_table_npy_steps_a_range_at_a_time() {
    let py = or_skip!(support::python(
        "store_ctable_a_mapped_scan_of_table_npy_steps_a_range_at_a_time"
    ));
    let dir = tempfile::tempdir().unwrap();
    for name in ["scan.b2d", "scan.b2z"] {
        let (src, want) = scan_table(&py, dir.path(), name);
        let options = TreeOptions {
            reader: ReaderOptions {
                prefetch_chunks: 4,
                ..ro().reader
            },
            ..ro()
        };
        let t = Tree::from_source(&src, options).unwrap();
        let f = tree_ino(&t, "table.npy");
        let whole = tree_read(&t, f, 1 << 20).unwrap();
        let len = whole.len();
        assert!(len > 7 << 20, "{name}: {len} bytes");
        let fh = t.open(f, libc::O_RDONLY).unwrap();
        let mut file = vec![0u8; len];
        let mut have = vec![false; len.div_ceil(4096)];
        let (mut faults, mut later_ranges, mut at) = (0, 0, 0u64);
        while (at as usize) < len {
            faults += 1;
            t.fault_ahead(f, at, 4096);
            let got = t.read(f, fh, at, 4096).unwrap();
            file[at as usize..at as usize + got.len()].copy_from_slice(&got);
            have[at as usize / 4096] = true;
            let (now, later) = t.pages_near(f, fh, at, 4096);
            later_ranges += later.len();
            for (p, bytes) in now.iter().chain(&later) {
                assert_eq!(p % 4096, 0);
                let p = *p as usize;
                assert!(p + bytes.len() <= len, "{name}: pages past the end");
                assert!(
                    bytes.len() % 4096 == 0 || p + bytes.len() == len,
                    "{name}: part of a page"
                );
                file[p..p + bytes.len()].copy_from_slice(&bytes.to_vec(0..bytes.len()));
                (p / 4096..(p + bytes.len()).div_ceil(4096)).for_each(|k| have[k] = true);
            }
            match (at as usize / 4096..have.len()).find(|&k| !have[k]) {
                Some(k) => at = (k * 4096) as u64,
                None => break,
            }
        }
        assert!(
            file == whole,
            "{name}: the pages offered are table.npy's bytes"
        );
        assert!(
            npy_data(&file) == npy_data(&want),
            "{name}: the pages offered are python-blosc2's rows"
        );
        // Three faults to be seen scanning, then one a range (the ranges offered after the
        // answer of each: 7.6 MiB in about 8).
        assert!(faults <= 16, "{name}: {faults} faults");
        assert!(
            later_ranges >= 5,
            "{name}: {later_ranges} ranges after the answer"
        );
        // Each fault asked the prefetch threads only for the ranges the faults before had
        // not: each byte's blocks once in the scan (it asked six ranges at every fault).
        let asked = t.ctable_ahead_bytes();
        assert!(
            asked >= len as u64 / 2 && asked <= len as u64,
            "{name}: blocks of {asked} bytes asked for, table.npy has {len}"
        );
        t.release(fh).unwrap();
        // The last three pages faulted in a row (a slice at the end of the map, `m[-n:]`):
        // the third is taken for a mapped scan, whose fault at the last, partial page reads
        // past the end of the file (the daemon panicked there).
        assert!(
            !len.is_multiple_of(4096),
            "{name}: the last page is partial"
        );
        let t = Tree::from_source(&src, options).unwrap();
        let f = tree_ino(&t, "table.npy");
        let fh = t.open(f, libc::O_RDONLY).unwrap();
        let last = (len as u64 - 1) / 4096 * 4096;
        for at in [last - 8192, last - 4096, last] {
            t.fault_ahead(f, at, 4096);
            let got = t.read(f, fh, at, 4096).unwrap();
            assert!(got[..] == whole[at as usize..(at as usize + 4096).min(len)]);
            let (now, later) = t.pages_near(f, fh, at, 4096);
            for (p, bytes) in now.iter().chain(&later) {
                let p = *p as usize;
                assert!(p + bytes.len() <= len, "{name}: pages past the end");
                assert!(bytes.to_vec(0..bytes.len()) == whole[p..p + bytes.len()]);
            }
        }
        t.release(fh).unwrap();
    }
}

/// Through a kernel mount, numpy's map of `table.npy` (`mmap_mode='r'`) gives
/// python-blosc2's rows: random slices (a fault each, offered nothing ahead), then every
/// column summed (a mapped scan: the ranges offered ahead), then the whole map; on a `.b2d`
/// and a `.b2z`, each on a fresh mount.
#[test]
fn store_ctable_mount_mapped_slices_and_scans_of_table_npy_are_python_blosc2s_rows() {
    let py = or_skip!(fuse_and_python(
        "store_ctable_mount_mapped_slices_and_scans_of_table_npy_are_python_blosc2s_rows"
    ));
    let dir = tempfile::tempdir().unwrap();
    let seed = std::process::id().to_string();
    for name in ["scan.b2d", "scan.b2z"] {
        let (src, _) = scan_table(&py, dir.path(), name);
        let m = Mount::daemon(&src, &["ro"]);
        let file = m.mp.join("table.npy");
        let said = oracle_says(
            &py,
            &[
                &"scripts/oracle/ctables.py",
                &"mapcheck",
                &file,
                &src,
                &seed,
            ],
        );
        assert_eq!(said, "ok", "{name} (seed {seed})");
    }
}
