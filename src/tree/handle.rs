//! Open file handles: which inode each is for, its [`Mode`] decided at open (the version a
//! read-only one reads, or what a writer's writes change, its writability checked once then),
//! and its [`Access`] (the reader's one access-pattern detector, shared with `array.npy` and
//! the Zarr view), from which every read gets a [`ReadHint`].
//!
//! Each handle remembers the process that opened it ([`Pid`]): only that process's close
//! commits at FLUSH (see [`super::Tree::flush_by`]).
//!
//! The table has its own lock, taken first whenever another tree lock is needed too (see
//! the lock order in [`super`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::TreeError;
use super::edit::WriteTarget;
use crate::container::npy::{Npy, TableNpy};
use crate::reader::{Access, ArrayId, ChunkStore, ReadHint};

/// A process as the tree sees a caller: its thread-group id (what `getpid(2)` returns in it).
/// The adapter maps the kernel's thread id to it; in-process callers use [`Pid::current`].
/// Only compared for equality: whether a close comes from the process that opened the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pid(pub u32);

impl Pid {
    /// This process.
    pub fn current() -> Pid {
        Pid(std::process::id())
    }
}

/// What a read-only descriptor reads, fixed at open: the versions of the arrays its file
/// shows, and the generated content or NPY view of that moment. Every read through it sees
/// that one version (or fails), never bytes of two.
#[derive(Debug, Default)]
pub(crate) struct Pinned {
    /// Per array the file shows: the version opened.
    pub(crate) stores: Vec<(ArrayId, Arc<dyn ChunkStore>)>,
    /// `array.npy`: its view (header, shape) of that version.
    pub(crate) npy: Option<Arc<Npy>>,
    /// `table.npy`: its view of that version.
    pub(crate) table: Option<Arc<TableNpy>>,
    /// A CTable's `table.npy`: its view of that version (`super::ctable`).
    pub(crate) ctable: Option<Arc<super::ctable::CTableView>>,
    /// A generated file's content.
    pub(crate) content: Option<Arc<[u8]>>,
    /// `array.npy`: the scan through this descriptor, read a band at a time
    /// ([`crate::reader::BandStream`]).
    pub(crate) bands: parking_lot::Mutex<Option<crate::reader::BandStream>>,
    /// Once another writer replaced this version: the version now, which this descriptor's
    /// reads into the kernel's page cache read ([`super::Tree::read_shared`]), kept while it
    /// stays the version now so that its state (its band stream) lives from one such read
    /// to the next.
    pub(crate) current: parking_lot::Mutex<Option<Arc<Pinned>>>,
}

impl Pinned {
    /// The version of `array` pinned, if the file shows it.
    pub(crate) fn store(&self, array: ArrayId) -> Option<&Arc<dyn ChunkStore>> {
        self.stores
            .iter()
            .find(|(a, _)| *a == array)
            .map(|(_, s)| s)
    }
}

/// What a handle is for, decided once at open.
#[derive(Debug, Clone)]
pub(crate) enum Mode {
    /// Read-only: the version it reads (every read sees that one version, or fails).
    Read(Arc<Pinned>),
    /// Open for writing: what its writes change. The tree and the source were found writable
    /// at open ([`super::Tree::write_target`]), so a write probes nothing on disk; writers
    /// read the file's buffer and the current version, so they see their own writes.
    Write(WriteTarget),
}

impl Mode {
    fn writes(&self) -> bool {
        matches!(self, Mode::Write(_))
    }
}

/// Per-open-file state.
#[derive(Debug, Clone)]
struct Handle {
    ino: u64,
    /// Its reads so far: the access pattern every read's hint comes from.
    access: Access,
    /// Read-only or writing (its opener's flush and its release commit the file's buffer).
    mode: Mode,
    /// The process that opened it.
    opener: Pid,
}

/// The open handles of a tree.
#[derive(Debug)]
pub(crate) struct Handles {
    map: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
}

