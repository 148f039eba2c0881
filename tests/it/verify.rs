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

use crate::support::{b2fs, python, run_python};

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

/// Copies a file or directory tree.
fn copy(from: &Path, to: &Path) {
    if from.is_file() {
        std::fs::copy(from, to).unwrap();
        return;
    }
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        copy(&e.path(), &to.join(e.file_name()));
    }
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
fn chunk_at(a: &Array, i: usize) -> (u64, u64) {
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
    copy(&fixtures(py).join(src), &path);
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

/// A frame python-blosc2 wrote whose index or trailer is damaged: python-blosc2 cannot open
/// it; `verify` opens it leniently, says which part is damaged and still checks every chunk
/// (located by walking their headers when the index is gone); `salvage` writes a sound frame
/// with every readable chunk exact (damaged ones zeros), the index rebuilt and what the
/// damaged trailer held lost (exit 1, DEST written). A frame whose index and a chunk header
/// are both destroyed cannot be walked safely: verify says why, salvage writes nothing.
#[test]
fn verify_and_salvage_a_frame_with_a_damaged_index_or_trailer() {
    let py = or_skip!(python(
        "verify_and_salvage_a_frame_with_a_damaged_index_or_trailer"
    ));
    let f = fixtures(&py);
    let src = f.join("frame.b2frame");
    let a = array(&src);
    let n = a.nchunks();
    let idx = a.frame_info().unwrap().index_offset.unwrap();
    let good = reference(&py, "frame", &src);
    let (s3, c3) = chunk_at(&a, 3);
    let (s2, _) = chunk_at(&a, 2);
    let bytes = std::fs::read(&src).unwrap();
    let vl = &a.vlmetalayers()[0].chunk;
    let vl_at = bytes.windows(vl.len()).position(|w| w == &vl[..]).unwrap() as u64;
    let dir = tempfile::tempdir().unwrap();
    // Each case: (name, damage, chunks damaged, a structure reason, salvage exit code).
    type Damage = fn(&Path, u64, u64, u64, u64);
    let cases: [(&str, Damage, &[usize], &str, i32); 2] = [
        (
            "index",
            |p, idx, s3, c3, _| {
                smash(p, idx + 4, 12);
                smash(p, s3 + c3 / 2, 64);
            },
            &[3],
            "located by walking their headers",
            0,
        ),
        (
            "trailer",
            |p, _, _, _, vl_at| smash(p, vl_at, 16),
            &[],
            "vlmetalayer damaged",
            1,
        ),
    ];
    for (name, damage, want, reason, code) in cases {
        let p = dir.path().join(format!("{name}.b2frame"));
        copy(&src, &p);
        damage(&p, idx, s3, c3, vl_at);
        if name == "index" {
            let r = reference(&py, "frame", &p);
            assert!(!r.errors.is_empty(), "{name}: python-blosc2 opens it");
        }
        let (exit, v) = verify_json(&p);
        assert_eq!(exit, 1, "{name}: {v:#}");
        assert!(structure(&v).contains(reason), "{name}: {v:#}");
        assert_eq!(v["chunks"], n, "{name}: {v:#}");
        let damaged: Vec<u64> = v["damaged"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["chunk"].as_u64().unwrap())
            .collect();
        assert_eq!(damaged, want.iter().map(|&i| i as u64).collect::<Vec<_>>());
        let dest = dir.path().join(format!("salvaged-{name}.b2frame"));
        let (exit, err) = salvage_run(&p, &dest);
        assert_eq!(exit, Some(code), "{name}: {err}");
        assert!(err.contains(reason), "{name}: {err}");
        let after = reference(&py, "frame", &dest);
        assert!(after.errors.is_empty(), "{name}: {:?}", after.errors);
        for (i, (was, now)) in good.chunks[""].iter().zip(&after.chunks[""]).enumerate() {
            let now = now.as_ref().unwrap();
            if want.contains(&i) {
                assert!(now.1, "{name}: chunk {i} not zeros");
            } else {
                assert_eq!(was.as_ref(), Some(now), "{name}: chunk {i} changed");
            }
        }
        assert_eq!(after.chunks[""].len(), n, "{name}");
        let record = &after.salvage[""];
        assert_eq!(record["damaged"].as_array().unwrap().len(), want.len());
        assert!(record["structure"][0].as_str().unwrap().contains(reason));
        let (exit, v) = verify_json(&dest);
        assert_eq!(exit, 0, "{name}: salvaged copy not sound: {v:#}");
    }
    // The index and chunk 2's header destroyed: chunk 2 cannot be told from what follows.
    let p = dir.path().join("both.b2frame");
    copy(&src, &p);
    smash(&p, idx + 4, 12);
    smash(&p, s2, 16);
    let (exit, v) = verify_json(&p);
    assert_eq!(exit, 1);
    let why = structure(&v);
    assert!(why.contains("cannot be located without it"), "{why}");
    assert!(why.contains("chunk 2's header"), "{why}");
    let dest = dir.path().join("salvaged-both.b2frame");
    let (exit, err) = salvage_run(&p, &dest);
    assert_eq!(exit, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot be located"), "{err}");
    assert!(!dest.exists());
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
fn verify_and_salvage_bcolz() {
    let py = or_skip!(python("verify_and_salvage_bcolz"));
    case(&py, "carray", "carray", "carray", |p| {
        let blp = p.join("data/__3.blp");
        let len = std::fs::metadata(&blp).unwrap().len();
        smash(&blp, len / 2, 48);
        // A chunk header: the Blosc1 format version of chunk 5. (A wrong cbytes is not
        // damage bcolz sees: C-Blosc 1 decodes without it, b2fs refuses the chunk.)
        write_at(&p.join("data/__5.blp"), 16, &[9]);
    });
    case(&py, "ctable", "ctable", "ctable", |p| {
        let blp = p.join("y/data/__2.blp");
        let len = std::fs::metadata(&blp).unwrap().len();
        smash(&blp, len / 2, 48);
        write_at(&blp, 16, &[9]);
    });
    // Missing chunk files: bcolz cannot read those chunks; salvage writes them as zeros.
    case(&py, "carray", "holes", "carray", |p| {
        std::fs::remove_file(p.join("data/__2.blp")).unwrap();
        std::fs::remove_file(p.join("data/__6.blp")).unwrap();
        std::fs::remove_file(p.join("data/__7.blp")).unwrap();
    });
    case(&py, "ctable", "ctable-hole", "ctable", |p| {
        std::fs::remove_file(p.join("x/data/__1.blp")).unwrap();
    });
}

/// A refused salvage into `dest` (in `dir`) wrote nothing: no DEST, no temporary left.
fn nothing_written(dir: &Path, dest: &Path) {
    assert!(!dest.exists());
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

/// A copy `dir/name` of the carray bcolz wrote, chunk files `holes` removed.
fn carray_without(py: &Path, dir: &Path, name: &str, holes: &[usize]) -> PathBuf {
    let p = dir.join(name);
    copy(&fixtures(py).join("carray"), &p);
    for h in holes {
        std::fs::remove_file(p.join(format!("data/__{h}.blp"))).unwrap();
    }
    p
}

/// A carray bcolz wrote, three of its ten chunk files removed: `verify` says it checked the
/// seven chunks whose files are there and counts the three missing ones apart (JSON and
/// text), and `salvage`'s summary counts the ten chunks, seven kept.
#[test]
fn verify_counts_missing_chunk_files_apart_from_the_chunks_it_checked() {
    let py = or_skip!(python(
        "verify_counts_missing_chunk_files_apart_from_the_chunks_it_checked"
    ));
    let dir = tempfile::tempdir().unwrap();
    let p = carray_without(&py, dir.path(), "holes", &[2, 6, 7]);
    let (code, v) = verify_json(&p);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["missing"][0]["declared_chunks"], 10, "{v:#}");
    assert_eq!(v["chunks"], 7, "{v:#}");
    assert_eq!(v["missing_chunks"], 3, "{v:#}");
    assert_eq!(v["damaged_chunks"], 3, "{v:#}");
    let out = b2fs().arg("verify").arg(&p).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("checked:  1 arrays, 7 chunks"), "{text}");
    assert!(text.contains("missing:  3 chunks"), "{text}");
    assert!(
        text.contains("result:   DAMAGED (3 chunks (3 of them missing), 0 structures)"),
        "{text}"
    );
    let dest = dir.path().join("rescued");
    let out = b2fs().arg("salvage").arg(&p).arg(&dest).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("7 of 10 chunks kept, 3 replaced by zeros (3 of them missing chunk files)"),
        "{err}"
    );
}

/// A bcolz-written carray whose `meta/sizes` says `rows` rows (chunklen 1024, ten chunk files).
fn carray_declaring(py: &Path, dir: &Path, name: &str, rows: u64) -> PathBuf {
    let p = dir.join(name);
    copy(&fixtures(py).join("carray"), &p);
    let sizes = p.join("meta/sizes");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&sizes).unwrap()).unwrap();
    v["shape"] = serde_json::json!([rows]);
    std::fs::write(&sizes, serde_json::to_vec(&v).unwrap()).unwrap();
    p
}

