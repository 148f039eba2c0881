//! The built `b2fs` binary without mounting: `--help`/`--version`, usage errors, `b2fs info`
//! (text and JSON, against the sidecars), and the exit codes of failures.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{data_dir, repo_root};

fn b2fs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_b2fs"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn assert_fails(o: &Output, code: i32, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "{err}");
}

#[test]
fn cli_version_and_help() {
    let v = b2fs(&["--version"]);
    assert!(v.status.success());
    assert!(stdout(&v).starts_with("b2fs "), "{}", stdout(&v));
    let h = b2fs(&["--help"]);
    assert!(h.status.success());
    for word in ["mount", "umount", "info", "Exit codes"] {
        assert!(stdout(&h).contains(word), "{word}");
    }
    let mh = b2fs(&["mount", "--help"]);
    assert!(mh.status.success());
    for word in [
        "cache_size=SIZE",
        "allow_other",
        "threads=N",
        "debug",
        "b2fs-PID.log",
        "-f",
    ] {
        assert!(stdout(&mh).contains(word), "mount --help lacks {word}");
    }
    assert!(b2fs(&["umount", "--help"]).status.success());
    assert!(b2fs(&["info", "--help"]).status.success());
}

#[test]
fn cli_usage_errors_exit_2() {
    assert_eq!(b2fs(&[]).status.code(), Some(2));
    assert_eq!(b2fs(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(b2fs(&["mount", "only-one-arg"]).status.code(), Some(2));
    assert_eq!(b2fs(&["info"]).status.code(), Some(2));
}

/// A spill directory inside the mount point is refused before mounting (the spill file is
/// written under the edits' lock: through the mount, it would wait on itself).
#[test]
fn cli_mount_refuses_a_spill_dir_inside_the_mount_point() {
    let mp = tempfile::tempdir().unwrap();
    let sub = mp.path().join("spill");
    std::fs::create_dir(&sub).unwrap();
    let src = repo_root().join("examples/sample.b2nd");
    let opt = format!("nonempty,spill_dir={}", sub.display());
    let o = b2fs(&[
        "mount",
        "-o",
        &opt,
        src.to_str().unwrap(),
        mp.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("inside the mount point"),
        "{}",
        stderr(&o)
    );
    assert!(std::fs::read_dir(&sub).unwrap().next().is_none());
}

#[test]
fn cli_info_text_shows_tree_and_chunk_table() {
    let src = repo_root().join("examples/sample.b2nd");
    let o = b2fs(&["info", src.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let sc: Value =
        serde_json::from_slice(&std::fs::read(repo_root().join("examples/sample.json")).unwrap())
            .unwrap();
    let (n, c) = (
        sc["nbytes"].as_f64().unwrap(),
        sc["cbytes"].as_f64().unwrap(),
    );
    let kib = |b: f64| format!("{:.1} KiB", b / 1024.0);
    let summary = format!(
        "4 chunks (0 special), {} -> {} (ratio {:.2}x)",
        kib(n),
        kib(c),
        n / c
    );
    for needle in [
        "__attrs__",
        "meta/sizes",
        "meta/storage",
        "meta/metalayers/b2nd",
        &format!("4 chunk files, {}", kib(n)),
        "zstd",
        &summary,
        "codec ZSTD clevel 5, filters SHUFFLE",
        &format!(
            "shape {}, dtype {}",
            sc["shape"],
            sc["dtype_b2nd"].as_str().unwrap()
        ),
    ] {
        assert!(text.contains(needle), "missing {needle}:\n{text}");
    }
    // The summary comes first, the chunk table last.
    assert!(text.find(&summary) < text.find("chunks of data/"), "{text}");
}

#[test]
fn cli_info_json_matches_sidecar() {
    let cases = [
        (
            repo_root().join("examples/sample.b2nd"),
            repo_root().join("examples/sample.json"),
        ),
        (
            data_dir().join("frames/schunk_fill_special.b2frame"),
            data_dir().join("frames/schunk_fill_special.json"),
        ),
    ];
    for (src, sc) in cases {
        let sc: Value = serde_json::from_slice(&std::fs::read(sc).unwrap()).unwrap();
        let o = b2fs(&["info", "--json", src.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        let rows = doc["chunks"]["data/"].as_array().unwrap();
        let want = sc["chunk_list"].as_array().unwrap();
        assert_eq!(rows.len(), want.len());
        for (r, w) in rows.iter().zip(want) {
            assert_eq!(r["index"], w["index"]);
            assert_eq!(r["nbytes"], w["nbytes"]);
            assert_eq!(r["cbytes"], w["cbytes"], "{src:?}");
            let special = w["special"].as_str().unwrap_or("regular");
            assert_eq!(r["kind"], special, "{src:?}");
        }
        let files = doc["files"].as_array().unwrap();
        for w in want {
            let path = format!("data/{:08}.bin", w["index"].as_u64().unwrap());
            let f = files.iter().find(|f| f["path"] == path.as_str()).unwrap();
            assert_eq!(f["size"], w["nbytes"]);
        }
    }
}

#[test]
fn cli_info_bcolz_ctable_lists_columns() {
    let src = data_dir().join("bcolz/ctable_3cols");
    let o = b2fs(&["info", "--json", src.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    for col in ["id", "val", "name"] {
        assert!(doc["chunks"][format!("{col}/data/")].is_array(), "{col}");
    }
}

#[test]
fn cli_info_failures_exit_3_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"not a frame at all").unwrap();
    let missing = dir.path().join("missing.b2frame");
    for (p, needle) in [(&junk, "junk.bin"), (&missing, "missing.b2frame")] {
        let o = b2fs(&["info", p.to_str().unwrap()]);
        assert_fails(&o, 3, needle);
        assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
        assert!(stderr(&o).starts_with("b2fs: "));
    }
    // A layout the container layer refuses is a source error too.
    let refuse = data_dir().join("refuse/frame_version4.b2frame");
    if Path::new(&refuse).exists() {
        assert_fails(
            &b2fs(&["info", refuse.to_str().unwrap()]),
            3,
            "frame_version4",
        );
    }
}

#[test]
fn cli_umount_of_unmounted_dir_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    assert_fails(
        &b2fs(&["umount", dir.path().to_str().unwrap()]),
        4,
        "not mounted",
    );
    let missing = dir.path().join("nope");
    assert_fails(&b2fs(&["umount", missing.to_str().unwrap()]), 4, "nope");
}

#[test]
fn cli_completions_and_man_page_come_from_the_definitions() {
    let bash = b2fs(&["completions", "bash"]);
    assert!(bash.status.success(), "{}", stderr(&bash));
    let script = stdout(&bash);
    for word in ["_b2fs()", "umount", "completions", "--lazy"] {
        assert!(script.contains(word), "bash completion lacks {word}");
    }
    for shell in ["zsh", "fish"] {
        let o = b2fs(&["completions", shell]);
        assert!(o.status.success() && o.stdout.len() > 500, "{shell}");
    }
    assert_eq!(b2fs(&["completions", "tcsh"]).status.code(), Some(2));
    let man = b2fs(&["man"]);
    assert!(man.status.success(), "{}", stderr(&man));
    let page = stdout(&man);
    assert!(page.contains(".TH b2fs"), "{page}");
    for word in [
        ".SH \"B2FS MOUNT\"",
        "cache_size=SIZE",
        "auto_unmount",
        "\\-\\-lazy",
        "Exit codes",
    ] {
        assert!(page.contains(word), "man page lacks {word}");
    }
}

#[test]
fn cli_mount_fuse3_style_command_line_is_a_mount() {
    // `b2fs SOURCE MOUNTPOINT -o OPTS` is `b2fs mount ...`: the same checks and exit codes.
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing.b2nd");
    let o = b2fs(&[
        missing.to_str().unwrap(),
        tmp.path().to_str().unwrap(),
        "-o",
        "ro,noauto,user,dev,suid,_netdev",
    ]);
    assert_fails(&o, 3, "missing.b2nd");
    let src = repo_root().join("examples/sample.b2nd");
    let o = b2fs(&[
        src.to_str().unwrap(),
        tmp.path().to_str().unwrap(),
        "-o",
        "bogus",
    ]);
    assert_fails(&o, 2, "unknown mount option 'bogus'");
}

/// `b2fs info ... | head -c 0`: a command whose reader has gone ends by SIGPIPE, as `cat`
/// does, without a panic message on stderr.
#[test]
fn cli_info_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;

    let frame = data_dir().join("frames/b2nd_2d_f8_lz4.b2nd");
    let (reader, writer) = std::io::pipe().unwrap();
    // No reader: the child's first write gets EPIPE.
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_b2fs"))
        .args(["info", "--json", frame.to_str().unwrap()])
        .stdout(writer)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {err}",
        out.status
    );
}

/// `b2fs compact` exits 1 ("other failure (I/O error ...)", as `--help` says) when writing its
/// rewrite fails, here past a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored so the write
/// returns EFBIG), and leaves the source byte-identical; 3 is for a source that is not a
/// contiguous frame.
#[test]
fn compact_exits_1_on_an_io_error_and_3_for_what_is_not_a_frame() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s.b2frame");
    std::fs::copy(data_dir().join("frames/schunk_zstd.b2frame"), &src).unwrap();
    let before = std::fs::read(&src).unwrap();
    assert!(before.len() > 8192, "the fixture must pass the limit");
    let o = Command::new("bash")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 8; exec \"$0\" compact \"$1\"",
        ])
        .arg(env!("CARGO_BIN_EXE_b2fs"))
        .arg(&src)
        .output()
        .unwrap();
    assert_fails(&o, 1, "File too large");
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "s.b2frame")
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    let carray = dir.path().join("c.bcolz");
    let fixture = std::fs::read_dir(data_dir().join("bcolz"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let copied = Command::new("cp")
        .arg("-r")
        .arg(&fixture)
        .arg(&carray)
        .status()
        .unwrap();
    assert!(copied.success());
    assert_fails(
        &b2fs(&["compact", carray.to_str().unwrap()]),
        3,
        "not a contiguous frame",
    );
    // A frame its user can read but not write is the source's failure, 3, not an I/O error
    // of the rewrite (run as `nobody` where root runs the tests).
    // SAFETY: geteuid has no preconditions and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    if !(root && Path::new("/usr/bin/setpriv").exists()) {
        eprintln!(
            "SKIP compact_exits_1_on_an_io_error_and_3_for_what_is_not_a_frame (its unwritable \
             part): needs root and /usr/bin/setpriv"
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    for p in [dir.path(), src.as_path()] {
        let mode = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // Readable by nobody (so the refusal below is the write check's, not the open's).
    let read = as_nobody(&["/usr/bin/head".as_ref(), "-c1".as_ref(), src.as_os_str()]);
    if !read.status.success() {
        eprintln!(
            "SKIP compact_exits_1_on_an_io_error_and_3_for_what_is_not_a_frame (its unwritable \
             part): nobody cannot read {} (a directory above it is closed)",
            src.display()
        );
        return;
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_b2fs"));
    let o = as_nobody(&[bin.as_os_str(), "compact".as_ref(), src.as_os_str()]);
    assert_fails(&o, 3, "Permission denied");
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
    // Writable, in a directory it may not create the rewrite in: the source's failure too.
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = as_nobody(&[bin.as_os_str(), "compact".as_ref(), src.as_os_str()]);
    assert_fails(&o, 3, "Permission denied");
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
}

/// A background mount clears, in its log directory, the logs of ended daemons older than a
/// week, and leaves a recent one, another user's and a live daemon's (its own).
#[test]
fn cli_background_mount_clears_week_old_logs_of_ended_daemons() {
    use std::fs::{File, FileTimes};
    use std::time::{Duration, SystemTime};
    or_skip!(crate::support::fuse(
        "cli_background_mount_clears_week_old_logs_of_ended_daemons"
    ));
    let logs = tempfile::tempdir().unwrap();
    let day = Duration::from_secs(24 * 3600);
    // Process ids above the kernel's largest (2^22): no such process can be running.
    let aged = |pid: u32, age: Duration| {
        let p = logs.path().join(format!("b2fs-{pid}.log"));
        let f = File::create(&p).unwrap();
        f.set_times(FileTimes::new().set_modified(SystemTime::now() - age))
            .unwrap();
        p
    };
    let old = aged(4_999_001, 8 * day);
    let recent = aged(4_999_002, day);
    let foreign = aged(4_999_003, 30 * day);
    // Another user's (only root can give a file away; others leave it theirs, and kept it is).
    let root = std::fs::metadata(logs.path()).is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    if root {
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    } else {
        eprintln!("not root: the other user's log is this user's, 30 days old, and goes");
    }

    let m = crate::support::mount::Mount::empty();
    crate::support::ok(
        crate::support::mount::b2fs()
            .env("XDG_RUNTIME_DIR", logs.path())
            .arg("mount")
            .arg(repo_root().join("examples/sample.b2nd"))
            .arg(&m.mp),
    );
    let pid = crate::support::mount::daemon_pid(&m.mp).expect("the daemon's pid");
    m.umount();

    assert!(!old.exists(), "an ended daemon's log of 8 days stayed");
    assert!(recent.exists(), "an ended daemon's log of a day went");
    assert_eq!(foreign.exists(), root, "another user's log");
    let own = std::fs::read_to_string(logs.path().join(format!("b2fs-{pid}.log"))).unwrap();
    assert!(
        own.contains(&format!(
            "removed {} old logs of ended b2fs daemons",
            if root { 1 } else { 2 }
        )),
        "the daemon's log does not say what it removed:\n{own}"
    );
}

/// The rewrite of a member of a `.b2d` store lies beside the outermost store, not beside the
/// member (`docs/SEMANTICS.md`, "Temp files of commits"): `b2fs compact` of a member its user
/// may write, in a store directory it may write, but beside a store where it may not create
/// a file, is the source's failure (3), refused before the rewrite starts, and leaves the
/// store as it was (run as `nobody` where root runs the tests).
#[test]
fn compact_of_a_b2d_member_exits_3_when_beside_the_store_is_not_writable() {
    use std::os::unix::fs::PermissionsExt;
    let t = "compact_of_a_b2d_member_exits_3_when_beside_the_store_is_not_writable";
    let Some(py) = crate::support::python(t) else {
        return;
    };
    // SAFETY: geteuid has no preconditions and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    if !(root && Path::new("/usr/bin/setpriv").exists()) {
        eprintln!("SKIP {t}: needs root and /usr/bin/setpriv");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.b2d");
    crate::support::oracle(&py, &[&"scripts/oracle/stores.py", &"emptygen", &store]);
    let member = store.join("x.b2nd");
    assert!(store.join("embed.b2e").is_file() && member.is_file());
    // Beside the store: nobody may enter but not create; the store and the member: theirs.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut todo = vec![store.clone()];
    while let Some(p) = todo.pop() {
        let mode = if p.is_dir() { 0o777 } else { 0o666 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        if p.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    let before = crate::support::files_under(dir.path());
    let bytes = std::fs::read(&member).unwrap();
    let read = as_nobody(&["/usr/bin/head".as_ref(), "-c1".as_ref(), member.as_os_str()]);
    if !read.status.success() {
        eprintln!(
            "SKIP {t}: nobody cannot read {} (a directory above it is closed)",
            member.display()
        );
        return;
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_b2fs"));
    let o = as_nobody(&[bin.as_os_str(), "compact".as_ref(), member.as_os_str()]);
    assert_fails(&o, 3, "Permission denied");
    assert!(
        stderr(&o).contains(
            &std::fs::canonicalize(dir.path())
                .unwrap()
                .display()
                .to_string()
        ),
        "names where the rewrite lies: {}",
        stderr(&o)
    );
    assert!(
        std::fs::read(&member).unwrap() == bytes,
        "the member changed"
    );
    assert_eq!(crate::support::files_under(dir.path()), before);
    // Where it may create the rewrite, the same member compacts.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = as_nobody(&[bin.as_os_str(), "compact".as_ref(), member.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(crate::support::files_under(dir.path()), before);
}

/// Runs `args` as user `nobody` (root runs the tests; `setpriv` drops to 65534).
fn as_nobody(args: &[&std::ffi::OsStr]) -> Output {
    Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(args)
        .output()
        .unwrap()
}
