//! Sources the references write at test time, read back: random frames from python-blosc2,
//! random carrays and ctables from bcolz, and attributes b2fs encodes that python-blosc2
//! reads.

use super::*;

// ---------------------------------------------------------------------------------------------
// Interop: python-blosc2 reads attrs encoded by json_to_msgpack

/// The JSON -> msgpack direction writes what python-blosc2 expects: a hand-built frame whose
/// vlmetalayers were encoded from JSON (tags included) reads back in python-blosc2 as the
/// intended Python values, and its chunks as our data.
#[test]
fn container_attrs_json_to_msgpack_reads_back_in_python_blosc2() {
    let py = or_skip!(crate::support::python(
        "container_attrs_json_to_msgpack_reads_back_in_python_blosc2"
    ));
    let values = [
        ("s", json!("K\u{e9}lvin")),
        ("i", json!(42)),
        ("neg", json!(-129)),
        ("big", json!(u64::MAX)),
        ("small", json!(i64::MIN)),
        ("f", json!(2.5)),
        ("one", json!(1.0)),
        ("nan", json!({"__float__": "nan"})),
        ("inf", json!({"__float__": "-inf"})),
        ("m", json!({"x": [1, 2.5, null, true], "y": {}})),
        ("t", json!({"__tuple__": [1, "a", {"__tuple__": []}]})),
        ("b", json!({"__bytes__": "AAH/"})),
        ("c", json!({"__complex__": [1.5, -2.0]})),
        ("set", json!({"__set__": [1, 2, 3]})),
        (
            "nd",
            json!({"__ndarray__": {"dtype": {"str": "<i2"}, "shape": [3], "data": {"__bytes__": "AAABAAIA"}}}),
        ),
        // python-blosc2 accepts only str and bytes map keys (msgpack strict_map_key).
        (
            "keys",
            json!({"__map__": [[{"__bytes__": "AQ=="}, "one"], ["b", 2]]}),
        ),
        ("long", json!("x".repeat(300))),
        ("list", json!((0..20).collect::<Vec<_>>())),
    ];
    let vlmeta: Vec<(&str, Vec<u8>)> = values
        .iter()
        .map(|(k, v)| (*k, attrs::json_to_msgpack(v).unwrap()))
        .collect();
    let data: Vec<u8> = (0..64u8).collect();
    let f = build_frame(4, 64, 64, &memcpyed(&data, 4), &[0], &[], &vlmeta);
    let (_dir, p) = crate::support::temp_path("interop.b2frame");
    std::fs::write(&p, &f).unwrap();
    // Our own reader gives the same JSON back.
    let a = open_array(&p);
    for (k, v) in &values {
        assert_eq!(&a.attrs()[*k], v, "{k}");
    }
    let script = r#"
import sys, math, numpy as np, blosc2
s = blosc2.open(sys.argv[1])
v = s.vlmeta.getall()
assert v["s"] == "K\u00e9lvin", v["s"]
assert v["i"] == 42 and v["neg"] == -129
assert v["big"] == 2**64 - 1 and v["small"] == -2**63
assert v["f"] == 2.5 and isinstance(v["one"], float) and v["one"] == 1.0
assert math.isnan(v["nan"]) and v["inf"] == -math.inf
assert v["m"] == {"x": [1, 2.5, None, True], "y": {}}, v["m"]
assert v["t"] == (1, "a", ()), v["t"]
assert v["b"] == b"\x00\x01\xff", v["b"]
assert v["c"] == complex(1.5, -2.0), v["c"]
assert v["set"] == {1, 2, 3}, v["set"]
assert v["nd"].dtype == np.dtype("<i2") and v["nd"].tolist() == [0, 1, 2], v["nd"]
assert v["keys"] == {b"\x01": "one", "b": 2}, v["keys"]
assert v["long"] == "x" * 300 and v["list"] == list(range(20))
assert s.decompress_chunk(0) == bytes(range(64))
print("ok")
"#;
    let out = crate::support::run_python(&py, &["-c", script, p.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&out).trim(), "ok");
}

// ---------------------------------------------------------------------------------------------
// Random frames made by python-blosc2 at test time

