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

mod ops;
mod reference;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use b2fs::container::{self, Container, write};
use b2fs::tree::{Pid, ROOT_INO, ReaderOptions, Tree, TreeError, TreeOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestCaseError, TestRunner};
use serde_json::Value;

use crate::support::{copy_tree, data_dir, repo_root};
use ops::{ATTRS_TEXTS, Op};
use reference::{File, Geometry, Model, Out};

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

/// The model's geometry of `src`, checked against what the tree shows.
fn geometry(src: &Path, t: &Tree, files: &Files) -> Geometry {
    let a = open_array(src);
    let n = a.nchunks();
    assert!(n >= 3, "the model edits two middle chunks");
    let chunk_len: Vec<usize> = (0..n).map(|k| a.chunk_nbytes(k).unwrap()).collect();
    let shown = match a.nd_meta() {
        Some(nd) => {
            let (shape, cs) = (nd.shape[0] as usize, nd.chunkshape[0] as usize);
            (0..n)
                .map(|k| cs.min(shape - k * cs) * a.typesize())
                .collect()
        }
        None => chunk_len.clone(),
    };
    let fh = t.open(files.npy, libc::O_RDONLY).unwrap();
    let head = t.read(files.npy, fh, 0, 10).unwrap().to_vec();
    let hlen = 10 + u16::from_le_bytes([head[8], head[9]]) as u32;
    let header = t.read(files.npy, fh, 0, hlen).unwrap().to_vec();
    t.release(fh).unwrap();
    let geo = Geometry {
        chunk_len,
        shown,
        header,
    };
    assert_eq!(geo.npy_len() as u64, t.getattr(files.npy).unwrap().size);
    geo
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

/// One case's state: the tree, the model, and which tree handle each model handle is.
struct Run {
    src: PathBuf,
    tree: Tree,
    files: Files,
    model: Model,
    fh: BTreeMap<u64, (u64, u8)>,
    log: Vec<String>,
}

fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    tree: Out<T>,
    model: Out<T>,
) -> Result<(), String> {
    if tree == model {
        Ok(())
    } else {
        Err(format!(
            "{what}: the tree gives {tree:?}, the model {model:?}"
        ))
    }
}

fn errno<T>(r: Result<T, TreeError>) -> Out<T> {
    r.map_err(|e| e.errno())
}

impl Run {
    fn new(seed: Seed, dir: &Path) -> Run {
        let src = make_source(seed, dir);
        let tree = mount(&src);
        let files = Files::of(&tree);
        let geo = geometry(&src, &tree, &files);
        let (chunks, attrs) = stored(&src);
        Run {
            src,
            model: Model::new(geo, chunks, attrs),
            tree,
            files,
            fh: BTreeMap::new(),
            log: Vec::new(),
        }
    }

    /// The open model handle `h` picks.
    fn pick(&self, h: &proptest::sample::Index) -> Option<u64> {
        let all = self.model.handles();
        (!all.is_empty()).then(|| all[h.index(all.len())])
    }

    /// The size a file may be written up to, for choosing offsets.
    fn span(&self, f: File) -> usize {
        match f {
            File::Chunk(k) => self.model.geo.chunk_len[k],
            File::Npy => self.model.geo.npy_len(),
            File::Attrs => 64,
        }
    }

