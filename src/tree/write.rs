//! Write-back support of the tree: the swappable source behind a data directory
//! ([`SharedArray`]), the dirty buffers of chunk and `__attrs__` files, and the conversion of
//! a buffer into a [`crate::container::write::Edit`].
//!
//! The tree decides *when* to commit (fsync, flush, release); this module holds the state and
//! performs one commit: compress with the parameters the existing chunks use
//! ([`write::chunk_cparams`]), [`write::commit`], reopen the source with
//! [`crate::container::open`] and swap the new [`Array`] in. Readers holding the old `Arc`
//! finish with the old source (whole chunks, old or new, never a mix).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use super::store::ChunkStore;
use crate::container::{self, Array, Container, ContainerError, write};

/// One array of the mounted source, replaceable after a commit.
#[derive(Debug)]
pub struct Source {
    path: PathBuf,
    array: RwLock<Arc<Array>>,
}

impl Source {
    /// Wraps an opened array.
    pub fn new(array: Array) -> Source {
        Source {
            path: array.path().to_path_buf(),
            array: RwLock::new(Arc::new(array)),
        }
    }

    /// The array as it is now.
    pub fn get(&self) -> Arc<Array> {
        self.array.read().clone()
    }

    /// Reopens the array from disk and makes it current.
    ///
    /// # Errors
    /// When the source no longer opens as a single array.
    pub fn reload(&self) -> Result<(), ContainerError> {
        match container::open(&self.path)? {
            Container::Array(a) => {
                *self.array.write() = Arc::new(a);
                Ok(())
            }
            Container::Table(_) => Err(ContainerError::Unsupported {
                path: self.path.clone(),
                what: "reopening a column after a commit: it opened as a ctable".into(),
            }),
        }
    }

    /// Whether the array is 1-D (may gain or lose chunks): frames without an N-dim
    /// metalayer, 1-D b2nd/caterva arrays, bcolz carrays and columns.
    pub fn one_d(&self) -> bool {
        self.get().nd_meta().is_none_or(|nd| nd.shape.len() == 1)
    }
}

/// A [`ChunkStore`] over a [`Source`]: always the current array.
#[derive(Debug)]
pub struct SharedArray(pub Arc<Source>);

impl ChunkStore for SharedArray {
    fn path(&self) -> &Path {
        &self.0.path
    }

    fn nchunks(&self) -> usize {
        self.0.get().nchunks()
    }

    fn chunk_nbytes(&self, index: usize) -> Result<usize, ContainerError> {
        self.0.get().chunk_nbytes(index)
    }

    fn chunk_bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, ContainerError> {
        let a = self.0.get();
        Ok(Cow::Owned(a.chunk_bytes(index)?.into_owned()))
    }

    fn chunk_bytes_into(&self, index: usize, buf: &mut Vec<u8>) -> Result<usize, ContainerError> {
        self.0.get().chunk_bytes_into(index, buf)
    }

