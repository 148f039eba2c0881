//! The Zarr geometry of one array, derived from its NPY view (the dtype, the shape and where
//! each C-order byte lives in the decoded chunks), so `array.npy` and the Zarr view always
//! agree: the Zarr `data_type`, shape, chunk shape, chunk grid, and how a chunk object's bytes
//! come from the decoded chunk (a prefix of it, or a re-layout from block order).
//!
//! Data types (NumPy type string -> Zarr v3):
//!
//! | NumPy | Zarr `data_type` |
//! | --- | --- |
//! | `\|b1` | `bool` |
//! | `i1`..`i8`, `u1`..`u8` | `int8`..`int64`, `uint8`..`uint64` |
//! | `f2`, `f4`, `f8` | `float16`, `float32`, `float64` |
//! | `c8`, `c16` | `complex64`, `complex128` |
//! | `M8[<n><unit>]`, `m8[<n><unit>]` | `numpy.datetime64` / `numpy.timedelta64` `{unit, scale_factor}` |
//! | `U<n>` | `fixed_length_utf32` `{length_bytes: 4n}` |
//! | `V<n>` (and sources with no dtype) | `uint8` with a trailing axis of `n` (raw item bytes) |
//!
//! Sharded (`-o zarr_shards`, [`Geom::sharded`]): a b2nd array whose blockshape divides its
//! chunkshape on every axis is shown with the `sharding_indexed` codec, one shard per source
//! chunk and one inner chunk per block. The shard object is then the decoded chunk as stored
//! (blocks one after another, each in C order: what `data/N.bin` holds, so no re-layout),
//! followed by the index at its end: `(offset, nbytes)` as little-endian `u64` per inner
//! chunk, in C order over the blocks, `(k * block bytes, block bytes)` for block `k` (no
//! checksum: the spec's `index_codecs` need only `bytes`). A Zarr reader reads the index, then
//! only the inner chunks its window touches, and b2fs decodes only those blocks.
//!
//! Not shown: records, `S<n>`, `f12`/`f16` (long double), `c24`/`c32`, `M8`/`m8` without a
//! unit. Byte order goes to the `bytes` codec (`endian`), absent for 1-byte types.

use serde_json::{Value, json};

use crate::container::ndim::{Grid, NdRuns};
use crate::container::npy::{Layout, Npy};

/// A Zarr data type and what it means for the bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct DataType {
    /// The `data_type` member.
    pub json: Value,
    /// The `bytes` codec's `endian` (`None` for 1-byte types).
    pub endian: Option<&'static str>,
    /// The `fill_value` member: the type's zero.
    pub fill: Value,
    /// Bytes per Zarr element.
    pub itemsize: u64,
}

/// Units NumPy datetimes may have that Zarr's `numpy.datetime64` names.
const TIME_UNITS: &[&str] = &[
    "Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as",
];

