//! Commits that change the row count of a bcolz ctable: every column is resized in one
//! ordered commit, so the columns keep one length, and the repair of what an interrupted one
//! leaves.
//!
//! bcolz takes a ctable's length from its **first** column and never compares the columns'
//! lengths (`bcolz/ctable.py` `_open_ctable`: `self.len = len(self.cols[self.names[0]])`);
//! other columns longer than the first read fine (`t[:]`, `t[col][:]` of each), a first
//! column longer than another makes `t[:]` fail. Hence (`docs/format/CONTAINERS.md` 5.2, 6.4):
//!
//! - The edited column gets its edit; every other column is resized to the same row count:
//!   its rows below the table's current length are kept, new rows hold the column's `dflt`
//!   (`meta/storage`, what bcolz's own `resize` fills with; zeros when absent).
//! - Each column is committed as a carray (`bcolz.rs`: its `meta/sizes` is its commit point).
//!   Growing: the other columns first, **the first column last**; shrinking: the first column
//!   first. A crash in between leaves the first column's (old or new) length as the table's
//!   length and other columns at least that long: bcolz opens the table and reads every row
//!   of it; only `len(t[col])` of another column can show extra rows.
//! - [`repair_table`] trims such extra rows (they belong to no committed table length); a
//!   read-write mount runs it when it opens a ctable.
//!
//! Chunk data is decoded here for one chunk per column (the one holding the last kept row,
//! when it is not a whole chunk) and fill chunks are compressed with the column's own
//! parameters ([`super::chunk_cparams`]); all full fill chunks of a column share one buffer.
//!
//! Invariants: every check of every column runs before the first write; no panics; memory is
//! bounded by a few chunks per column plus one slot per chunk.

use serde_json::Value;

use super::bcolz::{Prepared, prepare};
use super::io::Io;
use super::{Chunk, Edit, Slot, plan, refused, unsupported};
use crate::codec::{self, ChunkFormat, ChunkHeader};
use crate::container::bcolz::Carray;
use crate::container::{Array, ContainerError, Inner, Table};

/// What `repair_table` found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TableRepair {
    /// Columns trimmed to the table's length: `(name, rows before, rows after)`.
    pub trimmed: Vec<(String, u64, u64)>,
    /// Columns shorter than the first one (not made by b2fs; left alone): `(name, rows)`.
    pub short: Vec<(String, u64)>,
}

/// The carray of each column, in `__rootdirs__` order.
fn columns(table: &Table) -> Result<Vec<(&str, &Array, &Carray)>, ContainerError> {
    table
        .columns
        .iter()
        .map(|(name, a)| match &a.inner {
            Inner::Bcolz(c) => Ok((name.as_str(), a, c.as_ref())),
            Inner::Frame(_) => Err(unsupported(
                a.path(),
                "a ctable column that is not a carray",
            )),
        })
        .collect()
}

fn rows(c: &Carray) -> u64 {
    c.shape().first().copied().unwrap_or(0)
}

