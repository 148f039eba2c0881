//! Hostile sources are errors, never panics: hand-made hostile frames and bcolz directories,
//! and property tests that mutate real fixtures (frames, sparse frames, bcolz).

use super::*;

// ---------------------------------------------------------------------------------------------
// Hostile frames

#[track_caller]
fn assert_malformed(r: Result<Container, ContainerError>, needle: &str) {
    match r {
        Err(e @ ContainerError::Malformed { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("hostile.b2frame"), "no path: {msg}");
            assert!(msg.contains(needle), "expected {needle:?} in: {msg}");
        }
        Err(e) => panic!("expected Malformed ({needle}), got {e:?}"),
        Ok(_) => panic!("expected Malformed ({needle}), opened"),
    }
}

#[test]
fn container_hostile_frames_are_errors() {
    let (f, _) = small_frame();
    // Every truncation fails (the trailer is located from frame_len).
    for cut in 0..f.len() {
        assert!(open_bytes(&f[..cut]).is_err(), "cut at {cut}");
    }
    // Metalayer count that lies (16 claimed, 1 present).
    let mut m = f.clone();
    m[92..94].copy_from_slice(&16u16.to_be_bytes());
    assert!(open_bytes(&m).is_err());
    // More than 16 metalayers.
    m[92..94].copy_from_slice(&17u16.to_be_bytes());
    assert_malformed(open_bytes(&m), "17 entries");
    // Metalayer offset outside the header.
    let mut m = f.clone();
    m[99..103].copy_from_slice(&0x7fff_0000i32.to_be_bytes());
    assert_malformed(open_bytes(&m), "offset");
    // Metalayer content length of 4 GiB.
    let mut m = f.clone();
    let c6 = 87 + 7 + (6 + 3) + (6 + 4) + 3; // names "usr" and "junk"
    assert_eq!(m[c6], 0xc6);
    m[c6 + 1..c6 + 5].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_malformed(open_bytes(&m), "metalayer section");
    // Index entry past the chunk area.
    let a = match open_bytes(&f).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => unreachable!(),
    };
    let idx_at = a.frame_info().unwrap().index_offset.unwrap() as usize + 32;
    let mut m = f.clone();
    m[idx_at + 8..idx_at + 16].copy_from_slice(&1_000_000i64.to_le_bytes());
    assert_malformed(open_bytes(&m), "chunk 1: offset 1000000");
    // Invalid special value.
    m[idx_at + 8..idx_at + 16].copy_from_slice(&(-0x8000_0000_0000_0000i64).to_le_bytes());
    assert_malformed(open_bytes(&m), "invalid special");
    // Negative nbytes; negative typesize; chunksize -1 with data.
    let mut m = f.clone();
    m[30] = 0xff;
    assert_malformed(open_bytes(&m), "negative nbytes");
    let mut m = f.clone();
    m[48] = 0xff;
    assert_malformed(open_bytes(&m), "typesize");
    let mut m = f.clone();
    m[59..62].copy_from_slice(&[0xff, 0xff, 0xff]);
    m[58] = 0xff;
    assert_malformed(open_bytes(&m), "chunksize");
    // nbytes that implies a different number of chunks than the index holds.
    let mut m = f.clone();
    m[37] = 200;
    assert_malformed(open_bytes(&m), "entries");
    // frame_len of 2^63 - 1.
    let mut m = f.clone();
    m[16..24].copy_from_slice(&i64::MAX.to_be_bytes());
    assert_malformed(open_bytes(&m), "frame_len");
    // Trailer vlmetalayer count of 65535 / content length of 4 GiB.
    let t = f.len() - a.frame_info().unwrap().trailer_len as usize;
    let mut m = f.clone();
    m[t + 7..t + 9].copy_from_slice(&0xffffu16.to_be_bytes());
    assert_malformed(open_bytes(&m), "trailer");
    let mut m = f.clone();
    let c6 = t + 9 + 2 * 6 + 4 + 1 + 3;
    assert_eq!(m[c6], 0xc6, "trailer layout");
    m[c6 + 1..c6 + 5].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_malformed(open_bytes(&m), "trailer");
    // A chunk whose cbytes runs past the chunk area: open is fine, reading it fails.
    let hl = a.frame_info().unwrap().header_len as usize;
    let mut m = f.clone();
    m[hl + 12..hl + 16].copy_from_slice(&100_000u32.to_le_bytes());
    let a = match open_bytes(&m).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => unreachable!(),
    };
    let e = a.chunk_bytes(0).unwrap_err();
    assert!(e.to_string().contains("chunk 0"), "{e}");
}

