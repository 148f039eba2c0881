//! The command line as clap parses it, and the `-o` mount options with their checks. Pure:
//! nothing here touches the system, so it is unit-tested on argument arrays.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

/// Exit codes, also printed by `--help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success (verify: SOURCE is sound)
  1  other failure (I/O error, daemon died, unmount timed out, SOURCE busy: compact of a
     mounted source, mount of a source being compacted; salvage: DEST exists or SOURCE
     cannot be salvaged); verify: damage found
  2  usage error (bad arguments or -o options)
  3  SOURCE missing, unreadable or not a Blosc2 frame / b2nd / bcolz directory (compact:
     or SOURCE not writable, or no file can be made where its rewrite lies: beside it, or
     beside the outermost .b2d store holding it)
  4  MOUNTPOINT missing, not a directory, already mounted or busy (umount: not mounted)
  5  FUSE unavailable: no /dev/fuse or no fusermount3
  6  remote SOURCE (URL): endpoint unreachable, timing out or failing (5xx)";

const MOUNT_HELP: &str = "\
Mount options (-o, comma-separated, may repeat):
  ro              read-only: every change gets EROFS (default: read-write, edits are
                  committed to SOURCE; see docs/SEMANTICS.md)
  rw              read-write (the default)
  allow_other     let other users access the mount
  allow_root      let root (and the owner) access the mount
  auto_unmount    the mount goes away when the b2fs process dies (even by SIGKILL);
                  needs allow_other or allow_root (implied: allow_root; for a user
                  other than root, /etc/fuse.conf must say user_allow_other)
  cache_size=SIZE decompressed-chunk cache budget, K/M/G suffixes (default 256M)
  threads=N       FUSE worker threads (default 2)
  direct_io       every read reaches b2fs, served from its chunk cache (the default where
                  the kernel can mmap such files: Linux 6.6 and later)
  keep_cache      read through the kernel page cache instead: slower first reads, but
                  re-reads of data larger than cache_size come from the kernel
  passthrough     (read-only mounts, root) serve array.npy, table.npy and chunk files by
                  FUSE passthrough (Linux 6.9+): the first open of a file decodes it whole
                  into memory, then its reads and mmap faults never reach b2fs (tmpfs
                  speed) and later opens reuse it; refused on a read-write mount; without
                  CAP_SYS_ADMIN or kernel support, one log line and the ordinary path
  passthrough_budget=SIZE  memory for passthrough's decoded files, K/M/G suffixes
                  (default: a quarter of RAM); a larger file, or one that does not fit
                  beside the files in use, is served the ordinary way
  edit_budget=SIZE  memory for pending (uncommitted) chunk edits, K/M/G suffixes
                  (default: 1G, at most a quarter of RAM); past it, the least recently
                  edited chunks go to an unlinked file in spill_dir until their commit
  spill_dir=PATH  where that file is made (default: $TMPDIR, else /tmp); when it is full
                  or failing, the write that needed the room fails (ENOSPC or EIO)
  zarr_shards     the Zarr view (zarr/) shows each b2nd array whose blocks tile its
                  chunks sharded: one shard per chunk, one inner chunk per block
  zarr_strict_json  every zarr.json of the Zarr view is strict JSON (for TensorStore,
                  JavaScript, Go): NaN and infinite attributes are the strings \"NaN\",
                  \"Infinity\", \"-Infinity\" instead of zarr-python's bare NaN
  debug           verbose logging
  nonempty        mount over a directory that is not empty (its files are hidden while
                  mounted); without it such a mount point is refused

