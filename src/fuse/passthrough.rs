//! FUSE passthrough (`-o passthrough`, read-only mounts, Linux 6.9+, a daemon with
//! `CAP_SYS_ADMIN`): an open of a data file is answered with a backing file (the memory file
//! [`Tree::backing_file`] fills with the whole decoded file), and the kernel then serves its
//! reads and page faults from that file without asking b2fs.
//!
//! No open waits for a fill: an open of a file whose backing file is not filled yet is
//! answered at once the ordinary way (direct I/O, served by b2fs as on a mount without the
//! option). When the last ordinary open of the file closes (the kernel would not let any open
//! of it pass through before, below), its fill is queued on threads of its own at low
//! priority, so it never competes with those opens' reads; the opens after it pass through.
//!
//! The kernel's rules, kept here (`fs/fuse/iomode.c`, `fs/fuse/backing.c`; measured on Linux
//! 6.18 in BENCHMARKS.md, "Session 18: passthrough without the first open's wait"):
//! - one backing file per inode while any open of it is live: an open of an inode with live
//!   passthrough opens reuses their backing id (another one would fail with EIO), even when
//!   the tree has followed the source to a newer version since (see docs/SEMANTICS.md);
//! - all opens of an inode alike while any is live: with a passthrough open live, an
//!   ordinary open fails with EIO, and an `mmap` of a direct-I/O descriptor opened before
//!   fails with ENODEV; with a cached open live, or a direct-I/O descriptor that was ever
//!   mapped (until its close, or its last unmap when that comes later), a passthrough open
//!   fails with EIO. b2fs cannot see maps, so an inode with live ordinary opens gets ordinary
//!   opens until they are all closed (its RELEASE comes after the kernel let go), and one
//!   with live passthrough opens gets passthrough opens;
//! - no `FOPEN_KEEP_CACHE` (nor `FOPEN_DIRECT_IO`, which would send reads to b2fs again)
//!   with `FOPEN_PASSTHROUGH`.
//!
//! When the kernel refuses passthrough (no `FUSE_PASSTHROUGH` at the handshake, or the first
//! backing registration fails: EPERM without `CAP_SYS_ADMIN`), one line is logged and every
//! file is served the ordinary way: never an error to a reader.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, OnceLock};

use fuser::{BackingId, ReplyOpen};
use parking_lot::Mutex;

use crate::tree::{BackingNow, Tree};

/// How the live opens of an inode are served.
#[derive(Debug)]
enum Served {
    /// From `file` (kept by the tree too), registered with the kernel as `id`.
    Passthrough {
        id: Arc<BackingId>,
        _file: Arc<File>,
        opens: usize,
    },
    /// Through b2fs.
    Ordinary { opens: usize },
}

impl Served {
    fn opens(&mut self) -> &mut usize {
        match self {
            Served::Passthrough { opens, .. } | Served::Ordinary { opens } => opens,
        }
    }
}

#[derive(Debug, Default)]
struct Live {
    by_ino: HashMap<u64, Served>,
    /// Each open handle's inode.
    by_fh: HashMap<u64, u64>,
}

impl Live {
    /// Counts handle `fh` as one more open of `ino`, served as its other live opens are;
    /// `None` when `ino` has none. `Some(None)`: ordinary.
    fn join(&mut self, ino: u64, fh: u64) -> Option<Option<Arc<BackingId>>> {
        let served = self.by_ino.get_mut(&ino)?;
        *served.opens() += 1;
        let id = match served {
            Served::Passthrough { id, .. } => Some(id.clone()),
            Served::Ordinary { .. } => None,
        };
        self.by_fh.insert(fh, ino);
        Some(id)
    }

    fn start(&mut self, ino: u64, fh: u64, served: Served) {
        self.by_ino.insert(ino, served);
        self.by_fh.insert(fh, ino);
    }
}

