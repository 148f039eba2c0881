//! Frames built by hand (`support::frames`): every kind of index entry reads back (special
//! chunks of variable-size frames too), the open path reads metadata only (a million-chunk
//! frame, every fixture), arrays are Send and Sync, and `changed_on_disk` sees rewrites (of
//! hand-built frames and of fixture copies).

use super::*;

#[test]
fn container_hand_built_frame_opens_and_reads() {
    let (f, data) = small_frame();
    let dir = tempfile::tempdir().unwrap();
    // Detection by content: any name works.
    let p = dir.path().join("anything.txt");
    std::fs::write(&p, &f).unwrap();
    let a = open_array(&p);
    assert_eq!(a.kind(), SourceKind::Cframe);
    assert_eq!(a.nchunks(), 4);
    assert_eq!(a.geometry().shape, [35]);
    assert_eq!(a.metalayers()[0].json, json!([1, 2]));
    // A metalayer that is not one msgpack value is kept as raw bytes.
    assert_eq!(a.metalayers()[1].json, json!({"__raw__": "kgE="}));
    assert_eq!(a.attrs(), &json!({"unit": "m", "n": 42}));
    assert_eq!(a.chunk_kind(1).unwrap(), ChunkKind::Zeros);
    assert_eq!(a.chunk_nbytes(3).unwrap(), 20);
    for (i, want) in data.iter().enumerate() {
        let d = codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap();
        if i == 1 {
            assert_eq!(d, vec![0u8; 40]);
        } else {
            assert_eq!(&d, want);
        }
    }
    // Junk after frame_len is ignored; a frame embedded at an offset opens at that offset.
    let mut longer = f.clone();
    longer.extend([0xAB; 100]);
    std::fs::write(&p, &longer).unwrap();
    assert_eq!(open_array(&p).nchunks(), 4);
    let mut embedded = vec![0x55u8; 1000];
    embedded.extend(&f);
    embedded.extend([0u8; 7]);
    std::fs::write(&p, &embedded).unwrap();
    let a = Array::open_frame_at(&p, 1000).unwrap();
    assert_eq!(a.frame_info().unwrap().start, 1000);
    assert_eq!(
        codec::decompress(&a.chunk_bytes(2).unwrap()).unwrap(),
        data[2]
    );
    assert!(container::open(&p).is_err());
}

#[test]
fn container_array_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Array>();
    assert_send_sync::<Container>();
    // And chunks can be read from many threads at once.
    let (f, data) = small_frame();
    let (_dir, p) = crate::support::temp_path("f.b2frame");
    std::fs::write(&p, &f).unwrap();
    let a = Arc::new(open_array(&p));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let a = Arc::clone(&a);
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let d = codec::decompress(&a.chunk_bytes(3).unwrap()).unwrap();
                    assert_eq!(d.len(), 20);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        codec::decompress(&a.chunk_bytes(0).unwrap()).unwrap(),
        data[0]
    );
}

/// 1,000,000 chunks: one real memcpyed chunk that every other entry points at, interleaved
/// with special zero entries. Opening must take milliseconds and read only the header, the
/// index and the trailer.
#[test]
fn container_million_chunk_frame_opens_without_reading_chunks() {
    const N: usize = 1_000_000;
    let chunk = memcpyed(&[7u8; 16], 4);
    let index: Vec<i64> = (0..N).map(|i| if i % 2 == 0 { 0 } else { ZEROS }).collect();
    let f = build_frame(
        4,
        16,
        (N * 16) as i64,
        &chunk,
        &index,
        &[],
        &[("k", vec![0x01])],
    );
    let (_dir, p) = crate::support::temp_path("million.b2frame");
    std::fs::write(&p, &f).unwrap();

    let t = std::time::Instant::now();
    let a = open_array(&p);
    let elapsed = t.elapsed();
    assert_eq!(a.nchunks(), N);
    let info = a.frame_info().unwrap();
    let index_region = info.index_len;
    // Exactly: the header (prefix first), the 23-byte tail, the index, the trailer.
    let expected = 23 + info.header_len + index_region + info.trailer_len;
    // Plus the 32-byte magic sniff of `open`.
    assert_eq!(
        a.io_stats().bytes(),
        expected + 32,
        "bytes read during open"
    );
    assert!(a.io_stats().reads() <= 6, "{} reads", a.io_stats().reads());
    eprintln!("open of {N} chunks: {elapsed:?}");
    assert!(elapsed.as_secs_f64() < 2.0, "open took {elapsed:?}");
    // Sizes and kinds come from the index without I/O.
    let before = a.io_stats().bytes();
    assert_eq!(a.chunk_nbytes(N - 1).unwrap(), 16);
    assert_eq!(a.chunk_kind(N - 1).unwrap(), ChunkKind::Zeros);
    assert_eq!(a.io_stats().bytes(), before);
    assert_eq!(
        codec::decompress(&a.chunk_bytes(N - 2).unwrap()).unwrap(),
        [7u8; 16]
    );
}

