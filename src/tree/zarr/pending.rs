//! The directories `mkdir` makes in the Zarr view for new arrays and groups (read-write
//! mounts of a local directory of sources or `.b2d` store; `create.rs` makes what their
//! `zarr.json` describes), and what this module owns:
//! - **Pending directories.** `mkdir NAME` in a group that can take a new array makes an
//!   empty directory held in memory ([`ZNode::Pending`]): listed, looked up, removable with
//!   `rmdir`, holding only temp files and the pending directories made in it (in a directory
//!   of sources: zarr-python's `create_array("a/b/c")` makes `a`, `a/b` and `a/b/c` before any
//!   `zarr.json`).
//! - **One directory, one inode.** Once its array or group is made, the pending directory's
//!   inode stands for that member's directory for as long as the mount lives: lookups of the
//!   name answer with it ([`Tree::zarr_named`]), never with the member's own number, so the
//!   kernel never sees one directory under two inodes. (It did before session 32: a lookup
//!   after the member was made answered with the member's inode, and a pending directory
//!   made in it, still held by the kernel under the old inode's entry, was then found under
//!   a new parent entry; the kernel must move a directory's entry for that, and under load
//!   it cannot take the locks and answers ESTALE: zarr-python's concurrent `zarr.json`
//!   writes of `create_array("n/b/c")` failed.) The member's name answers with it from the
//!   moment its source is written (`making`), before the mount shows the member. Its temp
//!   files stay keyed by that one inode ([`Tree::zarr_dir_ino`]), and the directories made
//!   in it keep it as their parent: nothing moves when the member is made.
//! - **Parents made first.** A `zarr.json` landing in a pending directory whose parent is
//!   pending too makes the parents first, as groups without attributes (what zarr-python
//!   writes for them, concurrently with the leaf's), outermost first; the parent's own
//!   `zarr.json` landing later is then a rewrite of that group's (no change, or refused). A
//!   directory `mkdir` makes in a pending directory while that one is made (zarr-python's
//!   `mkdir -p` racing its parent's `zarr.json`) is checked and recorded under one lock, so
//!   it lands in the group that was made.
//! - **Another writer's member of that name** wins: the pending directory is listed and looked
//!   up once, as it (a group takes the pending directory's place; anything else ends it).
//! - **`link(2)`** of a temp file to `zarr.json` in a pending directory (zarr-python writes
//!   the `zarr.json` of parent groups with `link` + `unlink`, "set if not exists") makes the
//!   member as a rename would, the temp file staying until its `unlink`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::super::{Attr, Tree, TreeError};
use super::create::{Creating, refused};
use super::{DirKind, ZNode, names};
use crate::container::store::Form;

/// A directory made by `mkdir` in the view, before and after its array exists.
#[derive(Debug)]
pub(super) struct PendingDir {
    /// The native directory of its group (of the group its pending parent is in, until that
    /// one is made).
    pub(super) group: u64,
    /// The Zarr inode of its parent directory as the kernel knows it ([`Tree::zarr_dir_ino`]:
    /// a pending parent's own, made or not). Fixed for its life.
    pub(super) parent: u64,
    pub(super) name: String,
    /// The pending directory it was made in, while that one is not made.
    pub(super) up: Option<u64>,
    /// The native directory of the array or group made in it.
    pub(super) made: Option<u64>,
    /// Its member's source is being written: the name stands for this directory even when
    /// the mount shows the member before it is adopted ([`Tree::zarr_named`]).
    pub(super) making: bool,
}

/// Most directories made by `mkdir` held at once with no array in them.
const MAX_PENDING: usize = 4096;

/// The pending directories of a parent inode, by name.
pub(super) type Named = HashMap<u64, HashMap<String, u64>>;

impl Creating {
    /// Pending directory `k` named `d.name` in `d.parent`, indexed.
    fn insert(&mut self, k: u64, d: PendingDir) {
        let names = self.named.entry(d.parent).or_default();
        names.insert(d.name.clone(), k);
        self.dirs.insert(k, d);
    }

