//! `b2fs verify` and `b2fs salvage` (issue 22) on damaged copies of sources python-blosc2 and
//! bcolz wrote (`scripts/oracle/verify_check.py gen`): bytes changed inside compressed
//! streams, chunk headers, the frame index, a bcolz `.blp`, a missing sparse chunk file, a
//! store member. `verify` must name exactly the chunks the references cannot read back (no
//! false alarm on a sound chunk); `salvage`'s output must open in the references with every
//! readable chunk exact and each damaged one zeros, listed under `b2fs_salvage`. Also: the
//! fuzz targets' hostile corpus through `verify` (no crash, bounded memory and time), and a
//! remote frame on moto.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use b2fs::container::{self, Array, Container, Opened};
use serde_json::Value;

use crate::support::{b2fs, copy_tree, python, run_python};

/// The reference-written sources, generated once per test run.
fn fixtures(py: &Path) -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        crate::support::oracle(py, &[&"scripts/oracle/verify_check.py", &"gen", &d.path()]);
        d
    })
    .path()
}

/// Overwrites `len` bytes at `at` of `path` with a pattern that no codec stream survives.
fn smash(path: &Path, at: u64, len: usize) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let junk: Vec<u8> = (0..len)
        .map(|i| 0xF0 ^ (i as u8).wrapping_mul(37))
        .collect();
    f.write_all_at(&junk, at).unwrap();
}

fn write_at(path: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

/// The single array of a frame file.
fn array(path: &Path) -> Array {
    match container::open(path).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => panic!("a table"),
    }
}

/// Absolute file offset of stored chunk `i` of a contiguous frame, and its cbytes.
pub(crate) fn chunk_at(a: &Array, i: usize) -> (u64, u64) {
    let info = a.frame_info().unwrap();
    let e = a.frame_index_entry(i).unwrap();
    assert!(e >= 0, "chunk {i} is special");
    let at = info.start + info.header_len + e as u64;
    (at, a.chunk_header(i).unwrap().cbytes as u64)
}

/// What the references read from a source: label -> per chunk Some((sha, zeros)) or None,
/// and the labels they cannot open at all.
struct Reference {
    chunks: BTreeMap<String, Vec<Option<(String, bool)>>>,
    errors: BTreeMap<String, String>,
    salvage: BTreeMap<String, Value>,
}

fn reference(py: &Path, kind: &str, path: &Path) -> Reference {
    let out = run_python(
        py,
        &[
            "scripts/oracle/verify_check.py",
            "read",
            kind,
            path.to_str().unwrap(),
        ],
    );
    let v: Value = serde_json::from_slice(&out).unwrap();
    let chunks = v["chunks"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, list)| {
            let list = list
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    c.as_array()
                        .map(|p| (p[0].as_str().unwrap().to_owned(), p[1].as_bool().unwrap()))
                })
                .collect();
            (k.clone(), list)
        })
        .collect();
    let errors = v["errors"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, e)| (k.clone(), e.as_str().unwrap_or_default().to_owned()))
        .collect();
    let salvage = v["salvage"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, s)| !s.is_null())
        .map(|(k, s)| (k.clone(), s.clone()))
        .collect();
    Reference {
        chunks,
        errors,
        salvage,
    }
}

/// `b2fs verify --json SOURCE`: the exit code and the report.
fn verify_json(source: &Path) -> (i32, Value) {
    let out = b2fs()
        .args(["verify", "--json"])
        .arg(source)
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify {}: exit {code}, no JSON ({e}): {}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (code, v)
}

