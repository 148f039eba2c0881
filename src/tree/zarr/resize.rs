//! Resizes through the view (read-write mounts): zarr-python's `resize` and `append`, and
//! xarray's `to_zarr(append_dim=...)`, change an array's first dimension by writing its
//! whole `zarr.json` anew with another `shape` (a temp file renamed over the old one), then
//! write the new chunk objects. When the new document differs from the view's only in the
//! first dimension of the shape (and in the attributes, `attrs.rs`), the source is resized to
//! it in one commit before the rename is answered, so the chunk objects the writer goes on to
//! write exist:
//! - **growing** appends chunks of zeros (the view's fill value), encoded from one block of
//!   zeros, and zeroes what the old last chunks hold past the old end;
//! - **shrinking** removes the chunks past the new end and zeroes (a b2nd) or cuts (a plain
//!   frame, a bcolz carray) what the new last chunks hold past it;
//! - a b2nd array's shape becomes the new first dimension exactly (its chunks keep their
//!   padded size). An N-dim b2nd grows and shrinks by whole rows of its chunk grid (the chunks
//!   of a row along the first axis are the last ones in C order), which is how xarray appends
//!   along a leading `time` dimension.
//!
//! Refused (EPERM, logged, nothing changed): a change of any other dimension; arrays that
//! are not b2nd but have more than one dimension in the view (raw items, subarray dtypes);
//! the bytes of a frame with no dtype (shown while their count is no multiple of its
//! typesize) resized to a multiple of it (the view would show its items instead);
//! the sharded view; the columns of a bcolz ctable and of a python-blosc2 CTable (they share
//! one length, and xarray's `append_dim` resizes one variable at a time, each to its own
//! length plus the new rows: the table would grow once per column, or its columns part); a
//! source with uncommitted writes to its chunks. EFBIG: more than [`MAX_NEW_CHUNKS`] new
//! chunks in one resize (grow in steps), or more chunks than the view can number. ESTALE:
//! the array's geometry (taken again under the committer, with which reloads are serialised)
//! is no longer the one of the document the writer read, which the new shape was made from
//! (another writer changed the array meanwhile: resizing from the old length would zero or
//! cut the rows it appended).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::super::layout::FileKind;
use super::super::{Entry, Tree, TreeError, view};
use super::{DirKind, ZNode};
use crate::commit::{ChunkBytes, ChunkEdit, Zeros};
use crate::container::ContainerError;
use crate::reader::{ChunkId, ChunkReader};

/// The most chunks one resize adds: each is encoded and written in the commit (a bcolz
/// chunk is a file of its own), which holds the mount's committer meanwhile.
pub const MAX_NEW_CHUNKS: u64 = 4096;

/// The shape a `zarr.json` document gives, if it is a list of lengths.
pub(super) fn shape_of(doc: &Map<String, Value>) -> Option<Vec<u64>> {
    match doc.get("shape")? {
        Value::Array(dims) => dims.iter().map(Value::as_u64).collect(),
        _ => None,
    }
}

/// How a decoded chunk lays out its items along the first axis, for zeroing the items at
/// and past a first-axis index.
#[derive(Debug, Clone, Copy)]
enum Rows {
    /// Items in C order of the chunk's own rows (plain frames, bcolz): bytes per row.
    Linear { row: usize },
    /// A b2nd chunk: blocks of `b0` rows in C order of the block grid, `per_block_row`
    /// blocks per row of blocks, each `block` bytes, holding rows of `row` bytes.
    Blocks {
        b0: usize,
        per_block_row: usize,
        block: usize,
        row: usize,
    },
}

impl Rows {
    /// Zeroes the items of `data` at chunk-local first-axis index `from` and past it.
    fn zero_from(self, data: &mut [u8], from: usize) {
        match self {
            Rows::Linear { row } => {
                let at = from.saturating_mul(row).min(data.len());
                data[at..].fill(0);
            }
            Rows::Blocks {
                b0,
                per_block_row,
                block,
                row,
            } => {
                for (i, blk) in data.chunks_mut(block.max(1)).enumerate() {
                    let first = (i / per_block_row.max(1)) * b0;
                    let skip = from.saturating_sub(first).min(b0);
                    let at = skip.saturating_mul(row).min(blk.len());
                    blk[at..].fill(0);
                }
            }
        }
    }
}

/// The new content of a kept chunk whose items past a first-axis index become zeros (or go,
/// for a linear chunk cut shorter): decoded when the commit asks for it, one at a time.
#[derive(Debug)]
struct Rezeroed<'a> {
    reader: &'a ChunkReader,
    id: ChunkId,
    rows: Rows,
    /// Chunk-local first-axis index from which items become zeros.
    from: usize,
    /// The chunk's new length in bytes.
    len: usize,
}

