//! The handlers of the FUSE operations ([`fuser::Filesystem`] for [`FuseAdapter`]): each
//! converts its arguments, calls the tree, and replies (the page-fault path of `read` also
//! hands the pages near the fault to the pusher, [`super::push`]); with the few helpers
//! they share (the xattr size protocol, refusals, what counts as a page fault).

use std::ffi::OsStr;

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use super::{CachePolicy, FuseAdapter, convert, failed, push, reply_empty};
use crate::tree::{Tree, TreeError};

impl Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Larger kernel readahead keeps a sequential `cat` of a chunk file in few requests.
        let _ = config.set_max_readahead(1 << 20);
        // O_TRUNC arrives with the open instead of as a separate truncate: the tree then
        // knows a shell's `> file` from a `truncate` (it must not remove the last chunk when
        // the shell closes its duplicate descriptor before writing).
        if config
            .add_capabilities(fuser::InitFlags::FUSE_ATOMIC_O_TRUNC)
            .is_err()
        {
            log::warn!("the kernel has no atomic O_TRUNC: `> chunk` of a last chunk may remove it");
        }
        if self.policy != CachePolicy::KeepCache {
            let mmap = config
                .add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
                .is_ok();
            self.policy = match (self.policy, mmap) {
                (CachePolicy::Auto, false) => {
                    log::info!(
                        "kernel cannot mmap direct-I/O files: reading through the page cache"
                    );
                    CachePolicy::KeepCache
                }
                (_, false) => {
                    log::warn!("direct_io: this kernel cannot mmap direct-I/O files (ENODEV)");
                    CachePolicy::DirectIo
                }
                (_, true) => CachePolicy::DirectIo,
            };
        }
        if let Some(pt) = &self.passthrough {
            // Backing files are memory files (tmpfs, not stacked): depth 1.
            let ok = config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(1).is_ok();
            match ok {
                true => log::info!("passthrough: data files are served from backing files"),
                false => pt.refuse("the kernel does not offer FUSE_PASSTHROUGH (Linux 6.9+)"),
            }
        }
        log::debug!("file content policy: {:?}", self.policy);
        let _ = self.decided.set(self.policy);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        match self.tree.lookup(parent.0, name) {
            Ok(attr) => reply.entry(
                &self.ttl_of(attr.ino),
                &convert::file_attr(&attr),
                Generation(0),
            ),
            Err(e) => reply.error(failed(&self.tree, "lookup", parent, &e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.tree.getattr(ino.0) {
            Ok(attr) => reply.attr(&self.ttl_of(ino.0), &convert::file_attr(&attr)),
            Err(e) => reply.error(failed(&self.tree, "getattr", ino, &e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        // Only a handle opened for writing keeps its opener (its FLUSH commits only for that
        // process): spare read-only opens the /proc read that finds the thread group.
        let read_only = flags.0 & libc::O_ACCMODE == libc::O_RDONLY && flags.0 & libc::O_TRUNC == 0;
        let by = match read_only {
            true => crate::tree::Pid(req.pid()),
            false => convert::caller(req.pid()),
        };
        match self.tree.open_by(ino.0, flags.0, by) {
            Ok(fh) => {
                let mut fopen = convert::fopen_flags(self.policy, self.tree.keep_cache(ino.0));
                // A read-only handle has nothing to commit on close: spare the close(2) of
                // every chunk file a scan opens its synchronous FLUSH round trip.
                if flags.0 & libc::O_ACCMODE == libc::O_RDONLY {
                    fopen |= FopenFlags::FOPEN_NOFLUSH;
                }
                let Some(pt) = self.passthrough.as_ref().filter(|_| read_only) else {
                    return reply.opened(FileHandle(fh), fopen);
                };
                // Never waits for a fill: a file not filled yet is opened the ordinary way.
                // Neither KEEP_CACHE (the kernel refuses it) nor DIRECT_IO (reads would reach
                // b2fs again) with passthrough; nothing to flush.
                match pt.open(&self.tree, ino.0, fh, &reply) {
                    Some(id) => {
                        reply.opened_passthrough(FileHandle(fh), FopenFlags::FOPEN_NOFLUSH, &id)
                    }
                    None => reply.opened(FileHandle(fh), fopen),
                }
            }
            Err(e) => reply.error(failed(&self.tree, "open", ino, &e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let fault = is_page_fault(self.policy, lock_owner, size);
        let (mut outran, mut walking, mut since) = (false, false, 0);
        // Until its offer: a fault announced to the pusher is forgotten if the read fails or
        // panics (its pages would be kept out of every later offer).
        let mut announced = None;
        if fault {
            // A reader that outran the stores of the rows below an earlier fault (stored after
            // its answer, see `push`) faults on a row still queued: the rows below it are
            // queued already, and asking for more would decode blocks below the window.
            if let Some(pusher) = self.pusher.get() {
                since = pusher.epoch();
                let reading = offset..offset + u64::from(size);
                outran = pusher.reading(ino.0, reading.clone());
                announced = Some(push::Announced::new(pusher, ino.0, reading));
            }
            // The blocks of the pages offered after the fault decode on the other core
            // while this thread decodes the fault's own; a reader walking down a column has
            // the blocks of its next faults asked for too.
            if !outran {
                walking = self.tree.fault_ahead(ino.0, offset, size);
            }
        }
        // A read without a lock owner fills the kernel's page cache (see `is_page_fault`),
        // which every descriptor shares: it reads the current version.
        let read = match lock_owner {
            None => self.tree.read_shared(ino.0, fh.0, offset, size),
            Some(_) => self.tree.read(ino.0, fh.0, offset, size),
        };
        match read {
            Ok(data) => {
                // Offer the pages the fault's decode made cheap (see `Tree::pages_near`)
                // before the answer lets the reader run on: the answer goes once they are
                // stored (see `push`). A fault is told from a plain read by how it reached
                // us (see `is_page_fault`): `read(2)`, `pread(2)` and `sendfile(2)` of a
                // direct-I/O file never wait for pages nobody maps.
                if fault && let Some(pusher) = self.pusher.get() {
                    let offered = match outran {
                        // Its answer still waits for the stores queued before it.
                        true => Default::default(),
                        false => self.tree.pages_near(ino.0, fh.0, offset, size),
                    };
                    let answer = Box::new(move || reply.data(&data));
                    let reading = offset..offset + u64::from(size);
                    if let Some(a) = announced.take() {
                        a.offered();
                    }
                    pusher.offer(ino.0, reading, offered, answer);
                    // A walk down a column: its next rows, stored ahead of the reader
                    // (see `Tree::walk_lead`), prepared once the answer is on its way.
                    if walking {
                        let lead = self.tree.walk_lead(ino.0, offset, size);
                        pusher.ahead(ino.0, lead, since);
                    }
                    return;
                }
                reply.data(&data);
            }
            Err(e) => {
                drop(announced);
                reply.error(failed(&self.tree, "read", ino, &e));
            }
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(pt) = &self.passthrough {
            pt.release(&self.tree, fh.0);
        }
        match self.tree.release(fh.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(failed(&self.tree, "release", ino, &e)),
        }
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply_empty(
            &self.tree,
            "flush",
            ino,
            self.tree.flush_by(ino.0, fh.0, convert::caller(req.pid())),
            reply,
        );
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(
            &self.tree,
            "fsync",
            ino,
            self.tree.fsync(ino.0, fh.0),
            reply,
        );
    }

    /// Nothing to do: every change to a directory (a rename over a file, a removal) was
    /// committed durably when it was made, and scratch files are never stored. (fuser's
    /// default logs a warning for each mount; TensorStore syncs the directory after each
    /// rename.)
    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.tree.readdir(ino.0, 0) {
            Ok(_) => reply.opened(
                FileHandle(0),
                convert::opendir_flags(self.tree.is_writable()),
            ),
            Err(e) => reply.error(failed(&self.tree, "opendir", ino, &e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.tree.readdir(ino.0, offset) {
            Ok(entries) => {
                for e in entries {
                    let full = reply.add(
                        INodeNo(e.ino),
                        e.next_offset,
                        convert::file_type(e.kind),
                        &e.name,
                    );
                    if full {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(failed(&self.tree, "readdir", ino, &e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = self.tree.statfs();
        reply.statfs(
            s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
        );
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        match self.tree.access(ino.0, mask.bits()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(failed(&self.tree, "access", ino, &e)),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let res = match name.to_str() {
            Some(name) => self.tree.getxattr(ino.0, name),
            None => Ok(None),
        };
        match res {
            Ok(Some(value)) => reply_xattr(&value, size, reply),
            Ok(None) => reply.error(Errno::ENODATA),
            Err(e) => reply.error(failed(&self.tree, "getxattr", ino, &e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.tree.listxattr(ino.0) {
            Ok(names) => reply_xattr(&names, size, reply),
            Err(e) => reply.error(failed(&self.tree, "listxattr", ino, &e)),
        }
    }

    // Changes: the tree decides what is allowed (see the operation table in docs/SEMANTICS.md).

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Times are not stored (touch must work); modes and owners cannot change (a change
        // to what they are already is no change).
        let res = if mode.is_some() || uid.is_some() || gid.is_some() {
            self.tree.set_mode_owner(ino.0, mode, uid, gid)
        } else {
            Ok(())
        };
        let res = match size {
            Some(size) => res.and_then(|()| self.tree.set_size(ino.0, size)),
            None => res,
        };
        match res.and_then(|()| self.tree.getattr(ino.0)) {
            Ok(attr) => reply.attr(&self.ttl(), &convert::file_attr(&attr)),
            Err(e) => reply.error(failed(&self.tree, "setattr", ino, &e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.tree.write(ino.0, fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(failed(&self.tree, "write", ino, &e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let res = match name.to_str() {
            Some(name) => self
                .tree
                .create_by(parent.0, name, convert::caller(req.pid())),
            None => Err(TreeError::NotPermitted("a name that is not UTF-8".into())),
        };
        match res {
            Ok((attr, fh)) => reply.created(
                &self.ttl(),
                &convert::file_attr(&attr),
                Generation(0),
                FileHandle(fh),
                convert::fopen_flags(self.policy, self.tree.keep_cache(attr.ino)),
            ),
            Err(e) => reply.error(failed(&self.tree, "create", parent, &e)),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(refuse(&self.tree, "mknod", parent));
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let res = match name.to_str() {
            Some(name) => self.tree.mkdir(parent.0, name),
            None => Err(TreeError::NotPermitted("a name that is not UTF-8".into())),
        };
        match res {
            Ok(attr) => reply.entry(&self.ttl(), &convert::file_attr(&attr), Generation(0)),
            Err(e) => reply.error(failed(&self.tree, "mkdir", parent, &e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let res = match name.to_str() {
            Some(name) => self.tree.unlink(parent.0, name),
            None => Err(TreeError::NotFound),
        };
        reply_empty(&self.tree, "unlink", parent, res, reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let res = match name.to_str() {
            Some(name) => self.tree.rmdir(parent.0, name),
            None => Err(TreeError::NotFound),
        };
        reply_empty(&self.tree, "rmdir", parent, res, reply);
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        _link_name: &OsStr,
        _target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        reply.error(refuse(&self.tree, "symlink", parent));
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        // Only a Zarr writer's temp file linked to a new `zarr.json` (`Tree::link`).
        let res = match newname.to_str() {
            Some(name) => self.tree.link(ino.0, newparent.0, name),
            None => Err(self.tree.refusal(ino.0, "link")),
        };
        match res {
            Ok(attr) => reply.entry(&self.ttl(), &convert::file_attr(&attr), Generation(0)),
            Err(e) => reply.error(failed(&self.tree, "link", ino, &e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // `mv` asks for RENAME_NOREPLACE first (coreutils 9): the tree honours it.
        let noreplace = flags == RenameFlags::RENAME_NOREPLACE;
        let res = match (name.to_str(), newname.to_str()) {
            (Some(a), Some(b)) if flags.is_empty() || noreplace => {
                self.tree.rename(parent.0, a, newparent.0, b, noreplace)
            }
            (Some(_), Some(_)) => Err(self.tree.refusal(parent.0, "rename with RENAME_EXCHANGE")),
            _ => Err(self.tree.refusal(parent.0, "rename of non-UTF-8 names")),
        };
        reply_empty(&self.tree, "rename", parent, res, reply);
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let res = self.tree.set_xattr(ino.0, &name.to_string_lossy());
        reply_empty(&self.tree, "setxattr", ino, res, reply);
    }

    /// Unknown ioctls (Python's text-mode `open()` asks `TCGETS`): ENOTTY, as a filesystem
    /// without ioctls answers, and nothing logged (fuser's default logs each one).
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let res = self.tree.set_xattr(ino.0, &name.to_string_lossy());
        reply_empty(&self.tree, "removexattr", ino, res, reply);
    }
}

/// Whether a read is a page fault of an mmap reader (or the kernel's read-around of one)
/// rather than a `read(2)`-like call.
/// - Direct I/O: the kernel sends every direct-I/O read with the calling process's lock owner
///   (`FUSE_READ_LOCKOWNER`, `fuse_send_read`), while reads that fill page-cache pages
///   (`read_folio`, `readahead`: the only way a direct-I/O file's pages are filled, i.e.
///   faults of a mapping) carry none.
/// - Through the page cache (`-o keep_cache`): every read fills pages. The mount's readahead
///   is one page (see `set_readahead` of the daemon), so a fault asks for its page alone,
///   while a `read(2)` of more than a page is read ahead in larger requests: a read of at
///   most a page is taken for a fault. A `read(2)` of at most a page then gets its
///   neighbours stored as a fault does (into the page cache, which keeps them).
fn is_page_fault(policy: CachePolicy, lock_owner: Option<LockOwner>, size: u32) -> bool {
    let fills_pages = lock_owner.is_none();
    match policy {
        CachePolicy::DirectIo => fills_pages,
        CachePolicy::KeepCache | CachePolicy::Auto => {
            fills_pages && size as usize <= crate::tree::PAGE
        }
    }
}

/// The xattr protocol: `size` 0 asks for the length; a buffer too small is ERANGE.
fn reply_xattr(value: &[u8], size: u32, reply: ReplyXattr) {
    if size == 0 {
        reply.size(u32::try_from(value.len()).unwrap_or(u32::MAX));
    } else if value.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}

/// The errno for a change the tree never supports (EROFS on a read-only tree, EPERM, or
/// ENOENT for an unknown inode), logged once.
fn refuse(tree: &Tree, op: &str, ino: INodeNo) -> Errno {
    failed(tree, op, ino, &tree.refusal(ino.0, op))
}
