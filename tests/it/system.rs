//! b2fs where users already are, on real mounts: `mount -t fuse.b2fs` and an fstab line
//! through the standard `mount.fuse3` helper (as root), `-o auto_unmount` with a SIGKILLed
//! daemon, `b2fs umount -l`, `getfattr` and `setfattr`, `b2fs log` after a refused last
//! close, and editors that write a temp file and rename it (`sed -i`, `vim -es`, Python's
//! tempfile + os.replace) without warnings.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{
    Mount, b2fs, fuse, fuse_and_python, fuse_available, is_mounted, python_says, wait_until,
};

fn sample() -> PathBuf {
    crate::support::repo_root().join("examples/sample.b2nd")
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A copy of the sample in a fresh directory, for read-write mounts.
fn sample_copy() -> (tempfile::TempDir, PathBuf) {
    let (dir, src) = crate::support::temp_path("sample.b2nd");
    std::fs::copy(sample(), &src).unwrap();
    (dir, src)
}

/// The process id serving the mount at `mp`, from its root's `user.b2fs.pid`.
fn daemon_pid(mp: &Path) -> u32 {
    let v = xattr::get(mp, "user.b2fs.pid").unwrap().unwrap();
    String::from_utf8(v).unwrap().parse().unwrap()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
    })
}

fn kill9(pid: u32) {
    let st = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap_or(false)
}

/// Runs `script` with `sh -e` in a private mount namespace where `/usr/local/bin` holds only
/// a `b2fs` symlink to the built binary: mount(8) runs its helpers without the caller's PATH,
/// so `mount.fuse3` finds FUSE programs in the standard directories only, and the test must not
/// install anything on the machine. `$SRC`, `$MP`, `$TAB` are set.
pub(crate) fn in_mount_namespace(script: &str, src: &Path, mp: &Path, tab: &Path) -> Output {
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_b2fs"), bin.path().join("b2fs")).unwrap();
    let setup = format!(
        "mount --make-rprivate / && mount --bind '{}' /usr/local/bin\n{script}",
        bin.path().display()
    );
    Command::new("unshare")
        .args(["--mount", "sh", "-ec", &setup])
        .env("SRC", src)
        .env("MP", mp)
        .env("TAB", tab)
        .env("PATH", "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .expect("unshare (util-linux)")
}

/// [`in_mount_namespace`], which must succeed: the lines of its stdout, and its whole output
/// as text for failure messages.
#[track_caller]
pub(crate) fn namespace_lines(
    script: &str,
    src: &Path,
    mp: &Path,
    tab: &Path,
) -> (Vec<String>, String) {
    let out = in_mount_namespace(script, src, mp, tab);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    (stdout.lines().map(str::to_owned).collect(), report)
}

/// Whether `mount -t fuse.b2fs` can run here (FUSE, root, the mount.fuse3 helper), else
/// prints why the test skips (a failure under `B2FS_REQUIRE_FUSE` for a missing helper).
pub(crate) fn can_mount_t(test: &str) -> bool {
    if !fuse_available(test) {
        return false;
    }
    if !is_root() {
        eprintln!("SKIP {test}: mount(8) needs root");
        return false;
    }
    let helper =
        Path::new("/sbin/mount.fuse3").exists() || Path::new("/usr/sbin/mount.fuse3").exists();
    if !helper {
        assert!(
            std::env::var("B2FS_REQUIRE_FUSE").is_err(),
            "{test}: no mount.fuse3 (package fuse3)"
        );
        eprintln!("SKIP {test}: no mount.fuse3");
    }
    helper
}

/// What a mount(8) test needs where [`can_mount_t`]: the sample, an empty mount point and a
/// temp fstab with the line `SAMPLE MP fuse.b2fs OPTS 0 0` (no line for empty `opts`).
pub(crate) fn mount_t_setup(
    test: &str,
    opts: &str,
) -> Option<(PathBuf, Mount, tempfile::NamedTempFile)> {
    if !can_mount_t(test) {
        return None;
    }
    let (src, m) = (sample(), Mount::empty());
    let tab = tempfile::NamedTempFile::new().unwrap();
    if !opts.is_empty() {
        let line = format!(
            "{} {} fuse.b2fs {opts} 0 0\n",
            src.display(),
            m.mp.display()
        );
        std::fs::write(tab.path(), line).unwrap();
    }
    Some((src, m, tab))
}

/// The `mount -t fuse.b2fs` line of docs/CONFIGURATION.md and fstab line, through the real mount(8) and
/// mount.fuse3 (which call `b2fs SOURCE MOUNTPOINT -o OPTS`), as root.
#[test]
fn system_mount_t_fuse_b2fs_and_an_fstab_line() {
    let test = "system_mount_t_fuse_b2fs_and_an_fstab_line";
    let (src, m, tab) = or_skip!(mount_t_setup(test, "ro,noauto,user,_netdev,nofail"));
    // Each step prints what the test checks; `sh -e` stops at the first failure.
    let script = r#"
mount -t fuse.b2fs "$SRC" "$MP" -o ro,allow_other
echo "fstype $(findmnt -n -o FSTYPE "$MP") options $(findmnt -n -o OPTIONS "$MP")"
echo "chunk $(stat -c %s "$MP/data/00000000.bin") $(od -An -tf8 -N8 "$MP/data/00000000.bin")"
umount "$MP"
echo "after umount: $(findmnt -n "$MP" | wc -l) mounts"
mount -T "$TAB" "$MP"
echo "fstab fstype $(findmnt -n -o FSTYPE "$MP") options $(findmnt -n -o OPTIONS "$MP")"
grep -c '"nchunks": 4' "$MP/meta/sizes"
if echo '{}' 2>/dev/null > "$MP/__attrs__"; then echo "write accepted"; else echo "write refused"; fi
b2fs umount "$MP"
echo done
"#;
    let (lines, report) = namespace_lines(script, &src, &m.mp, tab.path());
    // The type is `fuse` when b2fs mounts directly as root (fuser's mount(2) call has no
    // subtype), `fuse.b2fs` when it goes through fusermount3.
    let fuse_type = |l: &str| {
        l.starts_with("fstype fuse options ro,") || l.starts_with("fstype fuse.b2fs options ro,")
    };
    assert!(fuse_type(&lines[0]), "{report}");
    assert!(lines[0].contains("allow_other"), "{report}");
    // The first value of the sample: 273.15 (K), as od prints it.
    assert!(
        lines[1].starts_with("chunk 2736 ") && lines[1].contains("273.15"),
        "{report}"
    );
    assert_eq!(lines[2], "after umount: 0 mounts", "{report}");
    assert!(fuse_type(lines[3].trim_start_matches("fstab ")), "{report}");
    assert_eq!(lines[4..], ["1", "write refused", "done"], "{report}");
    // Everything happened in the namespace: nothing is left mounted here.
    assert!(!is_mounted(&m.mp));
}

#[test]
#[ignore = "flaky beside the parallel suite (about one run in five: the fusermount3 helper is \
            gone and the mount stays; cause not found): scripts/test.sh runs it alone after \
            the suite (--ignored system_auto_unmount)"]
