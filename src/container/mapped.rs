//! Read-only memory maps of contiguous frame files, made safe against the file shrinking.
//!
//! Why map at all: a chunk read with `pread` copies the compressed bytes from the page cache
//! into a buffer that the decoder then reads again. Decoding straight from a mapping of the
//! page cache saves that copy (6-8% of the daemon's samples in a cold sequential read) and the
//! per-thread multi-MiB buffers it needs (their first touch is slow on the target VMs, see
//! [`crate::mem`]). `pread` stays the way for everything else (sparse frames, bcolz, windows
//! beyond the mapped length after the frame grew).
//!
//! The hazard: when another process truncates a mapped file, touching a page past the new
//! end raises SIGBUS, which would kill the daemon. A process-wide SIGBUS handler owns that
//! case. Every live mapping is registered in a fixed table of address ranges; a SIGBUS inside
//! one of them replaces the faulting page with an anonymous zero page (`MAP_FIXED`, so the
//! address range stays readable throughout) and counts a fault on that mapping. The faulting
//! load is then retried and reads zeros. [`Mapping::with`] compares the mapping's fault count
//! before and after running the caller's code, and reports a fault as an I/O error of that
//! read, as `pread` does for a file that shrank. A cut inside a page raises no SIGBUS (the
//! rest of that page reads as zeros): `Source::with_mapped` checks the file's length after
//! the read for that case. A mapping that has faulted once is
//! not used again (`pread` takes over). A SIGBUS anywhere else is handed back to the
//! disposition that was installed before ours (Rust's runtime handler, or the default).
//!
//! The contract readers rely on: the bytes may change underneath (another process writing the
//! file), as with `pread`; the decoder treats them as untrusted input either way and checks
//! every length against the slice it was given, so a change yields wrong bytes or an error.
//! One difference from `pread` remains: with a mapping, a writer racing the decode could
//! change a byte between two reads of it inside a C decoder (libzstd), which no fuzzing of
//! fixed inputs covers. Only someone who can write the source can do that.
//!
//! Mapping a file is safe only for files b2fs will not rewrite during the mount. The
//! guard is what lets writable mounts map too: b2fs's own commits to a contiguous frame append
//! and then rewrite the header in place (`write/frame.rs`), so they never shrink the file nor
//! change the bytes of a chunk the index points at; anything else that shrinks it is the case
//! above. Every 8 MiB read through a mapping, its pages are dropped from the page table
//! (`MADV_DONTNEED`; the page cache keeps them), so the process's RSS does not grow by every
//! chunk it reads. The drop runs on a thread of its own (`b2fs-drops`), not on the reader's
//! path: unmapping some 2,000 pages takes 0.4-0.5 ms on the VMs measured, which a cold 4 KiB
//! read waited for once every 32 reads (BENCHMARKS.md, session 12).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, OnceLock};

use memmap2::{Mmap, MmapOptions, UncheckedAdvice};

/// The reason given for a read that a truncation underneath spoiled.
pub(crate) const SHRANK: &str =
    "the file shrank while it was being read (truncated by another process)";

/// Bytes read through a mapping between two drops of its pages (see `release_pages`).
const DROP_EVERY: usize = 8 << 20;

/// How many mappings can be live at once; more sources are read with `pread`.
const SLOTS: usize = 64;

/// One registered address range, `[start, end)`; `start == 0` marks a free slot.
struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    faults: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)] // only used to initialise `TABLE`
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    faults: AtomicU64::new(0),
};

/// The registered mappings. Read by the signal handler: atomics only, no locks.
static TABLE: [Slot; SLOTS] = [FREE; SLOTS];

/// Page size (set once the handler is installed).
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// The SIGBUS disposition that was in place before ours, restored for foreign faults.
/// Recorded before ours is installed.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Whether the guard is installed (mappings are not used when installing failed).
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// The mapped range, shared with the thread that drops its pages (which keeps it mapped
/// while it works on it).
#[derive(Debug)]
struct Mapped {
    map: Mmap,
    /// A drop of its pages is queued and has not started yet.
    drop_queued: AtomicBool,
}

