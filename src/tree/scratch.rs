//! Editors' scratch files (`vim`'s swap and backup files, `sed -i`'s temp file, Python's
//! `tempfile`) in the mount root and in every other directory with an `__attrs__` file (a
//! leaf's or a group's of a collection), and temp files in directories of the Zarr view
//! (zarr-python's `c/0/1.<hex>.partial`): kept in memory only, never stored, gone at unmount;
//! a rename of one over an `__attrs__` file commits its content as the attributes, over a
//! chunk object of the Zarr view as that chunk (`zarr/write.rs`).
//!
//! Issue 21: any other file created there (`cp file MNT/`) is one too. It is listed while it
//! exists (so `ls` shows what `cat` reads) and its creation is logged, in the daemon's log and
//! in `b2fs log`, as a file that will not persist. Refusing it instead would break the editors
//! that write a swap or temp file beside the file they save (`sed -i MNT/temp.b2nd/__attrs__`
//! on a directory of sources failed with EPERM before session 31).

use std::collections::HashMap;

use super::inode::SCRATCH_BASE;
use super::layout::{FileKind, NodeKind};
use super::{Attr, Entry, ROOT_INO, Tree, TreeError};

/// The most scratch files a mount holds at once (in every directory that takes them and the
/// Zarr view together):
/// editors keep one to three per file they save, zarr-python one `.partial` file per chunk it
/// is writing. Creating one more is ENOSPC: each lives in the daemon's memory, and without a
/// bound a loop of `touch MNT/$i` grew the daemon without end.
pub(crate) const MAX_SCRATCH_FILES: usize = 1024;

/// The most bytes the scratch files of a mount hold together (each also at most
/// [`super::edit::MAX_BUFFERED`], or one chunk object of its array in the Zarr view, up to
/// this same bound): a write or truncation that would grow them past it is ENOSPC. Room for
/// zarr-python writing ten chunk objects of 100 MiB at once (its default concurrency). A
/// `.partial` file is EFBIG past it even when its chunk object is larger (the object's size
/// is the source header's say, which a hostile source makes as large as it likes); such an
/// object can be written in place.
pub(crate) const MAX_SCRATCH_BYTES: usize = 1 << 30;

/// An editor's temp file (in a directory with `__attrs__`, or of the Zarr view).
#[derive(Debug, Clone)]
pub(crate) struct Scratch {
    /// Its current name.
    pub(crate) name: String,
    /// The directory it is in (one with an `__attrs__` file, or of the Zarr view).
    pub(crate) parent: u64,
    /// Its content.
    pub(crate) data: Vec<u8>,
    /// When it was created or last written.
    pub(crate) mtime: std::time::SystemTime,
}

/// The scratch files of a tree, by inode.
#[derive(Debug)]
pub(crate) struct ScratchFiles {
    pub(crate) files: HashMap<u64, Scratch>,
    /// The most files ([`MAX_SCRATCH_FILES`]; tests lower it).
    pub(crate) max_files: usize,
    /// The most bytes together ([`MAX_SCRATCH_BYTES`]; tests lower it).
    pub(crate) max_bytes: usize,
    /// Last scratch file number handed out.
    next: u64,
    /// When a scratch file was last created, renamed or removed (the mtime of the
    /// directories that take them).
    pub(crate) changed: Option<std::time::SystemTime>,
    /// Tests: what the next [`Tree::drop_hidden_scratch`] runs between its listing and its
    /// look-ups ([`Tree::on_scratch_drop`]).
    drop_hook: Option<super::TestHook>,
}

impl Default for ScratchFiles {
    fn default() -> Self {
        ScratchFiles {
            files: HashMap::new(),
            max_files: MAX_SCRATCH_FILES,
            max_bytes: MAX_SCRATCH_BYTES,
            next: 0,
            changed: None,
            drop_hook: None,
        }
    }
}

impl ScratchFiles {
    /// Notes that the root's list of scratch files changed now.
    pub(crate) fn touch(&mut self) {
        self.changed = Some(std::time::SystemTime::now());
    }