    fn with_mapped_chunk(
        &self,
        index: usize,
        partial: bool,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<bool, ContainerError> {
        self.0.get().with_mapped_chunk(index, partial, f)
    }

    fn chunk_read_at(
        &self,
        index: usize,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<bool, ContainerError> {
        let a = self.0.get();
        ChunkStore::chunk_read_at(a.as_ref(), index, offset, buf)
    }

    fn source_info(&self) -> super::xattr::SourceInfo {
        super::xattr::SourceInfo::of(&self.0.get())
    }
}

/// What an `__attrs__` file edits.
#[derive(Debug, Clone)]
pub enum AttrsTarget {
    /// The attributes of the array behind data set `usize`.
    Set(usize),
    /// The root attributes of the ctable at this path.
    Table(PathBuf),
}

/// The pending content of one chunk file.
#[derive(Debug, Clone)]
pub struct DirtyChunk {
    /// Data set.
    pub set: usize,
    /// Chunk index.
    pub index: usize,
    /// The whole decompressed chunk as it should become.
    pub data: Vec<u8>,
    /// A chunk being created (`data/<nchunks>.bin`), committed as an append.
    pub append: bool,
    /// Bumped by every change, so a commit only cleans what it stored.
    pub version: u64,
    /// Whether there is something to commit.
    pub dirty: bool,
    /// Emptied by an `O_TRUNC` open and not written since: a flush does not commit that
    /// (a shell's `>` closes a duplicate descriptor before the data comes; committing would
    /// remove the last chunk), fsync and the last close do.
    pub open_trunc: bool,
}

/// The content of an `__attrs__` file being edited.
#[derive(Debug, Clone)]
pub struct AttrsBuf {
    /// The bytes readers see.
    pub data: Vec<u8>,
    /// The bytes of the last stored version (restored when a commit is refused).
    pub stored: Vec<u8>,
    /// Whether they differ from what is stored.
    pub dirty: bool,
    /// Bumped by every change.
    pub version: u64,
}

/// An editor's temp file in the mount root: kept in memory only.
#[derive(Debug, Clone)]
pub struct Scratch {
    /// Its current name.
    pub name: String,
    /// Its content.
    pub data: Vec<u8>,
}

/// All pending edits, keyed by inode.
#[derive(Debug, Default)]
pub struct Pending {
    /// Chunk files with buffered content.
    pub chunks: HashMap<u64, DirtyChunk>,
    /// `__attrs__` files being edited (or edited in this mount: they keep the written bytes).
    pub attrs: HashMap<u64, AttrsBuf>,
    /// Chunk files whose buffered edit was dropped: their next open must not keep the
    /// kernel's cached pages.
    pub stale: std::collections::HashSet<u64>,
    /// Another writer changed the source during this mount (a commit found it changed):
    /// no file keeps the kernel's cached pages any more (they may hold what that writer
    /// replaced, at the same size).
    pub foreign: bool,
    /// `meta/sizes` files re-rendered after commits changed them.
    pub rendered: HashMap<u64, Vec<u8>>,
    /// Scratch files of the root.
    pub scratch: HashMap<u64, Scratch>,
    /// Last scratch file number handed out.
    pub next_scratch: u64,
}

/// Parses an `__attrs__` buffer: it must be a JSON object.
///
/// # Errors
/// A message saying why not.
pub fn parse_attrs(data: &[u8]) -> Result<serde_json::Value, String> {
    match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        Ok(_) => Err("the content is JSON but not an object".into()),
        Err(e) => Err(format!("the content is not JSON: {e}")),
    }
}

/// The edit one chunk buffer of `array` stands for: an append, the removal of the last
/// chunk (empty buffer of the last chunk), or an update; `None` for a created chunk file
/// that is still empty.
fn chunk_edit(
    source: &Source,
    array: &Array,
    chunk: &DirtyChunk,
    encoder: &mut crate::codec::encode::Encoder,
) -> Result<Option<write::Edit>, ContainerError> {
    let nchunks = array.nchunks();
    let mut edit = write::Edit::default();
    if chunk.data.is_empty() {
        if chunk.append {
            return Ok(None);
        }
        if chunk.index + 1 != nchunks {
            return Err(ContainerError::Refused {
                path: source.path.clone(),
                why: format!(
                    "emptying chunk {} (only the last chunk can be removed)",
                    chunk.index
                ),
            });
        }
        edit.truncate = Some(chunk.index);
    } else {
        let params = write::chunk_cparams(array)?;
        let bytes = encoder
            .compress(&chunk.data, &params)
            .map_err(|e| ContainerError::Chunk {
                path: source.path.clone(),
                index: chunk.index,
                source: e,
            })?;
        // A created chunk file that exists by now (a ctable column grown by a commit of
        // another column while it was being written) replaces that chunk.
        if !chunk.append || chunk.index < nchunks {
            edit.updates.push((chunk.index, bytes));
        } else {
            if chunk.index != nchunks {
                return Err(ContainerError::Refused {
                    path: source.path.clone(),
                    why: format!("appending chunk {}: the source has {nchunks}", chunk.index),
                });
            }
            edit.appends.push(bytes);
        }
    }
    Ok(Some(edit))
}

/// Commits one chunk buffer to `source`: an append, the removal of the last chunk (empty
/// buffer of the last chunk), or an update; then reloads `source`.
///
/// # Errors
/// What [`write::commit`] or the encoder report.
pub fn commit_chunk(
    source: &Source,
    chunk: &DirtyChunk,
    encoder: &mut crate::codec::encode::Encoder,
) -> Result<(), ContainerError> {
    let array = source.get();
    let Some(edit) = chunk_edit(source, &array, chunk, encoder)? else {
        return Ok(());
    };
    write::commit(&array, &edit)?;
    source.reload()
}

/// Commits one chunk buffer of `source`, a column of the ctable at `table`, with
/// [`write::commit_column`]: when it changes the column's row count, every column of the
/// table is resized with it. The caller reloads the sources of every column afterwards.
///
/// # Errors
/// [`ContainerError::Changed`] when the column changed on disk since `source` was loaded;
/// what [`write::commit_column`] or the encoder report.
pub fn commit_table_chunk(
    table: &Path,
    source: &Source,
    chunk: &DirtyChunk,
    encoder: &mut crate::codec::encode::Encoder,
) -> Result<(), ContainerError> {
    let array = source.get();
    let Some(edit) = chunk_edit(source, &array, chunk, encoder)? else {
        return Ok(());
    };
    if array.changed_on_disk()? {
        return Err(ContainerError::Changed {
            path: source.path.clone(),
            why: "meta/sizes, meta/storage or __attrs__ differ".into(),
        });
    }
    let table = match container::open(table)? {
        Container::Table(t) => t,
        Container::Array(_) => {
            return Err(ContainerError::Changed {
                path: table.to_path_buf(),
                why: "it no longer opens as a ctable".into(),
            });
        }
    };
    let column = table
        .columns
        .iter()
        .position(|(_, a)| a.path() == source.path)
        .ok_or_else(|| ContainerError::Changed {
            path: table.path.clone(),
            why: format!("{} is no longer one of its columns", source.path.display()),
        })?;
    write::commit_column(&table, column, &edit)
}
