//! The reference model of the write rules: what every read, every errno and the stored
//! source must be, written from docs/SEMANTICS.md and the README's write-rules table, not from
//! the tree's code. One 1-D source; the files modelled are two middle chunk files, `array.npy`
//! and `__attrs__` (plus the editors' scratch rename over it).
//!
//! The rules it encodes:
//! - Edits are buffered per chunk; `data/N.bin` and `array.npy` patch the same buffer. A
//!   descriptor opened for writing reads the buffers and the mount's current version; a
//!   read-only one reads the version current at its open (chunk files, `array.npy`).
//!   `__attrs__` shows its buffer to everyone.
//! - Writes: past what the file may hold (a middle chunk: its size; `array.npy`: its size)
//!   EFBIG; `array.npy`'s header only with its own bytes, else EINVAL; a failed write changes
//!   nothing.
//! - Commits: fsync (any process), a close by the process that opened the descriptor, the last
//!   close of it (release), a truncate with no descriptor writing the file, a rename over
//!   `__attrs__`. A close by another process commits nothing. A chunk file commits its chunk,
//!   `array.npy` every buffered chunk (one commit), `__attrs__` its text.
//! - Refusals (EINVAL): a chunk of another size than its slot (a middle chunk cannot be
//!   emptied), `__attrs__` that is not a JSON object. A close or release that is refused drops
//!   the buffer when no other descriptor writes the file; fsync keeps it. A buffer emptied by
//!   `O_TRUNC` and not written since, and an empty `__attrs__` buffer, are not committed by a
//!   close (shells), only by fsync or the release.
//! - Another writer: while the mount holds no buffered edit it follows the source (at an
//!   open, and on the follower's tick); an edit buffered before the mount follows the change
//!   is dropped at its commit with ESTALE (its base was replaced; for chunks before any
//!   refusal, for `__attrs__` after the JSON check), and the mount follows then if the source
//!   changed since it last read it (not again for an edit marked stale at an earlier reload:
//!   edits made since that reload commit).
//! - A crash during a commit leaves the old or the new source, for every chunk of the commit.

use std::collections::BTreeMap;

use serde_json::Value;

/// A file of the modelled source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum File {
    /// `data/N.bin` of a middle chunk.
    Chunk(usize),
    /// `array.npy`.
    Npy,
    /// `__attrs__`.
    Attrs,
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ro,
    Wo,
    Rw,
    WoTrunc,
    RwTrunc,
}

impl Mode {
    pub fn flags(self) -> i32 {
        match self {
            Mode::Ro => libc::O_RDONLY,
            Mode::Wo => libc::O_WRONLY,
            Mode::Rw => libc::O_RDWR,
            Mode::WoTrunc => libc::O_WRONLY | libc::O_TRUNC,
            Mode::RwTrunc => libc::O_RDWR | libc::O_TRUNC,
        }
    }

    fn writes(self) -> bool {
        self != Mode::Ro
    }

    fn truncates(self) -> bool {
        matches!(self, Mode::WoTrunc | Mode::RwTrunc)
    }
}

/// The geometry the model needs: each chunk's decoded size, how many of its bytes
/// `array.npy` shows, and `array.npy`'s header.
#[derive(Debug, Clone)]
pub struct Geometry {
    pub chunk_len: Vec<usize>,
    pub shown: Vec<usize>,
    pub header: Vec<u8>,
}

impl Geometry {
    pub fn npy_len(&self) -> usize {
        self.header.len() + self.shown.iter().sum::<usize>()
    }
}

/// A chunk buffer.
#[derive(Debug, Clone)]
struct Buf {
    data: Vec<u8>,
    /// Emptied by `O_TRUNC` and not written since.
    trunc: bool,
    /// Made against a version another writer replaced.
    stale: bool,
}

/// The `__attrs__` buffer (only while dirty: a clean one shows what the file shows anyway).
#[derive(Debug, Clone)]
struct AttrsBuf {
    data: Vec<u8>,
    stale: bool,
}

