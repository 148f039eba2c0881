//! Issue 20, the Zarr view (`docs/ZARR.md`): through the tree API (no kernel), every reference
//! case of `scripts/oracle/npy_cases.py` shows in `zarr/` with the metadata python-blosc2 and
//! bcolz imply and chunk objects that assemble to exactly what the reference reads (or is left
//! out, when its dtype has no Zarr type); a collection mounts opening no leaf and builds its
//! consolidated metadata on the first read; writes through the view (in place, temp file +
//! rename, unlink) commit what python-blosc2 reads back; metadata writes are refused. Through a
//! real mount, numpy alone reads the view (`scripts/oracle/zarr_check.py`).
//!
//! Split by concern: `zarr/cases.rs` (every reference case and a ctable read back through the
//! view, numpy through a mount), `zarr/stores.rs` (collections: lazy mount, consolidated
//! metadata, a 2,000-member store), `zarr/writes.rs` (chunk data written through the view and
//! a mount, SIGKILL during a chunk commit, another writer, `.partial` files),
//! `zarr/metadata.rs` (writes of `zarr.json`: identical rewrites, truncation, attribute edits
//! and the changes refused), `zarr/floats.rs` (NaN and infinite attributes as zarr-python
//! writes them, and as strict JSON under `-o zarr_strict_json`), `zarr/resize.rs` (resizes through `zarr.json`), `zarr/damaged.rs` (removing a
//! chunk object whose chunk does not decode), `zarr/fill.rs` (the `_FillValue` attribute in
//! xarray's spelling), `zarr/v2.rs` (the read-only Zarr v2 view `zarr2/`); the helpers that read and assemble the view stay here.

mod cases;
mod create;
mod create_races;
mod damaged;
mod dir_names;
mod fill;
mod floats;
mod metadata;
mod resize;
mod resize_bytes;
mod stores;
mod v2;
mod writes;

use std::path::Path;

use b2fs::tree::Tree;
use serde_json::Value;

use crate::support::tree_ino as ino;

fn read_all(t: &Tree, ino: u64, step: u32) -> Vec<u8> {
    crate::support::tree_read(t, ino, step).unwrap()
}

fn json_at(t: &Tree, path: &str) -> Value {
    serde_json::from_slice(&read_all(t, ino(t, path), 1 << 20)).unwrap()
}

fn names(t: &Tree, path: &str) -> Vec<String> {
    t.readdir(ino(t, path), 0)
        .unwrap()
        .map(|e| e.name)
        .skip(2)
        .collect()
}

/// python-blosc2 writes at `path` the float32 (20, 30) b2nd the metadata tests edit (0..600,
/// chunks (10, 15)), with the vlmeta entries `vlmeta` (a name, a Python expression).
fn float32_b2nd(py: &Path, path: &Path, vlmeta: &[(&str, &str)]) {
    let mut make = String::from(
        "import sys, numpy as np, blosc2\n\
         a = blosc2.asarray(np.arange(600, dtype=np.float32).reshape(20, 30), chunks=(10, 15), \
         urlpath=sys.argv[1], mode='w')\n",
    );
    for (name, value) in vlmeta {
        make.push_str(&format!("a.vlmeta[{name:?}] = {value}\n"));
    }
    crate::support::run_python(py, &["-c", &make, path.to_str().unwrap()]);
}

/// The data part and the shape of an `.npy` file written by `np.save`.
fn npy_data(path: &Path) -> (Vec<u8>, String) {
    let bytes = std::fs::read(path).unwrap();
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
    };
    let header = String::from_utf8_lossy(&bytes[start..start + hlen]).into_owned();
    (bytes[start + hlen..].to_vec(), header)
}

fn dims(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// Bytes per element of a Zarr `data_type` the view writes.
fn itemsize(dt: &Value) -> u64 {
    match dt {
        Value::String(s) => match s.as_str() {
            "bool" | "int8" | "uint8" => 1,
            "int16" | "uint16" | "float16" => 2,
            "int32" | "uint32" | "float32" => 4,
            "int64" | "uint64" | "float64" | "complex64" => 8,
            "complex128" => 16,
            other => panic!("unexpected type {other}"),
        },
        Value::Object(o) => match o["name"].as_str().unwrap() {
            "numpy.datetime64" | "numpy.timedelta64" => 8,
            "fixed_length_utf32" => o["configuration"]["length_bytes"].as_u64().unwrap(),
            other => panic!("unexpected type {other}"),
        },
        other => panic!("unexpected type {other}"),
    }
}

/// The array at Zarr path `array` (under `zarr/`) assembled in C order from its chunk
/// objects, each read in reads of `step` bytes and checked to have its full size.
fn assemble(t: &Tree, array: &str, meta: &Value, step: u32) -> Vec<u8> {
    let shape = dims(&meta["shape"]);
    let chunks = dims(&meta["chunk_grid"]["configuration"]["chunk_shape"]);
    let item = itemsize(&meta["data_type"]);
    let path = |key: &[String]| {
        let path = format!("zarr/{array}/c/{}", key.join("/"));
        path.trim_end_matches('/').to_owned()
    };
    assemble_keys(t, &path, (&shape, &chunks, item), step)
}

/// An array of `shape`, `chunks` and `item` bytes per element assembled in C order from the
/// chunk objects at `path(key)` (the v3 view's `c/i/j`, the v2 view's `i.j`), as
/// [`assemble`].
fn assemble_keys(
    t: &Tree,
    path: &dyn Fn(&[String]) -> String,
    (shape, chunks, item): (&[u64], &[u64], u64),
    step: u32,
) -> Vec<u8> {
    let grid: Vec<u64> = shape
        .iter()
        .zip(chunks)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    let total: u64 = shape.iter().product::<u64>() * item;
    let mut out = vec![0u8; total as usize];
    let nchunks: u64 = grid.iter().product();
    let per_chunk: u64 = chunks.iter().product();
    for k in 0..nchunks {
        let mut coords = vec![0u64; grid.len()];
        let mut rest = k;
        for d in (0..grid.len()).rev() {
            coords[d] = rest % grid[d];
            rest /= grid[d];
        }
        let key: Vec<String> = coords.iter().map(u64::to_string).collect();
        let path = &path(&key);
        let o = ino(t, path);
        assert_eq!(t.getattr(o).unwrap().size, per_chunk * item, "{path}");
        let bytes = read_all(t, o, step);
        assert_eq!(bytes.len() as u64, per_chunk * item, "{path}");
        // A read inside the object as its handle's first (a tool seeking into it: only the
        // blocks its runs fall in are decoded) gives the same bytes.
        let fh = t.open(o, libc::O_RDONLY).unwrap();
        let at = bytes.len() / 3;
        let inside = t.read(o, fh, at as u64, 4099).unwrap();
        t.release(fh).unwrap();
        let end = (at + 4099).min(bytes.len());
        assert!(inside[..] == bytes[at..end], "{path}: a read at {at}");
        for local in 0..per_chunk {
            let mut rest = local;
            let mut global = 0u64;
            let mut inside = true;
            for d in (0..chunks.len()).rev() {
                let l = rest % chunks[d];
                rest /= chunks[d];
                let g = coords[d] * chunks[d] + l;
                inside &= g < shape[d];
                let stride: u64 = shape[d + 1..].iter().product();
                global += g * stride;
            }
            if inside {
                let (s, d) = ((local * item) as usize, (global * item) as usize);
                out[d..d + item as usize].copy_from_slice(&bytes[s..s + item as usize]);
            }
        }
    }
    out
}
