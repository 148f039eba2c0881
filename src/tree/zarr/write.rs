//! Writing through the view (read-write mounts): zarr-python writes a whole chunk object,
//! either in place (`open(c/0/1, "wb")`) or into a temp file of the same directory renamed
//! over it (`c/0/1.<hex>.partial`); it removes the object of a chunk that became all fill
//! value. Each of these edits the same per-chunk buffer a write of `data/N.bin` or
//! `array.npy` edits, and commits as they do (one version per commit, crash-safe).
//!
//! Rules (`docs/ZARR.md`):
//! - A write covers any part of a chunk object; bytes past the array's edge (the padding
//!   of an edge chunk) are accepted and land in the chunk's own padding (b2nd) or are
//!   dropped (the short last chunk of a linear source). Past the object's size: EFBIG.
//! - `truncate`/`O_TRUNC` of a chunk object changes nothing (an object always has its size).
//! - A temp file renamed over a chunk object must have the object's size (else EINVAL, and
//!   the temp file stays); the rename commits at once.
//! - Removing a chunk object writes the fill value (zeros) into the chunk and commits: the
//!   object stays and reads as zeros, which is what Zarr means by a missing chunk.
//! - A shard (`-o zarr_shards`) is replaced whole or removed, as Zarr writers do: a temp
//!   file renamed over it is read as a shard of the array (inner chunks at any offsets,
//!   uncompressed, those left out holding the fill value; the index at the end) and
//!   becomes the chunk's blocks, committed at once; anything else renamed over it is
//!   refused (EINVAL, logged; the temp file stays). It then reads back in the view's own
//!   layout (the same values; every inner chunk present, in block order). In-place writes
//!   and truncates of a shard are EPERM.
//! - `zarr.json` files cannot be changed (EPERM, logged), but for their attributes when
//!   a temp file is renamed over them (`attrs.rs`): resize and append go through the
//!   native tree (`data/`). Writing back the bytes it
//!   holds (tools that rewrite metadata they did not change) succeeds and changes nothing,
//!   in place or through a temp file renamed over it; `O_TRUNC`, and `ftruncate` to 0 on
//!   a handle open for writing, are accepted and change nothing (the rewrite that follows
//!   must then be identical, and whole: the last writer's release of a `zarr.json` emptied
//!   and not written back in full, as `: > zarr.json` does, is EPERM and logged, the file
//!   unchanged); a `truncate` to any other size but its own is EPERM.
//! - A read-only mount refuses everything with EROFS.

use super::geom::{Geom, Source};
use super::{Tree, TreeError, ZNode};
use crate::container::ndim::Run;
use crate::reader::{ArrayId, ChunkId};
use crate::tree::commit::Reason;

/// What a write to a file of the view changes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ZarrTarget {
    /// The chunk object of this chunk: its buffer.
    Chunk(ChunkId),
    /// A `zarr.json` (`RootJson` or `Json`): nothing; only its own bytes may be written.
    Json(ZNode),
}

impl Tree {
    /// What an in-place write (or `truncate`) of Zarr file `z` changes, after checking it
    /// may be written.
    ///
    /// # Errors
    /// As [`Tree::zarr_object_target`]; [`TreeError::NotPermitted`] for a shard
    /// (`-o zarr_shards`), which is replaced whole (a temp file renamed over it) or removed.
    pub(crate) fn zarr_write_target(&self, ino: u64, z: ZNode) -> Result<ZarrTarget, TreeError> {
        let target = self.zarr_object_target(ino, z)?;
        if let ZarrTarget::Chunk(id) = target
            && self.zarr_sharded(id.array)
        {
            return Err(TreeError::NotPermitted(
                "a shard of the sharded Zarr view (-o zarr_shards) is written whole: \
                     rename a temp file over it (as zarr-python and TensorStore do), or write \
                     through data/ or array.npy"
                    .into(),
            ));
        }
        Ok(target)
    }

    /// What replacing or removing Zarr file `z` whole changes, after checking it may be
    /// written.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::IsADirectory`]; [`TreeError::NotFound`].
    fn zarr_object_target(&self, ino: u64, z: ZNode) -> Result<ZarrTarget, TreeError> {
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        match z {
            ZNode::RootJson | ZNode::Json(_) => Ok(ZarrTarget::Json(z)),
            _ => match self.zarr_chunk_of(ino) {
                Some(id) => {
                    self.writable_array(id.array)?;
                    Ok(ZarrTarget::Chunk(id))
                }
                None if self.zarr_exists(z) => Err(TreeError::IsADirectory(ino)),
                None => Err(TreeError::NotFound),
            },
        }
    }