/// The label of a damaged entry as the oracle names it ("" for a single array).
fn label(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// Checks that verify's damaged chunks are exactly the chunks the reference cannot read
/// (labels the reference cannot open must be damaged structures or wholly damaged in
/// verify's report). Returns the damaged (label, chunk) pairs.
fn agree(source: &Path, report: &Value, r: &Reference) -> BTreeSet<(String, usize)> {
    let ours: BTreeSet<(String, usize)> = report["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (label(&d["array"]), d["chunk"].as_u64().unwrap() as usize))
        .collect();
    let theirs: BTreeSet<(String, usize)> = r
        .chunks
        .iter()
        .flat_map(|(l, list)| {
            list.iter()
                .enumerate()
                .filter(|(_, c)| c.is_none())
                .map(move |(i, _)| (l.clone(), i))
        })
        .collect();
    let ours_opened: BTreeSet<(String, usize)> = ours
        .iter()
        .filter(|(l, _)| r.chunks.contains_key(l))
        .cloned()
        .collect();
    assert_eq!(
        ours_opened,
        theirs,
        "{}: verify's damaged chunks vs what the reference cannot read\n{report:#}",
        source.display()
    );
    let structure: BTreeSet<String> = report["structure"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| label(&p["array"]))
        .collect();
    for l in r.errors.keys() {
        let whole = ours.iter().any(|(ol, _)| ol == l);
        assert!(
            structure.contains(l) || whole,
            "{}: the reference cannot open {l:?} ({}), verify reports nothing for it\n{report:#}",
            source.display(),
            r.errors[l]
        );
    }
    ours
}

/// Runs salvage into a fresh DEST and checks it with the reference: every chunk readable,
/// readable chunks of the damaged source exact, damaged ones zeros, the record present.
fn salvage_and_check(py: &Path, kind: &str, source: &Path, before: &Reference, damaged: usize) {
    let dest = source.with_extension("salvaged");
    let dest = dest.with_file_name(format!(
        "salvaged-{}",
        source.file_name().unwrap().to_string_lossy()
    ));
    let out = b2fs()
        .arg("salvage")
        .arg(source)
        .arg(&dest)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "salvage {}: {err}", source.display());
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("written as zeros"))
            .count(),
        damaged,
        "{err}"
    );
    let after = reference(py, kind, &dest);
    assert!(after.errors.is_empty(), "{:?}", after.errors);
    assert_eq!(
        after.chunks.keys().collect::<Vec<_>>(),
        before.chunks.keys().collect::<Vec<_>>()
    );
    for (l, list) in &before.chunks {
        let got = &after.chunks[l];
        assert_eq!(got.len(), list.len(), "{l}: chunk count");
        for (i, (was, now)) in list.iter().zip(got).enumerate() {
            let now = now
                .as_ref()
                .unwrap_or_else(|| panic!("{l} chunk {i}: unreadable after salvage"));
            match was {
                Some(w) => assert_eq!(w, now, "{l} chunk {i}: changed by salvage"),
                None => assert!(now.1, "{l} chunk {i}: damaged, but not zeros after salvage"),
            }
        }
    }
    if damaged > 0 {
        let recorded: usize = after
            .salvage
            .values()
            .map(|s| s["damaged"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(recorded, damaged, "b2fs_salvage: {:?}", after.salvage);
    }
    // DEST exists now: a second salvage refuses it and leaves it alone.
    let again = b2fs()
        .arg("salvage")
        .arg(source)
        .arg(&dest)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));
    let (code, v) = verify_json(&dest);
    assert_eq!(code, 0, "salvaged copy not sound: {v:#}");
}