impl Handles {
    pub(crate) fn new() -> Handles {
        Handles {
            map: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    /// Registers a new handle of `ino` in `mode` opened by `opener`; returns its number.
    pub(crate) fn open(&self, ino: u64, mode: Mode, opener: Pid) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.map.lock().insert(
            fh,
            Handle {
                ino,
                access: Access::default(),
                mode,
                opener,
            },
        );
        fh
    }

    /// Forgets `fh`; returns its inode and whether it was opened for writing.
    pub(crate) fn close(&self, fh: u64) -> Result<(u64, bool), TreeError> {
        let h = self
            .map
            .lock()
            .remove(&fh)
            .ok_or(TreeError::BadHandle(fh))?;
        Ok((h.ino, h.mode.writes()))
    }

    /// Records a read of `size` bytes at `offset` through `fh` (which must be open for
    /// `ino`) and says how it continues the handle's earlier reads, and what it reads.
    pub(crate) fn record_read(
        &self,
        fh: u64,
        ino: u64,
        offset: u64,
        size: u32,
    ) -> Result<(ReadHint, Option<Arc<Pinned>>, bool), TreeError> {
        let mut map = self.map.lock();
        let h = map
            .get_mut(&fh)
            .filter(|h| h.ino == ino)
            .ok_or(TreeError::BadHandle(fh))?;
        let first = h.access.reads() == 0;
        let hint = h.access.record(offset, u64::from(size));
        let pinned = match &h.mode {
            Mode::Read(p) => Some(p.clone()),
            Mode::Write(_) => None,
        };
        Ok((hint, pinned, first))
    }

    /// What the read-only `fh`, open for `ino`, reads (`None` for a writer or another file).
    pub(crate) fn pinned(&self, fh: u64, ino: u64) -> Option<Arc<Pinned>> {
        match self.map.lock().get(&fh) {
            Some(Handle {
                ino: i,
                mode: Mode::Read(p),
                ..
            }) if *i == ino => Some(p.clone()),
            _ => None,
        }
    }

    /// Makes a read-only `fh` read `pinned` from now on, when its only read so far is the one
    /// that failed (no other read, in flight or done, used the old version); returns whether
    /// it did.
    pub(crate) fn repin(&self, fh: u64, pinned: Arc<Pinned>) -> bool {
        match self.map.lock().get_mut(&fh) {
            Some(h) if !h.mode.writes() && h.access.reads() == 1 => {
                h.mode = Mode::Read(pinned);
                true
            }
            _ => false,
        }
    }

    /// Counts `len` bytes at `offset` as read by `fh` for its stream (pages b2fs handed to
    /// the kernel's cache for it, which its reader will not ask for).
    pub(crate) fn credit(&self, fh: u64, offset: u64, len: u64) {
        if let Some(h) = self.map.lock().get_mut(&fh) {
            h.access.credit(offset, len);
        }
    }

    /// What a write through `fh` changes, when it is open for `ino` and for writing.
    pub(crate) fn write_target(&self, fh: u64, ino: u64) -> Option<WriteTarget> {
        match self.map.lock().get(&fh) {
            Some(Handle {
                ino: i,
                mode: Mode::Write(target),
                ..
            }) if *i == ino => Some(*target),
            _ => None,
        }
    }

    /// Whether `fh` is open for writing.
    pub(crate) fn is_writer(&self, fh: u64) -> bool {
        self.map.lock().get(&fh).is_some_and(|h| h.mode.writes())
    }

    /// The process that opened `fh`, when it is open for writing.
    pub(crate) fn writer_opened_by(&self, fh: u64) -> Option<Pid> {
        self.map
            .lock()
            .get(&fh)
            .filter(|h| h.mode.writes())
            .map(|h| h.opener)
    }

    /// Whether a handle other than `except` has `ino` open for writing.
    pub(crate) fn other_writer(&self, ino: u64, except: Option<u64>) -> bool {
        self.map
            .lock()
            .iter()
            .any(|(&fh, h)| Some(fh) != except && h.ino == ino && h.mode.writes())
    }

    /// Whether exactly one handle has `ino` open.
    pub(crate) fn sole_reader(&self, ino: u64) -> bool {
        self.map.lock().values().filter(|h| h.ino == ino).count() == 1
    }

    /// Whether any handle has `ino` open.
    pub(crate) fn is_open(&self, ino: u64) -> bool {
        self.while_locked(|open| open(ino))
    }

    /// Runs `f` with the handles locked, given whether a handle has an inode open: no open
    /// registers meanwhile (the lock order: `handles` before `edits` and `scratch`, which
    /// `f` may take).
    pub(crate) fn while_locked<R>(&self, f: impl FnOnce(&dyn Fn(u64) -> bool) -> R) -> R {
        let map = self.map.lock();
        f(&|ino| map.values().any(|h| h.ino == ino))
    }

    /// Number of open handles.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::Pattern;

    #[test]
    fn handles_report_their_stream_in_the_hint() {
        let h = Handles::new();
        let fh = h.open(7, Mode::Read(Arc::default()), Pid(1));
        let (hint, _, first) = h.record_read(fh, 7, 0, 4096).unwrap();
        assert!(first);
        assert_eq!((hint.pattern, hint.stream), (Pattern::FirstAtZero, 4096));
        let (hint, _, first) = h.record_read(fh, 7, 1 << 30, 4096).unwrap();
        assert!(!first);
        assert_eq!((hint.pattern, hint.stream), (Pattern::Random, 4096));
        assert!(h.record_read(fh, 8, 0, 1).is_err());
    }
}
