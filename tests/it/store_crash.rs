//! SIGKILL of a read-write mount of a `.b2z` during a commit of one of its members: the
//! store python-blosc2 opens afterwards (`mode='r'`, and `mode='a'`, which extracts the zip
//! and checks every CRC-32) holds the old or the new member, never anything else; the other
//! member and the attributes are untouched; an edit whose fsync was acknowledged is there.
//! `B2FS_STORE_CRASH_RUNS` sets the number of runs (default 5). Also commits stopped after
//! every durable step: a `.b2d` leaf committed in place, an embedded value's edit, and whole-file
//! rewrites of a `.b2d`'s files (their temp files outside the store).

use std::path::Path;

use serde_json::Value;

use crate::support::crash::{OldOrNew, Rng, kill_delay, kill_mount_after, write_and_fsync};
use crate::support::steps::every_commit_step;
use crate::support::{Mount, fuse_and_python, run_python, sha256_hex};

/// python-blosc2's digest of the store: `{"r": {...}, "a": {...}}` (stores.py digest).
fn digest(py: &Path, src: &Path) -> Value {
    let out = run_python(
        py,
        &["scripts/oracle/stores.py", "digest", src.to_str().unwrap()],
    );
    serde_json::from_slice(&out).expect("digest JSON")
}

#[test]
fn store_mount_sigkill_during_a_b2z_commit_leaves_old_or_new() {
    let py = or_skip!(fuse_and_python(
        "store_mount_sigkill_during_a_b2z_commit_leaves_old_or_new"
    ));
    let runs: usize = crate::support::env_or("B2FS_STORE_CRASH_RUNS", 5);
    let (dir, src) = crate::support::temp_path("crash.b2z");
    crate::support::oracle(&py, &[&"scripts/oracle/stores.py", &"crashgen", &src]);
    let first = digest(&py, &src);
    assert_eq!(
        first["r"], first["a"],
        "python-blosc2 reads the fresh store"
    );
    let (big, attrs) = (first["r"]["/big"].clone(), first["r"]["/__attrs__"].clone());
    let mut old = first["r"]["/edit"].as_str().unwrap().to_owned();
    let mut verdict = OldOrNew::default();
    let mut rng = Rng::per_run(4);
    for run in 0..runs {
        let log = dir.path().join(format!("log{run}"));
        let mut m = Mount::foreground(&src, &log);
        let npy = m.path("edit/array.npy");
        // Every item of /edit changes (its 4 chunks in one commit of the member).
        let mut bytes = std::fs::read(&npy).unwrap();
        let hlen = bytes.len() - 200_000 * 8;
        for (i, item) in bytes[hlen..].chunks_exact_mut(8).enumerate() {
            item.copy_from_slice(&((i * (run + 2)) as f64 * -0.5).to_le_bytes());
        }
        let new = sha256_hex(&bytes[hlen..]);
        let writer = write_and_fsync(npy.clone(), bytes.clone());
        // The commit re-encodes /edit and copies the 32 MiB /big into a new zip: kill at
        // points spread over it.
        let delay = kill_delay(&mut rng, run, 5, 400);
        let acked = kill_mount_after(&mut m, delay, writer).is_some();
        let now = digest(&py, &src);
        for mode in ["r", "a"] {
            let d = &now[mode];
            assert_eq!(d["/big"], big, "run {run} ({mode}): /big changed");
            assert_eq!(
                d["/__attrs__"], attrs,
                "run {run} ({mode}): attributes changed"
            );
        }
        assert_eq!(now["r"], now["a"], "run {run}: 'r' and 'a' differ");
        let edit = now["r"]["/edit"].as_str().unwrap().to_owned();
        verdict.check(run, (edit.as_str(), old.as_str(), new.as_str()), acked);
        old = edit;
        drop(m);
    }
    println!(
        "store crash runs: {runs}, old {}, new {}",
        verdict.old, verdict.new
    );
}