#[derive(Debug, Clone)]
struct Handle {
    file: File,
    write: bool,
    opener: u8,
    /// Read-only descriptors of chunk files and `array.npy`: the version opened.
    pinned: Option<Vec<Vec<u8>>>,
}

/// What an operation returns: a value or an errno.
pub type Out<T> = Result<T, i32>;

/// The model's state.
#[derive(Debug, Clone)]
pub struct Model {
    pub geo: Geometry,
    /// What the source holds.
    pub disk: Vec<Vec<u8>>,
    pub disk_attrs: Value,
    /// The mount's current version (the source as it last read it).
    view: Vec<Vec<u8>>,
    /// What `__attrs__` shows when it has no buffer.
    attrs_text: Vec<u8>,
    /// Another writer changed the source and the mount has not followed yet.
    foreign: bool,
    bufs: BTreeMap<usize, Buf>,
    attrs: Option<AttrsBuf>,
    handles: BTreeMap<u64, Handle>,
    next: u64,
}

fn window(data: &[u8], off: usize, len: usize) -> Vec<u8> {
    let s = off.min(data.len());
    let e = off.saturating_add(len).min(data.len());
    data[s..e].to_vec()
}

/// How the mount renders attributes it read from the source.
pub fn render(v: &Value) -> Vec<u8> {
    b2fs::tree::view::json_file(v)
}

impl Model {
    /// A source holding `chunks` and `attrs`, just mounted.
    pub fn new(geo: Geometry, chunks: Vec<Vec<u8>>, attrs: Value) -> Model {
        Model {
            geo,
            view: chunks.clone(),
            disk: chunks,
            attrs_text: render(&attrs),
            disk_attrs: attrs,
            foreign: false,
            bufs: BTreeMap::new(),
            attrs: None,
            handles: BTreeMap::new(),
            next: 0,
        }
    }

    /// The open descriptors (model ids), in order.
    pub fn handles(&self) -> Vec<u64> {
        self.handles.keys().copied().collect()
    }

    /// Whether `h` was opened for writing.
    pub fn writes(&self, h: u64) -> bool {
        self.handles[&h].write
    }

    pub fn file_of(&self, h: u64) -> File {
        self.handles[&h].file
    }

    /// Whether the mount holds buffered edits (they hold back following another writer).
    fn pending(&self) -> bool {
        !self.bufs.is_empty() || self.attrs.is_some()
    }

    /// The mount follows the source, when nothing holds it back.
    fn follow(&mut self) {
        if self.foreign && !self.pending() {
            self.reload();
        }
    }

    fn reload(&mut self) {
        self.view = self.disk.clone();
        self.attrs_text = render(&self.disk_attrs);
        self.foreign = false;
    }

    /// The follower's tick (the adapter's thread, every second).
    pub fn tick(&mut self) {
        self.follow();
    }

    /// A buffer of chunk `c`, made from the current version on first use.
    fn buf(&mut self, c: usize) -> &mut Buf {
        let (view, foreign) = (&self.view, self.foreign);
        self.bufs.entry(c).or_insert_with(|| Buf {
            data: view[c].clone(),
            trunc: false,
            stale: foreign,
        })
    }

    fn other_writer(&self, file: File, except: Option<u64>) -> bool {
        self.handles
            .iter()
            .any(|(&h, x)| Some(h) != except && x.file == file && x.write)
    }

    pub fn open(&mut self, file: File, mode: Mode, opener: u8) -> Out<u64> {
        self.follow();
        let h = self.next;
        self.next += 1;
        let pinned = match (mode.writes(), file) {
            (false, File::Chunk(_) | File::Npy) => Some(self.view.clone()),
            _ => None,
        };
        self.handles.insert(
            h,
            Handle {
                file,
                write: mode.writes(),
                opener,
                pinned,
            },
        );
        if mode.truncates() {
            match file {
                File::Npy => {
                    self.handles.remove(&h);
                    return Err(libc::EINVAL);
                }
                File::Chunk(c) => {
                    let b = self.buf(c);
                    b.data.clear();
                    b.trunc = true;
                }
                File::Attrs => self.set_attrs(Vec::new()),
            }
        }
        Ok(h)
    }

