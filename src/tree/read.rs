//! What a read returns, per kind of file: a chunk file's edit buffer or the reader's bytes,
//! a generated file's current content, `array.npy` assembled by [`super::npy`], a scratch
//! file's bytes; and each file's size.

use super::layout::FileKind;
use super::{Entry, Tree, TreeError};
use crate::reader::{ReadData, window};

impl Tree {
    /// Up to `size` bytes of file `ino` from `offset` (fewer only at the end of the file).
    ///
    /// # Errors
    /// [`TreeError::BadHandle`] when `fh` was not opened for `ino`; [`TreeError::IsADirectory`];
    /// [`TreeError::Container`] when a chunk cannot be read or decoded.
    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> Result<ReadData, TreeError> {
        let hint = self.handles.record_read(fh, ino, offset, size)?;
        let fixed = |bytes: std::sync::Arc<[u8]>| {
            let r = window(bytes.len(), offset, size);
            ReadData::Fixed(bytes, r)
        };
        match self.entry(ino)? {
            Entry::Dir(..) => Err(TreeError::IsADirectory(ino)),
            Entry::Scratch => {
                let s = self.scratch.lock();
                let data = s.files.get(&ino).map(|f| f.data.as_slice()).unwrap_or(&[]);
                Ok(ReadData::Owned(
                    data[window(data.len(), offset, size)].to_vec(),
                ))
            }
            Entry::Chunk(id) => {
                if self.options.writable {
                    if let Some(bytes) = self.edits.lock().chunk_window(id, offset, size) {
                        return Ok(ReadData::Owned(bytes));
                    }
                }
                self.reader
                    .read(id, offset, size, hint, || self.handles.sole_reader(ino))
                    .map_err(|source| TreeError::Container { ino, source })
            }
            Entry::File(kind) => match kind {
                FileKind::Fixed(bytes) => Ok(fixed(bytes.clone())),
                FileKind::Attrs(_, stored) => {
                    if let Some(bytes) = self.edits.lock().attrs_window(ino, offset, size) {
                        return Ok(ReadData::Owned(bytes));
                    }
                    Ok(fixed(stored.get()))
                }
                FileKind::Sizes(_, content) => Ok(fixed(content.get())),
                FileKind::Npy(array, _) => self.npy_read(ino, *array, offset, size, hint),
                FileKind::TableNpy(..) => self.table_npy_read(ino, offset, size, hint),
            },
        }
    }

    /// The size of file `ino` (classified as `entry`) as `stat` shows it: buffered content
    /// where there is an edit, else what is stored.
    pub(crate) fn file_size(&self, ino: u64, entry: Entry<'_>) -> Result<u64, TreeError> {
        let n = match entry {
            Entry::Dir(..) => 0,
            Entry::Scratch => self
                .scratch
                .lock()
                .files
                .get(&ino)
                .map_or(0, |f| f.data.len()),
            Entry::Chunk(id) => match self.edits.lock().chunk_len(id) {
                Some(n) => n,
                None => self
                    .reader
                    .chunk_nbytes(id)
                    .map_err(|source| TreeError::Container { ino, source })?,
            },
            Entry::File(kind) => match kind {
                FileKind::Fixed(bytes) => bytes.len(),
                FileKind::Attrs(_, stored) => match self.edits.lock().attrs_len(ino) {
                    Some(n) => n,
                    None => stored.get().len(),
                },
                FileKind::Sizes(_, content) => content.get().len(),
                FileKind::Npy(array, _) => return Ok(self.npy_size(*array)),
                FileKind::TableNpy(..) => return Ok(self.table_npy_size(ino)),
            },
        };
        Ok(n as u64)
    }
}
