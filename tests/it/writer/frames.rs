//! Commits to frames (contiguous and sparse, b2nd 1-D and 2-D, caterva): updates, appends,
//! truncation, zero chunks, attributes; b2fs and python-blosc2 read the new chunks, and
//! python-blosc2 then mutates the frame.

use super::*;
use b2fs::container::write::Chunk;

#[test]
fn writer_cframe_update_append_after_partial_and_attrs() {
    frame_case(
        "frames/schunk_lz4.b2frame",
        |a| {
            assert_eq!(a.chunk_nbytes(2).expect("n"), 800, "last chunk is partial");
            let mut want = chunks_of(a);
            let new0 = pattern(64000, 7);
            let app = pattern(64000, 9);
            want[0] = new0.clone();
            want.push(app.clone());
            let edit = Edit {
                updates: vec![(0, b2fs::container::write::Chunk::from(encode(a, &new0)))],
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &app))],
                truncate: None,
                attrs: Some(json!({"made_by": "b2fs gen_fixtures", "unit": "m", "n": [1, 2]})),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({
            "keys": ["made_by", "unit", "n"],
            "values": {"made_by": "b2fs gen_fixtures", "unit": "m", "n": [1, 2]}
        })),
    );
}

#[test]
fn writer_cframe_append_switches_to_variable_mode() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_lz4.b2frame");
    let a = open_array(&path);
    let edit = Edit {
        appends: vec![b2fs::container::write::Chunk::from(encode(
            &a,
            &pattern(1000, 3),
        ))],
        ..Edit::default()
    };
    commit(&a, &edit).expect("commit");
    let b = open_array(&path);
    let info = b.frame_info().expect("frame");
    assert_eq!(info.chunksize, 0);
    assert_eq!(info.general_flags, 0x53);
    assert_eq!(info.header_len, a.frame_info().expect("frame").header_len);
    assert_eq!(b.nbytes(), a.nbytes() + 1000);
}

#[test]
fn writer_cframe_truncate_and_attrs_delete() {
    frame_case(
        "frames/schunk_zstd.b2frame",
        |a| {
            let mut want = chunks_of(a);
            want.truncate(a.nchunks() - 1);
            let edit = Edit {
                truncate: Some(a.nchunks() - 1),
                attrs: Some(json!({})),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({"keys": [], "values": {}})),
    );
}

#[test]
fn writer_sframe_update_append_attrs() {
    frame_case(
        "frames/schunk_sparse.b2frame",
        |a| {
            assert_eq!(a.kind(), SourceKind::Sframe);
            let mut want = chunks_of(a);
            let new1 = pattern(4000, 5);
            let app = pattern(4000, 11);
            want[1] = new1.clone();
            want.push(app.clone());
            let edit = Edit {
                updates: vec![(1, b2fs::container::write::Chunk::from(encode(a, &new1)))],
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &app))],
                truncate: None,
                attrs: Some(json!({"k": "v"})),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({"keys": ["k"], "values": {"k": "v"}})),
    );
}

#[test]
fn writer_sframe_truncate_removes_chunk_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    let a = open_array(&path);
    let mut want = chunks_of(&a);
    want.truncate(3);
    commit(
        &a,
        &Edit {
            truncate: Some(3),
            ..Edit::default()
        },
    )
    .expect("commit");
    // Removed once no version opened before the commit is open (`a` still is).
    assert!(path.join("00000003.chunk").exists());
    drop(a);
    assert!(!path.join("00000003.chunk").exists());
    assert_eq!(chunks_of(&open_array(&path)), want);
    if let Some(py) = python("writer_sframe_truncate") {
        let exp = tmp.path().join("expect");
        write_expect(&exp, &want, None);
        let p = path.to_str().expect("utf8");
        check_py(&py, &["frame", p, exp.to_str().expect("utf8"), "mutate"]);
    }
}

/// A sparse frame's header cbytes is the bytes of the chunk files its entries name (one file
/// per regular entry), as python-blosc2 writes it: kept so through commits that replace,
/// zero (a special entry: no file), append and cut chunks, counted from the old figure less
/// the files dropped; an old figure below those files is not trusted (every file counted).
#[test]
fn writer_sframe_header_cbytes_counts_every_live_chunk_file() {
    fn files_of(path: &Path) -> u64 {
        let a = open_array(path);
        (0..a.nchunks())
            .filter_map(|i| a.frame_index_entry(i).filter(|&e| e >= 0))
            .map(|e| {
                std::fs::metadata(path.join(format!("{e:08X}.chunk")))
                    .expect("chunk file")
                    .len()
            })
            .sum()
    }
    let header = |path: &Path| open_array(path).frame_info().expect("frame").cbytes;
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_sparse.b2frame");
    assert_eq!(header(&path), files_of(&path), "python-blosc2's own count");
    let a = open_array(&path);
    let cs = a.chunksize();
    let edit = Edit {
        updates: vec![
            (0, Chunk::from(encode(&a, &vec![0u8; cs]))),
            (1, Chunk::from(encode(&a, &pattern(cs, 5)))),
        ],
        appends: vec![Chunk::from(encode(&a, &pattern(cs, 11)))],
        ..Edit::default()
    };
    commit(&a, &edit).expect("commit");
    assert_eq!(header(&path), files_of(&path), "replaced, zeroed, appended");
    let a = open_array(&path);
    let n = a.nchunks();
    let cut = Edit {
        truncate: Some(n - 2),
        updates: vec![(2, Chunk::from(encode(&a, &pattern(cs, 3))))],
        ..Edit::default()
    };
    commit(&a, &cut).expect("commit");
    assert_eq!(header(&path), files_of(&path), "cut");
    // A header counting less than the files dropped (not written by that rule).
    let index = path.join("chunks.b2frame");
    let mut bytes = std::fs::read(&index).expect("read");
    bytes[39..47].copy_from_slice(&0u64.to_be_bytes());
    std::fs::write(&index, &bytes).expect("write");
    let a = open_array(&path);
    commit(&a, &update(1, encode(&a, &pattern(cs, 9)))).expect("commit");
    assert_eq!(header(&path), files_of(&path), "counted again");
    // A header counting more than its kept files can hold (up to i64::MAX: the frame opens):
    // counted again, not carried into a figure past i64 that no reader opens.
    for wrong in [i64::MAX as u64, u64::from(u32::MAX) * 1000] {
        let mut bytes = std::fs::read(&index).expect("read");
        bytes[39..47].copy_from_slice(&wrong.to_be_bytes());
        std::fs::write(&index, &bytes).expect("write");
        let a = open_array(&path);
        let edit = Edit {
            appends: vec![Chunk::from(encode(&a, &pattern(cs, 11)))],
            ..Edit::default()
        };
        commit(&a, &edit).expect("commit");
        assert_eq!(header(&path), files_of(&path), "{wrong}: counted again");
    }
}

