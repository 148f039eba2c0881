//! `table.npy` of a python-blosc2 CTable (a group of a TreeStore/DictStore: `_meta`,
//! `_cols/<name>`, `_valid_rows`; docs/format/STORES.md, "CTable inside a store"): the
//! table's valid rows as one structured array, one field per column in schema order, what
//! `numpy.asarray(table)` gives. Pure: the schema's columns, the valid rows as runs, and
//! which physical rows a window of logical rows reads; the tree layer reads the columns.
//!
//! - **Schema** ([`schema_columns`]): `_meta`'s vlmeta holds `kind == "ctable"` and `schema`,
//!   a JSON text (`{"version", "columns": [{"name", "kind", ...}], "n_rows", ...}`). Only
//!   columns stored as one fixed-width NDArray each are accepted (numbers, bool, `string`,
//!   `bytes`, `ndarray`); a table with a variable-length, list, dictionary, struct, computed
//!   or nullable column, or a schema version other than 1 and 2, has no `table.npy` (its
//!   rows are Python objects, or its export is not the stored bytes).
//! - **Valid rows** ([`RunBuilder`]): `_valid_rows` is a bool array as long as the columns'
//!   used part; deleted rows are `false` and stay in the columns. The valid rows are kept as
//!   runs of consecutive rows, at most [`MAX_RUNS`] of them (16 bytes each), from a mask of
//!   at most [`MAX_MASK_ROWS`] rows: a mask past either is refused (EFBIG in the tree)
//!   rather than held or decoded.
//! - **Rows** ([`CTableNpy::segments`]): logical row `r` (the `r`-th valid row) is physical
//!   row `phys + (r - logical)` of the run that holds it.

use serde_json::Value;

use super::TableNpy;
use super::dtype::Dtype;

/// Most runs of valid rows a `table.npy` keeps (16 MiB of runs): a mask with more (deletions
/// of every other row of a table of millions) gets no `table.npy`.
pub const MAX_RUNS: usize = 1 << 20;

/// Most rows of `_valid_rows` read to make the runs (1 GiB of mask, decoded once at the first
/// `stat`): a stat must not decode without bound what a few bytes of a hostile store claim (a
/// chunk of 2 GiB of zeros is 40 bytes). A longer mask gets no `table.npy`.
pub const MAX_MASK_ROWS: u64 = 1 << 30;

/// Column kinds of python-blosc2's schema stored as one fixed-width NDArray per column,
/// whose bytes are what `numpy.asarray(table)` shows (`blosc2/schema_compiler.py`,
/// `_KIND_TO_SPEC`).
const FIXED_KINDS: &[&str] = &[
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bool",
    "string",
    "bytes",
    "ndarray",
];

/// Largest `schema` text accepted (python-blosc2 writes a few hundred bytes per column).
const MAX_SCHEMA: usize = 16 << 20;

