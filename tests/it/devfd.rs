//! `/dev/fd/N` mount points (libfuse's convention, issue 24): `mount -t fuse.b2fs ... -o
//! drop_privileges` and an fstab line with it, through the real mount(8) and `mount.fuse3`,
//! which opens `/dev/fuse`, mounts, drops every capability and runs `b2fs SOURCE /dev/fd/N -o
//! OPTS`: b2fs serves that descriptor with no capability, umount (or `b2fs umount`) ends it,
//! `allow_other` reaches the kernel and b2fs's own access check, a SIGTERM ends the daemon,
//! and a refused start says what it leaves behind. As root, in a private mount namespace.

use crate::support::is_mounted;
use crate::system::namespace_lines;

/// Shell functions of the scripts below: the process serving `$MP` (from its root's
/// `user.b2fs.pid`), and a bounded wait for a process to be gone (or a zombie).
const HELPERS: &str = r#"
daemon() { getfattr --absolute-names --only-values -n user.b2fs.pid "$MP"; }
gone() {
    i=0
    while [ $i -lt 250 ]; do
        if [ ! -e /proc/$1 ] || grep -q ') Z' /proc/$1/stat 2>/dev/null; then echo gone; return; fi
        i=$((i+1)); sleep 0.02
    done
    echo alive
}
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
"#;

#[test]
fn devfd_mount_drop_privileges_serves_the_descriptor_until_umount() {
    let test = "devfd_mount_drop_privileges_serves_the_descriptor_until_umount";
    let (src, m, tab) = or_skip!(crate::system::mount_t_setup(
        test,
        "ro,noauto,drop_privileges,nodev,nosuid"
    ));
    // Each step prints what the test checks; `sh -e` stops at the first failure.
    let script = format!(
        "{HELPERS}{}",
        r#"
mount -t fuse.b2fs "$SRC" "$MP" -o ro,drop_privileges,allow_other,nodev,nosuid
echo "type $(findmnt -n -o FSTYPE "$MP") $(findmnt -n -o OPTIONS "$MP")"
PID=$(daemon)
echo "served by: $(tr '\0' ' ' < /proc/$PID/cmdline)"
echo "caps $(awk '/^CapEff/ {print $2}' /proc/$PID/status) $(awk '/^CapBnd/ {print $2}' /proc/$PID/status)"
echo "chunk $(stat -c %s "$MP/data/00000003.bin") $(od -An -tf8 -N8 "$MP/data/00000000.bin")"
echo "nobody reads $(as_nobody cat "$MP/meta/sizes" | grep -c '"nchunks": 4')"
umount "$MP"
echo "after umount: $(findmnt -n "$MP" | wc -l) mounts, daemon $(gone $PID)"
mount -T "$TAB" "$MP"
PID=$(daemon)
if as_nobody cat "$MP/meta/sizes" >/dev/null 2>&1; then echo "fstab nobody reads"; else echo "fstab nobody refused"; fi
if echo '{}' 2>/dev/null > "$MP/__attrs__"; then echo "write accepted"; else echo "write refused"; fi
b2fs umount "$MP"
echo "after b2fs umount: $(findmnt -n "$MP" | wc -l) mounts, daemon $(gone $PID)"
echo done
"#
    );
    let (lines, report) = namespace_lines(&script, &src, &m.mp, tab.path());
    assert_eq!(lines.len(), 10, "{report}");
    // mount.fuse3 mounted (type with the subtype), with the options it was given.
    assert!(lines[0].starts_with("type fuse.b2fs ro,"), "{report}");
    for opt in ["nosuid", "nodev", "allow_other"] {
        assert!(lines[0].contains(opt), "{opt}: {report}");
    }
    // The daemon child serves the inherited descriptor, with no capability at all.
    assert!(
        lines[1].contains("--daemon-child") && lines[1].contains(" /dev/fd/"),
        "{report}"
    );
    assert_eq!(
        lines[2], "caps 0000000000000000 0000000000000000",
        "{report}"
    );
    // The first value of the sample: 273.15 (K), as od prints it; chunk 3 is 2736 bytes.
    assert!(
        lines[3].starts_with("chunk 2736 ") && lines[3].contains("273.15"),
        "{report}"
    );
    // allow_other: the kernel and b2fs's own check let another user in.
    assert_eq!(lines[4], "nobody reads 1", "{report}");
    assert_eq!(lines[5], "after umount: 0 mounts, daemon gone", "{report}");
    // Without allow_other only the mounting user (root) gets in.
    assert_eq!(lines[6], "fstab nobody refused", "{report}");
    assert_eq!(lines[7], "write refused", "{report}");
    assert_eq!(
        lines[8], "after b2fs umount: 0 mounts, daemon gone",
        "{report}"
    );
    assert_eq!(lines[9], "done", "{report}");
    assert!(!is_mounted(&m.mp));
}

