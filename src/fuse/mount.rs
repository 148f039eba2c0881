//! Mounting: [`MountConfig`] to [`fuser::Config`], a foreground [`Session`] (the command line
//! runs it and unmounts it on a signal) on a mount b2fs makes or on an open `/dev/fuse`
//! descriptor whose mount another process made ([`session_on_fd`]), and a background mount for
//! tests and benchmarks; and the follower thread that asks the tree to follow its source every second and sends
//! the kernel the invalidations the tree lists (issue 12, [`crate::tree::Invalidation`]).

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use fuser::{BackgroundSession, Config, INodeNo, MountOption, Notifier, Session, SessionACL};

use super::{CachePolicy, FuseAdapter};
use crate::tree::{Invalidation, Tree};

/// How often the follower thread checks the source (the "within 1 s").
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// How to mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountConfig {
    /// The source name `/proc/mounts` shows.
    pub fsname: String,
    /// Let users other than the mounting one in (`allow_other`).
    pub allow_other: bool,
    /// Let root in besides the mounting user (`allow_root`).
    pub allow_root: bool,
    /// Unmount when this process dies (`auto_unmount`: fusermount3 stays behind and
    /// unmounts once the FUSE connection closes). Implies `allow_root` unless `allow_other`
    /// is set (fuser needs one of them for it).
    pub auto_unmount: bool,
    /// FUSE worker threads. The kernel hands each request to the idle worker that has waited
    /// longest, so two idle workers take a lone reader's requests in turn; one worker taking
    /// every request while the others stand by until it blocks was measured and not kept
    /// (BENCHMARKS.md, "Session 17: one hot FUSE worker").
    pub threads: usize,
    /// Page cache or direct I/O for file content.
    pub policy: CachePolicy,
    /// Mount read-only (the kernel refuses every change with EROFS).
    pub read_only: bool,
}

impl Default for MountConfig {
    fn default() -> Self {
        MountConfig {
            fsname: "b2fs".into(),
            allow_other: false,
            allow_root: false,
            auto_unmount: false,
            threads: 2,
            policy: CachePolicy::default(),
            read_only: true,
        }
    }
}

impl MountConfig {
    /// The fuser configuration: read-only unless `read_only` is false, subtype `b2fs`.
    pub fn to_fuser(&self) -> Config {
        let mut c = Config::default();
        c.mount_options = vec![
            if self.read_only {
                MountOption::RO
            } else {
                MountOption::RW
            },
            MountOption::NoDev,
            MountOption::NoSuid,
            MountOption::FSName(self.fsname.clone()),
            MountOption::Subtype("b2fs".into()),
        ];
        if self.auto_unmount {
            c.mount_options.push(MountOption::AutoUnmount);
        }
        c.acl = if self.allow_other {
            SessionACL::All
        } else if self.allow_root || self.auto_unmount {
            SessionACL::RootAndOwner
        } else {
            SessionACL::Owner
        };
        c.n_threads = Some(self.threads.max(1));
        c.clone_fd = self.threads > 1;
        c
    }
}

/// Mounts `tree` at `mountpoint`; the mount is live (the kernel handshake done) when this
/// returns, with the cache policy decided at the handshake (never [`CachePolicy::Auto`]).
/// Run the session with [`Session::run`]; unmount with its unmounter.
///
/// # Errors
/// When the mount fails (no `/dev/fuse`, no `fusermount3`, mountpoint missing or busy).
pub fn session(
    tree: Tree,
    mountpoint: &Path,
    cfg: &MountConfig,
) -> io::Result<(Session<FuseAdapter>, CachePolicy)> {
    start(tree, cfg, |adapter| {
        Session::new(adapter, mountpoint, &cfg.to_fuser())
    })
}