fn system_auto_unmount_removes_the_mount_of_a_killed_daemon() {
    or_skip!(fuse(
        "system_auto_unmount_removes_the_mount_of_a_killed_daemon"
    ));
    let m = Mount::daemon(&sample(), &["ro,auto_unmount"]);
    let pid = daemon_pid(&m.mp);
    let started = Instant::now();
    kill9(pid);
    if !wait_until(Duration::from_secs(10), || !is_mounted(&m.mp)) {
        // What was left: the fusermount3 that should have unmounted, and who holds what.
        let ps = Command::new("sh")
            .args(["-c", "ps -eo pid,ppid,stat,etime,args | grep -E 'fusermount|b2fs' | grep -v grep; grep fuse /proc/mounts"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        panic!("auto_unmount: the mount outlived its SIGKILLed daemon {pid}:\n{ps}");
    }
    let took = started.elapsed();
    // Without auto_unmount the same kill leaves a dead mount behind (the Mount guard
    // detaches it), so the check above can fail: given twice the time the auto_unmount
    // mount took to go, the control mount is still there.
    let control = Mount::daemon(&sample(), &["ro"]);
    let pid = daemon_pid(&control.mp);
    kill9(pid);
    assert!(wait_until(Duration::from_secs(5), || !alive(pid)));
    assert!(
        !wait_until(took * 2 + Duration::from_millis(50), || !is_mounted(
            &control.mp
        )),
        "a killed daemon's mount stays without auto_unmount"
    );
}

#[test]
fn system_lazy_umount_detaches_and_open_files_keep_reading() {
    or_skip!(fuse(
        "system_lazy_umount_detaches_and_open_files_keep_reading"
    ));
    use std::io::Read;
    let m = Mount::daemon(&sample(), &["ro"]);
    let pid = daemon_pid(&m.mp);
    let mut f = std::fs::File::open(m.path("data/00000001.bin")).unwrap();
    let started = Instant::now();
    let out = b2fs().args(["umount", "-l"]).arg(&m.mp).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "-l must not wait"
    );
    assert!(!is_mounted(&m.mp), "detached at once");
    // The open file still reads through the detached mount, and its daemon serves it.
    let mut data = Vec::new();
    f.read_to_end(&mut data).unwrap();
    assert_eq!(data.len(), 2736);
    assert!(alive(pid));
    drop(f);
    assert!(
        wait_until(Duration::from_secs(10), || !alive(pid)),
        "daemon exits after the last close"
    );
    // Not mounted any more: umount says so (exit 4).
    let again = b2fs().args(["umount", "-l"]).arg(&m.mp).output().unwrap();
    assert_eq!(again.status.code(), Some(4), "{}", text(&again));
}

fn getfattr(args: &[&str], path: &Path) -> Output {
    Command::new("getfattr")
        .args(args)
        .arg(path)
        .output()
        .expect("getfattr (package attr, scripts/setup.sh installs it)")
}

#[test]
fn system_getfattr_shows_chunk_and_mount_attributes() {
    let py = or_skip!(fuse_and_python(
        "system_getfattr_shows_chunk_and_mount_attributes"
    ));
    let src = sample();
    let m = Mount::daemon(&src, &["ro"]);
    let chunk = m.path("data/00000002.bin");
    let out = getfattr(&["-d"], &chunk);
    assert!(out.status.success(), "{}", text(&out));
    let dump = String::from_utf8_lossy(&out.stdout).into_owned();
    // python-blosc2's view of the same chunk.
    let want = python_says(
        &py,
        &[
            "-c",
            "import blosc2, sys; a = blosc2.open(sys.argv[1]); s = a.schunk; c = s.cparams; \
             n, cb, bs = blosc2.get_cbuffer_sizes(s.get_chunk(2)); \
             print(c.codec.name, ','.join(f.name for f in c.filters if f.name != 'NOFILTER'), \
             c.clevel, c.typesize, bs, cb)",
            src.to_str().unwrap(),
        ],
    );
    let w: Vec<&str> = want.split(' ').collect();
    for (key, value) in [
        ("codec", w[0]),
        ("filters", w[1]),
        ("clevel", w[2]),
        ("typesize", w[3]),
        ("blocksize", w[4]),
        ("cbytes", w[5]),
        ("special", "no"),
    ] {
        let line = format!("user.b2fs.{key}=\"{value}\"");
        assert!(dump.contains(&line), "missing {line} in:\n{dump}");
    }
    let root = String::from_utf8_lossy(&getfattr(&["-d"], &m.mp).stdout).into_owned();
    for line in [
        format!("user.b2fs.source=\"{}\"", src.display()),
        "user.b2fs.kind=\"cframe+b2nd\"".to_owned(),
    ] {
        assert!(root.contains(&line), "missing {line} in:\n{root}");
    }
    // Issue 21: the mount's own state is read by name, not dumped (nor copied by cp -a).
    assert!(!root.contains("cache_"), "{root}");
    for (name, value) in [
        ("version", env!("CARGO_PKG_VERSION")),
        ("cache_size", "268435456"),
    ] {
        let out = getfattr(
            &["-n", &format!("user.b2fs.{name}"), "--only-values"],
            &m.mp,
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), value, "{name}");
    }
    // Read-only: setfattr is refused.
    let set = Command::new("setfattr")
        .args(["-n", "user.x", "-v", "1"])
        .arg(&chunk)
        .output()
        .unwrap();
    assert!(!set.status.success());
    assert!(
        String::from_utf8_lossy(&set.stderr).contains("Read-only file system"),
        "{}",
        text(&set)
    );
}

