//! `array.npy` / `table.npy` without a kernel: the NPY header and the C-order data assembled
//! from decoded chunks (b2fs's codec through `Array::chunk_bytes`) must equal, byte for byte,
//! what `np.save` writes, data aligned to a page (`scripts/oracle/npy_ref.py`), for the
//! reference's read of each source (`scripts/oracle/npy_cases.py`:
//! b2nd of 1 to 4 dims and many dtypes, plain frames, caterva, bcolz carrays and a ctable),
//! for the whole file and for windows at odd offsets across chunk and block edges. Property
//! tests check the run geometry against `Grid::locate` item by item, and `table.npy` pieces
//! against a directly computed record layout.

use std::collections::BTreeSet;
use std::path::Path;

use b2fs::codec;
use b2fs::container::ndim::{Grid, Run};
use b2fs::container::npy::{self, Layout, Npy, TableNpy, dtype};
use b2fs::container::{self, Array, Container};
use proptest::prelude::*;
use serde_json::Value;

use crate::support;

fn decoded(a: &Array, k: u64) -> Result<Vec<u8>, String> {
    let bytes = a.chunk_bytes(k as usize).map_err(|e| e.to_string())?;
    codec::decompress(&bytes).map_err(|e| format!("chunk {k}: {e}"))
}

/// Window starts and lengths at odd offsets: around every chunk boundary of a linear layout,
/// and a deterministic spread over the data.
fn windows(data_len: u64, seed: u64) -> Vec<(u64, u64)> {
    let mut out = vec![(0, data_len), (1, data_len.saturating_sub(2))];
    let mut x = seed | 1;
    for _ in 0..24 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let start = x % (data_len + 1);
        let len = (x >> 20) % (data_len / 3 + 7);
        out.push((start | 1, len));
    }
    out
}

fn expected(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Checks our header and file size against the reference file; returns its data part.
fn data_after_header<'w>(header: &[u8], len: u64, want: &'w [u8]) -> Result<&'w [u8], String> {
    if want.get(..header.len()) != Some(header) {
        return Err(format!(
            "header differs:\n ours {:?}\n want {:?}",
            String::from_utf8_lossy(header),
            String::from_utf8_lossy(&want[..want.len().min(header.len())])
        ));
    }
    if len != want.len() as u64 || !header.len().is_multiple_of(4096) {
        return Err(format!("size {len} (reference {})", want.len()));
    }
    Ok(&want[header.len()..])
}

fn check_array(name: &str, source: &Path, want: &[u8]) -> Result<(), String> {
    let a = match container::open(source).map_err(|e| e.to_string())? {
        Container::Array(a) => a,
        Container::Table(_) => return Err("opened as a table".into()),
    };
    let n = Npy::for_array(&a).map_err(|e| e.to_string())?;
    let data = data_after_header(n.header(), n.len(), want)?;
    // Reads of the whole file, across the header/data edge.
    let h = n.header().len() as u64;
    for (offset, len) in [(0, 4096), (h - 3, 7), (h + 1, 77), (n.len() - 5, 100)] {
        let w = n.window(offset, len);
        let mut out = vec![0x5au8; w.out_len];
        out[..w.header.len()].copy_from_slice(&n.header()[w.header.clone()]);
        let runs = n.layout().runs(w.data.start, w.data.end - w.data.start);
        npy::assemble(runs, &mut out[w.data_dst..], &mut |k| decoded(&a, k))?;
        let s = offset.min(n.len()) as usize;
        if out != want[s..s + w.out_len] {
            return Err(format!("file read {offset}+{len} differs"));
        }
    }
    let layout = n.layout();
    for (start, len) in windows(layout.data_len(), name.len() as u64 * 7919) {
        let runs: Vec<Run> = layout.runs(start, len).collect();
        let s = start.min(data.len() as u64) as usize;
        let e = (start.saturating_add(len)).min(data.len() as u64) as usize;
        let mut out = vec![0xa5u8; e - s];
        npy::assemble(runs.iter().copied(), &mut out, &mut |k| decoded(&a, k))?;
        if out != data[s..e] {
            let bad = out.iter().zip(&data[s..e]).position(|(x, y)| x != y);
            return Err(format!(
                "window {start}+{len}: first differing byte {bad:?}"
            ));
        }
        let from_runs: BTreeSet<u64> = runs.iter().map(|r| r.chunk).collect();
        let listed: BTreeSet<u64> = layout.chunks(start, len).into_iter().collect();
        if from_runs != listed {
            return Err(format!(
                "window {start}+{len}: chunks {listed:?}, runs read {from_runs:?}"
            ));
        }
    }
    Ok(())
}