/// `fill_special` frames store the index as one repeated-value special chunk; a huge nchunks
/// then costs no memory.
#[test]
fn container_repeated_value_index_is_not_expanded() {
    // 200,000,000 zero chunks of 8 bytes in a ~170-byte file.
    let n: i64 = 200_000_000;
    let mut f = build_frame(8, 8, n * 8, &[], &[0], &[], &[]);
    // Replace the memcpyed 1-entry index (40 bytes) by the 40-byte fill_special chunk.
    let hl = 97;
    let idx = &mut f[hl..hl + 40];
    let nb = (n * 8) as u32;
    idx[..32].copy_from_slice(&[0u8; 32]);
    idx[0..4].copy_from_slice(&[5, 1, 5, 8]);
    idx[4..8].copy_from_slice(&nb.to_le_bytes());
    idx[8..12].copy_from_slice(&nb.to_le_bytes());
    idx[12..16].copy_from_slice(&40u32.to_le_bytes());
    idx[31] = 0x30;
    idx[32..40].copy_from_slice(&ZEROS.to_le_bytes());
    let (_dir, p) = crate::support::temp_path("zeros.b2frame");
    std::fs::write(&p, &f).unwrap();
    let a = open_array(&p);
    assert_eq!(a.nchunks(), n as usize);
    assert_eq!(a.chunk_kind(123_456_789).unwrap(), ChunkKind::Zeros);
    let c = a.chunk_bytes(n as usize - 1).unwrap();
    assert_eq!(codec::decompress(&c).unwrap(), [0u8; 8]);
}

// ---------------------------------------------------------------------------------------------
// Open reads metadata only (every fixture)

/// For every contiguous and sparse frame fixture, `open` reads exactly: the 32-byte magic
/// sniff (cframes), the header, the 23-byte trailer tail, the index region and the trailer;
/// for bcolz only the JSON metadata files. Never a chunk.
#[test]
fn container_open_reads_no_chunk_data_on_fixtures() {
    for (path, sc) in frame_sidecars() {
        let name = sc["name"].as_str().unwrap();
        let a = open_array(&path);
        let info = a.frame_info().unwrap();
        let t_start = if info.nbytes > 0 {
            info.frame_len - info.trailer_len
        } else {
            info.header_len
        };
        let sniff = if path.is_file() { 32 } else { 0 };
        let expected = sniff + 23 + info.header_len + info.index_len + (info.frame_len - t_start);
        assert_eq!(a.io_stats().bytes(), expected, "{name}");
    }
    for (path, sc) in bcolz_sidecars("carray") {
        let a = open_array(&path);
        let meta: u64 = ["meta/sizes", "meta/storage", "__attrs__"]
            .iter()
            .map(|f| std::fs::metadata(path.join(f)).map_or(0, |m| m.len()))
            .sum();
        assert_eq!(a.io_stats().bytes(), meta, "{}", sc["name"]);
    }
}