impl Mapped {
    /// Drops every page of the mapping from the page table.
    fn drop_pages(&self) {
        // SAFETY: MADV_DONTNEED on a shared, read-only file mapping only removes page table
        // entries: the next access maps the same page-cache pages again, so a reader still
        // inside the range (another thread) sees the same bytes, after a minor fault. Pages
        // the SIGBUS guard replaced (anonymous zero pages) read as zeros again.
        let _ = unsafe { self.map.unchecked_advise(UncheckedAdvice::DontNeed) };
    }
}

/// A read-only shared mapping of a whole file, registered with the SIGBUS guard.
#[derive(Debug)]
pub(crate) struct Mapping {
    map: Arc<Mapped>,
    slot: usize,
    /// Bytes read through the mapping since its pages were last dropped.
    touched: AtomicUsize,
}

impl Mapping {
    /// Maps the first `len` bytes of `file`. `None` when mapping is not possible or not
    /// wanted: an empty file, no free slot, the guard could not be installed, or `mmap`
    /// failed (callers then use `pread`).
    pub(crate) fn new(file: &File, len: u64) -> Option<Mapping> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        install_guard()?;
        // SAFETY: a read-only shared mapping of a file we opened. The usual hazard of file
        // mappings, SIGBUS when the file shrinks, is owned by the guard (module comment):
        // the range is registered below, before any byte of it is read, and a fault inside
        // it is turned into zeros and a counted fault that `with` reports. Concurrent writes
        // by other processes only change the bytes, which readers treat as untrusted input.
        let map = unsafe { MmapOptions::new().len(len).map(file) }.ok()?;
        let start = map.as_ptr() as usize;
        for (i, slot) in TABLE.iter().enumerate() {
            if slot
                .start
                .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // Claimed (start = MAX matches no address); publish end, then the real start.
                slot.faults.store(0, Ordering::Release);
                slot.end.store(start + len, Ordering::Release);
                slot.start.store(start, Ordering::Release);
                return Some(Mapping {
                    map: Arc::new(Mapped {
                        map,
                        drop_queued: AtomicBool::new(false),
                    }),
                    slot: i,
                    touched: AtomicUsize::new(0),
                });
            }
        }
        None // no slot: `map` is dropped (unmapped) here, never read
    }

    /// Mapped length in bytes.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.map.len()
    }

    /// Counts `len` bytes read through the mapping; every [`DROP_EVERY`] bytes, drops all of
    /// the mapping's pages from the page table (`MADV_DONTNEED`). The page cache keeps them,
    /// but the process's RSS would otherwise grow by every chunk read: with this it stays
    /// within the cache budget plus about [`DROP_EVERY`]. Batched rather than per read: each
    /// drop flushes the TLB on every CPU running a thread of the process, and dropping after
    /// every chunk measured slower. Queued for the dropping thread (at most one queued drop
    /// per mapping); done here when that thread cannot be started.
    fn release_pages(&self, len: usize) {
        let before = self.touched.fetch_add(len, Ordering::AcqRel);
        if before.saturating_add(len) < DROP_EVERY {
            return;
        }
        self.touched.store(0, Ordering::Release);
        if self.map.drop_queued.swap(true, Ordering::AcqRel) {
            return; // a drop not started yet will take these pages too
        }
        if !queue_drop(&self.map) {
            self.map.drop_queued.store(false, Ordering::Release);
            self.map.drop_pages();
        }
    }

    /// Whether a page of this mapping was ever lost (the file shrank): the mapping then no
    /// longer mirrors the file and is not used any more.
    #[cfg(test)]
    pub(crate) fn poisoned(&self) -> bool {
        TABLE[self.slot].faults.load(Ordering::Acquire) != 0
    }

    /// Calls `f` with bytes `[offset, offset + len)` of the mapping, of which it is expected
    /// to read about `touched` (all of them, or the few pages a range decode needs). `None`
    /// when the range is not inside the mapping or the mapping is poisoned (use `pread`). An
    /// error when a page of the mapping was lost while `f` ran: what `f` computed from zeros
    /// is discarded.
    pub(crate) fn with<R>(
        &self,
        offset: u64,
        len: usize,
        touched: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<io::Result<R>> {
        let start = usize::try_from(offset).ok()?;
        let bytes = self.map.map.get(start..start.checked_add(len)?)?;
        let faults = &TABLE[self.slot].faults;
        if faults.load(Ordering::Acquire) != 0 {
            return None;
        }
        let r = f(bytes);
        self.release_pages(touched.min(len));
        if faults.load(Ordering::Acquire) != 0 {
            return Some(Err(io::Error::new(io::ErrorKind::UnexpectedEof, SHRANK)));
        }
        Some(Ok(r))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Unregister before the range is unmapped (nobody reads it any more: `&mut self`),
        // which happens when the last `Arc` of it goes: here, or after a queued drop.
        let slot = &TABLE[self.slot];
        slot.start.store(0, Ordering::Release);
    }
}

