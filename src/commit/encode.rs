//! A commit's chunk edits made into a container edit: each decoded chunk compressed with the
//! parameters the existing chunks use (one encoder, reused by every commit), one at a time,
//! into the commit's [`write::Spool`] (at most `spool_memory` compressed bytes in memory, the
//! rest in an unlinked file; chunks of zeros encoded from one block, once per length); updates, appends and the
//! removal of the last chunks told apart;
//! and what the spool held added to the committer's stats.

use std::path::Path;

use super::{ChunkEdit, Committer};
use crate::container::{Array, ContainerError, write};

impl Committer {
    /// The container edit `edits` of `array` stand for: updates, appends, the removal of
    /// the last chunks (empty chunks that are the last ones, each of them); `None` when
    /// nothing is to be done (created chunk files still empty).
    pub(super) fn container_edit(
        &mut self,
        array: &Array,
        edits: &[ChunkEdit<'_>],
    ) -> Result<Option<write::Edit>, ContainerError> {
        let path = array.path();
        let nchunks = array.nchunks();
        let mut edit = write::Edit {
            truncate: removed_suffix(path, nchunks, edits)?,
            ..Default::default()
        };
        let mut spool = write::Spool::new(self.spool_memory, self.spool_dir.clone());
        spool.fail_with(self.spool_fail.0, self.spool_fail.1);
        let mut params = None;
        // The last chunk of zeros encoded, by length: a resize adds up to thousands of them,
        // alike but for the last one, encoded once and copied.
        let mut zeros: Option<(usize, Vec<u8>)> = None;
        for chunk in edits {
            if chunk.data.is_empty() {
                continue;
            }
            let params = match &params {
                Some(p) => p,
                None => params.insert(write::chunk_cparams(array)?),
            };
            let chunk_error = |e| ContainerError::Chunk {
                path: path.to_path_buf(),
                index: chunk.index,
                source: e,
            };
            let bytes = if chunk.data.all_zeros() {
                let len = chunk.data.len();
                match &zeros {
                    Some((n, bytes)) if *n == len => bytes.clone(),
                    _ => {
                        let bytes =
                            crate::codec::compress_zeros(len, params).map_err(chunk_error)?;
                        zeros.insert((len, bytes)).1.clone()
                    }
                }
            } else {
                // One decoded chunk at a time (read back here when the caller keeps it in a
                // file): only the compressed chunks of the edit are held together.
                let decoded = chunk.data.bytes().map_err(|e| ContainerError::Io {
                    path: path.to_path_buf(),
                    source: std::io::Error::new(
                        e.kind(),
                        format!("reading back the edit of chunk {}: {e}", chunk.index),
                    ),
                })?;
                self.encoder
                    .compress(&decoded, params)
                    .map_err(chunk_error)?
            };
            // Kept in memory while the commit's chunks fit in the bound, else in the spool file
            // (read back one at a time when written).
            let bytes = spool.add(bytes).map_err(|e| ContainerError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    e.kind(),
                    format!(
                        "keeping the compressed chunk {} of the commit in a file in {}: {e}",
                        chunk.index,
                        self.spool_dir.display()
                    ),
                ),
            });
            let s = spool.stats();
            {
                let mut stats = self.stats.lock();
                stats.peak_bytes = stats.peak_bytes.max(s.peak);
            }
            let bytes = bytes?;
            // A created chunk file that exists by now (a ctable column grown by a commit of
            // another column while it was being written) replaces that chunk.
            if !chunk.append || chunk.index < nchunks {
                edit.updates.push((chunk.index, bytes));
            } else if chunk.index == nchunks + edit.appends.len() {
                edit.appends.push(bytes);
            } else {
                return Err(ContainerError::Refused {
                    path: path.to_path_buf(),
                    why: format!("appending chunk {}: the source has {nchunks}", chunk.index),
                });
            }
        }
        // The commit keeps the chunks it makes itself (special chunks re-encoded for a
        // variable-size frame) in the same spool; what it held is counted after the commit
        // (`Committer::account`).
        if edit.is_empty() {
            self.account(Some(&spool));
            return Ok(None);
        }
        edit.spool = Some(std::sync::Arc::new(parking_lot::Mutex::new(spool)));
        Ok(Some(edit))
    }

    /// Adds what the spool of a commit held (peak in memory, chunks and bytes spilled) to the
    /// committer's stats.
    pub(super) fn account(&self, spool: Option<&write::Spool>) {
        let Some(s) = spool.map(write::Spool::stats) else {
            return;
        };
        let mut stats = self.stats.lock();
        stats.peak_bytes = stats.peak_bytes.max(s.peak);
        stats.spilled_chunks += s.spilled_chunks;
        stats.spilled_bytes += s.spilled_bytes;
    }
}

/// Where `edits` cut `nchunks` chunks: the first of the chunks they empty (not appended),
/// which must be every chunk from there on.
fn removed_suffix(
    path: &Path,
    nchunks: usize,
    edits: &[ChunkEdit<'_>],
) -> Result<Option<usize>, ContainerError> {
    let mut removed: Vec<usize> = edits
        .iter()
        .filter(|c| c.data.is_empty() && !c.append)
        .map(|c| c.index)
        .collect();
    removed.sort_unstable();
    removed.dedup();
    let Some(&first) = removed.first() else {
        return Ok(None);
    };
    if removed.last().is_some_and(|&l| l >= nchunks)
        || nchunks.checked_sub(first) != Some(removed.len())
    {
        return Err(ContainerError::Refused {
            path: path.to_path_buf(),
            why: format!(
                "emptying {} chunks from chunk {first} of {nchunks} (only the last chunks can \
                 be removed, every one from the first removed on)",
                removed.len()
            ),
        });
    }
    Ok(Some(first))
}
