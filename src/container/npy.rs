//! The NPY file of an array (`array.npy`) and of a bcolz ctable (`table.npy`): the header bytes
//! as `numpy.save` writes them with the data aligned to a page (below), the file size and data
//! offset, and where each byte of the data part lives in the source's decoded chunks. Pure: no
//! I/O, no decoding, no cache (the tree layer reads the chunks; [`assemble`] is a reference
//! reader for tests).
//!
//! The data part is the array's items in C order, unpadded: `arr[...]` for b2nd (python-blosc2),
//! `carray[:]` / `ctable[:]` for bcolz.
//!
//! The dtype in the header (see [`dtype`] for what is accepted and refused):
//! - b2nd: the metalayer's dtype string (`dtype_format` 0), written as `np.save` would;
//! - bcolz carrays and ctable columns: `meta/storage` `dtype`, the shape from `meta/sizes`;
//! - sources without a recorded dtype (frames without an N-dim metalayer, caterva arrays):
//!   `|V<typesize>` items (`|u1` for typesize 1) in the source's shape (plain frames: 1-D,
//!   `nbytes / typesize` items); a plain frame whose `nbytes` is not a multiple of its typesize
//!   is `|u1` bytes, shape `(nbytes,)`. `numpy.load` then gives the raw items, which
//!   `.view(dtype)` reinterprets.
//!
//! Header layout (`numpy.lib.format`): magic `\x93NUMPY`, version, little-endian header length
//! (u16 for 1.0; u32 for 2.0 when the header exceeds 65535 bytes, and for 3.0 when a field name
//! is not Latin-1, UTF-8 encoded), then
//! `{'descr': ..., 'fortran_order': False, 'shape': (...), }` plus 21 minus the digits of
//! `shape[0]` spaces (numpy's room for growth), padded with spaces and one `\n` so the data
//! starts on a multiple of [`DATA_ALIGN`] (a full one of padding when already aligned).
//!
//! **Why a page, not numpy's 64 bytes.** The data part starts on a page boundary, so a page of
//! the file holds items of as few chunks as the array's layout allows. With numpy's 128-byte
//! header every other page of a row of a 2-D array began with the last items of the chunk to
//! its left: an `mmap` reader, which faults whole pages, made b2fs decode that neighbour's
//! block too, 7.8 blocks per random 64x64 window against python-blosc2's 5.25 (BENCHMARKS.md,
//! "Session 11: windows"); aligned, windows ran 1.15-1.41x faster in same-run A/Bs. The header stays what
//! numpy writes (`numpy.save` with `numpy.lib.format.ARRAY_ALIGN` set to 4096 gives the same
//! bytes) and any NPY reader takes it: the format allows any padding that keeps the alignment,
//! and `numpy.load` reads headers of up to 10,000 bytes by default.

pub mod ctable;
pub mod dtype;
pub mod layout;
mod literal;
pub mod table;
mod typestr;

use thiserror::Error;

use super::{Array, SourceKind};
pub use dtype::Dtype;
pub use layout::{Layout, Runs, Slab, assemble};
pub use table::{TableColumn, TableNpy, TablePiece, assemble_table};

/// Alignment of the data part: a page (`numpy.lib.format.ARRAY_ALIGN` is 64; see the module
/// docs for why b2fs pads further).
pub const DATA_ALIGN: usize = crate::mem::PAGE;

/// Why an array gets no NPY file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("no NPY view of {path}: {why}")]
pub struct NpyError {
    /// The source (or column) path.
    pub path: String,
    /// The reason, one line.
    pub why: String,
}

/// The NPY header bytes `np.save` writes for an array of `shape` whose descr literal is
/// `descr` (as [`Dtype::npy_descr`] returns it), with the data aligned to [`DATA_ALIGN`].
pub fn header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let mut text = format!(
        "{{'descr': {descr}, 'fortran_order': False, 'shape': {}, }}",
        dtype::shape_literal(shape)
    );
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        text.extend(std::iter::repeat_n(' ', 21usize.saturating_sub(digits)));
    }
    let latin1 = text.chars().all(|c| u32::from(c) <= 0xff);
    let body: Vec<u8> = if latin1 {
        // Latin-1: every char is one byte of the same value.
        text.chars().map(|c| u32::from(c) as u8).collect()
    } else {
        text.into_bytes()
    };
    let hlen = body.len() + 1;
    let padded = |len_bytes: usize| {
        let pad = DATA_ALIGN - (6 + 2 + len_bytes + hlen) % DATA_ALIGN;
        (pad, hlen + pad)
    };
    let (major, len_bytes) = match (latin1, padded(2).1 <= usize::from(u16::MAX)) {
        (false, _) => (3u8, 4),
        (true, true) => (1, 2),
        (true, false) => (2, 4),
    };
    let (pad, total) = padded(len_bytes);
    let mut out = Vec::with_capacity(8 + len_bytes + total);
    out.extend_from_slice(b"\x93NUMPY");
    out.extend_from_slice(&[major, 0]);
    if len_bytes == 2 {
        out.extend_from_slice(&(total as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_le_bytes());
    }
    out.extend_from_slice(&body);
    out.extend(std::iter::repeat_n(b' ', pad));
    out.push(b'\n');
    out
}