/// The Zarr type of NumPy type string `typestr` (`<f8`, `|b1`, `<M8[25s]`), and for raw-byte
/// types the trailing axis they add; `Err(why)` when it has none.
pub fn data_type(typestr: &str) -> Result<(DataType, Option<u64>), String> {
    let order = typestr.chars().next().unwrap_or('|');
    let body = typestr.get(1..).unwrap_or("");
    let endian = match order {
        '<' => Some("little"),
        '>' => Some("big"),
        _ => None,
    };
    let kind = body.chars().next().unwrap_or(' ');
    let rest = body.get(1..).unwrap_or("");
    let no = || Err(format!("NumPy type {typestr} has no portable Zarr v3 type"));
    let simple = |name: &str, size: u64, fill: Value| {
        Ok((
            DataType {
                json: json!(name),
                endian: if size > 1 { endian } else { None },
                fill,
                itemsize: size,
            },
            None,
        ))
    };
    match kind {
        'M' | 'm' => {
            let Some(unit) = rest.strip_prefix("8[").and_then(|u| u.strip_suffix(']')) else {
                return no();
            };
            let digits = unit.chars().take_while(char::is_ascii_digit).count();
            let scale: u64 = match &unit[..digits] {
                "" => 1,
                d => d.parse().map_err(|_| format!("{typestr}: bad scale"))?,
            };
            let unit = &unit[digits..];
            if scale == 0 || scale > i32::MAX as u64 || !TIME_UNITS.contains(&unit) {
                return no();
            }
            let name = if kind == 'M' {
                "numpy.datetime64"
            } else {
                "numpy.timedelta64"
            };
            Ok((
                DataType {
                    json: json!({"name": name, "configuration": {"unit": unit, "scale_factor": scale}}),
                    endian,
                    fill: json!(0),
                    itemsize: 8,
                },
                None,
            ))
        }
        'U' => match rest.parse::<u64>() {
            Ok(n) if n > 0 && n < (1 << 28) => Ok((
                DataType {
                    json: json!({"name": "fixed_length_utf32",
                                 "configuration": {"length_bytes": 4 * n}}),
                    endian,
                    fill: json!(""),
                    itemsize: 4 * n,
                },
                None,
            )),
            _ => no(),
        },
        'V' => match rest.parse::<u64>() {
            Ok(0) | Err(_) => no(),
            Ok(n) => {
                let (t, _) = simple("uint8", 1, json!(0))?;
                Ok((t, (n > 1).then_some(n)))
            }
        },
        _ => {
            let name = match (kind, rest) {
                ('b', "1") => return simple("bool", 1, json!(false)),
                ('i', "1") => "int8",
                ('i', "2") => "int16",
                ('i', "4") => "int32",
                ('i', "8") => "int64",
                ('u', "1") => "uint8",
                ('u', "2") => "uint16",
                ('u', "4") => "uint32",
                ('u', "8") => "uint64",
                ('f', "2") => return simple("float16", 2, json!(0.0)),
                ('f', "4") => return simple("float32", 4, json!(0.0)),
                ('f', "8") => return simple("float64", 8, json!(0.0)),
                ('c', "8") => return simple("complex64", 8, json!([0.0, 0.0])),
                ('c', "16") => return simple("complex128", 16, json!([0.0, 0.0])),
                _ => return no(),
            };
            let size: u64 = rest.parse().map_err(|_| format!("{typestr}: bad size"))?;
            simple(name, size, json!(0))
        }
    }
}

/// Where a chunk object's bytes come from in the decoded chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The object is the decoded chunk's first bytes: b2nd chunks whose blocks are slabs
    /// (`blockshape[1:] == chunkshape[1:]`), and linear sources (plain frames, bcolz), whose
    /// last chunk may hold fewer bytes than the object (the rest is zeros).
    Prefix,
    /// Any other b2nd blockshape: the object is the C-order data of a one-chunk array of the
    /// chunk shape, gathered from the block-ordered decoded chunk (this grid's runs).
    Relayout(Grid),
}

/// A sharded layout: one shard per source chunk, one inner chunk per block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// The inner chunk shape: the blockshape, then the trailing axes whole.
    pub inner: Vec<u64>,
    /// Inner chunks per shard (blocks per chunk).
    pub count: u64,
    /// Bytes of each inner chunk.
    pub inner_bytes: u64,
}

/// Bytes of one shard index entry (`offset`, `nbytes`: two little-endian `u64`).
pub const INDEX_ENTRY: u64 = 16;

/// An array's Zarr geometry.
#[derive(Debug, Clone, PartialEq)]
pub struct Geom {
    /// The Zarr shape.
    pub shape: Vec<u64>,
    /// The chunk shape (every length at least 1).
    pub chunks: Vec<u64>,
    /// Chunks per dimension.
    pub grid: Vec<u64>,
    /// The data type.
    pub dtype: DataType,
    /// Bytes of every chunk object's data (a shard's, before its index).
    pub object_len: u64,
    /// The sharded layout, when the view shows the array sharded.
    pub shard: Option<Shard>,
    /// How object bytes map to the decoded chunk.
    pub source: Source,
    /// The NPY view's chunk layout (for the valid length of linear chunks).
    layout: Layout,
}

