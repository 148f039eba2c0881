//! Issue 12, what another writer changed, exactly: after python-blosc2 or bcolz changes a
//! source the tree serves, the chunks whose bytes did not change are served from the cache
//! without a decode, the changed ones show their new bytes, and only their chunk files (and
//! the generated files) are invalidated in the kernel; collections and ctable attributes are
//! followed too; a resized b2nd shows its new shape while a descriptor opened before keeps
//! its version.

use std::path::Path;
use std::time::Duration;

use b2fs::tree::{Invalidation, ReaderOptions, Tree};
use serde_json::Value;

use crate::consistency::{ino_of, json, py_chunk, read_fh, read_path, ro};
use crate::support::{python, run_python};

/// Decodes the tree did so far: whole chunks, blocks and pages loaded into its caches.
fn decodes(t: &Tree) -> u64 {
    t.cache_stats().loads + t.block_cache_stats().loads + t.page_cache_stats().loads
}

/// All of file `path` (a chunk file of at most 1 MiB), read through one descriptor: its second
/// half, then its first. Reads larger than a range decode's decode the chunk whole; not
/// starting at 0 keeps it out of the scan policy that recycles a chunk streamed once, so the
/// chunk stays cached.
fn read_whole(t: &Tree, path: &str) -> Vec<u8> {
    let ino = ino_of(t, path);
    let len = t.getattr(ino).unwrap().size;
    let fh = t.open(ino, libc::O_RDONLY).unwrap();
    let half = len / 2;
    let tail = t.read(ino, fh, half, 1 << 20).unwrap().to_vec();
    let mut out = t.read(ino, fh, 0, half as u32).unwrap().to_vec();
    out.extend_from_slice(&tail);
    assert_eq!(out.len() as u64, len);
    t.release(fh).unwrap();
    out
}

fn chunk(i: usize) -> String {
    format!("data/{i:08}.bin")
}

/// Reads every chunk file whole (caching all of them); returns their bytes.
fn read_all(t: &Tree, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| read_whole(t, &chunk(i))).collect()
}

/// After another writer changed chunks `changed` of a source the tree had wholly cached
/// (`before`: its chunks then, `now`: the reference library's chunks now), and the tree
/// noticed: the kernel is told to forget exactly those chunk files (and the generated
/// files), and reads of the other chunks return their bytes without any decode, while the
/// changed ones decode once each and return the new bytes.
fn check_exact(t: &Tree, before: &[Vec<u8>], now: &[Vec<u8>], changed: &[usize]) {
    let sent = t.follower().wait(Duration::ZERO);
    let sizes = ino_of(t, "meta/sizes");
    assert!(sent.contains(&Invalidation::Inode(sizes)), "{sent:?}");
    for i in 0..now.len() {
        let ino = Invalidation::Inode(ino_of(t, &chunk(i)));
        let gone = changed.contains(&i) || i >= before.len();
        assert_eq!(sent.contains(&ino), gone, "chunk {i}: {sent:?}");
    }
    let d = decodes(t);
    for i in (0..now.len()).filter(|i| !changed.contains(i) && *i < before.len()) {
        assert!(read_whole(t, &chunk(i)) == before[i], "chunk {i} kept");
        assert!(before[i] == now[i], "chunk {i} unchanged for the reference");
        assert!(
            t.keep_cache(ino_of(t, &chunk(i))),
            "chunk {i}: kernel cache kept"
        );
    }
    assert_eq!(decodes(t), d, "unchanged chunks were decoded again");
    for &i in changed {
        assert!(
            !t.keep_cache(ino_of(t, &chunk(i))),
            "chunk {i}: kernel cache dropped"
        );
        let got = read_whole(t, &chunk(i));
        assert!(got == now[i], "chunk {i} shows the new bytes");
        if i < before.len() {
            assert!(got != before[i], "chunk {i} changed");
        }
    }
    assert_eq!(
        decodes(t),
        d + changed.len() as u64,
        "one decode per changed chunk"
    );
}