impl ChunkBytes for Rezeroed<'_> {
    fn len(&self) -> usize {
        self.len
    }
    fn bytes(&self) -> std::io::Result<Cow<'_, [u8]>> {
        let decoded = self.reader.chunk(self.id).map_err(|e| match e {
            ContainerError::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        })?;
        let mut data = decoded.as_slice().to_vec();
        data.resize(self.len, 0);
        self.rows.zero_from(&mut data, self.from);
        Ok(Cow::Owned(data))
    }
}

/// The members of an array's `zarr.json` its geometry makes: a resize checks them again under
/// the committer.
const GEOMETRY: &[&str] = &["shape", "data_type", "chunk_grid", "fill_value", "codecs"];

/// The content of a removed chunk.
static EMPTY: [u8; 0] = [];

impl Tree {
    /// `new`, the rewritten `zarr.json` of Zarr node `z` (`path`), differs from the view's
    /// document `shown` in its shape: resizes the array's first dimension to it, in one
    /// commit. `attrs`: new attributes and the `__attrs__` file (inode) that holds them,
    /// committed in the same commit (a crash leaves the old shape and attributes or the new).
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (EPERM) for the refusals of the module doc;
    /// [`TreeError::TooBig`] (EFBIG) past [`MAX_NEW_CHUNKS`] or the chunks the view can
    /// number; [`TreeError::Refused`] (EINVAL) for attributes their commit would refuse;
    /// [`TreeError::Commit`] with ESTALE when the array's geometry changed since `shown` was
    /// read; commit errors (the source is then as it was).
    pub(super) fn zarr_resize(
        &self,
        z: ZNode,
        path: &str,
        shown: &Map<String, Value>,
        new: &Map<String, Value>,
        attrs: Option<(u64, &Value)>,
    ) -> Result<(), TreeError> {
        let refuse = |why: String| {
            log::warn!("{path}: {why}: refused (EPERM), nothing changed");
            TreeError::NotPermitted(format!("{path}: {why}"))
        };
        let too_big = |why: String| {
            log::warn!("{path}: {why}: refused (EFBIG), nothing changed");
            TreeError::TooBig(format!("{path}: {why}"))
        };
        let (n, array) = match z {
            ZNode::Json(n) => match self.zarr_dir_kind(n)? {
                DirKind::Array(a) => (n, a),
                DirKind::Group => return Err(refuse("a group has no shape".into())),
            },
            _ => return Err(refuse("the root group has no shape".into())),
        };
        let (Some(old), Some(want)) = (shape_of(shown), shape_of(new)) else {
            return Err(refuse("the new shape is not a list of lengths".into()));
        };
        if old.len() != want.len() || old.is_empty() || old[1..] != want[1..] {
            // Named in full only when short (a hostile document may hold a million lengths).
            let shape = |s: &[u64]| match s.len() {
                0..=16 => format!("{s:?}"),
                n => format!("of {n} dimensions"),
            };
            return Err(refuse(format!(
                "a shape {} for {}: only the first dimension can change through the Zarr view",
                shape(&want),
                shape(&old)
            )));
        }
        let (old_len, new_len) = (old[0], want[0]);
        if new_len > i64::MAX as u64 {
            return Err(too_big(format!("a first dimension of {new_len}")));
        }
        self.resizable(n).map_err(refuse)?;
        let live = self.writable_array(array)?;
        let hook = self.zarr.resize_hook.lock().take();
        if let Some(hook) = hook {
            hook.run(self);
        }
        // Serialised with every other commit (and every reload) from here on: the geometry,
        // what is decoded below and the chunk count are what the commit changes.
        let mut committer = self.committer.lock();
        let geom = self.zarr_geom(array, None).map_err(&refuse)?;
        if geom.shard.is_some() {
            return Err(refuse(
                "the sharded view (-o zarr_shards) shows no resizable arrays".into(),
            ));
        }
        // `shown` was read before: another writer (a commit of this mount, another process
        // the mount followed) may have changed the array since, and the writer's new shape
        // was made from what it read (an append: the old length and the new rows).
        let now = super::meta::array(&geom, &Value::Null, &[]);
        let changed: Vec<&str> = GEOMETRY
            .iter()
            .copied()
            .filter(|k| {
                !shown
                    .get(*k)
                    .is_some_and(|v| super::attrs::same_json(v, &now[*k]))
            })
            .collect();
        if !changed.is_empty() {
            let why = format!(
                "the array's {} changed since the view's zarr.json was read (another writer): \
                 read it again",
                changed.join(", ")
            );
            log::warn!("{path}: {why}: refused (ESTALE), nothing changed");
            return Err(TreeError::Commit {
                ino: self.inodes.chunk_ino(ChunkId::new(array, 0)),
                source: ContainerError::Changed {
                    path: live.path().to_path_buf(),
                    why,
                },
            });
        }
        if self.edits.lock().chunk_ids().any(|c| c.array == array) {
            return Err(refuse(
                "the array has uncommitted writes to its chunks (close or fsync them first)".into(),
            ));
        }
        let source = live.get();
        if let Some((carrier, attrs)) = attrs {
            // Refused now, before anything is encoded, with the words of an attributes edit.
            crate::container::write::check_attrs(&source, attrs).map_err(|e| {
                log::warn!("{path}: the new attributes: {e}: refused (EINVAL), nothing changed");
                TreeError::Refused(format!("{path}: the new attributes: {e}"))
            })?;
            if self
                .edits
                .lock()
                .attrs
                .get(&carrier)
                .is_some_and(|a| a.dirty)
            {
                return Err(refuse(
                    "its __attrs__ has uncommitted writes (close or fsync them first)".into(),
                ));
            }
        }
        let item = geom.dtype.itemsize as usize;
        let c0 = geom.chunks[0];
        let (rows, chunk_len, per_row): (Rows, Option<usize>, u64) = match source.nd_meta() {
            Some(nd) if nd.chunkshape.contains(&0) || nd.blockshape.contains(&0) => {
                // python-blosc2 makes an empty array (`blosc2.zeros((0,))`) with chunks
                // `(0,)`, and its own `resize` refuses it: there is no chunk to grow by.
                return Err(refuse(format!(
                    "its chunk shape {:?} (block shape {:?}) has a zero length: it has no \
                     chunk to grow by (python-blosc2 refuses to resize it too; make the array \
                     with chunks)",
                    nd.chunkshape, nd.blockshape
                )));
            }
            Some(nd) if nd.shape.len() == geom.shape.len() => {
                // The b2nd chunk and block grid (`container::ndim::Grid`): padded chunks of
                // blocks in C order.
                let grid = source
                    .grid()
                    .ok_or_else(|| refuse("its b2nd grid is not valid".into()))?;
                let blocks = grid.block_grid();
                let nblocks: u64 = blocks.iter().product();
                let block_items = grid.items_per_chunk() / nblocks.max(1);
                let b0 = grid.ext_chunkshape()[0] / blocks[0].max(1);
                let rows = Rows::Blocks {
                    b0: b0 as usize,
                    per_block_row: blocks[1..].iter().product::<u64>() as usize,
                    block: (block_items as usize).saturating_mul(item),
                    row: ((block_items / b0.max(1)) as usize).saturating_mul(item),
                };
                let chunk_len = (grid.items_per_chunk() as usize).saturating_mul(item);
                let per_row = grid
                    .chunks_per_row()
                    .ok_or_else(|| refuse("its chunk grid's rows overflow".into()))?;
                (rows, Some(chunk_len), per_row)
            }
            Some(_) => {
                return Err(refuse(
                    "its view has more axes than the array (a subarray dtype)".into(),
                ));
            }
            None if source.chunksize() == 0 => {
                // python-blosc2's `SChunk(chunksize=0)`: chunks may vary in size, and the view
                // shows such a frame only while it has one chunk; a resize would give it more.
                return Err(refuse(
                    "its frame has no fixed chunk size (chunksize 0: its chunks may vary), so \
                     it has no chunk grid to grow or shrink along"
                        .into(),
                ));
            }
            None if geom.shape.len() == 1 && live.one_d() => (Rows::Linear { row: item }, None, 1),
            None => {
                return Err(refuse(
                    "only b2nd arrays resize with more than one dimension in the view (this \
                     source's items have a trailing axis there)"
                        .into(),
                ));
            }
        };
        // A frame that records no dtype shows its bytes (`|u1`) while their count is no
        // multiple of its typesize, and its `typesize`-byte items (with a trailing axis)
        // once it is: a resize to such a length would show another shape than the asked.
        let typesize = source.typesize() as u64;
        if matches!(rows, Rows::Linear { .. })
            && item as u64 != typesize
            && typesize > 1
            && new_len % typesize == 0
        {
            return Err(refuse(format!(
                "its view shows the bytes of a frame with no dtype ({old_len}, not a multiple \
                 of its typesize {typesize}); at {new_len} bytes it would show {} items of \
                 {typesize} bytes with a trailing axis instead of the shape asked",
                new_len / typesize
            )));
        }
        let old_n = source.nchunks() as u64;
        let old_rows = old_len.div_ceil(c0);
        let new_rows = new_len.div_ceil(c0);
        let new_n = new_rows.saturating_mul(per_row);
        if old_rows.saturating_mul(per_row) != old_n {
            return Err(refuse(format!(
                "its {old_n} chunks are not {old_rows} rows of {per_row}"
            )));
        }
        if new_n.saturating_sub(old_n) > MAX_NEW_CHUNKS {
            return Err(too_big(format!(
                "{} new chunks: one resize adds at most {MAX_NEW_CHUNKS} (grow in steps)",
                new_n - old_n
            )));
        }
        let most = self.inodes.capacity(array).min(super::ino::MAX_INDEX);
        if new_n > most {
            return Err(too_big(format!(
                "{new_n} chunks: this array has inode numbers for {most}"
            )));
        }
        // A chunk row's new length in bytes (a b2nd chunk keeps its padded size).
        let len_at = |r: u64| -> usize {
            chunk_len.unwrap_or_else(|| {
                (new_len.saturating_sub(r * c0).min(c0) as usize).saturating_mul(item)
            })
        };
        // The last row both lengths share is rewritten when its items change: growing,
        // those past the old end become zeros (a b2nd's padding may hold anything);
        // shrinking, those past the new end go.
        let shared = old_rows.min(new_rows);
        let grows_last = new_len > old_len && old_len % c0 != 0;
        let cuts_last = new_len < old_len && new_len % c0 != 0;
        let mut kept: Vec<(usize, Rezeroed<'_>)> = Vec::new();
        if shared > 0 && (grows_last || cuts_last) {
            let last = shared - 1;
            let from = (old_len.min(new_len) - last * c0) as usize;
            for j in 0..per_row {
                let index = (last * per_row + j) as usize;
                let data = Rezeroed {
                    reader: &self.reader,
                    id: ChunkId::new(array, index),
                    rows,
                    from,
                    len: len_at(last),
                };
                kept.push((index, data));
            }
        }
        let zeros: Vec<(usize, Zeros)> = (old_n..new_n)
            .map(|i| (i as usize, Zeros(len_at(i / per_row))))
            .collect();
        let mut edits: Vec<ChunkEdit<'_>> = Vec::new();
        edits.extend(kept.iter().map(|(i, d)| ChunkEdit {
            index: *i,
            data: d as &dyn ChunkBytes,
            append: false,
        }));
        edits.extend(zeros.iter().map(|(i, d)| ChunkEdit {
            index: *i,
            data: d as &dyn ChunkBytes,
            append: true,
        }));
        edits.extend((new_n..old_n).map(|i| ChunkEdit {
            index: i as usize,
            data: &EMPTY,
            append: false,
        }));
        let ino = self.inodes.chunk_ino(ChunkId::new(array, 0));
        let new_attrs = attrs.map(|(_, a)| a.clone());
        self.commit_chunk_edits(
            ino,
            array,
            &edits,
            Some((new_len, new_attrs)),
            &mut committer,
        )?;
        {
            // A write buffered meanwhile (its base decoded before the resize) would put the
            // old items back: marked before the committer goes, so no commit of it runs in
            // between: its commit fails as after another writer's change.
            let mut pending = self.edits.lock();
            if pending.chunk_ids().any(|c| c.array == array) {
                pending.mark_stale();
            }
        }
        drop(committer);
        if let Some((carrier, attrs)) = attrs {
            // The file shows what was written, as after a write of it.
            if let Ok(Entry::File(FileKind::Attrs(_, stored))) = self.entry(carrier) {
                stored.set(view::json_file(attrs));
            }
            // A clean buffer of the file (read, not written) would go on showing the old
            // text: it goes, as after a commit of the file itself (`Tree::commit_attrs`).
            let mut edits = self.edits.lock();
            if edits.attrs.get(&carrier).is_some_and(|a| !a.dirty) {
                edits.attrs.remove(&carrier);
            }
            drop(edits);
            self.zarr_changed();
        }
        log::info!(
            "{path}: first dimension resized from {old_len} to {new_len}{}",
            if attrs.is_some() {
                ", with its new attributes"
            } else {
                ""
            }
        );
        Ok(())
    }

    /// Why the array of native directory `n` cannot be resized through the view, whatever
    /// its shape: a column of a table (a mounted bcolz ctable, a python-blosc2 CTable in a
    /// store, as the tree recognised it for its `table.npy`).
    fn resizable(&self, n: u64) -> Result<(), String> {
        if self.mounted.table().is_some() {
            return Err(
                "a bcolz ctable's columns share one length, which Zarr writers resize one \
                 column at a time: grow the table through the native tree (a column's \
                 data/<nchunks>.bin)"
                    .into(),
            );
        }
        if self.in_ctable(n) {
            return Err(
                "it belongs to a python-blosc2 CTable, whose columns and row mask share one \
                 length: resize the table with python-blosc2"
                    .into(),
            );
        }
        Ok(())
    }
}