/// `.b2d` leaves are committed in place by the frame commit (shadow append, then the header
/// as the commit point; docs/COLLECTIONS.md "Write-back"), not by `<leaf>.<pid>.tmp` + rename: stopped
/// after every durable step, python-blosc2 reads the old or the new leaf in modes 'r' and
/// 'a'; a completed commit keeps the leaf's inode (links, the `.b2lock` sidecar's file and
/// a mount's lock stay on it), a reader holding the old header and index still reads the old
/// chunk, and nothing is left beside the leaf.
#[test]
fn store_b2d_leaf_commit_in_place_old_or_new_at_every_step() {
    use std::os::unix::fs::MetadataExt;

    use b2fs::codec;
    use b2fs::container::store::{Node, open_store};
    use b2fs::container::write::{Edit, chunk_cparams, commit_member_with_crash_after};

    let py = or_skip!(crate::support::python(
        "store_b2d_leaf_commit_in_place_old_or_new_at_every_step"
    ));
    let (_dir, src) = crate::support::temp_path("crash.b2d");
    crate::support::oracle(&py, &[&"scripts/oracle/stores.py", &"crashgen", &src]);
    let first = digest(&py, &src);
    let old_items: Vec<u8> = (0..200_000)
        .flat_map(|i| f64::from(i).to_le_bytes())
        .collect();
    assert_eq!(first["r"]["/edit"], sha256_hex(&old_items));
    let new0: Vec<u8> = (0..50_000)
        .flat_map(|i| (f64::from(i) * -2.0).to_le_bytes())
        .collect();
    let mut new_items = old_items.clone();
    new_items[..new0.len()].copy_from_slice(&new0);
    let new = sha256_hex(&new_items);
    every_commit_step("b2d leaf", 3, |steps| {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("crash.b2d");
        crate::support::copy_all(&src, &p);
        let leaf_file = p.join("edit.b2nd");
        let ino = std::fs::metadata(&leaf_file).unwrap().ino();
        let c = open_store(&p).unwrap();
        let Some(Node::Leaf(leaf)) = c.find("/edit") else {
            panic!("/edit");
        };
        let before = leaf.array().unwrap();
        let chunk = codec::compress(&new0, &chunk_cparams(before).unwrap()).unwrap();
        let edit = Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(chunk))],
            ..Edit::default()
        };
        let done = commit_member_with_crash_after(&c, leaf, &edit, steps).unwrap();
        let now = digest(&py, &p);
        assert_eq!(now["r"], now["a"], "step {steps}: 'r' and 'a' differ");
        assert_eq!(now["r"]["/big"], first["r"]["/big"], "step {steps}");
        let edit_now = now["r"]["/edit"].as_str().unwrap();
        assert!(
            edit_now == first["r"]["/edit"] || edit_now == new,
            "step {steps}: /edit is neither old nor new"
        );
        if done {
            assert_eq!(edit_now, new, "a completed commit shows the new leaf");
            assert_eq!(
                std::fs::metadata(&leaf_file).unwrap().ino(),
                ino,
                "in place"
            );
            let old0 = codec::decompress(&before.chunk_bytes(0).unwrap()).unwrap();
            assert!(old0 == old_items[..new0.len()], "the old reader's chunk 0");
            let mut names: Vec<String> = std::fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(
                names,
                ["__vlmeta__.b2f", "big.b2nd", "edit.b2nd", "embed.b2e"]
            );
            return true;
        }
        false
    });
}