/// A frame of 6 chunks of 100,000 random uint32 (incompressible: every chunk has the same
/// compressed size) but chunk 5, all zeros, made by python-blosc2; `contiguous` or sparse.
fn random_frame(py: &Path, path: &Path, contiguous: bool) {
    let code = "import sys, numpy as np, blosc2\n\
        d = np.random.default_rng(1).integers(0, 2**32, 600000, dtype=np.uint32)\n\
        d[500000:] = 0\n\
        blosc2.SChunk(chunksize=400000, data=d, urlpath=sys.argv[1], \
        contiguous=sys.argv[2] == '1', mode='w', cparams={'typesize': 4})\n";
    let flag = if contiguous { "1" } else { "0" };
    run_python(py, &["-c", code, path.to_str().unwrap(), flag]);
}

/// python-blosc2 `update_chunk` of chunk 3 with other random data of the same compressed
/// size (so it keeps its size and, in a contiguous frame, its offset); prints both sizes.
const UPDATE_3: &str = "import sys, numpy as np, blosc2\n\
    s = blosc2.open(sys.argv[1], mode='a')\n\
    old = len(s.get_chunk(3))\n\
    d = np.random.default_rng(2).integers(0, 2**32, 100000, dtype=np.uint32)\n\
    s.update_chunk(3, blosc2.compress2(d.tobytes(), typesize=4))\n\
    print(old, len(blosc2.open(sys.argv[1]).get_chunk(3)))\n";

fn update_middle_chunk(contiguous: bool, test: &str) {
    let py = or_skip!(python(test));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(if contiguous {
        "f.b2frame"
    } else {
        "f.b2frame.d"
    });
    random_frame(&py, &src, contiguous);
    let t = Tree::from_source(&src, ro()).unwrap();
    let before = read_all(&t, 6);
    for (i, b) in before.iter().enumerate() {
        assert!(*b == py_chunk(&py, &src, i), "chunk {i}");
    }
    let d = decodes(&t);
    assert!(read_all(&t, 6) == before);
    assert_eq!(decodes(&t), d, "all cached");
    let out = run_python(&py, &["-c", UPDATE_3, src.to_str().unwrap()]);
    let sizes: Vec<u64> = String::from_utf8_lossy(&out)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(
        sizes[0], sizes[1],
        "the updated chunk keeps its compressed size"
    );
    assert!(t.follow_source(), "the change was not noticed");
    let now: Vec<Vec<u8>> = (0..6).map(|i| py_chunk(&py, &src, i)).collect();
    check_exact(&t, &before, &now, &[3]);
    assert!(!t.follow_source(), "nothing changed since");
}

/// python-blosc2 updates the middle chunk of a contiguous frame (rewriting the file in place
/// from that chunk on): only that chunk is decoded again and invalidated.
#[test]
fn consistency_follow_update_of_a_middle_chunk_keeps_the_others_cached() {
    update_middle_chunk(
        true,
        "consistency_follow_update_of_a_middle_chunk_keeps_the_others_cached",
    );
}

/// The same for a sparse frame (one file per chunk).
#[test]
fn consistency_follow_sparse_update_keeps_the_other_chunks_cached() {
    update_middle_chunk(
        false,
        "consistency_follow_sparse_update_keeps_the_other_chunks_cached",
    );
}

