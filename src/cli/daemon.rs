//! `b2fs mount`: checks, the background daemon (re-exec with a readiness pipe), logging, and
//! the foreground session that unmounts on SIGINT/SIGTERM/SIGHUP. The mount point is a
//! directory b2fs mounts on, or `/dev/fd/N`, the open `/dev/fuse` descriptor of a mount another
//! process made, which b2fs serves without mounting (see `devfd`).
//!
//! Readiness protocol: the daemon child's stdout is a pipe to the parent. The child writes
//! exactly one line, `ready` once the kernel handshake is done (the mount is live), or
//! `error CODE MESSAGE` when it fails, and never writes to stdout again.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::args::{MountArgs, MountOptions};
use super::{Error, check_fuse, check_mountpoint, check_source, devfd, logs};
use crate::container::Opened;
use crate::fuse::{CachePolicy, MountConfig};
use crate::reader::ReaderOptions;
use crate::tree::{Tree, TreeOptions, display_chain};

/// Where a mount is served.
#[derive(Debug)]
enum Target {
    /// A directory b2fs mounts on (absolute, checked).
    Dir(PathBuf),
    /// An open `/dev/fuse` descriptor whose mount another process made, and the `/dev/fd/N`
    /// path it was given as.
    Fd(RawFd, PathBuf),
}

impl Target {
    /// Checks the mount point and what mounting on it needs.
    fn check(mountpoint: &Path, opts: &MountOptions) -> Result<Target, Error> {
        let Some(fd) = devfd::parse(mountpoint) else {
            let dir = check_mountpoint(mountpoint, opts.nonempty)?;
            check_fuse()?;
            return Ok(Target::Dir(dir));
        };
        devfd::check(fd, mountpoint)?;
        if opts.auto_unmount {
            return Err(Error::Usage(
                "option 'auto_unmount' does not apply to a /dev/fd/N mount point: the \
                 process that mounted unmounts"
                    .into(),
            ));
        }
        Ok(Target::Fd(fd, mountpoint.to_path_buf()))
    }

    /// The mount point as given (a directory, or `/dev/fd/N`).
    fn path(&self) -> &Path {
        match self {
            Target::Dir(p) | Target::Fd(_, p) => p,
        }
    }
}

/// Runs `b2fs mount`.
pub(super) fn mount(args: MountArgs) -> Result<(), Error> {
    let result = (|| {
        let mut opts = MountOptions::parse(&args.options).map_err(Error::Usage)?;
        // Remote sources are read-only.
        opts.read_only |= super::remote::as_url(&args.source).is_some();
        if opts.passthrough && !opts.read_only {
            return Err(Error::Usage(
                "option 'passthrough' needs a read-only mount (-o ro,passthrough): the \
                 kernel would send writes to the backing files, past b2fs"
                    .into(),
            ));
        }
        if args.daemon_child {
            return daemon_child(&args, &opts);
        }
        check_local_source(&args.source)?;
        if let (Some(dir), Ok(mp)) = (&opts.spill_dir, std::fs::canonicalize(&args.mountpoint)) {
            // The spill file is written with the edits' lock held: inside the mount, its
            // writes would wait for the FUSE workers that wait for that lock.
            let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            if dir.starts_with(&mp) {
                return Err(Error::Usage(format!(
                    "option 'spill_dir': {} is inside the mount point {}",
                    dir.display(),
                    mp.display()
                )));
            }
        }
        let target = Target::check(&args.mountpoint, &opts)?;
        if args.foreground {
            init_logging(&opts, None);
            serve(&args.source, &target, &opts, |_| {})
        } else {
            spawn_daemon(&args.source, &target, &opts)
        }
    })();
    match (result, devfd::parse(&args.mountpoint)) {
        // A mount exists on that descriptor and b2fs cannot remove it: say so in the one
        // error line (the daemon child's goes to its parent, which says it).
        (Err(e), Some(fd)) if !args.daemon_child && devfd::check(fd, &args.mountpoint).is_ok() => {
            Err(Error::Daemon {
                code: e.exit_code(),
                message: format!("{}; {}", display_chain(&e), devfd::LEFT_BEHIND),
            })
        }
        (result, _) => result,
    }
}

