//! The spill file: where edited chunk buffers go when the mount's pending edits pass their
//! memory budget (`pending.rs` decides what spills and when; this module owns the file).
//!
//! One unlinked temporary file per mount, in the scratch directory (`spill_dir=`, else
//! `$TMPDIR`, else `/tmp`): `O_TMPFILE` where the filesystem has it, else a file created with
//! a unique name and unlinked at once. Nothing in it survives the daemon: spilled bytes are
//! uncommitted edits exactly as bytes in memory are (a crash loses both; what was committed is
//! in the source). It is created at the first spill, so a mount that never passes its budget
//! never touches the scratch directory.
//!
//! Space: each spilled chunk takes one [`Slot`], a page-aligned region allocated first-fit
//! from a free list (regions given back are merged with their neighbours; the file is cut
//! back when the regions at its end are free, and inner regions are punched out, so the disk
//! the file holds follows what is spilled now, not the most ever spilled). Chunks of one
//! array have one size, so regions are reused whole.
//!
//! A slot's region never moves: a spilled chunk is patched in place ([`SpillFile::write_at`])
//! only within its length, and may be cut shorter in place ([`Slot::shrink`]); growth brings
//! it back into memory first. A slot is reserved under the edits lock
//! ([`SpillFile::reserve`]) and filled outside it ([`Slot::fill`]). Slots are shared (`Arc`)
//! between the buffer map and the holders that read them outside the edits lock (a commit in
//! progress, a read of `array.npy` or of a chunk file, a writer bringing the chunk back): a
//! slot is patched or shrunk only while the map is its only holder (a writer that finds
//! another holder copies the chunk back into memory instead, `pending.rs`), so a holder reads
//! the bytes it took; and its region is given back only by the last holder
//! ([`SpillFile::release`], always called under the edits lock).
//!
//! Errors are the file system's (`ENOSPC`, `EIO`, ...): the caller fails the write that
//! needed the room with them, and the buffers stay as they were.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use crate::container::write::open_unlinked;

/// The granule of slots: the page (the page cache's unit, so no two slots share one).
const ALIGN: u64 = 4096;

/// What the slots of one spill file share with it: counters and test failures, read and set
/// without the edits lock.
#[derive(Debug, Default)]
struct Shared {
    /// Reads of the file so far (each `pread` of a slot).
    reads: AtomicU64,
    /// Tests: reads fail with this errno (0: they work).
    fail_reads: AtomicI32,
}

/// One spilled chunk: `len` bytes at `offset` of the spill file `file`.
#[derive(Debug)]
pub(crate) struct Slot {
    file: Arc<File>,
    shared: Arc<Shared>,
    offset: u64,
    /// The region's size (`len` rounded up to [`ALIGN`], at least one page).
    cap: u64,
    len: usize,
}

