//! What a read returns, per kind of file: a chunk file's edit buffer or the reader's bytes,
//! a generated file's content, `array.npy` assembled by [`super::npy`], a scratch file's
//! bytes; and each file's size. A file whose content cannot be made (a group's `__attrs__`
//! whose carrier does not read) is shown with size 0 and gives EIO at open and read.
//!
//! One version per descriptor: a read-only descriptor reads what it pinned at open
//! ([`Pinned`]: the array versions, the NPY view, the generated content), never another
//! descriptor's uncommitted buffer; a descriptor opened for writing reads the file's buffer
//! and the current version (its own writes, committed or not). A read that fills the
//! kernel's page cache ([`Tree::read_shared`]), which every descriptor shares, reads the
//! current version.

use std::sync::Arc;

use super::handle::Pinned;
use super::inode::Located;
use super::layout::{FileKind, Generated};
use super::zarr::ZNode;
use super::{Entry, Tree, TreeError};
use crate::reader::{ArrayId, ChunkStore, ReadData, window};

/// The content of generated file `g` now; EIO ([`TreeError::Unavailable`]) when it cannot be
/// made (a group's attributes whose carrier does not read, logged where it is rendered).
pub(super) fn generated(g: &Generated) -> Result<Arc<[u8]>, TreeError> {
    g.get()
        .map_err(|why| TreeError::Unavailable(why.to_string()))
}

impl Tree {
    /// Up to `size` bytes of file `ino` from `offset` (fewer only at the end of the file).
    ///
    /// # Errors
    /// [`TreeError::BadHandle`] when `fh` was not opened for `ino`; [`TreeError::IsADirectory`];
    /// [`TreeError::Container`] when a chunk cannot be read or decoded.
    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> Result<ReadData, TreeError> {
        self.read_as(ino, fh, offset, size, false)
    }

    /// [`Tree::read`] of bytes that go into the kernel's page cache of the file, which every
    /// descriptor of it shares (a page fault of a mapping, a read of a file the kernel
    /// caches): a read-only descriptor whose version another writer has replaced since its
    /// open reads the current one. Its version's bytes would stay cached after the follower
    /// told the kernel to drop the old pages, and every later open would read them.
    ///
    /// # Errors
    /// As [`Tree::read`].
    pub fn read_shared(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        size: u32,
    ) -> Result<ReadData, TreeError> {
        self.read_as(ino, fh, offset, size, true)
    }

    /// [`Tree::read`], or [`Tree::read_shared`] when `shared`.
    fn read_as(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        size: u32,
        shared: bool,
    ) -> Result<ReadData, TreeError> {
        let (hint, pinned, first) = self.handles.record_read(fh, ino, offset, size)?;
        let pinned = match pinned {
            Some(p) if shared => Some(self.current_for_cache(ino, p)),
            p => p,
        };
        let writer = pinned.is_none();
        let res = self.read_version(ino, offset, size, hint, pinned);
        let gone = matches!(
            &res,
            Err(TreeError::Container {
                source: crate::container::ContainerError::Changed { .. },
                ..
            })
        );
        if !(gone && first) {
            return res;
        }
        // Another writer replaced the version this descriptor opened before it read any of
        // it: nothing read yet to stay consistent with, so it reads the newest one.
        self.follow_source();
        let pinned = match writer {
            true => None,
            false => {
                let p = self.pin(ino);
                if !self.handles.repin(fh, p.clone()) {
                    return res;
                }
                log::info!(
                    "inode {ino}: its version was replaced before any read: reads the newest"
                );
                Some(p)
            }
        };
        self.read_version(ino, offset, size, hint, pinned)
    }

