//! Read-write mounts through the built `b2fs` binary: edits made with plain file operations
//! (partial and whole chunk overwrites, appends, extending the last chunk, `__attrs__` edits,
//! refused bad JSON, refused N-dim appends) are read back by python-blosc2 and bcolz from the
//! source itself, which they can still modify afterwards; one test per row of the operation
//! table of docs/SEMANTICS.md; readers and a writer on the same chunk; ctable columns that grow
//! and shrink together (checked against bcolz doing the same row operations); the `.b2lock`
//! sidecar protocol with python-blosc2 holding the lock or writing meanwhile; `b2fs compact`
//! refusing a mounted source.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Mount, fuse, fuse_and_python, python, python_says, run_python};

fn os_err<T: std::fmt::Debug>(r: std::io::Result<T>) -> Option<i32> {
    r.unwrap_err().raw_os_error()
}

fn gen_fixtures(py: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    crate::support::oracle(py, &[&"scripts/oracle/writeback.py", &"gen", &dir.path()]);
    dir
}

fn chunk_file(prefix: &str, i: usize) -> String {
    format!("{prefix}data/{i:08}.bin")
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

/// How a case is edited.
struct Case {
    name: &'static str,
    /// Path prefix of the array inside the mount ("" or "a/" for a ctable column).
    prefix: &'static str,
    /// Chunks may be appended and the last one extended.
    grows: bool,
    /// Errno for creating data/<nchunks>.bin when it cannot grow.
    append_errno: i32,
}

/// Edits `case` through a mount and writes what every reader must see afterwards into
/// `dir/expected/<case>/`.
fn edit_case(dir: &Path, case: &Case) {
    let m = Mount::daemon(&dir.join(case.name), &[]);
    let p = case.prefix;
    let storage: Value =
        serde_json::from_slice(&std::fs::read(m.path(&format!("{p}meta/storage"))).unwrap())
            .unwrap();
    let chunksize = storage["chunksize"].as_u64().unwrap() as usize;
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    while let Ok(b) = std::fs::read(m.path(&chunk_file(p, chunks.len()))) {
        chunks.push(b);
    }
    assert!(chunks.len() >= 3, "{}", case.name);

    // Overwrite part of chunk 0 (pwrite + fsync); reads see it before and after the commit.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.path(&chunk_file(p, 0)))
        .unwrap();
    let patch = pattern(64, 1);
    f.write_all_at(&patch, 16).unwrap();
    chunks[0][16..80].copy_from_slice(&patch);
    let mut back = vec![0; 64];
    f.read_exact_at(&mut back, 16).unwrap();
    assert_eq!(back, patch);
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(std::fs::read(m.path(&chunk_file(p, 0))).unwrap(), chunks[0]);

    // Overwrite chunk 1 as a whole (O_TRUNC, write, close).
    let whole = pattern(chunks[1].len(), 2);
    std::fs::write(m.path(&chunk_file(p, 1)), &whole).unwrap();
    chunks[1] = whole;

    // Writing past the chunk's size: EFBIG, nothing changes.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(m.path(&chunk_file(p, 0)))
        .unwrap();
    assert_eq!(
        os_err(f.write_all_at(b"x", chunksize.max(chunks[0].len()) as u64)),
        Some(libc::EFBIG),
        "{}",
        case.name
    );
    drop(f);

    let n = chunks.len();
    if case.grows {
        // Extend the last chunk up to the chunk size.
        let last = n - 1;
        if chunks[last].len() < chunksize {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(m.path(&chunk_file(p, last)))
                .unwrap();
            let ext = pattern(chunksize - chunks[last].len(), 3);
            f.write_all(&ext).unwrap();
            f.sync_all().unwrap();
            chunks[last].extend_from_slice(&ext);
        }
        // Append a chunk (a quarter chunk; b2nd needs whole chunks).
        let len = if case.name.ends_with(".b2nd") {
            chunksize
        } else {
            chunksize / 4
        };
        let new = pattern(len, 4);
        let mut f = std::fs::File::create(m.path(&chunk_file(p, n))).unwrap();
        f.write_all(&new).unwrap();
        f.sync_all().unwrap();
        drop(f);
        chunks.push(new);
        let sizes: Value =
            serde_json::from_slice(&std::fs::read(m.path(&format!("{p}meta/sizes"))).unwrap())
                .unwrap();
        assert_eq!(
            sizes["nchunks"],
            n + 1,
            "{}: meta/sizes after an append",
            case.name
        );
        assert_eq!(
            std::fs::read(m.path(&chunk_file(p, n))).unwrap(),
            chunks[n],
            "{}",
            case.name
        );
    } else {
        assert_eq!(
            os_err(std::fs::File::create(m.path(&chunk_file(p, n)))),
            Some(case.append_errno),
            "{}",
            case.name
        );
    }

    // Attributes: a valid edit, then bad JSON refused on fsync and close.
    let attrs = serde_json::json!({"edited": true, "n": 3, "list": [1, 2]});
    let text = serde_json::to_vec(&attrs).unwrap();
    std::fs::write(m.path("__attrs__"), &text).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(m.path("__attrs__"))
        .unwrap();
    f.write_all(b"not json").unwrap();
    assert_eq!(os_err(f.sync_all()), Some(libc::EINVAL));
    drop(f);
    let mut shown = String::new();
    std::fs::File::open(m.path("__attrs__"))
        .unwrap()
        .read_to_string(&mut shown)
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&shown).unwrap(), attrs);

    m.umount();
    let e = dir.join("expected").join(case.name);
    std::fs::create_dir_all(&e).unwrap();
    for (i, c) in chunks.iter().enumerate() {
        std::fs::write(e.join(format!("{i:08}.bin")), c).unwrap();
    }
    std::fs::write(e.join("attrs.json"), &text).unwrap();
}

