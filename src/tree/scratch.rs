//! Editors' scratch files in the mount root (`vim`'s swap and backup files, `sed -i`'s temp
//! file, Python's `tempfile`): kept in memory only, never stored, gone at unmount; a rename of
//! one over an `__attrs__` file of the root commits its content as the attributes.

use std::collections::HashMap;

use super::inode::SCRATCH_BASE;
use super::layout::FileKind;
use super::{Attr, Entry, ROOT_INO, Tree, TreeError};

/// An editor's temp file in the mount root.
#[derive(Debug, Clone)]
pub(crate) struct Scratch {
    /// Its current name.
    pub(crate) name: String,
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
    /// The inode of scratch file `name` of the root, if there is one.
    pub(crate) fn scratch_ino(&self, name: &str) -> Option<u64> {
        let s = self.scratch.lock();
        s.files
            .iter()
            .find(|(_, f)| f.name == name)
            .map(|(&ino, _)| ino)
    }

    /// Creates the in-memory scratch file `name` in the root and opens it for writing.
    pub(crate) fn create_scratch(
        &self,
        name: &str,
        by: super::Pid,
    ) -> Result<(Attr, u64), TreeError> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(TreeError::InvalidArgument("name"));
        }
        if self.lookup(ROOT_INO, name).is_ok() {
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
                    data: Vec::new(),
                },
            );
            ino
        };
        let fh = self.open_by(ino, libc::O_WRONLY, by)?;
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
        if !matches!(self.entry(from), Ok(Entry::Scratch)) || newparent != ROOT_INO {
            return Err(TreeError::NotPermitted(format!(
                "renaming {name:?}: only scratch files of the root can be renamed"
            )));
        }
        let target = self.lookup(ROOT_INO, newname).ok().map(|a| a.ino);
        let target_entry = target.map(|t| self.entry(t));
        match (target, target_entry) {
            (None, _) => {
                if let Some(f) = self.scratch.lock().files.get_mut(&from) {
                    f.name = newname.to_owned();
                }
                Ok(())
            }
            (Some(t), Some(Ok(Entry::Scratch))) => {
                let mut s = self.scratch.lock();
                s.files.remove(&t);
                if let Some(f) = s.files.get_mut(&from) {
                    f.name = newname.to_owned();
                }
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
                        self.edits.lock().attrs.remove(&t);
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
