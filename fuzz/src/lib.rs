//! The fuzz entry functions of b2fs: one per target, each taking the raw fuzz input. The
//! libFuzzer binaries in `fuzz_targets/` call them, and the normal test suite replays the
//! stored corpora and every regression input through the same functions (`tests/it/fuzz.rs`
//! includes this file as a module), so a crash found by the fuzzer stays a failing test until
//! it is fixed.
//!
//! Targets: `chunk_decode`, `frame_open`, `bcolz_open`, `attrs`, `npy_dtype` (this file);
//! `store_open` (`store.rs`); `tree_walk`, `tree_edit` (`tree.rs`), `zarr_edit` (`zarr.rs`,
//! its creation mode `zarr_create.rs`),
//! over sources written by `source.rs`.
//!
//! What a target may do with hostile input: return an error. What it must not do: panic
//! (including the property checks below), hang, or allocate beyond a bound (libFuzzer's
//! `-malloc_limit_mb` and `-rss_limit_mb` catch that in the fuzz runs).

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use b2fs::codec::{self, Decoder};
use b2fs::container::npy::{self, Npy, TableNpy};
use b2fs::container::{self, Array, Container, attrs};
use serde_json::Value;

pub mod source;
pub mod store;
pub mod tree;
pub mod zarr;
pub mod zarr_create;

pub use store::store_open;
pub use tree::{tree_edit, tree_walk};
pub use zarr::zarr_edit;

/// Largest uncompressed chunk the targets decode: the decoder refuses bigger declarations
/// (`CodecError::TooLarge`), so a mutated nbytes field cannot make every run allocate
/// gigabytes. Every chunk fixture of the repository is below it.
pub const DECODE_LIMIT: usize = 4 << 20;

/// Chunks of one frame or carray that the open targets read (plus the last one): a frame may
/// declare millions of special chunks.
pub const MAX_CHUNKS_TOUCHED: usize = 32;

/// Separates the files of a `bcolz_open` input (see there).
pub const BCOLZ_SEPARATOR: &[u8] = b"\n--\n";

thread_local! {
    static DECODER: RefCell<Decoder> = RefCell::new(Decoder::with_limit(DECODE_LIMIT));
    /// The output buffer of [`decode_bounded`], kept across inputs.
    static OUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// A private scratch directory per thread (tests call the entry functions from several
    /// threads at once).
    static SCRATCH: tempfile::TempDir = tempfile::Builder::new()
        .prefix("b2fs-fuzz-")
        .tempdir()
        .expect("creating a scratch directory");
}

/// The throughput build (`scripts/fuzz.sh`, `B2FS_FUZZ_ASAN=0`) has no AddressSanitizer, and
/// libFuzzer's `-malloc_limit_mb` needs the sanitizer's allocator hooks: this allocator keeps
/// that limit instead, aborting (a crash libFuzzer records with its input) on any single
/// allocation over [`ALLOC_LIMIT`].
#[cfg(b2fs_fuzz_no_asan)]
mod alloc_limit {
    use std::alloc::{GlobalAlloc, Layout, System};

    /// The largest single allocation: libFuzzer's `-malloc_limit_mb=256` of the ASan runs.
    pub const ALLOC_LIMIT: usize = 256 << 20;

    /// [`System`], refusing any single allocation over [`ALLOC_LIMIT`] with an abort.
    pub struct Limited;

    fn over(size: usize) -> ! {
        eprintln!(
            "==b2fs-fuzz== out-of-memory: one allocation of {size} bytes (limit {ALLOC_LIMIT})"
        );
        std::process::abort()
    }