    fn remount(&mut self, disk: Vec<Vec<u8>>, attrs: Value) {
        self.tree = mount(&self.src);
        self.files = Files::of(&self.tree);
        self.fh.clear();
        self.model.restart(disk, attrs);
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Open { file, mode, by } => {
                let t = errno(
                    self.tree
                        .open_by(self.files.ino(*file), mode.flags(), pid(*by)),
                );
                let m = self.model.open(*file, *mode, *by);
                same(
                    "open",
                    t.as_ref().map(|_| ()).map_err(|e| *e),
                    m.map(|_| ()),
                )?;
                if let (Ok(fh), Ok(h)) = (t, m) {
                    self.fh.insert(h, (fh, *by));
                }
            }
            Op::Write {
                h,
                at,
                len,
                whole,
                header,
                seed,
            } => {
                let Some(h) = self.pick(h) else { return Ok(()) };
                let f = self.model.file_of(h);
                let span = self.span(f);
                let (off, len) = match whole {
                    true => (0, span),
                    false => ((*at as usize * (span + 16)) >> 16, *len),
                };
                let mut data = content(off, len, *seed);
                let hl = self.model.geo.header.len();
                if *header && f == File::Npy && off < hl {
                    let n = (hl - off).min(len);
                    data[..n].copy_from_slice(&self.model.geo.header[off..off + n]);
                }
                let (fh, _) = self.fh[&h];
                let t = errno(self.tree.write(self.files.ino(f), fh, off as u64, &data));
                let m = self.model.write(h, off, &data);
                same("write", t.map(|n| n as usize), m)?;
            }
            Op::WriteText { h, text } => {
                let Some(h) = self.pick(h) else { return Ok(()) };
                let f = self.model.file_of(h);
                let data = ATTRS_TEXTS[*text].as_bytes();
                if data.is_empty() || f != File::Attrs {
                    return Ok(());
                }
                let (fh, _) = self.fh[&h];
                let t = errno(self.tree.write(self.files.ino(f), fh, 0, data));
                same(
                    "write text",
                    t.map(|n| n as usize),
                    self.model.write(h, 0, data),
                )?;
            }
            Op::Read { h, at, len } => {
                let Some(h) = self.pick(h) else { return Ok(()) };
                let f = self.model.file_of(h);
                let off = (*at as usize * (self.span(f) + 16)) >> 16;
                let (fh, _) = self.fh[&h];
                let t = self
                    .tree
                    .read(self.files.ino(f), fh, off as u64, *len as u32);
                if let Err(e) = &t {
                    self.log
                        .push(format!("  read error: {}", b2fs::tree::display_chain(e)));
                }
                let t = errno(t).map(|d| d.to_vec());
                same("read", t, self.model.read(h, off, *len))?;
            }
            Op::Flush { h, opener } => {
                let Some(h) = self.pick(h) else { return Ok(()) };
                let (fh, by) = self.fh[&h];
                let by = if *opener { by } else { 1 - by };
                let f = self.model.file_of(h);
                let t = errno(self.tree.flush_by(self.files.ino(f), fh, pid(by)));
                same("flush", t, self.model.flush(h, by))?;
            }
            Op::Fsync { h } => {
                let Some(h) = self.pick(h) else { return Ok(()) };
                let (fh, _) = self.fh[&h];
                let f = self.model.file_of(h);
                let t = errno(self.tree.fsync(self.files.ino(f), fh));
                same("fsync", t, self.model.fsync(h))?;
            }
            Op::Release { h } => {
                let Some(h) = self.pick(h) else { return Ok(()) };
                let (fh, _) = self.fh.remove(&h).unwrap();
                same(
                    "release",
                    errno(self.tree.release(fh)),
                    self.model.release(h),
                )?;
            }
            Op::Truncate { file, size } => {
                let full = match file {
                    File::Chunk(k) => self.model.geo.chunk_len[*k],
                    File::Npy => self.model.geo.npy_len(),
                    File::Attrs => self.model.size(File::Attrs) as usize,
                };
                let size = [0, full / 2, full, full + 1][*size as usize];
                let t = errno(self.tree.set_size(self.files.ino(*file), size as u64));
                same("truncate", t, self.model.truncate(*file, size))?;
            }
            Op::RenameOverAttrs { text } => {
                // A lookup may follow the source: the follower's tick first keeps the two in
                // step (a lookup follows only what a tick would).
                self.tree.follow_source();
                self.model.tick();
                let data = ATTRS_TEXTS[*text].as_bytes();
                let (a, fh) = self
                    .tree
                    .create(ROOT_INO, "x.tmp")
                    .map_err(|e| e.to_string())?;
                if !data.is_empty() {
                    self.tree.write(a.ino, fh, 0, data).unwrap();
                }
                self.tree.release(fh).unwrap();
                let t = errno(
                    self.tree
                        .rename(ROOT_INO, "x.tmp", ROOT_INO, "__attrs__", false),
                );
                if t.is_err() {
                    self.tree.unlink(ROOT_INO, "x.tmp").unwrap();
                }
                same(
                    "rename over __attrs__",
                    t,
                    self.model.rename_over_attrs(data),
                )?;
            }
            Op::Foreign { chunk, seed, attrs } => {
                let k = chunk % self.model.disk.len();
                let data = content(k, self.model.geo.chunk_len[k], *seed);
                let attrs = attrs.map(|a| serde_json::json!({ "foreign": a }));
                foreign_commit(&self.src, &[(k, data.clone())], attrs.clone());
                self.model.foreign(k, data, attrs);
            }
            Op::Tick => {
                self.tree.follow_source();
                self.model.tick();
            }
            Op::Crash { h, steps } => {
                let Some(h) = self.pick(h) else { return Ok(()) };
                let (fh, _) = self.fh[&h];
                let f = self.model.file_of(h);
                let before = (self.model.disk.clone(), self.model.disk_attrs.clone());
                // A read-only descriptor's fsync commits nothing: a crash with none in flight.
                let plan = match self.model.writes(h) {
                    true => self.model.planned(f, true).ok(),
                    false => None,
                };
                self.tree.simulate_crash_after(*steps);
                let t = self.tree.fsync(self.files.ino(f), fh);
                let now = stored(&self.src);
                let is_new = plan.as_ref().is_some_and(|p| *p == now);
                if let (Ok(()), Some(p)) = (&t, &plan) {
                    if now != *p {
                        return Err("fsync returned Ok but the source is not the new one".into());
                    }
                }
                if now != before && !is_new {
                    return Err(format!(
                        "a crash after {steps} steps left neither the old nor the new source"
                    ));
                }
                self.log.push(format!(
                    "  crash after {steps} steps: {:?}; stored {}",
                    t.map_err(|e| e.errno()),
                    if now == before { "old" } else { "new" }
                ));
                self.remount(now.0, now.1);
            }
            Op::Remount => {
                for h in self.model.handles() {
                    let (fh, _) = self.fh.remove(&h).unwrap();
                    same(
                        "release at unmount",
                        errno(self.tree.release(fh)),
                        self.model.release(h),
                    )?;
                }
                let (d, a) = (self.model.disk.clone(), self.model.disk_attrs.clone());
                self.remount(d, a);
            }
        }
        self.check()
    }

    /// After every step: the sizes the tree shows and the source on disk.
    fn check(&self) -> Result<(), String> {
        for f in [File::Chunk(0), File::Chunk(1), File::Npy, File::Attrs] {
            let t = errno(self.tree.getattr(self.files.ino(f))).map(|a| a.size);
            same(&format!("size of {f:?}"), t, Ok(self.model.size(f)))?;
        }
        let (chunks, attrs) = stored(&self.src);
        if chunks != self.model.disk {
            let diff: Vec<usize> = (0..chunks.len().max(self.model.disk.len()))
                .filter(|&k| chunks.get(k) != self.model.disk.get(k))
                .collect();
            return Err(format!(
                "the source's chunks {diff:?} differ from the model's"
            ));
        }
        if attrs != self.model.disk_attrs {
            return Err(format!(
                "the source's attributes are {attrs}, the model's {}",
                self.model.disk_attrs
            ));
        }
        Ok(())
    }
}