/// One damaged copy: verify agrees with the reference, salvage keeps what is readable.
fn case(py: &Path, kind: &str, name: &str, src: &str, damage: impl FnOnce(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    copy_tree(&fixtures(py).join(src), &path);
    damage(&path);
    let r = reference(py, kind, &path);
    let (code, report) = verify_json(&path);
    let ours = agree(&path, &report, &r);
    assert!(
        !ours.is_empty() || !report["structure"].as_array().unwrap().is_empty(),
        "{name}: the damage did not damage anything; the case tests nothing"
    );
    assert_eq!(code, 1, "{name}: exit code with damage\n{report:#}");
    eprintln!(
        "{name}: {} damaged chunks: {:?}",
        ours.len(),
        report["damaged"]
    );
    if report["structure"].as_array().unwrap().is_empty() {
        salvage_and_check(py, kind, &path, &r, ours.len());
    }
}

#[test]
fn verify_sound_sources_exit_0() {
    let py = or_skip!(python("verify_sound_sources_exit_0"));
    let f = fixtures(&py);
    for (src, kind, arrays) in [
        ("frame.b2frame", "Cframe", 1),
        ("sframe", "Sframe", 1),
        ("arr.b2nd", "Cframe", 1),
        ("carray", "BcolzCarray", 1),
        ("ctable", "BcolzCtable", 2),
        ("store.b2z", "collection (Zip)", 5),
        ("store.b2d", "collection (Dir)", 5),
    ] {
        let (code, v) = verify_json(&f.join(src));
        assert_eq!(code, 0, "{src}: {v:#}");
        assert_eq!(v["sound"], true);
        assert_eq!(v["kind"], kind, "{src}");
        assert_eq!(v["arrays"], arrays, "{src}: {v:#}");
        assert!(v["chunks"].as_u64().unwrap() > 0);
        assert_eq!(v["damaged"], Value::Array(Vec::new()));
    }
    // Text form, and the exit codes of what is not a container.
    let out = b2fs()
        .arg("verify")
        .arg(f.join("frame.b2frame"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("result:   sound"));
    let junk = f.join("junk.bin");
    std::fs::write(&junk, b"not a container at all").unwrap();
    for p in [junk, f.join("missing.b2frame")] {
        let out = b2fs().arg("verify").arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{}", p.display());
        assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    }
}

#[test]
fn verify_and_salvage_frames() {
    let py = or_skip!(python("verify_and_salvage_frames"));
    let f = fixtures(&py);
    let a = array(&f.join("frame.b2frame"));
    // A compressed stream, and a chunk header's cbytes.
    let (s2, c2) = chunk_at(&a, 2);
    let (s5, _) = chunk_at(&a, 5);
    case(&py, "frame", "streams.b2frame", "frame.b2frame", |p| {
        smash(p, s2 + c2 / 2, 64);
        write_at(p, s5 + 12, &0x7fff_0000u32.to_le_bytes());
    });
    // The index: chunk 7's entry points into chunk 6.
    let info = a.frame_info().unwrap();
    let idx = info.index_offset.unwrap();
    let e6 = a.frame_index_entry(6).unwrap();
    let idx_raw = {
        let bytes = std::fs::read(f.join("frame.b2frame")).unwrap();
        bytes[idx as usize..(idx + info.index_len) as usize].to_vec()
    };
    // Only when the index chunk is stored memcpyed can one entry be changed in place.
    let memcpyed = idx_raw[2] & 0x02 != 0;
    case(&py, "frame", "index.b2frame", "frame.b2frame", |p| {
        if memcpyed {
            write_at(p, idx + 32 + 7 * 8, &(e6 + 100).to_le_bytes());
        } else {
            smash(p, idx + 16, 8);
        }
    });
    // A b2nd array (zstd), one stream.
    let b = array(&f.join("arr.b2nd"));
    let (s1, c1) = chunk_at(&b, 1);
    case(&py, "frame", "arr.b2nd", "arr.b2nd", |p| {
        smash(p, s1 + c1 / 2, 32)
    });
}

/// Runs salvage SOURCE DEST: exit code and stderr.
fn salvage_run(source: &Path, dest: &Path) -> (Option<i32>, String) {
    let out = b2fs()
        .arg("salvage")
        .arg(source)
        .arg(dest)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), err)
}