/// Issue 22: a carray whose `meta/sizes` declares ~1e15 chunks, or 553,024, beside its ten
/// chunk files, is verified in bounded time and memory (only the files present are walked;
/// the missing ones are counted, the first [`MISSING_LISTED`] listed, their runs summed up),
/// and salvage refuses it at once in one line, writing nothing.
#[test]
fn verify_bcolz_declaring_more_chunks_than_files_is_bounded() {
    use b2fs::cli::check::MISSING_LISTED;
    let py = or_skip!(python(
        "verify_bcolz_declaring_more_chunks_than_files_is_bounded"
    ));
    let dir = tempfile::tempdir().unwrap();
    for (name, rows, holes) in [
        ("huge", 1_000_000_000_000_000_000u64, vec![]),
        ("many", 553_024 * 1024, vec![4usize]),
    ] {
        let p = carray_declaring(&py, dir.path(), name, rows);
        for h in &holes {
            std::fs::remove_file(p.join(format!("data/__{h}.blp"))).unwrap();
        }
        let declared = rows.div_ceil(1024);
        let missing = declared - 10 + holes.len() as u64;
        let r = verify_run(&p);
        assert!(
            hostile_fault(&r).is_none(),
            "{name}: {:?}",
            hostile_fault(&r)
        );
        assert!(
            r.took < std::time::Duration::from_secs(10),
            "{name}: {:?}",
            r.took
        );
        assert!(
            r.max_rss_kib < 64 << 10,
            "{name}: peak RSS {} KiB",
            r.max_rss_kib
        );
        assert_eq!(r.code, Some(1));
        let v: Value = serde_json::from_slice(&r.out).unwrap();
        // Checked: the chunk files present; the missing ones are counted apart.
        assert_eq!(v["chunks"], 10 - holes.len() as u64, "{name}");
        assert_eq!(v["missing_chunks"], missing, "{name}");
        // Chunk 9 is the file of the 784-row leftover, now a full chunk's slot: too short.
        assert_eq!(v["damaged_chunks"], missing + 1, "{name}");
        assert_eq!(v["damaged_listed"], false);
        let listed = v["damaged"].as_array().unwrap();
        assert_eq!(listed.len(), MISSING_LISTED + 1, "{name}");
        let m = &v["missing"][0];
        assert_eq!(m["declared_chunks"], declared);
        assert_eq!(m["missing_chunks"], missing);
        let mut runs = vec![[10, declared - 1]];
        for &h in &holes {
            runs.insert(0, [h as u64, h as u64]);
        }
        assert_eq!(m["runs"], serde_json::json!(runs), "{name}");
        eprintln!(
            "{name}: {declared} chunks declared, verify {:?}, peak RSS {} KiB",
            r.took, r.max_rss_kib
        );
        // Salvage: refused at once, one line naming meta/sizes, nothing written. The missing
        // chunks alone are over the 100,000 salvage replaces: it refuses before listing any
        // of them or decoding a chunk ("at least": the ten files were not decoded).
        let dest = dir.path().join(format!("{name}-salvaged"));
        let mut cmd = b2fs();
        cmd.arg("salvage").arg(&p).arg(&dest);
        let s = timed_run(cmd);
        let err = &s.err;
        assert_eq!(s.code, Some(1), "{err}");
        assert!(s.took < std::time::Duration::from_secs(10));
        // Listing 100,000 missing chunks first took 27 MiB (0.12 s) for "many"; now 3-7 MiB.
        assert!(s.max_rss_kib < 16 << 10, "peak RSS {} KiB", s.max_rss_kib);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("meta/sizes declares"), "{err}");
        assert!(
            err.contains(&format!("at least {missing} damaged chunks")),
            "{err}"
        );
        eprintln!(
            "{name}: salvage refused in {:?}, peak RSS {} KiB",
            s.took, s.max_rss_kib
        );
        nothing_written(dir.path(), &dest);
    }
}