#[test]
fn writeback_edits_are_read_by_the_reference_libraries() {
    let py = or_skip!(fuse_and_python(
        "writeback_edits_are_read_by_the_reference_libraries"
    ));
    let dir = gen_fixtures(&py);
    let cases = [
        ("cframe.b2frame", "", true, 0),
        ("sframe.b2frame", "", true, 0),
        ("b1.b2nd", "", true, 0),
        ("b2.b2nd", "", false, libc::EINVAL),
        ("carr", "", true, 0),
        ("ct", "a/", true, 0),
    ];
    for (name, prefix, grows, append_errno) in cases {
        edit_case(
            dir.path(),
            &Case {
                name,
                prefix,
                grows,
                append_errno,
            },
        );
    }
    if std::env::var_os("B2FS_DEBUG_KEEP").is_some() {
        let _ = Command::new("cp")
            .arg("-a")
            .arg(dir.path())
            .arg("/tmp/wbdbg")
            .status();
    }
    let out = crate::support::oracle(
        &py,
        &[&"scripts/oracle/writeback.py", &"check", &dir.path()],
    );
    let checked: Vec<String> = serde_json::from_slice(&out).unwrap();
    assert_eq!(checked.len(), cases.len(), "{checked:?}");
}

/// One test per row of the SEMANTICS table that refuses: the errno, and the source bytes
/// unchanged.
#[test]
fn writeback_refused_operations_have_their_errno_and_change_nothing() {
    or_skip!(fuse(
        "writeback_refused_operations_have_their_errno_and_change_nothing"
    ));
    let py = or_skip!(python(
        "writeback_refused_operations_have_their_errno_and_change_nothing"
    ));
    let dir = gen_fixtures(&py);
    let src = dir.path().join("cframe.b2frame");
    let before = std::fs::read(&src).unwrap();
    let m = Mount::daemon(&src, &[]);
    let c0 = m.path("data/00000000.bin");
    // creating any other name (outside the root: the root takes scratch files)
    assert_eq!(
        os_err(std::fs::File::create(m.path("meta/new.txt"))),
        Some(libc::EPERM)
    );
    assert_eq!(
        os_err(std::fs::File::create(m.path("data/00000009.bin"))),
        Some(libc::EPERM)
    );
    // mkdir, rename, symlink, hard link
    assert_eq!(os_err(std::fs::create_dir(m.path("d"))), Some(libc::EPERM));
    assert_eq!(
        os_err(std::fs::rename(&c0, m.path("data/x.bin"))),
        Some(libc::EPERM)
    );
    assert_eq!(
        os_err(std::os::unix::fs::symlink("x", m.path("l"))),
        Some(libc::EPERM)
    );
    assert_eq!(
        os_err(std::fs::hard_link(&c0, m.path("data/h.bin"))),
        Some(libc::EPERM)
    );
    // writes to meta/*
    assert_eq!(
        os_err(
            std::fs::OpenOptions::new()
                .write(true)
                .open(m.path("meta/sizes"))
        ),
        Some(libc::EACCES)
    );
    // truncating a chunk in the middle
    assert_eq!(
        os_err(
            std::fs::OpenOptions::new()
                .write(true)
                .open(&c0)
                .and_then(|f| {
                    drop(f);
                    let r = std::process::Command::new("truncate")
                        .args(["-s", "100"])
                        .arg(&c0)
                        .output()?;
                    if r.status.success() {
                        Ok(())
                    } else {
                        Err(std::io::Error::from_raw_os_error(libc::EINVAL))
                    }
                })
        ),
        Some(libc::EINVAL)
    );
    assert_eq!(std::fs::metadata(&c0).unwrap().len(), 16000);
    // removing a chunk in the middle
    assert_eq!(os_err(std::fs::remove_file(&c0)), Some(libc::EPERM));
    // writing past the chunk size
    let f = std::fs::OpenOptions::new().write(true).open(&c0).unwrap();
    assert_eq!(os_err(f.write_all_at(b"x", 16000)), Some(libc::EFBIG));
    drop(f);
    // bad JSON
    assert!(std::fs::write(m.path("__attrs__"), "[1, 2]").is_ok()); // close error not seen
    m.umount();
    assert_eq!(std::fs::read(&src).unwrap(), before, "source changed");

    // -o ro: everything is EROFS
    let m = Mount::daemon(&src, &["ro"]);
    assert_eq!(
        os_err(
            std::fs::OpenOptions::new()
                .write(true)
                .open(m.path("data/00000000.bin"))
        ),
        Some(libc::EROFS)
    );
    assert_eq!(
        os_err(std::fs::write(m.path("__attrs__"), "{}")),
        Some(libc::EROFS)
    );
    m.umount();
    // a source without write permission: EROFS
    let mut perm = std::fs::metadata(&src).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o444);
    std::fs::set_permissions(&src, perm).unwrap();
    let m = Mount::daemon(&src, &[]);
    assert_eq!(
        os_err(
            std::fs::OpenOptions::new()
                .write(true)
                .open(m.path("data/00000000.bin"))
        ),
        Some(libc::EROFS)
    );
    m.umount();
    assert_eq!(std::fs::read(&src).unwrap(), before, "source changed");
}

