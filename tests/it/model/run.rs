//! One case of the model test: a [`Run`] holds the tree, the model and which tree handle each
//! model handle is; each step is done to both, and every read, errno and size must agree,
//! then the source on disk must hold what the model says is stored.

use std::collections::BTreeMap;

use b2fs::tree::TreeError;

use super::ops::ATTRS_TEXTS;
use super::reference::{Geometry, Out};
use super::*;

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
                if let (Ok(()), Some(p)) = (&t, &plan)
                    && now != *p
                {
                    return Err("fsync returned Ok but the source is not the new one".into());
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

pub(super) fn run_case(seed: Seed, ops: &[Op]) -> Result<(), TestCaseError> {
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