fn product(v: &[u64]) -> Option<u64> {
    v.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

impl Geom {
    /// The Zarr geometry of the array whose NPY view is `npy`; `Err(why)` when it has none.
    pub fn of(npy: &Npy) -> Result<Geom, String> {
        let typestr = npy
            .descr()
            .strip_prefix('\'')
            .and_then(|d| d.strip_suffix('\''))
            .ok_or("a record dtype has no portable Zarr v3 type")?;
        let (dtype, raw) = data_type(typestr)?;
        let mut shape = npy.shape().to_vec();
        let layout = npy.layout().clone();
        let (mut chunks, source) = match &layout {
            Layout::Nd { grid, .. } => {
                let mut c: Vec<u64> = grid.chunkshape().iter().map(|&c| c.max(1)).collect();
                c.extend_from_slice(shape.get(grid.ndim()..).unwrap_or(&[]));
                let slab = grid.ndim() <= 1 || grid.blockshape()[1..] == grid.chunkshape()[1..];
                let source = if slab {
                    Source::Prefix
                } else {
                    let cs = grid.chunkshape();
                    Source::Relayout(
                        Grid::new(cs, cs, grid.blockshape()).map_err(|e| e.to_string())?,
                    )
                };
                (c, source)
            }
            Layout::Linear { chunk_bytes, .. } => {
                let Some((_, rows)) = shape.split_first() else {
                    return Err("a linear source without a shape".into());
                };
                let item = dtype.itemsize * raw.unwrap_or(1);
                let row = product(rows)
                    .and_then(|r| r.checked_mul(item))
                    .ok_or("row size overflows")?;
                let first = if layout.nchunks() == 0 {
                    (chunk_bytes / row.max(1)).max(1)
                } else if row > 0 && chunk_bytes % row == 0 {
                    chunk_bytes / row
                } else {
                    return Err(format!(
                        "its chunks ({chunk_bytes} bytes) do not hold whole rows of {row} bytes"
                    ));
                };
                let mut c = vec![first];
                c.extend_from_slice(rows);
                (c, Source::Prefix)
            }
        };
        if let Some(n) = raw {
            shape.push(n);
            chunks.push(n);
        }
        let chunks: Vec<u64> = chunks.into_iter().map(|c| c.max(1)).collect();
        let grid: Vec<u64> = shape
            .iter()
            .zip(&chunks)
            .map(|(&s, &c)| s.div_ceil(c))
            .collect();
        let object_len = product(&chunks)
            .and_then(|n| n.checked_mul(dtype.itemsize))
            .ok_or("chunk size overflows")?;
        if product(&grid) != Some(layout.nchunks()) {
            return Err(format!(
                "its {} chunks do not form the grid {grid:?}",
                layout.nchunks()
            ));
        }
        Ok(Geom {
            shape,
            chunks,
            grid,
            dtype,
            object_len,
            shard: None,
            source,
            layout,
        })
    }

    /// This geometry sharded by block when `on` and the array allows it: a b2nd array whose
    /// blockshape divides its chunkshape on every axis, with more than one block per chunk
    /// (else it is returned as it is). The shard's data is the decoded chunk in block order
    /// (`Source::Prefix` whatever the blockshape).
    pub fn sharded(mut self, on: bool) -> Geom {
        let Layout::Nd { grid, .. } = &self.layout else {
            return self;
        };
        let (cs, bs) = (grid.chunkshape(), grid.blockshape());
        let divides = !cs.is_empty()
            && cs.len() == bs.len()
            && cs.iter().zip(bs).all(|(&c, &b)| b > 0 && c % b == 0);
        if !on || !divides {
            return self;
        }
        let count = cs.iter().zip(bs).map(|(&c, &b)| c / b).product::<u64>();
        let mut inner = bs.to_vec();
        inner.extend_from_slice(&self.chunks[bs.len()..]);
        let Some(inner_bytes) = product(&inner).and_then(|n| n.checked_mul(self.dtype.itemsize))
        else {
            return self;
        };
        // An index past an eighth of the data (blocks under 128 bytes) is not worth it, and
        // its size must not overflow (a reader allocates it whole).
        let index_ok = count
            .checked_mul(INDEX_ENTRY)
            .and_then(|i| i.checked_add(self.object_len))
            .is_some()
            && inner_bytes >= 8 * INDEX_ENTRY;
        if count < 2 || !index_ok || inner_bytes.checked_mul(count) != Some(self.object_len) {
            return self;
        }
        self.shard = Some(Shard {
            inner,
            count,
            inner_bytes,
        });
        self.source = Source::Prefix;
        self
    }

    /// Bytes of every chunk object: the data, and a shard's index after it.
    pub fn object_size(&self) -> u64 {
        self.object_len + self.shard.as_ref().map_or(0, |s| s.count * INDEX_ENTRY)
    }

    /// Bytes `[start, end)` of a shard's index (relative to the index's start; empty when the
    /// array is not sharded).
    pub fn shard_index(&self, start: u64, end: u64) -> Vec<u8> {
        let Some(s) = &self.shard else {
            return Vec::new();
        };
        let end = end.min(s.count * INDEX_ENTRY);
        let mut out = Vec::with_capacity(end.saturating_sub(start) as usize);
        let mut at = start - start % INDEX_ENTRY;
        while at < end {
            let k = at / INDEX_ENTRY;
            let mut entry = [0u8; INDEX_ENTRY as usize];
            entry[..8].copy_from_slice(&(k * s.inner_bytes).to_le_bytes());
            entry[8..].copy_from_slice(&s.inner_bytes.to_le_bytes());
            let lo = start.max(at) - at;
            let hi = end.min(at + INDEX_ENTRY) - at;
            out.extend_from_slice(&entry[lo as usize..hi as usize]);
            at += INDEX_ENTRY;
        }
        out
    }

    /// Where each inner chunk of shard object `data`, as a Zarr writer wrote it (inner chunks
    /// at any offsets, then the index), starts, in block order; `None` for an inner chunk the
    /// writer left out (it holds the fill value). The inverse of [`Geom::shard_index`].
    ///
    /// # Errors
    /// Why `data` is not a shard of this array: not sharded, too short for its index, or an
    /// entry whose inner chunk is not `inner_bytes` long or lies outside the shard's data.
    pub fn unshard(&self, data: &[u8]) -> Result<Vec<Option<usize>>, String> {
        let s = self.shard.as_ref().ok_or("the array is not sharded")?;
        // `sharded` checked that the index's size does not overflow.
        let index_len = s.count * INDEX_ENTRY;
        let data_len = (data.len() as u64).checked_sub(index_len).ok_or_else(|| {
            format!(
                "{} bytes cannot hold the shard index of {index_len} bytes",
                data.len()
            )
        })?;
        let le = |b: &[u8]| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        };
        let index = &data[data_len as usize..];
        let entries = index.chunks_exact(INDEX_ENTRY as usize).enumerate();
        entries
            .map(|(k, e)| {
                let (offset, nbytes) = (le(&e[..8]), le(&e[8..]));
                if (offset, nbytes) == (u64::MAX, u64::MAX) {
                    return Ok(None);
                }
                if nbytes != s.inner_bytes {
                    return Err(format!(
                        "inner chunk {k} has {nbytes} bytes, not {} (inner chunks are \
                         uncompressed)",
                        s.inner_bytes
                    ));
                }
                match offset.checked_add(nbytes) {
                    Some(end) if end <= data_len => Ok(Some(offset as usize)),
                    _ => Err(format!(
                        "inner chunk {k} (bytes {offset}..+{nbytes}) lies outside the \
                         shard's {data_len} bytes of data"
                    )),
                }
            })
            .collect()
    }

    /// Number of dimensions (chunk-tree levels below `c`).
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of chunks.
    pub fn nchunks(&self) -> u64 {
        self.layout.nchunks()
    }

    /// Prefixes of the first `level` key segments (how many `c/i0/.../i(level-1)` exist).
    pub fn prefixes(&self, level: usize) -> u64 {
        self.grid[..level.min(self.grid.len())]
            .iter()
            .fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// Bytes of decoded chunk `chunk` as the NPY view expects them (the padded chunk of a
    /// grid, a linear chunk's share of the data): the length a chunk whose own header does
    /// not read must have.
    pub fn chunk_len(&self, chunk: u64) -> u64 {
        self.layout.chunk_len(chunk)
    }

    /// Bytes of decoded chunk `chunk` that hold data (a prefix object: the rest is zeros).
    pub fn valid(&self, chunk: u64) -> u64 {
        match (&self.layout, &self.source) {
            (Layout::Linear { .. }, _) => self.layout.chunk_len(chunk).min(self.object_len),
            _ => self.object_len,
        }
    }

    /// The runs of object bytes `[start, start + len)` in the decoded chunk (chunk number 0
    /// in the runs stands for the object's chunk), for a `Source::Relayout` object.
    pub fn runs(&self, start: u64, len: u64) -> Option<NdRuns<'_>> {
        match &self.source {
            Source::Relayout(g) => {
                let item = self.object_len / product(g.shape()).unwrap_or(1).max(1);
                Some(g.runs(item, start, len))
            }
            Source::Prefix => None,
        }
    }
}