    /// Whether array `array` is shown sharded (`-o zarr_shards`).
    pub(super) fn zarr_sharded(&self, array: ArrayId) -> bool {
        self.zarr_geom(array, None).is_ok_and(|g| g.shard.is_some())
    }

    /// Writes `data` at `offset` of Zarr file `target`: patches a chunk object's buffer;
    /// to a `zarr.json`, bytes equal to those it holds there are accepted (and change
    /// nothing).
    ///
    /// # Errors
    /// [`TreeError::TooBig`] past a chunk object's size; errors loading the chunk;
    /// [`TreeError::NotPermitted`] (EPERM, logged) for a change to a `zarr.json`.
    pub(crate) fn zarr_write(
        &self,
        ino: u64,
        target: ZarrTarget,
        offset: u64,
        data: &[u8],
    ) -> Result<(), TreeError> {
        match target {
            ZarrTarget::Chunk(id) => self.zarr_chunk_write(id, offset, data),
            ZarrTarget::Json(z) => self.zarr_json_rewrite(ino, z, offset, data),
        }
    }

    /// A write of `data` at `offset` of `zarr.json` `z` (inode `ino`): accepted when it
    /// writes the bytes the file holds there (and noted, when a writer emptied the file).
    fn zarr_json_rewrite(
        &self,
        ino: u64,
        z: ZNode,
        offset: u64,
        data: &[u8],
    ) -> Result<(), TreeError> {
        let doc = self.zarr_json(z)?;
        let same = usize::try_from(offset)
            .ok()
            .and_then(|s| doc.get(s..s.checked_add(data.len())?))
            .is_some_and(|held| held == data);
        if !same {
            return Err(zarr_json_refused());
        }
        if let Some(written) = self.zarr.rewrites.lock().get_mut(&ino) {
            add_range(written, offset..offset + data.len() as u64);
        }
        Ok(())
    }

    /// The last writer of `ino` closed: when it was a `zarr.json` emptied by a writer
    /// (`O_TRUNC`, `ftruncate` to 0), every byte must have been written back. The file never
    /// changed either way; this tells the program (and `b2fs log`) that the emptying it
    /// asked for did not happen, as `: > zarr.json` would otherwise pass in silence.
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (EPERM, logged) when part of the file was not written back.
    pub(crate) fn zarr_rewrite_finished(&self, ino: u64) -> Result<(), TreeError> {
        let Some(written) = self.zarr.rewrites.lock().remove(&ino) else {
            return Ok(());
        };
        let z = match self.entry(ino) {
            Ok(super::super::Entry::Zarr(z)) => z,
            _ => return Ok(()),
        };
        let len = self.zarr_json(z)?.len() as u64;
        match written.as_slice() {
            [whole] if whole.start == 0 && whole.end >= len => Ok(()),
            [] if len == 0 => Ok(()),
            _ => {
                log::warn!(
                    "{}: emptied (O_TRUNC or truncate to 0) and not written back whole; it \
                     is unchanged",
                    self.zarr_path_of(ino)
                );
                Err(TreeError::NotPermitted(
                    "zarr.json was emptied and not written back whole: it is unchanged \
                     (metadata cannot be changed through the Zarr view)"
                        .into(),
                ))
            }
        }
    }