/// The generator: random SChunks (codecs, filters, typesizes, chunk sizes, partial and
/// variable-size chunks, inserts/updates/deletes leaving dead space, fill_special) and
/// NDArrays (ndim 0-3, padding, dtypes), contiguous or sparse, with random vlmeta of every
/// python-blosc2 type; one JSON record per frame with what the reference reports.
const ORACLE_FRAMES_PY: &str = r#"
import sys, os, json, random, hashlib, base64
import numpy as np, blosc2
import blosc2.blosc2_ext as b2ext

seed, count, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = random.Random(seed)
sha = lambda b: hashlib.sha256(b).hexdigest()
b64 = lambda b: base64.b64encode(b).decode()
CODECS = [blosc2.Codec.BLOSCLZ, blosc2.Codec.LZ4, blosc2.Codec.LZ4HC, blosc2.Codec.ZLIB, blosc2.Codec.ZSTD]
FILTERS = [[], [blosc2.Filter.SHUFFLE], [blosc2.Filter.BITSHUFFLE], [blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE]]

def cparams(ts):
    f = r.choice(FILTERS)
    return {"codec": r.choice(CODECS), "clevel": r.randrange(0, 10), "typesize": ts,
            "filters": f, "filters_meta": [0] * len(f), "nthreads": 1}

