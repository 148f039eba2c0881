//! mount(8) and `/etc/fstab` compatibility: `mount -t fuse.b2fs SOURCE MOUNTPOINT -o OPTS`
//! goes through the standard `mount.fuse3` helper, which runs `b2fs SOURCE MOUNTPOINT -o
//! OPTS` (no subcommand) and passes on the generic mount options of the fstab line. Pure
//! functions, unit-tested on argument arrays.
//!
//! - [`normalize_args`]: a command line whose first argument is not a subcommand or a flag
//!   is a mount (`mount` is inserted).
//! - [`is_generic`]: the options mount(8) and the helper pass that mean nothing to b2fs, which
//!   accepts and ignores them. b2fs always mounts `nodev,nosuid` and shows no executable
//!   files, so `dev`/`suid`/`exec` and their negations change nothing; time, sync and
//!   ownership options do not apply to a source that keeps its own times; `auto`, `noauto`,
//!   `user`, `users`, `owner`, `group`, `_netdev`, `nofail`, `defaults`, `x-*`, `comment=`
//!   are for mount(8) and systemd, not the filesystem.

use std::ffi::OsString;

/// The subcommands (and flags) that keep their meaning as a first argument.
const SUBCOMMANDS: &[&str] = &[
    "mount",
    "umount",
    "info",
    "verify",
    "salvage",
    "compact",
    "log",
    "completions",
    "man",
    "help",
];

/// `b2fs SOURCE MOUNTPOINT [-o OPTS]` (how `mount.fuse3` calls a FUSE program) becomes `b2fs
/// mount SOURCE MOUNTPOINT [-o OPTS]`; any other command line is returned as given.
pub fn normalize_args(args: Vec<OsString>) -> Vec<OsString> {
    let Some(first) = args.get(1) else {
        return args;
    };
    let s = first.to_string_lossy();
    if s.starts_with('-') || SUBCOMMANDS.contains(&s.as_ref()) {
        return args;
    }
    let mut out = Vec::with_capacity(args.len() + 1);
    out.push(args[0].clone());
    out.push(OsString::from("mount"));
    out.extend(args.into_iter().skip(1));
    out
}

/// Generic mount options (without a value) b2fs accepts and ignores.
const GENERIC: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "_netdev",
    "nofail",
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "atime",
    "noatime",
    "diratime",
    "nodiratime",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "lazytime",
    "nolazytime",
    "sync",
    "async",
    "dirsync",
    "silent",
    "loud",
    "mand",
    "nomand",
    "iversion",
    "noiversion",
];

/// Whether `key` (with `has_value`: it came as `key=value`) is a generic mount option b2fs
/// ignores (see the module doc).
pub fn is_generic(key: &str, has_value: bool) -> bool {
    if key.starts_with("x-") {
        return true;
    }
    if has_value {
        matches!(key, "comment" | "fsname" | "subtype")
    } else {
        GENERIC.contains(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn helper_command_line_becomes_a_mount() {
        assert_eq!(
            normalize_args(os(&["b2fs", "/d/a.b2nd", "/mnt", "-o", "ro,dev,suid"])),
            os(&["b2fs", "mount", "/d/a.b2nd", "/mnt", "-o", "ro,dev,suid"])
        );
        for keep in [
            &["b2fs"][..],
            &["b2fs", "--help"],
            &["b2fs", "-V"],
            &["b2fs", "info", "x"],
            &["b2fs", "umount", "-l", "/mnt"],
            &["b2fs", "mount", "a", "b"],
        ] {
            assert_eq!(normalize_args(os(keep)), os(keep));
        }
    }

    #[test]
    fn generic_options_are_known() {
        for key in [
            "noauto", "user", "_netdev", "nofail", "dev", "exec", "defaults",
        ] {
            assert!(is_generic(key, false), "{key}");
        }
        assert!(is_generic("x-systemd.automount", false));
        assert!(is_generic("comment", true));
        assert!(!is_generic("cache_size", true));
        assert!(!is_generic("frobnicate", false));
        assert!(!is_generic("user", true));
    }
}
