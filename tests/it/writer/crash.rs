//! A crash after every step of a commit (frames, sparse frames, bcolz): b2fs and the reference
//! library then see entirely the old or the new source.

use super::*;

/// Runs `edit` on fresh copies of `rel` with a crash after every step count until the commit
/// completes; after each, b2fs and the reference library see entirely the old or the new
/// source (bcolz: every chunk old or new). Returns the number of steps of the full commit.
fn crash_case(rel: &str, make: &dyn Fn(&Array) -> Edit) -> usize {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = fixture_copy(&tmp, rel);
    let a = open_array(&pristine);
    let bcolz = a.kind() == SourceKind::BcolzCarray;
    let old = chunks_of(&a);
    let edit = make(&a);
    // The new content: a full commit on one more copy.
    let done = tmp.path().join("done");
    let full = done.join(pristine.file_name().expect("name"));
    copy_tree(&pristine, &full);
    commit(&open_array(&full), &edit).expect("full commit");
    let new = chunks_of(&open_array(&full));
    assert_ne!(old, new);
    let olddir = tmp.path().join("old");
    let newdir = tmp.path().join("new");
    write_expect(&olddir, &old, None);
    write_expect(&newdir, &new, None);
    std::fs::write(tmp.path().join("old.bin"), old.concat()).expect("write");
    std::fs::write(tmp.path().join("new.bin"), new.concat()).expect("write");
    let mut lines = String::new();
    let mut k = 0;
    loop {
        let dir = tmp.path().join(format!("k{k}"));
        let copy = dir.join(pristine.file_name().expect("name"));
        copy_tree(&pristine, &copy);
        let completed = commit_with_crash_after(&open_array(&copy), &edit, k)
            .unwrap_or_else(|e| panic!("{rel} k={k}: {e}"));
        let got = chunks_of(&open_array(&copy));
        if bcolz {
            let cb = a.chunksize();
            let (o, n, g) = (old.concat(), new.concat(), got.concat());
            assert!(g.len() == o.len() || g.len() == n.len(), "{rel} k={k}");
            for (c, seg) in g.chunks(cb).enumerate() {
                let at = c * cb;
                let is = |v: &[u8]| v.get(at..at + seg.len()) == Some(seg);
                assert!(
                    is(&o) || is(&n),
                    "{rel} k={k}: chunk {c} neither old nor new"
                );
            }
            lines += &format!(
                "{} {} {} {cb}\n",
                copy.display(),
                tmp.path().join("old.bin").display(),
                tmp.path().join("new.bin").display()
            );
        } else {
            assert!(got == old || got == new, "{rel} k={k}: neither old nor new");
            if copy.is_dir() {
                sparse_leftovers_go(&copy, &format!("{rel} k={k}"));
            }
            lines += &format!(
                "{} {} {}\n",
                copy.display(),
                olddir.display(),
                newdir.display()
            );
        }
        if completed {
            assert_eq!(got, new, "{rel}: completed commit");
            break;
        }
        k += 1;
    }
    eprintln!("{rel}: crash-tested after each of {k} steps");
    if let Some(py) = python(&format!("writer crash {rel}")) {
        let list = tmp.path().join("list.txt");
        std::fs::write(&list, lines).expect("write");
        let mode = if bcolz { "bcolzcrash" } else { "crash" };
        check_py(&py, &[mode, list.to_str().expect("utf8")]);
    }
    k
}

/// After a crash of a sparse-frame commit: the next commit (of the attributes, here on a
/// copy) leaves only the chunk files its index references; a crash leaves none behind for good.
fn sparse_leftovers_go(src: &Path, what: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let copy = tmp.path().join("s.b2frame");
    copy_tree(src, &copy);
    let a = open_array(&copy);
    let edit = Edit {
        attrs: Some(json!({"after": "crash"})),
        ..Edit::default()
    };
    commit(&a, &edit).expect("commit after a crash");
    drop(a);
    let a = open_array(&copy);
    let mut want: Vec<String> = (0..a.nchunks())
        .filter_map(|i| a.frame_index_entry(i))
        .filter(|&e| e >= 0)
        .map(|e| format!("{e:08X}.chunk"))
        .collect();
    want.sort();
    want.dedup();
    let mut have: Vec<String> = std::fs::read_dir(&copy)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".chunk"))
        .collect();
    have.sort();
    assert_eq!(have, want, "{what}: chunk files after the next commit");
}

fn crash_edit(a: &Array) -> Edit {
    let cs = a.chunksize().max(a.chunk_nbytes(0).unwrap_or(1));
    Edit {
        updates: vec![(
            0,
            b2fs::container::write::Chunk::from(encode(a, &pattern(cs, 29))),
        )],
        appends: vec![b2fs::container::write::Chunk::from(encode(
            a,
            &pattern(cs, 31),
        ))],
        truncate: None,
        attrs: Some(json!({"crash": "test"})),
        ..Edit::default()
    }
}

#[test]
fn writer_crash_at_every_step_cframe() {
    let steps = crash_case("frames/schunk_lz4.b2frame", &crash_edit);
    assert!(steps >= 6, "{steps} steps");
    crash_case("frames/b2nd_1d_f8.b2nd", &crash_edit);
    crash_case("frames/b2nd_1d_f8.b2nd", &|_: &Array| Edit {
        truncate: Some(2),
        ..Edit::default()
    });
}

#[test]
fn writer_crash_at_every_step_sframe() {
    crash_case("frames/schunk_sparse.b2frame", &crash_edit);
    crash_case("frames/schunk_sparse.b2frame", &|_: &Array| Edit {
        truncate: Some(2),
        ..Edit::default()
    });
}

#[test]
fn writer_crash_at_every_step_bcolz() {
    crash_case("bcolz/carray_i4_leftover", &|a: &Array| {
        let full2: Vec<u8> = (20..30i32).flat_map(|v| v.to_le_bytes()).collect();
        let app: Vec<u8> = (30..40i32).flat_map(|v| v.to_le_bytes()).collect();
        Edit {
            updates: vec![(2, b2fs::container::write::Chunk::from(encode(a, &full2)))],
            appends: vec![b2fs::container::write::Chunk::from(encode(a, &app))],
            truncate: None,
            attrs: None,
            ..Edit::default()
        }
    });
    crash_case("bcolz/carray_i4_leftover", &|_: &Array| Edit {
        truncate: Some(1),
        ..Edit::default()
    });
}