impl Slot {
    /// The chunk's length.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Writes the whole chunk `data` (as long as the slot) into the region: once, after
    /// [`SpillFile::reserve`], before anything reads it.
    pub(crate) fn fill(&self, data: &[u8]) -> io::Result<()> {
        if data.len() != self.len {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.file.write_all_at(data, self.offset)
    }

    /// Copies bytes `[at, at + out.len())` of the chunk into `out` (the caller keeps the range
    /// within the chunk).
    pub(crate) fn read_at(&self, at: usize, out: &mut [u8]) -> io::Result<()> {
        debug_assert!(at + out.len() <= self.len);
        self.shared.reads.fetch_add(1, Ordering::Relaxed);
        match self.shared.fail_reads.load(Ordering::Relaxed) {
            0 => self.file.read_exact_at(out, self.offset + at as u64),
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    /// The first `n` bytes of the chunk (all of it when shorter), read back.
    pub(crate) fn load_prefix(&self, n: usize) -> io::Result<Vec<u8>> {
        let mut out = vec![0; n.min(self.len)];
        if !out.is_empty() {
            self.read_at(0, &mut out)?;
        }
        Ok(out)
    }

    /// The whole chunk, read back.
    pub(crate) fn load(&self) -> io::Result<Vec<u8>> {
        self.load_prefix(self.len)
    }

    /// Cuts the chunk to its first `len` bytes (no longer than it is) in place: nothing is read
    /// or written. Only for a slot the map alone holds (`Arc::get_mut`).
    pub(crate) fn shrink(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

/// The spill file of a mount and its free regions.
#[derive(Debug)]
pub(crate) struct SpillFile {
    /// Where the file is made.
    dir: PathBuf,
    file: Option<Arc<File>>,
    /// The file's length: every region lies below it.
    end: u64,
    /// Free regions below `end` as (offset, len), sorted by offset, none touching another.
    free: Vec<(u64, u64)>,
    /// Tests: the next spill fails with this errno instead of writing.
    fail: Option<i32>,
    shared: Arc<Shared>,
}

impl SpillFile {
    /// A spill file to be made in `dir` when first needed.
    pub(crate) fn new(dir: PathBuf) -> SpillFile {
        SpillFile {
            dir,
            file: None,
            end: 0,
            free: Vec::new(),
            fail: None,
            shared: Arc::default(),
        }
    }

    /// The directory the file is (or will be) made in.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Tests: spills fail with `errno` (`None`: they work again).
    pub(crate) fn fail_with(&mut self, errno: Option<i32>) {
        self.fail = errno;
    }

    /// Tests: reads of spilled chunks (this file's slots, those taken already included) fail
    /// with `errno` (`None`: they work again).
    pub(crate) fn fail_reads_with(&self, errno: Option<i32>) {
        let errno = errno.unwrap_or(0);
        self.shared.fail_reads.store(errno, Ordering::Relaxed);
    }

    /// Reads of the file so far (one per `pread` of a slot).
    pub(crate) fn reads(&self) -> u64 {
        self.shared.reads.load(Ordering::Relaxed)
    }

    /// Bytes of the file's regions in use (what is spilled now, page-rounded).
    pub(crate) fn used(&self) -> u64 {
        self.end - self.free.iter().map(|(_, n)| n).sum::<u64>()
    }

    /// The file, made now if it does not exist yet.
    fn file(&mut self) -> io::Result<Arc<File>> {
        if let Some(f) = &self.file {
            return Ok(f.clone());
        }
        let f = Arc::new(open_unlinked(&self.dir)?);
        // On tmpfs (often `/tmp`) spilled chunks still take memory or swap: say so once.
        if rustix::fs::fstatfs(&*f).is_ok_and(|st| st.f_type == libc::TMPFS_MAGIC) {
            log::warn!(
                "pending edits spill to {}, a tmpfs: they still take memory (or swap); \
                 set -o spill_dir= to a directory on disk",
                self.dir.display()
            );
        }
        self.file = Some(f.clone());
        Ok(f)
    }

    /// A free region for a chunk of `len` bytes (the file made first if need be), to be
    /// filled ([`Slot::fill`]) before anything reads it; given back by [`SpillFile::release`]
    /// when the fill fails.
    pub(crate) fn reserve(&mut self, len: usize) -> io::Result<Arc<Slot>> {
        if let Some(errno) = self.fail {
            return Err(io::Error::from_raw_os_error(errno));
        }
        let file = self.file()?;
        let cap = (len as u64).max(1).next_multiple_of(ALIGN);
        let offset = self.allocate(cap);
        Ok(Arc::new(Slot {
            file,
            shared: self.shared.clone(),
            offset,
            cap,
            len,
        }))
    }

    /// Writes `data` (a whole chunk) to a free region and returns its slot: [`reserve`] and
    /// [`Slot::fill`] at once. On failure the region is free again and nothing else changed.
    ///
    /// [`reserve`]: SpillFile::reserve
    #[cfg(test)]
    pub(crate) fn store(&mut self, data: &[u8]) -> io::Result<Arc<Slot>> {
        let slot = self.reserve(data.len())?;
        if let Err(e) = slot.fill(data) {
            self.release(slot);
            return Err(e);
        }
        Ok(slot)
    }

    /// Patches bytes `[at, at + data.len())` of spilled chunk `slot` (within its length).
    /// Only for a slot no commit holds (its bytes are that commit's).
    pub(crate) fn write_at(&self, slot: &Slot, at: usize, data: &[u8]) -> io::Result<()> {
        if let Some(errno) = self.fail {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if at.checked_add(data.len()).is_none_or(|end| end > slot.len) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        slot.file.write_all_at(data, slot.offset + at as u64)
    }

    /// Drops one holder of `slot`; the last gives its region back.
    pub(crate) fn release(&mut self, slot: Arc<Slot>) {
        if let Some(s) = Arc::into_inner(slot) {
            self.give_back(&s.file, s.offset, s.cap);
        }
    }

    /// A free region of `cap` bytes: the first free one that fits (split), else at the end.
    fn allocate(&mut self, cap: u64) -> u64 {
        if let Some(i) = self.free.iter().position(|&(_, n)| n >= cap) {
            let (offset, n) = self.free[i];
            if n == cap {
                self.free.remove(i);
            } else {
                self.free[i] = (offset + cap, n - cap);
            }
            return offset;
        }
        let offset = self.end;
        self.end += cap;
        offset
    }

    /// Frees region `[offset, offset + cap)`: merged with free neighbours; the file is cut
    /// back when it ends the file, else its pages are punched out.
    fn give_back(&mut self, file: &File, offset: u64, cap: u64) {
        let i = self.free.partition_point(|&(o, _)| o < offset);
        let (mut start, mut len) = (offset, cap);
        if i < self.free.len() && self.free[i].0 == start + len {
            len += self.free[i].1;
            self.free.remove(i);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == start {
            start = self.free[i - 1].0;
            len += self.free[i - 1].1;
            self.free.remove(i - 1);
        }
        if start + len >= self.end {
            self.end = start;
            // A failure only keeps disk blocks the next spills reuse.
            let _ = file.set_len(self.end);
            return;
        }
        let pos = self.free.partition_point(|&(o, _)| o < start);
        self.free.insert(pos, (start, len));
        // Best effort: a file system without hole punching keeps the blocks until reuse.
        let _ = rustix::fs::fallocate(
            file,
            rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
            offset,
            cap,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(13) ^ seed)
            .collect()
    }

    #[test]
    fn spilled_chunks_read_back_and_patch_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SpillFile::new(dir.path().to_path_buf());
        assert!(s.file.is_none(), "made at the first spill only");
        let a = s.store(&pattern(10_000, 1)).unwrap();
        let b = s.store(&pattern(5, 2)).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "unlinked"
        );
        assert_eq!(a.load().unwrap(), pattern(10_000, 1));
        assert_eq!(b.load().unwrap(), pattern(5, 2));
        let mut mid = [0u8; 3];
        a.read_at(4097, &mut mid).unwrap();
        assert_eq!(mid, pattern(10_000, 1)[4097..4100]);
        s.write_at(&a, 9_998, &[7, 7]).unwrap();
        let mut want = pattern(10_000, 1);
        want[9_998..].copy_from_slice(&[7, 7]);
        assert_eq!(a.load().unwrap(), want);
        assert_eq!(
            b.load().unwrap(),
            pattern(5, 2),
            "its neighbour is untouched"
        );
        // Past the slot's length: refused, nothing written.
        assert_eq!(
            s.write_at(&a, 9_999, &[1, 1]).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
        assert_eq!(a.load().unwrap(), want);
        assert_eq!(s.used(), 3 * ALIGN + ALIGN);
    }

    #[test]
    fn released_regions_are_reused_merged_and_cut_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SpillFile::new(dir.path().to_path_buf());
        let slots: Vec<_> = (0..4)
            .map(|i| s.store(&pattern(8192, i)).unwrap())
            .collect();
        let file = s.file.clone().unwrap();
        assert_eq!(file.metadata().unwrap().len(), 4 * 8192);
        let mut slots = slots.into_iter();
        let (s0, s1, s2, s3) = (
            slots.next().unwrap(),
            slots.next().unwrap(),
            slots.next().unwrap(),
            slots.next().unwrap(),
        );
        // A holder besides the map (a commit): the region stays until the last one goes.
        let held = s1.clone();
        s.release(s1);
        assert_eq!(s.used(), 4 * 8192);
        s.release(held);
        s.release(s2);
        assert_eq!(s.free, vec![(8192, 2 * 8192)], "neighbours merged");
        assert_eq!(s.used(), 2 * 8192);
        // First fit: a smaller chunk takes the front of the free region.
        let small = s.store(&pattern(100, 9)).unwrap();
        assert_eq!(small.offset, 8192);
        assert_eq!(small.load().unwrap(), pattern(100, 9));
        assert_eq!(s0.load().unwrap(), pattern(8192, 0));
        assert_eq!(s3.load().unwrap(), pattern(8192, 3));
        // The last region going cuts the file back to what is still used.
        s.release(s3);
        assert_eq!(s.end, 8192 + ALIGN);
        assert_eq!(file.metadata().unwrap().len(), 8192 + ALIGN);
        assert!(s.free.is_empty());
        s.release(small);
        s.release(s0);
        assert_eq!((s.end, s.used()), (0, 0));
        assert_eq!(file.metadata().unwrap().len(), 0);
    }

    #[test]
    fn a_failed_spill_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SpillFile::new(dir.path().to_path_buf());
        let a = s.store(&pattern(100, 1)).unwrap();
        s.fail_with(Some(libc::ENOSPC));
        let e = s.store(&pattern(100, 2)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(
            s.write_at(&a, 0, &[0]).unwrap_err().raw_os_error(),
            Some(libc::ENOSPC)
        );
        assert_eq!(a.load().unwrap(), pattern(100, 1));
        assert_eq!(s.used(), ALIGN);
        s.fail_with(None);
        assert_eq!(s.store(&[]).unwrap().len(), 0);
        // A scratch directory that does not exist: the file system's own error.
        let mut gone = SpillFile::new(dir.path().join("missing"));
        assert_eq!(
            gone.store(&[1]).unwrap_err().raw_os_error(),
            Some(libc::ENOENT)
        );
    }
}