/// Removing the last chunk (unlink) and truncating it to 0; an all-zero chunk written back.
#[test]
fn writeback_unlink_last_chunk_and_zero_chunk() {
    let py = or_skip!(fuse_and_python(
        "writeback_unlink_last_chunk_and_zero_chunk"
    ));
    let dir = gen_fixtures(&py);
    let src = dir.path().join("sframe.b2frame");
    let m = Mount::daemon(&src, &[]);
    std::fs::remove_file(m.path("data/00000002.bin")).unwrap();
    assert!(!m.path("data/00000002.bin").exists());
    std::fs::write(m.path("data/00000001.bin"), vec![0u8; 16000]).unwrap();
    m.umount();
    assert_eq!(
        python_says(
            &py,
            &[
                "-c",
                "import sys, blosc2; s = blosc2.open(sys.argv[1]); \
             print(s.nchunks, s.decompress_chunk(1) == bytes(16000), len(s.get_chunk(1)))",
                src.to_str().unwrap(),
            ],
        ),
        "2 True 32"
    );
}

/// Readers of a chunk while a writer rewrites it and commits: every read returns the old or
/// the new content as a whole (each read is one whole chunk of a single value). With
/// `direct_io` each read and each write is one request to b2fs, which applies and serves them
/// atomically; through the page cache a read racing a write(2) can see part of that write, as
/// on any Linux filesystem (commits are atomic either way).
#[test]
fn writeback_readers_see_whole_chunks_during_commits() {
    let py = or_skip!(fuse_and_python(
        "writeback_readers_see_whole_chunks_during_commits"
    ));
    let dir = gen_fixtures(&py);
    let src = dir.path().join("cframe.b2frame");
    let m = Mount::daemon(&src, &["direct_io"]);
    let c = m.path("data/00000000.bin");
    std::fs::write(&c, vec![0u8; 16000]).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let b = std::fs::read(&c).unwrap();
                    assert_eq!(b.len(), 16000);
                    assert!(b.iter().all(|&x| x == b[0]), "a mixed chunk");
                    n += 1;
                }
                n
            })
        })
        .collect();
    for v in 1..=20u8 {
        let mut f = std::fs::OpenOptions::new().write(true).open(&c).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(&vec![v; 16000]).unwrap();
        f.sync_all().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    m.umount();
    assert_eq!(
        crate::support::oracle_says(
            &py,
            &[
                &"-c",
                &"import sys, blosc2; s = blosc2.open(sys.argv[1]); print(s.decompress_chunk(0) == bytes([20]) * 16000)",
                &src
            ]
        ),
        "True"
    );
}