Remote sources (SOURCE = s3://BUCKET/KEY, s3://BUCKET/PREFIX/ for a sparse frame or bcolz
root, http(s)://HOST/PATH, or http(s)://HOST/roots/ROOT[/PATH] of Caterva2; read-only):
  endpoint=URL    S3 endpoint (path-style; http:// allowed), else AWS_ENDPOINT_URL
  region=NAME     S3 region (else AWS_REGION / AWS_DEFAULT_REGION, else us-east-1)
  no_sign_request anonymous S3 access (else credentials from the AWS_* variables)
  remote_cache=SIZE  budget of fetched compressed chunks kept in memory (default 256M)
  remote_timeout=SECS  deadline of one request attempt (default 10)
  remote_retries=N  retries of a failed request, with backoff (default 3)
  remote_recheck=SECS  ask this often whether a mounted frame (or an opened dataset of a
                  Caterva2 directory) changed on the server, and open it again when it did
                  (default 10; 0: never, its reads then fail)
  ca_file=PATH    PEM certificates to trust for HTTPS besides the system's (SSL_CERT_FILE)
  cache_dir=DIR   keep fetched compressed chunks on disk in DIR, shared by mounts (checked,
                  keyed by object and ETag); remounts read them with no GET
  cache_dir_size=SIZE  bound of cache_dir, least recently used out (default 4G)
  caterva2        the URL is a Caterva2 server's (implied by a /roots/@ROOT path: a root,
                  directory or dataset as its web UI shows it)
  c2_user=NAME    log in to Caterva2 as NAME (else B2FS_CATERVA2_USER)
  c2_password_file=PATH  the Caterva2 password's file (else B2FS_CATERVA2_PASSWORD)
  c2_relist=SECS  list a Caterva2 root or directory again this often, showing datasets
                  added and hiding those removed since (default 10; 0: never)

Generic options that mount(8), fstab and mount.fuse3 pass (defaults, auto, noauto, user,
users, owner, group, _netdev, nofail, dev, nodev, suid, nosuid, exec, noexec, the atime
and sync families, x-*, comment=) are accepted and ignored: b2fs always mounts
nodev,nosuid and shows no executable files. `b2fs SOURCE MOUNTPOINT -o OPTS` (how
mount.fuse3 runs it) is `b2fs mount SOURCE MOUNTPOINT -o OPTS`, so
`mount -t fuse.b2fs SOURCE MOUNTPOINT -o ro` and this fstab line work:
  /data/a.b2nd  /mnt/a  fuse.b2fs  ro,noauto,user  0 0

Without -f, b2fs mounts in the background and returns once the mount is live; the
daemon logs to $XDG_RUNTIME_DIR/b2fs-PID.log (/tmp/b2fs-PID.log when XDG_RUNTIME_DIR is
unset; a starting daemon removes there the logs of ended daemons a week old, or a day old
past the newest 32). With -f it stays in the foreground, logs to stderr, and unmounts cleanly on
SIGINT, SIGTERM or SIGHUP. RUST_LOG overrides the log level.";

/// `b2fs`: mount Blosc2 frames, b2nd arrays and bcolz directories as plain directories.
#[derive(Debug, Parser)]
#[command(name = "b2fs", version, about, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Mount SOURCE at MOUNTPOINT: a Blosc2 frame or b2nd file, a sparse frame or bcolz
    /// directory, a python-blosc2 store (.b2z, .b2d), a directory of any of these, an s3:// or
    /// http(s):// URL of one, or a Caterva2 server's root, directory or dataset.
    #[command(after_help = format!("{MOUNT_HELP}\n\n{EXIT_CODES_HELP}"))]
    Mount(MountArgs),
    /// Unmount a b2fs mount and wait until its daemon has exited.
    #[command(after_help = EXIT_CODES_HELP)]
    Umount(UmountArgs),
    /// Show, without mounting, what a mount of SOURCE would contain, and its chunk table.
    #[command(after_help = EXIT_CODES_HELP)]
    Info(InfoArgs),
    /// Check SOURCE: its structure, and every chunk decoded (on every core); report each
    /// damaged chunk with its array, index and reason (docs/VERIFY.md).
    #[command(after_help = format!("{VERIFY_HELP}\n\n{EXIT_CODES_HELP}"))]
    Verify(VerifyArgs),
    /// Write DEST, a copy of SOURCE of the same kind keeping every chunk that decodes byte
    /// for byte and each damaged chunk replaced by zeros, listed on stderr and in DEST's
    /// attributes under `b2fs_salvage` (docs/VERIFY.md). DEST must not exist.
    #[command(after_help = format!("{SALVAGE_HELP}\n\n{EXIT_CODES_HELP}"))]
    Salvage(SalvageArgs),
    /// Rewrite a contiguous frame without the dead space edits leave (temp file + rename).
    /// Refused (exit 1, source untouched) while a b2fs mount serves the source.
    #[command(after_help = EXIT_CODES_HELP)]
    Compact(CompactArgs),
    /// Show the recent refusals and errors of a mount (also those of the last close, which
    /// shells never report), with their reasons.
    #[command(after_help = EXIT_CODES_HELP)]
    Log(LogArgs),
    /// Print a shell completion script generated from these definitions.
    Completions(CompletionsArgs),
    /// Print the man page (roff) generated from these definitions: `b2fs man | man -l -`.
    Man,
}