    // SAFETY: every method forwards to `System` with the caller's arguments unchanged, after a
    // size check that only aborts; the GlobalAlloc contract is `System`'s.
    unsafe impl GlobalAlloc for Limited {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if layout.size() > ALLOC_LIMIT {
                over(layout.size());
            }
            // SAFETY: the caller's layout, passed on (see the impl).
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            if layout.size() > ALLOC_LIMIT {
                over(layout.size());
            }
            // SAFETY: as `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from `System` with this layout (every allocation goes there).
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if new_size > ALLOC_LIMIT {
                over(new_size);
            }
            // SAFETY: as `dealloc`; the new size is the caller's.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static LIMITED: Limited = Limited;
}

fn with_decoder<R>(f: impl FnOnce(&mut Decoder) -> R) -> R {
    DECODER.with(|d| f(&mut d.borrow_mut()))
}

pub(crate) fn scratch() -> PathBuf {
    SCRATCH.with(|d| d.path().to_path_buf())
}

/// Decodes a chunk whole and by ranges (whole and range decodes must agree byte for byte
/// where both succeed), after checking the header parser agrees with the decoder.
pub fn chunk_decode(data: &[u8]) {
    let header = codec::chunk_info(data);
    with_decoder(|dec| {
        let whole = dec.decompress(data);
        if let Ok(out) = &whole {
            let h = header
                .as_ref()
                .expect("a chunk that decodes has a valid header");
            assert_eq!(out.len(), h.nbytes, "decoded length is the header nbytes");
            // decompress_into into an exact buffer gives the same bytes.
            let mut again = vec![0u8; out.len()];
            let n = dec.decompress_into(data, &mut again);
            assert_eq!(n.ok(), Some(out.len()), "decompress_into after decompress");
            assert!(again == *out, "decompress_into differs from decompress");
        }
        let Ok(h) = &header else { return };
        let n = h.nbytes.min(DECODE_LIMIT);
        // Ranges at the start, across the middle, at the end, and past the end.
        let ranges = [
            (0, 1),
            (n / 2, 17),
            (n / 3, 4099),
            (n.saturating_sub(9), 64),
            (n, 8),
            (1, n.saturating_sub(1)),
        ];
        let mut buf = Vec::new();
        for (offset, len) in ranges {
            buf.clear();
            buf.resize(len, 0xA5);
            let got = dec.decompress_range(data, offset, &mut buf);
            if let (Ok(got), Ok(out)) = (got, &whole) {
                let want = out.len().saturating_sub(offset).min(len);
                assert_eq!(got, want, "range ({offset}, {len}) length");
                if got > 0 {
                    assert!(
                        buf[..got] == out[offset..offset + got],
                        "range ({offset}, {len}) differs from the whole decode"
                    );
                }
            }
        }
    });
}

/// Decodes `chunk` with the bounded decoder, as the filesystem would serve it: whole, into a
/// buffer reused across inputs (a fresh zeroed buffer of up to [`DECODE_LIMIT`] bytes per
/// chunk cost more than the decode of most inputs; `chunk_decode` covers the allocating
/// `decompress`), and a range.
fn decode_bounded(chunk: &[u8]) {
    with_decoder(|dec| {
        if let Ok(h) = codec::chunk_info(chunk) {
            if h.nbytes <= DECODE_LIMIT {
                OUT.with(|out| {
                    let mut out = out.borrow_mut();
                    out.resize(h.nbytes, 0);
                    let _ = dec.decompress_into(chunk, &mut out[..]);
                });
            } else {
                let _ = dec.decompress(chunk);
            }
        }
        let mut buf = [0u8; 100];
        let _ = dec.decompress_range(chunk, 50, &mut buf);
    });
}

/// The chunks an open target touches: the first [`MAX_CHUNKS_TOUCHED`] and the last.
fn touched(nchunks: usize) -> impl Iterator<Item = usize> {
    let last = nchunks.checked_sub(1).filter(|&l| l >= MAX_CHUNKS_TOUCHED);
    (0..nchunks.min(MAX_CHUNKS_TOUCHED)).chain(last)
}

/// Every accessor of an opened array, and every touched chunk read every way there is.
fn touch_array(a: &Array) {
    let n = a.nchunks();
    let _ = (a.path(), a.kind(), a.typesize(), a.chunksize());
    let _ = (a.nbytes(), a.cbytes(), a.geometry(), a.nd_meta());
    let _ = (a.frame_info(), a.bcolz_sizes(), a.bcolz_storage());
    let _ = (a.bcolz_has_attrs_file(), a.mtime(), a.io_stats().bytes());
    for m in a.metalayers() {
        let _ = attrs::json_to_msgpack(&m.json);
    }
    for v in a.vlmetalayers() {
        let _ = attrs::json_to_msgpack(&v.json);
    }
    let _ = attrs::json_to_msgpack(a.attrs());
    if let Some(g) = a.grid() {
        let _ = (g.ndim(), g.chunk_grid(), g.block_grid(), g.ext_chunkshape());
        let _ = (g.nchunks(), g.items_per_chunk());
        let _ = g.chunk_origin(0);
        let _ = g.chunk_origin(g.nchunks().saturating_sub(1));
        let _ = g.chunk_origin(g.nchunks());
        let shape = &a.geometry().shape;
        let _ = g.locate(&vec![0; shape.len()]);
        let _ = g.locate(
            &shape
                .iter()
                .map(|d| d.saturating_sub(1))
                .collect::<Vec<_>>(),
        );
        let _ = g.locate(shape);
    }
    let mut buf = Vec::new();
    for i in touched(n) {
        let _ = a.frame_index_entry(i);
        let _ = a.chunk_nbytes(i);
        let _ = a.chunk_kind(i);
        let _ = a.chunk_header(i);
        let whole = a.chunk_bytes(i);
        if let Ok(c) = &whole {
            decode_bounded(c);
            // The positional read gives the same bytes as the whole read.
            let mut window = vec![0u8; c.len().min(48)];
            if let Ok(true) = a.chunk_read_at(i, 0, &mut window, None) {
                assert!(window == c[..window.len()], "chunk_read_at vs chunk_bytes");
            }
            if let Ok(k) = a.chunk_bytes_into(i, &mut buf) {
                assert!(buf[..k] == **c, "chunk_bytes_into vs chunk_bytes");
            }
        }
        // The mapped chunk is the same bytes (decoded only when the whole read failed: the
        // decoder has seen them otherwise).
        let _ = a.with_mapped_chunk(i, false, &mut |m| match &whole {
            Ok(c) => assert!(m == &c[..], "with_mapped_chunk vs chunk_bytes"),
            Err(_) => decode_bounded(m),
        });
        let _ = a.chunk_read_at(i, u64::MAX - 3, &mut [0u8; 8], None);
    }
    let _ = a.chunk_bytes(n);
    let _ = a.changed_on_disk();
}

/// An NPY header is whole 64-byte blocks starting with the magic.
fn check_npy_header(h: &[u8]) {
    assert!(h.starts_with(b"\x93NUMPY"), "NPY magic");
    assert_eq!(h.len() % npy::DATA_ALIGN, 0, "NPY header length");
    assert_eq!(h.last(), Some(&b'\n'), "NPY header end");
}

/// The NPY view of an array, if it has one: its header, and the runs of a few windows of its
/// data (each within its chunk's decoded length, contiguous in the window).
fn touch_npy(a: &Array) {
    let Ok(n) = Npy::for_array(a) else { return };
    check_npy_header(n.header());
    let _ = (n.len(), n.descr(), n.shape(), n.data_offset());
    let l = n.layout();
    let len = l.data_len();
    let _ = l.nchunks();
    for (start, want) in [(0, 4096), (len / 2, 65536), (len.saturating_sub(10), 64)] {
        let mut dst = 0;
        for r in l.runs(start, want).take(4096) {
            assert_eq!(r.dst, dst, "runs are contiguous in the window");
            assert!(r.len > 0, "empty run");
            let end = r.src.checked_add(r.len).expect("run end overflows");
            assert!(end <= l.chunk_len(r.chunk), "run past its chunk");
            dst += r.len;
        }
        let _ = l.chunks(start, want.min(4096));
        let _ = (l.slab(start), l.next_slab(start));
    }
}

pub(crate) fn touch(c: &Container) {
    match c {
        Container::Array(a) => {
            touch_array(a);
            touch_npy(a);
        }
        Container::Table(t) => {
            for (_, a) in &t.columns {
                touch_array(a);
                touch_npy(a);
            }
            if let Ok(n) = TableNpy::for_table(t) {
                check_npy_header(n.header());
                let _ = (n.descr(), n.data_offset(), n.data_len(), n.len());
                let _ = (n.rows(), n.row_bytes());
            }
        }
    }
}

/// Opens `data` as a frame file (contiguous, or the index file of a sparse frame whose
/// directory holds no chunk files) and touches every accessor and chunk.
pub fn frame_open(data: &[u8]) {
    let dir = scratch();
    let path = dir.join("input.b2frame");
    std::fs::write(&path, data).expect("writing the fuzz input");
    if let Ok(c) = container::open(&path) {
        touch(&c);
    }
    // The lenient open of `b2fs verify` / `b2fs salvage`: a damaged index, trailer or
    // vlmetalayer is done without, the index rebuilt from the chunk headers when it can be.
    if let Ok((a, _damaged)) = Array::open_frame_lenient(&path) {
        touch_array(&a);
        touch_npy(&a);
    }
    // Also as a frame embedded after a few bytes of something else.
    if data.len() > 8
        && let Ok(a) = Array::open_frame_at(&path, 8)
    {
        touch_array(&a);
        touch_npy(&a);
    }
}

/// Writes `data` as a bcolz carray directory and opens it. `data` is the files separated by
/// [`BCOLZ_SEPARATOR`]: `meta/sizes`, `meta/storage`, `__attrs__` (absent when empty), then
/// `data/__0.blp`, `data/__1.blp`, `data/__2.blp` (absent when missing; the last one takes the
/// rest of the input).
pub fn bcolz_open(data: &[u8]) {
    let root = scratch().join("carray");
    if !root.join("data").is_dir() {
        std::fs::create_dir_all(root.join("meta")).expect("scratch dir");
        std::fs::create_dir_all(root.join("data")).expect("scratch dir");
    }
    let parts = split_parts(data, 6);
    let put = |rel: &str, part: Option<&&[u8]>, keep_empty: bool| {
        let p: &Path = &root.join(rel);
        match part {
            Some(b) if keep_empty || !b.is_empty() => std::fs::write(p, b).expect("write"),
            _ => {
                let _ = std::fs::remove_file(p);
            }
        }
    };
    put("meta/sizes", Some(parts.first().unwrap_or(&&[][..])), true);
    put("meta/storage", Some(parts.get(1).unwrap_or(&&[][..])), true);
    put("__attrs__", parts.get(2), false);
    for i in 0..3 {
        put(&format!("data/__{i}.blp"), parts.get(3 + i), true);
    }
    if let Ok(c) = container::open(&root) {
        touch(&c);
    }
}

/// `data` cut at the first `max - 1` separators.
pub fn split_parts(data: &[u8], max: usize) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while parts.len() + 1 < max {
        match rest
            .windows(BCOLZ_SEPARATOR.len())
            .position(|w| w == BCOLZ_SEPARATOR)
        {
            Some(at) => {
                parts.push(&rest[..at]);
                rest = &rest[at + BCOLZ_SEPARATOR.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts
}

/// The attrs mapping both ways. As msgpack: whatever maps to JSON maps back to msgpack that
/// maps to the same JSON, and a content kept raw comes back byte for byte. As JSON text:
/// whatever maps to msgpack is stable after one more round.
pub fn attrs(data: &[u8]) {
    // msgpack -> JSON -> msgpack -> JSON.
    let v = attrs::content_to_json(data);
    let back = attrs::json_to_msgpack(&v).expect("a mapped content maps back to msgpack");
    match attrs::msgpack_to_json(data) {
        Ok(strict) => {
            assert_eq!(strict, v, "content_to_json of one msgpack value");
            let again = attrs::msgpack_to_json(&back).expect("re-encoded msgpack decodes");
            assert_eq!(again, v, "msgpack -> json -> msgpack -> json");
        }
        Err(_) => assert_eq!(back, data, "a raw content comes back unchanged"),
    }
    // JSON text -> msgpack -> JSON -> msgpack.
    if let Ok(j) = serde_json::from_slice::<Value>(data)
        && let Ok(mp) = attrs::json_to_msgpack(&j)
    {
        let v2 = attrs::content_to_json(&mp);
        let mp2 = attrs::json_to_msgpack(&v2).expect("a mapped content maps back");
        assert_eq!(
            attrs::content_to_json(&mp2),
            v2,
            "json round trip is stable"
        );
    }
}

/// Parses the input as a dtype string the way sources record them (b2nd metalayer, bcolz
/// `meta/storage`); an accepted dtype gets an NPY header, and its descr parses back to a dtype
/// of the same item size.
pub fn npy_dtype(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(d) = npy::dtype::parse(text) else {
        return;
    };
    let size = d.itemsize();
    let Ok((descr, dims)) = d.npy_descr() else {
        return;
    };
    let mut shape = vec![3];
    shape.extend_from_slice(&dims);
    check_npy_header(&npy::header(&descr, &shape));
    if let Ok(again) = npy::dtype::parse(&descr) {
        let n = dims
            .iter()
            .fold(again.itemsize(), |a, &d| a.saturating_mul(d));
        assert_eq!(
            n, size,
            "descr {descr} of {text:?} parses back to another size"
        );
    }
}
