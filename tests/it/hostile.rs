//! Memory and time stay bounded under hostile sources: frames whose header, index, metalayers
//! or vlmetalayers declare huge sizes, chunks whose header claims nearly 2 GiB, and bcolz
//! carrays with absurd shapes, chunklen or dtypes. Each case must end in a clear error (or an
//! error for the one chunk, which the filesystem turns into EIO), within [`TIME_BOUND`], with
//! the heap allocated by the opening thread peaking under [`HEAP_BOUND`].
//!
//! The peak is measured by a counting global allocator that keeps one count per thread (tests
//! run in parallel), so it sees every allocation of the code under test, including ones that
//! are never touched and so would not show in RSS.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::time::{Duration, Instant};

use b2fs::codec;
use b2fs::container::{self, Array, Container, ContainerError};

use crate::support::copy_tree;
use crate::support::data_dir;
use crate::support::frames::{build_frame, memcpyed, small_frame};

/// Peak heap of one hostile open or chunk read. The inputs are a few hundred bytes: a bound
/// of 4 MiB means no declared size was believed (each case declares gigabytes at least).
pub(crate) const HEAP_BOUND: usize = 4 << 20;
/// Wall time of one hostile open or chunk read (they take microseconds; the margin is for a
/// loaded machine).
pub(crate) const TIME_BOUND: Duration = Duration::from_secs(2);

struct Counting;

thread_local! {
    /// Bytes allocated minus bytes freed by this thread.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The highest `LIVE` since the last reset.
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: allocations during thread teardown are not counted.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counting touches only const-initialised thread-locals without destructors, which allocate
// nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received (`GlobalAlloc::alloc`'s contract is the caller's).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (every allocation goes through us) with
        // `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`; `new_size` is the caller's, checked by its contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` on this thread and returns its result, the peak heap it allocated beyond what the
/// thread held before, and its wall time.
pub(crate) fn measure<R>(f: impl FnOnce() -> R) -> (R, usize, Duration) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let t = Instant::now();
    let r = f();
    let took = t.elapsed();
    let peak = PEAK.with(Cell::get) - base;
    (r, usize::try_from(peak).unwrap_or(0), took)
}

/// `f` within [`HEAP_BOUND`] and [`TIME_BOUND`].
#[track_caller]
pub(crate) fn bounded<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let (r, peak, took) = measure(f);
    eprintln!("{what}: peak heap {peak} bytes, {took:?}");
    assert!(
        peak < HEAP_BOUND,
        "{what}: peak heap {peak} bytes >= {HEAP_BOUND}"
    );
    assert!(took < TIME_BOUND, "{what}: took {took:?}");
    r
}

/// Opens `bytes` as a frame file under the bounds; the error it must give.
#[track_caller]
fn frame_error(what: &str, bytes: &[u8]) -> ContainerError {
    let (_dir, p) = crate::support::temp_path("hostile.b2frame");
    std::fs::write(&p, bytes).unwrap();
    match bounded(what, || container::open(&p)) {
        Ok(_) => panic!("{what}: opened"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("hostile.b2frame"), "{what}: no path in {msg}");
            e
        }
    }
}

#[track_caller]
fn assert_mentions(e: &ContainerError, needle: &str) {
    let msg = e.to_string();
    assert!(msg.contains(needle), "expected {needle:?} in: {msg}");
}

/// Byte offsets of the big-endian header fields of [`build_frame`]'s frames.
const FRAME_LEN_AT: usize = 16;
pub(crate) const NBYTES_AT: usize = 30;
const CBYTES_AT: usize = 39;
pub(crate) const CHUNKSIZE_AT: usize = 58;

pub(crate) fn patched(f: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut m = f.to_vec();
    m[at..at + bytes.len()].copy_from_slice(bytes);
    m
}

fn the_array(c: Container) -> Array {
    match c {
        Container::Array(a) => a,
        Container::Table(_) => panic!("a table"),
    }
}

/// `f` opened from a temporary file (unbounded: a well-formed frame, to find its layout).
fn open_ok(f: &[u8]) -> Array {
    let (_dir, p) = crate::support::temp_path("ok.b2frame");
    std::fs::write(&p, f).unwrap();
    the_array(container::open(&p).unwrap())
}

#[test]
fn hostile_frame_nbytes_of_8_eib() {
    let (f, _) = small_frame();
    let e = frame_error(
        "nbytes 2^63-1",
        &patched(&f, NBYTES_AT, &i64::MAX.to_be_bytes()),
    );
    assert_mentions(&e, "chunks exceed the format's maximum");
}

