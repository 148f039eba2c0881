//! Damaged sources: a corrupt chunk inside a valid frame is EIO for that file only, a source
//! truncated underneath (also inside a page) is EIO and not a crash, and mutated frames give
//! bytes or EIO, never a panic.

use super::*;

// a corrupt chunk inside a valid frame
// ---------------------------------------------------------------------------------------------

#[test]
fn tree_corrupt_chunk_is_eio_for_that_file_only() {
    let name = "schunk_zstd";
    let sc = sidecar(&data_dir().join(format!("frames/{name}.json")));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(format!("{name}.b2frame"));
    let mut bytes = std::fs::read(data_dir().join(format!("frames/{name}.b2frame"))).unwrap();
    // Chunk 1's first block start (right after its 32-byte header) now points far outside
    // the chunk: its stream cannot be found.
    let at = (sc["layout"]["header_len"].as_u64().unwrap()
        + sc["layout"]["index_entries"][1].as_u64().unwrap()) as usize;
    bytes[at + 32..at + 36].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    std::fs::write(&src, &bytes).unwrap();

    let t = tree(&src);
    let bad = ino_of(&t, "data/00000001.bin");
    // stat still works: sizes come from the index, not the chunk data.
    assert_eq!(
        t.getattr(bad).unwrap().size,
        sc["chunk_list"][1]["nbytes"].as_u64().unwrap()
    );
    for step in [100u32, 1 << 20] {
        let err = read_all(&t, bad, step).unwrap_err();
        assert_eq!(err.errno(), libc::EIO);
        let msg = b2fs::tree::display_chain(&err);
        assert!(msg.contains(&src.display().to_string()), "{msg}");
        assert!(msg.contains("chunk 1"), "{msg}");
    }
    for i in [0usize, 2] {
        let bytes = read_path(&t, &format!("data/{}", chunk_name(i)));
        assert_eq!(
            sha256_hex(&bytes),
            sc["chunk_list"][i]["sha256"].as_str().unwrap()
        );
    }
    assert!(json_at(&t, "meta/sizes").is_object());
    assert_eq!(t.open_handles(), 0);
}

/// A copy of frame fixture `name` in a fresh directory, and a tree over it without prefetch
/// (a read must not decode the next chunks before a test changes the file underneath).
fn unprefetched_copy(name: &str) -> (tempfile::TempDir, PathBuf, Tree) {
    let (dir, src) = fixture_copy(&format!("frames/{name}.b2frame"));
    let t = tree_without_prefetch(&src);
    (dir, src, t)
}

