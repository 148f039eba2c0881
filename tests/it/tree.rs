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
    ChunkStore, EntryKind, Layout, Owner, ROOT_INO, ReaderOptions, Tree, TreeError, TreeOptions,
    chunk_name,
};
use serde_json::Value;

use crate::support::tree::no_prefetch;
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
    Tree::from_source(path, no_prefetch(false))
        .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()))
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

/// A copy of the fixture at `rel` (under the test data directory) in a fresh directory, for
/// tests that change the source.
fn fixture_copy(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(Path::new(rel).file_name().unwrap());
    std::fs::copy(data_dir().join(rel), &src).unwrap();
    (dir, src)
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
            &["__attrs__", "meta", "data", "zarr", "zarr2"]
        } else {
            &["__attrs__", "array.npy", "meta", "data", "zarr", "zarr2"]
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
        reader: ReaderOptions {
            decode_threads: 3,
            parallel_decode_min: 0,
            prefetch_chunks: 0,
            ..opts().reader
        },
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
            ["__attrs__", "array.npy", "meta", "data", "zarr", "zarr2"]
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
        want.push("zarr2".to_owned());
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

mod caches;
mod damaged;
