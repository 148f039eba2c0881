//! The `zarr_edit` target's creation mode (a kind byte with its high bit set): what
//! zarr-python and xarray do to make new arrays and groups through the Zarr view of a
//! writable directory of sources (the input's frame as `input.b2nd` in it) or `.b2d` store:
//! `mkdir` (nested too), a `zarr.json` renamed or linked in (valid array and group documents,
//! hostile ones: the payload's members over a valid one, or the payload's raw bytes), chunk
//! objects renamed in, `rmdir`.
//!
//! The four step bytes are [`Step`]s (the byte modulo 8; its high bits pick names, shapes,
//! data types and codecs). What is checked, beyond no panic, hang or unbounded allocation: a
//! refused step leaves every file of the source as it was (a nested array may leave the
//! empty group directories made for it); a document accepted as an array shows its shape and
//! reads its fill value; no listing holds a name twice; the source opens again after the
//! steps, every array made shows the shape it was made with, and the tree can be walked.

use b2fs::tree::{Tree, TreeError};
use serde_json::{Value, json};

use super::source::{self, Kind};
use super::tree::{options, walk};
use super::zarr::{find, put_via, read_at_most};

/// What one step does.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// `mkdir` of a picked name in the view's root or in the last directory made.
    Mkdir,
    /// A valid array document (picked shape, data type, codecs) renamed in as `zarr.json`.
    PutArray,
    /// A group document (with or without attributes) renamed in.
    PutGroup,
    /// The payload's raw bytes renamed in as `zarr.json`.
    PutRaw,
    /// A valid array document with the payload's members over it (or the payload as its
    /// fill value), renamed in.
    PutHostile,
    /// The payload (whole to the object's size, or as it is) renamed over a chunk object of
    /// the last array made.
    WriteChunk,
    /// A group document linked in (zarr-python's "set if not exists").
    LinkGroup,
    /// `rmdir` of the last directory made.
    Rmdir,
}

const STEP_KINDS: [Step; 8] = [
    Step::Mkdir,
    Step::PutArray,
    Step::PutGroup,
    Step::PutRaw,
    Step::PutHostile,
    Step::WriteChunk,
    Step::LinkGroup,
    Step::Rmdir,
];

/// Names `mkdir` picks from: free ones, the source's own stem, the view's names, a temp
/// file's, one past NAME_MAX.
fn name(pick: usize) -> String {
    match pick % 8 {
        0 => "n0".into(),
        1 => "n1".into(),
        2 => "input".into(),
        3 => "zarr.json".into(),
        4 => "c".into(),
        5 => ".b2fs-x.tmp".into(),
        6 => "x".repeat(300),
        _ => "g".into(),
    }
}

/// A valid array document: shape and chunks, data type and fill value, codecs, picked.
fn array_doc(pick: usize) -> Value {
    let (shape, chunks): (&[u64], &[u64]) = match pick % 4 {
        0 => (&[5], &[2]),
        1 => (&[4, 3], &[3, 2]),
        2 => (&[2, 3, 4], &[1, 3, 2]),
        _ => (&[100_000], &[65_536]),
    };
    let (dtype, fill) = match (pick >> 2) % 4 {
        0 => ("int16", json!(-7)),
        1 => ("float64", json!(1.5)),
        2 => ("uint8", json!(9)),
        _ => ("float32", json!("NaN")),
    };
    let mut codecs = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
    if (pick >> 4) % 2 == 1 {
        codecs.push(json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}}));
    }
    json!({"shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill, "codecs": codecs, "attributes": {"units": "K"},
        "zarr_format": 3, "node_type": "array", "storage_transformers": []})
}

/// The bytes of one item of `doc`'s fill value, when the target checks it.
fn fill_item(doc: &Value) -> Option<Vec<u8>> {
    match (doc["data_type"].as_str()?, &doc["fill_value"]) {
        ("int16", Value::Number(n)) => Some((n.as_i64()? as i16).to_le_bytes().to_vec()),
        ("uint8", Value::Number(n)) => Some(vec![u8::try_from(n.as_u64()?).ok()?]),
        ("float64", Value::Number(n)) => Some(n.as_f64()?.to_le_bytes().to_vec()),
        _ => None,
    }
}

