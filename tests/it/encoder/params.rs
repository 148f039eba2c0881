//! Invalid parameters are typed errors; where C-Blosc2 accepts what we refuse (typesize over
//! 255, a blocksize that is not a multiple of the typesize), C's behaviour is checked and the
//! same chunk is written the way b2fs re-encodes such arrays.

use super::*;

#[test]
fn invalid_params_are_typed_errors() {
    use b2fs::codec::CodecError;
    use b2fs::codec::encode::MAX_BLOCKSIZE;
    let data = vec![1u8; 1000];
    let base = CParams::blosc2(Codec::Lz4, 5, 4, filter_id::SHUFFLE);
    let b1 = CParams::blosc1(Codec::Lz4, 5, 4, filter_id::SHUFFLE);
    let err = |p: &CParams| b2fs::codec::compress(&data, p).unwrap_err();
    let with = |p: &CParams, f: &dyn Fn(&mut CParams)| {
        let mut p = p.clone();
        f(&mut p);
        p
    };
    for fmt in [&base, &b1] {
        // clevel > 9.
        assert_eq!(
            err(&with(fmt, &|p| p.clevel = 10)),
            CodecError::InvalidClevel(10)
        );
        assert_eq!(
            err(&with(fmt, &|p| p.clevel = 255)),
            CodecError::InvalidClevel(255)
        );
        // typesize 0 or > 255, in both formats.
        for ts in [0, 256, 300, usize::MAX] {
            assert_eq!(
                err(&with(fmt, &|p| p.typesize = ts)),
                CodecError::InvalidTypesize(ts)
            );
        }
        // An explicit blocksize of 0, not a multiple of the typesize, or above the maximum.
        for bs in [0, 1, 2, 4098, MAX_BLOCKSIZE + 4, usize::MAX] {
            assert_eq!(
                err(&with(fmt, &|p| p.blocksize = Blocksize::Explicit(bs))),
                CodecError::InvalidBlocksize {
                    blocksize: bs,
                    typesize: 4,
                    max: MAX_BLOCKSIZE
                },
                "{bs}"
            );
        }
        // ... while the same values are fine where they are valid.
        for (ts, bs) in [(1, 1), (1, 4098), (2, 4098), (4, 4), (4, MAX_BLOCKSIZE)] {
            let p = with(fmt, &|p| {
                p.typesize = ts;
                p.blocksize = Blocksize::Explicit(bs);
            });
            let chunk = b2fs::codec::compress(&data, &p).unwrap();
            assert_eq!(b2fs::codec::decompress(&chunk).unwrap(), data);
        }
        // Snappy is decode-only; other unknown codecs cannot be named (`Codec` is closed).
        assert_eq!(
            err(&with(fmt, &|p| p.codec = Codec::Snappy)),
            CodecError::UnsupportedCodec {
                id: 3,
                name: "snappy (decode only)"
            }
        );
        // Unknown and decode-only filter ids.
        assert!(matches!(
            err(&with(fmt, &|p| p.filters = [0, 7, 0, 0, 0, 0])),
            CodecError::UnsupportedFilter { id: 7, slot: 1, .. }
        ));
        assert!(matches!(
            err(&with(fmt, &|p| p.filters = [0, 0, 0, 0, 0, 200])),
            CodecError::UnsupportedFilter {
                id: 200,
                slot: 5,
                ..
            }
        ));
        assert!(matches!(
            err(&with(fmt, &|p| p.filters =
                [filter_id::BYTEDELTA_BUGGY, 0, 0, 0, 0, 0])),
            CodecError::UnsupportedFilter {
                id: 34,
                slot: 0,
                ..
            }
        ));
    }
    // Blosc2 only: DELTA after another filter, TRUNC_PREC beyond the mantissa or on a
    // typesize other than 4 or 8.
    assert!(matches!(
        err(&with(&base, &|p| p.filters =
            [filter_id::SHUFFLE, filter_id::DELTA, 0, 0, 0, 0])),
        CodecError::InvalidParams(_)
    ));
    assert!(matches!(
        err(&with(&base, &|p| {
            p.typesize = 2;
            p.filters = [filter_id::TRUNC_PREC, 0, 0, 0, 0, 0];
            p.filters_meta = [10, 0, 0, 0, 0, 0];
        })),
        CodecError::InvalidParams(_)
    ));
    assert!(matches!(
        err(&with(&base, &|p| p.filters =
            [filter_id::TRUNC_PREC, 0, 0, 0, 0, 0])),
        CodecError::InvalidParams(_)
    ));
    // A Blosc1 request for a Blosc2-only feature: DELTA, TRUNC_PREC, BYTEDELTA, more than one
    // filter, a shuffle group size.
    for (filters, feature) in [
        ([0, 0, 0, 0, 0, filter_id::DELTA], "the DELTA filter"),
        (
            [filter_id::TRUNC_PREC, 0, 0, 0, 0, 0],
            "the TRUNC_PREC filter",
        ),
        (
            [0, 0, 0, 0, 0, filter_id::BYTEDELTA],
            "the BYTEDELTA filter",
        ),
        (
            [0, 0, 0, 0, filter_id::DELTA, filter_id::SHUFFLE],
            "more than one filter",
        ),
        (
            [filter_id::SHUFFLE, filter_id::DELTA, 0, 0, 0, 0],
            "more than one filter",
        ),
        (
            [filter_id::SHUFFLE, filter_id::BITSHUFFLE, 0, 0, 0, 0],
            "more than one filter",
        ),
    ] {
        assert_eq!(
            err(&with(&b1, &|p| p.filters = filters)),
            CodecError::NeedsBlosc2 { feature },
            "{filters:?}"
        );
    }
    assert_eq!(
        err(&with(&b1, &|p| p.filters_meta = [0, 0, 0, 0, 0, 2])),
        CodecError::NeedsBlosc2 {
            feature: "filters_meta (a shuffle group size)"
        }
    );
    // One SHUFFLE or BITSHUFFLE in any slot is a Blosc1 chunk.
    for filters in [
        [filter_id::SHUFFLE, 0, 0, 0, 0, 0],
        [0, 0, filter_id::BITSHUFFLE, 0, 0, 0],
    ] {
        let chunk = b2fs::codec::compress(&data, &with(&b1, &|p| p.filters = filters)).unwrap();
        assert_eq!(chunk[0], 2);
        assert_eq!(b2fs::codec::decompress(&chunk).unwrap(), data);
    }
}