/// A carray bcolz wrote, its `meta/storage` chunklen raised to chunks of 2 GiB and its
/// `meta/sizes` declaring 300 of them: every chunk is damaged (the ten files are too short
/// for their slots, the rest are missing), and their chunks of zeros would take about
/// 2.3 GiB, over the 1 GiB salvage writes. The refusal is cheap: one line, nothing written,
/// in 35 ms at 16 MiB peak RSS here (each chunk of zeros is built from one block; before,
/// one was encoded from 2 GiB of zeros first: 3.3 s on the same machine).
#[test]
fn salvage_refuses_zero_chunks_over_the_cap_before_encoding_them_in_full() {
    let py = or_skip!(python(
        "salvage_refuses_zero_chunks_over_the_cap_before_encoding_them_in_full"
    ));
    let dir = tempfile::tempdir().unwrap();
    let chunklen = b2fs::codec::MAX_BUFFERSIZE as u64 / 8;
    let p = carray_declaring(&py, dir.path(), "big", chunklen * 300);
    let storage = p.join("meta/storage");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&storage).unwrap()).unwrap();
    v["chunklen"] = serde_json::json!(chunklen);
    std::fs::write(&storage, serde_json::to_vec(&v).unwrap()).unwrap();
    let (code, report) = verify_json(&p);
    assert_eq!(code, 1);
    assert_eq!(report["damaged_chunks"], 300, "{report:#}");
    let dest = dir.path().join("rescued");
    let mut cmd = b2fs();
    cmd.arg("salvage").arg(&p).arg(&dest);
    let r = timed_run(cmd);
    assert_eq!(r.code, Some(1), "{}", r.err);
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);
    assert!(r.err.contains("of zero chunks"), "{}", r.err);
    assert!(
        r.took < std::time::Duration::from_millis(1500),
        "refused in {:?}",
        r.took
    );
    assert!(r.max_rss_kib < 128 << 10, "peak RSS {} KiB", r.max_rss_kib);
    eprintln!("refused in {:?}, peak RSS {} KiB", r.took, r.max_rss_kib);
    nothing_written(dir.path(), &dest);
}

