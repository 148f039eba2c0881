//! N-dimensional frames: the `b2nd` and legacy `caterva` metalayers, and the b2nd
//! element-to-chunk mapping (chunk grid, padding, blocks in C order).
//!
//! Pure functions over bytes and shapes; no I/O. The frame reader calls `parse_b2nd` /
//! `parse_caterva` on metalayer contents; later features (slicing, write-back of a resized
//! shape) use [`Grid`]. `runs` (a child module) maps byte windows of the array's C-order data
//! onto stretches of decoded chunks ([`Grid::runs`]), for `array.npy`.
//!
//! See the B2ND and Caterva metalayer documents (seeds 001 and 000 of `docs/format/README.md`)
//! and `docs/format/CONTAINERS.md` sections 4.3 and 4.4. Differences from the seeds that real bytes show:
//! `ndim` is at most 16 (not 127), the dtype is always a `db` str32, and numbers always use the
//! fixed `d3`/`d2` widths (C-Blosc2 skips the marker and reads a fixed width, so compact
//! encodings would be misread; b2fs requires the exact markers).
//!
//! Invariants of [`Grid`]: every chunk has the same padded size (`prod ext_cs * itemsize`); chunks
//! are numbered in C order of the chunk grid; inside a chunk, blocks are in C order of the
//! block grid and items in C order inside a block.

use super::msgpack::{Cursor, Fault};

mod runs;
pub use runs::{NdRuns, Run};

/// Largest ndim C-Blosc2 accepts (`B2ND_MAX_DIM`).
pub const MAX_DIM: usize = 16;

/// The decoded content of a `b2nd` or `caterva` metalayer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdMeta {
    /// Metalayer format version as stored (readers ignore it).
    pub version: u8,
    /// Shape in items.
    pub shape: Vec<u64>,
    /// Chunk shape (caterva: "partition shape").
    pub chunkshape: Vec<u64>,
    /// Block shape.
    pub blockshape: Vec<u64>,
    /// `dtype_format` (0 = NumPy); `None` for caterva.
    pub dtype_format: Option<u8>,
    /// The dtype string; `None` for caterva.
    pub dtype: Option<String>,
}

fn dims(c: &mut Cursor<'_>, ndim: usize, what: &str, wide: bool) -> Result<Vec<u64>, Fault> {
    let at = c.offset();
    let n = c.fixarray(what)?;
    if n != ndim {
        return Err(Fault::new(
            what,
            at,
            format!("has {n} entries, ndim is {ndim}"),
        ));
    }
    let mut out = Vec::with_capacity(ndim);
    for _ in 0..ndim {
        let at = c.offset();
        let v = if wide {
            c.int64(what)?
        } else {
            i64::from(c.int32(what)?)
        };
        let v = u64::try_from(v)
            .map_err(|_| Fault::new(what, at, format!("negative dimension {v}")))?;
        out.push(v);
    }
    Ok(out)
}

fn head(c: &mut Cursor<'_>, fields: usize, what: &str) -> Result<(u8, usize), Fault> {
    let at = c.offset();
    let n = c.fixarray(what)?;
    if n != fields {
        return Err(Fault::new(
            what,
            at,
            format!("fixarray of {n} fields, expected {fields}"),
        ));
    }
    let version = c.pos_fixint(what)?;
    let at = c.offset();
    let ndim = usize::from(c.pos_fixint(what)?);
    if ndim > MAX_DIM {
        return Err(Fault::new(
            what,
            at,
            format!("ndim {ndim} exceeds {MAX_DIM}"),
        ));
    }
    Ok((version, ndim))
}