fn run_case(seed: Seed, ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut run = Run::new(seed, dir.path());
    // Investigating: `B2FS_MODEL_SKIP=Foreign,Attrs` leaves out the steps whose description
    // names any of those words, to find what else fails while one failure is being fixed.
    let skip = std::env::var("B2FS_MODEL_SKIP").unwrap_or_default();
    let skip: Vec<&str> = skip.split(',').filter(|w| !w.is_empty()).collect();
    for (i, op) in ops.iter().enumerate() {
        if skip.iter().any(|w| format!("{op:?}").contains(w)) {
            continue;
        }
        run.log.push(format!("{i}: {op:?}"));
        if let Err(e) = run.step(op) {
            return Err(TestCaseError::fail(format!(
                "{seed:?}: step {i} ({op:?}): {e}\n{}",
                run.log.join("\n")
            )));
        }
    }
    Ok(())
}

fn seed() -> impl Strategy<Value = Seed> {
    prop_oneof![
        Just(Seed::PyB2nd),
        Just(Seed::PySparse),
        Just(Seed::B2fsB2nd)
    ]
}

/// The fork rule without a kernel: a close by a process other than the opener commits
/// nothing of the half-written chunk; the opener's close commits the whole; fsync from any
/// process commits; the last close commits what the opener never closed.
#[test]
fn model_close_by_another_process_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = make_source(Seed::PyB2nd, dir.path());
    let t = mount(&src);
    let files = Files::of(&t);
    let (old, _) = stored(&src);
    let ino = files.chunks[1];
    let len = old[1].len();
    let new = content(1, len, 9);
    let (parent, child) = (pid(0), pid(1));
    let fh = t.open_by(ino, libc::O_RDWR, parent).unwrap();
    t.write(ino, fh, 0, &new[..len / 2]).unwrap();
    t.flush_by(ino, fh, child).unwrap();
    assert_eq!(
        stored(&src).0[1],
        old[1],
        "a child's close committed half a chunk"
    );
    t.write(ino, fh, (len / 2) as u64, &new[len / 2..]).unwrap();
    t.flush_by(ino, fh, parent).unwrap();
    assert_eq!(stored(&src).0[1], new);
    // fsync commits whoever asks; the release commits what no opener's close did.
    let newer = content(1, len, 10);
    t.write(ino, fh, 0, &newer[..8]).unwrap();
    t.fsync(ino, fh).unwrap();
    assert_eq!(&stored(&src).0[1][..8], &newer[..8]);
    t.write(ino, fh, 0, &newer).unwrap();
    t.flush_by(ino, fh, child).unwrap();
    assert_eq!(&stored(&src).0[1][8..], &new[8..]);
    t.release(fh).unwrap();
    assert_eq!(stored(&src).0[1], newer);
    // A refused edit: the child's close says nothing, the opener's close says EINVAL and
    // drops it.
    let fh = t
        .open_by(ino, libc::O_WRONLY | libc::O_TRUNC, parent)
        .unwrap();
    t.write(ino, fh, 0, &new[..len / 2]).unwrap();
    t.flush_by(ino, fh, child).unwrap();
    assert_eq!(
        t.flush_by(ino, fh, parent).unwrap_err().errno(),
        libc::EINVAL
    );
    t.release(fh).unwrap();
    assert_eq!(stored(&src).0[1], newer);
}

