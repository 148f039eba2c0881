//! Editors' scratch files in the mount root (`vim`'s swap and backup files, `sed -i`'s temp
//! file, Python's `tempfile`) and temp files in directories of the Zarr view (zarr-python's
//! `c/0/1.<hex>.partial`): kept in memory only, never stored, gone at unmount; a rename of
//! one over an `__attrs__` file of the root commits its content as the attributes, over a
//! chunk object of the Zarr view as that chunk (`zarr/write.rs`).

use std::collections::HashMap;

use super::inode::SCRATCH_BASE;
use super::layout::FileKind;
use super::{Attr, Entry, ROOT_INO, Tree, TreeError};

/// An editor's temp file in the mount root.
#[derive(Debug, Clone)]
pub(crate) struct Scratch {
    /// Its current name.
    pub(crate) name: String,
    /// The directory it is in (the root, or a directory of the Zarr view).
    pub(crate) parent: u64,
    /// Its content.
    pub(crate) data: Vec<u8>,
}

/// The scratch files of a tree, by inode.
#[derive(Debug, Default)]
pub(crate) struct ScratchFiles {
    pub(crate) files: HashMap<u64, Scratch>,
    /// Last scratch file number handed out.
    next: u64,
}

impl Tree {
    /// The inode of scratch file `name` of directory `parent`, if there is one.
    pub(crate) fn scratch_in(&self, parent: u64, name: &str) -> Option<u64> {
        let s = self.scratch.lock();
        s.files
            .iter()
            .find(|(_, f)| f.name == name && f.parent == parent)
            .map(|(&ino, _)| ino)
    }

    /// The content of scratch file `ino`.
    pub(crate) fn scratch_data(&self, ino: u64) -> Vec<u8> {
        let s = self.scratch.lock();
        s.files
            .get(&ino)
            .map(|f| f.data.clone())
            .unwrap_or_default()
    }

    /// Renames scratch file `from` to `name` in its directory, replacing scratch file
    /// `replaced` if given.
    pub(crate) fn rename_scratch(&self, from: u64, name: &str, replaced: Option<u64>) {
        let mut s = self.scratch.lock();
        if let Some(t) = replaced {
            s.files.remove(&t);
        }
        if let Some(f) = s.files.get_mut(&from) {
            f.name = name.to_owned();
        }
    }

    /// Creates the in-memory scratch file `name` in directory `parent` (the root, or one of
    /// the Zarr view) and opens it for writing.
    pub(crate) fn create_scratch(&self, parent: u64, name: &str) -> Result<(Attr, u64), TreeError> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(TreeError::InvalidArgument("name"));
        }
        if self.lookup(parent, name).is_ok() {
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: it exists"
            )));
        }
        let ino = {
            let mut s = self.scratch.lock();
            s.next += 1;
            let ino = SCRATCH_BASE + s.next;
            s.files.insert(
                ino,
                Scratch {
                    name: name.to_owned(),
                    parent,
                    data: Vec::new(),
                },
            );
            ino
        };
        let fh = self.open(ino, libc::O_WRONLY)?;
        Ok((self.getattr(ino)?, fh))
    }

    /// `chmod`/`chown` of `ino`: accepted (and ignored) for scratch files, whose editors copy
    /// the original's mode; refused for everything else.
    ///
    /// # Errors
    /// As [`Tree::refusal`].
    pub fn set_mode_owner(&self, ino: u64) -> Result<(), TreeError> {
        if self.options.writable {
            if let Ok(Entry::Scratch) = self.entry(ino) {
                return Ok(());
            }
        }
        Err(self.refusal(ino, "chmod/chown"))
    }

    /// `rename(2)`: only a scratch file of the root, to another free name of the root or over
    /// an `__attrs__` file of the root, which commits the scratch content as the attributes
    /// (refused content: EINVAL, the scratch file stays).
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotPermitted`] for any other rename; commit
    /// errors as [`Tree::flush`].
    pub fn rename(
        &self,
        parent: u64,
        name: &str,
        newparent: u64,
        newname: &str,
    ) -> Result<(), TreeError> {
        let from = self.lookup(parent, name)?.ino;
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        let dir = self.scratch.lock().files.get(&from).map(|f| f.parent);
        if let Some(dir) = dir.filter(|&d| super::zarr::is_zarr(d)) {
            return self.zarr_rename(from, dir, newparent, newname);
        }
        if !matches!(self.entry(from), Ok(Entry::Scratch)) || newparent != ROOT_INO {
            return Err(TreeError::NotPermitted(format!(
                "renaming {name:?}: only scratch files of the root can be renamed"
            )));
        }
        let target = self.lookup(ROOT_INO, newname).ok().map(|a| a.ino);
        let target_entry = target.map(|t| self.entry(t));
        match (target, target_entry) {
            (None, _) => {
                self.rename_scratch(from, newname, None);
                Ok(())
            }
            (Some(t), Some(Ok(Entry::Scratch))) => {
                self.rename_scratch(from, newname, Some(t));
                Ok(())
            }
            (Some(t), Some(Ok(Entry::File(FileKind::Attrs(..))))) => {
                self.write_target(t)?;
                let data = self
                    .scratch
                    .lock()
                    .files
                    .get(&from)
                    .map(|f| f.data.clone())
                    .unwrap_or_default();
                self.set_attrs_buffer(t, data)?;
                match self.commit(t, super::commit::Reason::Durable) {
                    Ok(()) => {
                        self.scratch.lock().files.remove(&from);
                        Ok(())
                    }
                    Err(e) => {
                        if let Some(a) = self.edits.lock().attrs.get_mut(&t) {
                            a.revert();
                        }
                        Err(e)
                    }
                }
            }
            _ => Err(TreeError::NotPermitted(format!(
                "renaming over {newname:?}: only __attrs__ can be replaced"
            ))),
        }
    }
}