def data(n, ts):
    k = r.randrange(4)
    if k == 0:
        return bytes(n)
    if k == 1:
        return (np.arange(n // ts + 1, dtype=np.uint64) * r.randrange(1, 9)).astype(f"u{ts}" if ts in (1, 2, 4, 8) else "u1").tobytes()[:n].ljust(n, b"\0")
    if k == 2:
        return bytes([r.randrange(4) for _ in range(n)])
    return r.randbytes(n)

def value(depth=0):
    k = r.randrange(14 if depth < 2 else 9)
    if k == 0: return r.choice(["", "x", "K\u00e9lvin", "s" * r.randrange(40, 300)])
    if k == 1: return r.choice([0, 1, 127, 128, 255, 256, 65535, 65536, 2**32, 2**63 - 1, 2**64 - 1])
    if k == 2: return r.choice([-1, -32, -33, -128, -129, -32768, -2**31 - 1, -2**63])
    if k == 3: return r.choice([0.0, 1.0, -2.5, 1e300, float("nan"), float("inf"), float("-inf")])
    if k == 4: return r.choice([True, False, None])
    if k == 5: return r.randbytes(r.randrange(0, 300))
    if k == 6: return complex(r.random(), -r.random())
    if k == 7: return set(r.sample(range(100), r.randrange(0, 5)))
    if k == 8: return np.arange(r.randrange(0, 6), dtype=r.choice(["<i2", ">f4", "|u1", "<f8"]))
    if k in (9, 10): return [value(depth + 1) for _ in range(r.randrange(0, 18))]
    if k == 11: return tuple(value(depth + 1) for _ in range(r.randrange(0, 4)))
    return {f"k{i}": value(depth + 1) for i in range(r.randrange(0, 17))}

def record(sc, path, kind, arr=None, src=None):
    chunks = []
    for i in range(sc.nchunks):
        raw = sc.get_chunk(i)
        special = (raw[31] >> 4) & 7 if raw[2] & 5 == 5 and len(raw) >= 32 else 0
        d = bytes(sc.decompress_chunk(i))
        if special == 4:
            d = bytes(len(d))
        chunks.append({"nbytes": len(d), "cbytes": int.from_bytes(raw[12:16], "little"), "sha256": sha(d)})
    rec = {"source": path, "kind": kind, "nchunks": sc.nchunks, "typesize": sc.typesize,
           "nbytes": sc.nbytes, "chunks": chunks,
           "meta": {k: b64(b2ext.meta__getitem__(sc, k)) for k in sc.meta.keys()},
           "vlmeta": {k: b64(sc.vlmeta.get_vlmeta(k)) for k in list(sc.vlmeta)}}
    if arr is not None:
        # The input's bytes, not arr[...]: C-Blosc2 3.3.5 returns wrong items from arr[...] for
        # some DELTA-filtered arrays whose decompress_chunk is right.
        rec.update(shape=list(arr.shape), chunkshape=list(arr.chunks), blockshape=list(arr.blocks),
                   dtype=sc.meta["b2nd"][6], array_sha256=sha(np.ascontiguousarray(src).tobytes()))
    return rec

recs = []
for case in range(count):
    contiguous = r.random() < 0.7
    ext = ".b2nd" if case % 2 else ".b2frame"
    path = os.path.join(out, f"f{case}{ext}")
    if case % 2:
        nd = r.randrange(0, 4)
        shape = [r.randrange(0, 20) if r.random() < 0.1 else r.randrange(1, 20) for _ in range(nd)]
        chunks = [r.randrange(1, s + 1) if s else 0 for s in shape]
        blocks = [r.randrange(1, c + 1) if c else 0 for c in chunks]
        dtype = r.choice(["<i4", "<f8", "|u1", "<i2", "|b1", "<U2", "|S3", ">i8"])
        a = (np.arange(int(np.prod(shape)), dtype=np.int64) % 97).reshape(shape)
        kw = {} if 0 in shape else dict(chunks=chunks, blocks=blocks)
        src = a.astype(dtype)
        arr = blosc2.asarray(src, urlpath=path, mode="w", contiguous=contiguous,
                             cparams=cparams(np.dtype(dtype).itemsize), **kw)
        for i in range(r.randrange(0, 5)):
            arr.schunk.vlmeta[f"a{i}"] = value()
        recs.append(record(arr.schunk, path, "cframe" if contiguous else "sframe", arr, src))
        continue
    ts = r.choice([1, 2, 4, 8, 3])
    items = r.randrange(1, 3000)
    sc = blosc2.SChunk(chunksize=items * ts, urlpath=path, mode="w", contiguous=contiguous, cparams=cparams(ts))
    if r.random() < 0.2:
        kinds = [blosc2.SpecialValue.ZERO, blosc2.SpecialValue.UNINIT] + ([blosc2.SpecialValue.NAN] if ts in (4, 8) else [])
        sc.fill_special(r.randrange(1, 5 * items), r.choice(kinds))
    else:
        for i in range(r.randrange(0, 7)):
            sc.append_data(data(items * ts, ts))
        op = r.randrange(6)
        if op == 0 and sc.nchunks > 1:
            sc.delete_chunk(r.randrange(sc.nchunks))
        elif op == 1 and sc.nchunks > 0:
            sc.insert_data(r.randrange(sc.nchunks), data(items * ts, ts), True)
        elif op == 2 and sc.nchunks > 0:
            sc.update_data(r.randrange(sc.nchunks), data(items * ts, ts), True)
        elif op == 3:
            sc.append_data(data(r.randrange(1, items) * ts, ts))
            if r.random() < 0.5:
                sc.append_data(data(items * ts, ts))
    for i in range(r.randrange(0, 6)):
        sc.vlmeta[f"v{i}"] = value()
    try:
        recs.append(record(sc, path, "cframe" if contiguous else "sframe"))
    except Exception as e:
        # C-Blosc2 writes frames it cannot read back (a special chunk in variable-size mode,
        # docs/format/CONTAINERS.md 1.5); b2fs must only stay calm on them.
        recs.append({"source": path, "reference_error": str(e)})
json.dump(recs, open(os.path.join(out, "frames.json"), "w"))
"#;

/// A fresh random set made by the python `code` (arguments: seed, count, output directory;
/// it writes `json` there): the seed (`B2FS_SEED` replays a run, printed), the directory and
/// the parsed records. The count comes from `count.0` (default `count.1`).
fn random_set(
    test: &str,
    py: &Path,
    code: &str,
    count: (&str, usize),
    (what, json): (&str, &str),
) -> (u64, tempfile::TempDir, Value) {
    let seed: u64 = std::env::var("B2FS_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 % 1_000_000_007)
        });
    let count: usize = crate::support::env_or(count.0, count.1);
    eprintln!("{test}: seed {seed} (replay with B2FS_SEED={seed}), {count} {what}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    crate::support::run_python(
        py,
        &["-c", code, &seed.to_string(), &count.to_string(), out],
    );
    let recs = load(&dir.path().join(json));
    (seed, dir, recs)
}

/// Fresh random frames from python-blosc2 on every run (seed printed; `B2FS_SEED` replays,
/// `B2FS_ORACLE_FRAMES` sets the count, default 40): geometry, metalayers, vlmeta (content,
/// JSON and byte-exact re-encoding), every chunk's size and decoded sha256, and for NDArrays
/// the logical array rebuilt through the grid (compared with the numpy input).
#[test]
fn container_oracle_random_frames_match_python_blosc2() {
    let test = "container_oracle_random_frames_match_python_blosc2";
    let py = or_skip!(crate::support::python(test));
    let (seed, _dir, recs) = random_set(
        test,
        &py,
        ORACLE_FRAMES_PY,
        ("B2FS_ORACLE_FRAMES", 40),
        ("frames", "frames.json"),
    );
    let mut r = Report::default();
    for rec in recs.as_array().unwrap() {
        let path = PathBuf::from(rec["source"].as_str().unwrap());
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let name = format!("seed {seed} {name}");
        if rec.get("reference_error").is_some() {
            // The reference cannot read it back: b2fs must fail cleanly or read it.
            if let Ok(Container::Array(a)) = container::open(&path) {
                let sizes: Result<Vec<usize>, _> =
                    (0..a.nchunks()).map(|i| a.chunk_nbytes(i)).collect();
                if let Ok(sizes) = sizes {
                    // Inferred special sizes must add up.
                    r.check(
                        &name,
                        "inferred sizes",
                        sizes.iter().sum::<usize>() as u64,
                        a.nbytes(),
                    );
                }
                for i in 0..a.nchunks() {
                    if let Ok(c) = a.chunk_bytes(i) {
                        let _ = codec::decompress(&c);
                    }
                }
            }
            continue;
        }
        let a = match container::open(&path) {
            Ok(Container::Array(a)) => a,
            other => {
                r.0.push(format!("{name}: {other:?}"));
                continue;
            }
        };
        let kind = if rec["kind"] == "sframe" {
            SourceKind::Sframe
        } else {
            SourceKind::Cframe
        };
        r.check(&name, "kind", a.kind(), kind);
        r.check(
            &name,
            "nchunks",
            a.nchunks() as u64,
            rec["nchunks"].as_u64().unwrap(),
        );
        r.check(
            &name,
            "typesize",
            a.typesize() as u64,
            rec["typesize"].as_u64().unwrap(),
        );
        r.check(&name, "nbytes", a.nbytes(), rec["nbytes"].as_u64().unwrap());
        let metas: Vec<(String, Vec<u8>)> = a
            .metalayers()
            .iter()
            .map(|m| (m.name.clone(), m.raw.clone()))
            .collect();
        let want: Vec<(String, Vec<u8>)> = rec["meta"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), b64(v)))
            .collect();
        r.check(&name, "metalayers", metas, want);
        let vl: Vec<(String, Vec<u8>)> = a
            .vlmetalayers()
            .iter()
            .map(|v| (v.name.clone(), v.content.clone()))
            .collect();
        let want: Vec<(String, Vec<u8>)> = rec["vlmeta"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), b64(v)))
            .collect();
        r.check(&name, "vlmeta", vl, want);
        for v in a.vlmetalayers() {
            r.check(
                &name,
                &format!("vlmeta {} round trip", v.name),
                attrs::json_to_msgpack(&v.json).ok(),
                Some(v.content.clone()),
            );
            if v.json.get("__raw__").is_some() {
                r.0.push(format!("{name}: vlmeta {} not decoded", v.name));
            }
        }
        let mut chunks = Vec::new();
        for (i, c) in rec["chunks"].as_array().unwrap().iter().enumerate() {
            r.check(
                &name,
                &format!("chunk {i} nbytes"),
                a.chunk_nbytes(i).ok().map(|n| n as u64),
                c["nbytes"].as_u64(),
            );
            let d = a.chunk_bytes(i).map_err(|e| e.to_string()).and_then(|b| {
                r.check(
                    &name,
                    &format!("chunk {i} cbytes"),
                    b.len() as u64,
                    c["cbytes"].as_u64().unwrap(),
                );
                codec::decompress(&b).map_err(|e| e.to_string())
            });
            match d {
                Ok(d) => {
                    r.check(
                        &name,
                        &format!("chunk {i} sha256"),
                        sha256_hex(&d),
                        c["sha256"].as_str().unwrap().to_string(),
                    );
                    chunks.push(d);
                }
                Err(e) => r.0.push(format!("{name}: chunk {i}: {e}")),
            }
        }
        let Some(want) = rec.get("array_sha256").and_then(Value::as_str) else {
            continue;
        };
        let g = a.geometry();
        r.check(&name, "shape", g.shape.clone(), u64s(&rec["shape"]));
        r.check(
            &name,
            "dtype",
            g.dtype.clone(),
            rec["dtype"].as_str().map(String::from),
        );
        if g.shape.contains(&0) {
            continue;
        }
        r.check(
            &name,
            "chunkshape",
            g.chunkshape.clone(),
            Some(u64s(&rec["chunkshape"])),
        );
        r.check(
            &name,
            "blockshape",
            g.blockshape.clone(),
            Some(u64s(&rec["blockshape"])),
        );
        let (Some(grid), true) = (a.grid(), chunks.len() == a.nchunks()) else {
            r.0.push(format!("{name}: no grid or chunks missing"));
            continue;
        };
        let shape = g.shape.clone();
        let ts = a.typesize();
        let total: u64 = shape.iter().product();
        let mut out = Vec::new();
        let mut idx = vec![0u64; shape.len()];
        for _ in 0..total {
            let (c, pos) = grid.locate(&idx).unwrap();
            let at = pos as usize * ts;
            out.extend_from_slice(&chunks[c as usize][at..at + ts]);
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        r.check(&name, "array sha256", sha256_hex(&out), want.to_string());
    }
    r.finish(recs.as_array().unwrap().len());
}