    /// Writes `data` at `offset` of the chunk object of chunk `id`: patches its buffer.
    fn zarr_chunk_write(&self, id: ChunkId, offset: u64, data: &[u8]) -> Result<(), TreeError> {
        let g = self
            .zarr_geom(id.array, None)
            .map_err(|_| TreeError::NotFound)?;
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= g.object_len)
            .ok_or_else(|| {
                TreeError::TooBig(format!(
                    "a chunk object has {} bytes; writing up to byte {}",
                    g.object_len,
                    offset.saturating_add(data.len() as u64)
                ))
            })?;
        let index = id.index as u64;
        self.with_chunk_buffer(id, |buf, _| {
            match &g.source {
                Source::Prefix => {
                    let valid = g.valid(index).min(buf.len() as u64).min(end);
                    if valid > offset {
                        let (s, e) = (offset as usize, valid as usize);
                        buf[s..e].copy_from_slice(&data[..e - s]);
                    }
                }
                Source::Relayout(_) => {
                    let runs = g.runs(offset, end - offset).into_iter().flatten();
                    for Run { src, len, dst, .. } in runs {
                        let (src, len, dst) = (src as usize, len as usize, dst as usize);
                        let slot = buf.get_mut(src..src + len).ok_or_else(|| {
                            TreeError::Refused(format!(
                                "chunk {}: shorter than its chunk shape",
                                id.index
                            ))
                        })?;
                        slot.copy_from_slice(&data[dst..dst + len]);
                    }
                }
            }
            Ok(())
        })
    }

    /// `truncate` of chunk object or `zarr.json` `ino` to `size`: nothing changes (their sizes
    /// are fixed). A `zarr.json` takes its own size, and 0 while a handle has it open for
    /// writing (`O_TRUNC`, or `ftruncate` before a rewrite, which must then be identical);
    /// any other size would say the file changed when it did not, so it is refused.
    ///
    /// # Errors
    /// [`TreeError::TooBig`] past a chunk object's size; [`TreeError::NotPermitted`] for any
    /// other size of a `zarr.json`.
    pub(crate) fn zarr_set_size(
        &self,
        ino: u64,
        target: ZarrTarget,
        size: u64,
    ) -> Result<(), TreeError> {
        let id = match target {
            ZarrTarget::Chunk(id) => id,
            ZarrTarget::Json(z) => {
                let same = size == self.zarr_json(z)?.len() as u64;
                let rewrite = size == 0 && self.handles.other_writer(ino, None);
                if rewrite && !same {
                    // What is written back from here on must add up to the whole file.
                    self.zarr.rewrites.lock().insert(ino, Vec::new());
                }
                return match same || rewrite {
                    true => Ok(()),
                    false => Err(zarr_json_refused()),
                };
            }
        };
        let g = self
            .zarr_geom(id.array, None)
            .map_err(|_| TreeError::NotFound)?;
        if size > g.object_len {
            return Err(TreeError::TooBig(format!(
                "a chunk object has {} bytes, not {size}",
                g.object_len
            )));
        }
        Ok(())
    }

    /// Creates temp file `name` in Zarr directory `parent` (`z`) and opens it for writing.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotADirectory`]; [`TreeError::NotPermitted`]
    /// for a name the view shows.
    pub(crate) fn zarr_create(
        &self,
        parent: u64,
        z: ZNode,
        name: &str,
        by: crate::tree::Pid,
    ) -> Result<(super::Attr, u64), TreeError> {
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        if matches!(z, ZNode::RootJson | ZNode::Json(_)) || self.zarr_chunk_of(parent).is_some() {
            return Err(TreeError::NotADirectory(parent));
        }
        // Kept under the directory's own inode, whichever the kernel named it by.
        self.create_scratch(self.zarr_dir_ino(parent), name, by)
    }

    /// Renames temp file `from` (in Zarr directory `dir`) to `newname` of `newparent`: over a
    /// chunk object, a whole-object write committed at once.
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] across directories or over anything but a temp file or
    /// chunk object; [`TreeError::Refused`] for content of the wrong size; commit errors.
    pub(crate) fn zarr_rename(
        &self,
        from: u64,
        dir: u64,
        newparent: u64,
        newname: &str,
    ) -> Result<(), TreeError> {
        if self.zarr_dir_ino(newparent) != dir {
            return Err(TreeError::NotPermitted(
                "renaming a temp file of the Zarr view into another directory".into(),
            ));
        }
        // The first `zarr.json` in a directory made for a new array makes the array (or
        // group); one landing after it rewrites that member's, below.
        if let Some(ZNode::Pending(k)) = ZNode::of(dir)
            && newname == "zarr.json"
            && self.zarr_pending(k) == Some(ZNode::Pending(k))
            && self.zarr_create_from(from, dir, k, false)?
        {
            return Ok(());
        }
        let target = self.lookup(newparent, newname).ok().map(|a| a.ino);
        let Some(t) = target else {
            self.rename_scratch(from, newname, None);
            return Ok(());
        };
        if matches!(self.entry(t), Ok(super::super::Entry::Scratch)) {
            self.rename_scratch(from, newname, Some(t));
            return Ok(());
        }
        let z = ZNode::of(t).ok_or_else(|| {
            TreeError::NotPermitted(format!("renaming over {newname:?}: not a chunk object"))
        })?;
        let data = self.scratch_data(from);
        let id = match self.zarr_object_target(t, z)? {
            ZarrTarget::Chunk(id) => id,
            // The same bytes renamed over a `zarr.json`: nothing changes, the temp file goes.
            ZarrTarget::Json(z) if *self.zarr_json(z)? == *data => {
                self.scratch.lock().files.remove(&from);
                return Ok(());
            }
            // Other bytes: an attribute edit, or refused (`attrs.rs`).
            ZarrTarget::Json(z) => {
                self.zarr_json_replace(t, z, &data)?;
                self.scratch.lock().files.remove(&from);
                return Ok(());
            }
        };
        let g = self
            .zarr_geom(id.array, None)
            .map_err(|_| TreeError::NotFound)?;
        // A refusal (or a failed load) changed nothing: another handle's pending edit of
        // the chunk stays. A failed commit drops the chunk's edits, as any failed commit.
        match g.shard.is_some() {
            true => self.zarr_shard_replace(t, id, &g, &data)?,
            false => self.zarr_object_replace(t, z, id, &data)?,
        }
        match self.commit(t, Reason::Durable) {
            Ok(()) => {
                self.scratch.lock().files.remove(&from);
                Ok(())
            }
            Err(e) => {
                self.drop_pending(t);
                Err(e)
            }
        }
    }

    /// Puts `data`, the whole new content of chunk object `t` (`z`, chunk `id`), into the
    /// chunk's buffer.
    ///
    /// # Errors
    /// [`TreeError::Refused`] for content of the wrong size; errors loading the chunk.
    fn zarr_object_replace(
        &self,
        t: u64,
        z: ZNode,
        id: ChunkId,
        data: &[u8],
    ) -> Result<(), TreeError> {
        let want = self.zarr_size(z)?;
        // An array made through the view: its writer's codecs (`create.rs`).
        let data = &*self.zarr_declared_decode(id.array, want, data, t)?;
        if data.len() as u64 != want {
            log::warn!(
                "{}: a temp file of {} bytes renamed over a chunk object of {want}: refused",
                self.path_of(t),
                data.len()
            );
            return Err(TreeError::Refused(format!(
                "a chunk object is replaced only by {want} bytes, not {}",
                data.len()
            )));
        }
        self.zarr_chunk_write(id, 0, data)
    }

    /// Puts shard `data`, as a Zarr writer wrote it (inner chunks at any offsets, those it
    /// left out holding the fill value, then the index), into the buffer of chunk `id`
    /// (shard object `t`, geometry `g`): inner chunk `k` is block `k` of the chunk.
    ///
    /// # Errors
    /// [`TreeError::Refused`] (logged) for data that is not a shard of this array; errors
    /// loading the chunk.
    fn zarr_shard_replace(
        &self,
        t: u64,
        id: ChunkId,
        g: &Geom,
        data: &[u8],
    ) -> Result<(), TreeError> {
        let starts = g.unshard(data).map_err(|why| {
            log::warn!(
                "{}: a temp file of {} bytes renamed over a shard is not a shard of this \
                 array ({why}): refused",
                self.path_of(t),
                data.len()
            );
            TreeError::Refused(format!("not a shard of this array: {why}"))
        })?;
        let inner = g.shard.as_ref().map_or(0, |s| s.inner_bytes) as usize;
        self.with_chunk_buffer(id, |buf, _| {
            let short =
                || TreeError::Refused(format!("chunk {}: shorter than its chunk shape", id.index));
            for (k, start) in starts.iter().enumerate() {
                let slot = buf.get_mut(k * inner..(k + 1) * inner).ok_or_else(short)?;
                match start {
                    Some(s) => slot.copy_from_slice(&data[*s..*s + inner]),
                    None => slot.fill(0),
                }
            }
            Ok(())
        })
    }

    /// Removes chunk object `ino` (`z`): the chunk becomes the fill value (zeros), committed
    /// at once; a resize refused right after takes it back ([`Tree::zarr_remove`], `undo.rs`).
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] for anything but a chunk object; commit errors.
    pub(crate) fn zarr_unlink(&self, ino: u64, z: ZNode) -> Result<(), TreeError> {
        let target = self
            .zarr_object_target(ino, z)
            .and_then(|target| match target {
                ZarrTarget::Chunk(id) => Ok(id),
                ZarrTarget::Json(_) => Err(zarr_json_refused()),
            });
        let id = match target {
            Err(TreeError::IsADirectory(_)) => {
                return Err(TreeError::NotPermitted(
                    "removing a directory of the Zarr view".into(),
                ));
            }
            other => other?,
        };
        self.zarr_remove(ino, id)
    }
}

/// Adds `new` to the sorted, disjoint `ranges`, merging what touches or overlaps it.
fn add_range(ranges: &mut Vec<std::ops::Range<u64>>, new: std::ops::Range<u64>) {
    if new.is_empty() {
        return;
    }
    let mut merged = new;
    ranges.retain(|r| {
        let touches = r.start <= merged.end && merged.start <= r.end;
        if touches {
            merged = merged.start.min(r.start)..merged.end.max(r.end);
        }
        !touches
    });
    let at = ranges.partition_point(|r| r.start < merged.start);
    ranges.insert(at, merged);
}

/// The refusal of a change to a `zarr.json` file (logged).
pub(super) fn zarr_json_refused() -> TreeError {
    log::warn!(
        "zarr.json: metadata changes through the Zarr view are refused (EPERM), but for \
         attributes and the length of a 1-D array written as Zarr writers do (a temp file \
         renamed over zarr.json); other shapes change through the native tree"
    );
    TreeError::NotPermitted(
        "zarr.json cannot be changed but for its attributes and a 1-D array's length, by a \
         temp file renamed over it"
            .into(),
    )
}