/// Starts the daemon child and waits for its readiness line.
fn spawn_daemon(source: &Path, target: &Target, opts: &MountOptions) -> Result<(), Error> {
    let exe = std::env::current_exe().map_err(|e| Error::other("cannot find own binary", e))?;
    let source = match super::remote::as_url(source) {
        Some(_) => source.to_path_buf(),
        None => std::path::absolute(source).map_err(|e| Error::other("source path", e))?,
    };
    // The child inherits a /dev/fd/N descriptor (it is not close-on-exec), under a number its
    // replaced standard streams do not take.
    let (mountpoint, _dup) = match target {
        Target::Dir(dir) => (dir.clone(), None),
        Target::Fd(fd, _) => {
            let (n, dup) = devfd::for_child(*fd)
                .map_err(|e| Error::other("cannot pass the /dev/fuse descriptor on", e))?;
            (PathBuf::from(format!("/dev/fd/{n}")), dup)
        }
    };
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(exe)
        .arg("mount")
        .arg("-f")
        .arg("--daemon-child")
        .arg("-o")
        .arg(opts.to_arg())
        .arg(&source)
        .arg(&mountpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Its own process group: a Ctrl-C meant for the shell does not reach the daemon.
        .process_group(0)
        .spawn()
        .map_err(|e| Error::other("cannot start the mount daemon", e))?;
    let Some(out) = child.stdout.take() else {
        return Err(Error::Other {
            what: "mount daemon has no stdout pipe".into(),
            source: None,
        });
    };
    let mut line = String::new();
    let _ = BufReader::new(out).read_line(&mut line);
    let line = line.trim_end();
    if line == "ready" {
        return Ok(());
    }
    if let Some(rest) = line.strip_prefix("error ") {
        let (code, message) = rest.split_once(' ').unwrap_or((rest, ""));
        return Err(Error::Daemon {
            code: code.parse().unwrap_or(super::EXIT_OTHER),
            message: message.to_owned(),
        });
    }
    let status = child.wait().map_err(|e| Error::other("mount daemon", e))?;
    Err(Error::Other {
        what: format!("mount daemon exited ({status}) before the mount was live"),
        source: None,
    })
}

/// The background daemon: logs to a file, reports readiness on stdout, serves.
fn daemon_child(args: &MountArgs, opts: &MountOptions) -> Result<(), Error> {
    let log = logs::log_path(std::process::id());
    init_logging(opts, Some(&log));
    let pruned = logs::effective_uid().map_or(0, |uid| {
        logs::prune_ended(
            &log,
            uid,
            std::time::SystemTime::now(),
            super::umount::alive,
        )
    });
    if pruned > 0 {
        log::info!(
            "removed {pruned} old logs of ended b2fs daemons from {}",
            log.parent()
                .map_or_else(String::new, |d| d.display().to_string())
        );
    }
    let report = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let result = (|| {
        check_local_source(&args.source)?;
        let target = Target::check(&args.mountpoint, opts)?;
        serve(&args.source, &target, opts, |_| report("ready"))
    })();
    if let Err(e) = &result {
        let msg = display_chain(e);
        log::error!("{msg}");
        report(&format!("error {} {msg}", e.exit_code()));
    }
    result
}

/// [`check_source`] for a path; nothing for a URL (its checks are the requests of opening).
fn check_local_source(source: &Path) -> Result<(), Error> {
    match super::remote::as_url(source) {
        Some(_) => Ok(()),
        None => check_source(source),
    }
}

/// Logging to stderr (foreground) or to `file` (daemon); `debug` raises the level and
/// `RUST_LOG` overrides both.
fn init_logging(opts: &MountOptions, file: Option<&Path>) {
    // fuser warns when the session ends after an external unmount (it tries again and gets
    // EINVAL); only `debug` shows that.
    let level = if opts.debug {
        "debug"
    } else {
        "info,fuser::session=error"
    };
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level));
    if let Some(path) = file {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => {
                redirect_stderr(&f);
                b.target(env_logger::Target::Pipe(Box::new(f)));
            }
            Err(e) => eprintln!("b2fs: cannot open log file {}: {e}", path.display()),
        }
    }
    let _ = b.try_init();
}

/// Points fd 2 at the daemon's log file, so panics and library messages land there too.
fn redirect_stderr(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 on two open descriptors we own (the log file, borrowed for the call, and
    // fd 2); it only replaces what fd 2 refers to and touches no Rust-managed memory.
    let r = unsafe { libc::dup2(f.as_raw_fd(), libc::STDERR_FILENO) };
    if r < 0 {
        log::warn!("cannot redirect stderr to the log file");
    }
}

/// `passthrough_budget`'s default: a quarter of the machine's memory (`MemTotal` of
/// `/proc/meminfo`), or 1 GiB when it cannot be read.
fn default_backing_budget() -> u64 {
    quarter_of_ram().unwrap_or(1 << 30)
}

/// A quarter of the machine's memory (`MemTotal` of `/proc/meminfo`), if it can be read.
fn quarter_of_ram() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024 / 4)
}

/// `edit_budget`'s default: [`crate::tree::DEFAULT_EDIT_BUDGET`] (1 GiB), or a quarter of the
/// machine's memory when that is less.
fn default_edit_budget() -> usize {
    let quarter = quarter_of_ram().and_then(|n| usize::try_from(n).ok());
    quarter.map_or(crate::tree::DEFAULT_EDIT_BUDGET, |q| {
        q.min(crate::tree::DEFAULT_EDIT_BUDGET)
    })
}

