//! The in-process filesystem API without a kernel: every fixture kind's listing, sizes, chunk
//! bytes (against the reference's sha256 in the sidecars), metadata files (against what
//! python-blosc2 / bcolz report), readdir paging, odd read windows, handles and errnos, a
//! corrupt chunk inside a valid frame, concurrency, and a synthetic million-chunk source.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use b2fs::container::ContainerError;
use b2fs::tree::{
    ChunkStore, EntryKind, Layout, Owner, ROOT_INO, Tree, TreeError, TreeOptions, chunk_name,
};
use serde_json::Value;

use crate::support::{data_dir, python, repo_root, run_python, sha256_hex};

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

fn opts() -> TreeOptions {
    TreeOptions::default()
}

fn tree(path: &Path) -> Tree {
    Tree::from_source(path, opts()).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()))
}

/// A tree that never prefetches: a read decodes nothing but what it asked for.
fn tree_without_prefetch(path: &Path) -> Tree {
    let o = TreeOptions {
        prefetch_chunks: 0,
        ..opts()
    };
    Tree::from_source(path, o).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()))
}

fn sidecar(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Every frame fixture: (source path, sidecar).
fn frame_fixtures() -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    let dir = data_dir().join("frames");
    let mut sidecars: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    sidecars.sort();
    sidecars.push(repo_root().join("examples/sample.json"));
    for sc in sidecars {
        let v = sidecar(&sc);
        let src = sc.parent().unwrap().join(v["source"].as_str().unwrap());
        out.push((src, v));
    }
    assert!(out.len() > 30, "frame fixtures missing");
    out
}

fn bcolz_fixtures(kind: &str) -> Vec<(PathBuf, Value)> {
    let dir = data_dir().join("bcolz");
    let mut out: Vec<(PathBuf, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|sc| {
            let v = sidecar(&sc);
            (sc.with_extension(""), v)
        })
        .filter(|(_, v)| v["kind"] == kind)
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no bcolz {kind} fixtures");
    out
}

pub(crate) use crate::support::tree_ino as ino_of;

fn names(t: &Tree, ino: u64) -> Vec<String> {
    t.readdir(ino, 0).unwrap().skip(2).map(|e| e.name).collect()
}

use crate::support::tree_read as read_all;

pub(crate) fn read_path(t: &Tree, path: &str) -> Vec<u8> {
    read_all(t, ino_of(t, path), 4096).unwrap()
}

pub(crate) fn json_at(t: &Tree, path: &str) -> Value {
    let bytes = read_path(t, path);
    assert_eq!(bytes.last(), Some(&b'\n'), "{path} must end with a newline");
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[track_caller]
fn errno<T>(r: Result<T, TreeError>) -> i32 {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.errno(),
    }
}

// ---------------------------------------------------------------------------------------------
// frames (cframe, sframe, b2nd, caterva, plain SChunks)
// ---------------------------------------------------------------------------------------------