/// Commits `edit` to column `column` of `table` (an index into `table.columns`). When it
/// changes the column's row count, every other column is resized to the same count in the
/// same commit (rows below the table's length kept, new rows filled with the column's
/// `dflt`), in the order the module doc gives. `table` must be freshly opened (the check that
/// the caller's view of the column is current is the caller's).
pub(super) fn commit_column(
    table: &Table,
    column: usize,
    edit: &Edit,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let cols = columns(table)?;
    let Some(&(_, array, c)) = cols.get(column) else {
        return Err(refused(
            &table.path,
            format!("column {column}: the ctable has {}", cols.len()),
        ));
    };
    for (_, a, _) in &cols {
        super::writable(a, false)?;
    }
    let l0 = cols.first().map_or(0, |(_, _, c)| rows(c));
    for (name, a, cj) in &cols {
        if rows(cj) < l0 {
            return Err(refused(
                a.path(),
                format!(
                    "column {name:?} has {} rows, fewer than the {l0} of the first column: the \
                     ctable is damaged (b2fs did not make it so) and its length is left alone",
                    rows(cj)
                ),
            ));
        }
    }
    if rows(c) != l0 {
        return Err(refused(
            array.path(),
            format!(
                "the column has {} rows, the ctable {l0} (rows left by an interrupted commit): \
                 a read-write mount repairs that when it opens the ctable",
                rows(c)
            ),
        ));
    }
    let slots = plan(array, edit, ChunkFormat::Blosc1)?;
    let main = prepare(array, c, slots, edit.attrs.as_ref())?;
    let len = main.len;
    let mut fills = Vec::new();
    for (j, &(_, a, cj)) in cols.iter().enumerate() {
        if j == column {
            continue;
        }
        let keep = rows(cj).min(l0).min(len);
        if let Some(f) = fill(a, cj, keep, len)? {
            fills.push((j, f));
        }
    }
    let mut steps: Vec<(usize, Prepared<'_>)> = Vec::with_capacity(fills.len() + 1);
    steps.push((column, main));
    for (j, f) in &fills {
        let (_, a, cj) = cols[*j];
        steps.push((*j, prepare(a, cj, f.slots(), None)?));
    }
    let first_last = len >= l0;
    steps.sort_by_key(|(j, _)| ((*j == 0) == first_last, *j));
    // Every column's new chunk files are staged (written to temp files, the edit's read back
    // from its spool) before any column is committed: a failure there leaves the whole table
    // as it was, not some columns resized.
    let mut staged: Vec<Vec<_>> = Vec::with_capacity(steps.len());
    for (_, p) in &steps {
        match p.stage(io) {
            Ok(s) => staged.push(s),
            Err(e) => {
                if !io.crashed() {
                    staged.iter().for_each(|s| super::bcolz::unstage(s));
                }
                return Err(e);
            }
        }
    }
    for ((_, p), s) in steps.iter().zip(&staged) {
        if let Err(e) = p.finish(s, io) {
            // This column's temp files not renamed yet and every later column's: never read,
            // removed (not after a simulated crash, which leaves what a crash leaves).
            if !io.crashed() {
                staged.iter().for_each(|s| super::bcolz::unstage(s));
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Trims every column longer than the first one (what an interrupted
/// [`super::commit_column`] leaves) to the first column's row count, shrinking commits
/// (`meta/sizes` first). Columns shorter than the first are reported, not changed.
pub(super) fn repair_table(table: &Table, io: &mut Io) -> Result<TableRepair, ContainerError> {
    let cols = columns(table)?;
    let l0 = cols.first().map_or(0, |(_, _, c)| rows(c));
    let mut out = TableRepair::default();
    let mut fills = Vec::new();
    for (j, &(name, a, cj)) in cols.iter().enumerate().skip(1) {
        let n = rows(cj);
        if n < l0 {
            out.short.push((name.to_owned(), n));
        } else if n > l0 {
            super::writable(a, false)?;
            if let Some(f) = fill(a, cj, l0, l0)? {
                fills.push((j, f));
                out.trimmed.push((name.to_owned(), n, l0));
            }
        }
    }
    let mut steps = Vec::with_capacity(fills.len());
    for (j, f) in &fills {
        let (_, a, cj) = cols[*j];
        steps.push(prepare(a, cj, f.slots(), None)?);
    }
    for p in &steps {
        p.apply(io)?;
    }
    Ok(out)
}

/// The new chunks of a column resized to `len` rows keeping its first `keep` rows (`keep <=
/// len`, `keep <=` its rows): old chunks `0..k0` stay; the chunks from `k0` on come from at
/// most three compressed buffers (the one holding the kept tail, the full fill chunk, the
/// partial last fill chunk).
#[derive(Debug)]
struct Fill {
    k0: usize,
    bufs: Vec<(Chunk, ChunkHeader)>,
    layout: Vec<usize>,
}

impl Fill {
    fn slots(&self) -> Vec<Slot<'_>> {
        let mut slots: Vec<Slot<'_>> = (0..self.k0).map(Slot::Old).collect();
        for &b in &self.layout {
            if let Some((bytes, h)) = self.bufs.get(b) {
                slots.push(Slot::New(bytes, h.clone()));
            }
        }
        slots
    }
}

/// The [`Fill`] that resizes carray `c` (of `array`) to `len` rows keeping `keep`; `None`
/// when nothing changes.
fn fill(array: &Array, c: &Carray, keep: u64, len: u64) -> Result<Option<Fill>, ContainerError> {
    let path = array.path();
    let old = rows(c);
    if keep == old && len == old {
        return Ok(None);
    }
    let cl = c.chunklen();
    let cs = c.chunksize();
    let atom = cs / cl.max(1);
    if atom == 0 || usize::try_from(cs).map_or(true, |cs| cs > codec::MAX_BUFFERSIZE) {
        return Err(unsupported(
            path,
            format!("resizing a column of {cs}-byte chunks (chunklen {cl})"),
        ));
    }
    let new_n = len.div_ceil(cl);
    if new_n > crate::container::frame::MAX_NCHUNKS {
        return Err(refused(
            path,
            format!(
                "{new_n} chunks: more than the {} b2fs writes",
                crate::container::frame::MAX_NCHUNKS
            ),
        ));
    }
    let (k0, rem) = ((keep / cl) as usize, keep % cl);
    let row = dflt_row(c).map_err(|why| refused(path, why))?;
    if row.len() as u64 != atom {
        return Err(refused(
            path,
            format!("dflt: {} bytes per row, the column has {atom}", row.len()),
        ));
    }
    let params = super::chunk_cparams(array)?;
    // At most three fill chunks per column: in memory.
    let compress = |data: &[u8]| -> Result<(Chunk, ChunkHeader), ContainerError> {
        let bytes = codec::compress(data, &params)
            .map_err(|e| unsupported(path, format!("compressing a fill chunk: {e}")))?;
        let h = ChunkHeader::parse(&bytes)
            .map_err(|e| unsupported(path, format!("compressing a fill chunk: {e}")))?;
        Ok((bytes.into(), h))
    };
    // `prefix` followed by fill rows up to `n` rows.
    let filled = |mut data: Vec<u8>, n: u64| -> Vec<u8> {
        let want = (n * atom) as usize;
        data.reserve(want.saturating_sub(data.len()));
        while data.len() < want {
            data.extend_from_slice(&row);
        }
        data.truncate(want);
        data
    };
    let mut out = Fill {
        k0,
        bufs: Vec::new(),
        layout: Vec::new(),
    };
    let (mut full, mut partial) = (None, None);
    for k in k0 as u64..new_n {
        let n = (len - k * cl).min(cl);
        let b = if k == k0 as u64 && rem > 0 {
            let chunk = array.chunk_bytes(k0)?;
            let mut data = codec::decompress(&chunk).map_err(|source| ContainerError::Chunk {
                path: path.to_path_buf(),
                index: k0,
                source,
            })?;
            let kept = (rem * atom) as usize;
            if data.len() < kept {
                return Err(ContainerError::Malformed {
                    path: c.chunk_path(k0),
                    what: "chunk".into(),
                    offset: 0,
                    why: format!("{} bytes decompressed, {kept} expected", data.len()),
                });
            }
            data.truncate(kept);
            out.bufs.push(compress(&filled(data, n))?);
            out.bufs.len() - 1
        } else {
            let slot = if n == cl { &mut full } else { &mut partial };
            match *slot {
                Some(b) => b,
                None => {
                    out.bufs.push(compress(&filled(Vec::new(), n))?);
                    *slot = Some(out.bufs.len() - 1);
                    out.bufs.len() - 1
                }
            }
        };
        out.layout.push(b);
    }
    Ok(Some(out))
}

/// One row of the fill value of carray `c`: `meta/storage` `dflt` (a scalar, repeated over
/// a multidimensional row, or a list of the row's items) encoded in the column's dtype;
/// zeros when there is no `dflt`. `Err` names what cannot be encoded.
fn dflt_row(c: &Carray) -> Result<Vec<u8>, String> {
    let itemsize = c.itemsize();
    let atom = (c.chunksize() / c.chunklen().max(1)) as usize;
    if itemsize == 0 || !atom.is_multiple_of(itemsize) {
        return Err(format!("dflt for dtype {:?}", c.dtype()));
    }
    let items = atom / itemsize;
    let v = c.storage().get("dflt").unwrap_or(&Value::Null);
    let mut flat = Vec::new();
    flatten(v, &mut flat, 0)?;
    let encode = |v: &Value| encode_item(c.dtype(), itemsize, v);
    let mut row = Vec::with_capacity(atom);
    match flat.len() {
        1 => {
            let one = encode(flat[0])?;
            for _ in 0..items {
                row.extend_from_slice(&one);
            }
        }
        n if n == items => {
            for v in flat {
                row.extend_from_slice(&encode(v)?);
            }
        }
        n => return Err(format!("dflt has {n} items, a row {items}")),
    }
    Ok(row)
}

fn flatten<'v>(v: &'v Value, out: &mut Vec<&'v Value>, depth: usize) -> Result<(), String> {
    match v {
        Value::Array(a) if depth < 32 => {
            for x in a {
                flatten(x, out, depth + 1)?;
            }
            Ok(())
        }
        Value::Array(_) => Err("dflt nested too deeply".into()),
        _ => {
            out.push(v);
            Ok(())
        }
    }
}

/// `(kind, big-endian)` of a numpy dtype string as bcolz stores it (`str(dtype)`: `int32`,
/// `float64`, `bool`, `|S3`, `<U3`, `>i4`, `datetime64[ns]`, ...). Kinds: `?` bool, `i`
/// signed, `u` unsigned, `f` float, `c` complex, `M`/`m` datetime/timedelta, `S` bytes, `U`
/// unicode, `V` void.
fn kind_of(dtype: &str) -> Option<(char, bool)> {
    let native_big = cfg!(target_endian = "big");
    let base = dtype.trim().split('[').next().unwrap_or("");
    let named = match base {
        "bool" => Some('?'),
        "int8" | "int16" | "int32" | "int64" => Some('i'),
        "uint8" | "uint16" | "uint32" | "uint64" => Some('u'),
        "float16" | "float32" | "float64" | "float128" | "longdouble" => Some('f'),
        "complex64" | "complex128" | "complex256" | "clongdouble" => Some('c'),
        "datetime64" => Some('M'),
        "timedelta64" => Some('m'),
        _ => None,
    };
    if let Some(k) = named {
        return Some((k, native_big));
    }
    let (big, t) = match base.chars().next()? {
        '>' => (true, &base[1..]),
        '<' | '|' => (false, &base[1..]),
        '=' => (native_big, &base[1..]),
        _ => (native_big, base),
    };
    let mut chars = t.chars();
    let k = chars.next()?;
    let digits = chars.as_str();
    let kind = match (k, digits.is_empty()) {
        ('?', _) | ('b', false) => '?',
        ('b', true) | ('i', _) => 'i',
        ('B', _) | ('u', _) => 'u',
        ('f' | 'c' | 'M' | 'm' | 'U' | 'V', _) => k,
        ('S' | 'a', _) => 'S',
        _ => return None,
    };
    Some((kind, big))
}

/// One item of dtype `dtype` (`size` bytes) holding the JSON value `v`.
fn encode_item(dtype: &str, size: usize, v: &Value) -> Result<Vec<u8>, String> {
    let bad = || format!("dflt {v} for dtype {dtype:?}");
    let (kind, big) = kind_of(dtype).ok_or_else(bad)?;
    let zero = match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0) && !n.to_string().starts_with('-'),
        Value::String(s) => s.is_empty(),
        _ => false,
    };
    if zero {
        return Ok(vec![0; size]);
    }
    let order = |le: &[u8]| -> Vec<u8> {
        let mut b = le[..size.min(le.len())].to_vec();
        if big {
            b.reverse();
        }
        b
    };
    let int = || -> Option<i128> {
        match v {
            Value::Bool(b) => Some(i128::from(*b)),
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 1.9e19)
                        .map(|f| f as i128)
                }),
            _ => None,
        }
    };
    match kind {
        '?' if size == 1 => Ok(vec![u8::from(int().ok_or_else(bad)? != 0)]),
        'i' | 'M' | 'm' if (1..=8).contains(&size) => {
            let x = int().ok_or_else(bad)?;
            let bits = 8 * size as u32;
            let (lo, hi) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
            if x < lo || x > hi {
                return Err(bad());
            }
            Ok(order(&(x as i64).to_le_bytes()))
        }
        'u' if (1..=8).contains(&size) => {
            let x = int().ok_or_else(bad)?;
            if x < 0 || x > i128::from(u64::MAX) >> (64 - 8 * size as u32) {
                return Err(bad());
            }
            Ok(order(&(x as u64).to_le_bytes()))
        }
        'f' => {
            let x = v.as_f64().ok_or_else(bad)?;
            match size {
                4 => Ok(order(&(x as f32).to_le_bytes())),
                8 => Ok(order(&x.to_le_bytes())),
                _ => Err(bad()),
            }
        }
        'S' => {
            let s = v.as_str().filter(|s| s.is_ascii()).ok_or_else(bad)?;
            if s.len() > size {
                return Err(bad());
            }
            let mut b = s.as_bytes().to_vec();
            b.resize(size, 0);
            Ok(b)
        }
        'U' => {
            let s = v.as_str().ok_or_else(bad)?;
            let mut b = Vec::with_capacity(size);
            for ch in s.chars() {
                let u = u32::from(ch);
                b.extend_from_slice(&if big {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                });
            }
            if b.len() > size {
                return Err(bad());
            }
            b.resize(size, 0);
            Ok(b)
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dflt_items_encode_like_numpy() {
        let e = |d: &str, size: usize, v: Value| encode_item(d, size, &v);
        assert_eq!(e("int32", 4, json!(-2)), Ok(vec![0xfe, 0xff, 0xff, 0xff]));
        assert_eq!(e(">i2", 2, json!(258)), Ok(vec![1, 2]));
        assert_eq!(e("uint8", 1, json!(255)), Ok(vec![255]));
        assert!(e("uint8", 1, json!(256)).is_err());
        assert!(e("int8", 1, json!(-129)).is_err());
        assert_eq!(e("bool", 1, json!(true)), Ok(vec![1]));
        assert_eq!(e("|b1", 1, json!(false)), Ok(vec![0]));
        assert_eq!(
            e("float64", 8, json!(1.5)),
            Ok(1.5f64.to_le_bytes().to_vec())
        );
        assert_eq!(e("float32", 4, json!(0.0)), Ok(vec![0; 4]));
        assert_eq!(
            e("float64", 8, json!(-0.0)),
            Ok((-0.0f64).to_le_bytes().to_vec())
        );
        assert!(e("float16", 2, json!(1.0)).is_err());
        assert_eq!(e("float16", 2, json!(0.0)), Ok(vec![0; 2]));
        assert_eq!(e("|S3", 3, json!("ab")), Ok(b"ab\0".to_vec()));
        assert!(e("|S1", 1, json!("ab")).is_err());
        assert_eq!(e("<U2", 8, json!("x")), Ok(vec![b'x', 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(
            e("datetime64[ns]", 8, json!(7)),
            Ok(7i64.to_le_bytes().to_vec())
        );
        assert!(e("complex128", 16, json!(1)).is_err());
        assert!(e("object", 8, json!(1)).is_err());
        assert!(e("int32", 4, json!({"a": 1})).is_err());
    }
}
