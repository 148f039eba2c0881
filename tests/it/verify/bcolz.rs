//! bcolz sources: damaged chunks, missing chunk files counted apart, sizes that declare far
//! more chunks than there are files, salvage's refusals (zero chunks over its cap, a symbolic
//! link to a directory).

use super::hostile::{hostile_fault, timed_run, verify_run};
use super::*;

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
    copy_tree(&fixtures(py).join("carray"), &p);
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
    copy_tree(&fixtures(py).join("carray"), &p);
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
