//! The thin fuser adapter: each FUSE operation converts its arguments, calls
//! [`crate::tree`], and replies.
//!
//! No filesystem semantics live here: if a handler would need an `if` about what the tree
//! shows, that decision belongs in [`crate::tree`]. Each failed operation is logged once
//! (op, inode, errno and the error chain): `ENOENT` at debug (shells probe names constantly),
//! EIO at warn (it names the source path, chunk and reason), everything else at info.
//!
//! On a read-only mount the content is immutable, so entry and attribute TTLs are long and the
//! kernel may keep file pages cached across opens (see [`CachePolicy`]). On a read-write mount
//! TTLs are zero and listings are not cached (commits change sizes and add or remove chunk
//! files); written data goes through the kernel page cache write-through.
//!
//! The parts: this file holds the adapter ([`FuseAdapter`]), its cache policy and how a failed
//! operation is logged and answered; `ops.rs` the handlers of the FUSE operations; `push.rs`
//! the pages offered to the kernel after a page fault; `passthrough.rs` the data files served
//! from backing files; `notify.rs` the notifications written to the FUSE device; [`convert`]
//! the conversions of the tree's types into fuser's; [`mount`] the mounting.

pub mod convert;
pub mod mount;
mod notify;
mod ops;
mod passthrough;
mod push;

use std::sync::Arc;
use std::time::Duration;

use fuser::{Errno, INodeNo, ReplyEmpty};

use crate::tree::{Tree, TreeError};

pub use mount::{MountConfig, spawn_mount};

/// How long the kernel may trust entries and attributes: the tree never changes while mounted.
const TTL: Duration = Duration::from_secs(24 * 3600);

/// How file content reaches readers.
///
/// Measured with `cargo bench --bench read` (1 GiB ZSTD+SHUFFLE float64 b2nd, 8 MiB chunks;
/// numbers in BENCHMARKS.md): a cold sequential read through the page cache runs at about a
/// quarter of the direct_io speed, because every byte is copied into freshly allocated
/// page-cache pages, and fresh memory is slow to touch on the virtual machines b2fs is
/// measured on (0.3-1.3 GB/s against 10+ GB/s for memory already in use). With direct_io the
/// copy goes into the reader's own (warm) buffer, and b2fs's chunk cache serves re-reads. So
/// the default is [`CachePolicy::Auto`]: direct_io wherever the kernel lets direct-I/O files
/// be memory-mapped (`FUSE_DIRECT_IO_ALLOW_MMAP`, Linux 6.6), so `numpy.memmap` keeps
/// working, and the page cache on older kernels. `-o keep_cache` chooses the page cache:
/// re-reads of data larger than b2fs's cache are then served by the kernel at memory speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CachePolicy {
    /// [`CachePolicy::DirectIo`] when the kernel can mmap direct-I/O files, else
    /// [`CachePolicy::KeepCache`]; decided when the kernel connects. The default.
    #[default]
    Auto,
    /// Through the kernel page cache, kept across opens (`FOPEN_KEEP_CACHE`): repeated reads
    /// of a file never reach b2fs.
    KeepCache,
    /// Every read goes to b2fs (`FOPEN_DIRECT_IO`), served from b2fs's chunk cache.
    DirectIo,
}

/// The [`fuser::Filesystem`] over a [`Tree`].
#[derive(Debug)]
pub struct FuseAdapter {
    tree: Arc<Tree>,
    policy: CachePolicy,
    /// The policy decided when the kernel connected (never `Auto`), for the mounting code.
    decided: std::sync::Arc<std::sync::OnceLock<CachePolicy>>,
    /// Where pages offered to the kernel go, once the session exists (see `push.rs`).
    pusher: std::sync::Arc<std::sync::OnceLock<push::Pusher>>,
    /// `-o passthrough`: data files served from backing files (see `passthrough.rs`).
    passthrough: Option<Arc<passthrough::Passthrough>>,
}

impl FuseAdapter {
    /// Serves `tree` with file content cached as `policy` says.
    pub fn new(tree: Arc<Tree>, policy: CachePolicy) -> FuseAdapter {
        // Passthrough where the tree backs files (read-only, `-o passthrough`'s budget).
        let passthrough = tree
            .backs_files()
            .then(|| Arc::new(passthrough::Passthrough::new()));
        FuseAdapter {
            tree,
            policy,
            decided: Default::default(),
            pusher: Default::default(),
            passthrough,
        }
    }

    /// Where the mounting code puts the page pusher once it has the session's notifier.
    pub(crate) fn pusher_slot(&self) -> std::sync::Arc<std::sync::OnceLock<push::Pusher>> {
        self.pusher.clone()
    }

    /// Where the policy decided at the kernel's connection will be (set by `init`).
    pub(crate) fn decided(&self) -> std::sync::Arc<std::sync::OnceLock<CachePolicy>> {
        self.decided.clone()
    }

    /// The tree being served.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }
}

/// Logs a failed operation once, at the level its errno deserves, and hands it to the tree's
/// event log (`b2fs log`).
fn log_error(tree: &Tree, op: &str, ino: INodeNo, e: &TreeError) {
    tree.note_error(op, ino.0, e);
    let errno = e.errno();
    let chain = crate::tree::display_chain(e);
    match errno {
        libc::ENOENT => log::debug!("{op}(ino {ino}): {chain}"),
        // Logged where it was found, once per version of the source (a leaf that does not
        // open, a group's attributes whose carrier does not read, a `table.npy` that cannot
        // be shown), not at every access.
        _ if matches!(e, TreeError::Unavailable(_)) => log::debug!("{op}(ino {ino}): {chain}"),
        libc::EIO => log::warn!("{op}(ino {ino}): errno {errno}: {chain}"),
        _ => log::info!("{op}(ino {ino}): errno {errno}: {chain}"),
    }
}

/// Logs a failed operation ([`log_error`]) and returns the errno to reply with.
fn failed(tree: &Tree, op: &str, ino: INodeNo, e: &TreeError) -> Errno {
    log_error(tree, op, ino, e);
    Errno::from_i32(e.errno())
}

/// Replies to a tree call that returns nothing, logging a failure.
fn reply_empty(tree: &Tree, op: &str, ino: INodeNo, res: Result<(), TreeError>, reply: ReplyEmpty) {
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(failed(tree, op, ino, &e)),
    }
}

impl FuseAdapter {
    /// Entry and attribute TTL: long on a read-only tree; zero on a read-write one, whose
    /// sizes change with commits.
    fn ttl(&self) -> Duration {
        if self.tree.is_writable() {
            Duration::ZERO
        } else {
            TTL
        }
    }

    /// [`Self::ttl`] for the entry and attributes of `ino` (none for names that another
    /// writer's change of a chunk grid gives to other chunks: `Tree::name_follows_geometry`).
    fn ttl_of(&self, ino: u64) -> Duration {
        if self.tree.name_follows_geometry(ino) {
            Duration::ZERO
        } else {
            self.ttl()
        }
    }
}