/// python-blosc2 sets one element of a b2nd of 6 chunks of 8 blocks (ZSTD + SHUFFLE, written
/// on two threads, so blocks are stored in the order they finished), rewriting its chunk 3 in
/// place: the change is seen through the fingerprints the whole-chunk decodes took block by
/// block (on one thread, or split over two); the other chunks keep their cached copies,
/// kernel caches and mtimes, chunk 3 gets a new mtime and shows the new bytes.
#[test]
fn consistency_follow_one_element_of_a_chunk_of_blocks_is_seen_through_block_prints() {
    let py = or_skip!(python(
        "consistency_follow_one_element_of_a_chunk_of_blocks_is_seen_through_block_prints"
    ));
    let make = "import sys, numpy as np, blosc2\n\
        x = np.linspace(0, 60, 6 * 65536)\n\
        d = np.round(np.sin(x) * 1000 + np.random.default_rng(3).normal(0, 1, x.size), 3)\n\
        cp = blosc2.CParams(codec=blosc2.Codec.ZSTD, clevel=5, nthreads=2, \
        filters=[blosc2.Filter.SHUFFLE])\n\
        blosc2.asarray(d, urlpath=sys.argv[1], mode='w', chunks=(65536,), blocks=(8192,), \
        cparams=cp)\n";
    let set = "import sys, blosc2\n\
        a = blosc2.open(sys.argv[1], mode='a')\n\
        a[3 * 65536 + 5 * 8192 + 17] = 12345.5\n";
    for split in [false, true] {
        let (_dir, src) = crate::support::temp_path("a.b2nd");
        run_python(&py, &["-c", make, src.to_str().unwrap()]);
        let opts = b2fs::tree::TreeOptions {
            reader: ReaderOptions {
                decode_threads: if split { 2 } else { 1 },
                parallel_decode_min: 1 << 16,
                ..ro().reader
            },
            ..ro()
        };
        let t = Tree::from_source(&src, opts).unwrap();
        let before = read_all(&t, 6);
        let mtime = |i| t.getattr(ino_of(&t, &chunk(i))).unwrap().mtime;
        let times: Vec<_> = (0..6).map(mtime).collect();
        run_python(&py, &["-c", set, src.to_str().unwrap()]);
        assert!(
            t.follow_source(),
            "split {split}: the change was not noticed"
        );
        let get = "import sys, blosc2\n\
            a = blosc2.open(sys.argv[1]); s = a.schunk\n\
            sys.stdout.buffer.write(b''.join(s.decompress_chunk(i) for i in range(6)))\n";
        let all = run_python(&py, &["-c", get, src.to_str().unwrap()]);
        let now: Vec<Vec<u8>> = all.chunks(65536 * 8).map(<[u8]>::to_vec).collect();
        check_exact(&t, &before, &now, &[3]);
        for (i, &was) in times.iter().enumerate() {
            assert_eq!(mtime(i) == was, i != 3, "split {split}: mtime of chunk {i}");
        }
    }
}

/// bcolz appends to a carray whose last chunk was partial: the full chunks before it are
/// served from the cache without a decode; the rewritten last chunk and the new ones show
/// bcolz's rows.
#[test]
fn consistency_follow_bcolz_append_keeps_the_full_chunks_cached() {
    let py = or_skip!(python(
        "consistency_follow_bcolz_append_keeps_the_full_chunks_cached"
    ));
    let (_dir, src) = crate::support::temp_path("c.bcolz");
    let make = "import sys, numpy as np, bcolz\n\
        c = bcolz.carray(np.arange(35000, dtype=np.float64), rootdir=sys.argv[1], mode='w', \
        chunklen=10000)\n\
        c.flush()\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let t = Tree::from_source(&src, ro()).unwrap();
    let before = read_all(&t, 4);
    assert_eq!(before[3].len(), 5000 * 8);
    let append = "import sys, numpy as np, bcolz\n\
        c = bcolz.open(sys.argv[1], mode='a')\n\
        c.append(np.arange(20000, dtype=np.float64) + 0.5)\n\
        c.flush()\n";
    run_python(&py, &["-c", append, src.to_str().unwrap()]);
    assert!(t.follow_source());
    assert_eq!(json(&t, "meta/sizes")["shape"], serde_json::json!([55000]));
    // What bcolz reads now, chunk by chunk (10,000 rows; the last one partial).
    let read = "import sys, bcolz\n\
        c = bcolz.open(sys.argv[1])\n\
        sys.stdout.buffer.write(c[:].tobytes())\n";
    let all = run_python(&py, &["-c", read, src.to_str().unwrap()]);
    let now: Vec<Vec<u8>> = all.chunks(10000 * 8).map(<[u8]>::to_vec).collect();
    assert_eq!(now.len(), 6);
    check_exact(&t, &before, &now, &[3, 4, 5]);
    assert_eq!(all.len(), 55000 * 8);
    let npy = read_path(&t, "array.npy");
    assert_eq!(
        &npy[npy.len() - all.len()..],
        &all[..],
        "array.npy holds bcolz's rows"
    );
}

/// Whether numpy loads `npy` (the bytes of an `array.npy`) as the array the python
/// expression `want` gives (`arg` is `sys.argv[2]`; `np` and `blosc2` are imported): same
/// shape, dtype and values.
pub(crate) fn npy_is(py: &Path, npy: &[u8], want: &str, arg: &Path) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.npy");
    std::fs::write(&out, npy).unwrap();
    let code = format!(
        "import sys, numpy as np, blosc2\n\
         got, want = np.load(sys.argv[1]), {want}\n\
         print(got.shape == want.shape and got.dtype == want.dtype and (got == want).all())\n"
    );
    let said = run_python(
        py,
        &["-c", &code, out.to_str().unwrap(), arg.to_str().unwrap()],
    );
    String::from_utf8_lossy(&said).trim() == "True"
}

