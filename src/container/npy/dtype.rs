//! NumPy dtypes as sources record them, and the `descr` `np.save` writes for them.
//!
//! Accepted inputs (what python-blosc2 4.14 writes in the `b2nd` metalayer and bcolz in
//! `meta/storage`):
//! - type strings `[<>|=]?<kind><size>` (`<f8`, `|b1`, `|S3`, `<U3`, `|V7`, `<M8[ns]`,
//!   `<m8[25s]`, `<M8`), `?`, and NumPy's names for native types (`int32`, `float64`, `bool`,
//!   `complex128`, `datetime64[ns]`, ...: bcolz writes `str(dtype)`);
//! - `str(dtype)` of structured dtypes as Python literals: the list form
//!   `[('a', '<i4'), ('b', 'S3', (2,)), (('title', 'c'), 'u1')]`, the dict form
//!   `{'names': [...], 'formats': [...], 'offsets': [...], 'titles': [...], 'itemsize': N,
//!   'aligned': True}` (padded or aligned records), nested records, subarray fields;
//! - a top-level subarray `('<i4', (2,))`, which NumPy expands into trailing array dimensions.
//!
//! Refused (the caller shows no `array.npy`): object and string-dtype (`O`, `T`), unsized
//! (`S0`, `V`), sizes NumPy does not have (`f3`), non-native parametric names, overlapping or
//! out-of-order fields (`np.save` itself cannot write them), duplicate names, field names with
//! characters whose `repr` b2fs cannot reproduce (see `literal::repr_str`), and any string
//! outside the subset. Byte order without a prefix is little-endian (every multi-byte string
//! python writes has an explicit `<` or `>`).
//!
//! The descr is exactly `numpy.lib.format.dtype_to_descr`: `dtype.str` for plain types, and
//! for records `dtype.descr` (fields in name order, gaps and trailing space as `('', '|Vn')`,
//! `(title, name)` pairs, subarray fields as `(name, base, shape)`) written with Python `repr`.

use super::literal::{self, Lit};
use super::typestr;

/// Largest itemsize accepted (NumPy's own limit is `i32::MAX`).
pub const MAX_ITEMSIZE: u64 = i32::MAX as u64;

/// A dtype as NumPy models it, reduced to what the NPY header and the byte layout need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dtype {
    /// A plain type: `typestr` is NumPy's canonical `dtype.str` (`<f8`, `|S3`, `<M8[ns]`).
    Scalar {
        /// Canonical type string.
        typestr: String,
        /// Bytes per item.
        itemsize: u64,
    },
    /// A record: fields in name order with their byte offsets.
    Record {
        /// The fields.
        fields: Vec<Field>,
        /// Bytes per record (may exceed the end of the last field).
        itemsize: u64,
    },
    /// A fixed-shape array of `base` items (C order).
    Subarray {
        /// The item type (may itself be a subarray).
        base: Box<Dtype>,
        /// The shape.
        shape: Vec<u64>,
    },
}

/// A field of a record dtype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The name (`f<i>` when the source gave an empty one, as NumPy does).
    pub name: String,
    /// The title, when the field has one.
    pub title: Option<String>,
    /// The field's type.
    pub dtype: Dtype,
    /// Byte offset inside the record.
    pub offset: u64,
}

impl Dtype {
    /// Bytes per item.
    pub fn itemsize(&self) -> u64 {
        match self {
            Dtype::Scalar { itemsize, .. } | Dtype::Record { itemsize, .. } => *itemsize,
            // Checked at construction not to overflow.
            Dtype::Subarray { base, shape } => shape
                .iter()
                .fold(base.itemsize(), |acc, &d| acc.saturating_mul(d)),
        }
    }

    /// `(descr literal for the NPY header, trailing dimensions)`: a top-level subarray is
    /// written as its base type with its shape appended to the array's, as `np.save` of an
    /// array with such a dtype does. `Err` when NumPy cannot describe the dtype (overlapping
    /// fields) or a name cannot be written exactly.
    pub fn npy_descr(&self) -> Result<(String, Vec<u64>), String> {
        let mut dt = self;
        let mut dims = Vec::new();
        while let Dtype::Subarray { base, shape } = dt {
            dims.extend_from_slice(shape);
            dt = base;
        }
        let mut out = String::new();
        descr(dt, &mut out)?;
        Ok((out, dims))
    }
}

fn shape_repr(shape: &[u64], out: &mut String) {
    out.push('(');
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&d.to_string());
    }
    if shape.len() == 1 {
        out.push(',');
    }
    out.push(')');
}