/// Parses a `b2nd` metalayer content whose first byte is at file offset `base`. Trailing bytes
/// (left by a shorter `blosc2_meta_update`) are ignored, as C-Blosc2 does.
pub(crate) fn parse_b2nd(raw: &[u8], base: u64) -> Result<NdMeta, Fault> {
    let what = "b2nd metalayer";
    let mut c = Cursor::new(raw, base);
    let (version, ndim) = head(&mut c, 7, what)?;
    let shape = dims(&mut c, ndim, "b2nd shape", true)?;
    let chunkshape = dims(&mut c, ndim, "b2nd chunkshape", false)?;
    let blockshape = dims(&mut c, ndim, "b2nd blockshape", false)?;
    let dtype_format = c.pos_fixint("b2nd dtype_format")?;
    c.expect(0xdb, "b2nd dtype")?;
    let len = c.be_u32("b2nd dtype length")? as usize;
    let at = c.offset();
    let bytes = c.take(len, "b2nd dtype")?;
    let dtype = std::str::from_utf8(bytes)
        .map_err(|_| Fault::new("b2nd dtype", at, "dtype is not UTF-8"))?
        .to_string();
    Ok(NdMeta {
        version,
        shape,
        chunkshape,
        blockshape,
        dtype_format: Some(dtype_format),
        dtype: Some(dtype),
    })
}

/// Parses a legacy `caterva` metalayer content (no dtype).
pub(crate) fn parse_caterva(raw: &[u8], base: u64) -> Result<NdMeta, Fault> {
    let what = "caterva metalayer";
    let mut c = Cursor::new(raw, base);
    let (version, ndim) = head(&mut c, 5, what)?;
    let shape = dims(&mut c, ndim, "caterva shape", true)?;
    let chunkshape = dims(&mut c, ndim, "caterva chunkshape", false)?;
    let blockshape = dims(&mut c, ndim, "caterva blockshape", false)?;
    Ok(NdMeta {
        version,
        shape,
        chunkshape,
        blockshape,
        dtype_format: None,
        dtype: None,
    })
}

/// Why shapes do not form a valid b2nd chunk grid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid b2nd geometry: {0}")]
pub struct GridError(pub String);

/// The chunk and block grid of a b2nd array (`docs/format/CONTAINERS.md` section 4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    shape: Vec<u64>,
    chunkshape: Vec<u64>,
    blockshape: Vec<u64>,
    /// `ceil(cs / bs) * bs` per dimension.
    ext_chunkshape: Vec<u64>,
    /// `ceil(shape / cs)` per dimension.
    chunk_grid: Vec<u64>,
    /// `ext_cs / bs` per dimension.
    block_grid: Vec<u64>,
    items_per_chunk: u64,
    nchunks: u64,
}

fn product(v: &[u64]) -> Option<u64> {
    v.iter().try_fold(1u64, |acc, &x| acc.checked_mul(x))
}

/// C-order ravel of `idx` in a grid of `extent` (no bounds check on `idx`).
fn ravel(idx: &[u64], extent: &[u64]) -> u64 {
    idx.iter()
        .zip(extent)
        .fold(0u64, |acc, (&i, &n)| acc.wrapping_mul(n).wrapping_add(i))
}

