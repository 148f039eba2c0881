//! Backing files for FUSE passthrough (`-o passthrough`, read-only trees): per data file
//! (a chunk file, `array.npy`, `table.npy`), an anonymous memory file (`memfd_create`) that
//! holds its whole decoded content, so that the kernel can serve reads and page faults of
//! the file from it without asking b2fs (see `src/fuse/passthrough.rs` for the kernel side).
//!
//! - **Filled once per version**: when the caller asks ([`Tree::backing_file`]; the FUSE
//!   adapter asks from a thread of its own once the first opens of the file are closed),
//!   through the tree's own read path on a descriptor the caller opened ([`Tree::read`],
//!   sequential 1 MiB reads, so the reader prefetches and decodes ahead on every core as for
//!   `cat`), then sealed against writes and size changes. The next open of the same version
//!   reuses it with no decode.
//! - **One version per file**: a backing remembers the version its descriptor pinned (the
//!   array versions and NPY view, by identity; see [`super::handle::Pinned`]). An open that
//!   pins another version (another writer changed the source and the tree followed) gets a
//!   new backing; the old one is dropped.
//! - **Bounded**: the files kept add up to at most the budget
//!   ([`super::TreeOptions::backing_budget`]). A file larger than the budget is never backed;
//!   a file that fits once older unused backings are dropped (least recently used first)
//!   replaces them; when the budget is taken by backings still in use, the file is not backed.
//!   The caller then serves the file the ordinary way. Backings the caller still holds (an
//!   open the kernel serves from one) are never dropped, and a backing replaced by a new
//!   version while still held keeps counting until its holders let go (its memory is freed
//!   at its last close; a process that still maps the file after that holds the memory
//!   until its last unmap, which the tree cannot see).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};

use super::handle::Pinned;
use super::inode::Located;
use super::layout::FileKind;
use super::{Entry, Tree};
use crate::container::npy::{Npy, TableNpy};
use crate::reader::{ArrayId, ChunkStore};

/// Size of each read that fills a backing file.
const FILL_READ: u32 = 1 << 20;

/// Counters of the backing files of a tree (for tests, logs and benchmarks).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BackingStats {
    /// Backing files filled (each one decode of a whole file).
    pub fills: u64,
    /// Opens that reused a backing file kept from an earlier open.
    pub reuses: u64,
    /// Opens of a data file that got no backing (above the budget, budget in use, or a fill
    /// that failed).
    pub refused: u64,
    /// Backing files dropped (for room, or because their version was replaced).
    pub dropped: u64,
    /// Bytes of the backing files kept now, and of replaced ones still held open.
    pub bytes: u64,
    /// Backing files kept now.
    pub files: u64,
}

/// What an open would get from [`Tree::backing_file`] without waiting ([`Tree::backing_now`]).
#[derive(Debug)]
pub enum BackingNow {
    /// The backing kept from an earlier open of the same version (counted as a reuse).
    Kept(Arc<File>),
    /// The file is never backed: a writable tree, or not a chunk file, `array.npy` or
    /// `table.npy`.
    NotBacked,
    /// Ask [`Tree::backing_file`], which may fill the file (one decode of all of it), wait
    /// for another open's fill, or refuse it (the budget).
    Fill,
}

/// The version a backing file holds: the identities of what its descriptor pinned. Weak
/// references keep the addresses from being reused while the entry exists.
#[derive(Debug)]
struct Version {
    stores: Vec<(ArrayId, Weak<dyn ChunkStore>)>,
    npy: Option<Weak<Npy>>,
    table: Option<Weak<TableNpy>>,
}

impl Version {
    fn of(p: &Pinned) -> Version {
        Version {
            stores: p
                .stores
                .iter()
                .map(|(a, s)| (*a, Arc::downgrade(s)))
                .collect(),
            npy: p.npy.as_ref().map(Arc::downgrade),
            table: p.table.as_ref().map(Arc::downgrade),
        }
    }

    /// Whether `p` pins this version.
    fn is(&self, p: &Pinned) -> bool {
        fn same<T: ?Sized>(w: &Weak<T>, a: &Arc<T>) -> bool {
            std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(a))
        }
        fn same_opt<T: ?Sized>(w: &Option<Weak<T>>, a: &Option<Arc<T>>) -> bool {
            match (w, a) {
                (None, None) => true,
                (Some(w), Some(a)) => same(w, a),
                _ => false,
            }
        }
        self.stores.len() == p.stores.len()
            && self
                .stores
                .iter()
                .zip(&p.stores)
                .all(|((a, w), (b, s))| a == b && same(w, s))
            && same_opt(&self.npy, &p.npy)
            && same_opt(&self.table, &p.table)
    }
}