/// Whether the tree's `array.npy` is what python-blosc2 reads of the b2nd at `src`.
fn npy_matches(py: &Path, t: &Tree, src: &Path) -> bool {
    let want = "blosc2.open(sys.argv[2])[:]";
    npy_is(py, &read_path(t, "array.npy"), want, src)
}

/// Chunk files listed in `data/`.
fn listed(t: &Tree) -> usize {
    let data = ino_of(t, "data");
    t.readdir(data, 0).unwrap().count() - 2
}

/// python-blosc2 `resize` of a mounted b2nd, growing then shrinking: `meta/sizes`, the chunk
/// listing and `array.npy` follow (numpy loads the same array python-blosc2 reads); a
/// descriptor of `meta/sizes` opened before keeps its version exactly, one of `array.npy`
/// (having read its first bytes) reads its old bytes or fails with EIO (python-blosc2 rewrites
/// the file in place), never bytes of the new shape.
fn resize(test: &str, shape: &str, chunks: &str, grow: &str, shrink: &str) {
    let py = or_skip!(python(test));
    let (_dir, src) = crate::support::temp_path("a.b2nd");
    let make = "import sys, json, numpy as np, blosc2\n\
        shape = tuple(json.loads(sys.argv[2])); chunks = tuple(json.loads(sys.argv[3]))\n\
        d = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)\n\
        blosc2.asarray(d, urlpath=sys.argv[1], mode='w', chunks=chunks)\n";
    run_python(&py, &["-c", make, src.to_str().unwrap(), shape, chunks]);
    let resize = "import sys, json, blosc2\n\
        a = blosc2.open(sys.argv[1], mode='a')\n\
        a.resize(tuple(json.loads(sys.argv[2])))\n\
        print(a.schunk.nchunks)\n";
    let t = Tree::from_source(&src, ro()).unwrap();
    assert!(npy_matches(&py, &t, &src));
    for new in [grow, shrink] {
        let sizes = ino_of(&t, "meta/sizes");
        let npy = ino_of(&t, "array.npy");
        let old_sizes = read_path(&t, "meta/sizes");
        let old_npy = read_path(&t, "array.npy");
        let sizes_fh = t.open(sizes, libc::O_RDONLY).unwrap();
        let npy_fh = t.open(npy, libc::O_RDONLY).unwrap();
        // A descriptor that read nothing before its version went reads the newest one.
        let head = t.read(npy, npy_fh, 0, 4096).unwrap().to_vec();
        assert!(old_npy.starts_with(&head));
        let said = run_python(&py, &["-c", resize, src.to_str().unwrap(), new]);
        let nchunks: usize = String::from_utf8_lossy(&said).trim().parse().unwrap();
        assert!(t.follow_source(), "resize to {new} not noticed");
        let want: Value = serde_json::from_str(new).unwrap();
        assert_eq!(json(&t, "meta/sizes")["shape"], want);
        assert_eq!(json(&t, "meta/sizes")["nchunks"], nchunks);
        assert_eq!(listed(&t), nchunks);
        assert!(npy_matches(&py, &t, &src), "array.npy after {new}");
        // Descriptors opened before.
        assert_eq!(read_fh(&t, sizes, sizes_fh).unwrap(), old_sizes);
        match read_fh(&t, npy, npy_fh) {
            Ok(b) => assert!(b == old_npy, "array.npy opened before {new}: other bytes"),
            Err(e) => assert_eq!(e.errno(), libc::EIO),
        }
        t.release(sizes_fh).unwrap();
        t.release(npy_fh).unwrap();
    }
}

#[test]
fn consistency_follow_resize_1d() {
    resize(
        "consistency_follow_resize_1d",
        "[100000]",
        "[10000]",
        "[155000]",
        "[42000]",
    );
}

#[test]
fn consistency_follow_resize_2d() {
    resize(
        "consistency_follow_resize_2d",
        "[300, 200]",
        "[100, 100]",
        "[400, 350]",
        "[150, 100]",
    );
}
