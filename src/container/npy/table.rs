//! `table.npy` of a bcolz ctable: its rows as one structured array, one field per column in
//! `__rootdirs__` order (`ctable[:]`), packed (the record is the columns' row atoms back to
//! back). A byte window of the data becomes strided [`TablePiece`]s: for each column and each
//! of its chunks the window crosses, one piece copying that column's atom of every row.

use super::dtype::{Dtype, Field};
use super::layout::slice_at;
use super::{NpyError, header, typed};
use crate::container::Table;

/// One column of `table.npy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableColumn {
    /// Column name.
    pub name: String,
    /// Byte offset of the column's field inside a record.
    pub offset: u64,
    /// Bytes of one row of the column (itemsize x the product of its trailing dimensions).
    pub atom: u64,
    /// Rows per chunk of the column (bcolz `chunklen`).
    pub chunk_rows: u64,
}

/// A strided copy: for `i` in `0..rows`, `len` bytes at `src + i * src_stride` of decoded
/// chunk `chunk` of column `column` go to `dst + i * dst_stride` of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TablePiece {
    /// Column index (`__rootdirs__` order).
    pub column: usize,
    /// Chunk number in that column.
    pub chunk: u64,
    /// Byte offset of the first row's bytes in the decoded chunk.
    pub src: u64,
    /// Bytes per row (the column's atom, less at the window's edges).
    pub len: u64,
    /// Byte offset of the first row's bytes in the window.
    pub dst: u64,
    /// Rows copied (at least 1).
    pub rows: u64,
    /// Source step between rows (the column's atom).
    pub src_stride: u64,
    /// Destination step between rows (the record size).
    pub dst_stride: u64,
}

/// The NPY view of a ctable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableNpy {
    header: Vec<u8>,
    descr: String,
    columns: Vec<TableColumn>,
    row_bytes: u64,
    rows: u64,
}

impl TableNpy {
    /// The `table.npy` view of `t`.
    ///
    /// # Errors
    ///
    /// [`NpyError`] when a column has no NPY view of its own, the columns differ in length,
    /// there are no columns, or the record would be too large.
    pub fn for_table(t: &Table) -> Result<TableNpy, NpyError> {
        let err = |why: String| NpyError {
            path: t.path.display().to_string(),
            why,
        };
        let mut columns = Vec::with_capacity(t.columns.len());
        let mut rows = None;
        for (name, col) in &t.columns {
            let ty = typed(col).map_err(|why| err(format!("column {name}: {why}")))?;
            let (len, trailing) = ty
                .shape
                .split_first()
                .ok_or_else(|| err("0-d column".into()))?;
            if *rows.get_or_insert(*len) != *len {
                return Err(err(format!(
                    "column {name} has {len} rows, the first column {}",
                    rows.unwrap_or(0)
                )));
            }
            let chunk_rows = col
                .geometry()
                .chunkshape
                .as_ref()
                .and_then(|c| c.first().copied())
                .ok_or_else(|| err(format!("column {name}: no chunklen")))?;
            let dtype = if trailing.is_empty() {
                ty.dtype
            } else {
                Dtype::Subarray {
                    base: Box::new(ty.dtype),
                    shape: trailing.to_vec(),
                }
            };
            columns.push((name.clone(), dtype, chunk_rows));
        }
        let rows = rows.ok_or_else(|| err("no columns".into()))?;
        TableNpy::from_parts(columns, rows).map_err(err)
    }

    /// A table view from `(name, row dtype, rows per chunk)` per column and the row count: the
    /// pure core of [`TableNpy::for_table`].
    ///
    /// # Errors
    ///
    /// A reason when a chunk length is 0, the record is too large, or a name cannot be
    /// written exactly.
    pub fn from_parts(columns: Vec<(String, Dtype, u64)>, rows: u64) -> Result<TableNpy, String> {
        let mut fields = Vec::with_capacity(columns.len());
        let mut cols = Vec::with_capacity(columns.len());
        let mut offset = 0u64;
        for (name, dtype, chunk_rows) in columns {
            if chunk_rows == 0 {
                return Err(format!("column {name}: chunklen 0"));
            }
            let atom = dtype.itemsize();
            cols.push(TableColumn {
                name: name.clone(),
                offset,
                atom,
                chunk_rows,
            });
            fields.push(Field {
                name,
                title: None,
                dtype,
                offset,
            });
            offset = offset
                .checked_add(atom)
                .filter(|&n| n <= super::dtype::MAX_ITEMSIZE)
                .ok_or("record too large")?;
        }
        rows.checked_mul(offset).ok_or("table size overflows")?;
        let record = Dtype::Record {
            fields,
            itemsize: offset,
        };
        let (descr, _) = record.npy_descr()?;
        Ok(TableNpy {
            header: header(&descr, &[rows]),
            descr,
            columns: cols,
            row_bytes: offset,
            rows,
        })
    }

    /// The header bytes.
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// The descr literal in the header.
    pub fn descr(&self) -> &str {
        &self.descr
    }

    /// How a read of `len` bytes at file offset `offset` splits into header and data.
    pub fn window(&self, offset: u64, len: usize) -> super::FileWindow {
        super::file_window(self.header.len(), self.data_len(), offset, len)
    }