#[test]
fn writer_b2nd_1d_update_zeros_append_attrs() {
    frame_case(
        "frames/b2nd_attrs.b2nd",
        |a| {
            let cs = a.chunksize();
            let mut want = chunks_of(a);
            let new1 = pattern(cs, 13);
            let zeros = vec![0u8; cs];
            let app = pattern(cs, 17);
            want[1] = new1.clone();
            want[2] = zeros.clone();
            want.push(app.clone());
            let z = encode(a, &zeros);
            assert_eq!(z.len(), 32, "an all-zero chunk encodes as a special chunk");
            let mut attrs = a.attrs().clone();
            let m = attrs.as_object_mut().expect("object");
            m.insert("int".into(), json!(43));
            m.shift_remove("neg");
            m.insert("added".into(), json!({"x": [1.5, "y"]}));
            let edit = Edit {
                updates: vec![
                    (1, b2fs::container::write::Chunk::from(encode(a, &new1))),
                    (2, b2fs::container::write::Chunk::from(z)),
                ],
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &app))],
                truncate: None,
                attrs: Some(attrs),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({
            "keys": ["str", "int", "big", "float", "bool", "none", "list", "dict", "bytes",
                     "tuple", "complex", "set", "ndarray", "ndarray2d", "added"],
            "values": {"str": "K\u{e9}lvin", "int": 43, "added": {"x": [1.5, "y"]}}
        })),
    );
}

#[test]
fn writer_b2nd_1d_shape_follows_chunks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/b2nd_1d_f8.b2nd");
    let a = open_array(&path);
    let app = encode(&a, &pattern(a.chunksize(), 1));
    commit(
        &a,
        &Edit {
            appends: vec![b2fs::container::write::Chunk::from(app)],
            ..Edit::default()
        },
    )
    .expect("append");
    let b = open_array(&path);
    assert_eq!(b.geometry().shape, vec![1500]);
    assert_eq!(b.frame_index_entry(4).map(|e| e >= 0), Some(true));
    commit(
        &b,
        &Edit {
            truncate: Some(2),
            ..Edit::default()
        },
    )
    .expect("truncate");
    let c = open_array(&path);
    assert_eq!(c.geometry().shape, vec![600]);
    assert_eq!(c.nchunks(), 2);
    if let Some(py) = python("writer_b2nd_1d_shape") {
        let exp = tmp.path().join("expect");
        write_expect(&exp, &chunks_of(&c), None);
        let p = path.to_str().expect("utf8");
        check_py(&py, &["frame", p, exp.to_str().expect("utf8"), "mutate"]);
    }
}

#[test]
fn writer_b2nd_zero_update_is_special_offset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/b2nd_1d_f8.b2nd");
    let a = open_array(&path);
    let z = encode(&a, &vec![0u8; a.chunksize()]);
    commit(
        &a,
        &Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(z))],
            ..Edit::default()
        },
    )
    .expect("commit");
    let b = open_array(&path);
    assert_eq!(b.frame_index_entry(0), Some((0x81u64 << 56) as i64));
    assert_eq!(b.chunk_kind(0).expect("kind"), ChunkKind::Zeros);
}

/// Frame `rel` with chunk `index` replaced by a pattern of `seed`: the other chunks kept.
fn update_case(rel: &str, index: usize, seed: u32) {
    frame_case(
        rel,
        |a| {
            let mut want = chunks_of(a);
            let new = pattern(a.chunksize(), seed);
            want[index] = new.clone();
            let edit = Edit {
                updates: vec![(index, b2fs::container::write::Chunk::from(encode(a, &new)))],
                ..Edit::default()
            };
            (edit, want)
        },
        None,
    );
}

#[test]
fn writer_b2nd_2d_update() {
    update_case("frames/b2nd_2d_f8_lz4.b2nd", 1, 19);
}

#[test]
fn writer_caterva_cframe_update() {
    update_case("frames/caterva_cframe.caterva", 2, 23);
}