/// Python: C-Blosc2's behaviour on the two parameter sets our encoder refuses. Prints, for
/// typesize 300 (accepted by C), the header's typesize and blocksize, whether C decodes its own
/// chunk, and writes the chunk; for a forced blocksize 8192 with typesize 3, whether C decodes
/// its own chunk.
const REFUSED_BY_US_PY: &str = r#"
import sys, blosc2
data = open(sys.argv[1], "rb").read()
c = blosc2.compress2(data, typesize=300, clevel=5, codec=blosc2.Codec.BLOSCLZ, nthreads=1)
open(sys.argv[1] + ".c", "wb").write(c)
print(c[3], int.from_bytes(c[8:12], "little"), blosc2.decompress2(c) == data)
c = blosc2.compress2(data[:30000], typesize=3, clevel=5, codec=blosc2.Codec.BLOSCLZ,
                     blocksize=8192, nthreads=1)
try:
    ok = blosc2.decompress2(c) == data[:30000]
except Exception:
    ok = False
print(int.from_bytes(c[8:12], "little"), ok)
"#;

/// Deliberate differences from C-Blosc2 (section 6.1 and 6.2), with C's behaviour checked:
///
/// - typesize > 255: C-Blosc2 accepts it, tunes the blocksize on the real size (40000 bytes of
///   typesize 300 -> 39900) and stores typesize 1. We refuse it with `InvalidTypesize`; the
///   same chunk is written by passing what C stores (typesize 1) and C's blocksize, byte for
///   byte. That is what b2fs does when it re-encodes a chunk of such an array: it reads both
///   from the existing chunk's header.
/// - a forced blocksize that is not a multiple of the typesize: C-Blosc2 writes a chunk its own
///   decoder rejects. We refuse it with `InvalidBlocksize`.
#[test]
fn typesize_over_255_and_unaligned_blocksize_refused_unlike_c() {
    use b2fs::codec::CodecError;
    let data: Vec<u8> = (0..40_000u32).map(|i| (i / 7 % 251) as u8).collect();
    let p300 = CParams::blosc2(Codec::BloscLz, 5, 300, filter_id::SHUFFLE);
    assert_eq!(
        b2fs::codec::compress(&data, &p300),
        Err(CodecError::InvalidTypesize(300))
    );
    let p3 = CParams {
        blocksize: Blocksize::Explicit(8192),
        ..CParams::blosc2(Codec::BloscLz, 5, 3, filter_id::SHUFFLE)
    };
    assert!(matches!(
        b2fs::codec::compress(&data[..30_000], &p3),
        Err(CodecError::InvalidBlocksize {
            blocksize: 8192,
            typesize: 3,
            ..
        })
    ));
    // What C stores for typesize 300, passed explicitly.
    let as_c_stores = CParams {
        typesize: 1,
        blocksize: Blocksize::Explicit(39_900),
        ..p300
    };
    let ours = b2fs::codec::compress(&data, &as_c_stores).unwrap();
    assert_eq!((ours[3], &ours[8..12]), (1, &39_900u32.to_le_bytes()[..]));
    assert_eq!(b2fs::codec::decompress(&ours).unwrap(), data);

    let py = or_skip!(python(
        "encoder::typesize_over_255_and_unaligned_blocksize_refused_unlike_c"
    ));
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("data.raw");
    std::fs::write(&raw, &data).unwrap();
    let out = run_python(&py, &["-c", REFUSED_BY_US_PY, raw.to_str().unwrap()]);
    let out = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        ["1 39900 True", "8192 False"],
        "C-Blosc2's behaviour"
    );
    let c_chunk = std::fs::read(dir.path().join("data.raw.c")).unwrap();
    assert_eq!(ours, c_chunk, "typesize 1 + C's blocksize gives C's chunk");
}