/// `b2fs log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Where the source is mounted (or any path inside the mount).
    pub mountpoint: PathBuf,
}

/// `b2fs completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// `b2fs compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The contiguous frame (.b2frame / .b2nd file) to rewrite.
    pub source: PathBuf,
}

/// `b2fs mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// Stay in the foreground (log to stderr; Ctrl-C unmounts).
    #[arg(short = 'f', long)]
    pub foreground: bool,
    /// Mount options, comma-separated (see below).
    #[arg(short = 'o', value_name = "OPTS")]
    pub options: Vec<String>,
    /// The source to mount.
    pub source: PathBuf,
    /// An existing empty directory (or, with `-o nonempty`, any directory), or /dev/fd/N: the
    /// open /dev/fuse descriptor of a mount another process made (mount.fuse3 -o
    /// drop_privileges, a container's privileged side), which b2fs serves without mounting.
    pub mountpoint: PathBuf,
    /// Internal: this process is the background daemon; report readiness on stdout.
    #[arg(long, hide = true)]
    pub daemon_child: bool,
}

/// `b2fs umount`.
#[derive(Debug, Args)]
pub struct UmountArgs {
    /// Lazy: detach the mount now (`fusermount3 -u -z`); programs with open files keep
    /// them, and the b2fs process exits once the last one is closed. Does not wait.
    #[arg(short = 'l', long, visible_short_alias = 'z')]
    pub lazy: bool,
    /// Where the source is mounted.
    pub mountpoint: PathBuf,
}

const VERIFY_HELP: &str = "\
Checks every kind of source: frames, sparse frames, b2nd, bcolz carrays and ctables,
.b2z/.b2d stores, directories of sources and remote sources (URL, with -o as for mount).
A chunk is damaged when its bytes cannot be read, its header is invalid, it declares a
size its slot does not have, or it does not decode. Text report on stdout (a progress bar
on stderr when it is a terminal); --json prints one object:
  {\"source\", \"kind\", \"sound\", \"arrays\", \"chunks\", \"special_chunks\",
   \"decoded_bytes\", \"damaged_chunks\",
   \"damaged\": [{\"array\": KEY|COLUMN|null, \"chunk\": N, \"reason\": TEXT}, ...],
   \"structure\": [{\"array\": KEY|null, \"reason\": TEXT}, ...], \"skipped\": [...]}
Exit 0: sound; 1: damage found; 3: SOURCE missing or not a container.";

const SALVAGE_HELP: &str = "\
DEST gets the same kind as SOURCE (frame, sparse frame, b2nd, bcolz carray or ctable,
.b2z/.b2d store, directory of sources; a remote frame or .b2z becomes a local file). Sound
chunks are copied as stored (not re-encoded); a damaged chunk becomes a chunk of zeros of
its size. The damaged chunks are listed on stderr and recorded in the attributes of the
array holding them (frame vlmeta, bcolz __attrs__; a ctable's root __attrs__) under
b2fs_salvage: {\"source\": SOURCE, \"damaged\": [{\"array\", \"chunk\", \"reason\"}, ...]}.
A source whose structure cannot be opened (or a store leaf that cannot) is not salvaged.";

/// `b2fs verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The source to check (path or URL).
    pub source: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Remote source options (endpoint=, region=, no_sign_request, ...), as for mount.
    #[arg(short = 'o', value_name = "OPTS")]
    pub options: Vec<String>,
}

/// `b2fs salvage`.
#[derive(Debug, Args)]
pub struct SalvageArgs {
    /// The damaged source (path or URL).
    pub source: PathBuf,
    /// Where to write the salvaged copy (must not exist).
    pub dest: PathBuf,
    /// Remote source options (endpoint=, region=, no_sign_request, ...), as for mount.
    #[arg(short = 'o', value_name = "OPTS")]
    pub options: Vec<String>,
}

/// `b2fs info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The source to describe.
    pub source: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Remote source options (endpoint=, region=, no_sign_request, ...), as for mount.
    #[arg(short = 'o', value_name = "OPTS")]
    pub options: Vec<String>,
}

