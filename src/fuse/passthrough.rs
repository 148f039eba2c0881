//! FUSE passthrough (`-o passthrough`, read-only mounts, Linux 6.9+, a daemon with
//! `CAP_SYS_ADMIN`): an open of a data file is answered with a backing file (the memory file
//! [`Tree::backing_file`] fills with the whole decoded file), and the kernel then serves its
//! reads and page faults from that file without asking b2fs.
//!
//! The kernel's rules, kept here (`fs/fuse/iomode.c`, `fs/fuse/backing.c`):
//! - one backing file per inode while any open of it is live: an open of an inode with live
//!   passthrough opens reuses their backing id (another one would fail with EIO), even when
//!   the tree has followed the source to a newer version since (see docs/SEMANTICS.md);
//! - all opens of an inode alike while any is live: an inode with live ordinary opens (a
//!   file the budget did not fit, a mapped direct-I/O file) gets ordinary opens until they
//!   are all closed, and one with live passthrough opens gets passthrough opens;
//! - no `FOPEN_KEEP_CACHE` (nor `FOPEN_DIRECT_IO`, which would send reads to b2fs again)
//!   with `FOPEN_PASSTHROUGH`.
//!
//! When the kernel refuses passthrough (no `FUSE_PASSTHROUGH` at the handshake, or the first
//! backing registration fails: EPERM without `CAP_SYS_ADMIN`), one line is logged and every
//! file is served the ordinary way: never an error to a reader.

use std::collections::HashMap;
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

/// Threads answering the opens that fill a backing file. Two: a fill already decodes on
/// every core (the tree's sequential read path), so more would only hold more memory at
/// once; two let a second first open proceed while one waits on a slow source. Further
/// fills queue (their openers wait; the mount's other requests do not).
const FILL_THREADS: usize = 2;

type Job = Box<dyn FnOnce() + Send>;

/// The threads of [`FILL_THREADS`], started at the first fill; they end when the mount's
/// adapter (and with it the sender) is dropped.
#[derive(Debug, Default)]
struct FillPool {
    jobs: OnceLock<Option<Sender<Job>>>,
}

impl FillPool {
    /// Runs `job` on a pool thread; on this thread when none can be started (logged once).
    fn run(&self, job: Job) {
        let jobs = self.jobs.get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let rx = Arc::new(Mutex::new(rx));
            for i in 0..FILL_THREADS {
                let rx = rx.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("b2fs-fill-{i}"))
                    .spawn(move || {
                        loop {
                            let job = rx.lock().recv();
                            match job {
                                Ok(job) => job(),
                                Err(_) => return, // the mount is gone
                            }
                        }
                    });
                if let Err(e) = spawned {
                    log::warn!("passthrough: no fill thread ({e}): first opens hold a FUSE worker");
                    return (i > 0).then_some(tx);
                }
            }
            Some(tx)
        });
        match jobs {
            Some(tx) => {
                if let Err(e) = tx.send(job) {
                    (e.0)(); // every pool thread is gone: answer here
                }
            }
            None => job(),
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
}

impl Passthrough {
    pub(crate) fn new() -> Passthrough {
        Passthrough {
            on: AtomicBool::new(true),
            live: Mutex::default(),
            fills: FillPool::default(),
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

    /// How to answer the read-only open `fh` of `ino` without waiting: with passthrough
    /// (`Some(id)`), the ordinary way (`None`: the file is not backed, the kernel refused, or
    /// `ino` has live ordinary opens), or `Err(())` when the answer needs a fill (one decode
    /// of the whole file, or a wait for another open's): then call [`Passthrough::open`] from
    /// a thread that may wait, [`Passthrough::open_later`].
    pub(crate) fn open_now(
        &self,
        tree: &Tree,
        ino: u64,
        fh: u64,
        reply: &ReplyOpen,
    ) -> Result<Option<Arc<BackingId>>, ()> {
        if let Some(id) = self.live.lock().join(ino, fh) {
            return Ok(id);
        }
        if !self.is_on() {
            return Ok(self.start(tree, ino, fh, None, reply));
        }
        match tree.backing_now(ino, fh) {
            BackingNow::Kept(file) => Ok(self.start(tree, ino, fh, Some(file), reply)),
            BackingNow::NotBacked => Ok(self.start(tree, ino, fh, None, reply)),
            BackingNow::Fill => Err(()),
        }
    }

    /// The backing id to answer the read-only open `fh` of `ino` with, or `None` for an
    /// ordinary answer (as [`Passthrough::open_now`]). Fills the backing file on the first
    /// open (see [`Tree::backing_file`]): this may take as long as a decode of the file.
    pub(crate) fn open(
        &self,
        tree: &Tree,
        ino: u64,
        fh: u64,
        reply: &ReplyOpen,
    ) -> Option<Arc<BackingId>> {
        if let Some(id) = self.live.lock().join(ino, fh) {
            return id;
        }
        // No lock held while a first open fills the file (a second one waits in the tree).
        let file = match self.is_on() {
            true => tree.backing_file(ino, fh),
            false => None,
        };
        self.start(tree, ino, fh, file, reply)
    }

    /// Runs `answer` (which calls [`Passthrough::open`] and replies) on a thread of the fill
    /// pool, so that the FUSE worker goes back to other requests while a file is decoded.
    pub(crate) fn open_later(&self, answer: Box<dyn FnOnce() + Send>) {
        self.fills.run(answer);
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
    pub(crate) fn release(&self, fh: u64) {
        let mut live = self.live.lock();
        let Some(ino) = live.by_fh.remove(&fh) else {
            return;
        };
        if let Some(served) = live.by_ino.get_mut(&ino) {
            let opens = served.opens();
            *opens = opens.saturating_sub(1);
            if *opens == 0 {
                live.by_ino.remove(&ino);
            }
        }
    }
}