    /// The pending directory named `name` in parent inode `parent`, made or not.
    fn named(&self, parent: u64, name: &str) -> Option<(u64, &PendingDir)> {
        let k = *self.named.get(&parent)?.get(name)?;
        self.dirs.get(&k).map(|d| (k, d))
    }

    /// Pending directory `k` gone (rmdir, a creation that failed, another writer's member).
    pub(super) fn remove(&mut self, k: u64) -> Option<PendingDir> {
        let d = self.dirs.remove(&k)?;
        if let Some(names) = self.named.get_mut(&d.parent) {
            if names.get(&d.name) == Some(&k) {
                names.remove(&d.name);
            }
            if names.is_empty() {
                self.named.remove(&d.parent);
            }
        }
        if let Some(m) = d.made
            && self.alias.get(&m) == Some(&k)
        {
            self.alias.remove(&m);
        }
        Some(d)
    }

    /// Pending directory `k` stands for native directory `m` from now on: the directories
    /// made in it belong to that group (their parent inode stays `k`'s).
    fn made(&mut self, k: u64, m: u64) {
        let Some(d) = self.dirs.get_mut(&k) else {
            return;
        };
        (d.made, d.making) = (Some(m), false);
        self.alias.insert(m, k);
        for d in self.dirs.values_mut().filter(|d| d.up == Some(k)) {
            (d.up, d.group) = (None, m);
        }
    }
}

impl Tree {
    /// Tests: `hook` runs once, in the next `mkdir` through the view, after it looked at its
    /// parent and before it records the new directory: a test makes that parent there, as a
    /// concurrent `zarr.json` of zarr-python may.
    pub fn on_zarr_mkdir(&self, hook: Box<dyn FnOnce(&Tree) + Send>) {
        self.zarr.creating.lock().mkdir_hook = Some(super::super::TestHook::new(hook));
    }

