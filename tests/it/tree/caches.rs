//! Reads and the caches behind them: small cold reads decode only their blocks and keep them
//! (and their pages) until a commit; scans prefetch and, with a small cache, decode each chunk
//! once; concurrent readers share one decode; a tiny cache still returns the reference's bytes.

use super::*;

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
    let t = Tree::from_source(&src, no_prefetch(false)).unwrap();
    let ino = ino_of(&t, "data/00000001.bin");
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    (whole, t, ino, fh)
}

/// Random small reads decode whole blocks once and serve re-reads of the same blocks from
/// the block cache (or, until the pages thread has cached it, from the block decoded up to
/// its shuffle), with the reference bytes, and never decode the whole chunk.
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
        // A block decoded up to its shuffle is cached by the pages thread (`keep.rs`).
        assert!(
            crate::support::wait_until(std::time::Duration::from_secs(10), || t.pages_settled()),
            "the blocks were never cached"
        );
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
    let t = Tree::from_source(&src, no_prefetch(true)).unwrap();
    let ino = ino_of(&t, "data/00000000.bin");
    let size = t.getattr(ino).unwrap().size as usize;
    let reader = t.open(ino, libc::O_RDONLY).unwrap();
    let window = |t: &Tree| t.read(ino, reader, 3000, 64).unwrap().to_vec();
    let old = window(&t);
    assert_eq!(window(&t), old);
    // The block is cached by the pages thread (`keep.rs`).
    assert!(crate::support::wait_until(
        std::time::Duration::from_secs(10),
        || t.pages_settled()
    ));
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
    let t = Tree::from_source(&src, no_prefetch(true)).unwrap();
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
        reader: ReaderOptions {
            cache_size: (size * cache_in_chunks) as usize,
            ..opts().reader
        },
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
    let t = Arc::new(Tree::from_source(&src, no_prefetch(false)).unwrap());
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
            reader: ReaderOptions {
                cache_size: 1000,
                ..opts().reader
            },
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