/// C-Blosc2 writes special chunks into variable-size frames but cannot read them back; b2fs
/// infers their size when the header's nbytes leaves no doubt.
#[test]
fn container_variable_frame_special_sizes_are_inferred() {
    let full = memcpyed(&[1u8; 40], 4);
    let part = memcpyed(&[2u8; 20], 4);
    let mut area = full.clone();
    area.extend(&part);
    let p2 = full.len() as i64;
    let open = |nbytes: i64, index: &[i64]| match open_bytes(&build_frame(
        4,
        0,
        nbytes,
        &area,
        index,
        &[],
        &[],
    ))
    .unwrap()
    {
        Container::Array(a) => a,
        Container::Table(_) => unreachable!(),
    };
    // Two specials sharing 80 bytes: 40 each, the size of the largest stored chunk.
    let a = open(140, &[0, ZEROS, ZEROS, p2]);
    assert_eq!(a.chunksize(), 0);
    let sizes: Vec<usize> = (0..4).map(|i| a.chunk_nbytes(i).unwrap()).collect();
    assert_eq!(sizes, [40, 40, 40, 20]);
    assert_eq!(
        codec::decompress(&a.chunk_bytes(2).unwrap()).unwrap(),
        [0u8; 40]
    );
    // One special takes the rest, whatever its size.
    let a = open(70, &[0, p2, ZEROS]);
    assert_eq!(a.chunk_nbytes(2).unwrap(), 10);
    // Two specials sharing 50 bytes: 25 is no chunk size seen; refuse to guess.
    let a = open(110, &[0, ZEROS, ZEROS, p2]);
    let e = a.chunk_nbytes(1).unwrap_err();
    assert!(e.to_string().contains("cannot be inferred"), "{e}");
    assert!(a.chunk_bytes(2).is_err());
    assert_eq!(a.chunk_nbytes(3).unwrap(), 20);
}