/// A bcolz root holding a symbolic link to a directory (`data/loop -> ..`: not a chunk name,
/// so the carray still opens): salvage refuses it in one line, before writing anything,
/// instead of following the link for ever (it overflowed the stack); the source is untouched.
#[test]
fn salvage_refuses_a_symbolic_link_to_a_directory_in_the_source() {
    let py = or_skip!(python(
        "salvage_refuses_a_symbolic_link_to_a_directory_in_the_source"
    ));
    let dir = tempfile::tempdir().unwrap();
    let p = carray_without(&py, dir.path(), "c.bcolz", &[3]);
    std::os::unix::fs::symlink("..", p.join("data/loop")).unwrap();
    let listing = |p: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(p.join("data"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        names
    };
    let before = listing(&p);
    let dest = dir.path().join("rescued.bcolz");
    let out = b2fs().arg("salvage").arg(&p).arg(&dest).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("symbolic link to a directory"), "{err}");
    assert!(!dest.exists());
    assert_eq!(listing(&p), before);
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

/// Inputs per `b2fs verify` run of the hostile corpus.
const HOSTILE_BATCH: usize = 150;
/// Time one run (so each input in it) may take.
const HOSTILE_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);
/// Peak RSS one run (so each input in it) may reach.
const HOSTILE_MAX_RSS_KIB: i64 = 256 << 10;

/// The stored inputs of the fuzz targets that are sources (`frame_open`: frame files,
/// `bcolz_open`: carrays split into their files), from `fuzz/corpus/TARGET` and
/// `tests/data/fuzz-regressions/TARGET` (scripts/fuzz.sh keeps them there), sorted.
fn hostile_inputs(targets: &[(&str, bool)]) -> Vec<(PathBuf, bool)> {
    let root = crate::support::repo_root();
    let mut all = Vec::new();
    for &(target, bcolz) in targets {
        for base in ["fuzz/corpus", "tests/data/fuzz-regressions"] {
            let Ok(rd) = std::fs::read_dir(root.join(base).join(target)) else {
                continue;
            };
            let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            files.sort();
            all.extend(files.into_iter().map(|p| (p, bcolz)));
        }
    }
    all
}