/// The parsed `-o` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// `allow_other`.
    pub allow_other: bool,
    /// `allow_root`.
    pub allow_root: bool,
    /// `auto_unmount`.
    pub auto_unmount: bool,
    /// `cache_size=`, in bytes.
    pub cache_size: usize,
    /// `threads=`.
    pub threads: usize,
    /// `debug`.
    pub debug: bool,
    /// `direct_io` (true) or `keep_cache` (false); `None`: neither given.
    pub direct_io: Option<bool>,
    /// `ro`.
    pub read_only: bool,
    /// `nonempty`: accept a mount point that is not empty.
    pub nonempty: bool,
    /// `passthrough`.
    pub passthrough: bool,
    /// `passthrough_budget=`, in bytes; `None`: the default (a quarter of RAM).
    pub passthrough_budget: Option<usize>,
    /// `zarr_shards`: the Zarr view shows arrays sharded by block (docs/ZARR.md).
    pub zarr_shards: bool,
    /// `zarr_strict_json`: the Zarr view's `zarr.json` documents are strict JSON (RFC 8259):
    /// a NaN or infinite attribute is the string `"NaN"`, `"Infinity"` or `"-Infinity"`
    /// (docs/ZARR.md).
    pub zarr_strict_json: bool,
    /// `edit_budget=`, in bytes; `None`: the default (1 GiB, at most a quarter of RAM).
    pub edit_budget: Option<usize>,
    /// `spill_dir=` (absolute); `None`: `$TMPDIR`, else `/tmp`.
    pub spill_dir: Option<PathBuf>,
    /// The options of a remote source (`endpoint=`, `region=`, ...; see `cli/remote.rs`).
    pub remote: crate::remote::RemoteOptions,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            allow_other: false,
            allow_root: false,
            auto_unmount: false,
            cache_size: crate::reader::ReaderOptions::default().cache_size,
            threads: 2,
            debug: false,
            direct_io: None,
            read_only: false,
            nonempty: false,
            passthrough: false,
            passthrough_budget: None,
            zarr_shards: false,
            zarr_strict_json: false,
            edit_budget: None,
            spill_dir: None,
            remote: crate::remote::RemoteOptions::default(),
        }
    }
}

impl MountOptions {
    /// Parses every `-o` argument (each comma-separated).
    ///
    /// # Errors
    /// A message naming the bad option.
    pub fn parse(args: &[String]) -> Result<MountOptions, String> {
        let mut o = MountOptions::default();
        for opt in args
            .iter()
            .flat_map(|a| a.split(','))
            .filter(|s| !s.is_empty())
        {
            let (key, value) = match opt.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (opt, None),
            };
            match (key, value) {
                ("ro", None) => o.read_only = true,
                ("rw", None) => o.read_only = false,
                ("allow_other", None) => o.allow_other = true,
                ("allow_root", None) => o.allow_root = true,
                ("auto_unmount", None) => o.auto_unmount = true,
                ("debug", None) => o.debug = true,
                ("nonempty", None) => o.nonempty = true,
                ("passthrough", None) => o.passthrough = true,
                ("zarr_shards", None) => o.zarr_shards = true,
                ("zarr_strict_json", None) => o.zarr_strict_json = true,
                ("passthrough_budget", Some(v)) => {
                    o.passthrough_budget =
                        Some(parse_size(v).ok_or_else(|| {
                            format!("option 'passthrough_budget': bad size '{v}'")
                        })?);
                }
                ("edit_budget", Some(v)) => {
                    o.edit_budget = Some(
                        parse_size(v)
                            .ok_or_else(|| format!("option 'edit_budget': bad size '{v}'"))?,
                    );
                }
                ("spill_dir", Some(v)) if !v.is_empty() => {
                    if !Path::new(v).is_dir() {
                        return Err(format!("option 'spill_dir': '{v}' is not a directory"));
                    }
                    o.spill_dir = Some(std::path::absolute(v).unwrap_or_else(|_| v.into()));
                }
                ("direct_io", None) => o.direct_io = Some(true),
                ("keep_cache", None) => o.direct_io = Some(false),
                ("cache_size", Some(v)) => {
                    o.cache_size = parse_size(v)
                        .ok_or_else(|| format!("option 'cache_size': bad size '{v}'"))?;
                }
                ("threads", Some(v)) => {
                    o.threads = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=256).contains(n))
                        .ok_or_else(|| format!("option 'threads': expected 1..256, got '{v}'"))?;
                }
                (k, v) if super::fstab::is_generic(k, v.is_some()) => {}
                (
                    "ro" | "rw" | "allow_other" | "allow_root" | "auto_unmount" | "debug"
                    | "direct_io" | "keep_cache" | "nonempty" | "passthrough" | "zarr_shards"
                    | "zarr_strict_json",
                    Some(_),
                ) => {
                    return Err(format!("option '{key}' takes no value"));
                }
                ("cache_size" | "threads" | "passthrough_budget" | "edit_budget", None)
                | ("spill_dir", None | Some("")) => {
                    return Err(format!("option '{key}' needs a value ({key}=...)"));
                }
                _ if super::remote::set_option(&mut o.remote, key, value)? => {}
                _ => return Err(format!("unknown mount option '{opt}'")),
            }
        }
        Ok(o)
    }

    /// The options as `-o` text (for the daemon child's command line).
    pub fn to_arg(&self) -> String {
        let mut v = vec![
            if self.read_only { "ro" } else { "rw" }.to_owned(),
            format!("cache_size={}", self.cache_size),
            format!("threads={}", self.threads),
        ];
        if self.allow_other {
            v.push("allow_other".into());
        }
        if self.allow_root {
            v.push("allow_root".into());
        }
        if self.auto_unmount {
            v.push("auto_unmount".into());
        }
        if self.debug {
            v.push("debug".into());
        }
        if self.nonempty {
            v.push("nonempty".into());
        }
        if self.passthrough {
            v.push("passthrough".into());
        }
        if self.zarr_shards {
            v.push("zarr_shards".into());
        }
        if self.zarr_strict_json {
            v.push("zarr_strict_json".into());
        }
        if let Some(n) = self.passthrough_budget {
            v.push(format!("passthrough_budget={n}"));
        }
        if let Some(n) = self.edit_budget {
            v.push(format!("edit_budget={n}"));
        }
        if let Some(d) = &self.spill_dir {
            v.push(format!("spill_dir={}", d.display()));
        }
        match self.direct_io {
            Some(true) => v.push("direct_io".into()),
            Some(false) => v.push("keep_cache".into()),
            None => {}
        }
        v.extend(super::remote::to_arg(&self.remote));
        v.join(",")
    }
}