/// A b2nd array of a 300-byte structured dtype written by python-blosc2 (its chunks store
/// typesize 1 and blocksize blockshape x 300): b2fs re-encodes a chunk with the parameters
/// read from the existing chunk header (`chunk_cparams`) and commits it, and python-blosc2
/// reads the array back. The same with an array of only zero chunks, where the parameters come
/// from the frame header (typesize 300 there).
#[test]
fn itemsize_over_255_b2nd_writes_back() {
    use b2fs::container::write::{Edit, chunk_cparams, commit};
    use b2fs::container::{self, Container};
    let py = or_skip!(python("encoder::itemsize_over_255_b2nd_writes_back"));
    const WRITE_PY: &str = r#"
import sys, blosc2, numpy as np
dt = np.dtype([("a", "i4"), ("b", "S296")])
a = np.zeros(100, dtype=dt)
a["a"] = np.arange(100)
a["b"] = [b"row %d " % i * (i % 9 + 1) for i in range(100)]
blosc2.asarray(a, urlpath=sys.argv[1], mode="w", chunks=(40,), blocks=(10,),
               cparams={"codec": blosc2.Codec.LZ4, "clevel": 5})
blosc2.zeros((100,), dtype=dt, urlpath=sys.argv[2], mode="w", chunks=(40,), blocks=(10,))
"#;
    const READ_PY: &str = r#"
import sys, blosc2, numpy as np
for path in sys.argv[1:]:
    a = blosc2.open(path, mode="r")
    s = a.schunk
    assert a.dtype.itemsize == 300 and a.shape == (100,), (a.dtype, a.shape)
    for i in range(s.nchunks):
        want = open("%s.%d.expect" % (path, i), "rb").read()
        assert s.decompress_chunk(i) == want, (path, i)
    whole = b"".join(open("%s.%d.expect" % (path, i), "rb").read() for i in range(s.nchunks))
    assert a[:].tobytes() == whole[: 100 * 300], path
print("OK")
"#;
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().join("rec.b2nd"), dir.path().join("zeros.b2nd")];
    let p: Vec<&str> = paths.iter().map(|p| p.to_str().unwrap()).collect();
    run_python(&py, &["-c", WRITE_PY, p[0], p[1]]);
    for (k, path) in paths.iter().enumerate() {
        let Container::Array(a) = container::open(path).unwrap() else {
            panic!("not an array")
        };
        let params = chunk_cparams(&a).unwrap();
        assert_eq!(params.typesize, 1, "{params:?}");
        assert_eq!(params.blocksize, Blocksize::Explicit(3000), "{params:?}");
        let mut updates = Vec::new();
        for i in 0..a.nchunks() {
            let mut raw = b2fs::codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap();
            assert_eq!(raw.len(), 40 * 300);
            if i != 1 {
                // New content for chunks 0 and 2: every record changed.
                for (j, b) in raw.iter_mut().enumerate() {
                    *b = b.wrapping_add((j % 300 / 4 + i + k) as u8);
                }
                let chunk = b2fs::codec::compress(&raw, &params).unwrap();
                assert_eq!((chunk[3], &chunk[8..12]), (1, &3000u32.to_le_bytes()[..]));
                updates.push((i, chunk.into()));
            }
            std::fs::write(format!("{}.{i}.expect", path.display()), &raw).unwrap();
        }
        commit(
            &a,
            &Edit {
                updates,
                ..Edit::default()
            },
        )
        .unwrap();
    }
    assert_eq!(python_says(&py, &["-c", READ_PY, p[0], p[1]]), "OK");
}