/// Threads filling backing files: one. No open waits for a fill, so more threads would only
/// make the mount's backing files passthrough-ready sooner, and two fills side by side can
/// cost many times their work: an `array.npy` fill (each 1 MiB read spans a row of chunks)
/// beside a chunk file's fill took 50-106 s instead of 0.3-0.5 s in 3 of 5 rounds
/// (BENCHMARKS.md, "Session 18: passthrough without the first open's wait"). Fills queue;
/// one held by a slow source delays the others (their files stay served by b2fs meanwhile).
const FILL_THREADS: usize = 1;

/// The nice value of the fill threads (and of the decode threads they start, which inherit
/// it): a fill takes the CPU that the mount's readers leave idle.
const FILL_NICE: i32 = 19;

type Job = Box<dyn FnOnce() + Send>;

/// The thread(s) of [`FILL_THREADS`], started at the first fill; they end when the mount's
/// adapter (and with it the sender) is dropped.
#[derive(Debug, Default)]
struct FillPool {
    jobs: OnceLock<Option<Sender<Job>>>,
}

impl FillPool {
    /// Runs `job` on a pool thread; drops it when none can be started (logged once): the
    /// file is then served the ordinary way.
    fn run(&self, job: Job) {
        let jobs = self.jobs.get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let rx = Arc::new(Mutex::new(rx));
            for i in 0..FILL_THREADS {
                let rx = rx.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("b2fs-fill-{i}"))
                    .spawn(move || {
                        // This thread only (Linux: the nice value is per thread).
                        if let Err(e) = rustix::process::setpriority_process(None, FILL_NICE) {
                            log::debug!("passthrough: fill thread keeps its priority ({e})");
                        }
                        loop {
                            let job = rx.lock().recv();
                            match job {
                                Ok(job) => job(),
                                Err(_) => return, // the mount is gone
                            }
                        }
                    });
                if let Err(e) = spawned {
                    log::warn!("passthrough: no fill thread ({e}): files are served through b2fs");
                    return (i > 0).then_some(tx);
                }
            }
            Some(tx)
        });
        if let Some(tx) = jobs {
            let _ = tx.send(job);
        }
    }
}

/// The passthrough state of a mount.
#[derive(Debug)]
pub(crate) struct Passthrough {
    /// False once the kernel refused (then every open is ordinary).
    on: AtomicBool,
    live: Mutex<Live>,
    fills: FillPool,
    /// Inodes whose fill is queued or running.
    queued: Mutex<HashSet<u64>>,
    /// Inodes opened the ordinary way for want of a backing file: filled at their last close.
    wanted: Mutex<HashSet<u64>>,
}

impl Passthrough {
    pub(crate) fn new() -> Passthrough {
        Passthrough {
            on: AtomicBool::new(true),
            live: Mutex::default(),
            fills: FillPool::default(),
            queued: Mutex::default(),
            wanted: Mutex::default(),
        }
    }

    /// Serves no file by passthrough from now on, saying why once.
    pub(crate) fn refuse(&self, why: &str) {
        if self.on.swap(false, Ordering::Relaxed) {
            log::warn!("passthrough: {why}: every file is served through b2fs");
        }
    }

    /// Whether passthrough is still on.
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The backing id to answer the read-only open `fh` of `ino` with, or `None` for an
    /// ordinary answer; never waits for a fill. Passthrough when `ino` has live passthrough
    /// opens, or none live and a backing file kept for the version `fh` pinned; ordinary when
    /// the file is not backed, the kernel refused, `ino` has live ordinary opens, or its
    /// backing file is not filled yet: then it is filled at the last close of its ordinary
    /// opens ([`Passthrough::release`]), and the opens after that pass through.
    pub(crate) fn open(
        self: &Arc<Self>,
        tree: &Arc<Tree>,
        ino: u64,
        fh: u64,
        reply: &ReplyOpen,
    ) -> Option<Arc<BackingId>> {
        if let Some(id) = self.live.lock().join(ino, fh) {
            return id;
        }
        if !self.is_on() {
            return self.start(tree, ino, fh, None, reply);
        }
        match tree.backing_now(ino, fh) {
            BackingNow::Kept(file) => self.start(tree, ino, fh, Some(file), reply),
            BackingNow::NotBacked => self.start(tree, ino, fh, None, reply),
            BackingNow::Fill => {
                let id = self.start(tree, ino, fh, None, reply);
                if id.is_none() {
                    self.wanted.lock().insert(ino); // filled at the last ordinary close
                }
                id
            }
        }
    }

