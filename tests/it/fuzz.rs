//! The fuzz targets' inputs replayed under the normal test build: every regression input in
//! `tests/data/fuzz-regressions/TARGET/` (each was a crash, hang or out-of-memory found by
//! `scripts/fuzz.sh`, kept after its fix), the stored seeds `fuzz/seeds/TARGET/` (stores
//! python-blosc2 writes, for the targets that take them) and the stored corpus
//! `fuzz/corpus/TARGET/`, through
//! the same entry functions the libFuzzer binaries call (`fuzz/src/lib.rs`, included here).
//! No nightly toolchain or cargo-fuzz needed: this is the stable-toolchain part of the fuzzing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
pub(crate) mod entry;

use crate::support::repo_root;

/// The inputs of `dir` (none when it does not exist), sorted by name.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// CPU time of the calling thread: what an input costs, whatever else the machine runs (a
/// benchmark lock that stops the test process for a minute must not fail it).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs every input of the target's regression directory and stored corpus through `f`;
/// fails naming each input that panicked, took over 5 s of CPU, or over 2 minutes of wall
/// time (waiting rather than computing; a benchmark lock may stop the test for a minute).
/// Returns how many ran.
fn replay(target: &str, f: fn(&[u8])) -> usize {
    let root = repo_root();
    let mut files = inputs(&root.join("tests/data/fuzz-regressions").join(target));
    files.extend(inputs(&root.join("fuzz/seeds").join(target)));
    files.extend(inputs(&root.join("fuzz/corpus").join(target)));
    let mut failures = Vec::new();
    let start = Instant::now();
    for p in &files {
        let data = std::fs::read(p).unwrap();
        let (cpu, wall) = (thread_cpu(), Instant::now());
        if std::panic::catch_unwind(|| f(&data)).is_err() {
            failures.push(format!("{}: panicked", p.display()));
        } else if thread_cpu().saturating_sub(cpu) > Duration::from_secs(5) {
            let took = thread_cpu().saturating_sub(cpu);
            failures.push(format!("{}: took {took:?} of CPU", p.display()));
        } else if wall.elapsed() > Duration::from_secs(120) {
            // An input that waits (a lock, a sleep) rather than computes.
            failures.push(format!("{}: took {:?}", p.display(), wall.elapsed()));
        }
    }
    eprintln!(
        "fuzz replay {target}: {} inputs in {:?}",
        files.len(),
        start.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    files.len()
}

#[test]
fn fuzz_replay_chunk_decode() {
    assert!(replay("chunk_decode", entry::chunk_decode) > 0);
}

#[test]
fn fuzz_replay_frame_open() {
    assert!(replay("frame_open", entry::frame_open) > 0);
}

#[test]
fn fuzz_replay_bcolz_open() {
    assert!(replay("bcolz_open", entry::bcolz_open) > 0);
}

#[test]
fn fuzz_replay_attrs() {
    assert!(replay("attrs", entry::attrs) > 0);
}

#[test]
fn fuzz_replay_npy_dtype() {
    assert!(replay("npy_dtype", entry::npy_dtype) > 0);
}

#[test]
fn fuzz_replay_store_open() {
    assert!(replay("store_open", entry::store_open) > 0);
}

#[test]
fn fuzz_replay_tree_walk() {
    assert!(replay("tree_walk", entry::tree_walk) > 0);
}

#[test]
fn fuzz_replay_tree_edit() {
    assert!(replay("tree_edit", entry::tree_edit) > 0);
}

#[test]
fn fuzz_replay_zarr_edit() {
    assert!(replay("zarr_edit", entry::zarr_edit) > 0);
}

/// The `zarr_edit` target reaches the Zarr view's edits on real frames: the array is found,
/// a grow, a whole chunk write and a chunk removal are applied, raw bytes renamed over
/// `zarr.json` and a resize to 2^64-1 rows refused.
#[test]
fn fuzz_zarr_edit_steps_reach_the_view() {
    let steps = |name: &str, ops: [u8; 4], payload: &[u8]| {
        let frame = std::fs::read(repo_root().join("tests/data/frames").join(name)).unwrap();
        let mut v = vec![0];
        v.extend_from_slice(&ops);
        v.extend_from_slice(&frame);
        v.extend_from_slice(entry::tree::EDIT_SEPARATOR);
        v.extend_from_slice(payload);
        entry::zarr::zarr_edit_outcome(&v)
    };
    // Resize to old + 1 rows (pick 4), write chunk 0 whole, remove the last chunk (pick 2),
    // raw bytes over zarr.json.
    let got = steps(
        "b2nd_2d_i4_odd.b2nd",
        [4 << 3, 4, (2 << 3) | 5, 2],
        b"not json",
    );
    assert_eq!(got.array.as_deref(), Some("zarr/input"), "{got:?}");
    assert_eq!(
        got.applied,
        ["Resize/4", "WriteWhole/0", "Unlink/2"],
        "{got:?}"
    );
    assert!(
        got.refused.len() == 1 && got.refused[0].starts_with("RawJson/0"),
        "{got:?}"
    );
    // Attributes from the payload with the same shape (pick 3); a resize to u64::MAX refused.
    let got = steps(
        "b2nd_attrs.b2nd",
        [(3 << 3) | 1, 7 << 3, 0, 0],
        br#"{"units": "K"}"#,
    );
    assert_eq!(got.applied, ["ResizeWithAttrs/3"], "{got:?}");
    assert!(got.refused[0].starts_with("Resize/7"), "{got:?}");
}

/// The `zarr_edit` target's creation mode (kind byte 0x80) reaches the view's new arrays:
/// in a directory of sources holding a real frame, `mkdir n0`, an array's `zarr.json`
/// (checked to show its shape and fill value), a chunk object renamed in, and a nested
/// `mkdir` in the array refused; nested directories make their parents as groups; a
/// hostile document is refused leaving every file as it was.
#[test]
fn fuzz_zarr_edit_creation_steps_reach_the_view() {
    let frame = std::fs::read(repo_root().join("tests/data/frames/b2nd_1d_f8.b2nd")).unwrap();
    let steps = |ops: [u8; 4], payload: &[u8]| {
        let mut v = vec![0x80];
        v.extend_from_slice(&ops);
        v.extend_from_slice(&frame);
        v.extend_from_slice(entry::tree::EDIT_SEPARATOR);
        v.extend_from_slice(payload);
        entry::zarr::zarr_edit_outcome(&v)
    };
    let got = steps([0x00, 0x01, (1 << 3) | 5, (3 << 3)], b"abcdefgh");
    assert_eq!(
        got.applied,
        ["Mkdir/0", "PutArray/0", "WriteChunk/1"],
        "{got:?}"
    );
    assert!(got.refused[0].starts_with("Mkdir/3"), "{got:?}");
    // mkdir n0, mkdir n0/n1 (nested), an array in n1 (its parent made a group first), a
    // group document linked over n0's (EEXIST now).
    let got = steps([0x00, (3 << 3), (5 << 3) | 1, 6], b"");
    assert_eq!(got.applied, ["Mkdir/0", "Mkdir/3", "PutArray/5"], "{got:?}");
    assert!(got.refused[0].starts_with("LinkGroup/0"), "{got:?}");
    // A hostile document: 2^40 chunks.
    let got = steps(
        [0x00, 4, 0, 0],
        br#"{"shape": [1099511627776], "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}}}"#,
    );
    assert!(got.refused[0].starts_with("PutHostile/0"), "{got:?}");
}

/// The stored `store_open` seeds are real stores (python-blosc2's, `scripts/oracle/stores.py
/// fuzzseeds`): they open as collections, so the target reaches past the zip.
#[test]
fn fuzz_store_corpus_opens() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("seed.b2z");
    let opened = inputs(&repo_root().join("fuzz/seeds/store_open"))
        .iter()
        .filter(|f| {
            std::fs::copy(f, &p).unwrap();
            entry::store::opens_as_store(&p)
        })
        .count();
    assert!(
        opened >= 5,
        "{opened} stored store_open inputs open as stores"
    );
}