    /// [`Tree::read`] of the version `pinned` (`None`: a writer's view).
    fn read_version(
        &self,
        ino: u64,
        offset: u64,
        size: u32,
        hint: crate::reader::ReadHint,
        pinned: Option<Arc<Pinned>>,
    ) -> Result<ReadData, TreeError> {
        let fixed = |bytes: std::sync::Arc<[u8]>| {
            let r = window(bytes.len(), offset, size);
            ReadData::Fixed(bytes, r)
        };
        if let Some(p) = &pinned {
            if let Some(content) = &p.content {
                return Ok(fixed(content.clone()));
            }
            if let Located::Chunk(id) = self.inodes.locate(ino) {
                // The version opened, even when the chunk has gone from the current one.
                if let Some(store) = p.store(id.array) {
                    if id.index >= store.nchunks() {
                        return Ok(ReadData::Owned(Vec::new()));
                    }
                    return self
                        .reader
                        .read_in(store.as_ref(), id, offset, size, hint, || {
                            self.handles.sole_reader(ino)
                        })
                        .map_err(|source| TreeError::Container { ino, source });
                }
            }
        }
        match self.entry(ino)? {
            Entry::Dir(..) => Err(TreeError::IsADirectory(ino)),
            Entry::Zarr(z) if self.zarr_is_dir(ino, z) => Err(TreeError::IsADirectory(ino)),
            Entry::Zarr(z) => self.zarr_read(ino, z, (offset, size), hint, pinned.as_deref()),
            Entry::Zarr2(v) => self.zarr2_read(ino, v, (offset, size), hint, pinned.as_deref()),
            Entry::Scratch => {
                let s = self.scratch.lock();
                let data = s.files.get(&ino).map(|f| f.data.as_slice()).unwrap_or(&[]);
                Ok(ReadData::Owned(
                    data[window(data.len(), offset, size)].to_vec(),
                ))
            }
            Entry::Chunk(id) => {
                if self.options.writable
                    && let Some(bytes) = self.edited_window(id, offset, size)?
                {
                    return Ok(ReadData::Owned(bytes));
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
                    Ok(fixed(generated(stored)?))
                }
                FileKind::Sizes(_, content) => Ok(fixed(generated(content)?)),
                FileKind::Npy(array, _) => {
                    self.npy_read(ino, *array, offset, size, hint, pinned.as_deref())
                }
                FileKind::TableNpy(..) => {
                    self.table_npy_read(ino, offset, size, hint, pinned.as_deref())
                }
                FileKind::CTableNpy(file) => {
                    self.ctable_read(ino, file, (offset, size), hint, pinned.as_deref())
                }
            },
        }
    }

    /// EIO for a read-only open of a file whose content cannot be made, which `stat` shows
    /// with size 0: a group's `__attrs__` whose carrier does not read (and no edit buffered),
    /// the Zarr view's `zarr.json` that shows those attributes. `pinned`: what the open
    /// pinned (a `zarr.json` rendered then is not rendered again).
    pub(crate) fn check_open_for_read(&self, ino: u64, pinned: &Pinned) -> Result<(), TreeError> {
        match self.entry(ino)? {
            Entry::File(FileKind::Attrs(_, stored))
                if self.edits.lock().attrs_len(ino).is_none() =>
            {
                generated(stored).map(drop)
            }
            Entry::Zarr(z @ (ZNode::RootJson | ZNode::Json(_))) if pinned.content.is_none() => {
                self.zarr_json(z).map(drop)
            }
            Entry::Zarr2(v @ super::zarr::V2::Meta(..)) if pinned.content.is_none() => {
                self.zarr2_doc(v).map(drop)
            }
            _ => Ok(()),
        }
    }

    /// What a read-only descriptor of `ino` opened now reads (see the module doc).
    pub(crate) fn pin(&self, ino: u64) -> Arc<Pinned> {
        let mut p = Pinned::default();
        let pin_array = |p: &mut Pinned, array: ArrayId| {
            p.stores.push((array, self.reader.pinned(array)));
        };
        match self.entry(ino) {
            Ok(Entry::Chunk(id)) => pin_array(&mut p, id.array),
            Ok(Entry::Zarr(z)) => self.zarr_pin(z, &mut p),
            Ok(Entry::Zarr2(v)) => self.zarr2_pin(v, &mut p),
            Ok(Entry::File(kind)) => match kind {
                FileKind::Sizes(_, content) => p.content = generated(content).ok(),
                FileKind::Npy(array, cell) => {
                    pin_array(&mut p, *array);
                    p.npy = Some(cell.get());
                }
                FileKind::TableNpy(cell, columns) => {
                    for &a in columns {
                        pin_array(&mut p, a);
                    }
                    p.table = Some(cell.get());
                }
                FileKind::CTableNpy(file) => {
                    // A view that cannot render pins nothing: its reads fail as its stat does.
                    if let Ok(view) = self.ctable_view(ino, file) {
                        for c in &view.columns {
                            p.stores.push((c.array, c.store()));
                        }
                        p.ctable = Some(view);
                    }
                }
                FileKind::Fixed(_) | FileKind::Attrs(..) => {}
            },
            _ => {}
        }
        Arc::new(p)
    }