    /// Queues the fill of the backing file of `ino` (one decode of the whole file, through a
    /// descriptor of its own, at the fill threads' low priority), unless one is queued or
    /// running. The tree keeps the file for the next open (or refuses it: the budget).
    fn fill_later(self: &Arc<Self>, tree: &Arc<Tree>, ino: u64) {
        if !self.queued.lock().insert(ino) {
            return;
        }
        let (pt, tree) = (self.clone(), tree.clone());
        self.fills.run(Box::new(move || {
            if pt.is_on() {
                match tree.open(ino, libc::O_RDONLY) {
                    Ok(fh) => {
                        drop(tree.backing_file(ino, fh));
                        if let Err(e) = tree.release(fh) {
                            log::debug!("passthrough: inode {ino}: fill's release: {e}");
                        }
                    }
                    Err(e) => log::debug!("passthrough: inode {ino}: no fill ({e})"),
                }
            }
            if !pt.is_on() {
                tree.drop_backing_files(); // refused while this one filled
            }
            pt.queued.lock().remove(&ino);
        }));
    }

    /// Counts `fh` as the first live open of `ino`, served from `file` when the kernel takes
    /// it, else the ordinary way; or joins the opens of `ino` answered meanwhile.
    fn start(
        &self,
        tree: &Tree,
        ino: u64,
        fh: u64,
        file: Option<Arc<File>>,
        reply: &ReplyOpen,
    ) -> Option<Arc<BackingId>> {
        let mut live = self.live.lock();
        if let Some(id) = live.join(ino, fh) {
            return id; // another open of `ino` was answered meanwhile
        }
        let Some(file) = file.filter(|_| self.is_on()) else {
            live.start(ino, fh, Served::Ordinary { opens: 1 });
            return None;
        };
        match reply.open_backing(&*file) {
            Ok(id) => {
                let id = Arc::new(id);
                let served = Served::Passthrough {
                    id: id.clone(),
                    _file: file,
                    opens: 1,
                };
                live.start(ino, fh, served);
                log::debug!("passthrough: inode {ino} opened from its backing file");
                Some(id)
            }
            Err(e) => {
                self.refuse(&format!("the kernel refused a backing file ({e})"));
                drop(file);
                tree.drop_backing_files();
                live.start(ino, fh, Served::Ordinary { opens: 1 });
                None
            }
        }
    }

    /// Forgets handle `fh`; at the last close of its inode, its backing id is released
    /// (the tree keeps the backing file for the next open, within its budget).
    /// At the last close of an inode whose opens were answered the ordinary way for want of
    /// a backing file, queues its fill: the fill never competes with those opens' reads (nor
    /// evicts the chunks they have in b2fs's cache), and the kernel could not pass the file
    /// through before that close anyway.
    pub(crate) fn release(self: &Arc<Self>, tree: &Arc<Tree>, fh: u64) {
        let mut live = self.live.lock();
        let Some(ino) = live.by_fh.remove(&fh) else {
            return;
        };
        let Some(served) = live.by_ino.get_mut(&ino) else {
            return;
        };
        let opens = served.opens();
        *opens = opens.saturating_sub(1);
        if *opens > 0 {
            return;
        }
        live.by_ino.remove(&ino);
        drop(live);
        if self.wanted.lock().remove(&ino) {
            self.fill_later(tree, ino);
        }
    }
}