/// The `tree_edit` target reaches the commit: on a real frame, a JSON `__attrs__` is
/// applied, a write to `meta/storage` or to `zarr/zarr.json` refused.
#[test]
fn fuzz_tree_edit_seeds_reach_the_commit() {
    use entry::tree::Outcome;
    let frame = std::fs::read(repo_root().join("tests/data/frames/b2nd_attrs.b2nd")).unwrap();
    let input = |op: u8, payload: &[u8]| {
        let mut v = vec![0, op];
        v.extend_from_slice(&frame);
        v.extend_from_slice(entry::tree::EDIT_SEPARATOR);
        v.extend_from_slice(payload);
        entry::tree::tree_edit_outcome(&v)
    };
    let json = br#"{"title": "edited", "n": [1, 2.5]}"#;
    for op in [0, 1] {
        let got = input(op, json);
        assert!(matches!(got, Outcome::Applied), "op {op}: {got:?}");
    }
    for op in [2, 3] {
        let got = input(op, b"{}");
        assert!(matches!(got, Outcome::Refused(_)), "op {op}: {got:?}");
    }
}

/// The bcolz input format splits on the separator, at most `max` parts.
#[test]
fn fuzz_bcolz_input_splits_into_files() {
    let parts = entry::split_parts(b"a\n--\nb\n--\n\n--\nc\n--\nd", 4);
    assert_eq!(parts, [&b"a"[..], b"b", b"", b"c\n--\nd"]);
    assert_eq!(entry::split_parts(b"", 6), [&b""[..]]);
}