#[test]
fn system_log_shows_the_refusal_a_shell_never_sees() {
    or_skip!(fuse("system_log_shows_the_refusal_a_shell_never_sees"));
    let (_dir, src) = sample_copy();
    let m = Mount::daemon(&src, &[]);
    let attrs = m.path("__attrs__");
    let shell = |content: &str| {
        let sh = Command::new("sh")
            .arg("-c")
            .arg(format!("echo '{content}' > '{}'", attrs.display()))
            .output()
            .unwrap();
        assert!(
            sh.status.success(),
            "the shell sees no error of the last close"
        );
    };
    let log = || {
        let out = b2fs().arg("log").arg(&m.mp).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // A shell's `>` closes a duplicate descriptor before writing: that empty first close is
    // no refusal, and the edit is committed.
    shell(r#"{"by": "shell"}"#);
    let shown: serde_json::Value = serde_json::from_slice(&std::fs::read(&attrs).unwrap()).unwrap();
    assert_eq!(shown, serde_json::json!({"by": "shell"}));
    let clean = log();
    assert!(clean.starts_with("# 0 refusals/errors"), "{clean}");

    shell("bad");
    let text_log = log();
    let lines: Vec<&str> = text_log.lines().skip(1).collect();
    assert_eq!(lines.len(), 1, "{text_log}");
    assert!(
        lines[0].contains(" flush /__attrs__: EINVAL (Invalid argument): "),
        "{text_log}"
    );
    assert!(lines[0].contains("not JSON"), "the reason: {}", lines[0]);
    let out = b2fs().arg("log").arg(&m.mp).output().unwrap();
    // Any path inside the mount finds the same log.
    let inner = b2fs().arg("log").arg(m.path("meta")).output().unwrap();
    assert_eq!(inner.stdout, out.stdout);
    // Not a b2fs mount: exit 4, one line.
    let tmp = tempfile::tempdir().unwrap();
    let not = b2fs().arg("log").arg(tmp.path()).output().unwrap();
    assert_eq!(not.status.code(), Some(4), "{}", text(&not));
    assert!(String::from_utf8_lossy(&not.stderr).contains("not a b2fs mount"));
    m.umount();
}

#[test]
fn system_editors_replace_attrs_without_warnings() {
    let py = or_skip!(fuse_and_python(
        "system_editors_replace_attrs_without_warnings"
    ));
    // A mount of the source itself (the attributes in the root), and a mount of a directory
    // of sources (the attributes in the leaf `sample.b2nd/`: before session 31 only the root
    // took an editor's temp file, so `sed -i` failed there with EPERM).
    for leaf in ["", "sample.b2nd"] {
        let (dir, src) = sample_copy();
        let m = if leaf.is_empty() {
            Mount::daemon(&src, &[])
        } else {
            Mount::daemon(dir.path(), &[])
        };
        editors_replace_attrs(&py, &m, &m.path(leaf), &src);
    }
}

/// `sed -i`, `vim -es` and Python's tempfile + `os.replace` edit `at/__attrs__` of mount `m`
/// (whose source frame is `src`) without warnings or leftovers, and python-blosc2 reads the
/// last edit from the source after the unmount.
fn editors_replace_attrs(py: &Path, m: &Mount, at: &Path, src: &Path) {
    let attrs = at.join("__attrs__");
    let units = || -> String {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&attrs).unwrap()).unwrap();
        v["units"].as_str().unwrap().to_owned()
    };

    // The directory as the mount shows it before any editor ran.
    let mut before: Vec<String> = std::fs::read_dir(at)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    before.sort();

    let sed = Command::new("sed")
        .args(["-i", "s/\"K\"/\"Kelvin\"/"])
        .arg(&attrs)
        .output()
        .unwrap();
    assert!(sed.status.success(), "{at:?}: {}", text(&sed));
    assert!(sed.stderr.is_empty(), "sed -i warned: {}", text(&sed));
    assert_eq!(units(), "Kelvin");

    let vim = Command::new("vim")
        .args(["-es", "-u", "NONE", "-i", "NONE", "-n"])
        .args(["-c", "%s/Kelvin/Celsius/", "-c", "wq"])
        .arg(&attrs)
        .output()
        .expect("vim (scripts/setup.sh installs vim-tiny)");
    assert!(vim.status.success(), "{at:?}: {}", text(&vim));
    assert!(vim.stderr.is_empty(), "vim warned: {}", text(&vim));
    assert_eq!(units(), "Celsius");

    let code = "import json, os, sys, tempfile\n\
                d = sys.argv[1]\n\
                with tempfile.NamedTemporaryFile('w', dir=d, delete=False) as f:\n\
                \x20   json.dump({'units': 'F', 'via': 'python'}, f)\n\
                os.replace(f.name, os.path.join(d, '__attrs__'))\n\
                print(json.dumps(sorted(os.listdir(d))))";
    let listing = python_says(py, &["-c", code, at.to_str().unwrap()]);
    let after: Vec<String> = serde_json::from_str(&listing).unwrap();
    assert_eq!(after, before, "no temp file left in {at:?}");
    assert_eq!(units(), "F");
    m.umount();
    // What python-blosc2 reads from the source after the three edits.
    let stored = crate::support::oracle_says(
        py,
        &[
            &"-c",
            &"import blosc2, sys; a = blosc2.open(sys.argv[1]); print(a.schunk.vlmeta['units'], a.schunk.vlmeta['via'])",
            &src,
        ],
    );
    assert_eq!(stored, "F python", "{at:?}");
}