    /// Checks that scratch file `ino` may grow to `new_len` bytes while the mount's scratch
    /// files hold at most `max_bytes` together (or `limit`, the file's own bound, when that is
    /// a chunk object's, larger). Past its own `limit` the caller refuses with EFBIG instead.
    /// What is counted is the memory the buffers hold (their capacity), not their lengths:
    /// a file written to 64 MiB and truncated keeps what it allocated unless it is given
    /// back ([`ScratchFiles::fit`]).
    ///
    /// # Errors
    /// [`TreeError::NoSpace`] (logged).
    pub(crate) fn room(&self, ino: u64, new_len: usize, limit: usize) -> Result<(), TreeError> {
        if self.fits(ino, new_len, limit) {
            return Ok(());
        }
        let total = self.held();
        let cap = self.cap_for(limit);
        let name = self.files.get(&ino).map_or("?", |f| f.name.as_str());
        let why = format!(
            "growing scratch file {name:?} to {new_len} bytes: the mount's scratch files \
             hold {total} bytes, at most {cap} together (they live in memory)"
        );
        log::warn!("{why}");
        Err(TreeError::NoSpace(why))
    }

    /// Whether [`ScratchFiles::room`] lets scratch file `ino` grow to `new_len` bytes.
    pub(crate) fn fits(&self, ino: u64, new_len: usize, limit: usize) -> bool {
        let now = self.files.get(&ino).map_or(0, |f| f.data.capacity());
        new_len <= now || new_len > limit || self.held() - now + new_len <= self.cap_for(limit)
    }

    /// The bound on the memory all scratch buffers hold, for a file of bound `limit`: a file
    /// that may hold more than the usual bound on its own (a Zarr chunk object) may fill the
    /// whole of it.
    fn cap_for(&self, limit: usize) -> usize {
        if limit > super::edit::MAX_BUFFERED {
            self.max_bytes.max(limit)
        } else {
            self.max_bytes
        }
    }

    /// The memory the scratch buffers hold together.
    fn held(&self) -> usize {
        self.files.values().map(|f| f.data.capacity()).sum()
    }