/// Writes `bytes` to a new temp file of `dir` and renames (or links) it to `target`; the
/// temp file is removed when that fails (or after the link).
fn put(t: &Tree, dir: &str, target: &str, bytes: &[u8], link: bool) -> Result<(), TreeError> {
    put_via(
        t,
        dir,
        &format!("{target}.fuzz.partial"),
        target,
        bytes,
        link,
    )
}

/// The JSON document of file `rel` (its first MiB).
fn read_json(t: &Tree, rel: &str) -> Option<Value> {
    serde_json::from_slice(&read_at_most(t, rel, 1 << 20)?).ok()
}

/// The key of the first chunk object of an array of `ndim` dimensions.
fn first_chunk(ndim: usize) -> String {
    let mut key = "c".to_owned();
    for _ in 0..ndim {
        key.push_str("/0");
    }
    key
}

/// Checks that no directory listed (the view's root and `dirs`) holds a name twice.
fn listed_once(t: &Tree, dirs: &[String]) {
    for d in std::iter::once("zarr").chain(dirs.iter().map(String::as_str)) {
        let Some(ino) = find(t, d) else { continue };
        let Ok(listing) = t.readdir(ino, 2) else {
            continue;
        };
        let mut names: Vec<String> = listing.take(200).map(|e| e.name).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "{d} lists a name twice: {names:?}");
    }
}