    fn set_attrs(&mut self, data: Vec<u8>) {
        let stale = self.foreign || self.attrs.as_ref().is_some_and(|a| a.stale);
        self.attrs = Some(AttrsBuf { data, stale });
    }

    fn attrs_shown(&self) -> &[u8] {
        self.attrs.as_ref().map_or(&self.attrs_text, |a| &a.data)
    }

    /// What `array.npy` shows to a reader of chunk versions `chunk(k)`; `Err(EIO)` when a
    /// buffer is shorter than the part of its chunk the window needs.
    fn npy_window(&self, chunk: &dyn Fn(usize) -> Vec<u8>, off: usize, len: usize) -> Out<Vec<u8>> {
        let total = self.geo.npy_len();
        let end = off.saturating_add(len).min(total);
        let mut out = Vec::new();
        let mut pos = 0;
        let mut piece = |bytes: &[u8], need: usize, out: &mut Vec<u8>| -> Out<()> {
            let (s, e) = (pos, pos + need);
            pos = e;
            let (ws, we) = (off.max(s), end.min(e));
            if ws >= we {
                return Ok(());
            }
            let src = bytes.get(ws - s..we - s).ok_or(libc::EIO)?;
            out.extend_from_slice(src);
            Ok(())
        };
        piece(&self.geo.header, self.geo.header.len(), &mut out)?;
        for k in 0..self.geo.shown.len() {
            piece(&chunk(k), self.geo.shown[k], &mut out)?;
        }
        Ok(out)
    }

    pub fn read(&self, h: u64, off: usize, len: usize) -> Out<Vec<u8>> {
        let x = &self.handles[&h];
        match (x.file, &x.pinned) {
            (File::Chunk(c), Some(p)) => Ok(window(&p[c], off, len)),
            (File::Chunk(c), None) => {
                let data = self.bufs.get(&c).map_or(&self.view[c], |b| &b.data);
                Ok(window(data, off, len))
            }
            (File::Npy, Some(p)) => self.npy_window(&|k| p[k].clone(), off, len),
            (File::Npy, None) => self.npy_window(
                &|k| {
                    self.bufs
                        .get(&k)
                        .map_or_else(|| self.view[k].clone(), |b| b.data.clone())
                },
                off,
                len,
            ),
            (File::Attrs, _) => Ok(window(self.attrs_shown(), off, len)),
        }
    }

    /// The size `stat` shows.
    pub fn size(&self, file: File) -> u64 {
        (match file {
            File::Chunk(c) => self
                .bufs
                .get(&c)
                .map_or(self.view[c].len(), |b| b.data.len()),
            File::Npy => self.geo.npy_len(),
            File::Attrs => self.attrs_shown().len(),
        }) as u64
    }