/// More SEMANTICS rows: more than 16 attributes refused, `truncate -s 0` of the last chunk
/// removes it, `touch` is accepted, the only chunk of a contiguous frame cannot be removed;
/// `b2fs compact` after updates leaves what python-blosc2 reads.
#[test]
fn writeback_attr_limit_truncate_last_touch_and_compact() {
    let py = or_skip!(fuse_and_python(
        "writeback_attr_limit_truncate_last_touch_and_compact"
    ));
    let dir = gen_fixtures(&py);
    let src = dir.path().join("cframe.b2frame");
    let m = Mount::daemon(&src, &[]);
    let many: serde_json::Map<String, Value> =
        (0..17).map(|i| (format!("k{i}"), Value::from(i))).collect();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(m.path("__attrs__"))
        .unwrap();
    f.write_all(&serde_json::to_vec(&many).unwrap()).unwrap();
    assert_eq!(os_err(f.sync_all()), Some(libc::EINVAL));
    drop(f);
    let st = Command::new("touch")
        .arg(m.path("data/00000000.bin"))
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new("truncate")
        .args(["-s", "0"])
        .arg(m.path("data/00000002.bin"))
        .status()
        .unwrap();
    assert!(st.success());
    assert!(!m.path("data/00000002.bin").exists());
    // rewrite chunk 0 a few times: dead space for compact
    for v in 1..4u8 {
        std::fs::write(m.path("data/00000000.bin"), vec![v; 16000]).unwrap();
    }
    m.umount();
    let before = std::fs::metadata(&src).unwrap().len();
    crate::support::ok(crate::support::b2fs().arg("compact").arg(&src));
    assert!(std::fs::metadata(&src).unwrap().len() < before);
    assert_eq!(
        python_says(
            &py,
            &[
                "-c",
                "import sys, blosc2; s = blosc2.open(sys.argv[1]); \
             print(s.nchunks, s.decompress_chunk(0) == bytes([3]) * 16000, sorted(s.vlmeta.keys()))",
                src.to_str().unwrap(),
            ],
        ),
        "2 True ['orig']"
    );

    // the only chunk of a contiguous frame cannot be removed
    let one = dir.path().join("one.b2frame");
    crate::support::oracle(
        &py,
        &[
            &"-c",
            &"import sys, blosc2, numpy as np; s = blosc2.SChunk(chunksize=400, urlpath=sys.argv[1], contiguous=True, mode='w'); s.append_data(np.arange(100, dtype=np.int32))",
            &one,
        ],
    );
    let m = Mount::daemon(&one, &[]);
    assert_eq!(
        os_err(std::fs::remove_file(m.path("data/00000000.bin"))),
        Some(libc::EINVAL)
    );
    m.umount();
}