    /// `mkdir(2)` of `name` in `parent`: in the Zarr view of a read-write mount of a local
    /// directory of sources or `.b2d` store, a pending directory for a new array or group (in
    /// a directory of sources also in a pending directory: see the module doc).
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::Exists`]; [`TreeError::NotPermitted`] (logged)
    /// anywhere else.
    pub fn mkdir(&self, parent: u64, name: &str) -> Result<Attr, TreeError> {
        if name.len() > super::super::NAME_MAX {
            return Err(TreeError::NameTooLong);
        }
        // A pending parent made between the look at it and the record: looked at again, as
        // the group it is now (made stays made, so once more is enough; two more at most).
        for _ in 0..3 {
            if let Some(attr) = self.zarr_mkdir_once(parent, name)? {
                return Ok(attr);
            }
        }
        Err(TreeError::NotFound)
    }

    /// [`Tree::mkdir`]: `None` when the pending directory `parent` stands for was made
    /// meanwhile (nothing recorded).
    fn zarr_mkdir_once(&self, parent: u64, name: &str) -> Result<Option<Attr>, TreeError> {
        let z = match self.entry(parent)? {
            super::super::Entry::Zarr(z) => z,
            _ => return Err(self.refusal(parent, "mkdir")),
        };
        if !self.options.writable {
            return Err(TreeError::ReadOnly);
        }
        if self.lookup(parent, name).is_ok() {
            return Err(TreeError::Exists(name.to_owned()));
        }
        let path = format!("{}/{name}", self.zarr_path_of(parent));
        let (group, up) = match z {
            ZNode::Pending(k) => (self.zarr_nested_group(k, &path)?, Some(k)),
            _ => (self.zarr_new_array_group(z, &path)?, None),
        };
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(TreeError::InvalidArgument("name"));
        }
        let temp = crate::container::leftover::commit_temp_target(std::ffi::OsStr::new(name));
        let temp = temp.map(|_| "the name of a b2fs commit's temp file (mounts hide those)");
        if let Some(why) = names::refused(name).or(temp) {
            return Err(refused(&path, why));
        }
        // Kept by the inode the kernel knows the parent by (one for a directory made through
        // the view, before and after its member is made).
        let parent = self.zarr_dir_ino(parent);
        let hook = self.zarr.creating.lock().mkdir_hook.take();
        if let Some(hook) = hook {
            hook.run(self);
        }
        self.zarr.pending_seen.store(true, Ordering::Release);
        let ino = {
            let mut c = self.zarr.creating.lock();
            // Checked with the record, under one lock: a pending parent made since, the name
            // taken by another `mkdir` since.
            if let Some(u) = up
                && c.dirs.get(&u).is_none_or(|d| d.made.is_some())
            {
                return Ok(None);
            }
            if c.named(parent, name).is_some_and(|(_, d)| d.made.is_none()) {
                return Err(TreeError::Exists(name.to_owned()));
            }
            if c.dirs.values().filter(|d| d.made.is_none()).count() >= MAX_PENDING {
                log::warn!("{path}: {MAX_PENDING} empty directories made already: refused");
                return Err(TreeError::NoSpace(format!(
                    "{MAX_PENDING} empty directories made through the Zarr view are held \
                     already"
                )));
            }
            c.next += 1;
            let k = c.next;
            let ino = ZNode::Pending(k).ino().ok_or(TreeError::NoSpace(
                "no inode numbers left for new directories".into(),
            ))?;
            let d = PendingDir {
                group,
                parent,
                name: name.to_owned(),
                up,
                made: None,
                making: false,
            };
            c.insert(k, d);
            ino
        };
        log::info!("{path}: a new directory, held in memory until its zarr.json lands");
        Ok(Some(self.dir_attr(ino, 2)))
    }

    /// `rmdir(2)` of `name` in `parent`: only a pending directory of the view that holds
    /// nothing (no array made in it, no temp file, no pending directory).
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::NotFound`]; [`TreeError::NotPermitted`] for
    /// any other directory; [`TreeError::NotEmpty`] for one holding a temp file or a
    /// pending directory.
    pub fn rmdir(&self, parent: u64, name: &str) -> Result<(), TreeError> {
        let ino = self.lookup(parent, name)?.ino;
        if !self.options.writable || super::V2::of(ino).is_some() {
            return Err(TreeError::ReadOnly);
        }
        let pending = match ZNode::of(ino) {
            Some(ZNode::Pending(k)) => Some(k),
            _ => None,
        };
        let mut c = self.zarr.creating.lock();
        let k = pending
            .filter(|k| c.dirs.get(k).is_some_and(|d| d.made.is_none() && !d.making))
            .ok_or_else(|| {
                TreeError::NotPermitted("removing a directory of the Zarr view".into())
            })?;
        let holds_dir = c.dirs.values().any(|d| d.up == Some(k));
        if holds_dir || self.scratch.lock().files.values().any(|f| f.parent == ino) {
            return Err(TreeError::NotEmpty);
        }
        c.remove(k);
        Ok(())
    }

    /// `link(2)` of `ino` as `newname` in `newparent`: only a temp file of the Zarr view
    /// linked to `zarr.json` in its pending directory (zarr-python's "set if not exists" of a
    /// parent group's `zarr.json`: `link`, then `unlink` of the temp file), which makes the
    /// member as a rename would; the temp file stays until its `unlink`.
    ///
    /// # Errors
    /// [`TreeError::ReadOnly`]; [`TreeError::Exists`] when `newname` exists (or was made
    /// meanwhile); as a rename to `zarr.json`; [`TreeError::NotPermitted`] for any other
    /// link.
    pub fn link(&self, ino: u64, newparent: u64, newname: &str) -> Result<Attr, TreeError> {
        // The v2 view is read-only on every mount (as every other change under it).
        if !self.options.writable || super::V2::of(newparent).is_some() {
            return Err(TreeError::ReadOnly);
        }
        // As the kernel checks before it asks: a name that exists is EEXIST.
        if self.lookup(newparent, newname).is_ok() {
            return Err(TreeError::Exists(newname.to_owned()));
        }
        let dir = self.scratch.lock().files.get(&ino).map(|f| f.parent);
        let pending = match dir.map(ZNode::of) {
            Some(Some(ZNode::Pending(k))) if newname == "zarr.json" => Some(k),
            _ => None,
        };
        let (Some(dir), Some(k)) = (dir, pending) else {
            return Err(self.refusal(ino, "link"));
        };
        if self.zarr_dir_ino(newparent) != dir {
            return Err(self.refusal(ino, "link"));
        }
        if !self.zarr_create_from(ino, dir, k, true)? {
            return Err(TreeError::Exists(newname.to_owned()));
        }
        self.lookup(newparent, newname)
    }

    /// The native group of pending directory `k`'s group, where a directory made in `k` will
    /// be (once `k` is made as a group): only in a directory of sources (a `.b2d` store takes
    /// no new group).
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (logged) elsewhere; [`TreeError::NotFound`] for a pending
    /// directory gone or made.
    fn zarr_nested_group(&self, k: u64, path: &str) -> Result<u64, TreeError> {
        if self.zarr_mounted_form() != Some(Form::Frames) {
            return Err(refused(
                path,
                "a directory in a new directory of a .b2d store (it takes no new group)",
            ));
        }
        let c = self.zarr.creating.lock();
        let d = c.dirs.get(&k).filter(|d| d.made.is_none());
        d.map(|d| d.group).ok_or(TreeError::NotFound)
    }

    /// The pending directories above `k` not made yet, innermost first.
    fn zarr_pending_up(&self, k: u64) -> Vec<u64> {
        let c = self.zarr.creating.lock();
        let mut v = Vec::new();
        let mut at = c.dirs.get(&k).and_then(|d| d.up);
        while let Some(u) = at {
            // Each points to one made before it: no cycle, but bounded all the same.
            if v.len() > c.dirs.len() {
                break;
            }
            v.push(u);
            at = c.dirs.get(&u).and_then(|d| d.up);
        }
        v
    }

    /// Before the `zarr.json` of pending directory `k` (path `path`, for messages) is made:
    /// its pending parents, outermost first, made as groups without attributes (what
    /// zarr-python writes for them, maybe after the leaf's). They stay when what follows
    /// fails: each is a directory its writer's `mkdir` asked for.
    ///
    /// # Errors
    /// As [`Tree::zarr_make_group`]; [`TreeError::NotPermitted`] (logged) when a parent made
    /// is not shown.
    pub(super) fn zarr_make_parents(&self, k: u64, path: &str) -> Result<(), TreeError> {
        for up in self.zarr_pending_up(k).into_iter().rev() {
            let (group, name) = {
                let c = self.zarr.creating.lock();
                match c.dirs.get(&up) {
                    Some(d) if d.made.is_none() => (d.group, d.name.clone()),
                    _ => continue,
                }
            };
            let dir = ZNode::Pending(up).ino().ok_or(TreeError::NotFound)?;
            if !self.zarr_make_group(up, dir, (group, &name), path)? {
                return Err(refused(
                    path,
                    "a parent directory was made but is not shown",
                ));
            }
            log::info!(
                "{}: made as a group (no attributes), its zarr.json not landed yet, for {path}",
                self.zarr_path_of(dir)
            );
        }
        Ok(())
    }

    /// Pending directory `k`: the Zarr node it stands for now (`Dir(n)` once its array is
    /// made), or `None` when it is gone.
    pub(crate) fn zarr_pending(&self, k: u64) -> Option<ZNode> {
        let made = self.zarr.creating.lock().dirs.get(&k).map(|d| d.made)?;
        Some(made.map_or(ZNode::Pending(k), ZNode::Dir))
    }

    /// The inode the kernel knows Zarr directory `ino` by, under which the view keeps its temp
    /// files and the pending directories made in it: its own, but for the directory of a
    /// member made through the view, its pending directory's (module doc: one directory, one
    /// inode).
    pub(crate) fn zarr_dir_ino(&self, ino: u64) -> u64 {
        match ZNode::of(ino) {
            Some(ZNode::Dir(n)) if self.zarr.pending_seen.load(Ordering::Acquire) => {
                let c = self.zarr.creating.lock();
                c.alias
                    .get(&n)
                    .and_then(|&k| ZNode::Pending(k).ino())
                    .unwrap_or(ino)
            }
            _ => ino,
        }
    }

    /// The inode the kernel is given for Zarr node `z` (a listing's entry, a `..`): as
    /// [`Tree::zarr_dir_ino`].
    pub(super) fn zarr_shown_ino(&self, z: ZNode) -> Option<u64> {
        z.ino().map(|ino| self.zarr_dir_ino(ino))
    }

    /// Pending directory `k`'s member is being written (`on`), or no longer (`!on`: it
    /// failed): see [`PendingDir::making`].
    pub(super) fn zarr_making(&self, k: u64, on: bool) {
        let mut c = self.zarr.creating.lock();
        if let Some(d) = c.dirs.get_mut(&k).filter(|d| d.made.is_none()) {
            d.making = on;
        }
    }

    /// What `name` of Zarr group directory `parent` (the kernel's inode) stands for, the
    /// view's own member being `found`: the pending directory made by that name while it is
    /// pending, and once its member is made (that member found: one inode, module doc); an
    /// unmade pending directory whose name another writer's member took is settled first
    /// (a group takes its place, anything else ends it: [`Tree::zarr_pending_in`]).
    /// `found` when no pending directory has the name. Checks nothing on a mount where no
    /// `mkdir` was ever made.
    pub(super) fn zarr_named(
        &self,
        parent: u64,
        name: &str,
        found: Option<ZNode>,
    ) -> Option<ZNode> {
        if !self.zarr.pending_seen.load(Ordering::Acquire) {
            return found;
        }
        let parent = self.zarr_dir_ino(parent);
        let (k, made, making) = {
            let c = self.zarr.creating.lock();
            match c.named(parent, name) {
                Some((k, d)) => (k, d.made, d.making),
                None => return found,
            }
        };
        match (made, found) {
            (Some(m), Some(ZNode::Dir(f))) if f == m => Some(ZNode::Pending(k)),
            // Its member went (another writer): what the name holds now.
            (Some(_), found) => found,
            (None, None) => Some(ZNode::Pending(k)),
            // Its own member, written and shown before the view adopted it.
            (None, Some(_)) if making => Some(ZNode::Pending(k)),
            (None, Some(member)) => {
                self.zarr_pending_shadowed(k, member);
                match self.zarr_pending(k) {
                    Some(z) if z == member => Some(ZNode::Pending(k)),
                    _ => Some(member),
                }
            }
        }
    }

    /// The pending directories (no array made yet) of Zarr directory `parent` whose names
    /// none of its members `listed` takes. One whose name another writer's member took since
    /// its `mkdir` is listed once, as that member: a group takes its place (its temp files
    /// and pending directories are the group's), anything else ends it (its temp files go; a
    /// handle of it gets ENOENT).
    pub(super) fn zarr_pending_in(
        &self,
        parent: u64,
        listed: &[(String, ZNode)],
    ) -> Vec<(String, ZNode)> {
        let mut v: Vec<(String, ZNode)> = Vec::new();
        if !self.zarr.pending_seen.load(Ordering::Acquire) {
            return v;
        }
        let parent = self.zarr_dir_ino(parent);
        let mut shadowed = Vec::new();
        {
            let c = self.zarr.creating.lock();
            let Some(names) = c.named.get(&parent) else {
                return v;
            };
            for (name, &k) in names {
                let Some(d) = c.dirs.get(&k).filter(|d| d.made.is_none()) else {
                    continue;
                };
                match listed.iter().find(|(n, _)| n == name) {
                    None => v.push((name.clone(), ZNode::Pending(k))),
                    // Its own member, written and shown before the view adopted it.
                    Some(_) if d.making => {}
                    Some(&(_, member)) => shadowed.push((k, member)),
                }
            }
        }
        for (k, member) in shadowed {
            self.zarr_pending_shadowed(k, member);
        }
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Pending directory `k` whose name another writer's `member` took: a group takes its
    /// place, anything else ends it (see [`Tree::zarr_pending_in`]).
    fn zarr_pending_shadowed(&self, k: u64, member: ZNode) {
        let path = self.zarr_pending_path(k);
        let group = match member {
            ZNode::Dir(n) => matches!(self.zarr_dir_kind(n), Ok(DirKind::Group)).then_some(n),
            _ => None,
        };
        let Some(pending) = ZNode::Pending(k).ino() else {
            return;
        };
        // The pending directories it ends: itself and every one made below it.
        let mut gone = vec![pending];
        {
            let mut c = self.zarr.creating.lock();
            match (group, c.dirs.get(&k)) {
                (_, Some(d)) if d.made.is_some() || d.making => return,
                (Some(n), Some(_)) => c.made(k, n),
                (None, Some(_)) => {
                    let mut ended = vec![k];
                    while let Some(e) = ended.pop() {
                        c.remove(e);
                        let below = c.dirs.iter().filter(|(_, d)| d.up == Some(e));
                        let below: Vec<u64> = below.map(|(&b, _)| b).collect();
                        gone.extend(below.iter().filter_map(|&b| ZNode::Pending(b).ino()));
                        ended.extend(below);
                    }
                }
                (_, None) => return,
            }
        }
        let mut s = self.scratch.lock();
        match group.and_then(|n| ZNode::Dir(n).ino()) {
            Some(own) => {
                // Temp files begun through the group's own inode, had the kernel been given
                // it before: the pending directory's, which the kernel knows it by now.
                for f in s.files.values_mut().filter(|f| f.parent == own) {
                    f.parent = pending;
                }
                log::info!("{path}: another writer made a group of that name: it stands for it");
            }
            None => {
                s.files.retain(|_, f| !gone.contains(&f.parent));
                log::warn!(
                    "{path}: another writer made a member of that name: the directory made \
                     for a new array is gone (its temp files and directories with it)"
                );
            }
        }
    }

    /// The view's path of pending directory `k` (for messages).
    pub(super) fn zarr_pending_path(&self, k: u64) -> String {
        let (parent, name) = {
            let c = self.zarr.creating.lock();
            match c.dirs.get(&k) {
                Some(d) => (d.parent, d.name.clone()),
                None => return format!("/{}/?", self.zarr_name()),
            }
        };
        format!("{}/{name}", self.zarr_path_of(parent))
    }

    /// The parent (a Zarr inode, as the kernel knows it) of pending directory `k`.
    pub(super) fn zarr_pending_parent(&self, k: u64) -> u64 {
        let c = self.zarr.creating.lock();
        c.dirs.get(&k).map_or(self.zarr_root_ino(), |d| d.parent)
    }

    /// The member of native group `group` the view names `name` (after the mount followed
    /// the source), set as what pending directory `k` stands for.
    pub(super) fn zarr_adopt(&self, k: u64, group: u64, name: &str) -> Option<u64> {
        let made = self
            .node(group)
            .and_then(|node| self.zarr_native(group, node).ok())
            .and_then(|children| {
                children
                    .into_iter()
                    .find(|&c| self.zarr_member(c, Some(name)).is_some())
            })?;
        // Its temp files and the directories made in it stay where they are: under its inode,
        // which stands for the member now.
        self.zarr.creating.lock().made(k, made);
        Some(made)
    }
}
