//! Random carrays and ctables made by bcolz at test time, read back and compared with what
//! bcolz reports; object-dtype carrays (one pickle per chunk file).

use super::*;

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