/// The damaged-structure reasons of a verify report, joined.
fn structure(report: &Value) -> String {
    report["structure"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["reason"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn verify_and_salvage_sparse_frame() {
    let py = or_skip!(python("verify_and_salvage_sparse_frame"));
    case(&py, "frame", "sframe", "sframe", |p| {
        let c3 = p.join("00000003.chunk");
        let len = std::fs::metadata(&c3).unwrap().len();
        smash(&c3, len / 2, 64);
        std::fs::remove_file(p.join("00000006.chunk")).unwrap();
    });
}

#[test]
fn verify_and_salvage_stores() {
    let py = or_skip!(python("verify_and_salvage_stores"));
    let f = fixtures(&py);
    // Chunk 3 of /a inside the zip: its member's frame offset plus the chunk's.
    let opened = container::open_any(&f.join("store.b2z")).unwrap();
    let Opened::Collection(c) = &opened else {
        panic!("not a collection")
    };
    let Some(container::store::Node::Leaf(leaf)) = c.find("/a") else {
        panic!("no /a")
    };
    let (at, cb) = chunk_at(leaf.array().unwrap(), 3);
    case(&py, "store", "store.b2z", "store.b2z", |p| {
        smash(p, at + cb / 2, 64);
        write_at(p, at + 12, &0x7fff_0000u32.to_le_bytes());
    });
    let g = array(&f.join("store.b2d/g/b.b2nd"));
    let (at, cb) = chunk_at(&g, 1);
    case(&py, "store", "store.b2d", "store.b2d", |p| {
        smash(&p.join("g/b.b2nd"), at + cb / 2, 64);
        write_at(&p.join("g/b.b2nd"), at + 12, &0x7fff_0000u32.to_le_bytes());
    });
}

/// A damaged frame on the local S3 server (moto): `verify URL` reports the chunks a local
/// verify of the same bytes reports (which the reference agrees with, above), and `salvage
/// URL DEST` writes a local frame the reference reads whole.
#[cfg(feature = "remote")]
#[test]
fn verify_and_salvage_remote_frame() {
    use crate::support::remote::{BUCKET, moto, put_object};
    let t = "verify_and_salvage_remote_frame";
    let py = or_skip!(python(t));
    let moto = or_skip!(moto(t));
    let f = fixtures(&py);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("damaged.b2frame");
    copy_tree(&f.join("frame.b2frame"), &local);
    let a = array(&local);
    let (s4, c4) = chunk_at(&a, 4);
    drop(a);
    smash(&local, s4 + c4 / 2, 64);
    put_object(
        &moto,
        "damaged.b2frame",
        &std::fs::read(&local).unwrap(),
        true,
    );
    let url = format!("s3://{BUCKET}/damaged.b2frame");
    let opts = format!("endpoint={},no_sign_request", moto.url);
    let out = b2fs()
        .args(["verify", "--json", "-o", &opts, &url])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let remote: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (_, here) = verify_json(&local);
    assert_eq!(remote["damaged"], here["damaged"]);
    assert_eq!(remote["chunks"], here["chunks"]);
    let r = reference(&py, "frame", &local);
    let damaged = agree(&local, &remote, &r).len();
    assert_eq!(damaged, 1, "{remote:#}");
    let dest = dir.path().join("salvaged.b2frame");
    crate::support::ok(b2fs().args(["salvage", "-o", &opts, &url]).arg(&dest));
    let after = reference(&py, "frame", &dest);
    for (i, (was, now)) in r.chunks[""].iter().zip(&after.chunks[""]).enumerate() {
        let now = now
            .as_ref()
            .unwrap_or_else(|| panic!("chunk {i} unreadable"));
        match was {
            Some(w) => assert_eq!(w, now, "chunk {i}"),
            None => assert!(now.1, "chunk {i} not zeros"),
        }
    }
    assert_eq!(after.salvage[""]["source"], url);
}

mod bcolz;
mod hostile;
mod lenient;

/// A daemon killed in the middle of a `.b2z` commit leaves the new zip's temp file beside the
/// store: `b2fs verify` lists it (`leftovers`, and a `leftover:` line) once its process is
/// gone (not while it runs: a commit under way), and the store, which the crash left as it
/// was, is still sound (exit 0).
#[test]
fn verify_lists_the_temp_files_an_interrupted_commit_left() {
    let py = or_skip!(python(
        "verify_lists_the_temp_files_an_interrupted_commit_left"
    ));
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine.b2z");
    let make = "import sys, numpy as np, blosc2\n\
        s = blosc2.TreeStore(sys.argv[1], mode='w')\n\
        s['/x'] = blosc2.asarray(np.arange(1000, dtype=np.int32), chunks=(256,))\n\
        s.close()\n";
    run_python(&py, &["-c", make, pristine.to_str().unwrap()]);
    let work = dir.path().join("w");
    let mut seen = false;
    crate::support::steps::every_commit_step("a .b2z member commit", 1, |steps| {
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir(&work).unwrap();
        let src = work.join("st.b2z");
        std::fs::copy(&pristine, &src).unwrap();
        let store = b2fs::container::store::open_store(&src).unwrap();
        let Some(b2fs::container::store::Node::Leaf(leaf)) = store.find("/x") else {
            panic!("no leaf /x");
        };
        let edit = b2fs::container::write::Edit {
            attrs: Some(serde_json::json!({"units": "kg"})),
            ..Default::default()
        };
        let done =
            b2fs::container::write::commit_member_with_crash_after(&store, leaf, &edit, steps)
                .unwrap();
        drop(store);
        // The temp files are this process's, which runs: a commit under way, not listed.
        let (code, report) = verify_json(&src);
        assert_eq!(code, 0, "step {steps}: {report}");
        assert_eq!(report["leftovers"], serde_json::json!([]), "step {steps}");
        // As a killed daemon leaves them: named by a process that no longer runs (a PID
        // past the kernel's pid_max).
        let ours = format!(".b2fs-{}-", std::process::id());
        for e in std::fs::read_dir(&work).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(rest) = name.strip_prefix(&ours) {
                std::fs::rename(&p, work.join(format!(".b2fs-4999999-{rest}"))).unwrap();
            }
        }
        let mut left: Vec<String> = std::fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".b2fs-")
            })
            .map(|p| p.display().to_string())
            .collect();
        left.sort();
        let (code, report) = verify_json(&src);
        assert_eq!(code, 0, "step {steps}: {report}");
        let listed: Vec<String> = report["leftovers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(listed, left, "step {steps}");
        assert_eq!(report["leftovers_cut"], false);
        if !left.is_empty() {
            seen = true;
            let text = b2fs().arg("verify").arg(&src).output().unwrap();
            let out = String::from_utf8_lossy(&text.stdout);
            assert!(text.status.success(), "{out}");
            assert!(out.contains(&format!("leftover: {}", left[0])), "{out}");
        }
        done
    });
    assert!(seen, "no step left a temp file");
}