    pub fn write(&mut self, h: u64, off: usize, data: &[u8]) -> Out<usize> {
        let x = &self.handles[&h];
        if !x.write {
            return Err(libc::EBADF);
        }
        let end = off + data.len();
        match x.file {
            File::Chunk(c) => {
                if end > self.geo.chunk_len[c] {
                    return Err(libc::EFBIG);
                }
                let b = self.buf(c);
                if b.data.len() < end {
                    b.data.resize(end, 0);
                }
                b.data[off..end].copy_from_slice(data);
                b.trunc = false;
            }
            File::Npy => {
                if end > self.geo.npy_len() {
                    return Err(libc::EFBIG);
                }
                let hl = self.geo.header.len();
                if off < hl {
                    let n = (hl - off).min(data.len());
                    if data[..n] != self.geo.header[off..off + n] {
                        return Err(libc::EINVAL);
                    }
                }
                // Where each data byte lands: (chunk, offset in it).
                let mut places = Vec::new();
                let mut pos = hl;
                for k in 0..self.geo.shown.len() {
                    let (s, e) = (pos, pos + self.geo.shown[k]);
                    pos = e;
                    let (ws, we) = (off.max(s), end.min(e));
                    if ws < we {
                        places.push((k, ws - s, ws - off, we - ws));
                    }
                }
                // A chunk whose buffer is shorter than its shape: refused, nothing written.
                for &(k, at, _, n) in &places {
                    let have = self
                        .bufs
                        .get(&k)
                        .map_or(self.view[k].len(), |b| b.data.len());
                    if at + n > have {
                        return Err(libc::EINVAL);
                    }
                }
                for (k, at, from, n) in places {
                    let b = self.buf(k);
                    b.data[at..at + n].copy_from_slice(&data[from..from + n]);
                    b.trunc = false;
                }
            }
            File::Attrs => {
                let mut d = self.attrs_shown().to_vec();
                if d.len() < end {
                    d.resize(end, 0);
                }
                d[off..end].copy_from_slice(data);
                self.set_attrs(d);
            }
        }
        Ok(data.len())
    }

    /// `truncate(2)` of `file` (no descriptor).
    pub fn truncate(&mut self, file: File, size: usize) -> Out<()> {
        match file {
            File::Npy => {
                return if size == self.geo.npy_len() {
                    Ok(())
                } else {
                    Err(libc::EINVAL)
                };
            }
            File::Chunk(c) => {
                if size > self.geo.chunk_len[c] {
                    return Err(libc::EFBIG);
                }
                let b = self.buf(c);
                b.data.resize(size, 0);
                b.trunc = false;
            }
            File::Attrs => {
                let mut d = self.attrs_shown().to_vec();
                d.resize(size, 0);
                self.set_attrs(d);
            }
        }
        if self.other_writer(file, None) {
            return Ok(());
        }
        let res = self.commit(file, true);
        if res.is_err() {
            self.drop_pending(file);
        }
        res
    }

    /// The chunks a commit of `file` takes (`durable`: not a close).
    fn commit_set(&self, file: File, durable: bool) -> Vec<usize> {
        let keys: Vec<usize> = match file {
            File::Chunk(c) => vec![c],
            File::Npy => self.bufs.keys().copied().collect(),
            File::Attrs => Vec::new(),
        };
        keys.into_iter()
            .filter(|k| {
                self.bufs
                    .get(k)
                    .is_some_and(|b| !(b.data.is_empty() && b.trunc && !durable))
            })
            .collect()
    }

    /// What a commit of `file` would store (chunks replaced, attributes), or its errno.
    pub fn planned(&self, file: File, durable: bool) -> Out<(Vec<Vec<u8>>, Value)> {
        let mut disk = self.disk.clone();
        let mut attrs = self.disk_attrs.clone();
        if file == File::Attrs {
            let Some(a) = &self.attrs else {
                return Ok((disk, attrs));
            };
            if a.data.is_empty() && !durable {
                return Ok((disk, attrs));
            }
            match serde_json::from_slice::<Value>(&a.data) {
                Ok(v @ Value::Object(_)) => {
                    if a.stale {
                        return Err(libc::ESTALE);
                    }
                    attrs = v;
                }
                _ => return Err(libc::EINVAL),
            }
            return Ok((disk, attrs));
        }
        let set = self.commit_set(file, durable);
        // An edit made against a version another writer replaced is dropped, whatever else
        // is wrong with it.
        if set.iter().any(|k| self.bufs[k].stale) {
            return Err(libc::ESTALE);
        }
        for &k in &set {
            if self.bufs[&k].data.len() != self.geo.chunk_len[k] {
                return Err(libc::EINVAL);
            }
        }
        for &k in &set {
            disk[k] = self.bufs[&k].data.clone();
        }
        Ok((disk, attrs))
    }