/// How a read of bytes `[offset, offset + len)` of a whole NPY file splits: `header` bytes of
/// the header go to the start of the output, then data bytes `data` (relative to the data
/// part, for [`Layout::runs`] / [`TableNpy::pieces`]) go at output byte `data_dst`. `out_len`
/// is the read's length clipped to the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWindow {
    /// Header bytes to copy (indices into the header).
    pub header: std::ops::Range<usize>,
    /// Data-part bytes to assemble.
    pub data: std::ops::Range<u64>,
    /// Where the data bytes start in the output.
    pub data_dst: usize,
    /// Bytes the read returns.
    pub out_len: usize,
}

/// Splits a read of `len` bytes at `offset` of a file of `header_len` header bytes and
/// `data_len` data bytes (see [`FileWindow`]).
pub fn file_window(header_len: usize, data_len: u64, offset: u64, len: usize) -> FileWindow {
    let total = (header_len as u64).saturating_add(data_len);
    let start = offset.min(total);
    let end = start.saturating_add(len as u64).min(total);
    let h = header_len as u64;
    let header = start.min(h) as usize..end.min(h) as usize;
    FileWindow {
        data_dst: header.len(),
        header,
        data: start.max(h) - h..end.max(h) - h,
        out_len: (end - start) as usize,
    }
}

/// The descr of items that have no recorded dtype (see the module doc).
pub fn untyped_dtype(typesize: u64) -> Dtype {
    match typesize {
        0 | 1 => Dtype::Scalar {
            typestr: "|u1".into(),
            itemsize: 1,
        },
        n => Dtype::Scalar {
            typestr: format!("|V{n}"),
            itemsize: n,
        },
    }
}

/// The NPY view of one array: header, size, and the chunk layout of its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Npy {
    header: Vec<u8>,
    descr: String,
    shape: Vec<u64>,
    layout: Layout,
}

/// The source's dtype (or the documented stand-in), its shape, and its chunk layout.
pub(crate) struct Typed {
    pub(crate) dtype: Dtype,
    pub(crate) shape: Vec<u64>,
    pub(crate) layout: Layout,
}

