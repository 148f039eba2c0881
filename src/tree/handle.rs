//! Open file handles: which inode each is for, whether it writes, and its access pattern
//! (where its next sequential read starts), from which every read gets a [`ReadHint`].
//!
//! The table has its own lock, taken first whenever another tree lock is needed too (see
//! the lock order in [`super`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::TreeError;
use crate::reader::{Pattern, ReadHint};

/// Per-open-file state.
#[derive(Debug, Clone, Copy)]
struct Handle {
    ino: u64,
    /// Where a sequential scan's next read starts.
    next: u64,
    /// Every read so far continued the previous one, starting at offset 0.
    from_start: bool,
    /// Bytes asked for by the reads so far (overlaps counted twice).
    bytes_read: u64,
    /// The furthest byte any read reached.
    max_end: u64,
    /// Opened for writing: its flush and release commit the file's buffer.
    write: bool,
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

    /// Registers a new handle of `ino`; returns its number.
    pub(crate) fn open(&self, ino: u64, write: bool) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.map.lock().insert(
            fh,
            Handle {
                ino,
                next: 0,
                from_start: true,
                bytes_read: 0,
                max_end: 0,
                write,
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
        Ok((h.ino, h.write))
    }

    /// Records a read of `size` bytes at `offset` through `fh` (which must be open for
    /// `ino`) and says how it continues the handle's earlier reads.
    pub(crate) fn record_read(
        &self,
        fh: u64,
        ino: u64,
        offset: u64,
        size: u32,
    ) -> Result<ReadHint, TreeError> {
        let mut map = self.map.lock();
        let h = map
            .get_mut(&fh)
            .filter(|h| h.ino == ino)
            .ok_or(TreeError::BadHandle(fh))?;
        let pattern = if offset == 0 && h.next == 0 {
            Pattern::FirstAtZero
        } else if offset == 0 || offset == h.next {
            Pattern::Sequential
        } else {
            Pattern::Random
        };
        h.from_start &= offset == h.next;
        h.next = offset.saturating_add(u64::from(size));
        h.bytes_read = h.bytes_read.saturating_add(u64::from(size));
        h.max_end = h.max_end.max(h.next);
        Ok(ReadHint {
            pattern,
            streaming: h.from_start,
            dense: h.bytes_read.saturating_mul(2) >= h.max_end,
        })
    }

    /// Whether `fh` is open for `ino` and for writing.
    pub(crate) fn writes(&self, fh: u64, ino: u64) -> bool {
        self.map
            .lock()
            .get(&fh)
            .is_some_and(|h| h.ino == ino && h.write)
    }

    /// Whether `fh` is open for writing.
    pub(crate) fn is_writer(&self, fh: u64) -> bool {
        self.map.lock().get(&fh).is_some_and(|h| h.write)
    }

    /// Whether a handle other than `except` has `ino` open for writing.
    pub(crate) fn other_writer(&self, ino: u64, except: Option<u64>) -> bool {
        self.map
            .lock()
            .iter()
            .any(|(&fh, h)| Some(fh) != except && h.ino == ino && h.write)
    }

    /// Whether exactly one handle has `ino` open.
    pub(crate) fn sole_reader(&self, ino: u64) -> bool {
        self.map.lock().values().filter(|h| h.ino == ino).count() == 1
    }

    /// Number of open handles.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}