    /// After a change of scratch file `ino`: gives back what its buffer holds beyond its
    /// length when the buffers together hold more than [`ScratchFiles::room`] allowed (a
    /// write's doubling reserved ahead), or when it holds more than twice its length (a
    /// truncation), so that the memory held is what `room` counts.
    pub(crate) fn fit(&mut self, ino: u64, limit: usize) {
        let over = self.held() > self.cap_for(limit);
        if let Some(f) = self.files.get_mut(&ino) {
            let len = f.data.len();
            if over || f.data.capacity() > len.saturating_mul(2) {
                f.data.shrink_to(len);
            }
        }
    }
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
        self.move_scratch(from, None, name, replaced);
    }

    /// Renames scratch file `from` to `name` in directory `parent` (`None`: its own),
    /// replacing scratch file `replaced` if given.
    fn move_scratch(&self, from: u64, parent: Option<u64>, name: &str, replaced: Option<u64>) {
        let mut s = self.scratch.lock();
        if let Some(t) = replaced {
            s.files.remove(&t);
        }
        if let Some(f) = s.files.get_mut(&from) {
            f.name = name.to_owned();
            f.parent = parent.unwrap_or(f.parent);
        }
        s.touch();
    }

    /// Whether directory `ino` of the tree (not of the Zarr view) takes editors' scratch
    /// files: the root, and every directory with an `__attrs__` file, so that an editor that
    /// saves by writing a temp file beside it and renaming that over it (`sed -i`, Python's
    /// `tempfile` + `os.replace`) works on every `__attrs__` the mount shows. Not `meta/` or
    /// `data/`, whose files are all generated.
    pub(crate) fn takes_scratch(&self, ino: u64) -> bool {
        if ino == ROOT_INO {
            return true;
        }
        let Ok(Entry::Dir(node, None)) = self.entry(ino) else {
            return false;
        };
        let Ok(children) = self.children(ino, node) else {
            return false;
        };
        children.iter().any(|&c| {
            self.node(c).is_some_and(|n| {
                n.name == "__attrs__" && matches!(n.kind, NodeKind::File(FileKind::Attrs(..)))
            })
        })
    }

    /// Creates the in-memory scratch file `name` in directory `parent` (one that
    /// [`Tree::takes_scratch`], or one of the Zarr view) and opens it for writing, for process `by` (see [`Tree::open_by`]).
    pub(crate) fn create_scratch(
        &self,
        parent: u64,
        name: &str,
        by: super::Pid,
    ) -> Result<(Attr, u64), TreeError> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(TreeError::InvalidArgument("name"));
        }
        if self.lookup(parent, name).is_ok() {
            return Err(TreeError::NotPermitted(format!(
                "creating {name:?}: it exists"
            )));
        }
        let full = {
            let s = self.scratch.lock();
            s.files.len() >= s.max_files
        };
        if full {
            self.drop_hidden_scratch(None);
        }
        let ino = {
            let mut s = self.scratch.lock();
            if s.files.len() >= s.max_files {
                let why = format!(
                    "creating {name:?}: the mount holds {} scratch files, the most it keeps \
                     in memory",
                    s.max_files
                );
                log::warn!("{why}");
                return Err(TreeError::NoSpace(why));
            }
            s.next += 1;
            let ino = SCRATCH_BASE + s.next;
            s.files.insert(
                ino,
                Scratch {
                    name: name.to_owned(),
                    parent,
                    data: Vec::new(),
                    mtime: std::time::SystemTime::now(),
                },
            );
            s.touch();
            ino
        };
        let fh = self.open_by(ino, libc::O_WRONLY, by)?;
        if !super::zarr::is_zarr(parent) {
            let why = "kept in memory only, not stored in the source, gone at unmount";
            let path = self.path_of(ino);
            log::info!("{path}: {why}");
            self.events.note("create", path, why);
        }
        Ok((self.getattr(ino)?, fh))
    }

    /// Tests: `hook` runs once, in the next search for scratch files a member's name hides
    /// (`Tree::drop_hidden_scratch`, when a creation or a write needs room, or the Zarr
    /// view made a member), after it listed the scratch files and before it looks up their
    /// names: a test renames one there, as an editor saving a file may.
    pub fn on_scratch_drop(&self, hook: Box<dyn FnOnce(&Tree) + Send>) {
        self.scratch.lock().drop_hook = Some(super::TestHook::new(hook));
    }

    /// Forgets the scratch files no name reaches any more, of directory `parent` (`None`:
    /// of every directory), but those open: each whose name a member took since (another
    /// writer's new source, an array or group made through the Zarr view, whose `zarr.json`
    /// or `c` hides a temp file created under that name before). Lookups and listings find
    /// the member, so such a file could not be removed (`unlink` reaches the member) and
    /// counted toward the mount's scratch files until unmount. Returns how many went.
    pub(crate) fn drop_hidden_scratch(&self, parent: Option<u64>) -> usize {
        let (files, hook): (Vec<(u64, u64, String)>, _) = {
            let mut s = self.scratch.lock();
            let files = s
                .files
                .iter()
                .filter(|(_, f)| parent.is_none_or(|p| f.parent == p))
                .map(|(&ino, f)| (ino, f.parent, f.name.clone()))
                .collect();
            (files, s.drop_hook.take())
        };
        if let Some(hook) = hook {
            hook.run(self);
        }
        // Looked up with no lock held (a lookup takes the scratch lock).
        let hidden: Vec<(u64, u64, String)> = files
            .into_iter()
            .filter(|(ino, dir, name)| {
                !self.handles.is_open(*ino) && self.lookup(*dir, name).is_ok_and(|a| a.ino != *ino)
            })
            .collect();
        if hidden.is_empty() {
            return 0;
        }
        // Checked again under the locks: a file renamed since its look-up (an editor's
        // `notes` -> `notes~`, then a new `notes`) is reached by its new name, and one
        // opened since (a dentry the kernel kept) is in use: both stay.
        self.handles.while_locked(|open| {
            let mut s = self.scratch.lock();
            let mut gone = 0;
            for (ino, dir, name) in &hidden {
                let same = s
                    .files
                    .get(ino)
                    .is_some_and(|f| f.parent == *dir && f.name == *name);
                if same && !open(*ino) {
                    s.files.remove(ino);
                    gone += 1;
                    log::info!("scratch file {name:?}: a member took its name: forgotten");
                }
            }
            if gone > 0 {
                s.touch();
            }
            gone
        })
    }

    /// The scratch files of directory `parent` as (inode, name), in creation order.
    pub(crate) fn scratch_entries(&self, parent: u64) -> Vec<(u64, String)> {
        let s = self.scratch.lock();
        if s.files.is_empty() {
            return Vec::new();
        }
        let mut v: Vec<(u64, String)> = s
            .files
            .iter()
            .filter(|(_, f)| f.parent == parent)
            .map(|(&ino, f)| (ino, f.name.clone()))
            .collect();
        v.sort_unstable();
        v
    }

    /// `chmod`/`chown` of `ino` to `mode` (permission and type bits as `chmod(2)` passes
    /// them), `uid`, `gid` (`None`: unchanged): accepted (and ignored) for scratch files,
    /// whose editors copy the original's mode; accepted as no change when every one given is
    /// what `ino` has already (vim's `fchmod` to the file's own mode on every save, issue
    /// 21); refused for everything else.
    ///
    /// # Errors
    /// As [`Tree::refusal`]; [`TreeError::NotFound`] for unknown inodes.
    pub fn set_mode_owner(
        &self,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> Result<(), TreeError> {
        if self.options.writable
            && let Ok(Entry::Scratch) = self.entry(ino)
        {
            return Ok(());
        }
        let now = self.getattr(ino)?;
        let same = mode.is_none_or(|m| m & 0o7777 == u32::from(now.perm))
            && uid.is_none_or(|u| u == now.uid)
            && gid.is_none_or(|g| g == now.gid);
        if same {
            return Ok(());
        }
        Err(self.refusal(ino, "chmod/chown"))
    }

    /// `rename(2)`: only a scratch file, to a free name (or another scratch file) of a
    /// directory that takes scratch files (the root, one with an `__attrs__`), or over an `__attrs__` file, which commits the
    /// scratch content as the attributes (refused content: EINVAL, the scratch file stays).
    ///
    /// `noreplace` (`RENAME_NOREPLACE`, which `mv` asks for first): an existing `newname`
    /// fails with EEXIST instead.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotPermitted`] for any other rename; commit
    /// errors as [`Tree::flush`]; [`TreeError::Exists`] (`noreplace`).
    pub fn rename(
        &self,
        parent: u64,
        name: &str,
        newparent: u64,
        newname: &str,
        noreplace: bool,
    ) -> Result<(), TreeError> {
        let from = self.lookup(parent, name)?.ino;
        let v2 = |ino| matches!(self.entry(ino), Ok(Entry::Zarr2(_)));
        if !self.options.writable || v2(parent) || v2(newparent) {
            return Err(TreeError::ReadOnly);
        }
        let dir = self.scratch.lock().files.get(&from).map(|f| f.parent);
        if let Some(dir) = dir.filter(|&d| super::zarr::is_zarr(d)) {
            return self.zarr_rename(from, dir, newparent, newname);
        }
        if !matches!(self.entry(from), Ok(Entry::Scratch)) {
            return Err(TreeError::NotPermitted(format!(
                "renaming {name:?}: only scratch files (editors' temp files) can be renamed"
            )));
        }
        if !self.takes_scratch(newparent) {
            return Err(TreeError::NotPermitted(format!(
                "renaming {name:?}: {} holds no scratch files (only directories with an \
                 __attrs__ file do)",
                self.path_of(newparent)
            )));
        }
        // A target that exists but cannot be stat'ed (an `__attrs__` whose carrier does not
        // read: EIO) is not a free name.
        let target = match self.lookup(newparent, newname) {
            Ok(a) => Some(a.ino),
            Err(TreeError::NotFound) => None,
            Err(e) => return Err(e),
        };
        if noreplace && target.is_some() {
            return Err(TreeError::Exists(newname.to_owned()));
        }
        let target_entry = target.map(|t| self.entry(t));
        match (target, target_entry) {
            (None, _) => {
                self.move_scratch(from, Some(newparent), newname, None);
                Ok(())
            }
            (Some(t), Some(Ok(Entry::Scratch))) => {
                self.move_scratch(from, Some(newparent), newname, Some(t));
                Ok(())
            }
            (Some(t), Some(Ok(Entry::File(FileKind::Attrs(..))))) => {
                let data = self
                    .scratch
                    .lock()
                    .files
                    .get(&from)
                    .map(|f| f.data.clone())
                    .unwrap_or_default();
                self.replace_attrs(t, data)?;
                let mut s = self.scratch.lock();
                s.files.remove(&from);
                s.touch();
                Ok(())
            }
            _ => Err(TreeError::NotPermitted(format!(
                "renaming over {newname:?}: only __attrs__ can be replaced"
            ))),
        }
    }
}
