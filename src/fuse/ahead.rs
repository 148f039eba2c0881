//! Stream push-ahead: the pages of a file read through the page cache that a streaming reader
//! reads next, stored into the kernel's cache (`FUSE_NOTIFY_STORE`) ahead of it, in large
//! contiguous stores from a thread of its own, so that the kernel finds them and sends few
//! read requests.
//!
//! Why: the mount's readahead is one page (`set_readahead` of the daemon: a larger one reads
//! megabytes around every mmap fault), so the kernel splits a large `read(2)` of a page-cache
//! file (`np.load`, `dd bs=1M`, `cp`) into synchronous requests of the device's I/O size
//! (128 KiB), one round trip each, the reader waiting on every one.
//!
//! What a stream is: plain reads (larger than a page, or not a page fault) of one handle that
//! continue one another. From its second read on, this thread keeps the pages from the end of
//! the reader's last read up to [`AHEAD`] past it stored, reading them through the reader's
//! own handle (the version it opened; its reads prefetch and decode the chunks ahead as a scan
//! does). The kernel tells b2fs nothing about pages it serves from its cache, so every
//! [`TRIP`]-th page is left out: when the reader reaches it, the kernel asks for it (one round
//! trip of a page per `TRIP` bytes), and that read moves the stream on. A reader that stops
//! asks for nothing more, so nothing more is stored; a read that jumps elsewhere (or comes
//! through another handle) ends the stream.
//!
//! Locking (see [`super::push`]): a store locks the pages it fills, and waits for a page the
//! kernel has locked for a read request until that request is answered. This thread serves
//! no request, and no FUSE worker ever waits for it (workers only note their reads under a
//! short lock), so its stores always end. It never holds the lock while it reads or stores.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use fuser::{INodeNo, Notifier};

use crate::tree::Tree;

/// How far past the end of a stream's last read its pages are kept stored (under the reader
/// detector's stream gap, 8 MiB, so the thread's reads and the reader's count as one stream).
const AHEAD: u64 = 4 << 20;

/// Tuning knobs read from the environment while measuring (`B2FS_AHEAD_KB`,
/// `B2FS_AHEAD_STORE_KB`, `B2FS_AHEAD_THREADS`, `B2FS_AHEAD_OFF`).
fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ahead_bytes() -> u64 {
    static V: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *V.get_or_init(|| knob("B2FS_AHEAD_KB", AHEAD >> 10) << 10)
}

fn store_bytes() -> u64 {
    static V: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *V.get_or_init(|| knob("B2FS_AHEAD_STORE_KB", STORE >> 10).max(4) << 10)
}

/// Every page at a multiple of this offset is left for the kernel to ask for: the stream's
/// signal that its reader got there.
const TRIP: u64 = 1 << 20;

/// Bytes one store carries at most.
const STORE: u64 = 1 << 20;

/// The kernel's page, as a file offset.
const PAGE: u64 = crate::tree::PAGE as u64;

/// One stream of reads of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stream {
    /// The handle whose reads make it (and through which this thread reads ahead).
    fh: u64,
    /// End of the reader's furthest read.
    next: u64,
    /// Everything below this is stored (or read by the reader, or a trip page left out).
    pushed: u64,
    /// Where storing stops for now (`next + AHEAD` once the stream is confirmed).
    target: u64,
    /// Counts streams, so that the thread knows its read-ahead belongs to the one still there.
    epoch: u64,
    /// The file ended (or a store failed): nothing more to store.
    done: bool,
}

#[derive(Debug, Default)]
struct State {
    streams: HashMap<u64, Stream>,
    epochs: u64,
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The push-ahead thread's state; the thread ends when this is dropped.
#[derive(Debug)]
pub(crate) struct Ahead {
    shared: Arc<Shared>,
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_all();
    }
}

impl State {
    /// Notes a read of `size` bytes at `offset` of `ino` through `fh` (`plain`: not a page
    /// fault by its size and origin); returns whether it belongs to a stream this thread
    /// stores ahead of (the read is then no page fault, whatever its size: a trip page).
    fn reading(&mut self, ino: u64, fh: u64, offset: u64, size: u32, plain: bool) -> bool {
        let end = offset.saturating_add(u64::from(size));
        if let Some(s) = self.streams.get_mut(&ino) {
            if s.fh == fh && offset >= s.next && offset <= s.pushed && (plain || s.target > 0) {
                s.next = end;
                s.pushed = s.pushed.max(end);
                s.target = end.saturating_add(ahead_bytes());
                return true;
            }
        }
        if plain {
            self.epochs += 1;
            let s = Stream {
                fh,
                next: end,
                pushed: end,
                target: 0,
                epoch: self.epochs,
                done: false,
            };
            self.streams.insert(ino, s);
        } else if self.streams.get(&ino).is_some_and(|s| s.fh == fh) {
            // A fault elsewhere: the handle reads by mapping now.
            self.streams.remove(&ino);
        }
        false
    }

    /// The next piece to store: `(ino, fh, offset, len, epoch)`, skipping trip pages.
    fn next_piece(&mut self) -> Option<(u64, u64, u64, u64, u64)> {
        for (&ino, s) in &mut self.streams {
            if s.done {
                continue;
            }
            while s.pushed < s.target && s.pushed % TRIP == 0 {
                s.pushed += PAGE;
            }
            if s.pushed >= s.target {
                continue;
            }
            let at = s.pushed;
            let trip = (at / TRIP + 1) * TRIP;
            let end = s.target.min(trip).min(at + store_bytes());
            // Claimed: another thread takes the next piece.
            s.pushed = end;
            return Some((ino, s.fh, at, end - at, s.epoch));
        }
        None
    }
}