#[test]
fn container_vlmeta_with_hostile_msgpack_is_kept_raw() {
    // A vlmetalayer whose msgpack claims a 4 GiB str: no allocation, kept as __raw__, and the
    // strict decoder reports the offset.
    let bad = vec![0xdb, 0xff, 0xff, 0xff, 0xff, b'x'];
    let f = build_frame(
        1,
        4,
        4,
        &memcpyed(&[1, 2, 3, 4], 1),
        &[0],
        &[],
        &[("bad", bad.clone())],
    );
    let a = match open_bytes(&f).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => unreachable!(),
    };
    assert_eq!(a.attrs()["bad"], json!({"__raw__": "2/////94"}));
    assert_eq!(attrs::json_to_msgpack(&a.attrs()["bad"]).unwrap(), bad);
    let e = attrs::msgpack_to_json(&bad).unwrap_err();
    assert!(e.to_string().contains("byte 5"), "{e}");
}

#[test]
fn container_hostile_bcolz_is_error() {
    let tmp = tempfile::tempdir().unwrap();
    let src = data_dir().join("bcolz/carray_i4_leftover");
    let case = |name: &str, f: &dyn Fn(&Path)| -> ContainerError {
        let d = tmp.path().join(name);
        copy_tree(&src, &d);
        f(&d);
        container::open(&d).map(|_| ()).unwrap_err()
    };
    let e = case("badjson", &|d| {
        std::fs::write(d.join("meta/sizes"), "{\"shape\": [25], \"nbytes\": 1").unwrap()
    });
    assert!(matches!(e, ContainerError::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("meta/sizes"), "{e}");
    let e = case("negshape", &|d| {
        std::fs::write(
            d.join("meta/sizes"),
            "{\"shape\": [-5], \"nbytes\": 1, \"cbytes\": 1}\n",
        )
        .unwrap()
    });
    assert!(e.to_string().contains("shape[0]"), "{e}");
    let e = case("chunklen0", &|d| {
        let s = std::fs::read_to_string(d.join("meta/storage")).unwrap();
        let mut v: Value = serde_json::from_str(&s).unwrap();
        v["chunklen"] = json!(0);
        std::fs::write(d.join("meta/storage"), v.to_string()).unwrap();
    });
    assert!(e.to_string().contains("chunklen"), "{e}");
    let e = case("badattrs", &|d| {
        std::fs::write(d.join("__attrs__"), "{,}").unwrap()
    });
    assert!(e.to_string().contains("__attrs__"), "{e}");
    let e = case("hugeshape", &|d| {
        std::fs::write(
            d.join("meta/sizes"),
            "{\"shape\": [18446744073709551615, 3], \"nbytes\": 1, \"cbytes\": 1}\n",
        )
        .unwrap()
    });
    assert!(e.to_string().contains("overflow"), "{e}");

    // ctable with hostile __rootdirs__ names.
    let table = data_dir().join("bcolz/ctable_3cols");
    for (i, names) in [
        r#"["id", "../x"]"#,
        r#"["id/.."]"#,
        r#"["/etc"]"#,
        r#"[".."]"#,
        r#"[1]"#,
        r#"["id", "id"]"#,
    ]
    .iter()
    .enumerate()
    {
        let d = tmp.path().join(format!("table{i}"));
        copy_tree(&table, &d);
        std::fs::write(d.join("__rootdirs__"), format!("{{\"names\": {names}}}\n")).unwrap();
        let e = container::open(&d).map(|_| ()).unwrap_err();
        assert!(
            matches!(e, ContainerError::Malformed { .. }),
            "{names}: {e}"
        );
        assert!(e.to_string().contains("__rootdirs__"), "{names}: {e}");
    }
    // A chunk file whose Blosc1 cbytes lies.
    let d = tmp.path().join("liar");
    copy_tree(&src, &d);
    let blp = d.join("data/__0.blp");
    let mut b = std::fs::read(&blp).unwrap();
    b[28..32].copy_from_slice(&i32::MAX.to_le_bytes());
    std::fs::write(&blp, b).unwrap();
    let a = open_array(&d);
    let e = a.chunk_bytes(0).unwrap_err();
    assert!(e.to_string().contains("__0.blp"), "{e}");
}

#[test]
fn container_unknown_sources_are_not_containers() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("plain.b2frame");
    std::fs::write(&f, b"hello world, not a frame").unwrap();
    assert!(matches!(
        container::open(&f),
        Err(ContainerError::NotAContainer { .. })
    ));
    std::fs::write(&f, b"").unwrap();
    assert!(matches!(
        container::open(&f),
        Err(ContainerError::NotAContainer { .. })
    ));
    assert!(matches!(
        container::open(tmp.path()),
        Err(ContainerError::NotAContainer { .. })
    ));
    assert!(matches!(
        container::open(&tmp.path().join("missing")),
        Err(ContainerError::Io { .. })
    ));
    // A sparse frame directory with a missing chunk file: open works, the read names the file.
    let d = tmp.path().join("sparse");
    copy_tree(&data_dir().join("frames/schunk_sparse.b2frame"), &d);
    std::fs::remove_file(d.join("00000002.chunk")).unwrap();
    let a = open_array(&d);
    let e = a.chunk_bytes(2).unwrap_err();
    assert!(e.to_string().contains("00000002.chunk"), "{e}");
    // The index file of a sparse frame opens its directory.
    let a = open_array(&d.join("chunks.b2frame"));
    assert_eq!((a.kind(), a.path()), (SourceKind::Sframe, d.as_path()));
    assert_eq!(a.nchunks(), 4);
    // A contiguous frame file handed over as a sparse index (frame_type mismatch).
    let d = tmp.path().join("mismatch");
    std::fs::create_dir(&d).unwrap();
    std::fs::copy(
        data_dir().join("frames/schunk_lz4.b2frame"),
        d.join("chunks.b2frame"),
    )
    .unwrap();
    let e = container::open(&d).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("frame type"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Mutation property test

fn mutation_corpus() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (path, sc) in frame_sidecars() {
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            if bytes.len() <= 64 * 1024 {
                out.push((sc["name"].as_str().unwrap().to_string(), bytes));
            }
        }
    }
    out.push(("small_frame".into(), small_frame().0));
    out
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Set { at: usize, byte: u8 },
    Truncate { at: usize },
    Zero32 { at: usize },
}