#[derive(Debug)]
struct Slot {
    file: Arc<File>,
    size: u64,
    version: Version,
    used_at: u64,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes of the kept files, those being filled and the retired ones still held.
    used: u64,
    /// Backings dropped from `files` while still held (a newer version replaced them under
    /// an open descriptor), with their sizes: they hold memory until released.
    retired: Vec<(Weak<File>, u64)>,
    clock: u64,
    files: HashMap<u64, Slot>,
    /// Inodes being filled now (a second open of one waits for the first).
    filling: HashSet<u64>,
    /// Inodes whose refusal was logged (one log line per file).
    logged: HashSet<u64>,
    stats: BackingStats,
}

impl State {
    /// The kept backing of `ino` when it holds version `pinned` of `size` bytes, counted as
    /// a reuse; ticks the clock either way.
    fn reuse(&mut self, ino: u64, pinned: &Pinned, size: u64) -> Option<Arc<File>> {
        self.clock += 1;
        let slot = self.files.get_mut(&ino)?;
        if !slot.version.is(pinned) || slot.size != size {
            return None;
        }
        slot.used_at = self.clock;
        self.stats.reuses += 1;
        Some(slot.file.clone())
    }

    /// Drops the backing of `ino`, if kept. One still held by the caller (an open the
    /// kernel serves from it: the file was replaced by a newer version meanwhile) stays
    /// counted in `used` until its holders let go (see [`State::forget_released`]).
    fn drop_slot(&mut self, ino: u64) {
        if let Some(old) = self.files.remove(&ino) {
            self.stats.dropped += 1;
            match Arc::strong_count(&old.file) {
                1 => self.used -= old.size,
                _ => self.retired.push((Arc::downgrade(&old.file), old.size)),
            }
        }
    }

    /// Stops counting the retired backings nobody holds any more.
    fn forget_released(&mut self) {
        let mut freed = 0;
        self.retired.retain(|(file, size)| {
            let held = file.strong_count() > 0;
            if !held {
                freed += size;
            }
            held
        });
        self.used -= freed;
    }

    /// Drops unused backings, least recently used first, until `size` more bytes fit in
    /// `budget`; false when they cannot (the rest is in use).
    fn make_room(&mut self, size: u64, budget: u64) -> bool {
        self.forget_released();
        while self.used.saturating_add(size) > budget {
            let victim = self
                .files
                .iter()
                .filter(|(_, s)| Arc::strong_count(&s.file) == 1)
                .min_by_key(|(_, s)| s.used_at)
                .map(|(&ino, _)| ino);
            match victim {
                Some(ino) => self.drop_slot(ino),
                None => return false,
            }
        }
        true
    }
}

/// The backing files of a tree (see the module doc).
#[derive(Debug)]
pub(crate) struct Backings {
    state: Mutex<State>,
    filled: Condvar,
}

impl Backings {
    pub(crate) fn new() -> Backings {
        Backings {
            state: Mutex::default(),
            filled: Condvar::new(),
        }
    }
}

impl Tree {
    /// The backing file of file `ino` for passthrough, holding the whole content that the
    /// read-only descriptor `fh` (opened for `ino`) reads: kept from an earlier open of the
    /// same version, or filled now through `fh`. `None` when `ino` is not backed: a writable
    /// tree, a file other than a chunk file, `array.npy` or `table.npy`, a file that does not
    /// fit the budget (see the module doc), or a fill that failed (logged; reads through the
    /// tree then report the error as usual). The caller keeps the returned file for as long
    /// as the kernel may use it: a held backing is never dropped for room.
    pub fn backing_file(&self, ino: u64, fh: u64) -> Option<Arc<File>> {
        if !self.backs_files() || !self.backed_kind(ino) {
            return None;
        }
        let pinned = self.handles.pinned(fh, ino)?;
        let size = self.file_size(ino, self.entry(ino).ok()?).ok()?;
        let budget = self.options.backing_budget;
        let b = &self.backings;
        let mut st = b.state.lock();
        loop {
            if !st.filling.contains(&ino) {
                break;
            }
            b.filled.wait(&mut st);
        }
        if let Some(file) = st.reuse(ino, &pinned, size) {
            return Some(file);
        }
        let now = st.clock;
        st.drop_slot(ino);
        if size > budget || !st.make_room(size, budget) {
            st.stats.refused += 1;
            if st.logged.insert(ino) {
                log::info!(
                    "passthrough: inode {ino} ({size} bytes) does not fit the backing budget \
                     ({budget} bytes, {} in use): served through b2fs",
                    st.used
                );
            }
            return None;
        }
        st.used += size;
        st.filling.insert(ino);
        drop(st);
        let started = std::time::Instant::now();
        let res = self.fill_backing(ino, fh, size);
        let mut st = b.state.lock();
        st.filling.remove(&ino);
        b.filled.notify_all();
        match res {
            Ok(file) => {
                log::info!(
                    "passthrough: inode {ino}: backing file filled ({size} bytes in {:.3} s)",
                    started.elapsed().as_secs_f64()
                );
                let file = Arc::new(file);
                st.stats.fills += 1;
                st.files.insert(
                    ino,
                    Slot {
                        file: file.clone(),
                        size,
                        version: Version::of(&pinned),
                        used_at: now,
                    },
                );
                Some(file)
            }
            Err(e) => {
                st.used -= size;
                st.stats.refused += 1;
                drop(st);
                log::warn!(
                    "passthrough: inode {ino}: cannot fill its backing file ({e}): served \
                     through b2fs"
                );
                None
            }
        }
    }

