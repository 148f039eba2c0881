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

use crate::support::frames::{ZEROS, build_frame, memcpyed, small_frame};
use crate::support::{copy_tree, data_dir, repo_root, sha256_hex};

mod bcolz;
mod hand_built;
mod hostile;
mod oracle;
mod partial;

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

/// Opens a source made of `bytes` (written to a temp file).
fn open_bytes(bytes: &[u8]) -> Result<Container, ContainerError> {
    let (_dir, p) = crate::support::temp_path("hostile.b2frame");
    std::fs::write(&p, bytes).unwrap();
    container::open(&p)
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

    /// Chunk `i` of `a` against its sidecar entry `want` (`cbytes`, `sha256`): the length of
    /// its stored bytes and the sha256 of its decoded ones; its decoded bytes, or `None` when
    /// it could not be read or decoded (recorded).
    fn check_chunk(&mut self, name: &str, a: &Array, i: usize, want: &Value) -> Option<Vec<u8>> {
        let bytes = match a.chunk_bytes(i) {
            Ok(b) => b.into_owned(),
            Err(e) => {
                self.0.push(format!("{name}: chunk {i}: {e}"));
                return None;
            }
        };
        self.check(
            name,
            &format!("chunk {i} len"),
            bytes.len() as u64,
            want["cbytes"].as_u64().unwrap(),
        );
        match codec::decompress(&bytes) {
            Ok(d) => {
                self.check(
                    name,
                    &format!("chunk {i} sha256"),
                    sha256_hex(&d),
                    want["sha256"].as_str().unwrap().to_string(),
                );
                Some(d)
            }
            Err(e) => {
                self.0.push(format!("{name}: chunk {i} decode: {e}"));
                None
            }
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
            let hdr = a.chunk_header(i).map(|h| h.cbytes).ok();
            r.check(
                name,
                &format!("chunk {i} cbytes"),
                hdr,
                c["cbytes"].as_u64().map(|n| n as usize),
            );
            if let Some(d) = r.check_chunk(name, &a, i, c) {
                all.extend(d);
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
                copy_tree(&p, &d);
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

#[test]
fn container_grid_is_exposed_for_b2nd_only() {
    let a = open_array(&data_dir().join("frames/b2nd_3d_f4_pad.b2nd"));
    let g: Grid = a.grid().unwrap();
    assert_eq!(g.ext_chunkshape(), [6, 6, 4]);
    assert_eq!(a.nd_meta().unwrap().dtype.as_deref(), Some("<f4"));
    let s = open_array(&data_dir().join("frames/schunk_lz4.b2frame"));
    assert!(s.grid().is_none());
}