/// The column names, in schema order, of the CTable whose `_meta` vlmeta (as the `__attrs__`
/// JSON object b2fs shows) is `meta`.
///
/// # Errors
///
/// A one-line reason when `meta` is not a CTable's, or the table has a column `table.npy`
/// cannot show (see the module doc).
pub fn schema_columns(meta: &Value) -> Result<Vec<String>, String> {
    match meta.get("kind").and_then(Value::as_str) {
        Some("ctable") => {}
        other => return Err(format!("_meta kind is {other:?}, not \"ctable\"")),
    }
    let text = meta
        .get("schema")
        .and_then(Value::as_str)
        .ok_or("_meta has no schema text")?;
    if text.len() > MAX_SCHEMA {
        return Err(format!("schema of {} bytes", text.len()));
    }
    let schema: Value = serde_json::from_str(text).map_err(|e| format!("schema: {e}"))?;
    match schema.get("version").and_then(Value::as_u64).unwrap_or(1) {
        1 | 2 => {}
        v => return Err(format!("schema version {v} (only 1 and 2)")),
    }
    let non_empty = |v: Option<&Value>| match v {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    if non_empty(schema.get("computed_columns")) {
        return Err("computed columns".into());
    }
    if let Some(meta) = schema.get("metadata")
        && (non_empty(meta.get("nested")) || non_empty(meta.get("struct_parents")))
    {
        return Err("nested (struct) columns".into());
    }
    let columns = schema
        .get("columns")
        .and_then(Value::as_array)
        .ok_or("schema has no columns")?;
    if columns.is_empty() {
        return Err("no columns".into());
    }
    let mut names = Vec::with_capacity(columns.len());
    for c in columns {
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a column without a name")?;
        let kind = c.get("kind").and_then(Value::as_str).unwrap_or("?");
        if !FIXED_KINDS.contains(&kind) {
            return Err(format!("column {name:?} is of kind {kind:?}"));
        }
        let nullable = c.get("nullable").and_then(Value::as_bool) == Some(true)
            || non_empty(c.get("null_value"))
            || non_empty(c.get("null_storage"));
        if nullable {
            return Err(format!("column {name:?} is nullable"));
        }
        if names.iter().any(|n| n == name) {
            return Err(format!("column {name:?} twice"));
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

/// Valid rows as runs, built from the mask's bytes in order ([`RunBuilder::push`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidRuns {
    /// Per run: `(logical row of its first row, physical row of its first row)`; runs in
    /// order, never adjacent.
    runs: Vec<(u64, u64)>,
    /// Valid rows in all.
    rows: u64,
    /// Rows of the mask (physical rows considered).
    phys: u64,
}

impl ValidRuns {
    /// Every one of `rows` rows valid (one run).
    pub fn all(rows: u64) -> ValidRuns {
        ValidRuns {
            runs: if rows > 0 { vec![(0, 0)] } else { Vec::new() },
            rows,
            phys: rows,
        }
    }

    /// Valid rows in all.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Number of runs.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Rows of the mask.
    pub fn mask_rows(&self) -> u64 {
        self.phys
    }

    /// One past the last valid physical row (0 without valid rows).
    pub fn phys_end(&self) -> u64 {
        match self.runs.last() {
            Some(&(l, p)) => p + (self.rows - l),
            None => 0,
        }
    }

    /// `(logical row, physical row, rows)` stretches covering logical rows `[r0, r1)`
    /// (clipped to the valid rows), in order.
    pub fn segments(&self, r0: u64, r1: u64) -> Vec<(u64, u64, u64)> {
        let r1 = r1.min(self.rows);
        let mut out = Vec::new();
        if r0 >= r1 {
            return out;
        }
        // The run holding r0: the last whose logical start is <= r0.
        let mut i = self
            .runs
            .partition_point(|&(l, _)| l <= r0)
            .saturating_sub(1);
        let mut at = r0;
        while at < r1 {
            let Some(&(l, p)) = self.runs.get(i) else {
                break;
            };
            let end = self.runs.get(i + 1).map_or(self.rows, |&(next, _)| next);
            let stop = end.min(r1);
            if stop > at {
                out.push((at, p + (at - l), stop - at));
            }
            at = stop;
            i += 1;
        }
        out
    }
}

/// Why a mask gets no runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyRuns {
    /// Physical rows read when the bound was passed.
    pub at: u64,
    /// The bound.
    pub max: usize,
}

impl std::fmt::Display for TooManyRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "_valid_rows has more than {} runs of valid rows (by row {})",
            self.max, self.at
        )
    }
}

/// Builds [`ValidRuns`] from a mask's bytes (nonzero: valid), a piece at a time.
#[derive(Debug)]
pub struct RunBuilder {
    out: ValidRuns,
    /// Whether the last byte pushed was valid.
    open: bool,
    max: usize,
}

impl RunBuilder {
    /// A builder keeping at most `max` runs.
    pub fn new(max: usize) -> RunBuilder {
        RunBuilder {
            out: ValidRuns::default(),
            open: false,
            max,
        }
    }

    /// The next bytes of the mask.
    ///
    /// # Errors
    ///
    /// [`TooManyRuns`] past the bound (the builder is then of no further use).
    pub fn push(&mut self, mask: &[u8]) -> Result<(), TooManyRuns> {
        let mut i = 0;
        while i < mask.len() {
            let valid = mask[i] != 0;
            // The stretch of equal validity from i.
            let len = mask[i..]
                .iter()
                .position(|&b| (b != 0) != valid)
                .unwrap_or(mask.len() - i);
            let phys = self.out.phys + i as u64;
            if valid {
                if !self.open {
                    if self.out.runs.len() >= self.max {
                        return Err(TooManyRuns {
                            at: phys,
                            max: self.max,
                        });
                    }
                    self.out.runs.push((self.out.rows, phys));
                }
                self.out.rows += len as u64;
            }
            self.open = valid;
            i += len;
        }
        self.out.phys += mask.len() as u64;
        Ok(())
    }

    /// The runs.
    pub fn finish(self) -> ValidRuns {
        self.out
    }
}

/// One column of a CTable's `table.npy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CTableColumn {
    /// Its field's byte offset in a record.
    pub offset: u64,
    /// Bytes of one row of it.
    pub atom: u64,
}

/// The NPY view of a CTable: the header and record of [`TableNpy`] over the valid rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CTableNpy {
    table: TableNpy,
    columns: Vec<CTableColumn>,
    runs: ValidRuns,
}

impl CTableNpy {
    /// The view of columns `(name, row dtype)` (schema order) over the valid rows `runs`.
    ///
    /// # Errors
    ///
    /// A reason when there are no columns, the record is too large or the size overflows.
    pub fn new(columns: Vec<(String, Dtype)>, runs: ValidRuns) -> Result<CTableNpy, String> {
        if columns.is_empty() {
            return Err("no columns".into());
        }
        let parts = columns.into_iter().map(|(n, d)| (n, d, 1)).collect();
        let table = TableNpy::from_parts(parts, runs.rows())?;
        let columns = table
            .columns()
            .iter()
            .map(|c| CTableColumn {
                offset: c.offset,
                atom: c.atom,
            })
            .collect();
        Ok(CTableNpy {
            table,
            columns,
            runs,
        })
    }

