//! Mounting: [`MountConfig`] to [`fuser::Config`], a foreground [`Session`] (the command line
//! runs it and unmounts it on a signal), and a background mount for tests and benchmarks.

use std::io;
use std::path::Path;

use fuser::{BackgroundSession, Config, MountOption, Session, SessionACL};

use super::{CachePolicy, FuseAdapter};
use crate::tree::Tree;

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
    /// FUSE worker threads.
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
    let adapter = FuseAdapter::new(tree, cfg.policy);
    let decided = adapter.decided();
    let pusher = adapter.pusher_slot();
    let session = Session::new(adapter, mountpoint, &cfg.to_fuser())?;
    let policy = decided.get().copied().unwrap_or(cfg.policy);
    match super::push::Pusher::start(session.notifier()) {
        Ok(p) => {
            let _ = pusher.set(p);
        }
        Err(e) => log::warn!("no page pusher thread ({e}): mmap readers fault once per page"),
    }
    Ok((session, policy))
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
