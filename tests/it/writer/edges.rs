//! Sources in unusual states: variable-mode frames with special offsets, chunk parameters
//! taken from existing chunks, bcolz without attrs, empty frames, frames with a junk tail.

use super::*;

#[test]
fn writer_variable_mode_materialises_special_offsets() {
    frame_case(
        "frames/schunk_fill_special.b2frame",
        |a| {
            // Three zero chunks stored as special offsets, the last one partial.
            assert_eq!(a.frame_index_entry(0), Some((0x81u64 << 56) as i64));
            let mut want = chunks_of(a);
            let app = pattern(8000, 41);
            want.push(app.clone());
            let edit = Edit {
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &app))],
                ..Edit::default()
            };
            (edit, want)
        },
        None,
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_fill_special.b2frame");
    let a = open_array(&path);
    commit(
        &a,
        &Edit {
            appends: vec![b2fs::container::write::Chunk::from(encode(
                &a,
                &vec![0u8; 8000],
            ))],
            ..Edit::default()
        },
    )
    .expect("commit");
    let b = open_array(&path);
    assert_eq!(b.frame_info().expect("frame").chunksize, 0);
    for i in 0..b.nchunks() {
        let e = b.frame_index_entry(i).expect("entry");
        assert!(e >= 0, "chunk {i}: no special offsets in variable mode");
        // Neither a special offset nor a stored 32-byte special chunk: C-Blosc2 reads
        // neither in a variable-size frame.
        assert_eq!(b.chunk_kind(i).expect("kind"), ChunkKind::Regular);
    }
    let want = chunks_of(&b);
    assert!(want.iter().all(|c| c.iter().all(|&x| x == 0)));
    if let Some(py) = python("writer_variable_mode_zeros") {
        let exp = tmp.path().join("expect");
        write_expect(&exp, &want, None);
        let p = path.to_str().expect("utf8");
        check_py(&py, &["frame", p, exp.to_str().expect("utf8"), "mutate"]);
    }
}

#[test]
fn writer_chunk_cparams_follow_existing_chunks() {
    let a = open_array(&data_dir().join("frames/b2nd_2d_f8_lz4.b2nd"));
    let p = chunk_cparams(&a).expect("cparams");
    assert_eq!(p.format, codec::ChunkFormat::Blosc2);
    assert_eq!(p.codec, codec::Codec::Lz4);
    assert_eq!(p.clevel, 1);
    assert_eq!(p.typesize, 8);
    assert_eq!(
        p.blocksize,
        codec::Blocksize::Explicit(8 * 40 * 8),
        "b2nd blocks are the blockshape"
    );
    let a = open_array(&data_dir().join("frames/schunk_zstd.b2frame"));
    let p = chunk_cparams(&a).expect("cparams");
    assert_eq!(
        (p.codec, p.clevel, p.blocksize),
        (codec::Codec::Zstd, 5, codec::Blocksize::Auto)
    );
    let a = open_array(&data_dir().join("bcolz/carray_lz4hc_s2"));
    let p = chunk_cparams(&a).expect("cparams");
    assert_eq!(p.format, codec::ChunkFormat::Blosc1);
    assert_eq!(
        p.codec,
        codec::Codec::Lz4Hc,
        "from storage: the Blosc1 header says lz4"
    );
    assert_eq!(p.filters[5], codec::filter_id::BITSHUFFLE);
}

#[test]
fn writer_bcolz_without_attrs_gets_one() {
    // bcolz-zipline cannot open a carray without `__attrs__`: a commit creates it.
    bcolz_case(
        "refuse/bcolz_no_attrs",
        |a| {
            let mut want = chunks_of(a);
            let new0 = pattern(want[0].len(), 43);
            want[0] = new0.clone();
            let edit = Edit {
                updates: vec![(0, b2fs::container::write::Chunk::from(encode(a, &new0)))],
                ..Edit::default()
            };
            (edit, want.concat())
        },
        false,
    );
}

#[test]
fn writer_empty_frame_first_appends_set_chunksize() {
    frame_case(
        "frames/schunk_empty.b2frame",
        |a| {
            assert_eq!(a.frame_info().expect("frame").chunksize, -1);
            let want = vec![pattern(4000, 47), pattern(4000, 53), pattern(1200, 59)];
            let edit = Edit {
                appends: want.iter().map(|c| encode(a, c).into()).collect(),
                ..Edit::default()
            };
            (edit, want)
        },
        None,
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "frames/schunk_empty.b2frame");
    let a = open_array(&path);
    commit(
        &a,
        &Edit {
            appends: vec![
                b2fs::container::write::Chunk::from(encode(&a, &pattern(4000, 1))),
                b2fs::container::write::Chunk::from(encode(&a, &pattern(100, 2))),
            ],
            ..Edit::default()
        },
    )
    .expect("commit");
    let info = open_array(&path).frame_info().expect("frame").clone();
    assert_eq!(
        (info.chunksize, info.nbytes, info.general_flags),
        (4000, 4100, 0x12)
    );
}

#[test]
fn writer_frame_with_junk_tail_commits_over_it() {
    frame_case(
        "frames/schunk_junk_tail.b2frame",
        |a| {
            let info = a.frame_info().expect("frame");
            let file = std::fs::metadata(a.path()).expect("meta").len();
            assert!(
                file > info.frame_len,
                "the fixture has bytes after frame_len"
            );
            let mut want = chunks_of(a);
            let n = a.chunk_nbytes(0).expect("n");
            want[0] = pattern(n, 61);
            let edit = Edit {
                updates: vec![(0, b2fs::container::write::Chunk::from(encode(a, &want[0])))],
                attrs: Some(json!({"tail": true})),
                ..Edit::default()
            };
            (edit, want)
        },
        Some(json!({"keys": ["tail"], "values": {"tail": true}})),
    );
}
