//! The `b2fs` command line: `mount`, `umount`, `info`, `verify`, `salvage`, `compact`, `log`,
//! `completions`, `man`
//! (and `b2fs SOURCE MOUNTPOINT -o OPTS`, how mount(8)'s `mount.fuse3` helper calls it:
//! `fstab`).
//!
//! This is the one place that prints errors and picks exit codes ([`Error::exit_code`]; the
//! table is in [`args::EXIT_CODES_HELP`] and `--help`). Every failure prints exactly one line,
//! `b2fs: <what>: <why>`, on stderr.
//!
//! Background mounts re-execute the binary with `-f --daemon-child` in its own process group;
//! the child reports `ready` (or `error CODE MESSAGE`) on a pipe once the kernel handshake is
//! done, so the parent returns only when the mount is live, with the child's exit code on
//! failure.

pub mod args;
pub mod check;
mod compact;
mod daemon;
mod devfd;
mod docs;
mod events;
mod fstab;
mod info;
mod logs;
pub mod remote;
mod salvage;
mod umount;
mod verify;

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use thiserror::Error;

use crate::container::ContainerError;
use crate::tree::display_chain;
use args::{Cli, Command};

/// Exit code: other failure.
pub const EXIT_OTHER: u8 = 1;
/// Exit code: `verify` found damage (the same code as other failures: the report on stdout,
/// or `--json`, tells which).
pub const EXIT_DAMAGED: u8 = 1;
/// Exit code: usage error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the source is missing or not a container.
pub const EXIT_SOURCE: u8 = 3;
/// Exit code: the mountpoint is missing, not a directory, busy, or (umount) not mounted.
pub const EXIT_MOUNTPOINT: u8 = 4;
/// Exit code: FUSE is unavailable (no `/dev/fuse` or `fusermount3`).
pub const EXIT_FUSE: u8 = 5;
/// Exit code: a remote source's endpoint cannot be reached, times out or keeps failing.
pub const EXIT_NETWORK: u8 = 6;

/// Why a command failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad arguments or options.
    #[error("{0}")]
    Usage(String),
    /// The source cannot be opened as a container.
    #[error("cannot open '{}'", path.display())]
    Source {
        /// The source path given.
        path: PathBuf,
        /// Why.
        source: ContainerError,
    },
    /// Another b2fs process uses the source in a way that excludes this command (compacting
    /// a mounted source, mounting a source being compacted).
    #[error("cannot {action} '{}'", path.display())]
    Busy {
        /// The command: `mount` or `compact`.
        action: &'static str,
        /// The source path given.
        path: PathBuf,
        /// Who holds it.
        source: Box<ContainerError>,
    },
    /// A remote source (URL) cannot be opened.
    #[error("cannot open '{url}': {why}")]
    Remote {
        /// The URL given.
        url: String,
        /// The exit code of its class ([`EXIT_SOURCE`], [`EXIT_NETWORK`], ...).
        code: u8,
        /// Why, in one line.
        why: String,
    },
    /// The source path itself is unusable (missing, unreadable).
    #[error("cannot open '{}'", path.display())]
    SourcePath {
        /// The source path given.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The mountpoint is unusable.
    #[error("mountpoint '{}': {why}", path.display())]
    Mountpoint {
        /// The mountpoint given.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// FUSE cannot be used on this machine.
    #[error("FUSE unavailable: {0}")]
    Fuse(String),
    /// The kernel mount failed.
    #[error("cannot mount at '{}'", path.display())]
    Mount {
        /// The mountpoint.
        path: PathBuf,
        /// The error fuser/fusermount3 reported.
        source: io::Error,
    },
    /// The background daemon reported a failure (already formatted, with its exit code).
    #[error("{message}")]
    Daemon {
        /// The child's exit code.
        code: u8,
        /// The child's one-line message.
        message: String,
    },
    /// `verify` found damaged chunks or structures (already reported on stdout).
    #[error("{0}")]
    Damaged(String),
    /// Anything else.
    #[error("{what}")]
    Other {
        /// What failed.
        what: String,
        /// The cause, if any.
        #[source]
        source: Option<io::Error>,
    },
}

impl Error {
    /// A container failure of `action` (`mount`, `compact`) on `path`: [`Error::Busy`] when
    /// another b2fs process holds the source, else [`Error::Source`].
    pub fn from_container(action: &'static str, path: &Path, e: ContainerError) -> Error {
        match e {
            ContainerError::Busy { .. } => Error::Busy {
                action,
                path: path.to_path_buf(),
                source: Box::new(e),
            },
            e => Error::Source {
                path: path.to_path_buf(),
                source: e,
            },
        }
    }

    /// The documented exit code of this failure class.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => EXIT_USAGE,
            Error::Source { .. } | Error::SourcePath { .. } => EXIT_SOURCE,
            Error::Mountpoint { .. } | Error::Mount { .. } => EXIT_MOUNTPOINT,
            Error::Fuse(_) => EXIT_FUSE,
            Error::Busy { .. } => EXIT_OTHER,
            Error::Damaged(_) => EXIT_DAMAGED,
            Error::Daemon { code, .. } | Error::Remote { code, .. } => *code,
            Error::Other { .. } => EXIT_OTHER,
        }
    }

    fn other(what: impl Into<String>, source: io::Error) -> Error {
        Error::Other {
            what: what.into(),
            source: Some(source),
        }
    }
}