    /// Where the data starts (a multiple of 64).
    pub fn data_offset(&self) -> u64 {
        self.header.len() as u64
    }

    /// Bytes of the data part (rows x record size).
    pub fn data_len(&self) -> u64 {
        self.rows * self.row_bytes
    }

    /// File size.
    pub fn len(&self) -> u64 {
        self.data_offset() + self.data_len()
    }

    /// Whether the file is empty (never: it has a header).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Number of rows.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes per record.
    pub fn row_bytes(&self) -> u64 {
        self.row_bytes
    }

    /// The columns, in field order.
    pub fn columns(&self) -> &[TableColumn] {
        &self.columns
    }

    /// Pieces of the fields of row `row` that fall in the window `[s, e)` (absolute data
    /// bytes), one row each.
    fn partial_row(&self, row: u64, s: u64, e: u64, out: &mut Vec<TablePiece>) {
        let base = row * self.row_bytes;
        for (ci, c) in self.columns.iter().enumerate() {
            let f0 = (base + c.offset).max(s);
            let f1 = (base + c.offset + c.atom).min(e);
            if f0 >= f1 {
                continue;
            }
            let chunk = row / c.chunk_rows;
            let in_atom = f0 - base - c.offset;
            out.push(TablePiece {
                column: ci,
                chunk,
                src: (row - chunk * c.chunk_rows) * c.atom + in_atom,
                len: f1 - f0,
                dst: f0 - s,
                rows: 1,
                src_stride: c.atom,
                dst_stride: self.row_bytes,
            });
        }
    }

    /// The pieces assembling data bytes `[start, start + len)` (clipped to the data): the
    /// partial first row, then per column and chunk the whole rows, then the partial last row.
    pub fn pieces(&self, start: u64, len: u64) -> Vec<TablePiece> {
        let mut out = Vec::new();
        let r = self.row_bytes;
        let s = start.min(self.data_len());
        let e = s.saturating_add(len).min(self.data_len());
        if s >= e || r == 0 {
            return out;
        }
        if !s.is_multiple_of(r) {
            self.partial_row(s / r, s, e, &mut out);
        }
        let (first, end) = (s.div_ceil(r), e / r);
        for (ci, c) in self.columns.iter().enumerate() {
            if c.atom == 0 || first >= end {
                continue;
            }
            let mut row = first;
            while row < end {
                let chunk = row / c.chunk_rows;
                let stop = ((chunk + 1) * c.chunk_rows).min(end);
                out.push(TablePiece {
                    column: ci,
                    chunk,
                    src: (row - chunk * c.chunk_rows) * c.atom,
                    len: c.atom,
                    dst: row * r + c.offset - s,
                    rows: stop - row,
                    src_stride: c.atom,
                    dst_stride: r,
                });
                row = stop;
            }
        }
        if !e.is_multiple_of(r) && (e / r != s / r || s.is_multiple_of(r)) {
            self.partial_row(e / r, s, e, &mut out);
        }
        out
    }

    /// The `(column, chunk)` pairs data bytes `[start, start + len)` read, sorted, no repeats.
    pub fn chunks(&self, start: u64, len: u64) -> Vec<(usize, u64)> {
        let mut out: Vec<(usize, u64)> = self
            .pieces(start, len)
            .iter()
            .map(|p| (p.column, p.chunk))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// What a scan in file order needs after data byte `offset`: for each column, the chunk
    /// after the one holding that row, where there is one.
    pub fn next_chunks(&self, offset: u64) -> Vec<(usize, u64)> {
        if self.row_bytes == 0 || offset >= self.data_len() {
            return Vec::new();
        }
        let row = offset / self.row_bytes;
        self.columns
            .iter()
            .enumerate()
            .filter_map(|(ci, c)| {
                let next = row / c.chunk_rows + 1;
                (next * c.chunk_rows < self.rows).then_some((ci, next))
            })
            .collect()
    }
}

/// Fills `out` (the window the pieces were made for) from decoded column chunks
/// (`chunk(column, k)`), a reference assembler for tests and tools.
///
/// # Errors
///
/// The closure's error, or a message when a piece falls outside `out` or the decoded chunk.
pub fn assemble_table(
    pieces: &[TablePiece],
    out: &mut [u8],
    chunk: &mut dyn FnMut(usize, u64) -> Result<Vec<u8>, String>,
) -> Result<(), String> {
    let mut held: Option<((usize, u64), Vec<u8>)> = None;
    for p in pieces {
        let key = (p.column, p.chunk);
        if held.as_ref().is_none_or(|(k, _)| *k != key) {
            held = Some((key, chunk(p.column, p.chunk)?));
        }
        let Some((_, bytes)) = &held else {
            continue;
        };
        for i in 0..p.rows {
            let src = slice_at(bytes, p.src + i * p.src_stride, p.len).ok_or_else(|| {
                format!(
                    "column {} chunk {}: {} bytes, too short",
                    p.column,
                    p.chunk,
                    bytes.len()
                )
            })?;
            let at = usize::try_from(p.dst + i * p.dst_stride).map_err(|e| e.to_string())?;
            let dst = out
                .get_mut(at..at + src.len())
                .ok_or_else(|| format!("piece at {at} outside the window"))?;
            dst.copy_from_slice(src);
        }
    }
    Ok(())
}