    /// Commits the buffers of `file`.
    fn commit(&mut self, file: File, durable: bool) -> Out<()> {
        let set = self.commit_set(file, durable);
        match self.planned(file, durable) {
            Ok((disk, attrs)) => {
                let changed = disk != self.disk || attrs != self.disk_attrs;
                if file == File::Attrs {
                    if let Some(a) = self.attrs.take() {
                        if a.data.is_empty() && !durable {
                            self.attrs = Some(a);
                            return Ok(());
                        }
                        // The file shows what was written.
                        self.attrs_text = a.data;
                    }
                } else {
                    for k in &set {
                        self.bufs.remove(k);
                    }
                }
                if changed || !set.is_empty() {
                    self.disk = disk.clone();
                    self.view = disk;
                    self.disk_attrs = attrs;
                }
                Ok(())
            }
            Err(libc::ESTALE) => {
                if file == File::Attrs {
                    self.attrs = None;
                } else {
                    for k in &set {
                        self.bufs.remove(k);
                    }
                }
                // The mount re-reads only when the source changed since it last read it: an
                // edit marked stale at an earlier re-read leaves the edits made since alone.
                if self.foreign {
                    self.reload();
                }
                Err(libc::ESTALE)
            }
            Err(e) => Err(e),
        }
    }

    /// Forgets the buffered edit of `file` after a refused or failed commit.
    fn drop_pending(&mut self, file: File) {
        match file {
            File::Chunk(c) => {
                self.bufs.remove(&c);
            }
            File::Npy => self.bufs.clear(),
            File::Attrs => self.attrs = None,
        }
    }

    /// `close(2)` of descriptor `h` by process `by`.
    pub fn flush(&mut self, h: u64, by: u8) -> Out<()> {
        let x = &self.handles[&h];
        if !x.write || x.opener != by {
            return Ok(());
        }
        let file = x.file;
        let res = self.commit(file, false);
        if let Err(e) = res
            && e == libc::EINVAL
            && !self.other_writer(file, Some(h))
        {
            self.drop_pending(file);
        }
        res
    }

    pub fn fsync(&mut self, h: u64) -> Out<()> {
        let x = &self.handles[&h];
        if !x.write {
            return Ok(());
        }
        let file = x.file;
        self.commit(file, true)
    }

    /// The last close of `h`.
    pub fn release(&mut self, h: u64) -> Out<()> {
        let x = self.handles.remove(&h).expect("open handle");
        if !x.write {
            return Ok(());
        }
        let res = self.commit(x.file, true);
        if res.is_err() && !self.other_writer(x.file, None) {
            self.drop_pending(x.file);
        }
        res
    }

    /// An editor writes `text` to a scratch file and renames it over `__attrs__`.
    pub fn rename_over_attrs(&mut self, text: &[u8]) -> Out<()> {
        self.set_attrs(text.to_vec());
        let res = self.commit(File::Attrs, true);
        if res.is_err() {
            self.attrs = None;
        }
        res
    }

    /// Another writer stores `data` as chunk `k` (and `attrs`, if given).
    pub fn foreign(&mut self, k: usize, data: Vec<u8>, attrs: Option<Value>) {
        self.disk[k] = data;
        if let Some(a) = attrs {
            self.disk_attrs = a;
        }
        self.foreign = true;
        for b in self.bufs.values_mut() {
            b.stale = true;
        }
        if let Some(a) = &mut self.attrs {
            a.stale = true;
        }
    }

    /// The process was killed (after a commit left the source as `disk`/`attrs`) and the
    /// source mounted again.
    pub fn restart(&mut self, disk: Vec<Vec<u8>>, attrs: Value) {
        *self = Model::new(self.geo.clone(), disk, attrs);
    }
}