fn apply(bytes: &mut Vec<u8>, muts: &[Mutation]) {
    for m in muts {
        let n = bytes.len().max(1);
        match *m {
            Mutation::Flip { at, bit } => {
                if let Some(b) = bytes.get_mut(at % n) {
                    *b ^= 1 << (bit % 8);
                }
            }
            Mutation::Set { at, byte } => {
                if let Some(b) = bytes.get_mut(at % n) {
                    *b = byte;
                }
            }
            Mutation::Truncate { at } => bytes.truncate(at % n),
            Mutation::Zero32 { at } => {
                let at = at % n;
                let end = (at + 4).min(bytes.len());
                for b in &mut bytes[at..end] {
                    *b = 0xff;
                }
            }
        }
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        1 => any::<usize>().prop_map(|at| Mutation::Zero32 { at }),
    ]
}

/// Opening a mutated frame and reading (and decoding) every chunk never panics, hangs or
/// allocates without bound.
#[test]
fn container_mutated_frames_never_panic() {
    let corpus = mutation_corpus();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("mutant");
    let cases: u32 = crate::support::env_or("B2FS_CASES", 4000);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let strategy = (0..corpus.len(), proptest::collection::vec(mutation(), 1..4));
    runner
        .run(&strategy, |(which, muts)| {
            let mut bytes = corpus[which].1.clone();
            apply(&mut bytes, &muts);
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(Container::Array(a)) = container::open(&path) {
                for i in 0..a.nchunks().min(64) {
                    let _ = a.chunk_nbytes(i);
                    let _ = a.chunk_kind(i);
                    let _ = a.chunk_header(i);
                    if let Ok(c) = a.chunk_bytes(i) {
                        let _ = codec::Decoder::with_limit(1 << 20).decompress(&c);
                    }
                }
                let _ = a.grid();
                for v in a.vlmetalayers() {
                    let _ = attrs::json_to_msgpack(&v.json);
                }
            }
            Ok(())
        })
        .unwrap();
}

