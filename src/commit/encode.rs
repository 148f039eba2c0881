//! A commit's chunk edits made into a container edit: each decoded chunk compressed with the
//! parameters the existing chunks use (one encoder, reused by every commit), one at a time,
//! into the commit's [`write::Spool`] (at most `spool_memory` compressed bytes in memory, the
//! rest in an unlinked file); updates, appends and the removal of the last chunk told apart;
//! and what the spool held added to the committer's stats.

use super::{ChunkEdit, Committer};
use crate::container::{Array, ContainerError, write};

impl Committer {
    /// The container edit `edits` of `array` stand for: updates, an append, the removal of
    /// the last chunk (an empty chunk that is the last); `None` when nothing is to be done
    /// (created chunk files still empty).
    pub(super) fn container_edit(
        &mut self,
        array: &Array,
        edits: &[ChunkEdit<'_>],
    ) -> Result<Option<write::Edit>, ContainerError> {
        let path = array.path();
        let nchunks = array.nchunks();
        let mut edit = write::Edit::default();
        let mut spool = write::Spool::new(self.spool_memory, self.spool_dir.clone());
        spool.fail_with(self.spool_fail.0, self.spool_fail.1);
        let mut params = None;
        for chunk in edits {
            if chunk.data.is_empty() {
                if chunk.append {
                    continue;
                }
                if chunk.index + 1 != nchunks {
                    return Err(ContainerError::Refused {
                        path: path.to_path_buf(),
                        why: format!(
                            "emptying chunk {} (only the last chunk can be removed)",
                            chunk.index
                        ),
                    });
                }
                edit.truncate = Some(chunk.index);
                continue;
            }
            let params = match &params {
                Some(p) => p,
                None => params.insert(write::chunk_cparams(array)?),
            };
            // One decoded chunk at a time (read back here when the caller keeps it in a file):
            // only the compressed chunks of the edit are held together.
            let decoded = chunk.data.bytes().map_err(|e| ContainerError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    e.kind(),
                    format!("reading back the edit of chunk {}: {e}", chunk.index),
                ),
            })?;
            let bytes =
                self.encoder
                    .compress(&decoded, params)
                    .map_err(|e| ContainerError::Chunk {
                        path: path.to_path_buf(),
                        index: chunk.index,
                        source: e,
                    })?;
            drop(decoded);
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