fn check_table(name: &str, source: &Path, want: &[u8]) -> Result<(), String> {
    let t = match container::open(source).map_err(|e| e.to_string())? {
        Container::Table(t) => t,
        Container::Array(_) => return Err("opened as an array".into()),
    };
    let n = TableNpy::for_table(&t).map_err(|e| e.to_string())?;
    let data = data_after_header(n.header(), n.len(), want)?;
    for (start, len) in windows(n.data_len(), name.len() as u64 * 104_729) {
        let s = start.min(data.len() as u64) as usize;
        let e = (start.saturating_add(len)).min(data.len() as u64) as usize;
        let mut out = vec![0xa5u8; e - s];
        let pieces = n.pieces(start, len);
        npy::assemble_table(&pieces, &mut out, &mut |c, k| decoded(&t.columns[c].1, k))?;
        if out != data[s..e] {
            return Err(format!("window {start}+{len} differs"));
        }
    }
    Ok(())
}

#[test]
fn npy_files_equal_numpy_save_of_the_references() {
    let py = or_skip!(support::python(
        "npy_files_equal_numpy_save_of_the_references"
    ));
    let (_dir, cases) = support::npy_cases(&py);
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let source = Path::new(c["source"].as_str().unwrap());
        let want = expected(c["npy"].as_str().unwrap());
        let r = match c["kind"].as_str().unwrap() {
            "table" => check_table(name, source, &want),
            _ => check_array(name, source, &want),
        };
        if let Err(e) = r {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The data part assembled for every committed fixture with a recorded sha256 of its content
/// (b2nd of 0 to 3 dims, caterva, plain frames of every codec, sparse frames, special-value
/// chunks, every bcolz codec), without python; a frame with chunks of varying size is refused.
#[test]
fn committed_fixtures_assemble_to_the_reference_bytes() {
    let mut checked = 0;
    for sub in ["frames", "bcolz"] {
        let dir = support::data_dir().join(sub);
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let side: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let source = dir.join(side["source"].as_str().or(side["name"].as_str()).unwrap());
            let Ok(Container::Array(a)) = container::open(&source) else {
                continue;
            };
            let name = path.display().to_string();
            if name.contains("schunk_varlen") {
                let e = Npy::for_array(&a).unwrap_err();
                assert!(e.why.contains("varying"), "{e}");
                continue;
            }
            // arr[...] / carray[:]; caterva: the numpy array written; plain frames: the bytes
            // appended.
            let recorded = ["array_sha256", "numpy_sha256", "input_sha256"]
                .iter()
                .find_map(|k| side[*k].as_str());
            let Some(want) = recorded else {
                continue;
            };
            let n = Npy::for_array(&a).unwrap_or_else(|e| panic!("{name}: {e}"));
            let layout = n.layout();
            let mut out = vec![0u8; layout.data_len() as usize];
            npy::assemble(layout.runs(0, layout.data_len()), &mut out, &mut |k| {
                decoded(&a, k)
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(support::sha256_hex(&out), want, "{name}");
            checked += 1;
        }
    }
    assert!(checked >= 50, "only {checked} fixtures checked");
}

// ---------------------------------------------------------------------------------------------
// Geometry properties

fn grid_strategy() -> impl Strategy<Value = (Vec<u64>, Vec<u64>, Vec<u64>)> {
    prop::collection::vec((1u64..9, 1u64..9, 1u64..9), 1..=4).prop_map(|dims| {
        let mut shape = Vec::new();
        let mut chunks = Vec::new();
        let mut blocks = Vec::new();
        for (s, c, b) in dims {
            let c = c.min(s + 2); // a chunk may exceed the shape
            shape.push(s);
            chunks.push(c);
            blocks.push(b.min(c));
        }
        (shape, chunks, blocks)
    })
}

/// Item number -> element index (C order).
fn unravel(mut item: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = item % shape[d];
        item /= shape[d];
    }
    idx
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn grid_runs_agree_with_locate(
        (shape, chunks, blocks) in grid_strategy(),
        itemsize in 1u64..6,
        a in 0.0f64..1.0,
        b in 0.0f64..1.0,
    ) {
        let g = Grid::new(&shape, &chunks, &blocks).unwrap();
        let total = g.items() * itemsize;
        let start = (a * total as f64) as u64;
        let len = (b * (total - start + 1) as f64) as u64;
        let runs: Vec<Run> = g.runs(itemsize, start, len).collect();
        let chunk_len = g.items_per_chunk() * itemsize;
        let mut at = 0;
        for (i, r) in runs.iter().enumerate() {
            prop_assert_eq!(r.dst, at);
            prop_assert!(r.len > 0 && r.src + r.len <= chunk_len);
            if i > 0 {
                let p = runs[i - 1];
                prop_assert!(!(p.chunk == r.chunk && p.src + p.len == r.src), "unmerged {:?} {:?}", p, r);
            }
            for j in 0..r.len {
                let byte = start + r.dst + j;
                let idx = unravel(byte / itemsize, &shape);
                let (chunk, pos) = g.locate(&idx).unwrap();
                prop_assert_eq!((r.chunk, r.src + j), (chunk, pos * itemsize + byte % itemsize));
            }
            at += r.len;
        }
        prop_assert_eq!(at, len.min(total - start));

        let layout = Layout::Nd { grid: g.clone(), itemsize };
        let listed = layout.chunks(start, len);
        let read: BTreeSet<u64> = runs.iter().map(|r| r.chunk).collect();
        prop_assert_eq!(listed, read.iter().copied().collect::<Vec<_>>());

        // Slabs: contiguous chunk ranges covering their bytes; the next one follows.
        if let Some(slab) = layout.slab(start) {
            prop_assert!(slab.bytes.contains(&start));
            for r in layout.runs(slab.bytes.start, slab.bytes.end - slab.bytes.start) {
                prop_assert!(slab.chunks.contains(&r.chunk));
            }
            match layout.next_slab(start) {
                Some(next) => {
                    prop_assert_eq!(next.bytes.start, slab.bytes.end);
                    prop_assert_eq!(next.chunks.start, slab.chunks.end);
                }
                None => prop_assert_eq!(slab.bytes.end, total),
            }
        }
    }

    #[test]
    fn linear_runs_cover_windows(
        chunk_bytes in 1u64..50,
        data_len in 0u64..400,
        a in 0.0f64..1.0,
        b in 0.0f64..1.0,
    ) {
        let layout = Layout::Linear { chunk_bytes, data_len };
        let start = (a * data_len as f64) as u64;
        let len = (b * (data_len - start + 1) as f64) as u64;
        let mut at = 0;
        for r in layout.runs(start, len) {
            prop_assert_eq!(r.dst, at);
            prop_assert_eq!(r.chunk * chunk_bytes + r.src, start + at);
            prop_assert!(r.src + r.len <= layout.chunk_len(r.chunk));
            at += r.len;
        }
        prop_assert_eq!(at, len.min(data_len - start));
    }

    #[test]
    fn table_pieces_build_records(
        cols in prop::collection::vec((1u64..7, 1u64..6), 1..5),
        rows in 0u64..40,
        a in 0.0f64..1.0,
        b in 0.0f64..1.0,
    ) {
        let parts = cols
            .iter()
            .enumerate()
            .map(|(i, &(size, chunk_rows))| {
                (format!("c{i}"), dtype::parse(&format!("|V{size}")).unwrap(), chunk_rows)
            })
            .collect();
        let t = TableNpy::from_parts(parts, rows).unwrap();
        let byte = |c: usize, row: u64, j: u64| (c as u64 * 71 + row * 13 + j * 5) as u8;
        let mut data = Vec::new();
        for row in 0..rows {
            for (c, &(size, _)) in cols.iter().enumerate() {
                data.extend((0..size).map(|j| byte(c, row, j)));
            }
        }
        prop_assert_eq!(data.len() as u64, t.data_len());
        let total = t.data_len();
        let start = (a * total as f64) as u64;
        let len = (b * (total - start + 1) as f64) as u64;
        let mut out = vec![0u8; len.min(total - start) as usize];
        let pieces = t.pieces(start, len);
        npy::assemble_table(&pieces, &mut out, &mut |c, k| {
            let (size, chunk_rows) = cols[c];
            let first = k * chunk_rows;
            let end = (first + chunk_rows).min(rows);
            Ok((first..end).flat_map(|row| (0..size).map(move |j| byte(c, row, j))).collect())
        })
        .unwrap();
        prop_assert_eq!(&out[..], &data[start as usize..start as usize + out.len()]);
    }

    #[test]
    fn dtype_parser_never_panics(s in "\\PC{0,40}") {
        let _ = dtype::parse(&s).map(|d| d.npy_descr());
    }

    #[test]
    fn dtype_parser_survives_mutated_literals(
        cut in 0usize..80,
        flip in 0usize..80,
        with in prop::sample::select(vec!['(', ')', '[', ']', '\'', ',', '9', ':', '{', 'x']),
    ) {
        let base = "[('a', '<i4'), ('b', [('x', 'S3', (2, 3))]), (('t', 'c'), '<M8[ns]')]";
        let mut s: Vec<char> = base.chars().collect();
        if flip < s.len() {
            s[flip] = with;
        }
        s.truncate(cut.max(1));
        let s: String = s.into_iter().collect();
        let _ = dtype::parse(&s).map(|d| d.npy_descr());
    }
}

#[test]
fn refused_dtypes_give_no_npy() {
    // object columns, unsized types and overlapping fields have no NPY view.
    for s in [
        "object",
        "|O",
        "S0",
        "{'names': ['a', 'b'], 'formats': ['<i4', '<i4'], 'offsets': [0, 2]}",
    ] {
        let r = dtype::parse(s).and_then(|d| d.npy_descr());
        assert!(r.is_err(), "{s}");
    }
}