#[test]
fn tree_frames_list_fixed_entries_and_chunk_files() {
    for (src, sc) in frame_fixtures() {
        let t = tree(&src);
        // A frame of variable-size chunks (no N-dim metalayer, chunksize 0, chunks of other
        // sizes) has no item layout: no array.npy.
        let varlen = src.to_string_lossy().contains("varlen");
        let want: &[&str] = if varlen {
            &["__attrs__", "meta", "data", "zarr"]
        } else {
            &["__attrs__", "array.npy", "meta", "data", "zarr"]
        };
        assert_eq!(names(&t, ROOT_INO), want, "{src:?}");
        assert_eq!(
            names(&t, ino_of(&t, "meta")),
            ["sizes", "storage", "metalayers"]
        );
        let mut mls = names(&t, ino_of(&t, "meta/metalayers"));
        mls.sort();
        let mut want: Vec<String> = sc["metalayers"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        want.sort();
        assert_eq!(mls, want, "{src:?}");
        let nchunks = sc["nchunks"].as_u64().unwrap() as usize;
        let files = names(&t, ino_of(&t, "data"));
        let want: Vec<String> = (0..nchunks).map(chunk_name).collect();
        assert_eq!(files, want, "{src:?}");
    }
}

#[test]
fn tree_frames_chunk_files_match_reference_sha256() {
    for (src, sc) in frame_fixtures() {
        let t = tree(&src);
        let mut all = Vec::new();
        for c in sc["chunk_list"].as_array().unwrap() {
            let i = c["index"].as_u64().unwrap() as usize;
            let path = format!("data/{}", chunk_name(i));
            let ino = ino_of(&t, &path);
            let attr = t.getattr(ino).unwrap();
            assert_eq!(attr.kind, EntryKind::File);
            assert_eq!(
                attr.size,
                c["nbytes"].as_u64().unwrap(),
                "{src:?} {path} size"
            );
            // An odd read size exercises windows that straddle blocks.
            let bytes = read_all(&t, ino, 1000).unwrap();
            assert_eq!(bytes.len() as u64, attr.size);
            assert_eq!(
                sha256_hex(&bytes),
                c["sha256"].as_str().unwrap(),
                "{src:?} {path}"
            );
            all.extend_from_slice(&bytes);
        }
        assert_eq!(
            sha256_hex(&all),
            sc["chunks_sha256"].as_str().unwrap(),
            "{src:?}"
        );
    }
}

/// Fixtures whose chunks were not all written with the handle's parameters (see their notes).
const MIXED: [&str; 2] = ["schunk_deadspace", "schunk_blosc1_chunk"];

#[test]
fn tree_parallel_block_split_decode_matches_reference() {
    // Every chunk, however small, decoded in 3 block-aligned parts on scoped threads.
    let split = TreeOptions {
        decode_threads: 3,
        parallel_decode_min: 0,
        prefetch_chunks: 0,
        ..opts()
    };
    for (src, sc) in frame_fixtures() {
        let t = Tree::from_source(&src, split).unwrap();
        for c in sc["chunk_list"].as_array().unwrap() {
            let i = c["index"].as_u64().unwrap() as usize;
            let bytes =
                read_all(&t, ino_of(&t, &format!("data/{}", chunk_name(i))), 1 << 20).unwrap();
            assert_eq!(
                sha256_hex(&bytes),
                c["sha256"].as_str().unwrap(),
                "{src:?} chunk {i}"
            );
        }
    }
    for (src, sc) in bcolz_fixtures("carray") {
        let t = Tree::from_source(&src, split).unwrap();
        check_carray(&t, "", &sc, &src.display().to_string());
    }
}

#[test]
fn tree_frames_meta_files_match_reference() {
    for (src, sc) in frame_fixtures() {
        let t = tree(&src);
        let ctx = src.display().to_string();

        let attrs = json_at(&t, "__attrs__");
        assert_eq!(attrs, sc["vlmeta"], "{ctx}: __attrs__");

        let sizes = json_at(&t, "meta/sizes");
        assert_eq!(sizes["nbytes"], sc["nbytes"], "{ctx}: nbytes");
        assert_eq!(sizes["cbytes"], sc["cbytes"], "{ctx}: cbytes");
        assert_eq!(sizes["nchunks"], sc["nchunks"], "{ctx}: nchunks");
        let want_shape = if sc["shape"].is_null() {
            match sc["metalayers"].get("caterva") {
                Some(cat) => cat[2].clone(),
                None => Value::from(vec![
                    sc["nbytes"].as_u64().unwrap() / sc["typesize"].as_u64().unwrap(),
                ]),
            }
        } else {
            sc["shape"].clone()
        };
        assert_eq!(sizes["shape"], want_shape, "{ctx}: shape");

        for (name, want) in sc["metalayers"].as_object().unwrap() {
            let got = json_at(&t, &format!("meta/metalayers/{name}"));
            // b2nd and caterva are shown with named fields, in the stored array's order.
            let fields: &[&str] = match name.as_str() {
                "b2nd" => &[
                    "version",
                    "ndim",
                    "shape",
                    "chunkshape",
                    "blockshape",
                    "dtype_format",
                    "dtype",
                ],
                "caterva" => &["version", "ndim", "shape", "chunkshape", "blockshape"],
                _ => &[],
            };
            if fields.is_empty() {
                assert_eq!(&got, want, "{ctx}: metalayer {name}");
            } else {
                let want = want.as_array().unwrap();
                assert_eq!(got.as_object().unwrap().len(), want.len(), "{ctx}: {name}");
                for (k, w) in fields.iter().zip(want) {
                    assert_eq!(&got[*k], w, "{ctx}: metalayer {name}.{k}");
                }
            }
        }

        let storage = json_at(&t, "meta/storage");
        assert_eq!(storage["typesize"], sc["typesize"], "{ctx}: typesize");
        // An empty frame's header says "not initialised" (-1): b2fs shows 0.
        if sc["layout"]["header_chunksize"].as_i64() != Some(-1) {
            assert_eq!(storage["chunksize"], sc["chunksize"], "{ctx}: chunksize");
        }
        if !sc["chunks"].is_null() {
            assert_eq!(storage["chunkshape"], sc["chunks"], "{ctx}: chunkshape");
            assert_eq!(storage["blockshape"], sc["blocks"], "{ctx}: blockshape");
        }
        let cp = &storage["cparams"];
        let want = &sc["cparams"];
        assert_eq!(cp["clevel"], want["clevel"], "{ctx}: clevel");
        assert_eq!(cp["clevel_source"], "frame header");
        assert_eq!(cp["splitmode"], want["splitmode"], "{ctx}: splitmode");
        // codec and filters come from the first regular chunk's header: they agree with the
        // handle's parameters for every fixture written in one go.
        if cp["cparams_source"] == "chunk header" && !MIXED.iter().any(|m| ctx.contains(m)) {
            assert_eq!(cp["codec"], want["codec"], "{ctx}: codec");
            assert_eq!(cp["filters"], want["filters"], "{ctx}: filters");
            assert_eq!(
                cp["filters_meta"], want["filters_meta"],
                "{ctx}: filters_meta"
            );
        }
    }
}

#[test]
fn tree_reads_at_odd_offsets_and_lengths_return_reference_bytes() {
    let src = data_dir().join("frames/schunk_zstd.b2frame");
    let whole = {
        let t = tree(&src);
        read_path(&t, "data/00000000.bin")
    };
    assert!(whole.len() > 40_000);
    // A fresh tree per pass: the first pass reads cold (range decodes), the second warm.
    let t = tree(&src);
    let ino = ino_of(&t, "data/00000000.bin");
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let len = whole.len() as u64;
    let windows = [
        (1u64, 1u32),
        (4095, 2),
        (12_345, 777),
        (len - 3, 100),
        (len, 10),
        (len + 100, 10),
        (0, u32::MAX),
        (33_333, 65_536),
        (7, 4096),
    ];
    for pass in 0..2 {
        for &(off, size) in &windows {
            let got = t.read(ino, fh, off, size).unwrap();
            let start = (off.min(len)) as usize;
            let end = (off.saturating_add(u64::from(size))).min(len) as usize;
            assert_eq!(
                &got[..],
                &whole[start..end],
                "pass {pass} window ({off}, {size})"
            );
        }
    }
    t.release(fh).unwrap();
}

#[test]
fn tree_small_cold_read_in_large_chunk_decodes_range_only() {
    let src = data_dir().join("frames/schunk_zstd.b2frame");
    let t = tree_without_prefetch(&src);
    let ino = ino_of(&t, "data/00000001.bin");
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let got = t.read(ino, fh, 20_000, 100).unwrap();
    assert_eq!(got.len(), 100);
    assert_eq!(
        t.cache_stats().loads,
        0,
        "a small random read must not decode the chunk"
    );
    // A sequential continuation switches to whole-chunk decoding through the cache.
    let _ = t.read(ino, fh, 20_100, 100).unwrap();
    assert_eq!(t.cache_stats().loads, 1);
    t.release(fh).unwrap();
}

/// A small first read at offset 0 (`head -c`, a magic-number sniffer) decodes only the block
/// it falls in and prefetches nothing; reading on from there is a scan.
#[test]
fn tree_small_first_read_at_offset_zero_is_not_a_scan() {
    let src = data_dir().join("frames/schunk_zstd.b2frame");
    let t = tree(&src); // prefetch on
    let ino = ino_of(&t, "data/00000001.bin");
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let head = t.read(ino, fh, 0, 100).unwrap().to_vec();
    // A scan of chunk 0 on another tree, started after the head read, prefetches chunk 1:
    // once it has, a prefetch the head read had asked for would have run too.
    let control = tree(&src);
    read_all(&control, ino_of(&control, "data/00000000.bin"), 1 << 20).unwrap();
    wait_for_loads(&control, 2);
    assert_eq!(
        t.cache_stats().loads,
        0,
        "no whole-chunk decode or prefetch for a 100-byte head"
    );
    let next = t.read(ino, fh, 100, 100).unwrap().to_vec();
    assert!(t.cache_stats().loads >= 1, "reading on is a scan");
    t.release(fh).unwrap();
    let whole = read_path(&t, "data/00000001.bin");
    assert_eq!(head, &whole[..100]);
    assert_eq!(next, &whole[100..200]);
}

/// Chunk file 1 of a python-blosc2 LZ4 b2nd whose chunks are 10,240 bytes in four
/// 2,560-byte blocks: its bytes, read through a tree of its own, and a tree without prefetch
/// (small reads go by block) with the file opened read-only (inode, handle).
fn chunk_opened_without_prefetch() -> (Vec<u8>, Tree, u64, u64) {
    let src = data_dir().join("frames/b2nd_2d_f8_lz4.b2nd");
    let whole = {
        let t = tree(&src);
        read_path(&t, "data/00000001.bin")
    };
    let t = Tree::from_source(
        &src,
        TreeOptions {
            prefetch_chunks: 0,
            ..opts()
        },
    )
    .unwrap();
    let ino = ino_of(&t, "data/00000001.bin");
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    (whole, t, ino, fh)
}

/// Random small reads decode whole blocks once and serve re-reads of the same blocks from
/// the block cache, with the reference bytes, and never decode the whole chunk.
#[test]
fn tree_random_small_reads_cache_decoded_blocks() {
    let (whole, t, ino, fh) = chunk_opened_without_prefetch();
    let len = whole.len() as u64;
    let mut st = 99u64;
    let windows: Vec<(u64, u32)> = (0..200)
        .map(|_| {
            st = st
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((st >> 33) % (len - 600), 1 + ((st >> 13) % 300) as u32)
        })
        .collect();
    for pass in 0..2 {
        for &(off, size) in &windows {
            // Never sequential: each read starts away from where the last one ended.
            let got = t.read(ino, fh, off, size).unwrap();
            let (s, e) = (off as usize, (off + u64::from(size)).min(len) as usize);
            assert_eq!(&got[..], &whole[s..e], "pass {pass} window ({off}, {size})");
        }
        let b = t.block_cache_stats();
        assert!(b.loads > 0, "pass {pass}: blocks were never cached: {b:?}");
        if pass == 0 {
            assert!(b.hits > 0, "200 reads over a few blocks never hit: {b:?}");
        }
    }
    let after_first = t.block_cache_stats();
    for &(off, size) in &windows {
        let _ = t.read(ino, fh, off, size).unwrap();
    }
    let b = t.block_cache_stats();
    assert_eq!(
        b.loads, after_first.loads,
        "a warm pass decoded again: {b:?}"
    );
    assert_eq!(t.cache_stats().loads, 0, "the whole chunk was decoded");
    t.release(fh).unwrap();
}

/// A small read that straddles two blocks decodes each of them once into the block cache
/// and is served from both: read again, it decodes nothing.
#[test]
fn tree_small_read_across_a_block_boundary_caches_both_blocks() {
    let (whole, t, ino, fh) = chunk_opened_without_prefetch();
    // Across the boundary of blocks 1 and 2, away from the chunk's start (not a scan).
    let (off, size) = (2 * 2560 - 100, 300u32);
    let got = t.read(ino, fh, off as u64, size).unwrap();
    assert_eq!(&got[..], &whole[off..off + size as usize]);
    let first = t.block_cache_stats();
    assert_eq!(first.loads, 2, "each block decoded once: {first:?}");
    let again = t.read(ino, fh, off as u64, size).unwrap();
    assert_eq!(&again[..], &whole[off..off + size as usize]);
    let b = t.block_cache_stats();
    assert_eq!(b.loads, 2, "the re-read decoded again: {b:?}");
    assert!(
        b.hits >= first.hits + 2,
        "the re-read missed the blocks: {b:?}"
    );
    assert_eq!(t.cache_stats().loads, 0, "the whole chunk was decoded");
    t.release(fh).unwrap();
}

/// A committed edit is what small random reads of a handle opened after it see, though the
/// old blocks were cached; the handle opened before keeps its version (issue 12).
#[test]
fn tree_block_cache_forgets_a_chunk_when_it_is_committed() {
    let (_dir, src) = fixture_copy("frames/b2nd_2d_f8_lz4.b2nd");
    let t = Tree::from_source(
        &src,
        TreeOptions {
            writable: true,
            prefetch_chunks: 0,
            ..opts()
        },
    )
    .unwrap();
    let ino = ino_of(&t, "data/00000000.bin");
    let size = t.getattr(ino).unwrap().size as usize;
    let reader = t.open(ino, libc::O_RDONLY).unwrap();
    let window = |t: &Tree| t.read(ino, reader, 3000, 64).unwrap().to_vec();
    let old = window(&t);
    assert_eq!(window(&t), old);
    assert!(
        t.block_cache_stats().hits > 0,
        "{:?}",
        t.block_cache_stats()
    );
    let new: Vec<u8> = (0..size).map(|i| (i * 13 + 5) as u8).collect();
    assert_ne!(&new[3000..3064], &old[..]);
    let fh = t.open(ino, libc::O_WRONLY).unwrap();
    assert_eq!(t.write(ino, fh, 0, &new).unwrap() as usize, size);
    t.flush(ino, fh).unwrap();
    t.release(fh).unwrap();
    assert_eq!(
        window(&t),
        old,
        "the handle opened before keeps its version"
    );
    let fresh = t.open(ino, libc::O_RDONLY).unwrap();
    assert_eq!(
        t.read(ino, fresh, 3000, 64).unwrap().to_vec(),
        &new[3000..3064]
    );
    t.release(fresh).unwrap();
    t.release(reader).unwrap();
}

/// Small random reads keep the 4 KiB pages they asked for: a second pass over the same
/// offsets is served from the page cache (no block decoded or even looked up again), with the
/// bytes python-blosc2 reports; a committed edit replaces them.
#[test]
fn tree_random_reads_keep_their_pages_until_a_commit() {
    let py = or_skip!(python("tree_random_reads_keep_their_pages_until_a_commit"));
    let (_dir, src) = crate::support::temp_path("pages.b2frame");
    let code = r#"
import sys, blosc2, numpy as np
s = blosc2.SChunk(chunksize=256 * 1024, urlpath=sys.argv[1], contiguous=True, mode="w",
                  cparams=blosc2.CParams(typesize=8, codec=blosc2.Codec.ZSTD, clevel=5,
                                         blocksize=32 * 1024, filters=[blosc2.Filter.SHUFFLE]))
x = np.sin(np.arange(4 * 32 * 1024, dtype=np.float64) / 100.0)
for i in range(4):
    s.append_data(x[i * 32 * 1024:(i + 1) * 32 * 1024])
"#;
    run_python(&py, &["-c", code, src.to_str().unwrap()]);
    let want: Vec<Vec<u8>> = {
        let out = crate::support::oracle(
            &py,
            &[
                &"-c",
                &"import sys, blosc2; s = blosc2.open(sys.argv[1]); sys.stdout.buffer.write(b''.join(s.decompress_chunk(i) for i in range(s.nchunks)))",
                &src,
            ],
        );
        out.chunks(256 * 1024).map(<[u8]>::to_vec).collect()
    };
    assert_eq!(want.len(), 4);
    let t = Tree::from_source(
        &src,
        TreeOptions {
            writable: true,
            prefetch_chunks: 0,
            ..opts()
        },
    )
    .unwrap();
    let ino = ino_of(&t, "data/00000002.bin");
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    // Page-aligned 4 KiB reads in a scattered order, then a few unaligned ones.
    let mut windows: Vec<(u64, u32)> = (1..64u64).map(|k| ((k * 37 % 64) * 4096, 4096)).collect();
    windows.extend([(100, 50), (4000, 200), (65_000, 3000)]);
    let check_fh = |t: &Tree, fh: u64, want: &[u8]| {
        for &(off, size) in &windows {
            let got = t.read(ino, fh, off, size).unwrap();
            let (s, e) = (off as usize, off as usize + size as usize);
            assert_eq!(&got[..], &want[s..e], "window ({off}, {size})");
        }
    };
    let check = |t: &Tree, want: &[u8]| check_fh(t, fh, want);
    check(&t, &want[2]);
    // The pages are copied into the page cache off the reads' path.
    assert!(
        crate::support::wait_until(std::time::Duration::from_secs(10), || t.pages_settled()),
        "the pages were never kept"
    );
    let (pages, blocks) = (t.page_cache_stats(), t.block_cache_stats());
    check(&t, &want[2]);
    let (pages2, blocks2) = (t.page_cache_stats(), t.block_cache_stats());
    assert!(
        pages2.hits >= pages.hits + 63,
        "second pass missed pages: {pages:?} -> {pages2:?}"
    );
    assert_eq!(blocks2.loads, blocks.loads, "a block was decoded again");
    assert_eq!(t.cache_stats().loads, 0, "the whole chunk was decoded");
    // A commit of new content: a handle opened after it sees it, not what the pages held;
    // the handle opened before keeps its version.
    let new: Vec<u8> = (0..256 * 1024).map(|i| (i * 7 + 1) as u8).collect();
    let w = t.open(ino, libc::O_WRONLY).unwrap();
    assert_eq!(t.write(ino, w, 0, &new).unwrap() as usize, new.len());
    t.flush(ino, w).unwrap();
    t.release(w).unwrap();
    let fresh = t.open(ino, libc::O_RDONLY).unwrap();
    check_fh(&t, fresh, &new);
    check(&t, &want[2]);
    t.release(fresh).unwrap();
    t.release(fh).unwrap();
}

#[test]
fn tree_sequential_read_prefetches_next_chunk() {
    let src = data_dir().join("frames/schunk_lz4.b2frame");
    let t = tree(&src);
    let _ = read_path(&t, "data/00000000.bin");
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.cache_stats().loads < 3 {
        assert!(
            Instant::now() < deadline,
            "prefetch did not run: {:?}",
            t.cache_stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Reading chunk 1 now is a cache hit, not a new decode.
    let before = t.cache_stats().loads;
    let _ = read_path(&t, "data/00000001.bin");
    assert_eq!(t.cache_stats().loads, before);
}

/// The small-cache fixture: twelve chunks of 576 bytes, its sidecar, and a tree over it whose
/// cache budget is `cache_in_chunks` chunk sizes (9/16 of it holds decoded chunks).
fn small_cache_tree(cache_in_chunks: f64) -> (Tree, Value, usize) {
    let src = data_dir().join("frames/b2nd_3d_f4_pad.b2nd");
    let sc = sidecar(&data_dir().join("frames/b2nd_3d_f4_pad.json"));
    let n = sc["chunk_list"].as_array().unwrap().len();
    let size = sc["chunk_list"][0]["nbytes"].as_u64().unwrap() as f64;
    let o = TreeOptions {
        cache_size: (size * cache_in_chunks) as usize,
        ..opts()
    };
    (Tree::from_source(&src, o).unwrap(), sc, n)
}

/// Reads chunk file `i` in `step`-byte reads and checks it against the sidecar.
fn read_checked(t: &Tree, sc: &Value, i: usize, step: u32) {
    let got = read_all(t, ino_of(t, &format!("data/{}", chunk_name(i))), step).unwrap();
    assert_eq!(
        sha256_hex(&got),
        sc["chunk_list"][i]["sha256"].as_str().unwrap(),
        "chunk {i}"
    );
}

/// Waits until `loads` decodes have happened (the prefetches a read asked for).
fn wait_for_loads(t: &Tree, loads: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.cache_stats().loads < loads {
        assert!(Instant::now() < deadline, "prefetch did not run");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A scan whose cache holds only a few chunks still decodes each chunk once: prefetch goes no
/// deeper than the cache holds, and the chunks already streamed make room first. (With 8 MiB
/// chunks and `cache_size=64M`, 116 of 512 chunks used to be decoded twice.)
#[test]
fn tree_scan_with_a_small_cache_decodes_each_chunk_once() {
    // Room for three chunks among decoded chunks: two of prefetch.
    let (t, sc, n) = small_cache_tree(7.0);
    for i in 0..n {
        read_checked(&t, &sc, i, 1 << 20);
        // Let the prefetch of the next two chunks finish before reading on, so that the
        // reader never decodes a chunk itself.
        wait_for_loads(&t, (i + 3).min(n) as u64);
    }
    let st = t.cache_stats();
    assert_eq!(st.loads, n as u64, "each chunk decoded once: {st:?}");
    assert!(
        st.hits >= n as u64 - 1,
        "chunks 1.. come from prefetch: {st:?}"
    );
}

/// Scanning the same chunks again with a small cache: the second pass finds its chunks
/// remembered (2Q ghosts), so they are not streamed and eviction is by recency. Chunks
/// prefetched but not read yet must still outlive the ones already read.
#[test]
fn tree_second_scan_with_a_small_cache_decodes_each_chunk_once_more() {
    let (t, sc, n) = small_cache_tree(7.0);
    for pass in 1..=2u64 {
        for i in 0..n {
            read_checked(&t, &sc, i, 200);
            wait_for_loads(&t, (pass - 1) * n as u64 + (i as u64 + 3).min(n as u64));
        }
        let st = t.cache_stats();
        assert_eq!(st.loads, pass * n as u64, "pass {pass}: {st:?}");
    }
}

/// A scan from the last chunk down (the order Dask computes an array's chunks in) prefetches
/// the chunks below the one it reads, and decodes each chunk once: prefetching the ones above
/// would decode again the chunks it has just read.
#[test]
fn tree_descending_scan_prefetches_downwards_and_decodes_each_chunk_once() {
    let (t, sc, n) = small_cache_tree(7.0);
    for (k, i) in (0..n).rev().enumerate() {
        read_checked(&t, &sc, i, 1 << 20);
        // From the second chunk on the scan goes down: the two chunks below are prefetched.
        if k > 0 {
            wait_for_loads(&t, (k + 3).min(n) as u64);
        }
    }
    let st = t.cache_stats();
    assert_eq!(st.loads, n as u64, "each chunk decoded once: {st:?}");
    assert!(st.hits >= n as u64 - 3, "chunks come from prefetch: {st:?}");
}

/// A cache with room for one chunk only: prefetching the next chunk would evict the one being
/// read, between its pieces. No prefetch then, and each chunk is decoded once.
#[test]
fn tree_cache_of_one_chunk_does_not_prefetch_over_the_reader() {
    let (t, sc, n) = small_cache_tree(2.5);
    for i in 0..n {
        read_checked(&t, &sc, i, 100);
    }
    // A tree with room for more, reading chunk 0 after those reads, prefetches the next two:
    // once it has, a prefetch the reads above had asked for would have run too.
    let (control, _, _) = small_cache_tree(7.0);
    read_checked(&control, &sc, 0, 1 << 20);
    wait_for_loads(&control, 3.min(n as u64));
    let st = t.cache_stats();
    assert_eq!(st.loads, n as u64, "each chunk decoded once: {st:?}");
}

#[test]
fn tree_concurrent_readers_decode_each_chunk_once() {
    let src = data_dir().join("frames/schunk_zlib.b2frame");
    let sc = sidecar(&data_dir().join("frames/schunk_zlib.json"));
    let t = Arc::new(
        Tree::from_source(
            &src,
            TreeOptions {
                prefetch_chunks: 0,
                ..opts()
            },
        )
        .unwrap(),
    );
    let nchunks = sc["nchunks"].as_u64().unwrap() as usize;
    let handles: Vec<_> = (0..6)
        .map(|k| {
            let t = t.clone();
            let sc = sc.clone();
            std::thread::spawn(move || {
                for j in 0..nchunks {
                    let i = (j + k) % nchunks;
                    let ino = ino_of(&t, &format!("data/{}", chunk_name(i)));
                    let bytes = read_all(&t, ino, 1 << 20).unwrap();
                    assert_eq!(
                        sha256_hex(&bytes),
                        sc["chunk_list"][i]["sha256"].as_str().unwrap()
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // Single flight: a chunk is decoded again only after it left the cache (a chunk one
    // reader streamed to its end may be evicted early to recycle its buffer), never because
    // two readers raced on it.
    let st = t.cache_stats();
    assert!(st.loads >= nchunks as u64, "{st:?}");
    assert!(st.loads <= nchunks as u64 + st.evictions, "{st:?}");
    assert!(st.waits + st.hits > 0, "{st:?}");
}

#[test]
fn tree_tiny_cache_still_returns_reference_bytes() {
    let src = data_dir().join("frames/schunk_zstd.b2frame");
    let sc = sidecar(&data_dir().join("frames/schunk_zstd.json"));
    let t = Tree::from_source(
        &src,
        TreeOptions {
            cache_size: 1000,
            ..opts()
        },
    )
    .unwrap();
    for _ in 0..2 {
        for c in sc["chunk_list"].as_array().unwrap() {
            let i = c["index"].as_u64().unwrap() as usize;
            let bytes = read_path(&t, &format!("data/{}", chunk_name(i)));
            assert_eq!(sha256_hex(&bytes), c["sha256"].as_str().unwrap());
        }
    }
    assert!(t.cache_bytes() <= 1000, "{}", t.cache_bytes());
}

// ---------------------------------------------------------------------------------------------
// bcolz
// ---------------------------------------------------------------------------------------------

/// Checks one carray tree rooted at `prefix` against its sidecar description.
fn check_carray(t: &Tree, prefix: &str, sc: &Value, ctx: &str) {
    let p = |s: &str| format!("{prefix}{s}");
    assert!(names(t, ino_of(t, &p(""))).len() >= 3);
    assert_eq!(json_at(t, &p("__attrs__")), sc["attrs"], "{ctx}: attrs");
    let sizes = json_at(t, &p("meta/sizes"));
    for (k, v) in sc["sizes"].as_object().unwrap() {
        assert_eq!(&sizes[k], v, "{ctx}: sizes.{k} kept");
    }
    let storage = json_at(t, &p("meta/storage"));
    for (k, v) in sc["storage"].as_object().unwrap() {
        if k == "cparams" {
            for (ck, cv) in v.as_object().unwrap() {
                assert_eq!(
                    &storage["cparams"][ck], cv,
                    "{ctx}: storage.cparams.{ck} kept"
                );
            }
        } else {
            assert_eq!(&storage[k], v, "{ctx}: storage.{k} kept");
        }
    }
    assert_eq!(storage["cparams"]["clevel_source"], "bcolz storage");
    assert!(storage["typesize"].is_u64() && storage["chunksize"].is_u64());
    let files = names(t, ino_of(t, &p("data")));
    let len = sc["len"].as_u64().unwrap();
    let chunklen = sc["chunklen"].as_u64().unwrap();
    assert_eq!(files.len() as u64, len.div_ceil(chunklen), "{ctx}: nchunks");
    assert_eq!(sizes["nchunks"].as_u64(), Some(files.len() as u64));
    let mut all = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let bytes = read_path(t, &p(&format!("data/{f}")));
        let want = &sc["chunk_files"][i];
        if want["nbytes"].as_u64() == Some(bytes.len() as u64) {
            assert_eq!(
                sha256_hex(&bytes),
                want["sha256"].as_str().unwrap(),
                "{ctx}: {f}"
            );
        }
        all.extend_from_slice(&bytes);
    }
    assert_eq!(
        sha256_hex(&all),
        sc["array_sha256"].as_str().unwrap(),
        "{ctx}: data"
    );
}

#[test]
fn tree_bcolz_carrays_match_reference() {
    for (src, sc) in bcolz_fixtures("carray") {
        let t = tree(&src);
        assert_eq!(
            names(&t, ROOT_INO),
            ["__attrs__", "array.npy", "meta", "data", "zarr"]
        );
        check_carray(&t, "", &sc, &src.display().to_string());
    }
}

#[test]
fn tree_bcolz_ctables_show_one_tree_per_column_in_rootdirs_order() {
    for (src, sc) in bcolz_fixtures("ctable") {
        let t = tree(&src);
        let mut want = vec!["__attrs__".to_owned()];
        want.extend(
            sc["rootdirs"]["names"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_owned()),
        );
        want.push("table.npy".to_owned());
        want.push("zarr".to_owned());
        assert_eq!(names(&t, ROOT_INO), want);
        assert_eq!(json_at(&t, "__attrs__"), sc["attrs"]);
        for (name, col) in sc["columns"].as_object().unwrap() {
            check_carray(
                &t,
                &format!("{name}/"),
                col,
                &format!("{}:{name}", src.display()),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// directory semantics, handles, errnos
// ---------------------------------------------------------------------------------------------

#[test]
fn tree_readdir_paging_with_tiny_buffers_is_exact() {
    let t = tree(&data_dir().join("bcolz/ctable_3cols"));
    for dir in ["", "id", "id/meta", "val/data"] {
        let ino = ino_of(&t, dir);
        let full: Vec<_> = t.readdir(ino, 0).unwrap().collect();
        assert_eq!(full[0].name, ".");
        assert_eq!(full[1].name, "..");
        for page in 1..=3 {
            let mut got = Vec::new();
            let mut off = 0;
            loop {
                let chunk: Vec<_> = t.readdir(ino, off).unwrap().take(page).collect();
                if chunk.is_empty() {
                    break;
                }
                off = chunk.last().unwrap().next_offset;
                got.extend(chunk);
            }
            assert_eq!(got, full, "{dir} page {page}");
        }
        // Every entry's lookup agrees with the listing.
        for e in &full[2..] {
            let a = t.lookup(ino, &e.name).unwrap();
            assert_eq!((a.ino, a.kind), (e.ino, e.kind));
        }
    }
}

#[test]
fn tree_attrs_are_consistent_and_read_only() {
    let src = repo_root().join("examples/sample.b2nd");
    let t = tree(&src);
    let mtime = std::fs::metadata(&src).unwrap().modified().unwrap();
    let root = t.getattr(ROOT_INO).unwrap();
    assert_eq!(root.kind, EntryKind::Directory);
    assert_eq!(root.perm, 0o555);
    assert_eq!(root.nlink, 4, "root has meta/ and data/");
    assert_eq!(root.mtime, mtime);
    let f = t.lookup(ino_of(&t, "meta"), "sizes").unwrap();
    assert_eq!(f.perm, 0o444);
    assert_eq!(f.size, read_path(&t, "meta/sizes").len() as u64);
    assert_eq!(t.lookup(ROOT_INO, "..").unwrap().ino, ROOT_INO);
    assert_eq!(t.lookup(ino_of(&t, "meta"), "..").unwrap().ino, ROOT_INO);
    let s = t.statfs();
    assert!(s.files >= 11 && s.blocks > 0);
}

#[test]
fn tree_errors_map_to_errnos() {
    let t = tree(&repo_root().join("examples/sample.b2nd"));
    let data = ino_of(&t, "data");
    let chunk = ino_of(&t, "data/00000000.bin");
    let sizes = ino_of(&t, "meta/sizes");
    assert_eq!(errno(t.lookup(ROOT_INO, "nope")), libc::ENOENT);
    assert_eq!(errno(t.lookup(data, "00000004.bin")), libc::ENOENT);
    assert_eq!(errno(t.lookup(data, "4.bin")), libc::ENOENT);
    assert_eq!(errno(t.lookup(data, &"x".repeat(300))), libc::ENAMETOOLONG);
    assert_eq!(errno(t.lookup(sizes, "x")), libc::ENOTDIR);
    assert_eq!(errno(t.lookup(chunk, "x")), libc::ENOTDIR);
    assert_eq!(errno(t.getattr(999_999)), libc::ENOENT);
    assert_eq!(errno(t.getattr(0)), libc::ENOENT);
    assert_eq!(errno(t.readdir(chunk, 0)), libc::ENOTDIR);
    assert_eq!(errno(t.open(chunk, libc::O_WRONLY)), libc::EROFS);
    assert_eq!(errno(t.open(chunk, libc::O_RDWR)), libc::EROFS);
    assert_eq!(
        errno(t.open(chunk, libc::O_RDONLY | libc::O_TRUNC)),
        libc::EROFS
    );
    assert_eq!(errno(t.open(data, libc::O_RDONLY)), libc::EISDIR);
    assert_eq!(errno(t.read(chunk, 12345, 0, 10)), libc::EBADF);
    assert_eq!(errno(t.release(12345)), libc::EBADF);
    assert_eq!(t.refusal(chunk, "write").errno(), libc::EROFS);
    assert_eq!(t.refusal(999_999, "write").errno(), libc::ENOENT);
    assert_eq!(errno(t.access(chunk, libc::W_OK)), libc::EROFS);
    assert!(t.access(chunk, libc::R_OK).is_ok());
    // A handle is bound to its inode.
    let fh = t.open(chunk, libc::O_RDONLY).unwrap();
    assert_eq!(errno(t.read(sizes, fh, 0, 10)), libc::EBADF);
    t.release(fh).unwrap();
    assert_eq!(t.open_handles(), 0);
}

// ---------------------------------------------------------------------------------------------
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

/// A copy of the fixture at `rel` (under the test data directory) in a fresh directory, for
/// tests that change the source.
fn fixture_copy(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(Path::new(rel).file_name().unwrap());
    std::fs::copy(data_dir().join(rel), &src).unwrap();
    (dir, src)
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

// ---------------------------------------------------------------------------------------------
// a synthetic source with a million chunks
// ---------------------------------------------------------------------------------------------

/// Chunks of `size` bytes of which none is ever read (listing and stat only).
#[derive(Debug)]
struct Phantom {
    nchunks: usize,
    size: usize,
}

impl ChunkStore for Phantom {
    fn path(&self) -> &Path {
        Path::new("/phantom")
    }
    fn nchunks(&self) -> usize {
        self.nchunks
    }
    fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError> {
        Ok(if index + 1 == self.nchunks {
            7
        } else {
            self.size
        })
    }
    fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError> {
        Err(ContainerError::NoSuchChunk {
            path: self.path().into(),
            index,
            nchunks: self.nchunks,
        })
    }
}

#[test]
fn tree_million_chunks_build_lazily_with_stable_inodes() {
    let n = 1_000_000;
    let start = Instant::now();
    let mut layout = Layout::new(Owner::of(Path::new("/")));
    layout.file(ROOT_INO, "__attrs__", b"{}\n".to_vec());
    let phantom = layout.store(Arc::new(Phantom {
        nchunks: n,
        size: 4096,
    }));
    let data = layout.data_dir(ROOT_INO, "data", phantom);
    let t = Tree::new(layout, opts());
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    let last = t.lookup(data, "00999999.bin").unwrap();
    assert_eq!(last.size, 7);
    let first = t.lookup(data, "00000000.bin").unwrap();
    assert_eq!(last.ino - first.ino, (n - 1) as u64);
    let tail: Vec<_> = t.readdir(data, 2 + n as u64 - 2).unwrap().collect();
    assert_eq!(tail.len(), 2);
    assert_eq!(tail[1].name, "00999999.bin");
    assert_eq!(tail[1].ino, last.ino);
    assert_eq!(t.readdir(data, 0).unwrap().len(), n + 2);
    assert_eq!(t.getattr(last.ino + 1).unwrap_err().errno(), libc::ENOENT);
    // A chunk whose bytes cannot be read is EIO, not a panic.
    let fh = t.open(first.ino, libc::O_RDONLY).unwrap();
    assert_eq!(t.read(first.ino, fh, 0, 10).unwrap_err().errno(), libc::EIO);
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

/// A writable tree without a kernel: a write is seen by reads (and the size) before the
/// commit, flush commits it, a fresh tree over the source sees it; a second read-only handle's
/// close commits nothing; bad `__attrs__` is EINVAL and restored at release; the errno of
/// each refused change.
#[test]
fn tree_writable_buffers_commit_on_flush_and_refuse_with_errnos() {
    let (_dir, src) = fixture_copy("frames/schunk_zstd.b2frame");
    let w = TreeOptions {
        writable: true,
        ..opts()
    };
    let t = Tree::from_source(&src, w).unwrap();
    let ino = ino_of(&t, "data/00000000.bin");
    let size = t.getattr(ino).unwrap().size;
    let old = read_all(&t, ino, 4096).unwrap();
    let fh = t.open(ino, libc::O_WRONLY).unwrap();
    let reader = t.open(ino, libc::O_RDONLY).unwrap();
    assert_eq!(t.write(ino, fh, 0, b"hello").unwrap(), 5);
    let mut want = old.clone();
    want[..5].copy_from_slice(b"hello");
    // The writing descriptor reads its buffer; a read-only one the committed version.
    assert_eq!(&t.read(ino, fh, 0, 8).unwrap()[..], &want[..8]);
    assert_eq!(read_all(&t, ino, 4096).unwrap(), old);
    assert_eq!(t.getattr(ino).unwrap().size, size);
    t.flush(ino, reader).unwrap(); // a read-only close commits nothing
    assert_eq!(
        read_all(&Tree::from_source(&src, opts()).unwrap(), ino, 4096).unwrap(),
        old
    );
    // past the chunk size: EFBIG (a middle chunk cannot grow)
    assert_eq!(
        t.write(ino, fh, size, b"x").unwrap_err().errno(),
        libc::EFBIG
    );
    t.flush(ino, fh).unwrap();
    t.release(fh).unwrap();
    t.release(reader).unwrap();
    assert_eq!(read_all(&t, ino, 4096).unwrap(), want);
    assert_eq!(
        read_all(&Tree::from_source(&src, opts()).unwrap(), ino, 4096).unwrap(),
        want
    );

    let attrs = ino_of(&t, "__attrs__");
    let stored = read_all(&t, attrs, 4096).unwrap();
    let fh = t.open(attrs, libc::O_WRONLY | libc::O_TRUNC).unwrap();
    t.write(attrs, fh, 0, b"[1]").unwrap();
    assert_eq!(t.fsync(attrs, fh).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(t.release(fh).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(read_all(&t, attrs, 4096).unwrap(), stored);

    let meta = ino_of(&t, "meta/sizes");
    assert_eq!(
        t.open(meta, libc::O_WRONLY).unwrap_err().errno(),
        libc::EACCES
    );
    let meta_dir = ino_of(&t, "meta");
    assert_eq!(t.create(meta_dir, "x").unwrap_err().errno(), libc::EPERM);
    // a scratch file of the root renamed over __attrs__ commits it
    let (a, fh) = t.create(ROOT_INO, "x.tmp").unwrap();
    t.write(a.ino, fh, 0, br#"{"k": 1}"#).unwrap();
    t.release(fh).unwrap();
    t.rename(ROOT_INO, "x.tmp", ROOT_INO, "__attrs__", false)
        .unwrap();
    assert!(t.lookup(ROOT_INO, "x.tmp").is_err());
    assert_eq!(read_all(&t, attrs, 4096).unwrap(), br#"{"k": 1}"#);
    assert_eq!(t.refusal(ROOT_INO, "mkdir").errno(), libc::EPERM);
    let data = ino_of(&t, "data");
    assert_eq!(
        t.unlink(data, "00000000.bin").unwrap_err().errno(),
        libc::EPERM
    );
    let ro = Tree::from_source(&src, opts()).unwrap();
    assert_eq!(ro.open(ino, libc::O_RDWR).unwrap_err().errno(), libc::EROFS);
}