/// C-Blosc2 writes special chunks into variable-size frames but cannot read them back; b2fs
/// infers their size when the header's nbytes leaves no doubt.
#[test]
fn container_variable_frame_special_sizes_are_inferred() {
    let full = memcpyed(&[1u8; 40], 4);
    let part = memcpyed(&[2u8; 20], 4);
    let mut area = full.clone();
    area.extend(&part);
    let p2 = full.len() as i64;
    let open = |nbytes: i64, index: &[i64]| match open_bytes(&build_frame(
        4,
        0,
        nbytes,
        &area,
        index,
        &[],
        &[],
    ))
    .unwrap()
    {
        Container::Array(a) => a,
        Container::Table(_) => unreachable!(),
    };
    // Two specials sharing 80 bytes: 40 each, the size of the largest stored chunk.
    let a = open(140, &[0, ZEROS, ZEROS, p2]);
    assert_eq!(a.chunksize(), 0);
    let sizes: Vec<usize> = (0..4).map(|i| a.chunk_nbytes(i).unwrap()).collect();
    assert_eq!(sizes, [40, 40, 40, 20]);
    assert_eq!(
        codec::decompress(&a.chunk_bytes(2).unwrap()).unwrap(),
        [0u8; 40]
    );
    // One special takes the rest, whatever its size.
    let a = open(70, &[0, p2, ZEROS]);
    assert_eq!(a.chunk_nbytes(2).unwrap(), 10);
    // Two specials sharing 50 bytes: 25 is no chunk size seen; refuse to guess.
    let a = open(110, &[0, ZEROS, ZEROS, p2]);
    let e = a.chunk_nbytes(1).unwrap_err();
    assert!(e.to_string().contains("cannot be inferred"), "{e}");
    assert!(a.chunk_bytes(2).is_err());
    assert_eq!(a.chunk_nbytes(3).unwrap(), 20);
}

/// `changed_on_disk` sees appends and rewrites of frames and bcolz commits, and nothing else.
#[test]
fn container_changed_on_disk_detects_rewrites() {
    let tmp = tempfile::tempdir().unwrap();
    // Contiguous frame: same bytes -> unchanged; a longer frame written over it -> changed.
    let (f, _) = small_frame();
    let p = tmp.path().join("f.b2frame");
    std::fs::write(&p, &f).unwrap();
    let a = open_array(&p);
    assert!(!a.changed_on_disk().unwrap());
    let longer = build_frame(4, 40, 40, &memcpyed(&[9u8; 40], 4), &[0], &[], &[]);
    std::fs::write(&p, &longer).unwrap();
    assert!(a.changed_on_disk().unwrap());
    std::fs::remove_file(&p).unwrap();
    assert!(a.changed_on_disk().unwrap());
    // Sparse frame.
    let d = tmp.path().join("s");
    copy_tree(&data_dir().join("frames/schunk_sparse.b2frame"), &d);
    let a = open_array(&d);
    assert!(!a.changed_on_disk().unwrap());
    let mut idx = std::fs::read(d.join("chunks.b2frame")).unwrap();
    idx[37] ^= 1; // nbytes
    std::fs::write(d.join("chunks.b2frame"), &idx).unwrap();
    assert!(a.changed_on_disk().unwrap());
    // bcolz: a chunk rewrite is invisible, a sizes commit is not.
    let c = tmp.path().join("c");
    copy_tree(&data_dir().join("bcolz/carray_i4_leftover"), &c);
    let a = open_array(&c);
    assert!(!a.changed_on_disk().unwrap());
    let blp = std::fs::read(c.join("data/__0.blp")).unwrap();
    std::fs::write(c.join("data/__0.blp"), &blp).unwrap();
    assert!(!a.changed_on_disk().unwrap());
    let sizes = std::fs::read_to_string(c.join("meta/sizes")).unwrap();
    std::fs::write(
        c.join("meta/sizes"),
        sizes.replace("\"cbytes\": ", "\"cbytes\": 1"),
    )
    .unwrap();
    assert!(a.changed_on_disk().unwrap());
}