/// Lays fuzz input `input` out as source number `i` in `dir`, as its fuzz target reads it.
fn lay_out_hostile(dir: &Path, i: usize, input: &Path, bcolz: bool) -> PathBuf {
    let data = std::fs::read(input).unwrap();
    if !bcolz {
        let f = dir.join(format!("f{i:05}.b2frame"));
        std::fs::write(&f, &data).unwrap();
        return f;
    }
    let c = dir.join(format!("c{i:05}"));
    std::fs::create_dir_all(c.join("meta")).unwrap();
    std::fs::create_dir_all(c.join("data")).unwrap();
    let parts = crate::fuzz::entry::split_parts(&data, 6);
    let part = |k: usize| parts.get(k).copied();
    std::fs::write(c.join("meta/sizes"), part(0).unwrap_or_default()).unwrap();
    std::fs::write(c.join("meta/storage"), part(1).unwrap_or_default()).unwrap();
    if let Some(a) = part(2).filter(|a| !a.is_empty()) {
        std::fs::write(c.join("__attrs__"), a).unwrap();
    }
    for k in 0..3 {
        if let Some(b) = part(3 + k) {
            std::fs::write(c.join(format!("data/__{k}.blp")), b).unwrap();
        }
    }
    c
}

/// One `b2fs verify --json SOURCE` run under [`HOSTILE_LIMIT`].
struct Run {
    code: Option<i32>,
    out: Vec<u8>,
    err: String,
    max_rss_kib: i64,
    timed_out: bool,
    took: std::time::Duration,
}

fn verify_run(source: &Path) -> Run {
    let mut cmd = b2fs();
    cmd.args(["verify", "--json"]).arg(source);
    timed_run(cmd)
}

/// Runs `cmd` as [`verify_run`] runs verify (under [`HOSTILE_LIMIT`], peak RSS sampled).
fn timed_run(mut cmd: std::process::Command) -> Run {
    let t = std::time::Instant::now();
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err, max_rss_kib, timed_out) = wait_with_rusage(child, HOSTILE_LIMIT);
    Run {
        code,
        out,
        err: String::from_utf8_lossy(&err).into_owned(),
        max_rss_kib,
        timed_out,
        took: t.elapsed(),
    }
}

/// What is wrong with run `r` (`None`: within bounds, a JSON report, no panic).
fn hostile_fault(r: &Run) -> Option<String> {
    if r.timed_out {
        return Some(format!("killed after {:?}", r.took));
    }
    if r.max_rss_kib > HOSTILE_MAX_RSS_KIB {
        return Some(format!("peak RSS {} KiB", r.max_rss_kib));
    }
    // 3: a single source that is not a container (a batch is a directory: 0 or 1).
    if !matches!(r.code, Some(0 | 1 | 3)) || r.err.contains("panicked") {
        return Some(format!("exit {:?}: {}", r.code, r.err));
    }
    match serde_json::from_slice::<Value>(&r.out) {
        Ok(v) if v["arrays"].is_u64() => None,
        _ => Some("no JSON report".into()),
    }
}

/// Issue 22: every stored input of the `frame_open` fuzz target (about 770 frame files, a
/// few declaring hundreds of millions of chunks) through `b2fs verify --json` (see
/// [`hostile_corpus_bounded`]).
#[test]
fn verify_hostile_corpus_bounded() {
    hostile_corpus_bounded(&[("frame_open", false)], 500);
}

/// [`verify_hostile_corpus_bounded`] for the `bcolz_open` corpus (about 1,900 carrays, some
/// declaring 1e15 chunks beside three `.blp` files).
#[test]
fn verify_hostile_bcolz_corpus_bounded() {
    hostile_corpus_bounded(&[("bcolz_open", true)], 1000);
}