/// Queues a drop of `map`'s pages for the process's dropping thread (started on first use);
/// false when that thread cannot be started. The queue holds at most one entry per live
/// mapping (`Mapped::drop_queued`).
fn queue_drop(map: &Arc<Mapped>) -> bool {
    // `Sender` is `Sync`: the reading threads share it without a lock.
    static QUEUE: OnceLock<Option<Sender<Arc<Mapped>>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = channel::<Arc<Mapped>>();
        std::thread::Builder::new()
            .name("b2fs-drops".into())
            .spawn(move || {
                while let Ok(m) = rx.recv() {
                    // Cleared first: reads counted from here on queue the next drop.
                    m.drop_queued.store(false, Ordering::Release);
                    m.drop_pages();
                }
            })
            .ok()
            .map(|_| tx)
    });
    queue
        .as_ref()
        .is_some_and(|tx| tx.send(Arc::clone(map)).is_ok())
}

/// Installs the SIGBUS guard once per process; `None` when it could not be installed.
fn install_guard() -> Option<()> {
    let installed = *INSTALLED.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if let Ok(p) = usize::try_from(page)
            && p.is_power_of_two()
        {
            PAGE.store(p, Ordering::Release);
        }
        // The disposition in place now (Rust's runtime handler, or the default) is recorded
        // before ours goes in, so that the handler can always give foreign faults back.
        // SAFETY: `sigaction` is plain data; all-zero is a valid (empty) value.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only queries; `old` is valid for the write.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) } != 0 {
            return false;
        }
        let _ = PREVIOUS.set(old);
        // SAFETY: as above.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `sa_mask` is a valid sigset_t owned by `action`.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: a valid action; the handler only uses async-signal-safe operations
        // (atomics, `mmap`, `sigaction`, `raise`).
        unsafe { libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0 }
    });
    installed.then_some(())
}

/// The SIGBUS handler (see the module comment). Async-signal-safe in practice: atomic loads
/// and stores (including `OnceLock::get`, one acquire load once initialised), and the bare
/// `mmap`, `sigaction` and `raise` system calls.
extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // Only a fault raised by the kernel (si_code > 0) has a meaningful address; a SIGBUS
    // sent by a process (`kill -BUS`) gets its default action.
    if code <= 0 {
        give_back(true);
        return;
    }
    let page = PAGE.load(Ordering::Acquire);
    for slot in &TABLE {
        let start = slot.start.load(Ordering::Acquire);
        if start == 0 || start == usize::MAX || addr < start {
            continue;
        }
        let end = slot.end.load(Ordering::Acquire);
        // `start` again: `end` must belong to the same registration.
        if addr >= end || slot.start.load(Ordering::Acquire) != start {
            continue;
        }
        // Counted before the page is replaced: a reader that sees the zero page without
        // faulting itself (another thread's fault) must also see the count.
        slot.faults.fetch_add(1, Ordering::AcqRel);
        let at = addr & !(page - 1);
        // SAFETY: `at` is a page inside a live mapping we own (registered, so not yet
        // unmapped), which the kernel just reported as no longer backed by the file.
        // MAP_FIXED replaces exactly that page with a private zero page, atomically, so
        // every address of the range stays readable; nothing else is touched.
        let r = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if r != libc::MAP_FAILED {
            return; // the load is retried and now reads zeros
        }
        break;
    }
    // Not ours (or the page could not be replaced): give the fault back to the previous
    // disposition; returning re-executes the access, which faults again into it.
    give_back(false);
}

