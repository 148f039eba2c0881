//! Resizes through the view (read-write mounts): zarr-python's `resize` and `append`, and
//! xarray's `to_zarr(append_dim=...)`, change an array's length by writing its whole
//! `zarr.json` anew with another `shape` (a temp file renamed over the old one), then write
//! the new chunk objects. When the new document differs from the view's only in the shape
//! (and the attributes, `attrs.rs`) of a 1-D array, the source is resized to it in one
//! commit, before the rename is answered, so the chunk objects the writer goes on to write
//! exist:
//! - **growing** appends chunks of zeros (the view's fill value) and fills the rest of the
//!   old last chunk with zeros, up to the new length;
//! - **shrinking** removes the chunks past the new end and cuts the new last one;
//! - a b2nd/caterva array's shape becomes the new length exactly (its chunks keep their
//!   padded size); a plain frame's or bcolz carray's last chunk holds just the new rows.
//!
//! Refused (EPERM, logged): arrays of more than one dimension (their chunks are laid out on
//! a grid that a new length reshuffles: the native tree cannot grow them either); the
//! columns of a bcolz ctable (they share one length, and xarray's `append_dim` resizes each
//! variable to its own length plus the new rows: the table would grow once per column);
//! another change besides the shape; a source with uncommitted writes to its chunks. A resize that
//! adds more chunks than the array has inode numbers for is EFBIG. The commit's own refusals
//! (a contiguous frame cut to no chunks) keep their errno, the source as it was.

use serde_json::{Map, Value};

use super::super::{Tree, TreeError};
use super::{DirKind, ZNode};
use crate::commit::{ChunkBytes, ChunkEdit, Zeros};
use crate::reader::ChunkId;

/// The new first dimension a rewritten `zarr.json` asks of a 1-D array, if its shape is one.
fn one_length(doc: &Map<String, Value>) -> Option<u64> {
    match doc.get("shape")? {
        Value::Array(dims) if dims.len() == 1 => dims[0].as_u64(),
        _ => None,
    }
}

impl Tree {
    /// `new`, the rewritten `zarr.json` of Zarr node `z` (`path`), differs from the view's
    /// document `shown` in its shape: resizes the array to it, in one commit.
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (EPERM) for a node that is no 1-D array, a shape that is
    /// no length, and an array with uncommitted chunk writes; [`TreeError::TooBig`] (EFBIG)
    /// for more chunks than the array has inode numbers for; commit errors (the source is
    /// then as it was).
    pub(super) fn zarr_resize(
        &self,
        z: ZNode,
        path: &str,
        shown: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> Result<(), TreeError> {
        let refuse = |why: String| {
            log::warn!("{path}: {why}: refused (EPERM), nothing changed");
            TreeError::NotPermitted(format!("{path}: {why}"))
        };
        let array = match z {
            ZNode::Json(n) => match self.zarr_dir_kind(n)? {
                DirKind::Array(a) => a,
                DirKind::Group => return Err(refuse("a group has no shape".into())),
            },
            _ => return Err(refuse("the root group has no shape".into())),
        };
        let (Some(old_len), Some(new_len)) = (one_length(shown), one_length(new)) else {
            return Err(refuse(
                "only the length of a 1-D array can change through the Zarr view (the chunks \
                 of an N-dim array lie on a grid a new shape reshuffles)"
                    .into(),
            ));
        };
        if self.mounted.table().is_some() {
            // Zarr writers resize arrays one at a time (xarray's `append_dim`: each
            // variable to its own length plus the new rows), which a table whose columns
            // share one length would turn into the rows added once per column.
            return Err(refuse(
                "a bcolz ctable's columns share one length, which Zarr writers resize one \
                 column at a time: grow the table through the native tree (a column's \
                 data/<nchunks>.bin)"
                    .into(),
            ));
        }
        let geom = self.zarr_geom(array, None).map_err(&refuse)?;
        let live = self.writable_array(array)?;
        if !live.one_d() || geom.shape.len() != 1 || geom.shard.is_some() {
            return Err(refuse(
                "only a 1-D source without trailing axes can be resized (and not in the \
                 sharded view)"
                    .into(),
            ));
        }
        if self.edits.lock().chunk_ids().any(|c| c.array == array) {
            return Err(refuse(
                "the array has uncommitted writes to its chunks (close or fsync them first)".into(),
            ));
        }
        let source = live.get();
        let padded = source.nd_meta().is_some();
        let per_chunk = geom.chunks[0];
        let item = geom.dtype.itemsize;
        let old_n = source.nchunks() as u64;
        let new_n = new_len.div_ceil(per_chunk);
        if new_n > self.inodes.capacity(array) {
            log::warn!("{path}: a resize to {new_len} items: refused (EFBIG)");
            return Err(TreeError::TooBig(format!(
                "{path}: {new_n} chunks of {per_chunk} items: this array has inode numbers for \
                 {} chunks",
                self.inodes.capacity(array)
            )));
        }
        // The bytes chunk `i` holds at length `len`: a padded chunk all of them.
        let held = |i: u64, len: u64| -> usize {
            let rows = if padded {
                per_chunk
            } else {
                len.saturating_sub(i * per_chunk).min(per_chunk)
            };
            (rows * item) as usize
        };
        // The last chunk both lengths share is rewritten when its rows change: growing, its
        // rows past the old end become zeros (a padded chunk's padding may hold anything);
        // shrinking, its rows past the new end go (zeros in a padded chunk).
        let shared = old_n.min(new_n);
        let grows_last = new_len > old_len && old_len % per_chunk != 0;
        let cuts_last = new_len < old_len && new_len % per_chunk != 0;
        let mut kept: Vec<(usize, Vec<u8>)> = Vec::new();
        if shared > 0 && (grows_last || cuts_last) {
            let last = shared - 1;
            let id = ChunkId::new(array, last as usize);
            let mut data = self.base_of(id)?;
            let rows_at = |len: u64| len.saturating_sub(last * per_chunk).min(per_chunk);
            let valid = (rows_at(old_len.min(new_len)) * item) as usize;
            data.truncate(valid);
            data.resize(held(last, new_len), 0);
            kept.push((last as usize, data));
        }
        let zeros: Vec<(usize, Zeros)> = (old_n..new_n)
            .map(|i| (i as usize, Zeros(held(i, new_len))))
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
        let mut committer = self.committer.lock();
        self.commit_chunk_edits(ino, array, &edits, Some(new_len), &mut committer)?;
        drop(committer);
        log::info!("{path}: resized from {old_len} to {new_len} items");
        Ok(())
    }
}

/// The content of a removed chunk.
static EMPTY: [u8; 0] = [];