fn product(v: &[u64]) -> Option<u64> {
    v.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

/// Reads what the NPY view needs from an opened array; `Err(why)` when it cannot have one.
pub(crate) fn typed(a: &Array) -> Result<Typed, String> {
    let typesize = a.typesize() as u64;
    if let Some(nd) = a.nd_meta() {
        let grid = super::Grid::new(&nd.shape, &nd.chunkshape, &nd.blockshape)
            .map_err(|e| e.to_string())?;
        let dtype = match (&nd.dtype, nd.dtype_format) {
            (Some(s), Some(0)) => dtype::parse(s)?,
            (Some(_), f) => return Err(format!("dtype_format {f:?} is not NumPy (0)")),
            (None, _) => untyped_dtype(typesize),
        };
        let itemsize = dtype.itemsize();
        if itemsize != typesize {
            return Err(format!(
                "dtype itemsize {itemsize} differs from the frame typesize {typesize}"
            ));
        }
        if a.nchunks() as u64 != grid.nchunks() {
            return Err(format!(
                "{} chunks, the grid has {}",
                a.nchunks(),
                grid.nchunks()
            ));
        }
        let chunk = grid.items_per_chunk().checked_mul(itemsize);
        if grid.nchunks() > 0 && chunk != Some(a.chunksize() as u64) {
            return Err(format!(
                "chunk size {} is not the padded chunk shape x itemsize ({chunk:?})",
                a.chunksize()
            ));
        }
        product(&nd.shape)
            .and_then(|n| n.checked_mul(itemsize))
            .ok_or("array size overflows")?;
        return Ok(Typed {
            dtype,
            shape: nd.shape.clone(),
            layout: Layout::Nd { grid, itemsize },
        });
    }
    let nchunks = a.nchunks() as u64;
    let chunk_bytes = a.chunksize() as u64;
    let (dtype, shape, data_len) = if a.kind() == SourceKind::BcolzCarray {
        let g = a.geometry();
        let text = g.dtype.as_deref().ok_or("no dtype in meta/storage")?;
        let dtype = dtype::parse(text)?;
        let data_len = product(&g.shape)
            .and_then(|n| n.checked_mul(dtype.itemsize()))
            .ok_or("array size overflows")?;
        let row =
            product(g.shape.get(1..).unwrap_or(&[])).and_then(|n| n.checked_mul(dtype.itemsize()));
        let chunklen = g.chunkshape.as_ref().and_then(|c| c.first().copied());
        if chunklen.and_then(|c| c.checked_mul(row?)) != Some(chunk_bytes) {
            return Err(format!(
                "chunk size {chunk_bytes} is not chunklen x row size"
            ));
        }
        (dtype, g.shape.clone(), data_len)
    } else {
        let nbytes = a.nbytes();
        let typesize = typesize.max(1);
        if nbytes.is_multiple_of(typesize) {
            (untyped_dtype(typesize), vec![nbytes / typesize], nbytes)
        } else {
            (untyped_dtype(1), vec![nbytes], nbytes)
        }
    };
    // Chunk k holds [k * chunk_bytes, ...): every chunk but the last is full.
    let chunk_bytes = match (chunk_bytes, nchunks) {
        (0, 0 | 1) => data_len.max(1),
        (0, _) => return Err("chunks of varying size".into()),
        (n, _) => n,
    };
    if data_len.div_ceil(chunk_bytes) != nchunks {
        return Err(format!(
            "{data_len} data bytes in {nchunks} chunks of {chunk_bytes}"
        ));
    }
    Ok(Typed {
        dtype,
        shape,
        layout: Layout::Linear {
            chunk_bytes,
            data_len,
        },
    })
}

impl Npy {
    /// The NPY view of `a` (`array.npy`).
    ///
    /// # Errors
    ///
    /// [`NpyError`] when the dtype is refused (see [`dtype`]), the chunk geometry does not
    /// match the dtype, or the chunks vary in size; the tree then shows no `array.npy` and
    /// logs the reason.
    pub fn for_array(a: &Array) -> Result<Npy, NpyError> {
        let err = |why: String| NpyError {
            path: a.path().display().to_string(),
            why,
        };
        let t = typed(a).map_err(err)?;
        let (descr, dims) = t.dtype.npy_descr().map_err(err)?;
        let mut shape = t.shape;
        shape.extend(dims);
        Ok(Npy::new(descr, shape, t.layout))
    }

    /// An NPY view from its parts (the data must be `prod(shape) * itemsize` bytes of
    /// `layout`).
    pub fn new(descr: String, shape: Vec<u64>, layout: Layout) -> Npy {
        Npy {
            header: header(&descr, &shape),
            descr,
            shape,
            layout,
        }
    }

    /// The header bytes (magic to the final `\n`).
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// Where the data starts (a multiple of 64).
    pub fn data_offset(&self) -> u64 {
        self.header.len() as u64
    }

    /// File size: header plus data.
    pub fn len(&self) -> u64 {
        self.data_offset().saturating_add(self.layout.data_len())
    }

    /// Whether the file is empty (never: the header is at least [`DATA_ALIGN`] bytes).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The descr literal in the header.
    pub fn descr(&self) -> &str {
        &self.descr
    }

    /// How a read of `len` bytes at file offset `offset` splits into header and data.
    pub fn window(&self, offset: u64, len: usize) -> FileWindow {
        file_window(self.header.len(), self.layout.data_len(), offset, len)
    }

    /// The shape in the header (the array's, plus a subarray dtype's dimensions).
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Where the data bytes live.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_windows_split_header_and_data() {
        let w = file_window(128, 1000, 100, 50);
        assert_eq!(
            (w.header, w.data, w.data_dst, w.out_len),
            (100..128, 0..22, 28, 50)
        );
        let w = file_window(128, 1000, 10, 20);
        assert_eq!((w.header, w.data.is_empty(), w.out_len), (10..30, true, 20));
        let w = file_window(128, 1000, 500, 4096);
        assert_eq!(
            (w.header.is_empty(), w.data, w.data_dst, w.out_len),
            (true, 372..1000, 0, 628)
        );
        let w = file_window(128, 1000, 5000, 10);
        assert_eq!(w.out_len, 0);
        assert!(w.header.is_empty() && w.data.is_empty());
    }

    #[test]
    fn header_matches_numpy_save() {
        // np.save(BytesIO, np.zeros(5, '<f4')) header text, numpy 2.4, with its ARRAY_ALIGN
        // set to 4096 (scripts/oracle/npy_ref.py): 4,096 bytes, header length 0x0ff6.
        let h = header("'<f4'", &[5]);
        assert_eq!(h.len(), 4096);
        assert_eq!(&h[..10], b"\x93NUMPY\x01\x00\xf6\x0f");
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"));
        assert!(text.ends_with(" \n"));
        // 0-d: no growth padding.
        let h = header("'<f8'", &[]);
        assert_eq!(h.len(), 4096);
        assert!(h[10..].starts_with(b"{'descr': '<f8', 'fortran_order': False, 'shape': (), } "));
        // A long descr needs version 2.0.
        let long = format!("'|V{}'", "9".repeat(70_000));
        let h = header(&long, &[1]);
        assert_eq!(&h[6..8], &[2, 0]);
        assert_eq!(h.len() % DATA_ALIGN, 0);
        // A non-Latin-1 name needs 3.0.
        let h = header("[('\u{65e5}', '|u1')]", &[3]);
        assert_eq!(&h[6..8], &[3, 0]);
        assert_eq!(h.len() % DATA_ALIGN, 0);
        let hl = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
        assert_eq!(hl + 12, h.len());
    }
}