/// Found by the 5,000-case model run: a commit that fails with ESTALE because its edit was
/// marked stale at an earlier reload must not reload again when nothing changed on disk since:
/// that reload marked an edit made after the first reload, from the current version, stale,
/// and its commit failed with ESTALE though no other writer had touched the source since.
/// The same through `__attrs__`.
#[test]
fn model_stale_commit_reloads_only_after_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let src = make_source(Seed::PyB2nd, dir.path());
    let t = mount(&src);
    let files = Files::of(&t);
    let (c0, c1) = (files.chunks[0], files.chunks[1]);
    let len = stored(&src).0[0].len();
    let by = pid(0);
    let w0 = t.open_by(c0, libc::O_RDWR, by).unwrap();
    t.write(c0, w0, 0, &[7]).unwrap();
    // Another writer replaces chunk 0.
    let foreign = content(0, len, 3);
    foreign_commit(&src, &[(0, foreign.clone())], None);
    let w1 = t.open_by(c1, libc::O_WRONLY | libc::O_TRUNC, by).unwrap();
    t.write(c1, w1, 0, &content(2, len, 4)[..1]).unwrap();
    // Both edits were made against the replaced version: ESTALE (the first reloads).
    assert_eq!(t.fsync(c0, w0).unwrap_err().errno(), libc::ESTALE);
    let mine = content(0, len, 5);
    t.write(c0, w0, 0, &mine).unwrap();
    assert_eq!(t.fsync(c1, w1).unwrap_err().errno(), libc::ESTALE);
    // Made from what is stored now: committed.
    t.fsync(c0, w0).unwrap();
    assert!(stored(&src).0[0] == mine, "chunk 0 is not the mount's edit");

    // `__attrs__`: the ESTALE of an edit marked stale at an earlier reload does not make a
    // chunk edit made after that reload stale either.
    let a = t.open_by(files.attrs, libc::O_RDWR, by).unwrap();
    t.write(files.attrs, a, 0, b"{\"x\": 1}").unwrap();
    foreign_commit(&src, &[(0, foreign)], None);
    t.write(c1, w1, 0, &[9]).unwrap();
    assert_eq!(t.fsync(c1, w1).unwrap_err().errno(), libc::ESTALE);
    let mine = content(0, len, 6);
    t.write(c0, w0, 0, &mine).unwrap();
    assert_eq!(t.fsync(files.attrs, a).unwrap_err().errno(), libc::ESTALE);
    t.fsync(c0, w0).unwrap();
    assert!(stored(&src).0[0] == mine, "chunk 0 is not the mount's edit");
    for fh in [w0, w1, a] {
        t.release(fh).unwrap();
    }
}