/// Builds the tree, mounts it (or connects to the mount on a `/dev/fd/N` descriptor), calls
/// `ready` once the mount is live, and serves until unmounted (by a signal, `b2fs umount` or
/// `fusermount3 -u`; a `/dev/fd/N` mount by whoever mounted it, and a signal then ends b2fs).
fn serve(
    source: &Path,
    target: &Target,
    opts: &MountOptions,
    ready: impl FnOnce(&Path),
) -> Result<(), Error> {
    // Block the termination signals before any thread exists, so every thread inherits the
    // mask and only the signal thread's sigwait sees them.
    let signals = signals::block();
    let tree_opts = TreeOptions {
        reader: ReaderOptions {
            cache_size: opts.cache_size,
            ..ReaderOptions::default()
        },
        writable: !opts.read_only,
        backing_budget: match opts.passthrough {
            true => opts
                .passthrough_budget
                .map_or_else(default_backing_budget, |n| n as u64),
            false => 0,
        },
        zarr_shards: opts.zarr_shards,
        zarr_strict_json: opts.zarr_strict_json,
        edit_budget: opts.edit_budget.unwrap_or_else(default_edit_budget),
    };
    let source_err = |e| Error::Source {
        path: source.to_path_buf(),
        source: e,
    };
    let (tree, _source_lock) = match super::remote::as_url(source) {
        Some(url) => {
            let tree = match super::remote::open(url, &opts.remote)? {
                Opened::Single(c) => {
                    Tree::new(crate::tree::view::layout(c).map_err(source_err)?, tree_opts)
                }
                Opened::Collection(c) => Tree::from_collection(c, tree_opts).map_err(source_err)?,
            };
            (tree, None)
        }
        None => {
            // Held while serving: `b2fs compact` refuses a source whose lock is held (see
            // `container::write::lock_source_for_mount`).
            let lock = crate::container::write::lock_source_for_mount(source)
                .map_err(|e| Error::from_container("mount", source, e))?;
            let tree = Tree::from_source(source, tree_opts).map_err(source_err)?;
            (tree, Some(lock))
        }
    };
    if let Some(dir) = &opts.spill_dir {
        tree.set_spill_dir(dir.clone());
    }
    let cfg = MountConfig {
        fsname: source.display().to_string(),
        allow_other: opts.allow_other,
        allow_root: opts.allow_root,
        auto_unmount: opts.auto_unmount,
        threads: opts.threads,
        policy: match opts.direct_io {
            Some(true) => CachePolicy::DirectIo,
            Some(false) => CachePolicy::KeepCache,
            None => CachePolicy::Auto,
        },
        read_only: opts.read_only,
    };
    let mountpoint = target.path();
    let (mut session, policy) = match target {
        Target::Dir(dir) => crate::fuse::mount::session(tree, dir, &cfg)
            .map_err(|e| classify_mount_error(dir, e))?,
        Target::Fd(fd, path) => crate::fuse::mount::session_on_fd(tree, devfd::take(*fd), &cfg)
            .map_err(|e| Error::Mount {
                path: path.clone(),
                source: e,
            })?,
    };
    log::info!("mounted {} at {}", source.display(), mountpoint.display());
    let unmounter = match target {
        Target::Dir(dir) => {
            set_readahead(dir, policy);
            Some(session.unmount_callable())
        }
        // Another process mounted; the readahead of its mount is its business.
        Target::Fd(..) => None,
    };
    ready(mountpoint);
    signals::spawn_unmounter(signals, unmounter, mountpoint.to_path_buf());
    session
        .run()
        .map_err(|e| Error::other("FUSE session failed", e))?;
    log::info!("unmounted {}", mountpoint.display());
    Ok(())
}

/// Kernel readahead of a mount whose files are read through the page cache, in KiB: one page.
const READAHEAD_KB: u32 = 4;