    /// The header bytes.
    pub fn header(&self) -> &[u8] {
        self.table.header()
    }

    /// The descr literal in the header.
    pub fn descr(&self) -> &str {
        self.table.descr()
    }

    /// How a read of `len` bytes at file offset `offset` splits into header and data.
    pub fn window(&self, offset: u64, len: usize) -> super::FileWindow {
        self.table.window(offset, len)
    }

    /// File size.
    pub fn len(&self) -> u64 {
        self.table.len()
    }

    /// Whether the file is empty (never: it has a header).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Valid rows (the array's length).
    pub fn rows(&self) -> u64 {
        self.table.rows()
    }

    /// Bytes per record.
    pub fn row_bytes(&self) -> u64 {
        self.table.row_bytes()
    }

    /// The columns, in field order.
    pub fn columns(&self) -> &[CTableColumn] {
        &self.columns
    }

    /// The valid rows.
    pub fn valid(&self) -> &ValidRuns {
        &self.runs
    }

    /// `(logical row, physical row, rows)` stretches of logical rows `[r0, r1)`.
    pub fn segments(&self, r0: u64, r1: u64) -> Vec<(u64, u64, u64)> {
        self.runs.segments(r0, r1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn runs(mask: &[u8], pieces: usize) -> ValidRuns {
        let mut b = RunBuilder::new(MAX_RUNS);
        for part in mask.chunks(pieces.max(1)) {
            b.push(part).unwrap();
        }
        b.finish()
    }

    #[test]
    fn runs_map_logical_rows_to_physical_rows_whatever_the_pieces() {
        let mask = [1u8, 1, 0, 0, 1, 0, 1, 1, 1, 0];
        let want: Vec<u64> = (0..mask.len() as u64)
            .filter(|&i| mask[i as usize] != 0)
            .collect();
        for pieces in 1..=mask.len() {
            let r = runs(&mask, pieces);
            assert_eq!(r.rows(), 6);
            assert_eq!(r.runs(), 3, "pieces of {pieces}");
            assert_eq!(r.phys_end(), 9);
            for r0 in 0..=6 {
                for r1 in r0..=7 {
                    let got: Vec<u64> = r
                        .segments(r0, r1)
                        .into_iter()
                        .flat_map(|(l, p, n)| {
                            assert!(l >= r0);
                            p..p + n
                        })
                        .collect();
                    assert_eq!(got, want[r0 as usize..r1.min(6) as usize]);
                }
            }
        }
        assert_eq!(runs(&[0, 0], 1).segments(0, 5), vec![]);
        assert_eq!(ValidRuns::all(5).segments(1, 4), vec![(1, 1, 3)]);
    }

    #[test]
    fn a_mask_past_the_run_bound_is_refused() {
        let mut b = RunBuilder::new(3);
        let e = b.push(&[1, 0, 1, 0, 1, 0, 1]).unwrap_err();
        assert_eq!(e, TooManyRuns { at: 6, max: 3 });
        let mut b = RunBuilder::new(3);
        b.push(&[1, 0, 1, 0, 1, 1, 1]).unwrap();
        assert_eq!(b.finish().runs(), 3);
    }

    #[test]
    fn schema_of_fixed_width_columns_only() {
        let meta = |schema: Value| json!({"kind": "ctable", "schema": schema.to_string()});
        let ok = meta(json!({"version": 1, "columns": [
            {"name": "a", "kind": "int32"}, {"name": "s", "kind": "string", "max_length": 6},
            {"name": "v", "kind": "ndarray", "item_shape": [2], "dtype_str": "<f4"}]}));
        assert_eq!(schema_columns(&ok).unwrap(), ["a", "s", "v"]);
        for bad in [
            json!({"kind": "ctable"}),
            json!({"kind": "other", "schema": "{}"}),
            meta(json!({"version": 3, "columns": [{"name": "a", "kind": "int32"}]})),
            meta(json!({"columns": [{"name": "a", "kind": "utf8"}]})),
            meta(json!({"columns": [{"name": "a", "kind": "list"}]})),
            meta(json!({"columns": [{"name": "a", "kind": "int32", "null_value": -1}]})),
            meta(
                json!({"columns": [{"name": "a", "kind": "int32"}, {"name": "a", "kind": "int8"}]}),
            ),
            meta(json!({"columns": []})),
            meta(json!({"columns": [{"name": "a", "kind": "int32"}],
                "computed_columns": [{"name": "b"}]})),
            json!({"kind": "ctable", "schema": "not json"}),
        ] {
            assert!(schema_columns(&bad).is_err(), "{bad}");
        }
    }
}
