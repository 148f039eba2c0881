//! Issue 25: cold small reads of chunk files read only the header, the block-start table and
//! the streams of the blocks they need from the source (`pread`), never the source's mapping
//! nor the whole chunk, and answer python-blosc2's bytes: inside a block, across two blocks,
//! and in the short chunk at the end of the array. The header and table are read once per
//! chunk version: later cold reads of the chunk read their streams alone, and a chunk another
//! writer rewrote is read anew.

use std::sync::Arc;

use b2fs::container::{self, Array, Container};
use b2fs::reader::{ArrayId, ChunkId, ChunkReader, ChunkStore, ReadHint, ReaderOptions};

use b2fs::tree::Tree;

use crate::consistency::{ino_of, ro};
use crate::support::{oracle, python, run_python, temp_path};

/// Bytes of a chunk (64 Ki float64) and of a block (4 Ki float64).
const CHUNK: usize = 512 * 1024;
const BLOCK: usize = 32 * 1024;
/// The last chunk: three whole blocks and a short one.
const LAST: usize = 3 * BLOCK + 4096 + 808;

/// A frame python-blosc2 writes: ZSTD + SHUFFLE float64, blocks of [`BLOCK`] bytes, three
/// chunks of [`CHUNK`] bytes of noise (so each compresses to more than 256 KiB, what a
/// mapped range decode counts as read) and a last chunk of [`LAST`] bytes; and its chunks
/// as python-blosc2 decompresses them.
fn python_frame(py: &std::path::Path, path: &std::path::Path) -> Vec<Vec<u8>> {
    let code = format!(
        r#"
import sys, blosc2, numpy as np
s = blosc2.SChunk(chunksize={CHUNK}, urlpath=sys.argv[1], contiguous=True, mode="w",
                  cparams=blosc2.CParams(typesize=8, codec=blosc2.Codec.ZSTD, clevel=5,
                                         blocksize={BLOCK}, filters=[blosc2.Filter.SHUFFLE]))
x = np.random.default_rng(25).standard_normal(3 * {CHUNK} // 8 + {LAST} // 8)
for i in range(4):
    s.append_data(x[i * {CHUNK} // 8:(i + 1) * {CHUNK} // 8])
"#
    );
    run_python(py, &["-c", &code, path.to_str().unwrap()]);
    let out = oracle(
        py,
        &[
            &"-c",
            &"import sys, blosc2; s = blosc2.open(sys.argv[1]); sys.stdout.buffer.write(b''.join(s.decompress_chunk(i) for i in range(s.nchunks)))",
            &path,
        ],
    );
    assert_eq!(out.len(), 3 * CHUNK + LAST);
    out.chunks(CHUNK).map(<[u8]>::to_vec).collect()
}

/// [`python_frame`] in a temporary directory (kept while the first value lives), its chunks
/// as python-blosc2 decompresses them, and the frame opened.
fn python_array(py: &std::path::Path) -> (tempfile::TempDir, Vec<Vec<u8>>, Arc<Array>) {
    let (dir, src) = temp_path("small.b2frame");
    let want = python_frame(py, &src);
    let array = match container::open(&src).unwrap() {
        Container::Array(a) => Arc::new(a),
        Container::Table(_) => panic!("not an array"),
    };
    (dir, want, array)
}

/// A reader of `array` alone, without prefetch.
fn reader_of(array: &Arc<Array>) -> ChunkReader {
    let store: Arc<dyn ChunkStore> = array.clone();
    ChunkReader::new(
        vec![store],
        ReaderOptions {
            cache_size: 64 << 20,
            prefetch_chunks: 0,
            prefetch_threads: 0,
            range_factor: 4,
            decode_threads: 1,
            parallel_decode_min: usize::MAX,
        },
    )
}

#[test]
fn cold_small_reads_read_only_their_blocks_and_answer_python_blosc2s_bytes() {
    let py = or_skip!(python(
        "cold_small_reads_read_only_their_blocks_and_answer_python_blosc2s_bytes"
    ));
    let (_dir, want, array) = python_array(&py);
    for i in 0..3 {
        let cbytes = array.chunk_bytes(i).unwrap().len();
        assert!(cbytes > 256 << 10, "chunk {i} compresses to {cbytes} bytes");
    }
    let reader = reader_of(&array);
    let stats = array.io_stats();
    // (chunk, offset, size): inside one block; across blocks 5 and 6; the first and the
    // last bytes of a chunk; in the short last chunk, inside a block, across its last two
    // blocks, and a read cut short at its end.
    let cases: [(usize, usize, u32); 8] = [
        (1, 2 * BLOCK + 1000, 4096),
        (0, 6 * BLOCK - 2048, 4096),
        (2, 0, 4096),
        (2, CHUNK - 4096, 4096),
        (3, BLOCK + 8, 4096),
        (3, 3 * BLOCK - 100, 4096),
        (3, LAST - 4096, 4096),
        (3, LAST - 1000, 4096),
    ];
    for (chunk, offset, size) in cases {
        let id = ChunkId::new(ArrayId(0), chunk);
        let before = stats.bytes();
        let got = reader
            .read(id, offset as u64, size, ReadHint::RANDOM, || false)
            .unwrap();
        let end = (offset + size as usize).min(want[chunk].len());
        assert_eq!(
            &got[..],
            &want[chunk][offset..end],
            "chunk {chunk}, {size} bytes at {offset}"
        );
        // The streams of at most two blocks, the header and the block-start table: far less
        // than the chunk, and less than a range decode through the mapping counts.
        let read = stats.bytes() - before;
        assert!(
            read < 3 * BLOCK as u64,
            "chunk {chunk}, {size} bytes at {offset}: {read} bytes read from the source"
        );
        // Read again: from the caches, nothing read from the source.
        let before = stats.bytes();
        let again = reader
            .read(id, offset as u64, size, ReadHint::RANDOM, || false)
            .unwrap();
        assert_eq!(&again[..], &got[..]);
        assert_eq!(stats.bytes(), before, "a re-read read the source");
    }
    assert_eq!(reader.cache_stats().loads, 0, "a whole chunk was decoded");
}

/// A cold small read of a block of a chunk whose header and block-start table an earlier
/// read took makes one read call, of that block's streams alone.
#[test]
fn cold_small_reads_of_a_chunk_read_before_read_its_streams_alone() {
    let py = or_skip!(python(
        "cold_small_reads_of_a_chunk_read_before_read_its_streams_alone"
    ));
    let (_dir, want, array) = python_array(&py);
    let reader = reader_of(&array);
    let stats = array.io_stats();
    let read = |chunk: usize, offset: usize| {
        let id = ChunkId::new(ArrayId(0), chunk);
        let (reads, bytes) = (stats.reads(), stats.bytes());
        let got = reader
            .read(id, offset as u64, 4096, ReadHint::RANDOM, || false)
            .unwrap();
        assert_eq!(
            &got[..],
            &want[chunk][offset..offset + 4096],
            "chunk {chunk} at {offset}"
        );
        (stats.reads() - reads, stats.bytes() - bytes)
    };
    // The first read of a chunk reads its header and table, then its block's streams.
    let (first, _) = read(1, 2 * BLOCK + 1000);
    assert!(first >= 2, "{first} reads");
    // Each later cold block of it: one read, less than the block.
    for block in [9, 0, 15, 4] {
        let (reads, bytes) = read(1, block * BLOCK + 8);
        assert_eq!(reads, 1, "block {block}: {reads} read calls");
        assert!(bytes < BLOCK as u64, "block {block}: {bytes} bytes read");
    }
    // Two blocks at once: one read each.
    let (reads, _) = read(1, 7 * BLOCK - 2048);
    assert_eq!(reads, 2, "two blocks: {reads} read calls");
    assert_eq!(reader.cache_stats().loads, 0, "a whole chunk was decoded");
}

/// After python-blosc2 rewrote a chunk with another codec and blocks of half the size (a
/// new header and block-start table: another writer, followed by the tree), a small read of
/// it answers the new bytes, and a chunk it did not touch still answers its own.
#[test]
fn small_reads_after_another_writer_rewrote_a_chunk_read_its_new_header() {
    let py = or_skip!(python(
        "small_reads_after_another_writer_rewrote_a_chunk_read_its_new_header"
    ));
    let (_dir, src) = temp_path("small.b2frame");
    let before = python_frame(&py, &src);
    let t = Tree::from_source(&src, ro()).unwrap();
    let small_read = |chunk: usize, offset: u64| {
        let ino = ino_of(&t, &format!("data/{chunk:08}.bin"));
        let fh = t.open(ino, libc::O_RDONLY).unwrap();
        let got = t.read(ino, fh, offset, 4096).unwrap().to_vec();
        t.release(fh).unwrap();
        got
    };
    let at = 5 * BLOCK + 100;
    for chunk in [1, 2] {
        assert_eq!(small_read(chunk, at as u64), &before[chunk][at..at + 4096]);
    }
    let update = format!(
        r#"
import sys, blosc2, numpy as np
s = blosc2.open(sys.argv[1], mode="a")
x = np.random.default_rng(26).standard_normal({CHUNK} // 8)
s.update_chunk(1, blosc2.compress2(x.tobytes(), typesize=8, codec=blosc2.Codec.LZ4,
                                   blocksize={BLOCK} // 2, filters=[blosc2.Filter.SHUFFLE]))
sys.stdout.buffer.write(blosc2.open(sys.argv[1]).decompress_chunk(1))
"#
    );
    let now = run_python(&py, &["-c", &update, src.to_str().unwrap()]);
    assert_eq!(now.len(), CHUNK);
    assert_ne!(now[at..at + 4096], before[1][at..at + 4096]);
    assert!(t.follow_source(), "the change was not noticed");
    // Blocks read before and not: both from the new chunk.
    for offset in [at, 11 * BLOCK + 24] {
        assert_eq!(
            small_read(1, offset as u64),
            &now[offset..offset + 4096],
            "chunk 1 at {offset}"
        );
    }
    assert_eq!(small_read(2, at as u64), &before[2][at..at + 4096]);
    assert_eq!(t.cache_stats().loads, 0, "a whole chunk was decoded");
}