/// Puts back the SIGBUS disposition that was in place before ours (`raise`: the signal was
/// sent, not caused by an access, so it is raised again into the default action).
fn give_back(raise: bool) {
    let previous = if raise { None } else { PREVIOUS.get().copied() };
    // SAFETY: valid sigaction values (the one the kernel gave us, or the default); `raise`
    // of a signal whose action is the default.
    unsafe {
        let action = match previous {
            Some(old) => old,
            None => {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                dfl
            }
        };
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        if raise {
            libc::raise(libc::SIGBUS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn mapping_reads_the_file_and_checks_ranges() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        f.write_all(&data).unwrap();
        let m = Mapping::new(&f, data.len() as u64).expect("mapped");
        assert_eq!(m.len(), data.len());
        let got = m.with(10, 5000, 5000, |b| b.to_vec()).unwrap().unwrap();
        assert_eq!(got, &data[10..5010]);
        assert!(m.with(99_999, 2, 2, |_| ()).is_none(), "past the end");
        assert!(m.with(u64::MAX, 1, 1, |_| ()).is_none());
        assert!(Mapping::new(&f, 0).is_none(), "empty files are not mapped");
    }

    /// Drops queued for the dropping thread while readers go on: every read still sees the
    /// file's bytes, the thread runs each drop (the flag clears), and a mapping dropped by
    /// its owner while a drop of it is queued is unmapped by that thread afterwards.
    #[test]
    fn drops_run_on_their_thread_and_reads_see_the_file() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..(3 << 20) as u32).map(|i| (i * 13 + 5) as u8).collect();
        f.write_all(&data).unwrap();
        let m = Mapping::new(&f, data.len() as u64).expect("mapped");
        for round in 0..20usize {
            let at = round * 100_003 % (data.len() - 65_536);
            let sum = |b: &[u8]| b.iter().map(|&x| u64::from(x)).sum::<u64>();
            // Each read counts as a whole DROP_EVERY: every one asks for a drop.
            let got = m.with(at as u64, 65_536, DROP_EVERY, sum).unwrap().unwrap();
            assert_eq!(got, sum(&data[at..at + 65_536]), "round {round}");
        }
        let start = std::time::Instant::now();
        while m.map.drop_queued.load(Ordering::Acquire) {
            assert!(start.elapsed().as_secs() < 10, "the queued drop never ran");
            std::thread::yield_now();
        }
        let weak = Arc::downgrade(&m.map);
        let _ = m.with(0, 10, DROP_EVERY, |b| b[0]);
        drop(m);
        let start = std::time::Instant::now();
        while weak.strong_count() > 0 {
            assert!(
                start.elapsed().as_secs() < 10,
                "the mapping was never unmapped"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn truncation_underneath_is_an_error_not_a_crash() {
        let mut f = tempfile::tempfile().unwrap();
        let page = PAGE.load(Ordering::Acquire).max(4096);
        let data = vec![0xabu8; 8 * page];
        f.write_all(&data).unwrap();
        let m = Mapping::new(&f, data.len() as u64).expect("mapped");
        assert_eq!(
            m.with(0, 8 * page, 8 * page, |b| b[5 * page])
                .unwrap()
                .unwrap(),
            0xab
        );
        f.set_len(2 * page as u64).unwrap();
        // Pages 2.. are gone: touching them raises SIGBUS, which the guard turns into zeros
        // and an error for this read.
        let r = m.with(0, 8 * page, 8 * page, |b| {
            b.iter().map(|&x| u64::from(x)).sum::<u64>()
        });
        let err = r
            .expect("inside the mapping")
            .expect_err("a truncated read must fail");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(m.poisoned());
        assert!(
            m.with(0, 10, 10, |_| ()).is_none(),
            "a poisoned mapping is not used again"
        );
        drop(m);
        // The slot is free again and a new mapping of the short file works.
        let m2 = Mapping::new(&f, 2 * page as u64).expect("mapped again");
        assert_eq!(
            m2.with(0, 2 * page, 2 * page, |b| b[page])
                .unwrap()
                .unwrap(),
            0xab
        );
    }
}