/// Python `repr` of a shape tuple: `()`, `(5,)`, `(5, 2)`.
pub fn shape_literal(shape: &[u64]) -> String {
    let mut s = String::new();
    shape_repr(shape, &mut s);
    s
}

/// `numpy._core._internal._array_descr`, written with `repr`.
fn descr(dt: &Dtype, out: &mut String) -> Result<(), String> {
    match dt {
        Dtype::Scalar { typestr, .. } => {
            out.push('\'');
            out.push_str(typestr);
            out.push('\'');
        }
        Dtype::Subarray { base, shape } => {
            out.push('(');
            descr(base, out)?;
            out.push_str(", ");
            shape_repr(shape, out);
            out.push(')');
        }
        Dtype::Record { fields, itemsize } => {
            out.push('[');
            let mut at = 0u64;
            let mut first = true;
            let mut sep = |out: &mut String| {
                if !std::mem::take(&mut first) {
                    out.push_str(", ");
                }
            };
            for f in fields {
                if f.offset > at {
                    sep(out);
                    out.push_str(&format!("('', '|V{}')", f.offset - at));
                    at = f.offset;
                } else if f.offset < at {
                    return Err(format!(
                        "field {:?} overlaps or precedes the previous one (np.save cannot write it)",
                        f.name
                    ));
                }
                sep(out);
                out.push('(');
                let name = literal::repr_str(&f.name)
                    .ok_or_else(|| format!("field name {:?} cannot be written exactly", f.name))?;
                match &f.title {
                    Some(t) => {
                        let t = literal::repr_str(t)
                            .ok_or_else(|| format!("title {t:?} cannot be written exactly"))?;
                        out.push_str(&format!("({t}, {name})"));
                    }
                    None => out.push_str(&name),
                }
                out.push_str(", ");
                match &f.dtype {
                    Dtype::Subarray { base, shape } => {
                        descr(base, out)?;
                        out.push_str(", ");
                        shape_repr(shape, out);
                    }
                    other => descr(other, out)?,
                }
                out.push(')');
                at = at.saturating_add(f.dtype.itemsize());
            }
            if *itemsize > at {
                sep(out);
                out.push_str(&format!("('', '|V{}')", itemsize - at));
            }
            out.push(']');
        }
    }
    Ok(())
}

/// Parses a dtype string as a source records it (see the module doc for the accepted forms).
///
/// # Errors
///
/// A one-line reason for anything refused; never panics, bounded in time and memory by the
/// input length.
pub fn parse(text: &str) -> Result<Dtype, String> {
    let t = text.trim();
    let first = t.as_bytes().first().copied();
    if matches!(first, Some(b'[' | b'(' | b'{' | b'\'' | b'"')) {
        let lit = literal::parse(t)?;
        from_lit(&lit, 0)
    } else {
        scalar(t)
    }
}

/// A plain type string, canonicalised (see [`typestr`]).
fn scalar(s: &str) -> Result<Dtype, String> {
    let (typestr, itemsize) = typestr::parse(s)?;
    Ok(Dtype::Scalar { typestr, itemsize })
}

fn too_big() -> String {
    format!("itemsize exceeds {MAX_ITEMSIZE}")
}

fn checked_size(v: Option<u64>) -> Result<u64, String> {
    v.filter(|&n| n <= MAX_ITEMSIZE).ok_or_else(too_big)
}

fn from_lit(lit: &Lit, depth: usize) -> Result<Dtype, String> {
    if depth > literal::MAX_DEPTH {
        return Err("dtype nested too deep".into());
    }
    match lit {
        Lit::Str(s) => scalar(s),
        Lit::List(items) => record_from_list(items, depth),
        Lit::Dict(kv) => record_from_dict(kv, depth),
        Lit::Tuple(items) => match items.as_slice() {
            [base, shape] => subarray(from_lit(base, depth + 1)?, shape),
            _ => Err("a dtype tuple must be (base, shape)".into()),
        },
        _ => Err("not a dtype".into()),
    }
}