/// The geometry of an N-d array of numpy type `descr` (`itemsize` bytes an item): `shape`,
/// chunked by `cs` in blocks of `bs` (the unit tests' arrays, here and in the documents').
#[cfg(test)]
pub(super) fn test_nd(shape: &[u64], cs: &[u64], bs: &[u64], descr: &str, itemsize: u64) -> Geom {
    let grid = Grid::new(&shape[..cs.len()], cs, bs).unwrap();
    Geom::of(&Npy::new(
        descr.into(),
        shape.to_vec(),
        Layout::Nd { grid, itemsize },
    ))
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::test_nd as nd;
    use super::*;

    #[test]
    fn numpy_types_map_to_zarr_types() {
        let t = |s: &str| data_type(s).map(|(t, raw)| (t.json, t.endian, t.fill, t.itemsize, raw));
        assert_eq!(
            t("<f8").unwrap(),
            (json!("float64"), Some("little"), json!(0.0), 8, None)
        );
        assert_eq!(
            t("|b1").unwrap(),
            (json!("bool"), None, json!(false), 1, None)
        );
        assert_eq!(t(">i2").unwrap().1, Some("big"));
        assert_eq!(t("|u1").unwrap().1, None);
        assert_eq!(t("<c16").unwrap().2, json!([0.0, 0.0]));
        assert_eq!(
            t("<M8[25s]").unwrap().0,
            json!({"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 25}})
        );
        assert_eq!(
            t("<m8[ns]").unwrap().0,
            json!({"name": "numpy.timedelta64", "configuration": {"unit": "ns", "scale_factor": 1}})
        );
        assert_eq!(
            t("<U3").unwrap(),
            (
                json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 12}}),
                Some("little"),
                json!(""),
                12,
                None
            )
        );
        assert_eq!(t("|V8").unwrap().4, Some(8));
        assert_eq!(t("|V1").unwrap().4, None);
        for bad in [
            "|S3", "<f16", "<c32", "<M8", "<M8[xx]", "<U0", "|V0", "|O", "<i3",
        ] {
            assert!(t(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slab_blocks_are_a_prefix_and_others_a_relayout() {
        let g = nd(&[10, 7], &[4, 4], &[2, 4], "'<i4'", 4);
        assert_eq!((g.chunks.clone(), g.grid.clone()), (vec![4, 4], vec![3, 2]));
        assert_eq!(g.object_len, 64);
        assert_eq!(g.source, Source::Prefix);
        let g = nd(&[10, 7], &[4, 4], &[2, 2], "'<i4'", 4);
        assert!(matches!(g.source, Source::Relayout(_)));
        // Row 0 of the object: items (0,0),(0,1) in block 0, (0,2),(0,3) in block 1.
        let runs: Vec<_> = g.runs(0, 16).unwrap().collect();
        assert_eq!(runs.len(), 2);
        assert_eq!((runs[0].src, runs[0].len, runs[0].dst), (0, 8, 0));
        assert_eq!((runs[1].src, runs[1].len, runs[1].dst), (16, 8, 8));
        // A subarray item: trailing dims are whole in every chunk.
        let g = nd(&[5, 2], &[2], &[1], "'<f4'", 8);
        assert_eq!(
            (g.chunks.clone(), g.grid.clone(), g.object_len),
            (vec![2, 2], vec![3, 1], 16)
        );
    }

    #[test]
    fn blocks_that_tile_the_chunk_shard_it_with_an_index_at_the_end() {
        // Relayout blocks (8x16 in 16x32 chunks): sharded, the data is the chunk as stored.
        let g = nd(&[40, 70], &[16, 32], &[8, 16], "'<i4'", 4).sharded(true);
        let s = g.shard.clone().unwrap();
        assert_eq!((s.inner, s.count, s.inner_bytes), (vec![8, 16], 4, 512));
        assert_eq!(g.source, Source::Prefix);
        assert_eq!((g.object_len, g.object_size()), (2048, 2048 + 4 * 16));
        let index = g.shard_index(0, 64);
        let entries: Vec<(u64, u64)> = index
            .chunks(16)
            .map(|e| {
                let w = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
                (w(&e[..8]), w(&e[8..]))
            })
            .collect();
        assert_eq!(
            entries,
            vec![(0, 512), (512, 512), (1024, 512), (1536, 512)]
        );
        // Any window of the index is the same bytes.
        for (a, b) in [(0, 64), (3, 40), (17, 18), (60, 64), (63, 200)] {
            assert_eq!(
                g.shard_index(a, b),
                index[a as usize..(b as usize).min(64)],
                "{a}..{b}"
            );
        }
        // What a Zarr writer writes back: inner chunks in any order, some left out, spare
        // bytes; the index at the end.
        let len = 3 * 512 + 5 + 64;
        let entry = |shard: &mut Vec<u8>, k: usize, (offset, nbytes): (u64, u64)| {
            let at = len - 64 + 16 * k;
            shard[at..at + 8].copy_from_slice(&offset.to_le_bytes());
            shard[at + 8..at + 16].copy_from_slice(&nbytes.to_le_bytes());
        };
        let mut shard = vec![7u8; len];
        entry(&mut shard, 0, (1024, 512));
        entry(&mut shard, 1, (u64::MAX, u64::MAX));
        entry(&mut shard, 2, (0, 512));
        entry(&mut shard, 3, (512, 512));
        let at = g.unshard(&shard).unwrap();
        assert_eq!(at, vec![Some(1024), None, Some(0), Some(512)]);
        // Its own objects read back as themselves.
        let mut own = vec![0u8; 2048];
        own.extend_from_slice(&index);
        assert_eq!(
            g.unshard(&own).unwrap(),
            vec![Some(0), Some(512), Some(1024), Some(1536)]
        );
        // Not shards of this array: an inner chunk of another size, one past the data (or
        // overflowing), an object too short for the index.
        for bad in [(0, 511), (1030, 512), (u64::MAX - 10, 512), (u64::MAX, 512)] {
            let mut s = shard.clone();
            entry(&mut s, 0, bad);
            assert!(g.unshard(&s).is_err(), "{bad:?}");
        }
        assert!(g.unshard(&[0u8; 63]).is_err());
        assert_eq!(g.unshard(&[0xffu8; 64]).unwrap(), vec![None; 4]);
        // Off, blocks that do not divide the chunk, one block per chunk, or blocks so small
        // that the index would be over an eighth of the data: not sharded.
        assert!(
            nd(&[10, 7], &[4, 4], &[1, 1], "'<i4'", 4)
                .sharded(true)
                .shard
                .is_none()
        );
        assert!(
            nd(&[10, 7], &[4, 4], &[2, 2], "'<i4'", 4)
                .sharded(false)
                .shard
                .is_none()
        );
        assert!(
            nd(&[10, 7], &[4, 4], &[3, 4], "'<i4'", 4)
                .sharded(true)
                .shard
                .is_none()
        );
        assert!(
            nd(&[10, 7], &[4, 4], &[4, 4], "'<i4'", 4)
                .sharded(true)
                .shard
                .is_none()
        );
        // A subarray item: the inner chunk keeps the trailing axis whole.
        let g = nd(&[100, 2], &[64], &[16], "'<f4'", 8).sharded(true);
        assert_eq!(g.shard.unwrap().inner, vec![16, 2]);
        // Linear sources have no blockshape.
        let layout = Layout::Linear {
            chunk_bytes: 96,
            data_len: 240,
        };
        let g = Geom::of(&Npy::new("'<f8'".into(), vec![10, 3], layout)).unwrap();
        assert!(g.sharded(true).shard.is_none());
    }

    #[test]
    fn linear_sources_chunk_by_rows_and_raw_items_get_an_axis() {
        let layout = Layout::Linear {
            chunk_bytes: 96,
            data_len: 240,
        };
        let g = Geom::of(&Npy::new("'<f8'".into(), vec![10, 3], layout.clone())).unwrap();
        assert_eq!((g.chunks.clone(), g.grid.clone()), (vec![4, 3], vec![3, 1]));
        assert_eq!((g.valid(0), g.valid(2)), (96, 48));
        let g = Geom::of(&Npy::new("'|V8'".into(), vec![30], layout)).unwrap();
        assert_eq!(
            (g.shape.clone(), g.chunks.clone()),
            (vec![30, 8], vec![12, 8])
        );
        assert_eq!(g.dtype.json, json!("uint8"));
        let bad = Layout::Linear {
            chunk_bytes: 100,
            data_len: 240,
        };
        assert!(Geom::of(&Npy::new("'<f8'".into(), vec![30], bad)).is_err());
        assert!(
            Geom::of(&Npy::new(
                "[('a', '<i4')]".into(),
                vec![3],
                Layout::Linear {
                    chunk_bytes: 4,
                    data_len: 12
                }
            ))
            .is_err()
        );
    }
}