/// The sparse frame mutation: damaged `chunks.b2frame` and chunk files.
#[test]
fn container_mutated_sparse_frames_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let src = data_dir().join("frames/b2nd_sparse.b2nd");
    let d = tmp.path().join("s");
    copy_tree(&src, &d);
    let index = std::fs::read(src.join("chunks.b2frame")).unwrap();
    let chunk0 = std::fs::read(src.join("00000000.chunk")).unwrap();
    let config = ProptestConfig {
        cases: 500,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let strategy = (any::<bool>(), proptest::collection::vec(mutation(), 1..4));
    runner
        .run(&strategy, |(which, muts)| {
            let (name, orig) = if which {
                ("chunks.b2frame", &index)
            } else {
                ("00000000.chunk", &chunk0)
            };
            let mut bytes = orig.clone();
            apply(&mut bytes, &muts);
            std::fs::write(d.join(name), &bytes).unwrap();
            if let Ok(Container::Array(a)) = container::open(&d) {
                for i in 0..a.nchunks() {
                    if let Ok(c) = a.chunk_bytes(i) {
                        let _ = codec::Decoder::with_limit(1 << 20).decompress(&c);
                    }
                }
            }
            std::fs::write(d.join(name), orig).unwrap();
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// bcolz mutation property test

/// Mutated bcolz metadata and chunk files: open + reading every chunk never panics.
#[test]
fn container_mutated_bcolz_never_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let src = data_dir().join("bcolz/carray_i4_leftover");
    let d = tmp.path().join("c");
    copy_tree(&src, &d);
    let files = [
        "meta/sizes",
        "meta/storage",
        "__attrs__",
        "data/__0.blp",
        "data/__2.blp",
    ];
    let originals: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(src.join(f)).unwrap())
        .collect();
    let config = ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let strategy = (0..files.len(), proptest::collection::vec(mutation(), 1..4));
    runner
        .run(&strategy, |(which, muts)| {
            let mut bytes = originals[which].clone();
            apply(&mut bytes, &muts);
            std::fs::write(d.join(files[which]), &bytes).unwrap();
            if let Ok(Container::Array(a)) = container::open(&d) {
                for i in 0..a.nchunks().min(64) {
                    let _ = a.chunk_nbytes(i);
                    let _ = a.chunk_header(i);
                    if let Ok(c) = a.chunk_bytes(i) {
                        let _ = codec::Decoder::with_limit(1 << 20).decompress(&c);
                    }
                }
            }
            std::fs::write(d.join(files[which]), &originals[which]).unwrap();
            Ok(())
        })
        .unwrap();
}