/// Serves `tree` on `fd`, an open `/dev/fuse` descriptor whose mount another process made
/// (libfuse's `/dev/fd/N` convention: `mount.fuse3 -o drop_privileges`, a container's
/// privileged side, a CSI node plugin). The kernel handshake is done when this returns, as
/// for [`session`]; nothing is mounted or unmounted here: the session ends when whoever
/// mounted unmounts (the kernel then closes the connection). `mount_options`,
/// `auto_unmount` and `fsname` of `cfg` are the mounter's business and unused. Worker
/// threads share `fd` unless `/dev/fuse` itself can be opened here to clone it (an
/// unprivileged container may have the descriptor and no device node).
///
/// # Errors
/// When the handshake fails (`fd` is not a FUSE connection, or it was closed).
pub fn session_on_fd(
    tree: Tree,
    fd: OwnedFd,
    cfg: &MountConfig,
) -> io::Result<(Session<FuseAdapter>, CachePolicy)> {
    let mut config = cfg.to_fuser();
    config.mount_options.clear();
    config.clone_fd = config.clone_fd
        && std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .is_ok();
    let acl = config.acl;
    start(tree, cfg, |adapter| {
        Session::from_fd(adapter, fd, acl, config)
    })
}

/// Makes the session with `connect` (which does the kernel handshake), then starts the page
/// pusher and the follower thread on it.
fn start(
    tree: Tree,
    cfg: &MountConfig,
    connect: impl FnOnce(FuseAdapter) -> io::Result<Session<FuseAdapter>>,
) -> io::Result<(Session<FuseAdapter>, CachePolicy)> {
    let tree = Arc::new(tree);
    let adapter = FuseAdapter::new(tree.clone(), cfg.policy);
    let decided = adapter.decided();
    let pusher = adapter.pusher_slot();
    let session = connect(adapter)?;
    let policy = decided.get().copied().unwrap_or(cfg.policy);
    // The page stores' own descriptor of the device (see `notify.rs`).
    let device = std::os::fd::AsFd::as_fd(&session).try_clone_to_owned();
    if let Err(e) = &device {
        log::debug!("no descriptor of the FUSE device for page stores ({e}): fuser's notifier");
    }
    match super::push::Pusher::start(session.notifier(), device.ok()) {
        Ok(p) => {
            let _ = pusher.set(p);
        }
        Err(e) => log::warn!("no page pusher thread ({e}): mmap readers fault once per page"),
    }
    spawn_follower(Arc::downgrade(&tree), session.notifier(), pusher);
    Ok((session, policy))
}

/// Starts the thread that follows the source: every [`FOLLOW_EVERY`] it asks the tree to
/// check it, and it sends the invalidations the tree lists (after those checks, or after a
/// check an open or lookup made) through `notifier`. It ends with the tree; it waits without
/// holding it, so unmounting is never delayed. Failed notifications (inodes the kernel has
/// forgotten) are ignored. Before an inode's pages are invalidated, the page pusher drops
/// what it still holds of them ([`super::push::Pusher::forget`]): pages read before the
/// change, stored after the invalidation, would stay in the kernel's cache.
fn spawn_follower(
    tree: Weak<Tree>,
    notifier: Notifier,
    pusher: Arc<std::sync::OnceLock<super::push::Pusher>>,
) {
    let Some(follow) = tree.upgrade().map(|t| t.follower()) else {
        return;
    };
    let run = move || {
        loop {
            let invalidations = follow.wait(FOLLOW_EVERY);
            if let Some(p) = pusher.get() {
                p.forget(invalidations.iter().filter_map(|inv| match inv {
                    Invalidation::Inode(ino) => Some(*ino),
                    Invalidation::Entry { .. } => None,
                }));
            }
            for inv in invalidations {
                let _ = match inv {
                    Invalidation::Inode(ino) => notifier.inval_inode(INodeNo(ino), 0, 0),
                    Invalidation::Entry { parent, name } => {
                        notifier.inval_entry(INodeNo(parent), OsStr::new(&name))
                    }
                };
            }
            let Some(tree) = tree.upgrade() else { return };
            tree.follow_source();
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("b2fs-follow".into())
        .spawn(run)
    {
        log::warn!("cannot start the thread that follows the source: {e}");
    }
}

/// Mounts `tree` at `mountpoint` served by background threads; dropping the returned session
/// unmounts.
///
/// # Errors
/// As [`session`].
pub fn spawn_mount(
    tree: Tree,
    mountpoint: &Path,
    cfg: &MountConfig,
) -> io::Result<BackgroundSession> {
    session(tree, mountpoint, cfg)?.0.spawn()
}