/// Editors' temp files: a scratch file in the root renamed over `__attrs__` commits it
/// (`sed -i`, `mv`); bad JSON renamed over it is EINVAL and changes nothing; scratch files are
/// never stored.
#[test]
fn writeback_attrs_through_temp_file_and_rename() {
    let py = or_skip!(fuse_and_python(
        "writeback_attrs_through_temp_file_and_rename"
    ));
    let dir = gen_fixtures(&py);
    for name in ["cframe.b2frame", "carr"] {
        let src = dir.path().join(name);
        let m = Mount::daemon(&src, &[]);
        std::fs::write(m.path("tmp.json"), br#"{"via": "rename"}"#).unwrap();
        std::fs::rename(m.path("tmp.json"), m.path("__attrs__")).unwrap();
        assert!(!m.path("tmp.json").exists());
        let st = Command::new("sed")
            .args(["-i", "s/rename/sed/"])
            .arg(m.path("__attrs__"))
            .status()
            .unwrap();
        assert!(st.success(), "sed -i failed on {name}");
        std::fs::write(m.path("bad.json"), b"{nope").unwrap();
        assert_eq!(
            os_err(std::fs::rename(m.path("bad.json"), m.path("__attrs__"))),
            Some(libc::EINVAL)
        );
        let shown: Value =
            serde_json::from_slice(&std::fs::read(m.path("__attrs__")).unwrap()).unwrap();
        assert_eq!(shown, serde_json::json!({"via": "sed"}));
        m.umount();
        let code = if name == "carr" {
            "import sys, bcolz; print(dict(bcolz.open(sys.argv[1]).attrs))"
        } else {
            "import sys, blosc2; s = blosc2.open(sys.argv[1]); print({k: s.vlmeta[k] for k in s.vlmeta.keys()})"
        };
        let out = run_python(&py, &["-c", code, src.to_str().unwrap()]);
        assert_eq!(
            String::from_utf8_lossy(&out).trim(),
            "{'via': 'sed'}",
            "{name}"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("json"))
            .collect();
        assert!(leftovers.is_empty(), "scratch files leaked: {leftovers:?}");
    }
}

/// A python-blosc2 handle opened before an edit through the mount sees the edit on its next
/// access.
#[test]
fn writeback_open_python_handle_sees_the_edit() {
    let py = or_skip!(fuse_and_python(
        "writeback_open_python_handle_sees_the_edit"
    ));
    let dir = gen_fixtures(&py);
    let src = dir.path().join("cframe.b2frame");
    let child = crate::support::Waiting::start(
        &py,
        "import sys, blosc2\n\
         s = blosc2.open(sys.argv[1])\n\
         before = s.decompress_chunk(0)\n\
         print('ready', flush=True)\n\
         sys.stdin.readline()\n\
         print(s.decompress_chunk(0) == bytes([9]) * 16000, before != bytes([9]) * 16000)",
        &src,
    );
    let m = Mount::daemon(&src, &[]);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(m.path("data/00000000.bin"))
        .unwrap();
    f.write_all(&[9u8; 16000]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(child.go(), "True True");
    m.umount();
}

/// A source feature b2fs cannot write (here: a codec it cannot encode, ZFP) is EOPNOTSUPP,
/// not EINVAL; nothing changes.
#[test]
fn writeback_unencodable_codec_is_eopnotsupp() {
    let py = or_skip!(fuse_and_python("writeback_unencodable_codec_is_eopnotsupp"));
    let (_dir, src) = crate::support::temp_path("zfp.b2nd");
    run_python(
        &py,
        &[
            "-c",
            "import sys, blosc2, numpy as np; blosc2.asarray(np.linspace(0, 1, 4000), \
             chunks=(1000,), blocks=(250,), urlpath=sys.argv[1], mode='w', \
             cparams={'codec': blosc2.Codec.ZFP_ACC, 'codec_meta': 5, 'filters': [], \
             'filters_meta': []})",
            src.to_str().unwrap(),
        ],
    );
    let before = std::fs::read(&src).unwrap();
    let m = Mount::daemon(&src, &[]);
    let mut f = std::fs::File::create(m.path("data/00000004.bin")).unwrap();
    f.write_all(&[1u8; 8000]).unwrap();
    assert_eq!(os_err(f.sync_all()), Some(libc::EOPNOTSUPP));
    drop(f);
    m.umount();
    assert_eq!(std::fs::read(&src).unwrap(), before);
}

/// A chunk file opened with `O_TRUNC` and closed without a write (`: > file`): a middle
/// chunk keeps its content, the last chunk is removed; with `cat new > last` the last chunk
/// is replaced (the shell's early close of its duplicate descriptor commits nothing).
#[test]
fn writeback_o_trunc_without_write() {
    let py = or_skip!(fuse_and_python("writeback_o_trunc_without_write"));
    let dir = gen_fixtures(&py);
    let src = dir.path().join("cframe.b2frame");
    let m = Mount::daemon(&src, &[]);
    let c0 = std::fs::read(m.path("data/00000000.bin")).unwrap();
    std::fs::write(dir.path().join("c0.bin"), &c0).unwrap();
    let sh = |cmd: String| {
        let st = Command::new("bash").arg("-c").arg(cmd).status().unwrap();
        assert!(st.success());
    };
    sh(format!(": > '{}'", m.path("data/00000000.bin").display()));
    assert_eq!(std::fs::read(m.path("data/00000000.bin")).unwrap(), c0);
    let new = dir.path().join("new.bin");
    std::fs::write(&new, pattern(8000, 9)).unwrap();
    sh(format!(
        "cat '{}' > '{}'",
        new.display(),
        m.path("data/00000002.bin").display()
    ));
    assert_eq!(
        std::fs::read(m.path("data/00000002.bin")).unwrap(),
        pattern(8000, 9)
    );
    sh(format!(": > '{}'", m.path("data/00000002.bin").display()));
    // The kernel sends the last close (release) after close(2) has returned.
    let deadline = Instant::now() + Duration::from_secs(5);
    while m.path("data/00000002.bin").exists() {
        assert!(Instant::now() < deadline, "the last chunk was not removed");
        std::thread::sleep(Duration::from_millis(10));
    }
    m.umount();
    assert_eq!(
        python_says(
            &py,
            &[
                "-c",
                "import sys, blosc2; s = blosc2.open(sys.argv[1]); print(s.nchunks, s.decompress_chunk(0) == open(sys.argv[2], 'rb').read())",
                src.to_str().unwrap(),
                dir.path().join("c0.bin").to_str().unwrap(),
            ],
        ),
        "2 True"
    );
}

mod ctable;
mod lock;