#[test]
fn hostile_frame_cbytes_of_8_eib() {
    let (f, _) = small_frame();
    let e = frame_error(
        "cbytes 2^63-1",
        &patched(&f, CBYTES_AT, &i64::MAX.to_be_bytes()),
    );
    assert_mentions(&e, "cbytes");
}

#[test]
fn hostile_frame_chunksize_of_2_gib() {
    // chunksize i32::MAX with the nbytes of 4 such chunks: the index (4 entries) agrees, so the
    // frame opens; its 40-byte chunks then fail to decode into the declared size, without a
    // buffer of that size being allocated by the container or the codec.
    let (f, _) = small_frame();
    let m = patched(&f, CHUNKSIZE_AT, &i32::MAX.to_be_bytes());
    let m = patched(&m, NBYTES_AT, &(4 * i64::from(i32::MAX)).to_be_bytes());
    let (_dir, p) = crate::support::temp_path("hostile.b2frame");
    std::fs::write(&p, &m).unwrap();
    let a = the_array(bounded("chunksize 2^31-1: open", || container::open(&p)).unwrap());
    assert_eq!(a.chunk_nbytes(0).unwrap(), i32::MAX as usize);
    let chunk = bounded("chunksize 2^31-1: chunk bytes", || a.chunk_bytes(0)).unwrap();
    assert_eq!(chunk.len(), 72, "the stored 40-byte memcpyed chunk");
    // The header of the chunk itself says 40 bytes: a reader that checks it before sizing a
    // buffer allocates nothing big.
    assert_eq!(a.chunk_header(0).unwrap().nbytes, 40);
    let e = bounded("chunksize 2^31-1: decode", || {
        codec::Decoder::with_limit(64 << 20).decompress(&chunk)
    });
    assert_eq!(e.unwrap().len(), 40);
}

#[test]
fn hostile_frame_len_of_8_eib() {
    let (f, _) = small_frame();
    let e = frame_error(
        "frame_len 2^63-1",
        &patched(&f, FRAME_LEN_AT, &i64::MAX.to_be_bytes()),
    );
    assert_mentions(&e, "frame_len");
}

#[test]
fn hostile_frame_index_of_2_pow_40_entries() {
    // typesize 1, chunksize 1, nbytes 2^40: 2^40 chunks (8 TiB of index).
    let f = build_frame(1, 1, 1 << 40, &memcpyed(&[7], 1), &[0], &[], &[]);
    let e = frame_error("2^40 index entries", &f);
    assert_mentions(&e, "1099511627776 chunks exceed the format's maximum");
}

#[test]
fn hostile_variable_frame_index_chunk_of_2_gib() {
    // A variable-size frame derives nchunks from the index chunk's nbytes: a 40-byte index
    // chunk that claims 2^31 - 40 bytes (268 million entries).
    let f = build_frame(1, 0, 1, &memcpyed(&[7], 1), &[0], &[], &[]);
    let idx = open_ok(&f).frame_info().unwrap().index_offset.unwrap() as usize;
    let e = frame_error(
        "index chunk of 2^31-40 bytes",
        &patched(&f, idx + 4, &(i32::MAX - 39).to_le_bytes()),
    );
    assert_mentions(&e, "index");
}

#[test]
fn hostile_frame_metalayer_of_4_gib() {
    let (f, _) = small_frame();
    let c6 = 87 + 7 + (6 + 3) + (6 + 4) + 3; // the first content, after names "usr", "junk"
    assert_eq!(f[c6], 0xc6);
    let e = frame_error(
        "metalayer length 2^32-1",
        &patched(&f, c6 + 1, &u32::MAX.to_be_bytes()),
    );
    assert_mentions(&e, "metalayer section");
}

#[test]
fn hostile_frame_metalayer_count_of_65535() {
    let (f, _) = small_frame();
    let e = frame_error(
        "65535 metalayers",
        &patched(&f, 92, &u16::MAX.to_be_bytes()),
    );
    assert_mentions(&e, "65535 entries");
}

/// The offset of the trailer of `f`.
fn trailer_at(f: &[u8]) -> usize {
    f.len() - open_ok(f).frame_info().unwrap().trailer_len as usize
}