/// Truncates `path` to `len` bytes, as another process would.
fn cut_file(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// A contiguous frame is decoded straight from a mapping of the file. When another process
/// truncates the file underneath, the pages past the new end are gone (touching them raises
/// SIGBUS): the chunks there must be EIO naming the chunk, and everything else keep working.
#[test]
fn tree_source_truncated_underneath_is_eio_not_a_crash() {
    let name = "schunk_zstd";
    let sc = sidecar(&data_dir().join(format!("frames/{name}.json")));
    let (_dir, src, t) = unprefetched_copy(name);
    let chunk0 = read_path(&t, "data/00000000.bin");
    assert_eq!(
        sha256_hex(&chunk0),
        sc["chunk_list"][0]["sha256"].as_str().unwrap()
    );
    // Cut the file a page boundary after chunk 1's header: the rest of chunk 1 and all of
    // chunk 2 lie on pages wholly past the end.
    let at1 = sc["layout"]["header_len"].as_u64().unwrap()
        + sc["layout"]["index_entries"][1].as_u64().unwrap();
    let cut = (at1 + 32).next_multiple_of(4096);
    let end1 = at1 + sc["chunk_list"][1]["cbytes"].as_u64().unwrap();
    assert!(end1 > cut + 4096, "the fixture must reach past the cut");
    cut_file(&src, cut);
    // First a small read in the middle of a chunk (the range-decode path, first to touch
    // the lost pages), then whole reads.
    let ino1 = ino_of(&t, "data/00000001.bin");
    let fh = t.open(ino1, libc::O_RDONLY).unwrap();
    assert_eq!(errno(t.read(ino1, fh, 40_000, 100)), libc::EIO);
    t.release(fh).unwrap();
    for i in [1usize, 2] {
        for step in [100u32, 1 << 20] {
            let err =
                read_all(&t, ino_of(&t, &format!("data/{}", chunk_name(i))), step).unwrap_err();
            assert_eq!(err.errno(), libc::EIO, "chunk {i}");
            let msg = b2fs::tree::display_chain(&err);
            assert!(msg.contains(&format!("chunk {i}")), "{msg}");
            assert!(msg.contains(&src.display().to_string()), "{msg}");
        }
    }
    // The rest of the tree still answers (chunk 0 from the cache or the intact pages).
    assert_eq!(read_path(&t, "data/00000000.bin"), chunk0);
    assert!(json_at(&t, "meta/sizes").is_object());
    assert_eq!(t.open_handles(), 0);
}

/// A cut inside a page raises no SIGBUS: the rest of that page reads as zeros. The mapped
/// read must still see that its chunk was cut (the file's length), for the whole-chunk and
/// the range path alike. Chunk 3 of this fixture is memcpyed (stored raw), so zeros in place
/// of its last bytes would decode without complaint.
#[test]
fn tree_source_cut_inside_a_page_is_eio() {
    let name = "schunk_deadspace";
    let sc = sidecar(&data_dir().join(format!("frames/{name}.json")));
    let chunk = |i: usize| &sc["chunk_list"][i];
    let at3 = sc["layout"]["header_len"].as_u64().unwrap()
        + sc["layout"]["index_entries"][3].as_u64().unwrap();
    let nbytes3 = chunk(3)["nbytes"].as_u64().unwrap();
    assert_eq!(
        chunk(3)["cbytes"].as_u64().unwrap(),
        nbytes3 + 32,
        "chunk 3 must be memcpyed"
    );
    let cut = at3 + 32 + nbytes3 - 10;
    assert_ne!(cut % 4096, 0, "the cut must fall inside a page");
    // Chunk 1 lies wholly before the cut.
    let at1 = sc["layout"]["header_len"].as_u64().unwrap()
        + sc["layout"]["index_entries"][1].as_u64().unwrap();
    assert!(at1 + chunk(1)["cbytes"].as_u64().unwrap() <= cut);
    for range_read in [false, true] {
        let (_dir, src, t) = unprefetched_copy(name);
        cut_file(&src, cut);
        let ino3 = ino_of(&t, "data/00000003.bin");
        let err = if range_read {
            let fh = t.open(ino3, libc::O_RDONLY).unwrap();
            let r = t.read(ino3, fh, nbytes3 - 100, 100).map(|_| ());
            t.release(fh).unwrap();
            r.unwrap_err()
        } else {
            read_all(&t, ino3, 1 << 20).unwrap_err()
        };
        assert_eq!(err.errno(), libc::EIO, "range read: {range_read}");
        let msg = b2fs::tree::display_chain(&err);
        assert!(msg.contains("chunk 3"), "{msg}");
        // Issue 12: another writer changed the file, so a chunk not cached before is not
        // trusted either (python-blosc2 rewrites frames in place): EIO naming it, never bytes
        // of two versions; a chunk cached before the cut is still served.
        let err = read_all(&t, ino_of(&t, "data/00000001.bin"), 1 << 20).unwrap_err();
        assert_eq!(err.errno(), libc::EIO);
        assert!(b2fs::tree::display_chain(&err).contains("chunk 1"));
        let (_dir, src, t) = unprefetched_copy(name);
        let before = read_path(&t, "data/00000001.bin");
        cut_file(&src, cut);
        assert_eq!(read_path(&t, "data/00000001.bin"), before);
        assert_eq!(sha256_hex(&before), chunk(1)["sha256"].as_str().unwrap());
    }
}

#[test]
fn tree_mutated_frames_give_bytes_or_eio_never_panic() {
    // Deterministic byte flips inside the chunk area of two frames; every open either fails
    // cleanly or yields a tree whose files read as bytes or EIO.
    let dir = tempfile::tempdir().unwrap();
    let mut state = 0x5eed_u64;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    // b2nd_2d_f8_lz4 has multi-block chunks: its small random reads go through the block and
    // page caches.
    for name in [
        "schunk_zstd",
        "schunk_lz4",
        "b2nd_2d_i8_zstd9",
        "b2nd_2d_f8_lz4",
    ] {
        let sc = sidecar(&data_dir().join(format!("frames/{name}.json")));
        let orig = std::fs::read(
            data_dir()
                .join("frames")
                .join(sc["source"].as_str().unwrap()),
        )
        .unwrap();
        let start = sc["layout"]["header_len"].as_u64().unwrap();
        let span = sc["layout"]["header_cbytes"].as_u64().unwrap().max(1);
        for case in 0..25 {
            let mut bytes = orig.clone();
            for _ in 0..1 + case % 3 {
                let at = (start + next() % span) as usize;
                bytes[at] ^= 1 << (next() % 8);
            }
            let src = dir.path().join(format!("{name}-{case}.b2frame"));
            std::fs::write(&src, &bytes).unwrap();
            let Ok(t) = Tree::from_source(&src, opts()) else {
                continue;
            };
            let data = ino_of(&t, "data");
            let files: Vec<_> = t.readdir(data, 0).unwrap().skip(2).collect();
            for f in files {
                for step in [777u32, 1 << 20] {
                    match read_all(&t, f.ino, step) {
                        Ok(b) => assert_eq!(b.len() as u64, t.getattr(f.ino).unwrap().size),
                        Err(e) => assert_eq!(e.errno(), libc::EIO, "{name} case {case}: {e}"),
                    }
                }
                // Small reads at scattered offsets, none at 0 (the range, block and page paths).
                let size = t.getattr(f.ino).unwrap().size;
                let fh = t.open(f.ino, libc::O_RDONLY).unwrap();
                for k in 1..17u64 {
                    let off = (k * 2_654_435_761) % size.max(1);
                    match t.read(f.ino, fh, off, 100) {
                        Ok(b) => assert!(b.len() as u64 <= size - off.min(size)),
                        Err(e) => assert_eq!(e.errno(), libc::EIO, "{name} case {case}: {e}"),
                    }
                }
                t.release(fh).unwrap();
            }
        }
    }
}

/// A copy of frame fixture `file` (`frames/NAME.ext`) whose chunk 0 has byte `offset` of its
/// header set to `value` (`check`: the byte it must hold before), its sidecar, and its bytes.
fn chunk0_header_byte_set(
    file: &str,
    offset: usize,
    check: Option<u8>,
    value: u8,
) -> (tempfile::TempDir, PathBuf, Value, Vec<u8>) {
    let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
    let sc = sidecar(&data_dir().join(format!("{stem}.json")));
    let (dir, src) = fixture_copy(file);
    let mut bytes = std::fs::read(&src).unwrap();
    let at = (sc["layout"]["header_len"].as_u64().unwrap()
        + sc["layout"]["index_entries"][0].as_u64().unwrap()) as usize;
    if let Some(was) = check {
        assert_eq!(bytes[at + offset], was, "{file}");
    }
    bytes[at + offset] = value;
    std::fs::write(&src, &bytes).unwrap();
    (dir, src, sc, bytes)
}

/// Writes `bytes` over the whole of `rel` (a chunk file) through a writable tree of `src`,
/// committed at its close.
fn write_whole(src: &Path, rel: &str, bytes: &[u8]) {
    let w = Tree::from_source(
        src,
        TreeOptions {
            writable: true,
            ..opts()
        },
    )
    .unwrap();
    let ino = ino_of(&w, rel);
    let fh = w.open(ino, libc::O_WRONLY).unwrap();
    assert_eq!(w.write(ino, fh, 0, bytes).unwrap() as usize, bytes.len());
    w.flush(ino, fh).unwrap();
    w.release(fh).unwrap();
}

/// The first chunk's header damaged (a special-value kind no writer uses): python-blosc2
/// refuses to open such a frame at all, b2fs gives EIO on that chunk alone. Its other chunks
/// read as stored, `meta/storage` names the codec of the next readable header, and a write
/// commits new chunks compressed as the readable ones are (before, the whole array was
/// unreadable, and a commit that turned chunk 1 into a special chunk made chunk 2's damage
/// spread to its whole leaf the same way: `zarr_edit`'s fuzzing found that).
#[test]
fn tree_a_damaged_first_chunk_header_is_eio_for_that_chunk_only() {
    let name = "schunk_lz4";
    // Byte 31 of a Blosc2 chunk header: the special-value kind in bits 4-6; 7 is reserved.
    let (_dir, src, sc, _) =
        chunk0_header_byte_set(&format!("frames/{name}.b2frame"), 31, None, 0x70);
    let sha = |i: usize| sc["chunk_list"][i]["sha256"].as_str().unwrap().to_owned();

    let t = tree(&src);
    let err = read_all(&t, ino_of(&t, "data/00000000.bin"), 1 << 20).unwrap_err();
    assert_eq!(err.errno(), libc::EIO);
    let msg = b2fs::tree::display_chain(&err);
    assert!(msg.contains("chunk 0") && msg.contains("reserved"), "{msg}");
    for i in [1usize, 2] {
        assert_eq!(
            sha256_hex(&read_path(&t, &format!("data/{}", chunk_name(i)))),
            sha(i)
        );
    }
    let storage = json_at(&t, "meta/storage");
    let codec = sc["cparams"]["codec"].as_str().unwrap();
    assert_eq!(storage["cparams"]["codec"], codec, "{storage}");
    assert_eq!(
        storage["cparams"]["filters"], sc["cparams"]["filters"],
        "{storage}"
    );

    // A whole chunk written back: committed, compressed as chunks 1 and 2 are.
    let len = sc["chunk_list"][1]["nbytes"].as_u64().unwrap() as usize;
    let new: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    write_whole(&src, "data/00000001.bin", &new);
    let t = tree(&src);
    assert_eq!(read_path(&t, "data/00000001.bin"), new);
    assert_eq!(sha256_hex(&read_path(&t, "data/00000002.bin")), sha(2));
    let err = read_all(&t, ino_of(&t, "data/00000000.bin"), 1 << 20).unwrap_err();
    assert_eq!(err.errno(), libc::EIO);
    let header = |path: &Path| match b2fs::container::open(path).unwrap() {
        b2fs::container::Container::Array(a) => a.chunk_header(1).unwrap(),
        b2fs::container::Container::Table(_) => panic!("not an array"),
    };
    let (new, old) = (
        header(&src),
        header(&data_dir().join(format!("frames/{name}.b2frame"))),
    );
    assert_eq!(
        (new.compcode, new.filters, new.typesize),
        (old.compcode, old.filters, old.typesize),
        "the new chunk 1 is compressed as the old one was"
    );
}

/// A sparse frame's and a bcolz carray's first chunk file missing: EIO on that chunk alone
/// (the array opened, as when any other chunk file is missing), the next chunk as before.
#[test]
fn tree_a_missing_first_chunk_file_is_eio_for_that_chunk_only() {
    for (fixture, first) in [
        ("frames/b2nd_sparse.b2nd", "00000000.chunk"),
        ("bcolz/carray_lz4_s1", "data/__0.blp"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        crate::support::copy_tree(&data_dir().join(fixture), &src);
        let chunk1 = read_path(&tree(&src), "data/00000001.bin");
        std::fs::remove_file(src.join(first)).unwrap();
        let t = tree(&src);
        let err = read_all(&t, ino_of(&t, "data/00000000.bin"), 1 << 20).unwrap_err();
        assert_eq!(err.errno(), libc::EIO, "{fixture}");
        assert_eq!(read_path(&t, "data/00000001.bin"), chunk1, "{fixture}");
        assert!(
            json_at(&t, "meta/storage")["cparams"].is_object(),
            "{fixture}"
        );
    }
}

/// A first chunk header that parses but lies (a flipped byte makes its shuffle slot the
/// lossy TRUNC_PREC, which the frame header does not name): new chunks are compressed
/// without it (b2fs never writes TRUNC_PREC), so a chunk written whole reads back the same.
#[test]
fn tree_a_lying_trunc_prec_in_the_first_chunk_header_writes_nothing_lossy() {
    // The extended header's filters are bytes 16..22; the last slot holds SHUFFLE (1).
    let (_dir, src, sc, _) = chunk0_header_byte_set("frames/b2nd_1d_f8.b2nd", 21, Some(1), 4);
    let header = |i: usize| match b2fs::container::open(&src).unwrap() {
        b2fs::container::Container::Array(a) => a.chunk_header(i).unwrap(),
        b2fs::container::Container::Table(_) => panic!("not an array"),
    };
    assert!(header(0).filters.contains(&4));

    let len = sc["chunk_list"][1]["nbytes"].as_u64().unwrap() as usize;
    // float64 values with every mantissa bit used: TRUNC_PREC would change them.
    let new: Vec<u8> = (0..len / 8)
        .flat_map(|i| (1.0 / 3.0 + i as f64 * 1e-9).to_le_bytes())
        .collect();
    write_whole(&src, "data/00000001.bin", &new);
    assert_eq!(read_path(&tree(&src), "data/00000001.bin"), new);
    assert!(!header(1).filters.contains(&4), "{:?}", header(1).filters);
}

/// A first chunk header that parses but lies about the codec (flags bits 5-7 say zstd in an
/// LZ4 frame) or the typesize (4 in a float64 array): a chunk written whole is compressed as
/// the frame header says its chunks are (before, as the lying header said), and
/// python-blosc2 reads it back exactly.
#[test]
fn tree_a_first_chunk_header_lying_about_codec_or_typesize_is_not_copied() {
    let py = crate::support::python(
        "tree_a_first_chunk_header_lying_about_codec_or_typesize_is_not_copied",
    );
    // (fixture, header byte, what it holds, what it is set to)
    for (file, at, was, lie) in [
        // Byte 2, the flags: LZ4's format 1 in bits 5-7 becomes zstd's 4.
        ("frames/schunk_lz4.b2frame", 2, 0x35, 0x95),
        // Byte 3: the typesize.
        ("frames/b2nd_1d_f8.b2nd", 3, 8, 4),
    ] {
        let (_dir, src, sc, _) = chunk0_header_byte_set(file, at, Some(was), lie);
        let header = |path: &Path, i: usize| match b2fs::container::open(path).unwrap() {
            b2fs::container::Container::Array(a) => a.chunk_header(i).unwrap(),
            b2fs::container::Container::Table(_) => panic!("not an array"),
        };
        let lying = header(&src, 0);
        let len = sc["chunk_list"][1]["nbytes"].as_u64().unwrap() as usize;
        let new: Vec<u8> = (0..len / 8)
            .flat_map(|i| (1.0 / 3.0 + i as f64 * 1e-9).to_le_bytes())
            .collect();
        write_whole(&src, "data/00000001.bin", &new);
        assert_eq!(read_path(&tree(&src), "data/00000001.bin"), new, "{file}");
        let (got, old) = (header(&src, 1), header(&data_dir().join(file), 1));
        assert_eq!(
            (got.codec().unwrap(), got.typesize, got.filters),
            (old.codec().unwrap(), old.typesize, old.filters),
            "{file}: the new chunk 1 is compressed as the frame says (the lying chunk 0: {:?}, \
             typesize {})",
            lying.codec(),
            lying.typesize
        );
        if let Some(py) = &py {
            let got = crate::support::python_says(
                py,
                &[
                    "-c",
                    "import sys, blosc2\n\
                     o = blosc2.open(sys.argv[1])\n\
                     print(getattr(o, 'schunk', o).decompress_chunk(1).hex())\n",
                    src.to_str().unwrap(),
                ],
            );
            let want: String = new.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(got, want, "{file}: python-blosc2 reads the written chunk");
        }
    }
}

/// An array python-blosc2 compressed with TRUNC_PREC (lossy, 20 bits of mantissa kept): a
/// chunk written whole through the tree reads back byte for byte, through b2fs and
/// python-blosc2 alike (its header names the filters it was written with).
#[test]
fn tree_writes_to_a_trunc_prec_array_keep_every_bit() {
    let t = "tree_writes_to_a_trunc_prec_array_keep_every_bit";
    let Some(py) = crate::support::python(t) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("tp.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.linspace(0, 1, 4000), chunks=(1000,), urlpath=sys.argv[1], mode='w', \
        cparams={'filters': [blosc2.Filter.TRUNC_PREC, blosc2.Filter.SHUFFLE], \
        'filters_meta': [20, 0]})\n";
    crate::support::run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let new: Vec<u8> = (0..1000)
        .flat_map(|i| (1.0 / 7.0 + f64::from(i) * 1e-9).to_le_bytes())
        .collect();
    write_whole(&src, "data/00000002.bin", &new);
    assert_eq!(read_path(&tree(&src), "data/00000002.bin"), new);
    let got = crate::support::python_says(
        &py,
        &[
            "-c",
            // (`schunk.decompress_chunk` fails on python-blosc2's own TRUNC_PREC arrays.)
            "import sys, blosc2\n\
             print(blosc2.open(sys.argv[1])[2000:3000].tobytes().hex())\n",
            src.to_str().unwrap(),
        ],
    );
    let want: String = new.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(got.trim(), want, "python-blosc2 reads the written chunk");
}