/// Sets the kernel's readahead window for this mount (its backing device info), which FUSE
/// negotiates as 128 KiB. The readahead window is also the read-around of an mmap reader's
/// page fault: for an `array.npy` window it asks for whole rows of the array across every
/// chunk column around the faulting row (and the rows after it, as the reader's walk hits
/// the read-around's mark), so a fault decodes dozens of blocks its reader never touches.
/// - with direct I/O, reads bypass the page cache and only mmap readers use it: set to 0, a
///   fault reads its page (measured on 64x64 windows of a 1 GiB 2-D array through
///   `np.load(mmap_mode='r')`, BENCHMARKS.md: 4 MiB read-around 34 windows/s, none 217/s);
/// - through the page cache ([`CachePolicy::KeepCache`]): one page ([`READAHEAD_KB`]). A
///   fault then reads its own page (and b2fs stores its neighbours, as with direct I/O),
///   while a `read(2)` larger than the window is still read ahead in requests of the
///   device's I/O size (`io_pages`, 128 KiB for FUSE). 0 would read every `read(2)` one page
///   per request. Measured (BENCHMARKS.md, "Session 14: windows"): 4 MiB read `array.npy`
///   whole in the first ~25 of 300 random windows (1 MiB requests, 12 MiB per window); over
///   a 1 GiB array, 50-141 windows/s against 370-499 with one page. Sequential reads and
///   `np.load` ran at 0.97x with 128 KiB requests (within noise), a mapped scan at 0.70x and
///   `dd bs=4k` at 0.76x (they lost the readahead they used).
///
/// Needs root; a failure only costs speed. The device number comes from
/// `/proc/self/mountinfo`: a `stat` of the mountpoint would ask this very process, which does
/// not serve requests yet.
fn set_readahead(mountpoint: &Path, policy: CachePolicy) {
    let kb = match policy {
        CachePolicy::DirectIo => 0,
        CachePolicy::KeepCache | CachePolicy::Auto => READAHEAD_KB,
    };
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dev = info.lines().find_map(|l| {
        let mut f = l.split(' ');
        let dev = f.nth(2)?;
        let mp = f.nth(1)?;
        (Path::new(&super::umount::unescape(mp)) == mountpoint).then(|| dev.to_owned())
    });
    let Some(dev) = dev else {
        log::debug!("readahead: {} not in mountinfo", mountpoint.display());
        return;
    };
    let path = format!("/sys/class/bdi/{dev}/read_ahead_kb");
    match std::fs::write(&path, kb.to_string()) {
        Ok(()) => log::debug!("readahead: {path} = {kb}"),
        Err(e) => log::debug!("readahead: cannot write {path}: {e}"),
    }
}

fn classify_mount_error(mountpoint: &Path, e: std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::NotFound if !Path::new("/dev/fuse").exists() => {
            Error::Fuse(format!("/dev/fuse: {e}"))
        }
        std::io::ErrorKind::PermissionDenied => Error::Fuse(e.to_string()),
        _ => Error::Mount {
            path: mountpoint.to_path_buf(),
            source: e,
        },
    }
}

/// Termination signals handled by a dedicated thread with `sigwait`.
mod signals {
    use std::path::PathBuf;

    use fuser::SessionUnmounter;

    /// The blocked set, to hand to the signal thread.
    #[derive(Clone, Copy)]
    pub(super) struct Blocked(libc::sigset_t);

    /// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and threads it spawns later).
    pub(super) fn block() -> Blocked {
        // SAFETY: sigset_t is a plain C struct for which all-zero is a valid value that
        // sigemptyset then initialises; the pointers passed are to this local.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid, exclusively borrowed sigset_t; the signal numbers are
        // valid; pthread_sigmask reads `set` and accepts a null old-set pointer.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGHUP);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        Blocked(set)
    }

    /// Waits for one of the blocked signals, then unmounts (lazily, so open files do not
    /// keep the process alive forever); the session loop then ends. Without an unmounter (a
    /// `/dev/fd/N` mount another process made, which b2fs cannot unmount), the process exits:
    /// the kernel closes the connection and the mounter unmounts.
    pub(super) fn spawn_unmounter(
        blocked: Blocked,
        unmounter: Option<SessionUnmounter>,
        mp: PathBuf,
    ) {
        let spawned = std::thread::Builder::new()
            .name("b2fs-signals".into())
            .spawn(move || {
                let Blocked(set) = blocked;
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is an initialised sigset_t whose signals are blocked in this
                // thread; `sig` is a valid out-pointer.
                let r = unsafe { libc::sigwait(&set, &mut sig) };
                if r != 0 {
                    log::error!("sigwait failed ({r}); signals will not unmount");
                    return;
                }
                let Some(mut unmounter) = unmounter else {
                    log::info!(
                        "signal {sig}: closing the FUSE connection of {} (its mounter unmounts)",
                        mp.display()
                    );
                    std::process::exit(0);
                };
                log::info!("signal {sig}: unmounting {}", mp.display());
                if let Err(e) = unmounter.unmount() {
                    log::error!("unmount of {} failed: {e}", mp.display());
                }
            });
        if let Err(e) = spawned {
            log::error!("cannot start the signal thread: {e}");
        }
    }
}

/// Gives SIGPIPE its default action back (Rust ignores it), so that a command that prints
/// (`b2fs info ... | head`) ends quietly when its reader goes away instead of panicking on
/// the broken pipe. Not for `mount`: the daemon must outlive whoever reads its output.
pub(crate) fn default_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler code; it runs before any thread is
    // started, so nothing else is changing signal dispositions at the same time.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
