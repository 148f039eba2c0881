//! Edits that are refused leave every byte as it was; read-only sources, the b2lock counter,
//! `compact` and its refusal of a locked source.

use super::*;

/// `edit` on a copy of `rel` is refused and leaves every byte as it was.
fn refused(rel: &str, make: impl FnOnce(&Array) -> Edit, why: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, rel);
    let a = open_array(&path);
    let before = tree_hash(&path);
    let edit = make(&a);
    let err = commit(&a, &edit).expect_err("refused");
    assert!(
        matches!(err, container::ContainerError::Refused { .. }),
        "{rel}: refused by rule: {err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains(why), "{rel}: {msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "{rel}: names the source: {msg}"
    );
    assert_eq!(tree_hash(&path), before, "{rel}: bytes unchanged");
}

#[test]
fn writer_refusals_leave_source_unchanged() {
    refused(
        "frames/schunk_vlmeta16.b2frame",
        |a| {
            let mut attrs = a.attrs().clone();
            attrs
                .as_object_mut()
                .expect("object")
                .insert("key16".into(), json!(1));
            Edit {
                attrs: Some(attrs),
                ..Edit::default()
            }
        },
        "17 vlmetalayers",
    );
    refused(
        "frames/b2nd_2d_f8_lz4.b2nd",
        |a| Edit {
            appends: vec![b2fs::container::write::Chunk::from(encode(
                a,
                &pattern(a.chunksize(), 1),
            ))],
            ..Edit::default()
        },
        "2-dimensional",
    );
    refused(
        "frames/b2nd_1d_f8.b2nd",
        |a| update(1, encode(a, &pattern(a.chunksize() - 8, 1))),
        "every chunk of this array has",
    );
    refused(
        "frames/schunk_lz4.b2frame",
        |a| update(0, encode(a, &pattern(1000, 1))),
        "the chunk it replaces has 64000",
    );
    refused(
        "bcolz/carray_i4_leftover",
        |a| Edit {
            appends: vec![b2fs::container::write::Chunk::from(encode(
                a,
                &pattern(40, 1),
            ))],
            ..Edit::default()
        },
        "partial chunk can only be the last",
    );
    refused(
        "bcolz/carray_i4_leftover",
        |a| {
            // A Blosc2 chunk in a bcolz carray.
            let p = codec::CParams::blosc2(codec::Codec::Lz4, 5, 4, 1);
            let _ = a;
            Edit {
                updates: vec![(
                    0,
                    b2fs::container::write::Chunk::from(
                        codec::compress(&pattern(40, 1), &p).expect("c"),
                    ),
                )],
                ..Edit::default()
            }
        },
        "Blosc1",
    );
    refused(
        "frames/schunk_lz4.b2frame",
        |a| update(5, encode(a, &pattern(64000, 1))),
        "updating chunk 5",
    );
    refused(
        "frames/schunk_lz4.b2frame",
        |_| Edit {
            truncate: Some(0),
            ..Edit::default()
        },
        "0 chunks",
    );
}

#[test]
fn writer_read_only_source_is_not_writable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_lz4.b2frame");
    let mut perm = std::fs::metadata(&path).expect("meta").permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(&path, perm).expect("chmod");
    let a = open_array(&path);
    let why = check_writable(&a).expect("read-only").to_string();
    assert!(why.contains("read-only"), "{why}");
    assert!(commit(&a, &Edit::default()).is_err());
}

#[test]
fn writer_b2lock_counter_is_bumped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_lz4.b2frame");
    let lock = tmp.path().join("schunk_lz4.b2frame.b2lock");
    std::fs::write(&lock, [0u8; 16]).expect("sidecar");
    let a = open_array(&path);
    commit(
        &a,
        &Edit {
            attrs: Some(json!({"a": 1})),
            ..Edit::default()
        },
    )
    .expect("commit");
    let b = std::fs::read(&lock).expect("read");
    assert_eq!(u64::from_ne_bytes(b[8..16].try_into().expect("8")), 1);
}

#[test]
fn writer_compact_removes_dead_space() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_deadspace.b2frame");
    let a = open_array(&path);
    let want = chunks_of(&a);
    let before = std::fs::metadata(&path).expect("meta").len();
    let mut calls = Vec::new();
    compact(&path, &mut |d, t| calls.push((d, t))).expect("compact");
    assert_eq!(calls.last(), Some(&(want.len(), want.len())));
    let after = std::fs::metadata(&path).expect("meta").len();
    assert!(after < before, "{after} < {before}");
    let b = open_array(&path);
    assert_eq!(chunks_of(&b), want);
    assert_eq!(b.attrs(), a.attrs());
    if let Some(py) = python("writer_compact") {
        let exp = tmp.path().join("expect");
        write_expect(&exp, &want, None);
        let p = path.to_str().expect("utf8");
        check_py(&py, &["frame", p, exp.to_str().expect("utf8"), "mutate"]);
    }
}

#[test]
fn writer_compact_refuses_a_locked_source() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_deadspace.b2frame");
    let before = std::fs::read(&path).expect("read");
    let lock = lock_source_for_mount(&path).expect("lock");
    // A second mount shares the lock.
    let lock2 = lock_source_for_mount(&path).expect("shared");
    let err = compact(&path, &mut |_, _| {}).expect_err("mounted");
    assert!(
        matches!(err, container::ContainerError::Busy { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("mounted by a running b2fs"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), before);
    drop((lock, lock2));
    compact(&path, &mut |_, _| {}).expect("compact once unlocked");
    assert!(std::fs::read(&path).expect("read").len() < before.len());
}

/// [`Edit::shape0`] sets the first dimension of a b2nd/caterva array; a source whose length
/// is what its chunks hold (a plain frame, a bcolz carray or ctable column) refuses it,
/// alone or with other changes, and keeps every byte (a bcolz commit used to ignore it: the
/// edit returned `Ok` and changed nothing, or only its other parts).
#[test]
fn writer_shape0_is_refused_by_sources_without_a_b2nd_shape() {
    let why = "setting the first dimension";
    refused(
        "bcolz/carray_i4_leftover",
        |_| Edit {
            shape0: Some(3),
            ..Edit::default()
        },
        why,
    );
    refused(
        "bcolz/carray_2d_f8",
        |a| Edit {
            shape0: Some(1),
            ..update(0, encode(a, &pattern(a.chunksize(), 1)))
        },
        why,
    );
    for rel in ["frames/schunk_lz4.b2frame", "bcolz/carray_f8"] {
        refused(
            rel,
            |a| Edit {
                shape0: Some(a.geometry().shape[0] + 1),
                attrs: Some(json!({"a": 1})),
                ..Edit::default()
            },
            why,
        );
    }
    // A b2nd python-blosc2 made empty, with chunks (0,): no grid holds another length.
    refused(
        "frames/b2nd_len0.b2nd",
        |_| Edit {
            shape0: Some(10),
            ..Edit::default()
        },
        "the chunk shape [0] has a zero length",
    );
    // A ctable column, committed through the table.
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "bcolz/ctable_3cols");
    let before = tree_hash(&path);
    let Container::Table(t) = container::open(&path).expect("open") else {
        panic!("not a ctable");
    };
    let edit = Edit {
        shape0: Some(1),
        ..Edit::default()
    };
    let err = commit_column(&t, 0, &edit).expect_err("refused");
    assert!(
        matches!(err, container::ContainerError::Refused { .. }) && err.to_string().contains(why),
        "{err:?}"
    );
    assert_eq!(tree_hash(&path), before, "bytes unchanged");
}