/// Entry point of the binary: parses `std::env::args`, runs, prints at most one error line.
pub fn main() -> ExitCode {
    let args = fstab::normalize_args(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if !matches!(cli.command, Command::Mount(_)) {
        daemon::default_sigpipe();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("b2fs: {}", display_chain(&e));
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs a parsed command line.
///
/// # Errors
/// Any [`enum@Error`]; the caller prints it and exits with [`Error::exit_code`].
pub fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Mount(m) => daemon::mount(m),
        Command::Umount(u) => umount::umount(&u.mountpoint, u.lazy),
        Command::Info(i) => info::info(&i.source, i.json, &i.options),
        Command::Verify(v) => verify::verify(&v.source, v.json, &v.options),
        Command::Salvage(s) => salvage::salvage(&s.source, &s.dest, &s.options),
        Command::Compact(c) => compact::compact(&c.source),
        Command::Log(l) => events::log(&l.mountpoint),
        Command::Completions(c) => docs::completions(c.shell),
        Command::Man => docs::man(),
    }
}

/// Checks that `source` exists and is readable (before any mount work).
fn check_source(source: &Path) -> Result<(), Error> {
    std::fs::metadata(source)
        .map(|_| ())
        .map_err(|e| Error::SourcePath {
            path: source.to_path_buf(),
            source: e,
        })
}

/// Checks that `mp` is an existing directory that is not already a mount point, and empty
/// unless `nonempty` (`-o nonempty`).
fn check_mountpoint(mp: &Path, nonempty: bool) -> Result<PathBuf, Error> {
    let err = |why: String| Error::Mountpoint {
        path: mp.to_path_buf(),
        why,
    };
    let meta = match std::fs::metadata(mp) {
        Ok(m) => m,
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            return Err(err(
                "a dead FUSE mount is still attached (run 'b2fs umount' on it)".into(),
            ));
        }
        Err(e) => return Err(err(e.to_string())),
    };
    if !meta.is_dir() {
        return Err(err("not a directory".into()));
    }
    let abs = std::fs::canonicalize(mp).map_err(|e| err(e.to_string()))?;
    if umount::is_mountpoint(&abs) {
        return Err(err("already a mount point (busy)".into()));
    }
    if !nonempty {
        let mut entries = std::fs::read_dir(&abs).map_err(|e| err(e.to_string()))?;
        if entries.next().is_some() {
            return Err(err(
                "not empty: its files would be hidden while mounted (use -o nonempty to mount \
                 over them)"
                    .into(),
            ));
        }
    }
    Ok(abs)
}

/// Checks that `/dev/fuse` and `fusermount3` are there.
fn check_fuse() -> Result<(), Error> {
    if !Path::new("/dev/fuse").exists() {
        return Err(Error::Fuse("/dev/fuse does not exist".into()));
    }
    if umount::find_in_path("fusermount3").is_none() {
        return Err(Error::Fuse("fusermount3 not found in PATH".into()));
    }
    Ok(())
}