    /// What a read of file `ino` into the kernel's page cache reads ([`Tree::read_shared`]):
    /// the version now when anything `pinned` holds (an array's version, the NPY or table
    /// view, a generated file's content) was replaced since, else `pinned`. A file the
    /// version now does not show (a chunk gone) keeps `pinned`: its old bytes, not ENOENT.
    /// The version now is pinned once per descriptor and version ([`Pinned::current`]):
    /// `-o keep_cache` mounts read every `read(2)` this way, and a scan (`np.load`) through
    /// a fresh pin per read started its band stream over at every read (each read decoded
    /// again the band the one before ended in, and its bands ahead went unused: 163 band
    /// decodes for a scan of 64 bands).
    fn current_for_cache(&self, ino: u64, pinned: Arc<Pinned>) -> Arc<Pinned> {
        let now = self.pin(ino);
        if !replaced(&pinned, &now) {
            return pinned;
        }
        let mut current = pinned.current.lock();
        match current.as_ref() {
            Some(kept) if !replaced(kept, &now) => kept.clone(),
            _ => {
                *current = Some(now.clone());
                now
            }
        }
    }

    /// The version of `array` a read through `pinned` sees: the pinned one, else the
    /// current one.
    pub(crate) fn version_of(
        &self,
        pinned: Option<&Pinned>,
        array: ArrayId,
    ) -> Arc<dyn ChunkStore> {
        pinned
            .and_then(|p| p.store(array).cloned())
            .unwrap_or_else(|| self.reader.pinned(array))
    }

    /// The size of file `ino` (classified as `entry`) as `stat` shows it: buffered content
    /// where there is an edit, else what is stored.
    pub(crate) fn file_size(&self, ino: u64, entry: Entry<'_>) -> Result<u64, TreeError> {
        let n = match entry {
            Entry::Dir(..) => 0,
            Entry::Zarr(z) => return self.zarr_size(z),
            Entry::Zarr2(v) => return self.zarr2_size(v),
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
                // Attributes that cannot be read are listed with size 0 (`ls -l` of the group
                // works); their open and reads give EIO.
                FileKind::Attrs(_, stored) => match self.edits.lock().attrs_len(ino) {
                    Some(n) => n,
                    None => stored.get().map_or(0, |b| b.len()),
                },
                FileKind::Sizes(_, content) => generated(content)?.len(),
                FileKind::Npy(array, _) => return Ok(self.npy_size(*array)),
                FileKind::TableNpy(..) => return Ok(self.table_npy_size(ino)),
                FileKind::CTableNpy(file) => return self.ctable_size(ino, file),
            },
        };
        Ok(n as u64)
    }
}

/// Whether `now` (what a descriptor of the same file opened now pins) shows the same parts as
/// `pinned` (arrays, views, content) and any of them was replaced since `pinned` was made.
fn replaced(pinned: &Pinned, now: &Pinned) -> bool {
    fn same<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
    let shown = now.stores.len() == pinned.stores.len()
        && now.npy.is_some() == pinned.npy.is_some()
        && now.table.is_some() == pinned.table.is_some()
        && now.ctable.is_some() == pinned.ctable.is_some()
        && now.content.is_some() == pinned.content.is_some();
    let changed = pinned
        .stores
        .iter()
        .zip(&now.stores)
        .any(|((a, s), (b, t))| a != b || !Arc::ptr_eq(s, t))
        || !same(&pinned.npy, &now.npy)
        || !same(&pinned.table, &now.table)
        || !same(&pinned.ctable, &now.ctable)
        || !same(&pinned.content, &now.content);
    shown && changed
}