#[test]
fn hostile_frame_vlmeta_of_4_gib() {
    let (f, _) = small_frame();
    let t = trailer_at(&f);
    let c6 = t + 9 + 2 * 6 + 4 + 1 + 3; // the first content, after names "unit", "n"
    assert_eq!(f[c6], 0xc6);
    let e = frame_error(
        "vlmeta length 2^32-1",
        &patched(&f, c6 + 1, &u32::MAX.to_be_bytes()),
    );
    assert_mentions(&e, "trailer");
    let e = frame_error(
        "65535 vlmetalayers",
        &patched(&f, t + 7, &u16::MAX.to_be_bytes()),
    );
    assert_mentions(&e, "trailer");
}

#[test]
fn hostile_frame_vlmeta_chunk_of_2_gib() {
    // The vlmetalayer's chunk (memcpyed, 2 bytes) claims nbytes 2^31 - 33.
    let (f, _) = small_frame();
    let t = trailer_at(&f);
    let chunk = t + 9 + 2 * 6 + 4 + 1 + 3 + 5; // after the c6 marker and length
    assert_eq!(&f[chunk..chunk + 4], &[5, 1, 0x17, 1]);
    let e = frame_error(
        "vlmeta chunk nbytes 2^31-33",
        &patched(&f, chunk + 4, &(i32::MAX - 32).to_le_bytes()),
    );
    assert!(matches!(e, ContainerError::Vlmeta { .. }), "{e}");
}

#[test]
fn hostile_chunk_header_of_2_gib_in_a_fixed_size_frame() {
    // Chunk 0's own header claims i32::MAX - 32 bytes; the frame says 40. The size readers use
    // is the frame's, and decoding the chunk into it is an error (EIO for its file).
    let (f, _) = small_frame();
    let hl = open_ok(&f).frame_info().unwrap().header_len as usize;
    let (_dir, p) = crate::support::temp_path("hostile.b2frame");
    std::fs::write(&p, patched(&f, hl + 4, &(i32::MAX - 32).to_le_bytes())).unwrap();
    let a = the_array(bounded("chunk nbytes 2^31-33: open", || container::open(&p)).unwrap());
    let n = a.chunk_nbytes(0).unwrap();
    assert_eq!(n, 40);
    let r = bounded("chunk nbytes 2^31-33: read", || {
        let chunk = a.chunk_bytes(0)?;
        let mut out = vec![0u8; n];
        codec::decompress_into(&chunk, &mut out).map_err(|source| ContainerError::Chunk {
            path: p.clone(),
            index: 0,
            source,
        })
    });
    assert!(r.is_err(), "decoded a chunk whose header lies");
}

#[test]
fn hostile_chunk_header_of_2_gib_in_a_variable_size_frame() {
    // A variable-size frame takes each chunk's size from its header: one that claims more than
    // the whole frame holds is an error, not a 2 GiB buffer.
    let data = [3u8; 40];
    let f = build_frame(4, 0, 40, &memcpyed(&data, 4), &[0], &[], &[]);
    let ok = open_ok(&f);
    assert_eq!(ok.chunk_nbytes(0).unwrap(), 40);
    let hl = ok.frame_info().unwrap().header_len as usize;
    let (_dir, p) = crate::support::temp_path("hostile.b2frame");
    std::fs::write(&p, patched(&f, hl + 4, &(i32::MAX - 32).to_le_bytes())).unwrap();
    let a = the_array(
        bounded("variable chunk nbytes 2^31-33: open", || {
            container::open(&p)
        })
        .unwrap(),
    );
    let e = bounded("variable chunk nbytes 2^31-33: size", || a.chunk_nbytes(0)).unwrap_err();
    assert_mentions(&e, "exceeds the frame's nbytes 40");
}

#[test]
fn hostile_chunk_of_2_gib_alone_is_refused_before_allocation() {
    // The codec alone. A memcpyed chunk claiming i32::MAX - 32 bytes with 8 bytes of body: the
    // header check refuses it, even under the format's own limit.
    let mut c = memcpyed(&[1u8; 8], 1);
    c[4..8].copy_from_slice(&(i32::MAX - 32).to_le_bytes());
    let r = bounded("codec: memcpyed nbytes 2^31-33", || codec::decompress(&c));
    assert!(
        matches!(r, Err(codec::CodecError::BadHeader { .. })),
        "{r:?}"
    );
    // A reference-made BloscLZ chunk whose nbytes is patched to i32::MAX - 32: a decoder with
    // the filesystem's limit refuses it, and decoding into a buffer of the size the container
    // reports is an error, both before any buffer of the declared size exists.
    let mut c = std::fs::read(data_dir().join("chunks/m011_blosclz_shuffle_t4.chunk")).unwrap();
    let real = codec::chunk_info(&c).unwrap().nbytes;
    c[4..8].copy_from_slice(&(i32::MAX - 32).to_le_bytes());
    let r = bounded("codec: blosclz nbytes 2^31-33, limit 64 MiB", || {
        codec::Decoder::with_limit(64 << 20).decompress(&c)
    });
    assert!(r.is_err(), "decoded");
    let r = bounded("codec: blosclz nbytes 2^31-33 into its real size", || {
        codec::decompress_into(&c, &mut vec![0u8; real])
    });
    assert!(r.is_err(), "decoded");
}

