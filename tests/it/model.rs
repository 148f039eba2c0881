//! Issue 21: a reference model of the write rules, in the manner of mountpoint-s3's
//! reftests. proptest drives random sequences of operations ([`ops::Op`]: open with each
//! flag, write at any offset, read, close by the opener or by another process, fsync, release,
//! truncate, the editors' scratch-file rename over `__attrs__`, writes through `array.npy` and
//! `data/N.bin` of the same chunk, another writer changing the source, a crash at a random
//! commit step followed by a new mount, a remount) through the in-process [`Tree`] (no
//! kernel) and through [`reference::Model`], written from docs/SEMANTICS.md and the README's
//! write rules. Every read, every errno and every size must agree, and after every step the
//! source decoded by the container layer must hold what the model says is stored.
//!
//! Sources: python-blosc2's 1-D b2nd (contiguous) and plain sparse frame fixtures, and a copy
//! of the b2nd whose every chunk b2fs itself rewrote (its encoder, its frame commit).
//!
//! Cases: `B2FS_MODEL_CASES` (default 64, a few seconds). Failures are stored in
//! `tests/data/model.proptest-regressions` and replayed first on every run.
//!
//! The parts: this file holds the sources, the tree's set-up and the random test;
//! `run.rs` runs one case against the model; `ops.rs` the operations and their strategy;
//! `reference.rs` the model; `cases.rs` fixed cases.

mod cases;
mod ops;
mod reference;
mod run;

use std::path::{Path, PathBuf};

use b2fs::container::{self, Container, write};
use b2fs::tree::{Pid, ROOT_INO, ReaderOptions, Tree, TreeOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestRunner};
use serde_json::Value;

use crate::support::{copy_tree, data_dir, repo_root};
use ops::Op;
use reference::{File, Model};
use run::run_case;

/// A source kind the cases start from.
#[derive(Debug, Clone, Copy)]
enum Seed {
    /// python-blosc2's contiguous 1-D b2nd (4 chunks of 2,560 bytes, 2,400 shown).
    PyB2nd,
    /// python-blosc2's sparse plain frame (4 chunks of 4,000 bytes).
    PySparse,
    /// The b2nd with every chunk rewritten by b2fs.
    B2fsB2nd,
}

fn open_array(src: &Path) -> container::Array {
    match container::open(src).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => panic!("a table"),
    }
}

/// Chunk `k` of `len` bytes from `seed` (never all zeros: those are stored as special).
fn content(k: usize, len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed ^ k as u8) | 1)
        .collect()
}

/// Commits `updates` (decoded chunks) and `attrs` to `src` as another writer would, with
/// b2fs's container layer: a contiguous frame is edited in a copy renamed over it (as
/// python-blosc2 writes store leaves; descriptors opened before keep reading the old file
/// exactly), a sparse frame in place (its chunks are files of their own). An in-place rewrite
/// of a contiguous frame makes reads of versions opened before fail with EIO (the documented
/// rule), which depends on what the reader's caches hold: not modelled.
fn foreign_commit(src: &Path, updates: &[(usize, Vec<u8>)], attrs: Option<Value>) {
    if src.is_file() {
        let tmp = src.with_extension("tmp");
        std::fs::copy(src, &tmp).unwrap();
        commit_in_place(&tmp, updates, attrs);
        std::fs::rename(&tmp, src).unwrap();
    } else {
        commit_in_place(src, updates, attrs);
    }
}

fn commit_in_place(src: &Path, updates: &[(usize, Vec<u8>)], attrs: Option<Value>) {
    let a = open_array(src);
    let params = write::chunk_cparams(&a).unwrap();
    let edit = write::Edit {
        updates: updates
            .iter()
            .map(|(k, d)| (*k, b2fs::codec::compress(d, &params).unwrap().into()))
            .collect(),
        attrs,
        ..Default::default()
    };
    write::commit(&a, &edit).unwrap();
}