/// What b2fs cannot avoid on a mount another process made: a refused start (missing source)
/// and a SIGTERM close the connection, and the mount point answers ENOTCONN until unmounted.
/// The refusal says so, with b2fs's exit code; `umount` then leaves nothing.
#[test]
fn devfd_refused_start_and_sigterm_leave_a_disconnected_mount_to_umount() {
    let test = "devfd_refused_start_and_sigterm_leave_a_disconnected_mount_to_umount";
    let (src, m, tab) = or_skip!(crate::system::mount_t_setup(test, ""));
    let script = format!(
        "{HELPERS}{}",
        r#"
if mount -t fuse.b2fs "$SRC.missing" "$MP" -o ro,drop_privileges 2>"$MP.err"; then echo mounted; else echo "refused $?"; fi
cat "$MP.err"
if ls "$MP" 2>/dev/null; then echo listed; else echo "not connected"; fi
umount "$MP"
echo "after umount: $(findmnt -n "$MP" | wc -l) mounts"
mount -t fuse.b2fs "$SRC" "$MP" -o ro,drop_privileges
PID=$(daemon)
kill -TERM $PID
echo "daemon $(gone $PID)"
if ls "$MP" >/dev/null 2>"$MP.err"; then echo listed; else echo "not connected"; fi
umount "$MP"
echo "after umount: $(findmnt -n "$MP" | wc -l) mounts"
"#
    );
    let (lines, report) = namespace_lines(&script, &src, &m.mp, tab.path());
    assert_eq!(lines.len(), 7, "{report}");
    // mount(8) passes on b2fs's exit code for a missing source (3), and its one line.
    assert_eq!(lines[0], "refused 3", "{report}");
    assert!(
        lines[1].starts_with("b2fs: cannot open '")
            && lines[1].contains("sample.b2nd.missing")
            && lines[1].contains("left disconnected: unmount it"),
        "{report}"
    );
    let umounted = "after umount: 0 mounts";
    let rest = [
        "not connected",
        umounted,
        "daemon gone",
        "not connected",
        umounted,
    ];
    assert_eq!(lines[2..], rest, "{report}");
    assert!(!is_mounted(&m.mp));
}

/// The container and CSI split (docs/CONTAINERS.md): a privileged side opens `/dev/fuse`
/// and mounts (here mount(2) through `mount -i`, no helper) for user 65534; an unprivileged
/// process of that user serves the descriptor in the foreground with no `/dev/fuse` access of
/// its own; only that user reads (no `allow_other`: the kernel refuses even root); umount
/// ends the daemon.
#[test]
fn devfd_an_unprivileged_user_serves_the_mount_root_made() {
    let test = "devfd_an_unprivileged_user_serves_the_mount_root_made";
    let (src, m, tab) = or_skip!(crate::system::mount_t_setup(test, ""));
    // The mount point must be reachable by user 65534.
    let mut perms = std::fs::metadata(&m.mp).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&m.mp, perms).unwrap();
    let parent = m.mp.parent().unwrap();
    let mut perms = std::fs::metadata(parent).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(parent, perms).unwrap();
    let script = format!(
        "{HELPERS}{}",
        r#"
exec 3<>/dev/fuse
mount -i -t fuse.b2fs -o fd=3,rootmode=40000,user_id=65534,group_id=65534,ro,nodev,nosuid "$SRC" "$MP"
B2FS=$(readlink -f /usr/local/bin/b2fs)
setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "$B2FS" mount -f "$SRC" /dev/fd/3 -o ro 2>"$MP.log" &
PID=$!
exec 3>&-
i=0; until as_nobody test -e "$MP/meta/sizes" || [ $i -ge 250 ]; do i=$((i+1)); sleep 0.02; done
echo "served by uid $(awk '/^Uid/ {print $2}' /proc/$PID/status)"
echo "nobody reads $(as_nobody cat "$MP/meta/sizes" | grep -c '"nchunks": 4')"
if cat "$MP/meta/sizes" >/dev/null 2>&1; then echo "root reads"; else echo "root refused"; fi
umount "$MP"
echo "after umount: daemon $(gone $PID)"
wait $PID && echo "exit 0" || echo "exit $?"
grep -c "mounted .* at /dev/fd/3" "$MP.log"
"#
    );
    let (lines, report) = namespace_lines(&script, &src, &m.mp, tab.path());
    assert_eq!(
        lines,
        [
            "served by uid 65534",
            "nobody reads 1",
            "root refused",
            "after umount: daemon gone",
            "exit 0",
            "1"
        ],
        "{report}"
    );
    assert!(!is_mounted(&m.mp));
}

/// Outside mount(8): a `/dev/fd/N` that is not an open `/dev/fuse` is refused before anything
/// is served, with the mount point's exit code.
#[test]
fn devfd_a_descriptor_that_is_not_dev_fuse_is_refused() {
    let src = crate::support::repo_root().join("examples/sample.b2nd");
    let out = crate::support::b2fs()
        .arg("mount")
        .arg(&src)
        .arg("/dev/fd/0")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.starts_with("b2fs: mountpoint '/dev/fd/0': descriptor 0 is not /dev/fuse"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = crate::support::b2fs()
        .arg("mount")
        .arg(&src)
        .arg("/dev/fd/987654")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("descriptor 987654 is not open"), "{err}");
}