/// An embedded value's edit (its new cframe appended to `embed.b2e`) stopped after every
/// durable step, in a `.b2z` and a `.b2d`: python-blosc2 reads the old or the new value in
/// modes 'r' and 'a', and the other member and the (embedded) attributes as they were.
#[test]
fn store_embedded_value_edit_old_or_new_at_every_step() {
    use b2fs::codec;
    use b2fs::container::store::{Location, Node, open_store};
    use b2fs::container::write::{Edit, chunk_cparams, commit_member_with_crash_after};

    let py = or_skip!(crate::support::python(
        "store_embedded_value_edit_old_or_new_at_every_step"
    ));
    let new: Vec<u8> = [9i16, 8, 7, 6, 5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    for name in ["emb.b2z", "emb.b2d"] {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join(name);
        crate::support::oracle(&py, &[&"scripts/oracle/stores.py", &"embedgen", &src]);
        let first = digest(&py, &src);
        every_commit_step(name, 2, |steps| {
            let tmp = tempfile::tempdir().unwrap();
            let p = tmp.path().join(name);
            crate::support::copy_all(&src, &p);
            let c = open_store(&p).unwrap();
            let Some(Node::Leaf(leaf)) = c.find("/tiny") else {
                panic!("/tiny");
            };
            assert!(
                matches!(leaf.location(), Location::Embedded { .. }),
                "{name}"
            );
            let chunk = codec::compress(&new, &chunk_cparams(leaf.array().unwrap()).unwrap());
            let edit = Edit {
                updates: vec![(0, b2fs::container::write::Chunk::from(chunk.unwrap()))],
                ..Edit::default()
            };
            let done = commit_member_with_crash_after(&c, leaf, &edit, steps).unwrap();
            drop(c);
            let now = digest(&py, &p);
            assert_eq!(
                now["r"], now["a"],
                "{name} step {steps}: 'r' and 'a' differ"
            );
            for key in ["/big", "/__attrs__"] {
                assert_eq!(now["r"][key], first["r"][key], "{name} step {steps}: {key}");
            }
            let tiny = now["r"]["/tiny"].as_str().unwrap();
            if done {
                assert_eq!(tiny, sha256_hex(&new), "{name}: the new value");
                return true;
            }
            assert!(
                tiny == first["r"]["/tiny"] || tiny == sha256_hex(&new),
                "{name} step {steps}: /tiny is neither old nor new"
            );
            false
        });
    }
}

/// Whole-file rewrites of a file of a `.b2d` store through the frame path (the file opened
/// as a frame of its own, as a mount of that one file commits it, not through the store's
/// commit), stopped after every durable step: an attribute commit to the empty SChunk
/// `empty.b2f` (an empty frame is rewritten whole: a temp file renamed over it) and a
/// compaction of `x.b2nd`; the attribute commit also through a tree of `empty.b2f` (a mount
/// of that file). python-blosc2 takes any file of a `.b2d` that reads as a frame
/// for a key, so the temp file must lie outside the store: its keys stay what they were at
/// every step, no file is added to the store, and the attributes are old or new.
#[test]
fn store_b2d_whole_file_rewrites_of_its_files_leave_no_key_behind_at_every_step() {
    use b2fs::container::write::{Edit, commit_with_crash_after, compact_mounted_with_crash_after};
    use b2fs::container::{Container, open};

    let t = "store_b2d_whole_file_rewrites_of_its_files_leave_no_key_behind_at_every_step";
    let py = or_skip!(crate::support::python(t));
    let (_dir, src) = crate::support::temp_path("empty.b2d");
    crate::support::oracle(&py, &[&"scripts/oracle/stores.py", &"emptygen", &src]);
    let keys = |p: &Path| -> Value {
        let out = run_python(
            &py,
            &["scripts/oracle/stores.py", "keys", p.to_str().unwrap()],
        );
        serde_json::from_slice(&out).expect("keys JSON")
    };
    let first = keys(&src);
    assert_eq!(
        first["keys"],
        serde_json::json!(["/empty", "/g", "/g/y", "/x"])
    );
    let files = crate::support::files_under(&src);
    let array = |p: &Path| match open(p).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => panic!("{}: a table", p.display()),
    };
    let attrs = serde_json::json!({"units": "kg"});
    // After a crash at `steps` of the attribute commit (`done`: it completed): python-blosc2's
    // keys and the store's files as before, `/empty`'s attributes old or new.
    let attributes_old_or_new = |p: &Path, steps: usize, done: bool| {
        let now = keys(p);
        assert_eq!(now["keys"], first["keys"], "step {steps}");
        assert_eq!(
            crate::support::files_under(p),
            files,
            "step {steps}: a file added to the store"
        );
        let v = &now["vlmeta"]["/empty"];
        assert!(
            *v == first["vlmeta"]["/empty"] || *v == attrs,
            "step {steps}: {v}"
        );
        if done {
            assert_eq!(*v, attrs, "a completed commit");
        }
    };
    every_commit_step("empty.b2f attributes", 3, |steps| {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("empty.b2d");
        crate::support::copy_all(&src, &p);
        let a = array(&p.join("empty.b2f"));
        assert_eq!(a.nchunks(), 0);
        let edit = Edit {
            attrs: Some(attrs.clone()),
            ..Edit::default()
        };
        let done = commit_with_crash_after(&a, &edit, steps).unwrap();
        drop(a);
        attributes_old_or_new(&p, steps, done);
        done
    });
    // The same commit through the tree (a mount of the file itself): `__attrs__` written,
    // the fsync's commit stopped after each step.
    every_commit_step("empty.b2f through the tree", 3, |steps| {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("empty.b2d");
        crate::support::copy_all(&src, &p);
        let t = crate::support::rw_tree(&p.join("empty.b2f"));
        let f = crate::support::tree_ino(&t, "__attrs__");
        let fh = t.open(f, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        t.write(f, fh, 0, br#"{"units": "kg"}"#).unwrap();
        t.simulate_crash_after(steps);
        let done = t.fsync(f, fh).is_ok();
        drop(t);
        attributes_old_or_new(&p, steps, done);
        done
    });
    every_commit_step("x.b2nd compaction", 3, |steps| {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("empty.b2d");
        crate::support::copy_all(&src, &p);
        let a = array(&p.join("x.b2nd"));
        let chunks = |a: &b2fs::container::Array| -> Vec<Vec<u8>> {
            (0..a.nchunks())
                .map(|i| a.chunk_bytes(i).unwrap().to_vec())
                .collect()
        };
        let before = chunks(&a);
        let done = compact_mounted_with_crash_after(&a, steps).unwrap();
        drop(a);
        assert_eq!(
            crate::support::files_under(&p),
            files,
            "step {steps}: a file added to the store"
        );
        assert_eq!(keys(&p)["keys"], first["keys"], "step {steps}");
        assert!(
            chunks(&array(&p.join("x.b2nd"))) == before,
            "step {steps}: the chunks"
        );
        done
    });
}