/// Chunk files of sparse frame `dir`, sorted.
fn chunk_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".chunk"))
        .collect();
    v.sort();
    v
}

/// One version per open on a sparse frame (found by the model): a read-only descriptor opened
/// before the mount's own commit reads its version after it (the commit used to remove the
/// replaced chunk file at once: EIO). The replaced file goes when that descriptor is released;
/// with no such descriptor, right after the commit.
#[test]
fn model_sparse_version_outlives_own_commit() {
    let dir = tempfile::tempdir().unwrap();
    let src = make_source(Seed::PySparse, dir.path());
    let t = mount(&src);
    let files = Files::of(&t);
    let c1 = files.chunks[1];
    let (old, _) = stored(&src);
    let len = old[1].len();
    let before = chunk_files(&src);
    let by = pid(0);
    let ro = t.open_by(c1, libc::O_RDONLY, by).unwrap();
    assert_eq!(t.read(c1, ro, 0, 8).unwrap().to_vec(), old[1][..8]);
    let w = t.open_by(c1, libc::O_RDWR, by).unwrap();
    let new = content(1, len, 7);
    t.write(c1, w, 0, &new).unwrap();
    t.fsync(c1, w).unwrap();
    assert!(stored(&src).0[1] == new, "the commit is not stored");
    // The old version, whole, through the descriptor opened before.
    let all = t.read(c1, ro, 0, len as u32).unwrap().to_vec();
    assert!(
        all == old[1],
        "the descriptor opened before lost its version"
    );
    let during = chunk_files(&src);
    assert_eq!(during.len(), before.len() + 1, "{before:?} -> {during:?}");
    t.release(ro).unwrap();
    let after = chunk_files(&src);
    assert_eq!(after.len(), before.len(), "{during:?} -> {after:?}");
    // No descriptor pins the version: the replaced file goes at the commit.
    let newer = content(1, len, 8);
    t.write(c1, w, 0, &newer).unwrap();
    t.fsync(c1, w).unwrap();
    assert_eq!(chunk_files(&src).len(), before.len());
    t.release(w).unwrap();
    assert!(stored(&src).0[1] == newer);
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