/// `123`, `64K`, `256M`, `2G` (powers of 1024; case-insensitive; an optional trailing `B` or
/// `iB`) to bytes.
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    let t = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, shift) = match t.as_bytes().last()? {
        b'k' => (&t[..t.len() - 1], 10),
        b'm' => (&t[..t.len() - 1], 20),
        b'g' => (&t[..t.len() - 1], 30),
        b'0'..=b'9' => (t, 0),
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: usize = digits.parse().ok()?;
    n.checked_mul(1usize << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(s: &[&str]) -> Result<MountOptions, String> {
        MountOptions::parse(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn parse_size_accepts_suffixes() {
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("64K"), Some(64 << 10));
        assert_eq!(parse_size("256M"), Some(256 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("16MiB"), Some(16 << 20));
        for bad in ["", "M", "1.5G", "-1", "12T", "1 2"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn mount_options_parse_all_known() {
        let o = opts(&["ro,allow_other", "cache_size=64M,threads=4,debug,direct_io"]).unwrap();
        assert_eq!(
            o,
            MountOptions {
                allow_other: true,
                allow_root: false,
                auto_unmount: false,
                cache_size: 64 << 20,
                threads: 4,
                debug: true,
                direct_io: Some(true),
                read_only: true,
                nonempty: false,
                passthrough: false,
                passthrough_budget: None,
                zarr_shards: false,
                zarr_strict_json: false,
                edit_budget: None,
                spill_dir: None,
                remote: crate::remote::RemoteOptions::default(),
            }
        );
        let z = opts(&["ro,zarr_shards"]).unwrap();
        assert!(z.zarr_shards && z.read_only);
        assert_eq!(MountOptions::parse(&[z.to_arg()]).unwrap(), z);
        assert!(opts(&["zarr_shards=1"]).is_err());
        let s = opts(&["zarr_strict_json,zarr_shards"]).unwrap();
        assert!(s.zarr_strict_json && s.zarr_shards);
        assert_eq!(MountOptions::parse(&[s.to_arg()]).unwrap(), s);
        assert!(opts(&["zarr_strict_json=1"]).is_err());
        assert!(!opts(&["ro"]).unwrap().zarr_strict_json);
        let e = opts(&["edit_budget=64M,spill_dir=/var/tmp"]).unwrap();
        assert_eq!(e.edit_budget, Some(64 << 20));
        assert_eq!(
            e.spill_dir.as_deref(),
            Some(std::path::Path::new("/var/tmp"))
        );
        assert_eq!(MountOptions::parse(&[e.to_arg()]).unwrap(), e);
        let bad_dirs = ["spill_dir", "spill_dir=", "spill_dir=/nonexistent/b2fs"];
        for bad in ["edit_budget", "edit_budget=x"].into_iter().chain(bad_dirs) {
            assert!(opts(&[bad]).is_err(), "{bad}");
        }
        let p = opts(&["ro,passthrough,passthrough_budget=1G"]).unwrap();
        assert!(p.passthrough && p.read_only);
        assert_eq!(p.passthrough_budget, Some(1 << 30));
        assert_eq!(MountOptions::parse(&[p.to_arg()]).unwrap(), p);
        assert!(opts(&["passthrough=1"]).is_err());
        assert!(opts(&["passthrough_budget"]).is_err());
        assert!(opts(&["passthrough_budget=lots"]).is_err());
        let n = opts(&["nonempty"]).unwrap();
        assert!(n.nonempty);
        assert_eq!(MountOptions::parse(&[n.to_arg()]).unwrap(), n);
        // keep_cache and direct_io: the last one wins; both survive the daemon round trip
        let k = opts(&["direct_io,keep_cache"]).unwrap();
        assert_eq!(k.direct_io, Some(false));
        assert_eq!(MountOptions::parse(&[k.to_arg()]).unwrap(), k);
        assert_eq!(
            opts(&["keep_cache,direct_io"]).unwrap().direct_io,
            Some(true)
        );
        assert_eq!(opts(&[]).unwrap(), MountOptions::default());
        assert_eq!(MountOptions::parse(&[o.to_arg()]).unwrap(), o);
        // read-write is the default; the last of ro/rw wins
        assert!(!opts(&[]).unwrap().read_only);
        assert!(!opts(&["ro,rw"]).unwrap().read_only);
        let d = MountOptions::default();
        assert_eq!(MountOptions::parse(&[d.to_arg()]).unwrap(), d);
        let a = opts(&["auto_unmount,allow_root"]).unwrap();
        assert!(a.auto_unmount && a.allow_root);
        assert_eq!(MountOptions::parse(&[a.to_arg()]).unwrap(), a);
    }

    #[test]
    fn mount_options_ignore_what_fstab_and_mount_fuse3_pass() {
        let o =
            opts(&["ro,noauto,user,dev,suid,exec,_netdev,nofail,defaults,x-gvfs-show"]).unwrap();
        assert_eq!(
            o,
            MountOptions {
                read_only: true,
                ..MountOptions::default()
            }
        );
        assert!(opts(&["comment=systemd.automount,rw,relatime"]).is_ok());
        assert!(opts(&["auto_unmount=1"]).is_err());
        assert!(opts(&["user=bob"]).is_err());
    }

    #[test]
    fn mount_options_unknown_or_malformed_is_error() {
        for bad in [
            "nonsense",
            "rw=1",
            "cache_size",
            "cache_size=lots",
            "threads=0",
            "threads=x",
            "ro=1",
            "keep_cache=1",
            "direct_io=yes",
            "nonempty=1",
        ] {
            assert!(opts(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn cli_parses_subcommands() {
        let c = Cli::try_parse_from(["b2fs", "mount", "-f", "-o", "ro", "a.b2nd", "/mnt"]).unwrap();
        match c.command {
            Command::Mount(m) => {
                assert!(m.foreground);
                assert_eq!(m.options, ["ro"]);
                assert_eq!(m.source, PathBuf::from("a.b2nd"));
            }
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["b2fs", "mount", "a"]).is_err());
        assert!(Cli::try_parse_from(["b2fs", "info", "a", "--json"]).is_ok());
        assert!(Cli::try_parse_from(["b2fs", "umount", "/mnt"]).is_ok());
        match Cli::try_parse_from(["b2fs", "umount", "-l", "/mnt"])
            .unwrap()
            .command
        {
            Command::Umount(u) => assert!(u.lazy),
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["b2fs", "completions", "bash"]).is_ok());
        assert!(Cli::try_parse_from(["b2fs", "completions", "tcsh"]).is_err());
    }
}