// ---------------------------------------------------------------------------------------------
// Random carrays and ctables made by bcolz at test time

/// The generator: random carrays (dtypes bcolz-zipline can store, 1-3 dims, chunklen, codecs,
/// shuffles, leftovers, appends) and ctables, with attrs; one JSON record per directory.
const ORACLE_BCOLZ_PY: &str = r#"
import sys, os, json, random, hashlib
import numpy as np, bcolz

seed, count, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = random.Random(seed)
sha = lambda b: hashlib.sha256(b).hexdigest()
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
          "float64", "bool", ">i4", ">f8", "S1", "S5", "U1", "U3", "M8[ns]"]

def arr(n, dt, inner):
    a = np.arange(n * int(np.prod(inner)), dtype=np.int64) * r.randrange(1, 5)
    if dt.startswith(("S", "U")):
        a = a.astype(str).astype(dt)
    else:
        a = a.astype(dt)
    return a.reshape((n,) + tuple(inner))

def cp():
    return bcolz.cparams(clevel=r.randrange(0, 10), shuffle=r.randrange(0, 3),
                         cname=r.choice(["blosclz", "lz4", "lz4hc", "zlib", "zstd"]))

recs = []
for case in range(count):
    path = os.path.join(out, f"b{case}")
    if case % 5 == 4:
        n = r.randrange(0, 300)
        names = [f"c{i}" for i in range(r.randrange(1, 4))]
        cols = [arr(n, r.choice(DTYPES), ()) for _ in names]
        t = bcolz.ctable(columns=cols, names=names, rootdir=path, mode="w",
                         chunklen=r.randrange(1, 100), cparams=cp())
        t.attrs["case"] = case
        t.flush()
        recs.append({"source": path, "kind": "ctable", "names": names,
                     "columns": {nm: sha(np.ascontiguousarray(t[nm][:]).tobytes()) for nm in names}})
        continue
    dt = r.choice(DTYPES)
    inner = [r.randrange(1, 4) for _ in range(r.randrange(0, 3))]
    n = r.randrange(0, 500)
    c = bcolz.carray(arr(n, dt, inner), rootdir=path, mode="w", chunklen=r.randrange(1, 120),
                     cparams=cp())
    if r.random() < 0.3:
        c.append(arr(r.randrange(0, 200), dt, inner))
    for i in range(r.randrange(0, 3)):
        c.attrs[f"k{i}"] = r.choice([1, "two", [3.5, None], {"x": True}])
    c.flush()
    recs.append({"source": path, "kind": "carray", "len": len(c), "shape": list(c.shape),
                 "dtype": str(c.dtype), "chunklen": c.chunklen, "itemsize": c.dtype.itemsize,
                 "nbytes": int(c.nbytes), "sha256": sha(np.ascontiguousarray(c[:]).tobytes())})