/// A fresh copy of `seed`'s source in `dir`.
fn make_source(seed: Seed, dir: &Path) -> PathBuf {
    match seed {
        Seed::PyB2nd | Seed::B2fsB2nd => {
            let src = dir.join("a.b2nd");
            std::fs::copy(data_dir().join("frames/b2nd_1d_f8.b2nd"), &src).unwrap();
            if let Seed::B2fsB2nd = seed {
                let a = open_array(&src);
                let updates: Vec<(usize, Vec<u8>)> = (0..a.nchunks())
                    .map(|k| (k, content(k, a.chunk_nbytes(k).unwrap(), 0x5a)))
                    .collect();
                foreign_commit(&src, &updates, Some(serde_json::json!({"by": "b2fs"})));
            }
            src
        }
        Seed::PySparse => {
            let src = dir.join("s.b2frame");
            copy_tree(&data_dir().join("frames/schunk_sparse.b2frame"), &src);
            src
        }
    }
}

/// What the source holds now, decoded by the container layer.
fn stored(src: &Path) -> (Vec<Vec<u8>>, Value) {
    let a = open_array(src);
    let chunks = (0..a.nchunks())
        .map(|k| b2fs::codec::decompress(&a.chunk_bytes(k).unwrap()).unwrap())
        .collect();
    (chunks, a.attrs().clone())
}

/// The inodes of the modelled files.
struct Files {
    chunks: [u64; 2],
    npy: u64,
    attrs: u64,
}

impl Files {
    fn of(t: &Tree) -> Files {
        let data = t.lookup(ROOT_INO, "data").unwrap().ino;
        let chunk = |k: usize| t.lookup(data, &b2fs::tree::chunk_name(k)).unwrap().ino;
        Files {
            chunks: [chunk(0), chunk(1)],
            npy: t.lookup(ROOT_INO, "array.npy").unwrap().ino,
            attrs: t.lookup(ROOT_INO, "__attrs__").unwrap().ino,
        }
    }

    fn ino(&self, f: File) -> u64 {
        match f {
            File::Chunk(k) => self.chunks[k],
            File::Npy => self.npy,
            File::Attrs => self.attrs,
        }
    }
}

fn pid(by: u8) -> Pid {
    Pid(4_000_000 + u32::from(by))
}

fn mount(src: &Path) -> Tree {
    let o = TreeOptions {
        reader: ReaderOptions {
            prefetch_chunks: 0,
            cache_size: 1 << 20,
            ..ReaderOptions::default()
        },
        writable: true,
        ..TreeOptions::default()
    };
    Tree::from_source(src, o).unwrap()
}

fn seed() -> impl Strategy<Value = Seed> {
    prop_oneof![
        Just(Seed::PyB2nd),
        Just(Seed::PySparse),
        Just(Seed::B2fsB2nd)
    ]
}

/// The model test: `B2FS_MODEL_CASES` random cases (default 64) of up to 40 steps.
#[test]
fn model_tree_follows_the_write_rules() {
    let cases = crate::support::env_or("B2FS_MODEL_CASES", 64);
    let persistence = repo_root().join("tests/data/model.proptest-regressions");
    let persistence: &'static str =
        Box::leak(persistence.to_string_lossy().into_owned().into_boxed_str());
    // CI replays one fixed sequence of cases (plus the stored regressions), so a red run
    // always means a change broke a rule; anywhere else each run draws new cases.
    // `B2FS_MODEL_SEED=N` replays a run.
    let rng_seed = match std::env::var("B2FS_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(n) => RngSeed::Fixed(n),
        None if std::env::var("CI").as_deref() == Ok("true") => RngSeed::Fixed(20_261_126),
        None => RngSeed::Random,
    };
    eprintln!("model: rng seed {rng_seed:?}");
    let config = Config {
        cases,
        rng_seed,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(persistence))),
        ..Config::default()
    };
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    let result = runner.run(
        &(seed(), prop::collection::vec(ops::op(), 1..40)),
        |(seed, ops)| run_case(seed, &ops),
    );
    eprintln!(
        "model: {cases} cases in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
