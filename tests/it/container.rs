//! The container layer against the reference: every frame (cframe, sframe, b2nd, caterva) and
//! bcolz fixture opens with the geometry and metadata python-blosc2 / caterva / bcolz report in
//! the sidecar JSON, and every chunk decodes to the reference sha256; refused layouts are
//! errors; hand-built frames check the open path (1,000,000 chunks read no chunk data, frame
//! start offsets, extension-blind detection); hostile sources are errors, never panics.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use b2fs::codec;
use b2fs::container::{
    self, Array, ChunkKind, Container, ContainerError, SourceKind, attrs, ndim::Grid,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{data_dir, repo_root, sha256_hex};

// ---------------------------------------------------------------------------------------------
// Helpers

fn load(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Sidecars encode a generic ext as `{"__ext__": code, "data": b64}`; b2fs as
/// `{"__ext__": [code, b64]}`.
fn sidecar_to_b2fs(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(sidecar_to_b2fs).collect()),
        Value::Object(m) => {
            if m.len() == 2 && m.contains_key("__ext__") && m.contains_key("data") {
                return json!({"__ext__": [m["__ext__"].clone(), m["data"].clone()]});
            }
            Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), sidecar_to_b2fs(v)))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

fn frame_sidecars() -> Vec<(PathBuf, Value)> {
    let dir = data_dir().join("frames");
    let mut out: Vec<(PathBuf, Value)> = std::fs::read_dir(&dir)
        .expect("tests/data/frames")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let v = load(&p);
            let src = dir.join(v["source"].as_str().expect("source"));
            (src, v)
        })
        .collect();
    let sample = repo_root().join("examples/sample.json");
    if sample.exists() {
        let v = load(&sample);
        out.push((repo_root().join("examples/sample.b2nd"), v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        out.len() >= 30,
        "expected the frame fixtures, found {}",
        out.len()
    );
    out
}

fn open_array(path: &Path) -> Array {
    match container::open(path) {
        Ok(Container::Array(a)) => a,
        Ok(Container::Table(_)) => panic!("{}: opened as a table", path.display()),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x.as_u64().expect("u64"))
        .collect()
}

fn b64(v: &Value) -> Vec<u8> {
    attrs::base64_decode(v.as_str().expect("base64 string")).expect("base64")
}

/// Collects mismatches so one run reports every failing fixture.
#[derive(Default)]
struct Report(Vec<String>);

impl Report {
    fn check<T: PartialEq + std::fmt::Debug>(&mut self, name: &str, what: &str, got: T, want: T) {
        if got != want {
            self.0
                .push(format!("{name}: {what}: got {got:?}, want {want:?}"));
        }
    }

    fn finish(self, total: usize) {
        assert!(
            self.0.is_empty(),
            "{} mismatches over {total} fixtures:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Frames

#[test]
fn container_frames_match_reference_sidecars() {
    let fixtures = frame_sidecars();
    let mut r = Report::default();
    for (path, sc) in &fixtures {
        let name = sc["name"].as_str().unwrap_or("?");
        let a = open_array(path);
        let kind = match sc["kind"].as_str() {
            Some("sframe") => SourceKind::Sframe,
            _ => SourceKind::Cframe,
        };
        r.check(name, "kind", a.kind(), kind);
        r.check(
            name,
            "nchunks",
            a.nchunks() as u64,
            sc["nchunks"].as_u64().unwrap(),
        );
        r.check(
            name,
            "typesize",
            a.typesize() as u64,
            sc["typesize"].as_u64().unwrap(),
        );
        r.check(name, "nbytes", a.nbytes(), sc["nbytes"].as_u64().unwrap());
        r.check(name, "cbytes", a.cbytes(), sc["cbytes"].as_u64().unwrap());
        let layout = &sc["layout"];
        let info = a.frame_info().expect("frame info");
        r.check(
            name,
            "header_len",
            info.header_len,
            layout["header_len"].as_u64().unwrap(),
        );
        r.check(
            name,
            "frame_len",
            info.frame_len,
            layout["frame_len"].as_u64().unwrap(),
        );
        r.check(
            name,
            "trailer_len",
            info.trailer_len,
            layout["trailer_len"].as_u64().unwrap(),
        );
        r.check(
            name,
            "general_flags",
            u64::from(info.general_flags),
            layout["general_flags"].as_u64().unwrap(),
        );
        r.check(
            name,
            "codec_flags",
            u64::from(info.codec_flags),
            layout["codec_flags"].as_u64().unwrap(),
        );
        r.check(
            name,
            "chunksize",
            i64::from(info.chunksize),
            layout["header_chunksize"].as_i64().unwrap(),
        );
        r.check(
            name,
            "blocksize",
            i64::from(info.blocksize),
            layout["header_blocksize"].as_i64().unwrap(),
        );
        r.check(
            name,
            "filters",
            info.filters.to_vec(),
            u64s(&layout["header_filters"])
                .iter()
                .map(|&x| x as u8)
                .collect(),
        );
        r.check(
            name,
            "udcodec",
            u64::from(info.udcodec),
            layout["header_udcodec"].as_u64().unwrap(),
        );
        r.check(
            name,
            "has_vlmeta",
            Value::Bool(info.has_vlmeta),
            layout["has_vlmeta"].clone(),
        );
        if let Some(pos) = layout["index_pos"].as_u64() {
            r.check(name, "index_pos", info.index_offset, Some(pos));
        }
        if let Some(entries) = layout["index_entries"].as_array() {
            let got: Vec<Option<i64>> =
                (0..entries.len()).map(|i| a.frame_index_entry(i)).collect();
            let want: Vec<Option<i64>> = entries.iter().map(Value::as_i64).collect();
            r.check(name, "index entries", got, want);
            r.check(
                name,
                "index past end",
                a.frame_index_entry(entries.len()),
                None,
            );
        }
        let want_cs = layout["header_chunksize"].as_i64().unwrap().max(0) as usize;
        r.check(name, "chunksize()", a.chunksize(), want_cs);

        // Geometry.
        let g = a.geometry();
        if sc["python_type"] == "NDArray" {
            r.check(name, "shape", g.shape.clone(), u64s(&sc["shape"]));
            r.check(
                name,
                "chunkshape",
                g.chunkshape.clone(),
                Some(u64s(&sc["chunks"])),
            );
            r.check(
                name,
                "blockshape",
                g.blockshape.clone(),
                Some(u64s(&sc["blocks"])),
            );
            r.check(
                name,
                "dtype",
                g.dtype.clone(),
                sc["dtype_b2nd"].as_str().map(String::from),
            );
        } else if let Some(cat) = sc["metalayers"].get("caterva") {
            r.check(name, "caterva shape", g.shape.clone(), u64s(&cat[2]));
            r.check(
                name,
                "caterva chunkshape",
                g.chunkshape.clone(),
                Some(u64s(&cat[3])),
            );
            r.check(
                name,
                "caterva blockshape",
                g.blockshape.clone(),
                Some(u64s(&cat[4])),
            );
            r.check(name, "caterva dtype", g.dtype.clone(), None);
        } else {
            r.check(
                name,
                "shape",
                g.shape.clone(),
                vec![a.nbytes() / a.typesize() as u64],
            );
        }

        // Metalayers: order, raw bytes and JSON.
        let want_meta = sc["metalayers"].as_object().unwrap();
        let names: Vec<&str> = a.metalayers().iter().map(|m| m.name.as_str()).collect();
        r.check(
            name,
            "metalayer names",
            names,
            want_meta.keys().map(String::as_str).collect(),
        );
        for m in a.metalayers() {
            r.check(
                name,
                &format!("metalayer {} raw", m.name),
                m.raw.clone(),
                b64(&sc["metalayers_msgpack_b64"][&m.name]),
            );
            r.check(
                name,
                &format!("metalayer {} json", m.name),
                m.json.clone(),
                sidecar_to_b2fs(&want_meta[&m.name]),
            );
        }

        // Vlmeta / attrs.
        let want_vl = sc["vlmeta"].as_object().unwrap();
        let names: Vec<&str> = a.vlmetalayers().iter().map(|m| m.name.as_str()).collect();
        r.check(
            name,
            "vlmeta names",
            names,
            want_vl.keys().map(String::as_str).collect(),
        );
        for v in a.vlmetalayers() {
            let raw = b64(&sc["vlmeta_msgpack_b64"][&v.name]);
            r.check(
                name,
                &format!("vlmeta {} content", v.name),
                v.content.clone(),
                raw.clone(),
            );
            r.check(
                name,
                &format!("vlmeta {} json", v.name),
                v.json.clone(),
                sidecar_to_b2fs(&want_vl[&v.name]),
            );
            // The mapping is byte-exact reversible on python-written content.
            r.check(
                name,
                &format!("vlmeta {} re-encoded", v.name),
                attrs::json_to_msgpack(&v.json).ok(),
                Some(raw),
            );
        }
        r.check(
            name,
            "attrs",
            a.attrs().clone(),
            sidecar_to_b2fs(&sc["vlmeta"]),
        );

        // Chunks.
        let mut all = Vec::new();
        for c in sc["chunk_list"].as_array().unwrap() {
            let i = c["index"].as_u64().unwrap() as usize;
            let want_kind = match c["special"].as_str() {
                None => ChunkKind::Regular,
                Some("zeros") => ChunkKind::Zeros,
                Some("nan") => ChunkKind::Nan,
                Some("value") => ChunkKind::Value,
                Some("uninit") => ChunkKind::Uninit,
                Some(o) => panic!("{name}: unknown special {o}"),
            };
            r.check(
                name,
                &format!("chunk {i} kind"),
                a.chunk_kind(i).ok(),
                Some(want_kind),
            );
            r.check(
                name,
                &format!("chunk {i} nbytes"),
                a.chunk_nbytes(i).ok(),
                c["nbytes"].as_u64().map(|n| n as usize),
            );
            let bytes = match a.chunk_bytes(i) {
                Ok(b) => b.into_owned(),
                Err(e) => {
                    r.0.push(format!("{name}: chunk {i}: {e}"));
                    continue;
                }
            };
            let hdr = a.chunk_header(i).map(|h| h.cbytes).ok();
            r.check(
                name,
                &format!("chunk {i} cbytes"),
                hdr,
                c["cbytes"].as_u64().map(|n| n as usize),
            );
            r.check(
                name,
                &format!("chunk {i} len"),
                bytes.len() as u64,
                c["cbytes"].as_u64().unwrap(),
            );
            match codec::decompress(&bytes) {
                Ok(d) => {
                    r.check(
                        name,
                        &format!("chunk {i} sha256"),
                        sha256_hex(&d),
                        c["sha256"].as_str().unwrap().to_string(),
                    );
                    all.extend(d);
                }
                Err(e) => r.0.push(format!("{name}: chunk {i} decode: {e}")),
            }
        }
        r.check(
            name,
            "chunks_sha256",
            sha256_hex(&all),
            sc["chunks_sha256"].as_str().unwrap().to_string(),
        );
        // No chunk beyond nchunks.
        assert!(matches!(
            a.chunk_bytes(a.nchunks()),
            Err(ContainerError::NoSuchChunk { .. })
        ));
    }
    r.finish(fixtures.len());
}

/// The b2nd element-to-chunk mapping against the reference: rebuilding every NDArray's logical
/// C-order bytes through `Grid::locate` gives python-blosc2's `arr[...]` sha256.
#[test]
fn container_b2nd_grid_rebuilds_reference_arrays() {
    let mut checked = 0;
    for (path, sc) in frame_sidecars() {
        let Some(want) = sc["array_sha256"].as_str() else {
            continue;
        };
        let name = sc["name"].as_str().unwrap();
        let a = open_array(&path);
        let grid = a.grid().unwrap_or_else(|| panic!("{name}: no grid"));
        let shape = a.geometry().shape.clone();
        let itemsize = a.typesize();
        let chunks: Vec<Vec<u8>> = (0..a.nchunks())
            .map(|i| codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap())
            .collect();
        assert_eq!(grid.nchunks(), a.nchunks() as u64, "{name}");
        let total: u64 = shape.iter().product();
        let mut out = Vec::with_capacity(total as usize * itemsize);
        let mut idx = vec![0u64; shape.len()];
        for _ in 0..total {
            let (c, pos) = grid.locate(&idx).expect("inside");
            let at = pos as usize * itemsize;
            out.extend_from_slice(&chunks[c as usize][at..at + itemsize]);
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        assert_eq!(sha256_hex(&out), want, "{name}: logical array");
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} NDArray fixtures");
}

#[test]
fn container_grid_matches_caterva_fixture_numpy() {
    // caterva_cframe / caterva_sframe record the numpy input they were made from.
    for name in ["caterva_cframe", "caterva_sframe"] {
        let sc = load(&data_dir().join(format!("frames/{name}.json")));
        let a = open_array(
            &data_dir()
                .join("frames")
                .join(sc["source"].as_str().unwrap()),
        );
        let grid = a.grid().expect("caterva grid");
        assert_eq!(a.geometry().shape, u64s(&sc["numpy_shape"]));
        let shape = a.geometry().shape.clone();
        let chunks: Vec<Vec<u8>> = (0..a.nchunks())
            .map(|i| codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap())
            .collect();
        let mut out = Vec::new();
        for i in 0..shape[0] {
            for j in 0..shape[1] {
                let (c, pos) = grid.locate(&[i, j]).unwrap();
                let at = pos as usize * 8;
                out.extend_from_slice(&chunks[c as usize][at..at + 8]);
            }
        }
        assert_eq!(
            sha256_hex(&out),
            sc["numpy_sha256"].as_str().unwrap(),
            "{name}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// bcolz

fn bcolz_sidecars(kind: &str) -> Vec<(PathBuf, Value)> {
    let dir = data_dir().join("bcolz");
    let mut out: Vec<(PathBuf, Value)> = std::fs::read_dir(&dir)
        .expect("tests/data/bcolz")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| (p.with_extension(""), load(&p)))
        .filter(|(_, v)| v["kind"] == kind)
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn check_carray(r: &mut Report, name: &str, a: &Array, sc: &Value) {
    r.check(name, "kind", a.kind(), SourceKind::BcolzCarray);
    let shape = u64s(&sc["sizes"]["shape"]);
    let len = sc["len"].as_u64().unwrap();
    let chunklen = sc["chunklen"].as_u64().unwrap();
    r.check(name, "shape", a.geometry().shape.clone(), shape.clone());
    let mut cs = vec![chunklen];
    cs.extend_from_slice(&shape[1..]);
    r.check(
        name,
        "chunkshape",
        a.geometry().chunkshape.clone(),
        Some(cs),
    );
    r.check(
        name,
        "dtype",
        a.geometry().dtype.clone(),
        sc["dtype"].as_str().map(String::from),
    );
    r.check(
        name,
        "sizes",
        a.bcolz_sizes().cloned(),
        Some(sc["sizes"].clone()),
    );
    // Key order is the file's (the tree shows these objects as they are stored).
    let keys = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    r.check(
        name,
        "storage key order",
        keys(a.bcolz_storage()),
        keys(Some(&sc["storage"])),
    );
    r.check(
        name,
        "attrs key order",
        keys(Some(a.attrs())),
        keys(Some(&sc["attrs"])),
    );
    r.check(
        name,
        "storage",
        a.bcolz_storage().cloned(),
        Some(sc["storage"].clone()),
    );
    r.check(name, "attrs", a.attrs().clone(), sc["attrs"].clone());
    r.check(
        name,
        "cbytes",
        a.cbytes(),
        sc["sizes"]["cbytes"].as_u64().unwrap(),
    );
    r.check(
        name,
        "nbytes",
        a.nbytes(),
        sc["sizes"]["nbytes"].as_u64().unwrap(),
    );
    if let Some(full) = sc["nchunks_full"].as_u64() {
        let left = sc["leftover_items"].as_u64().unwrap();
        r.check(
            name,
            "nchunks",
            a.nchunks() as u64,
            full + u64::from(left > 0),
        );
    }
    r.check(name, "nchunks", a.nchunks() as u64, len.div_ceil(chunklen));
    let files = sc["chunk_files"].as_array().unwrap();
    let mut data = Vec::new();
    for i in 0..a.nchunks() {
        let f = files
            .iter()
            .find(|f| f["file"] == format!("data/__{i}.blp"));
        let Some(f) = f else {
            r.0.push(format!("{name}: sidecar has no data/__{i}.blp"));
            continue;
        };
        let bytes = match a.chunk_bytes(i) {
            Ok(b) => b.into_owned(),
            Err(e) => {
                r.0.push(format!("{name}: chunk {i}: {e}"));
                continue;
            }
        };
        r.check(
            name,
            &format!("chunk {i} cbytes"),
            bytes.len() as u64,
            f["cbytes"].as_u64().unwrap(),
        );
        let h = a.chunk_header(i).expect("blosc1 header");
        r.check(
            name,
            &format!("chunk {i} header nbytes"),
            h.nbytes as u64,
            f["nbytes"].as_u64().unwrap(),
        );
        let n = a.chunk_nbytes(i).unwrap();
        // Sizes from the metadata agree with each chunk's own Blosc1 header.
        r.check(
            name,
            &format!("chunk {i} nbytes"),
            n as u64,
            f["nbytes"].as_u64().unwrap(),
        );
        match codec::decompress(&bytes) {
            Ok(d) => {
                r.check(
                    name,
                    &format!("chunk {i} sha256"),
                    sha256_hex(&d),
                    f["sha256"].as_str().unwrap().to_string(),
                );
                data.extend_from_slice(&d[..n.min(d.len())]);
            }
            Err(e) => r.0.push(format!("{name}: chunk {i} decode: {e}")),
        }
    }
    r.check(
        name,
        "array sha256",
        sha256_hex(&data),
        sc["array_sha256"].as_str().unwrap().to_string(),
    );
}

#[test]
fn container_bcolz_carrays_match_reference_sidecars() {
    let fixtures = bcolz_sidecars("carray");
    assert!(fixtures.len() >= 20, "found {}", fixtures.len());
    let mut r = Report::default();
    for (path, sc) in &fixtures {
        let name = sc["name"].as_str().unwrap();
        let a = open_array(path);
        r.check(name, "has __attrs__", a.bcolz_has_attrs_file(), Some(true));
        check_carray(&mut r, name, &a, sc);
    }
    r.finish(fixtures.len());
}

#[test]
fn container_bcolz_ctables_match_reference_sidecars() {
    let fixtures = bcolz_sidecars("ctable");
    assert!(!fixtures.is_empty());
    let mut r = Report::default();
    for (path, sc) in &fixtures {
        let name = sc["name"].as_str().unwrap();
        let t = match container::open(path) {
            Ok(Container::Table(t)) => t,
            other => panic!("{name}: {other:?}"),
        };
        r.check(name, "attrs", t.attrs.clone(), sc["attrs"].clone());
        let names: Vec<&str> = t.columns.iter().map(|(n, _)| n.as_str()).collect();
        let want: Vec<&str> = sc["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        r.check(name, "column order", names, want);
        for (col, a) in &t.columns {
            let mut csc = sc["columns"][col].clone();
            csc["name"] = json!(format!("{name}/{col}"));
            check_carray(&mut r, &format!("{name}/{col}"), a, &csc);
        }
    }
    r.finish(fixtures.len());
}

// ---------------------------------------------------------------------------------------------
// Refused and odd layouts

#[test]
fn container_refuse_fixtures_are_refused() {
    let dir = data_dir().join("refuse");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        seen += 1;
        match name.as_str() {
            "blsk_2012" => {
                // With meta/nrows it is read as docs/BLSK.md defines (tests/it/blsk.rs has the
                // python-blosc checks): 3000 int32 rows in 6 chunks of 500.
                let Container::Array(a) = container::open(&p).unwrap() else {
                    panic!("blsk_2012 is not an array");
                };
                assert_eq!((a.geometry().shape.clone(), a.nchunks()), (vec![3000], 6));
                for i in 0..6 {
                    let d = codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap();
                    assert_eq!(d.len(), 2000);
                }
                // Without meta/nrows it is not a source: recognised (by `__N__.bin` names, and
                // by the magic alone) and refused.
                let tmp = tempfile::tempdir().unwrap();
                let d = tmp.path().join("b");
                copy_dir(&p, &d);
                std::fs::remove_file(d.join("meta/nrows")).unwrap();
                let err = container::open(&d).unwrap_err();
                assert!(err.to_string().contains("__.bin"), "{err}");
                std::fs::rename(d.join("data/__1__.bin"), d.join("data/one")).unwrap();
                std::fs::rename(d.join("data/__2__.bin"), d.join("data/two")).unwrap();
                let err = container::open(&d).unwrap_err();
                assert!(matches!(err, ContainerError::Unsupported { .. }), "{err}");
                // And a single superchunk file.
                let err = container::open(&d.join("data/one")).unwrap_err();
                assert!(matches!(err, ContainerError::Unsupported { .. }), "{err}");
            }
            "bcolz_no_attrs" => {
                // Readable (nothing to lose), but flagged so write-back can refuse.
                let a = open_array(&p);
                assert_eq!(a.bcolz_has_attrs_file(), Some(false));
                assert_eq!(a.attrs(), &json!({}));
                for i in 0..a.nchunks() {
                    codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap();
                }
            }
            "bcolz_blosc2_chunk" => {
                let a = open_array(&p);
                let err = a.chunk_bytes(0).unwrap_err();
                assert!(matches!(err, ContainerError::Malformed { .. }), "{err}");
                assert!(err.to_string().contains("__0.blp"), "{err}");
            }
            _ => {
                let err = container::open(&p).map(|_| ()).unwrap_err();
                let msg = err.to_string();
                assert!(
                    msg.contains(&name),
                    "{name}: error does not name the file: {msg}"
                );
                assert!(
                    matches!(
                        err,
                        ContainerError::Malformed { .. } | ContainerError::NotAContainer { .. }
                    ),
                    "{name}: {msg}"
                );
            }
        }
    }
    assert!(seen >= 11, "{seen}");
}

// ---------------------------------------------------------------------------------------------
// Hand-built frames (docs/format/CONTAINERS.md 1.9)

/// A memcpyed Blosc2 chunk of `data` with the given typesize.
pub(crate) fn memcpyed(data: &[u8], typesize: u8) -> Vec<u8> {
    let n = data.len() as u32;
    let mut c = vec![5, 1, 0x17, typesize];
    c.extend(n.to_le_bytes());
    c.extend(n.max(1).to_le_bytes());
    c.extend((n + 32).to_le_bytes());
    c.extend([0u8; 16]);
    c.extend_from_slice(data);
    c
}

/// Builds a contiguous frame: header (with `metalayers`), chunk area, index, trailer (with
/// `vlmeta` as memcpyed chunks of the given msgpack payloads).
pub(crate) fn build_frame(
    typesize: i32,
    chunksize: i32,
    nbytes: i64,
    area: &[u8],
    index: &[i64],
    metalayers: &[(&str, Vec<u8>)],
    vlmeta: &[(&str, Vec<u8>)],
) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend([0x9e, 0xa8]);
    h.extend(b"b2frame\0");
    h.extend([0xd2, 0, 0, 0, 0]); // header_len, patched
    h.extend([0xcf, 0, 0, 0, 0, 0, 0, 0, 0]); // frame_len, patched
    h.extend([
        0xa4,
        if chunksize == 0 { 0x53 } else { 0x12 },
        0,
        0x55,
        0x02,
    ]);
    h.push(0xd3);
    h.extend(nbytes.to_be_bytes());
    h.push(0xd3);
    h.extend((area.len() as i64).to_be_bytes());
    h.push(0xd2);
    h.extend(typesize.to_be_bytes());
    h.push(0xd2);
    h.extend(0i32.to_be_bytes());
    h.push(0xd2);
    h.extend(chunksize.to_be_bytes());
    h.extend([0xd1, 0, 1, 0xd1, 0, 1]);
    h.push(if vlmeta.is_empty() { 0xc2 } else { 0xc3 });
    h.extend([0xd8, 0x06, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(h.len(), 87);
    let names: usize = metalayers.iter().map(|(n, _)| 6 + n.len()).sum();
    h.push(0x93);
    h.push(0xcd);
    h.extend(((7 + names) as u16).to_be_bytes());
    h.push(0xde);
    h.extend((metalayers.len() as u16).to_be_bytes());
    let mut off = 87 + 7 + names + 3;
    for (n, c) in metalayers {
        h.push(0xa0 | n.len() as u8);
        h.extend(n.as_bytes());
        h.push(0xd2);
        h.extend((off as i32).to_be_bytes());
        off += 5 + c.len();
    }
    h.push(0xdc);
    h.extend((metalayers.len() as u16).to_be_bytes());
    for (_, c) in metalayers {
        h.push(0xc6);
        h.extend((c.len() as u32).to_be_bytes());
        h.extend(c);
    }
    let header_len = h.len() as i32;
    h[11..15].copy_from_slice(&header_len.to_be_bytes());
    let mut f = h;
    f.extend_from_slice(area);
    if nbytes > 0 {
        let raw: Vec<u8> = index.iter().flat_map(|e| e.to_le_bytes()).collect();
        f.extend(memcpyed(&raw, 8));
    }
    // Trailer.
    let t0 = f.len();
    let names: usize = vlmeta.iter().map(|(n, _)| 6 + n.len()).sum();
    let mut t = vec![0x94, 0x01, 0x93, 0xcd];
    t.extend(((6 + names) as u16).to_be_bytes());
    t.push(0xde);
    t.extend((vlmeta.len() as u16).to_be_bytes());
    let chunks: Vec<Vec<u8>> = vlmeta.iter().map(|(_, c)| memcpyed(c, 1)).collect();
    let mut off = t.len() + names + 3;
    for ((n, _), c) in vlmeta.iter().zip(&chunks) {
        t.push(0xa0 | n.len() as u8);
        t.extend(n.as_bytes());
        t.push(0xd2);
        t.extend((off as i32).to_be_bytes());
        off += 5 + c.len();
    }
    t.push(0xdc);
    t.extend((vlmeta.len() as u16).to_be_bytes());
    for c in &chunks {
        t.push(0xc6);
        t.extend((c.len() as u32).to_be_bytes());
        t.extend(c);
    }
    let trailer_len = (t.len() + 23) as u32;
    t.push(0xce);
    t.extend(trailer_len.to_be_bytes());
    t.extend([0xd8, 0]);
    t.extend([0u8; 16]);
    f.extend(t);
    let frame_len = f.len() as u64;
    f[16..24].copy_from_slice(&frame_len.to_be_bytes());
    let _ = t0;
    f
}

pub(crate) const ZEROS: i64 = -0x7f00_0000_0000_0000;

/// A small frame: 3 chunks of 40 bytes (typesize 4) + a 20-byte last chunk, one zero chunk,
/// a user metalayer and two vlmetalayers.
pub(crate) fn small_frame() -> (Vec<u8>, Vec<Vec<u8>>) {
    let data: Vec<Vec<u8>> = (0..4u8)
        .map(|i| (0..if i == 3 { 20 } else { 40 }).map(|b| b ^ i).collect())
        .collect();
    let mut area = Vec::new();
    let mut index = Vec::new();
    for (i, d) in data.iter().enumerate() {
        if i == 1 {
            index.push(ZEROS);
            continue;
        }
        index.push(area.len() as i64);
        area.extend(memcpyed(d, 4));
    }
    let f = build_frame(
        4,
        40,
        140,
        &area,
        &index,
        &[("usr", vec![0x92, 0x01, 0x02]), ("junk", vec![0x92, 0x01])],
        &[("unit", vec![0xa1, b'm']), ("n", vec![0x2a])],
    );
    (f, data)
}

#[test]
fn container_hand_built_frame_opens_and_reads() {
    let (f, data) = small_frame();
    let dir = tempfile::tempdir().unwrap();
    // Detection by content: any name works.
    let p = dir.path().join("anything.txt");
    std::fs::write(&p, &f).unwrap();
    let a = open_array(&p);
    assert_eq!(a.kind(), SourceKind::Cframe);
    assert_eq!(a.nchunks(), 4);
    assert_eq!(a.geometry().shape, [35]);
    assert_eq!(a.metalayers()[0].json, json!([1, 2]));
    // A metalayer that is not one msgpack value is kept as raw bytes.
    assert_eq!(a.metalayers()[1].json, json!({"__raw__": "kgE="}));
    assert_eq!(a.attrs(), &json!({"unit": "m", "n": 42}));
    assert_eq!(a.chunk_kind(1).unwrap(), ChunkKind::Zeros);
    assert_eq!(a.chunk_nbytes(3).unwrap(), 20);
    for (i, want) in data.iter().enumerate() {
        let d = codec::decompress(&a.chunk_bytes(i).unwrap()).unwrap();
        if i == 1 {
            assert_eq!(d, vec![0u8; 40]);
        } else {
            assert_eq!(&d, want);
        }
    }
    // Junk after frame_len is ignored; a frame embedded at an offset opens at that offset.
    let mut longer = f.clone();
    longer.extend([0xAB; 100]);
    std::fs::write(&p, &longer).unwrap();
    assert_eq!(open_array(&p).nchunks(), 4);
    let mut embedded = vec![0x55u8; 1000];
    embedded.extend(&f);
    embedded.extend([0u8; 7]);
    std::fs::write(&p, &embedded).unwrap();
    let a = Array::open_frame_at(&p, 1000).unwrap();
    assert_eq!(a.frame_info().unwrap().start, 1000);
    assert_eq!(
        codec::decompress(&a.chunk_bytes(2).unwrap()).unwrap(),
        data[2]
    );
    assert!(container::open(&p).is_err());
}

#[test]
fn container_array_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Array>();
    assert_send_sync::<Container>();
    // And chunks can be read from many threads at once.
    let (f, data) = small_frame();
    let (_dir, p) = crate::support::temp_path("f.b2frame");
    std::fs::write(&p, &f).unwrap();
    let a = Arc::new(open_array(&p));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let a = Arc::clone(&a);
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let d = codec::decompress(&a.chunk_bytes(3).unwrap()).unwrap();
                    assert_eq!(d.len(), 20);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        codec::decompress(&a.chunk_bytes(0).unwrap()).unwrap(),
        data[0]
    );
}

/// 1,000,000 chunks: one real memcpyed chunk that every other entry points at, interleaved
/// with special zero entries. Opening must take milliseconds and read only the header, the
/// index and the trailer.
#[test]
fn container_million_chunk_frame_opens_without_reading_chunks() {
    const N: usize = 1_000_000;
    let chunk = memcpyed(&[7u8; 16], 4);
    let index: Vec<i64> = (0..N).map(|i| if i % 2 == 0 { 0 } else { ZEROS }).collect();
    let f = build_frame(
        4,
        16,
        (N * 16) as i64,
        &chunk,
        &index,
        &[],
        &[("k", vec![0x01])],
    );
    let (_dir, p) = crate::support::temp_path("million.b2frame");
    std::fs::write(&p, &f).unwrap();

    let t = std::time::Instant::now();
    let a = open_array(&p);
    let elapsed = t.elapsed();
    assert_eq!(a.nchunks(), N);
    let info = a.frame_info().unwrap();
    let index_region = info.index_len;
    // Exactly: the header (prefix first), the 23-byte tail, the index, the trailer.
    let expected = 23 + info.header_len + index_region + info.trailer_len;
    // Plus the 32-byte magic sniff of `open`.
    assert_eq!(
        a.io_stats().bytes(),
        expected + 32,
        "bytes read during open"
    );
    assert!(a.io_stats().reads() <= 6, "{} reads", a.io_stats().reads());
    eprintln!("open of {N} chunks: {elapsed:?}");
    assert!(elapsed.as_secs_f64() < 2.0, "open took {elapsed:?}");
    // Sizes and kinds come from the index without I/O.
    let before = a.io_stats().bytes();
    assert_eq!(a.chunk_nbytes(N - 1).unwrap(), 16);
    assert_eq!(a.chunk_kind(N - 1).unwrap(), ChunkKind::Zeros);
    assert_eq!(a.io_stats().bytes(), before);
    assert_eq!(
        codec::decompress(&a.chunk_bytes(N - 2).unwrap()).unwrap(),
        [7u8; 16]
    );
}

/// `fill_special` frames store the index as one repeated-value special chunk; a huge nchunks
/// then costs no memory.
#[test]
fn container_repeated_value_index_is_not_expanded() {
    // 200,000,000 zero chunks of 8 bytes in a ~170-byte file.
    let n: i64 = 200_000_000;
    let mut f = build_frame(8, 8, n * 8, &[], &[0], &[], &[]);
    // Replace the memcpyed 1-entry index (40 bytes) by the 40-byte fill_special chunk.
    let hl = 97;
    let idx = &mut f[hl..hl + 40];
    let nb = (n * 8) as u32;
    idx[..32].copy_from_slice(&[0u8; 32]);
    idx[0..4].copy_from_slice(&[5, 1, 5, 8]);
    idx[4..8].copy_from_slice(&nb.to_le_bytes());
    idx[8..12].copy_from_slice(&nb.to_le_bytes());
    idx[12..16].copy_from_slice(&40u32.to_le_bytes());
    idx[31] = 0x30;
    idx[32..40].copy_from_slice(&ZEROS.to_le_bytes());
    let (_dir, p) = crate::support::temp_path("zeros.b2frame");
    std::fs::write(&p, &f).unwrap();
    let a = open_array(&p);
    assert_eq!(a.nchunks(), n as usize);
    assert_eq!(a.chunk_kind(123_456_789).unwrap(), ChunkKind::Zeros);
    let c = a.chunk_bytes(n as usize - 1).unwrap();
    assert_eq!(codec::decompress(&c).unwrap(), [0u8; 8]);
}

// ---------------------------------------------------------------------------------------------
// Hostile frames

fn open_bytes(bytes: &[u8]) -> Result<Container, ContainerError> {
    let (_dir, p) = crate::support::temp_path("hostile.b2frame");
    std::fs::write(&p, bytes).unwrap();
    container::open(&p)
}

#[track_caller]
fn assert_malformed(r: Result<Container, ContainerError>, needle: &str) {
    match r {
        Err(e @ ContainerError::Malformed { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("hostile.b2frame"), "no path: {msg}");
            assert!(msg.contains(needle), "expected {needle:?} in: {msg}");
        }
        Err(e) => panic!("expected Malformed ({needle}), got {e:?}"),
        Ok(_) => panic!("expected Malformed ({needle}), opened"),
    }
}

#[test]
fn container_hostile_frames_are_errors() {
    let (f, _) = small_frame();
    // Every truncation fails (the trailer is located from frame_len).
    for cut in 0..f.len() {
        assert!(open_bytes(&f[..cut]).is_err(), "cut at {cut}");
    }
    // Metalayer count that lies (16 claimed, 1 present).
    let mut m = f.clone();
    m[92..94].copy_from_slice(&16u16.to_be_bytes());
    assert!(open_bytes(&m).is_err());
    // More than 16 metalayers.
    m[92..94].copy_from_slice(&17u16.to_be_bytes());
    assert_malformed(open_bytes(&m), "17 entries");
    // Metalayer offset outside the header.
    let mut m = f.clone();
    m[99..103].copy_from_slice(&0x7fff_0000i32.to_be_bytes());
    assert_malformed(open_bytes(&m), "offset");
    // Metalayer content length of 4 GiB.
    let mut m = f.clone();
    let c6 = 87 + 7 + (6 + 3) + (6 + 4) + 3; // names "usr" and "junk"
    assert_eq!(m[c6], 0xc6);
    m[c6 + 1..c6 + 5].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_malformed(open_bytes(&m), "metalayer section");
    // Index entry past the chunk area.
    let a = match open_bytes(&f).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => unreachable!(),
    };
    let idx_at = a.frame_info().unwrap().index_offset.unwrap() as usize + 32;
    let mut m = f.clone();
    m[idx_at + 8..idx_at + 16].copy_from_slice(&1_000_000i64.to_le_bytes());
    assert_malformed(open_bytes(&m), "chunk 1: offset 1000000");
    // Invalid special value.
    m[idx_at + 8..idx_at + 16].copy_from_slice(&(-0x8000_0000_0000_0000i64).to_le_bytes());
    assert_malformed(open_bytes(&m), "invalid special");
    // Negative nbytes; negative typesize; chunksize -1 with data.
    let mut m = f.clone();
    m[30] = 0xff;
    assert_malformed(open_bytes(&m), "negative nbytes");
    let mut m = f.clone();
    m[48] = 0xff;
    assert_malformed(open_bytes(&m), "typesize");
    let mut m = f.clone();
    m[59..62].copy_from_slice(&[0xff, 0xff, 0xff]);
    m[58] = 0xff;
    assert_malformed(open_bytes(&m), "chunksize");
    // nbytes that implies a different number of chunks than the index holds.
    let mut m = f.clone();
    m[37] = 200;
    assert_malformed(open_bytes(&m), "entries");
    // frame_len of 2^63 - 1.
    let mut m = f.clone();
    m[16..24].copy_from_slice(&i64::MAX.to_be_bytes());
    assert_malformed(open_bytes(&m), "frame_len");
    // Trailer vlmetalayer count of 65535 / content length of 4 GiB.
    let t = f.len() - a.frame_info().unwrap().trailer_len as usize;
    let mut m = f.clone();
    m[t + 7..t + 9].copy_from_slice(&0xffffu16.to_be_bytes());
    assert_malformed(open_bytes(&m), "trailer");
    let mut m = f.clone();
    let c6 = t + 9 + 2 * 6 + 4 + 1 + 3;
    assert_eq!(m[c6], 0xc6, "trailer layout");
    m[c6 + 1..c6 + 5].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_malformed(open_bytes(&m), "trailer");
    // A chunk whose cbytes runs past the chunk area: open is fine, reading it fails.
    let hl = a.frame_info().unwrap().header_len as usize;
    let mut m = f.clone();
    m[hl + 12..hl + 16].copy_from_slice(&100_000u32.to_le_bytes());
    let a = match open_bytes(&m).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => unreachable!(),
    };
    let e = a.chunk_bytes(0).unwrap_err();
    assert!(e.to_string().contains("chunk 0"), "{e}");
}

#[test]
fn container_vlmeta_with_hostile_msgpack_is_kept_raw() {
    // A vlmetalayer whose msgpack claims a 4 GiB str: no allocation, kept as __raw__, and the
    // strict decoder reports the offset.
    let bad = vec![0xdb, 0xff, 0xff, 0xff, 0xff, b'x'];
    let f = build_frame(
        1,
        4,
        4,
        &memcpyed(&[1, 2, 3, 4], 1),
        &[0],
        &[],
        &[("bad", bad.clone())],
    );
    let a = match open_bytes(&f).unwrap() {
        Container::Array(a) => a,
        Container::Table(_) => unreachable!(),
    };
    assert_eq!(a.attrs()["bad"], json!({"__raw__": "2/////94"}));
    assert_eq!(attrs::json_to_msgpack(&a.attrs()["bad"]).unwrap(), bad);
    let e = attrs::msgpack_to_json(&bad).unwrap_err();
    assert!(e.to_string().contains("byte 5"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Hostile bcolz

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

#[test]
fn container_hostile_bcolz_is_error() {
    let tmp = tempfile::tempdir().unwrap();
    let src = data_dir().join("bcolz/carray_i4_leftover");
    let case = |name: &str, f: &dyn Fn(&Path)| -> ContainerError {
        let d = tmp.path().join(name);
        copy_dir(&src, &d);
        f(&d);
        container::open(&d).map(|_| ()).unwrap_err()
    };
    let e = case("badjson", &|d| {
        std::fs::write(d.join("meta/sizes"), "{\"shape\": [25], \"nbytes\": 1").unwrap()
    });
    assert!(matches!(e, ContainerError::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("meta/sizes"), "{e}");
    let e = case("negshape", &|d| {
        std::fs::write(
            d.join("meta/sizes"),
            "{\"shape\": [-5], \"nbytes\": 1, \"cbytes\": 1}\n",
        )
        .unwrap()
    });
    assert!(e.to_string().contains("shape[0]"), "{e}");
    let e = case("chunklen0", &|d| {
        let s = std::fs::read_to_string(d.join("meta/storage")).unwrap();
        let mut v: Value = serde_json::from_str(&s).unwrap();
        v["chunklen"] = json!(0);
        std::fs::write(d.join("meta/storage"), v.to_string()).unwrap();
    });
    assert!(e.to_string().contains("chunklen"), "{e}");
    let e = case("badattrs", &|d| {
        std::fs::write(d.join("__attrs__"), "{,}").unwrap()
    });
    assert!(e.to_string().contains("__attrs__"), "{e}");
    let e = case("hugeshape", &|d| {
        std::fs::write(
            d.join("meta/sizes"),
            "{\"shape\": [18446744073709551615, 3], \"nbytes\": 1, \"cbytes\": 1}\n",
        )
        .unwrap()
    });
    assert!(e.to_string().contains("overflow"), "{e}");

    // ctable with hostile __rootdirs__ names.
    let table = data_dir().join("bcolz/ctable_3cols");
    for (i, names) in [
        r#"["id", "../x"]"#,
        r#"["id/.."]"#,
        r#"["/etc"]"#,
        r#"[".."]"#,
        r#"[1]"#,
        r#"["id", "id"]"#,
    ]
    .iter()
    .enumerate()
    {
        let d = tmp.path().join(format!("table{i}"));
        copy_dir(&table, &d);
        std::fs::write(d.join("__rootdirs__"), format!("{{\"names\": {names}}}\n")).unwrap();
        let e = container::open(&d).map(|_| ()).unwrap_err();
        assert!(
            matches!(e, ContainerError::Malformed { .. }),
            "{names}: {e}"
        );
        assert!(e.to_string().contains("__rootdirs__"), "{names}: {e}");
    }
    // A chunk file whose Blosc1 cbytes lies.
    let d = tmp.path().join("liar");
    copy_dir(&src, &d);
    let blp = d.join("data/__0.blp");
    let mut b = std::fs::read(&blp).unwrap();
    b[28..32].copy_from_slice(&i32::MAX.to_le_bytes());
    std::fs::write(&blp, b).unwrap();
    let a = open_array(&d);
    let e = a.chunk_bytes(0).unwrap_err();
    assert!(e.to_string().contains("__0.blp"), "{e}");
}

#[test]
fn container_unknown_sources_are_not_containers() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("plain.b2frame");
    std::fs::write(&f, b"hello world, not a frame").unwrap();
    assert!(matches!(
        container::open(&f),
        Err(ContainerError::NotAContainer { .. })
    ));
    std::fs::write(&f, b"").unwrap();
    assert!(matches!(
        container::open(&f),
        Err(ContainerError::NotAContainer { .. })
    ));
    assert!(matches!(
        container::open(tmp.path()),
        Err(ContainerError::NotAContainer { .. })
    ));
    assert!(matches!(
        container::open(&tmp.path().join("missing")),
        Err(ContainerError::Io { .. })
    ));
    // A sparse frame directory with a missing chunk file: open works, the read names the file.
    let d = tmp.path().join("sparse");
    copy_dir(&data_dir().join("frames/schunk_sparse.b2frame"), &d);
    std::fs::remove_file(d.join("00000002.chunk")).unwrap();
    let a = open_array(&d);
    let e = a.chunk_bytes(2).unwrap_err();
    assert!(e.to_string().contains("00000002.chunk"), "{e}");
    // The index file of a sparse frame opens its directory.
    let a = open_array(&d.join("chunks.b2frame"));
    assert_eq!((a.kind(), a.path()), (SourceKind::Sframe, d.as_path()));
    assert_eq!(a.nchunks(), 4);
    // A contiguous frame file handed over as a sparse index (frame_type mismatch).
    let d = tmp.path().join("mismatch");
    std::fs::create_dir(&d).unwrap();
    std::fs::copy(
        data_dir().join("frames/schunk_lz4.b2frame"),
        d.join("chunks.b2frame"),
    )
    .unwrap();
    let e = container::open(&d).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("frame type"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Mutation property test

fn mutation_corpus() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (path, sc) in frame_sidecars() {
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            if bytes.len() <= 64 * 1024 {
                out.push((sc["name"].as_str().unwrap().to_string(), bytes));
            }
        }
    }
    out.push(("small_frame".into(), small_frame().0));
    out
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Set { at: usize, byte: u8 },
    Truncate { at: usize },
    Zero32 { at: usize },
}

fn apply(bytes: &mut Vec<u8>, muts: &[Mutation]) {
    for m in muts {
        let n = bytes.len().max(1);
        match *m {
            Mutation::Flip { at, bit } => {
                if let Some(b) = bytes.get_mut(at % n) {
                    *b ^= 1 << (bit % 8);
                }
            }
            Mutation::Set { at, byte } => {
                if let Some(b) = bytes.get_mut(at % n) {
                    *b = byte;
                }
            }
            Mutation::Truncate { at } => bytes.truncate(at % n),
            Mutation::Zero32 { at } => {
                let at = at % n;
                let end = (at + 4).min(bytes.len());
                for b in &mut bytes[at..end] {
                    *b = 0xff;
                }
            }
        }
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        1 => any::<usize>().prop_map(|at| Mutation::Zero32 { at }),
    ]
}

/// Opening a mutated frame and reading (and decoding) every chunk never panics, hangs or
/// allocates without bound.
#[test]
fn container_mutated_frames_never_panic() {
    let corpus = mutation_corpus();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("mutant");
    let cases: u32 = crate::support::env_or("B2FS_CASES", 4000);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let strategy = (0..corpus.len(), proptest::collection::vec(mutation(), 1..4));
    runner
        .run(&strategy, |(which, muts)| {
            let mut bytes = corpus[which].1.clone();
            apply(&mut bytes, &muts);
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(Container::Array(a)) = container::open(&path) {
                for i in 0..a.nchunks().min(64) {
                    let _ = a.chunk_nbytes(i);
                    let _ = a.chunk_kind(i);
                    let _ = a.chunk_header(i);
                    if let Ok(c) = a.chunk_bytes(i) {
                        let _ = codec::Decoder::with_limit(1 << 20).decompress(&c);
                    }
                }
                let _ = a.grid();
                for v in a.vlmetalayers() {
                    let _ = attrs::json_to_msgpack(&v.json);
                }
            }
            Ok(())
        })
        .unwrap();
}

/// The sparse frame mutation: damaged `chunks.b2frame` and chunk files.
#[test]
fn container_mutated_sparse_frames_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let src = data_dir().join("frames/b2nd_sparse.b2nd");
    let d = tmp.path().join("s");
    copy_dir(&src, &d);
    let index = std::fs::read(src.join("chunks.b2frame")).unwrap();
    let chunk0 = std::fs::read(src.join("00000000.chunk")).unwrap();
    let config = ProptestConfig {
        cases: 500,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let strategy = (any::<bool>(), proptest::collection::vec(mutation(), 1..4));
    runner
        .run(&strategy, |(which, muts)| {
            let (name, orig) = if which {
                ("chunks.b2frame", &index)
            } else {
                ("00000000.chunk", &chunk0)
            };
            let mut bytes = orig.clone();
            apply(&mut bytes, &muts);
            std::fs::write(d.join(name), &bytes).unwrap();
            if let Ok(Container::Array(a)) = container::open(&d) {
                for i in 0..a.nchunks() {
                    if let Ok(c) = a.chunk_bytes(i) {
                        let _ = codec::Decoder::with_limit(1 << 20).decompress(&c);
                    }
                }
            }
            std::fs::write(d.join(name), orig).unwrap();
            Ok(())
        })
        .unwrap();
}

#[test]
fn container_grid_is_exposed_for_b2nd_only() {
    let a = open_array(&data_dir().join("frames/b2nd_3d_f4_pad.b2nd"));
    let g: Grid = a.grid().unwrap();
    assert_eq!(g.ext_chunkshape(), [6, 6, 4]);
    assert_eq!(a.nd_meta().unwrap().dtype.as_deref(), Some("<f4"));
    let s = open_array(&data_dir().join("frames/schunk_lz4.b2frame"));
    assert!(s.grid().is_none());
}

// ---------------------------------------------------------------------------------------------
// Open reads metadata only (every fixture)

/// For every contiguous and sparse frame fixture, `open` reads exactly: the 32-byte magic
/// sniff (cframes), the header, the 23-byte trailer tail, the index region and the trailer;
/// for bcolz only the JSON metadata files. Never a chunk.
#[test]
fn container_open_reads_no_chunk_data_on_fixtures() {
    for (path, sc) in frame_sidecars() {
        let name = sc["name"].as_str().unwrap();
        let a = open_array(&path);
        let info = a.frame_info().unwrap();
        let t_start = if info.nbytes > 0 {
            info.frame_len - info.trailer_len
        } else {
            info.header_len
        };
        let sniff = if path.is_file() { 32 } else { 0 };
        let expected = sniff + 23 + info.header_len + info.index_len + (info.frame_len - t_start);
        assert_eq!(a.io_stats().bytes(), expected, "{name}");
    }
    for (path, sc) in bcolz_sidecars("carray") {
        let a = open_array(&path);
        let meta: u64 = ["meta/sizes", "meta/storage", "__attrs__"]
            .iter()
            .map(|f| std::fs::metadata(path.join(f)).map_or(0, |m| m.len()))
            .sum();
        assert_eq!(a.io_stats().bytes(), meta, "{}", sc["name"]);
    }
}

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
// bcolz mutation property test

/// Mutated bcolz metadata and chunk files: open + reading every chunk never panics.
#[test]
fn container_mutated_bcolz_never_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let src = data_dir().join("bcolz/carray_i4_leftover");
    let d = tmp.path().join("c");
    copy_dir(&src, &d);
    let files = [
        "meta/sizes",
        "meta/storage",
        "__attrs__",
        "data/__0.blp",
        "data/__2.blp",
    ];
    let originals: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(src.join(f)).unwrap())
        .collect();
    let config = ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let strategy = (0..files.len(), proptest::collection::vec(mutation(), 1..4));
    runner
        .run(&strategy, |(which, muts)| {
            let mut bytes = originals[which].clone();
            apply(&mut bytes, &muts);
            std::fs::write(d.join(files[which]), &bytes).unwrap();
            if let Ok(Container::Array(a)) = container::open(&d) {
                for i in 0..a.nchunks().min(64) {
                    let _ = a.chunk_nbytes(i);
                    let _ = a.chunk_header(i);
                    if let Ok(c) = a.chunk_bytes(i) {
                        let _ = codec::Decoder::with_limit(1 << 20).decompress(&c);
                    }
                }
            }
            std::fs::write(d.join(files[which]), &originals[which]).unwrap();
            Ok(())
        })
        .unwrap();
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
    copy_dir(&data_dir().join("frames/schunk_sparse.b2frame"), &d);
    let a = open_array(&d);
    assert!(!a.changed_on_disk().unwrap());
    let mut idx = std::fs::read(d.join("chunks.b2frame")).unwrap();
    idx[37] ^= 1; // nbytes
    std::fs::write(d.join("chunks.b2frame"), &idx).unwrap();
    assert!(a.changed_on_disk().unwrap());
    // bcolz: a chunk rewrite is invisible, a sizes commit is not.
    let c = tmp.path().join("c");
    copy_dir(&data_dir().join("bcolz/carray_i4_leftover"), &c);
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

// ---------------------------------------------------------------------------------------------
// Partial chunk reads (chunk_read_at)

/// Every array of every fixture kind: contiguous and sparse frames, b2nd/caterva, bcolz
/// carrays and ctable columns.
fn all_fixture_arrays() -> Vec<(String, Array)> {
    let mut out = Vec::new();
    for (path, _) in frame_sidecars() {
        out.push((path.display().to_string(), open_array(&path)));
    }
    for kind in ["carray", "ctable"] {
        for (path, _) in bcolz_sidecars(kind) {
            match container::open(&path).unwrap() {
                Container::Array(a) => out.push((path.display().to_string(), a)),
                Container::Table(t) => {
                    for (name, a) in t.columns {
                        out.push((format!("{}/{name}", path.display()), a));
                    }
                }
            }
        }
    }
    out
}

/// SplitMix64, for deterministic windows.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn container_chunk_read_at_matches_chunk_bytes_for_every_fixture_kind() {
    let mut st = 1u64;
    let mut kinds = std::collections::BTreeSet::new();
    let mut windows = 0usize;
    for (name, a) in all_fixture_arrays() {
        for i in 0..a.nchunks() {
            let full = a.chunk_bytes(i).unwrap().into_owned();
            let special = a.frame_index_entry(i).is_some_and(|e| e < 0);
            let mut probe = [0u8; 1];
            let stored = a.chunk_read_at(i, 0, &mut probe).unwrap();
            assert_eq!(stored, !special, "{name} chunk {i}: stored bytes or not");
            if !stored {
                continue;
            }
            kinds.insert(format!("{:?}", a.kind()));
            let n = full.len() as u64;
            let mut spans: Vec<(u64, u64)> = vec![(0, n), (0, 16.min(n)), (n - 1, 1), (0, 0)];
            for _ in 0..8 {
                let off = splitmix(&mut st) % n;
                let len = splitmix(&mut st) % (n - off + 1);
                spans.push((off, len));
            }
            for (off, len) in spans {
                let mut buf = vec![0xA5u8; len as usize];
                let ok = a.chunk_read_at(i, off, &mut buf);
                assert!(
                    matches!(ok, Ok(true)),
                    "{name} chunk {i} [{off}, +{len}): {ok:?}"
                );
                assert_eq!(
                    buf,
                    &full[off as usize..(off + len) as usize],
                    "{name} chunk {i} [{off}, +{len})"
                );
                windows += 1;
            }
            // Windows reaching past the chunk are errors, not panics or short reads.
            for (off, len) in [
                (n, 1),
                (n - 1, 2),
                (0, n + 1),
                (u64::MAX, 1),
                (u64::MAX - 1, 4),
            ] {
                let mut buf = vec![0u8; len as usize];
                let r = a.chunk_read_at(i, off, &mut buf);
                assert!(
                    matches!(r, Err(ContainerError::ChunkWindow { .. })),
                    "{name} chunk {i} [{off}, +{len}): {r:?}"
                );
            }
        }
        let mut buf = [0u8; 4];
        let r = a.chunk_read_at(a.nchunks(), 0, &mut buf);
        assert!(
            matches!(r, Err(ContainerError::NoSuchChunk { .. })),
            "{name}: {r:?}"
        );
    }
    for kind in ["Cframe", "Sframe", "BcolzCarray"] {
        assert!(
            kinds.contains(kind),
            "no stored chunk of kind {kind} tested: {kinds:?}"
        );
    }
    assert!(windows > 500, "{windows}");
}