impl Ahead {
    /// Starts the thread that stores pages ahead of streams of `tree`'s files through
    /// `notifier`.
    pub(crate) fn start(tree: Weak<Tree>, notifier: Notifier) -> std::io::Result<Ahead> {
        let shared = Arc::new(Shared::default());
        if knob("B2FS_AHEAD_OFF", 0) == 1 {
            shared.lock().closed = true;
            return Ok(Ahead { shared });
        }
        for _ in 0..knob("B2FS_AHEAD_THREADS", 1).clamp(1, 4) {
            let theirs = shared.clone();
            let (tree, notifier) = (tree.clone(), notifier.clone());
            std::thread::Builder::new()
                .name("b2fs-ahead".into())
                .spawn(move || run(&theirs, &tree, &notifier))?;
        }
        Ok(Ahead { shared })
    }

    /// Notes a read of a file served through the page cache that streams may be stored ahead
    /// of (see the module doc); returns whether the read continues such a stream (it is then
    /// not a page fault, whatever its size).
    pub(crate) fn reading(&self, ino: u64, fh: u64, offset: u64, size: u32, plain: bool) -> bool {
        let mut state = self.shared.lock();
        if state.closed {
            return false;
        }
        let streaming = state.reading(ino, fh, offset, size, plain);
        let work = streaming && state.streams.get(&ino).is_some_and(|s| s.pushed < s.target);
        drop(state);
        if work {
            self.shared.wake.notify_one();
        }
        streaming
    }

    /// Forgets the streams of handle `fh` (released).
    pub(crate) fn released(&self, fh: u64) {
        self.shared.lock().streams.retain(|_, s| s.fh != fh);
    }
}

/// The thread: stores the pieces [`State::next_piece`] names until the [`Ahead`] is dropped.
fn run(shared: &Shared, tree: &Weak<Tree>, notifier: &Notifier) {
    loop {
        let piece = {
            let mut state = shared.lock();
            loop {
                if state.closed {
                    return;
                }
                if let Some(p) = state.next_piece() {
                    break p;
                }
                state = shared.wake.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        };
        let (ino, fh, at, len, epoch) = piece;
        let Some(tree) = tree.upgrade() else { return };
        let len32 = u32::try_from(len).unwrap_or(u32::MAX);
        let data = tree.read(ino, fh, at, len32);
        drop(tree);
        let mut state = shared.lock();
        let Some(s) = state.streams.get_mut(&ino).filter(|s| s.epoch == epoch) else {
            continue; // the stream ended meanwhile
        };
        let data = match data {
            Ok(d) if !d.is_empty() => d,
            _ => {
                s.done = true;
                continue;
            }
        };
        let end = at + data.len() as u64;
        if (data.len() as u64) < len {
            s.done = true; // the end of the file
        }
        // The reader may have passed part of it (its own reads filled those pages).
        let from = s.next.max(at).min(end);
        drop(state);
        if from < end {
            let skip = usize::try_from(from - at).unwrap_or(usize::MAX);
            if let Err(e) = notifier.store(INodeNo(ino), from, &data[skip..]) {
                log::debug!("ahead store of inode {ino} at {from}: {e}");
                if let Some(s) = shared.lock().streams.get_mut(&ino) {
                    s.done = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_stream_stores_ahead_of_its_reader_and_leaves_its_trip_pages_out() {
        let mut st = State::default();
        // The first plain read starts a stream, without storing anything yet.
        assert!(!st.reading(7, 1, 0, 128 << 10, true));
        assert_eq!(st.next_piece(), None);
        // The second one continues it: pages from its end up to AHEAD past it.
        assert!(st.reading(7, 1, 128 << 10, 128 << 10, true));
        let (ino, fh, at, len, _) = st.next_piece().unwrap();
        assert_eq!((ino, fh, at, at + len), (7, 1, 256 << 10, MIB));
        st.streams.get_mut(&7).unwrap().pushed = MIB;
        // The page at 1 MiB is a trip page: the next piece starts after it.
        let (_, _, at, len, _) = st.next_piece().unwrap();
        assert_eq!((at, at + len), (MIB + PAGE, 2 * MIB));
        st.streams.get_mut(&7).unwrap().pushed = (256 << 10) + AHEAD;
        assert_eq!(st.next_piece(), None, "stored up to AHEAD past the reader");
        // The reader reaches the trip page at 4 MiB (a page-sized read, a fault by its
        // size): it belongs to the stream, which moves on.
        assert!(st.reading(7, 1, 4 * MIB, PAGE as u32, false));
        let (_, _, at, _, _) = st.next_piece().unwrap();
        assert_eq!(at, (256 << 10) + AHEAD);
        assert_eq!(st.streams[&7].target, 4 * MIB + PAGE + AHEAD);
    }

    #[test]
    fn a_jump_or_another_handle_starts_over_and_faults_are_no_stream() {
        let mut st = State::default();
        st.reading(7, 1, 0, 128 << 10, true);
        assert!(st.reading(7, 1, 128 << 10, 128 << 10, true));
        // A jump past what is stored: a new stream, nothing stored until it continues.
        assert!(!st.reading(7, 1, 100 * MIB, 128 << 10, true));
        assert_eq!(st.next_piece(), None);
        // Another handle's read of the same file.
        assert!(!st.reading(7, 2, (100 * MIB) + (128 << 10), 128 << 10, true));
        assert_eq!(st.next_piece(), None);
        // A page fault that continues no stream is none; a fault by the stream's own
        // handle elsewhere ends it.
        assert!(!st.reading(7, 2, 0, PAGE as u32, false));
        assert!(!st.streams.contains_key(&7));
        // Faults never start one.
        assert!(!st.reading(8, 1, 0, PAGE as u32, false));
        assert!(!st.reading(8, 1, PAGE, PAGE as u32, false));
        assert_eq!(st.next_piece(), None);
    }
}