/// What became of a creation-mode input: the steps applied and refused.
pub fn run(k: u8, ops: &[u8; 4], src: &[u8], payload: &[u8]) -> super::zarr::Outcome {
    let mut out = super::zarr::Outcome::default();
    let scratch = super::scratch().join("zarr_create");
    source::clear(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    // A frame goes into a directory of sources; other kinds are their own collection.
    let root = match Kind::of(k) {
        Kind::Frame => {
            let d = scratch.join("sources");
            std::fs::create_dir_all(&d).expect("scratch dir");
            std::fs::write(d.join("input.b2nd"), src).expect("writing the fuzz input");
            d
        }
        kind => match source::write(&scratch, kind, src) {
            Some(p) => p,
            None => return out,
        },
    };
    let Ok(t) = Tree::from_source(&root, options(true)) else {
        return out;
    };
    out.array = Some("zarr".into());
    // Directories made (view paths), arrays made with their documents.
    let mut dirs: Vec<String> = Vec::new();
    let mut made: Vec<(String, Value)> = Vec::new();
    for &op in ops {
        let step = STEP_KINDS[usize::from(op % 8)];
        let pick = usize::from(op >> 3);
        let before = source::snapshot(&root);
        let last = dirs.last().cloned();
        let res = match (step, &last) {
            (Step::Mkdir, _) => {
                let parent = match (pick & 1, &last) {
                    (1, Some(l)) => l.clone(),
                    _ => "zarr".to_owned(),
                };
                let nm = name(pick >> 1);
                let r = find(&t, &parent)
                    .ok_or(TreeError::NotFound)
                    .and_then(|p| t.mkdir(p, &nm));
                if r.is_ok() {
                    dirs.push(format!("{parent}/{nm}"));
                }
                r.map(|_| ())
            }
            (Step::PutArray | Step::PutHostile, Some(d)) => {
                let mut doc = array_doc(pick);
                if let Step::PutHostile = step {
                    match serde_json::from_slice::<Value>(payload) {
                        Ok(Value::Object(m)) => {
                            for (key, v) in m {
                                doc[key] = v;
                            }
                        }
                        _ => doc["fill_value"] = Value::from(String::from_utf8_lossy(payload)),
                    }
                }
                let bytes = serde_json::to_vec(&doc).unwrap_or_default();
                let r = put(&t, d, "zarr.json", &bytes, false);
                if r.is_ok() && doc["node_type"] == "array" {
                    made.retain(|(m, _)| m != d);
                    made.push((d.clone(), doc));
                }
                r
            }
            (Step::PutGroup | Step::LinkGroup, Some(d)) => {
                let attrs = match pick & 1 {
                    0 => json!({}),
                    _ => json!({"a": 1}),
                };
                let doc = json!({"attributes": attrs, "zarr_format": 3,
                    "consolidated_metadata": null, "node_type": "group"});
                let bytes = serde_json::to_vec(&doc).unwrap_or_default();
                put(&t, d, "zarr.json", &bytes, matches!(step, Step::LinkGroup))
            }
            (Step::PutRaw, Some(d)) => put(&t, d, "zarr.json", payload, false),
            (Step::WriteChunk, _) => match made.last() {
                Some((d, doc)) => {
                    let ndim = doc["shape"].as_array().map_or(1, Vec::len);
                    let key = format!("{d}/{}", first_chunk(ndim));
                    let size = find(&t, &key)
                        .and_then(|i| t.getattr(i).ok())
                        .map(|a| a.size);
                    let bytes: Vec<u8> = match (pick & 1, size) {
                        (1, Some(s)) if s <= 4 << 20 && !payload.is_empty() => {
                            payload.iter().copied().cycle().take(s as usize).collect()
                        }
                        _ => payload.to_vec(),
                    };
                    let (dir, leaf) = key.rsplit_once('/').unwrap_or((d.as_str(), "c"));
                    put(&t, dir, leaf, &bytes, false)
                }
                None => Err(TreeError::NotFound),
            },
            (Step::Rmdir, Some(d)) => {
                let (parent, leaf) = d.rsplit_once('/').unwrap_or(("zarr", d.as_str()));
                let r = find(&t, parent)
                    .ok_or(TreeError::NotFound)
                    .and_then(|p| t.rmdir(p, leaf));
                if r.is_ok() {
                    dirs.pop();
                }
                r
            }
            (_, None) => Err(TreeError::NotFound),
        };
        match &res {
            // Refused: every file as it was (empty group directories made for a nested
            // array may stay: the snapshot holds files only).
            Err(e) => {
                let after = source::snapshot(&root);
                assert!(before == after, "{step:?}/{pick} ({e}) changed the source");
                out.refused.push(format!("{step:?}/{pick}: {e}"));
            }
            Ok(()) => out.applied.push(format!("{step:?}/{pick}")),
        }
        // An array just made shows its shape and reads its fill value.
        if let (Ok(()), Step::PutArray | Step::PutHostile) = (&res, step)
            && let Some((d, doc)) = made.last()
            && last.as_deref() == Some(d.as_str())
        {
            let shown = read_json(&t, &format!("{d}/zarr.json")).unwrap_or_default();
            assert_eq!(shown["shape"], doc["shape"], "{d}: made with another shape");
            if let (Some(item), Step::PutArray) = (fill_item(doc), step) {
                let ndim = doc["shape"].as_array().map_or(1, Vec::len);
                let key = format!("{d}/{}", first_chunk(ndim));
                let got = read_at_most(&t, &key, 1 << 20).unwrap_or_default();
                assert!(
                    !got.is_empty() && got.chunks(item.len()).all(|c| c == item),
                    "{key}: not the fill value"
                );
            }
        }
        listed_once(&t, &dirs);
    }
    drop(t);
    let again = match Tree::from_source(&root, options(false)) {
        Ok(t) => t,
        Err(e) => panic!("the source does not open after the steps {out:?}: {e}"),
    };
    for (d, doc) in &made {
        let shown = read_json(&again, &format!("{d}/zarr.json")).unwrap_or_default();
        assert_eq!(
            shown["shape"], doc["shape"],
            "{d}: another shape after a reopen ({out:?})"
        );
    }
    walk(&again, u64::from(k));
    out
}