/// The stored inputs of fuzz `targets` (at least `min`) through `b2fs verify --json`, in runs
/// of [`HOSTILE_BATCH`] inputs (a directory of sources each), two at a time: every run
/// finishes within [`HOSTILE_LIMIT`] and [`HOSTILE_MAX_RSS_KIB`] (the child's peak RSS from
/// `wait4`), so every input does, with a JSON report and no panic. A run that fails is
/// verified again input by input to name the culprits. Prints the worst run's peak RSS and
/// time (docs/VERIFY.md records them).
fn hostile_corpus_bounded(targets: &[(&str, bool)], min: usize) {
    let inputs = hostile_inputs(targets);
    assert!(inputs.len() >= min, "{} inputs", inputs.len());
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<Vec<(usize, &(PathBuf, bool))>> = inputs
        .iter()
        .enumerate()
        .collect::<Vec<_>>()
        .chunks(HOSTILE_BATCH)
        .map(<[_]>::to_vec)
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(batch) = batches.get(b) else { break };
                    let bdir = dir.path().join(format!("b{b:03}"));
                    std::fs::create_dir(&bdir).unwrap();
                    for (i, (input, bcolz)) in batch {
                        lay_out_hostile(&bdir, *i, input, *bcolz);
                    }
                    let r = verify_run(&bdir);
                    results.lock().unwrap().push((b, r));
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    let (mut arrays, mut faults) = (0, Vec::new());
    for (b, r) in &results {
        match hostile_fault(r) {
            None => {
                let v: Value = serde_json::from_slice(&r.out).unwrap();
                arrays += v["arrays"].as_u64().unwrap();
            }
            Some(why) => {
                // Name the inputs: each alone.
                for (i, (input, bcolz)) in &batches[*b] {
                    let one = dir.path().join(format!("one{i:05}"));
                    std::fs::create_dir(&one).unwrap();
                    let src = lay_out_hostile(&one, *i, input, *bcolz);
                    if let Some(w) = hostile_fault(&verify_run(&src)) {
                        faults.push(format!("{}: {w}", input.display()));
                    }
                }
                faults.push(format!("run {b}: {why}"));
            }
        }
    }
    let rss = results
        .iter()
        .map(|(_, r)| r.max_rss_kib)
        .max()
        .unwrap_or(0);
    let slowest = results
        .iter()
        .map(|(_, r)| r.took)
        .max()
        .unwrap_or_default();
    eprintln!(
        "hostile corpus: {} inputs in {} runs, {arrays} arrays, worst run {slowest:?} and peak \
         RSS {} MiB, {:?} in all",
        inputs.len(),
        results.len(),
        rss / 1024,
        started.elapsed()
    );
    assert!(faults.is_empty(), "{faults:#?}");
    assert!(arrays as usize > min / 4, "{arrays} arrays verified");
}

/// Waits for `child` with `wait4`, killing it (SIGKILL) once it has run `limit`: its exit code,
/// stdout, stderr, maximum RSS in KiB and whether it was killed (stdout and stderr are
/// drained on threads meanwhile). The child is killed only before it is reaped, so its pid
/// cannot have been reused.
fn wait_with_rusage(
    mut child: std::process::Child,
    limit: std::time::Duration,
) -> (Option<i32>, Vec<u8>, Vec<u8>, i64, bool) {
    use std::io::Read;
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let t2 = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let started = std::time::Instant::now();
    let mut killed = false;
    // The child's own peak (VmHWM of its mm), sampled while it runs: `ru_maxrss` is no measure
    // of it, since exec records the spawning process's high-water mark into the child's
    // (the test binary, running other tests beside, may have passed 256 MiB). A sample every
    // millisecond misses at most the growth of the child's last millisecond (under 1 MiB at
    // this machine's rate of touching fresh memory); a child that exits before the first
    // sample has had no time to grow.
    let mut peak_kib = 0i64;
    loop {
        if let Some(kib) = vm_hwm_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        let flags = if killed { 0 } else { libc::WNOHANG };
        // SAFETY: `pid` is our own child, not yet reaped; both pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
        if r == pid {
            break;
        }
        assert_eq!(r, 0, "wait4");
        if started.elapsed() > limit {
            // SAFETY: our child, not reaped yet (a zombie at worst): the pid is still its.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (
        code,
        t1.join().unwrap(),
        t2.join().unwrap(),
        peak_kib,
        killed,
    )
}

/// The peak resident set (VmHWM) of live process `pid` in KiB; `None` once it has exited.
fn vm_hwm_kib(pid: libc::pid_t) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
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
    copy(&f.join("frame.b2frame"), &local);
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