// ---------------------------------------------------------------------------------------------
// bcolz

/// A copy of the `carray_i4_leftover` fixture with `edit` applied, opened under the bounds.
#[track_caller]
fn carray_error(what: &str, edit: &dyn Fn(&Path)) -> ContainerError {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("carray");
    copy_tree(&data_dir().join("bcolz/carray_i4_leftover"), &d);
    edit(&d);
    match bounded(what, || container::open(&d)) {
        Ok(_) => panic!("{what}: opened"),
        Err(e) => e,
    }
}

fn write(d: &Path, rel: &str, text: &str) {
    std::fs::write(d.join(rel), text).unwrap();
}

fn storage(chunklen: &str, dtype: &str) -> String {
    format!(
        "{{\"dtype\": \"{dtype}\", \"cparams\": {{\"clevel\": 5, \"shuffle\": 1, \"cname\": \"lz4\"}}, \"chunklen\": {chunklen}, \"expectedlen\": 25, \"dflt\": 0}}"
    )
}

#[test]
fn hostile_bcolz_shape_of_2_pow_64() {
    let e = carray_error("shape [2^64-1]", &|d| {
        write(
            d,
            "meta/sizes",
            "{\"shape\": [18446744073709551615], \"nbytes\": 1, \"cbytes\": 1}",
        )
    });
    assert_mentions(&e, "overflows");
}

#[test]
fn hostile_bcolz_shape_of_2_pow_60_rows_is_bounded() {
    // 2^60 int32 rows fit u64 bytes: the carray opens (nothing is allocated per chunk), and
    // reading a chunk that has no file is an error.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("carray");
    copy_tree(&data_dir().join("bcolz/carray_i4_leftover"), &d);
    write(
        &d,
        "meta/sizes",
        "{\"shape\": [1152921504606846976], \"nbytes\": 1, \"cbytes\": 1}",
    );
    let a = the_array(bounded("shape [2^60]: open", || container::open(&d)).unwrap());
    assert_eq!(a.nchunks() as u64, (1u64 << 60).div_ceil(10));
    let last = a.nchunks() - 1;
    let r = bounded("shape [2^60]: last chunk", || a.chunk_bytes(last));
    assert!(r.is_err());
}

#[test]
fn hostile_bcolz_inner_dimensions_of_2_pow_60() {
    let e = carray_error("shape [25, 2^30, 2^30]", &|d| {
        write(
            d,
            "meta/sizes",
            "{\"shape\": [25, 1073741824, 1073741824], \"nbytes\": 1, \"cbytes\": 1}",
        )
    });
    assert_mentions(&e, "overflows");
    let e = carray_error("shape [1, 2^30, 2^30] int8", &|d| {
        write(
            d,
            "meta/sizes",
            "{\"shape\": [1, 1073741824, 1073741824], \"nbytes\": 1, \"cbytes\": 1}",
        );
        write(d, "meta/storage", &storage("1", "int8"));
    });
    assert_mentions(&e, "maximum of a Blosc chunk");
}

#[test]
fn hostile_bcolz_chunklen_of_2_pow_40() {
    let e = carray_error("chunklen 2^40", &|d| {
        write(d, "meta/storage", &storage("1099511627776", "int32"))
    });
    assert_mentions(&e, "chunklen 1099511627776 x 4-byte rows");
}

#[test]
fn hostile_bcolz_dtype_of_1_tb_items() {
    let e = carray_error("dtype S10^12", &|d| {
        write(d, "meta/storage", &storage("10", "|S1000000000000"))
    });
    assert_mentions(&e, "maximum of a Blosc chunk");
}

#[test]
fn hostile_bcolz_attrs_nested_100000_deep() {
    let e = carray_error("__attrs__ nested 100000 deep", &|d| {
        write(
            d,
            "__attrs__",
            &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        )
    });
    assert_mentions(&e, "__attrs__");
}