impl Grid {
    /// Builds the grid. Dimensions of size 0 may have chunk/block size 0; every other
    /// dimension needs `1 <= blockshape <= chunkshape`. All counts must fit in `u64`.
    ///
    /// # Errors
    ///
    /// [`GridError`] when the three shapes differ in length, a chunk or block size is 0 for a
    /// non-empty dimension, a block is larger than its chunk, or a count overflows.
    pub fn new(shape: &[u64], chunkshape: &[u64], blockshape: &[u64]) -> Result<Grid, GridError> {
        let nd = shape.len();
        if chunkshape.len() != nd || blockshape.len() != nd {
            return Err(GridError(format!(
                "ndim mismatch: shape {shape:?}, chunkshape {chunkshape:?}, blockshape {blockshape:?}"
            )));
        }
        let mut ext = Vec::with_capacity(nd);
        let mut cgrid = Vec::with_capacity(nd);
        let mut bgrid = Vec::with_capacity(nd);
        for d in 0..nd {
            let (s, cs, bs) = (shape[d], chunkshape[d], blockshape[d]);
            if cs == 0 || bs == 0 {
                if s != 0 {
                    return Err(GridError(format!(
                        "dimension {d}: chunk {cs} / block {bs} of size 0 for extent {s}"
                    )));
                }
                ext.push(0);
                cgrid.push(0);
                bgrid.push(0);
                continue;
            }
            if bs > cs {
                return Err(GridError(format!(
                    "dimension {d}: block {bs} larger than chunk {cs}"
                )));
            }
            let e = cs
                .div_ceil(bs)
                .checked_mul(bs)
                .ok_or_else(|| GridError("padded chunk overflows".into()))?;
            ext.push(e);
            cgrid.push(s.div_ceil(cs));
            bgrid.push(e / bs);
        }
        let overflow = || GridError("item or chunk count overflows u64".into());
        let items_per_chunk = product(&ext).ok_or_else(overflow)?;
        let nchunks = product(&cgrid).ok_or_else(overflow)?;
        Ok(Grid {
            shape: shape.to_vec(),
            chunkshape: chunkshape.to_vec(),
            blockshape: blockshape.to_vec(),
            ext_chunkshape: ext,
            chunk_grid: cgrid,
            block_grid: bgrid,
            items_per_chunk,
            nchunks,
        })
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Chunks per dimension (`ceil(shape / chunkshape)`).
    pub fn chunk_grid(&self) -> &[u64] {
        &self.chunk_grid
    }

    /// Chunks in one row of the chunk grid along the first axis (the product of the other
    /// dimensions' chunk counts), `None` when it overflows: a grid with no row along the
    /// first axis (its first dimension 0) was not bounded by its whole product.
    pub fn chunks_per_row(&self) -> Option<u64> {
        self.chunk_grid
            .get(1..)?
            .iter()
            .try_fold(1u64, |a, &b| a.checked_mul(b))
    }

    /// Blocks per chunk per dimension.
    pub fn block_grid(&self) -> &[u64] {
        &self.block_grid
    }

    /// Chunk shape padded to whole blocks.
    pub fn ext_chunkshape(&self) -> &[u64] {
        &self.ext_chunkshape
    }

    /// Total number of chunks (the schunk's `nchunks`; 1 for a 0-d array).
    pub fn nchunks(&self) -> u64 {
        self.nchunks
    }

    /// Items in every (padded) chunk; the chunk's byte size is this times the itemsize.
    pub fn items_per_chunk(&self) -> u64 {
        self.items_per_chunk
    }

    /// Maps an element index to `(chunk number, item position inside the decompressed
    /// chunk)`. `None` when `index` has the wrong length or lies outside the shape.
    pub fn locate(&self, index: &[u64]) -> Option<(u64, u64)> {
        if index.len() != self.ndim() {
            return None;
        }
        let nd = self.ndim();
        let mut c = Vec::with_capacity(nd);
        let mut b = Vec::with_capacity(nd);
        let mut e = Vec::with_capacity(nd);
        for (d, &i) in index.iter().enumerate() {
            if i >= self.shape[d] {
                return None;
            }
            let (cs, bs) = (self.chunkshape[d], self.blockshape[d]);
            let r = i % cs;
            c.push(i / cs);
            b.push(r / bs);
            e.push(r % bs);
        }
        let chunk = ravel(&c, &self.chunk_grid);
        let block = ravel(&b, &self.block_grid);
        let items_per_block: u64 = self.blockshape.iter().product();
        let pos = block * items_per_block + ravel(&e, &self.blockshape);
        Some((chunk, pos))
    }

    /// The element index of the first item of chunk `chunk` (its origin in the array), or
    /// `None` when `chunk >= nchunks`.
    pub fn chunk_origin(&self, chunk: u64) -> Option<Vec<u64>> {
        if chunk >= self.nchunks {
            return None;
        }
        let mut rest = chunk;
        let mut origin = vec![0u64; self.ndim()];
        for d in (0..self.ndim()).rev() {
            let n = self.chunk_grid[d];
            origin[d] = (rest % n) * self.chunkshape[d];
            rest /= n;
        }
        Some(origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_are_rows_of_blocks_cut_at_chunk_and_array_ends() {
        // 10 rows of 7 items; chunks of 4 rows, blocks of 3: bands 0-3, 3-4 (the chunk
        // ends), 4-7, 7-8, 8-10 (the array ends inside the block 8-11).
        let g = Grid::new(&[10, 7], &[4, 7], &[3, 7]).unwrap();
        let rows = |item| g.band_of_item(item).map(|r| (r.start / 7, r.end / 7));
        let want = [
            (0, 3),
            (0, 3),
            (0, 3),
            (3, 4),
            (4, 7),
            (4, 7),
            (4, 7),
            (7, 8),
            (8, 10),
            (8, 10),
        ];
        for (row, band) in want.iter().enumerate() {
            for col in 0..7 {
                assert_eq!(rows(row as u64 * 7 + col), Some(*band), "row {row}");
            }
        }
        assert_eq!(g.band_of_item(70), None, "past the last item");
        // One dimension: a band is a block's items.
        let g = Grid::new(&[100], &[40], &[16]).unwrap();
        assert_eq!(g.band_of_item(0), Some(0..16));
        assert_eq!(g.band_of_item(35), Some(32..40));
        assert_eq!(g.band_of_item(99), Some(96..100));
        // No dimension: no band.
        let g = Grid::new(&[], &[], &[]).unwrap();
        assert_eq!(g.band_of_item(0), None);
    }

    /// The real 2-D example of docs/format/CONTAINERS.md 4.3: shape (10,7), chunks (4,4), blocks (2,2),
    /// `<i4`.
    const AR_B2ND: [u8; 53] = [
        0x97, 0x00, 0x02, 0x92, 0xd3, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0xd3, 0, 0, 0, 0, 0, 0, 0, 0x07,
        0x92, 0xd2, 0, 0, 0, 4, 0xd2, 0, 0, 0, 4, 0x92, 0xd2, 0, 0, 0, 2, 0xd2, 0, 0, 0, 2, 0x00,
        0xdb, 0, 0, 0, 3, b'<', b'i', b'4',
    ];

    #[test]
    fn b2nd_metalayer_real_bytes() {
        let m = parse_b2nd(&AR_B2ND, 0x6b).unwrap();
        assert_eq!(m.shape, [10, 7]);
        assert_eq!(m.chunkshape, [4, 4]);
        assert_eq!(m.blockshape, [2, 2]);
        assert_eq!(m.dtype.as_deref(), Some("<i4"));
        // 0-d scalar.
        let scalar = [
            0x97, 0, 0, 0x90, 0x90, 0x90, 0, 0xdb, 0, 0, 0, 3, b'<', b'f', b'4',
        ];
        let m = parse_b2nd(&scalar, 0).unwrap();
        assert!(m.shape.is_empty());
        assert_eq!(m.dtype.as_deref(), Some("<f4"));
    }

    #[test]
    fn b2nd_metalayer_hostile_is_fault() {
        for cut in 0..AR_B2ND.len() {
            assert!(parse_b2nd(&AR_B2ND[..cut], 0).is_err(), "cut {cut}");
        }
        let mut bad = AR_B2ND;
        bad[4] = 0xd2; // compact marker where d3 is required
        let f = parse_b2nd(&bad, 100).unwrap_err();
        assert_eq!(f.offset, 104);
        let mut neg = AR_B2ND;
        neg[5] = 0xff;
        assert!(parse_b2nd(&neg, 0).unwrap_err().why.contains("negative"));
        let mut big = AR_B2ND;
        big[47] = 0xff; // dtype length 0xff000003
        assert!(parse_b2nd(&big, 0).is_err());
        let mut nd = AR_B2ND;
        nd[2] = 17;
        assert!(parse_b2nd(&nd, 0).unwrap_err().why.contains("ndim"));
    }

    #[test]
    fn caterva_metalayer_parses() {
        let mut raw = vec![0x95, 0x00, 0x01, 0x91, 0xd3];
        raw.extend(100i64.to_be_bytes());
        raw.extend([0x91, 0xd2]);
        raw.extend(30i32.to_be_bytes());
        raw.extend([0x91, 0xd2]);
        raw.extend(10i32.to_be_bytes());
        let m = parse_caterva(&raw, 0).unwrap();
        assert_eq!(
            (m.shape, m.chunkshape, m.blockshape),
            (vec![100], vec![30], vec![10])
        );
        assert_eq!(m.dtype, None);
    }

    /// Brute force: walk every item of every padded chunk in storage order and check that
    /// `locate` of the element it holds points back at it.
    fn check_grid(shape: &[u64], cs: &[u64], bs: &[u64]) {
        let g = Grid::new(shape, cs, bs).unwrap();
        let nd = shape.len();
        let items_per_block: u64 = bs.iter().product();
        let mut seen = 0u64;
        for chunk in 0..g.nchunks() {
            let origin = g.chunk_origin(chunk).unwrap();
            for pos in 0..g.items_per_chunk() {
                let (block, inner) = (pos / items_per_block, pos % items_per_block);
                // unravel block and inner
                let mut idx = vec![0u64; nd];
                let (mut b, mut e) = (block, inner);
                for d in (0..nd).rev() {
                    let bd = b % g.block_grid()[d];
                    b /= g.block_grid()[d];
                    let ed = e % bs[d];
                    e /= bs[d];
                    idx[d] = origin[d] + bd * bs[d] + ed;
                }
                let inside = (0..nd).all(|d| idx[d] < shape[d] && idx[d] - origin[d] < cs[d]);
                if inside {
                    assert_eq!(g.locate(&idx), Some((chunk, pos)), "{idx:?}");
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, shape.iter().product::<u64>());
    }

    #[test]
    fn grid_locate_matches_storage_order() {
        // The case docs/format/CONTAINERS.md 4.4 verified against C-Blosc2: 576-byte chunks of <i4.
        let g = Grid::new(&[7, 11, 5], &[5, 4, 3], &[2, 3, 2]).unwrap();
        assert_eq!(g.ext_chunkshape(), [6, 6, 4]);
        assert_eq!(g.items_per_chunk() * 4, 576);
        assert_eq!(g.nchunks(), 2 * 3 * 2);
        check_grid(&[7, 11, 5], &[5, 4, 3], &[2, 3, 2]);
        check_grid(&[10, 7], &[4, 4], &[2, 2]);
        check_grid(&[13], &[5], &[3]);
        check_grid(&[3, 4, 5, 2], &[2, 3, 5, 2], &[1, 2, 2, 1]);
    }

    #[test]
    fn grid_edge_cases() {
        let scalar = Grid::new(&[], &[], &[]).unwrap();
        assert_eq!(scalar.nchunks(), 1);
        assert_eq!(scalar.items_per_chunk(), 1);
        assert_eq!(scalar.locate(&[]), Some((0, 0)));
        let empty = Grid::new(&[0, 5], &[0, 5], &[0, 5]).unwrap();
        assert_eq!(empty.nchunks(), 0);
        assert_eq!(empty.locate(&[0, 0]), None);
        assert!(Grid::new(&[4], &[2], &[3]).is_err());
        assert!(Grid::new(&[4], &[0], &[0]).is_err());
        assert!(Grid::new(&[4], &[2], &[2, 2]).is_err());
        let g = Grid::new(&[10, 7], &[4, 4], &[2, 2]).unwrap();
        assert_eq!(g.locate(&[10, 0]), None);
        assert_eq!(g.locate(&[0]), None);
        assert_eq!(g.locate(&[9, 6]), Some((5, 4 + 2)));
    }
}