/// `(base, shape)`: an int shape n is `(n,)`, an empty shape is the base itself.
fn subarray(base: Dtype, shape: &Lit) -> Result<Dtype, String> {
    let shape: Vec<u64> = match shape {
        Lit::Int(n) => vec![*n],
        Lit::Tuple(v) | Lit::List(v) => v
            .iter()
            .map(|d| match d {
                Lit::Int(n) => Ok(*n),
                _ => Err("subarray shape entries must be integers".to_string()),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("subarray shape must be an integer or a tuple".into()),
    };
    if shape.is_empty() {
        return Ok(base);
    }
    checked_size(
        shape
            .iter()
            .try_fold(base.itemsize(), |acc, &d| acc.checked_mul(d)),
    )?;
    Ok(Dtype::Subarray {
        base: Box::new(base),
        shape,
    })
}

fn name_of(lit: &Lit, index: usize) -> Result<(String, Option<String>), String> {
    let name = match lit {
        Lit::Str(s) => return Ok((default_name(s, index), None)),
        Lit::Tuple(v) => v,
        _ => return Err("field name must be a string or a (title, name) pair".into()),
    };
    match name.as_slice() {
        [Lit::Str(t), Lit::Str(n)] => Ok((default_name(n, index), Some(t.clone()))),
        _ => Err("field title must be a (str, str) pair".into()),
    }
}

fn default_name(s: &str, index: usize) -> String {
    if s.is_empty() {
        format!("f{index}")
    } else {
        s.to_string()
    }
}

fn finish_record(fields: Vec<Field>, itemsize: Option<u64>) -> Result<Dtype, String> {
    let mut end = 0u64;
    // Names and titles share one namespace in NumPy.
    let mut seen = std::collections::HashSet::with_capacity(fields.len());
    for f in &fields {
        for key in std::iter::once(&f.name).chain(f.title.as_ref()) {
            if !seen.insert(key.as_str()) {
                return Err(format!("field name or title {key:?} used twice"));
            }
        }
        end = end.max(checked_size(f.offset.checked_add(f.dtype.itemsize()))?);
    }
    let itemsize = match itemsize {
        Some(n) if n < end => return Err(format!("itemsize {n} smaller than its fields ({end})")),
        Some(n) => checked_size(Some(n))?,
        None => end,
    };
    if fields.is_empty() && itemsize == 0 {
        return Err("empty record".into());
    }
    Ok(Dtype::Record { fields, itemsize })
}

fn record_from_list(items: &[Lit], depth: usize) -> Result<Dtype, String> {
    let mut fields = Vec::with_capacity(items.len().min(4096));
    let mut offset = 0u64;
    for (i, item) in items.iter().enumerate() {
        let parts = match item {
            Lit::Tuple(p) | Lit::List(p) => p.as_slice(),
            _ => return Err("a record field must be a tuple".into()),
        };
        let (name, title, dtype) = match parts {
            [n, f] => {
                let (name, title) = name_of(n, i)?;
                (name, title, from_lit(f, depth + 1)?)
            }
            [n, f, s] => {
                let (name, title) = name_of(n, i)?;
                (name, title, subarray(from_lit(f, depth + 1)?, s)?)
            }
            _ => return Err("a record field must have 2 or 3 entries".into()),
        };
        let size = dtype.itemsize();
        fields.push(Field {
            name,
            title,
            dtype,
            offset,
        });
        offset = checked_size(offset.checked_add(size))?;
    }
    finish_record(fields, None)
}

fn record_from_dict(kv: &[(Lit, Lit)], depth: usize) -> Result<Dtype, String> {
    let get = |key: &str| {
        kv.iter()
            .find(|(k, _)| matches!(k, Lit::Str(s) if s == key))
            .map(|(_, v)| v)
    };
    for (k, _) in kv {
        match k {
            Lit::Str(s)
                if matches!(
                    s.as_str(),
                    "names" | "formats" | "offsets" | "titles" | "itemsize" | "aligned"
                ) => {}
            _ => return Err(format!("unknown key {k:?} in a dtype dict")),
        }
    }
    let list = |key: &str| -> Result<Option<&[Lit]>, String> {
        match get(key) {
            None => Ok(None),
            Some(v) => v
                .items()
                .map(Some)
                .ok_or_else(|| format!("'{key}' must be a list")),
        }
    };
    let names = list("names")?.ok_or("dtype dict without 'names'")?;
    let formats = list("formats")?.ok_or("dtype dict without 'formats'")?;
    let offsets = list("offsets")?;
    let titles = list("titles")?;
    let n = names.len();
    if formats.len() != n
        || offsets.is_some_and(|o| o.len() != n)
        || titles.is_some_and(|t| t.len() != n)
    {
        return Err("dtype dict lists differ in length".into());
    }
    let aligned = match get("aligned") {
        None | Some(Lit::Bool(false)) => false,
        Some(Lit::Bool(true)) => true,
        Some(_) => return Err("'aligned' must be a bool".into()),
    };
    if aligned && offsets.is_none() {
        return Err("aligned dtype dict without offsets".into());
    }
    let itemsize = match get("itemsize") {
        None => None,
        Some(Lit::Int(n)) => Some(*n),
        Some(_) => return Err("'itemsize' must be an integer".into()),
    };
    let mut fields = Vec::with_capacity(n.min(4096));
    let mut next = 0u64;
    for i in 0..n {
        let name = match &names[i] {
            Lit::Str(s) => default_name(s, i),
            _ => return Err("field names must be strings".into()),
        };
        let title = match titles.map(|t| &t[i]) {
            None | Some(Lit::None) => None,
            Some(Lit::Str(s)) => Some(s.clone()),
            Some(_) => return Err("titles must be strings or None".into()),
        };
        let dtype = from_lit(&formats[i], depth + 1)?;
        let offset = match offsets.map(|o| &o[i]) {
            None => next,
            Some(Lit::Int(o)) => *o,
            Some(_) => return Err("offsets must be integers".into()),
        };
        next = checked_size(offset.checked_add(dtype.itemsize()))?;
        fields.push(Field {
            name,
            title,
            dtype,
            offset,
        });
    }
    finish_record(fields, itemsize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descr_of(s: &str) -> (String, Vec<u64>, u64) {
        let d = parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        let (descr, dims) = d.npy_descr().unwrap();
        (descr, dims, d.itemsize())
    }

    #[test]
    fn records_write_numpy_descr() {
        // The pairs below are str(dtype) (what python-blosc2 stores) and the descr np.save
        // wrote for it (numpy 2.4).
        assert_eq!(
            descr_of("[('a', '<i4'), ('b', 'S3'), ('c', '<f8', (2,))]").0,
            "[('a', '<i4'), ('b', '|S3'), ('c', '<f8', (2,))]"
        );
        assert_eq!(
            descr_of("[('p', [('x', '<i2'), ('y', '<f4')]), ('q', 'u1')]").0,
            "[('p', [('x', '<i2'), ('y', '<f4')]), ('q', '|u1')]"
        );
        assert_eq!(
            descr_of(
                "{'names': ['x', 'y'], 'formats': ['<i2', '<f4'], 'offsets': [0, 4], 'itemsize': 12}"
            ),
            (
                "[('x', '<i2'), ('', '|V2'), ('y', '<f4'), ('', '|V4')]".into(),
                vec![],
                12
            )
        );
        assert_eq!(
            descr_of("[(('T1', 'a'), '<i4'), ('b', 'S2')]").0,
            "[(('T1', 'a'), '<i4'), ('b', '|S2')]"
        );
        assert_eq!(
            descr_of("[('', '<i4'), ('b', 'u1')]").0,
            "[('f0', '<i4'), ('b', '|u1')]"
        );
        assert_eq!(
            descr_of("[('a', ('<i4', (2,)), (3,))]"),
            ("[('a', ('<i4', (2,)), (3,))]".into(), vec![], 24)
        );
        assert_eq!(descr_of("('<i4', (2,))"), ("'<i4'".into(), vec![2], 8));
        assert_eq!(
            descr_of("(('<i4', (2,)), (3,))"),
            ("'<i4'".into(), vec![3, 2], 24)
        );
        assert_eq!(descr_of("[('a', '<i4', ())]").0, "[('a', '<i4')]");
        assert_eq!(descr_of("[('a', '<i4', 1)]").0, "[('a', '<i4', (1,))]");
    }

    #[test]
    fn hostile_records_are_refused() {
        for bad in [
            "[('a', '<i4'), ('a', 'u1')]",
            "{'names': ['a', 'b'], 'formats': ['<i4', '<i2'], 'offsets': [4, 0]}",
            "{'names': ['a'], 'formats': ['<i4'], 'offsets': [0], 'itemsize': 2}",
            "{'names': ['a'], 'formats': ['<i4', 'u1']}",
            "{'names': ['a'], 'formats': ['<i4'], 'bogus': 1}",
            "[('a', 'S1000000', (1000000, 1000000))]",
            "[]",
            "[('a',)]",
            "(numpy.record, [('a', '<i4')])",
            "[('\u{2028}', '<i4')]",
        ] {
            let r = parse(bad).and_then(|d| d.npy_descr().map(|_| ()));
            assert!(r.is_err(), "{bad:?}");
        }
    }
}