    /// What [`Tree::backing_file`] gives the open `fh` of `ino` when that needs no fill and
    /// no wait: for an open that must not hold its thread for a whole decode (the FUSE
    /// adapter answers [`BackingNow::Fill`] opens the ordinary way and fills the file later,
    /// on a thread of its own).
    pub fn backing_now(&self, ino: u64, fh: u64) -> BackingNow {
        if !self.backs_files() || !self.backed_kind(ino) {
            return BackingNow::NotBacked;
        }
        let (Some(pinned), Some(size)) = (
            self.handles.pinned(fh, ino),
            self.entry(ino)
                .ok()
                .and_then(|e| self.file_size(ino, e).ok()),
        ) else {
            return BackingNow::Fill; // `backing_file` tells why (cheaply)
        };
        let mut st = self.backings.state.lock();
        if st.filling.contains(&ino) {
            return BackingNow::Fill;
        }
        match st.reuse(ino, &pinned, size) {
            Some(file) => BackingNow::Kept(file),
            None => BackingNow::Fill,
        }
    }

    /// Whether this tree backs files for passthrough: read-only, with a budget
    /// ([`super::TreeOptions::backing_budget`], `-o passthrough`).
    pub fn backs_files(&self) -> bool {
        !self.options.writable && self.options.backing_budget > 0
    }

    /// Drops every backing file kept (the kernel refused passthrough: none will be used).
    pub fn drop_backing_files(&self) {
        let mut st = self.backings.state.lock();
        let inos: Vec<u64> = st.files.keys().copied().collect();
        for ino in inos {
            st.drop_slot(ino);
        }
    }

    /// Counters of the backing files.
    pub fn backing_stats(&self) -> BackingStats {
        let mut st = self.backings.state.lock();
        st.forget_released();
        BackingStats {
            bytes: st.used,
            files: st.files.len() as u64,
            ..st.stats
        }
    }

    /// Whether `ino` is a file passthrough backs: a chunk file, `array.npy`, `table.npy`.
    fn backed_kind(&self, ino: u64) -> bool {
        match self.inodes.locate(ino) {
            Located::Chunk(_) => true,
            _ => matches!(
                self.entry(ino),
                Ok(Entry::File(FileKind::Npy(..) | FileKind::TableNpy(..)))
            ),
        }
    }

    /// A new memory file holding the `size` bytes `fh` reads of `ino`, sealed.
    fn fill_backing(&self, ino: u64, fh: u64, size: u64) -> Result<File, String> {
        let io = |e: std::io::Error| format!("memory file: {e}");
        use rustix::fs::{MemfdFlags, SealFlags};
        let fd = rustix::fs::memfd_create(
            "b2fs-backing",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|e| io(e.into()))?;
        let file = File::from(fd);
        file.set_len(size).map_err(io)?;
        let mut pos = 0u64;
        while pos < size {
            let want = u32::try_from((size - pos).min(u64::from(FILL_READ))).unwrap_or(FILL_READ);
            let data = self
                .read(ino, fh, pos, want)
                .map_err(|e| super::display_chain(&e))?;
            if data.is_empty() {
                return Err(format!("the file ended at {pos} of {size} bytes"));
            }
            file.write_all_at(&data, pos).map_err(io)?;
            pos += data.len() as u64;
        }
        rustix::fs::fcntl_add_seals(
            &file,
            SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
        )
        .map_err(|e| io(e.into()))?;
        Ok(file)
    }
}