json.dump(recs, open(os.path.join(out, "bcolz.json"), "w"))
"#;

fn carray_logical_bytes(a: &Array) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for i in 0..a.nchunks() {
        let n = a.chunk_nbytes(i).map_err(|e| e.to_string())?;
        let c = a.chunk_bytes(i).map_err(|e| e.to_string())?;
        let d = codec::decompress(&c).map_err(|e| format!("chunk {i}: {e}"))?;
        out.extend_from_slice(d.get(..n).ok_or(format!("chunk {i} short"))?);
    }
    Ok(out)
}

/// Fresh random bcolz directories on every run (`B2FS_SEED` replays, `B2FS_ORACLE_BCOLZ` sets
/// the count, default 30): shape, dtype, chunk geometry, sizes and the logical bytes.
#[test]
fn container_oracle_random_bcolz_match_reference() {
    let test = "container_oracle_random_bcolz_match_reference";
    let py = or_skip!(crate::support::python(test));
    let (seed, _dir, recs) = random_set(
        test,
        &py,
        ORACLE_BCOLZ_PY,
        ("B2FS_ORACLE_BCOLZ", 30),
        ("directories", "bcolz.json"),
    );
    let mut r = Report::default();
    for rec in recs.as_array().unwrap() {
        let path = PathBuf::from(rec["source"].as_str().unwrap());
        let name = format!(
            "seed {seed} {}",
            path.file_name().unwrap().to_string_lossy()
        );
        match container::open(&path) {
            Ok(Container::Array(a)) => {
                r.check(
                    &name,
                    "shape",
                    a.geometry().shape.clone(),
                    u64s(&rec["shape"]),
                );
                r.check(
                    &name,
                    "dtype",
                    a.geometry().dtype.clone(),
                    rec["dtype"].as_str().map(String::from),
                );
                let chunklen = rec["chunklen"].as_u64().unwrap();
                let len = rec["len"].as_u64().unwrap();
                r.check(
                    &name,
                    "chunkshape[0]",
                    a.geometry().chunkshape.as_ref().map(|c| c[0]),
                    Some(chunklen),
                );
                r.check(&name, "nchunks", a.nchunks() as u64, len.div_ceil(chunklen));
                r.check(
                    &name,
                    "typesize",
                    a.typesize() as u64,
                    rec["itemsize"].as_u64().unwrap(),
                );
                r.check(&name, "nbytes", a.nbytes(), rec["nbytes"].as_u64().unwrap());
                match carray_logical_bytes(&a) {
                    Ok(d) => r.check(
                        &name,
                        "sha256",
                        sha256_hex(&d),
                        rec["sha256"].as_str().unwrap().to_string(),
                    ),
                    Err(e) => r.0.push(format!("{name}: {e}")),
                }
            }
            Ok(Container::Table(t)) => {
                let names: Vec<String> = t.columns.iter().map(|(n, _)| n.clone()).collect();
                let want: Vec<String> = rec["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                r.check(&name, "names", names, want);
                r.check(&name, "attrs", t.attrs.get("case").is_some(), true);
                for (col, a) in &t.columns {
                    match carray_logical_bytes(a) {
                        Ok(d) => r.check(
                            &name,
                            col,
                            sha256_hex(&d),
                            rec["columns"][col].as_str().unwrap().to_string(),
                        ),
                        Err(e) => r.0.push(format!("{name}/{col}: {e}")),
                    }
                }
            }
            Err(e) => r.0.push(format!("{name}: {e}")),
        }
    }
    r.finish(recs.as_array().unwrap().len());
}

/// `changed_on_disk` sees appends and rewrites of frames and bcolz commits, and nothing else.
#[test]
fn container_changed_on_disk_detects_rewrites() {
    let tmp = tempfile::tempdir().unwrap();
    // Contiguous frame: same bytes -> unchanged; a longer frame written over it -> changed.
    let (f, _) = small_frame();
    let p = tmp.path().join("f.b2frame");
    std::fs::write(&p, &f).unwrap();
    let a = open_array(&p);
    assert!(!a.changed_on_disk().unwrap());
    let longer = build_frame(4, 40, 40, &memcpyed(&[9u8; 40], 4), &[0], &[], &[]);
    std::fs::write(&p, &longer).unwrap();
    assert!(a.changed_on_disk().unwrap());
    std::fs::remove_file(&p).unwrap();
    assert!(a.changed_on_disk().unwrap());
    // Sparse frame.
    let d = tmp.path().join("s");
    copy_tree(&data_dir().join("frames/schunk_sparse.b2frame"), &d);
    let a = open_array(&d);
    assert!(!a.changed_on_disk().unwrap());
    let mut idx = std::fs::read(d.join("chunks.b2frame")).unwrap();
    idx[37] ^= 1; // nbytes
    std::fs::write(d.join("chunks.b2frame"), &idx).unwrap();
    assert!(a.changed_on_disk().unwrap());
    // bcolz: a chunk rewrite is invisible, a sizes commit is not.
    let c = tmp.path().join("c");
    copy_tree(&data_dir().join("bcolz/carray_i4_leftover"), &c);
    let a = open_array(&c);
    assert!(!a.changed_on_disk().unwrap());
    let blp = std::fs::read(c.join("data/__0.blp")).unwrap();
    std::fs::write(c.join("data/__0.blp"), &blp).unwrap();
    assert!(!a.changed_on_disk().unwrap());
    let sizes = std::fs::read_to_string(c.join("meta/sizes")).unwrap();
    std::fs::write(
        c.join("meta/sizes"),
        sizes.replace("\"cbytes\": ", "\"cbytes\": 1"),
    )
    .unwrap();
    assert!(a.changed_on_disk().unwrap());
}

/// Object-dtype carrays store one pickled element per chunk file: nchunks = len, sizes from
/// each chunk's Blosc1 header.
#[test]
fn container_bcolz_object_dtype_reads_each_pickle() {
    let py = or_skip!(crate::support::python(
        "container_bcolz_object_dtype_reads_each_pickle"
    ));
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("obj");
    let script = r#"
import sys, pickle, bcolz, numpy as np
c = bcolz.carray(np.array([{"a": 1}, [1, 2, 3], "xyz"], dtype=object), rootdir=sys.argv[1], mode="w")
c.flush()
"#;
    crate::support::run_python(&py, &["-c", script, d.to_str().unwrap()]);
    let a = open_array(&d);
    assert_eq!(a.nchunks(), 3);
    assert_eq!(a.typesize(), 0);
    assert_eq!(a.geometry().dtype.as_deref(), Some("object"));
    assert_eq!(a.geometry().chunkshape, Some(vec![1]));
    let mut total = 0;
    for i in 0..3 {
        let n = a.chunk_nbytes(i).unwrap();
        let d = codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap();
        assert_eq!(d.len(), n);
        assert_eq!(d.first(), Some(&0x80), "chunk {i} is a pickle");
        total += n as u64;
    }
    assert_eq!(a.nbytes(), total);
}
