//! The compressed chunks of one commit ([`Chunk`], what [`super::Edit`] holds) and where they
//! wait until the commit writes them ([`Spool`]): in memory up to a bound, past it in an
//! unlinked temporary file, each read back one at a time when the commit writes it. So a
//! commit of a multi-GiB edit (a `cp` of a big file over `array.npy`, a bcolz commit of many
//! chunks) holds at most the bound plus the one chunk being written, and a commit that fits
//! (the common case: a few chunks) never touches a file.
//!
//! Knows no format and no FUSE: bytes in, bytes back. Every writer (frames, sparse frames,
//! bcolz carrays and ctable columns, store members, `embed.rs`, `b2fs salvage`) takes its
//! chunks as [`Chunk`]s and reads each with [`Chunk::bytes`] just before it writes it.
//!
//! The file is made at the first chunk that does not fit (`O_TMPFILE`, else a unique name
//! unlinked at once, [`open_unlinked`]) in the directory the caller names (a mount's
//! `spill_dir=`), holds the chunks back to back, and goes when the last [`Chunk`] of it is
//! dropped (with the [`super::Edit`]). Nothing in it is durable or needs to be: it is the
//! edit, not the source; the commit's crash-safety is the writers' (a crash loses the file
//! as it loses the memory).
//!
//! Errors are the file system's, as `std::io::Error`: a writer maps a failed read-back to
//! [`crate::container::ContainerError::Io`] before its commit point, so the source is left as
//! it was (`frame.rs`, `bcolz.rs` undo what they wrote before it).

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// The default bound on the compressed bytes one commit holds in memory (a mount uses the
/// smaller of this and its `edit_budget=`).
pub const DEFAULT_SPOOL_MEMORY: usize = 32 << 20;

/// Bytes of a chunk kept in memory even when the chunk is in the file: enough for any chunk
/// header (Blosc2's 32 bytes; Blosc1's 16), so writers check headers without reading back.
const HEAD: usize = 32;

/// The temporary file of one [`Spool`], shared by its chunks.
#[derive(Debug)]
struct SpoolFile {
    file: File,
    /// Tests: reads back fail with this errno (0: they work).
    fail_reads: AtomicI32,
    /// Reads back so far.
    reads: AtomicU64,
}

/// One compressed chunk of an edit: its bytes in memory, or a range of a [`Spool`]'s file.
#[derive(Debug, Clone)]
pub struct Chunk(Repr);

#[derive(Debug, Clone)]
enum Repr {
    Memory(Vec<u8>),
    File {
        file: Arc<SpoolFile>,
        offset: u64,
        len: usize,
        /// The chunk's first `min(len, HEAD)` bytes.
        head: [u8; HEAD],
    },
}

impl From<Vec<u8>> for Chunk {
    /// A chunk held in memory.
    fn from(bytes: Vec<u8>) -> Chunk {
        Chunk(Repr::Memory(bytes))
    }
}

impl Chunk {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Memory(b) => b.len(),
            Repr::File { len, .. } => *len,
        }
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether its bytes are in memory (not in a spool file).
    pub fn in_memory(&self) -> bool {
        matches!(self.0, Repr::Memory(_))
    }

    /// Its first bytes, up to 32 (a chunk header), without reading anything back.
    pub fn head(&self) -> &[u8] {
        match &self.0 {
            Repr::Memory(b) => &b[..b.len().min(HEAD)],
            Repr::File { len, head, .. } => &head[..(*len).min(HEAD)],
        }
    }

    /// The whole chunk: borrowed when in memory, read back from the spool file otherwise.
    ///
    /// # Errors
    /// Reading the spool file failed.
    pub fn bytes(&self) -> io::Result<Cow<'_, [u8]>> {
        match &self.0 {
            Repr::Memory(b) => Ok(Cow::Borrowed(b)),
            Repr::File {
                file, offset, len, ..
            } => {
                file.reads.fetch_add(1, Ordering::Relaxed);
                match file.fail_reads.load(Ordering::Relaxed) {
                    0 => {}
                    errno => return Err(io::Error::from_raw_os_error(errno)),
                }
                let mut out = vec![0; *len];
                file.file.read_exact_at(&mut out, *offset)?;
                Ok(Cow::Owned(out))
            }
        }
    }
}

/// What a [`Spool`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SpoolStats {
    /// Compressed bytes held in memory now.
    pub held: usize,
    /// The most held in memory at once.
    pub peak: usize,
    /// Chunks written to the file.
    pub spilled_chunks: u64,
    /// Bytes written to the file.
    pub spilled_bytes: u64,
}

/// Where the compressed chunks of one commit wait: in memory while they fit in `bound`
/// bytes, then in an unlinked file in `dir` (see the module doc).
#[derive(Debug)]
pub struct Spool {
    bound: usize,
    dir: PathBuf,
    file: Option<Arc<SpoolFile>>,
    /// The file's length (chunks are written back to back).
    end: u64,
    stats: SpoolStats,
    /// Tests: writes to the file fail with this errno; reads back of its chunks with the
    /// second.
    fail: (i32, i32),
}

impl Spool {
    /// A spool keeping at most `bound` compressed bytes in memory, the rest in a file made in
    /// `dir` when first needed.
    pub fn new(bound: usize, dir: PathBuf) -> Spool {
        Spool {
            bound,
            dir,
            file: None,
            end: 0,
            stats: SpoolStats::default(),
            fail: (0, 0),
        }
    }

    /// Tests: writes to the file fail with `write` and reads back of its chunks with `read`
    /// (errnos; 0: they work).
    pub fn fail_with(&mut self, write: i32, read: i32) {
        self.fail = (write, read);
        if let Some(f) = &self.file {
            f.fail_reads.store(read, Ordering::Relaxed);
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> SpoolStats {
        self.stats
    }

    /// Reads back of this spool's chunks so far.
    pub fn reads(&self) -> u64 {
        self.file
            .as_ref()
            .map_or(0, |f| f.reads.load(Ordering::Relaxed))
    }

    /// Takes `bytes` (one compressed chunk): kept in memory when it fits in the bound with
    /// what is held already, else written to the file (made now if need be) and dropped.
    ///
    /// # Errors
    /// Making or writing the file failed; nothing is kept then.
    pub fn add(&mut self, bytes: Vec<u8>) -> io::Result<Chunk> {
        let len = bytes.len();
        if self.stats.held.saturating_add(len) <= self.bound {
            self.stats.held += len;
            self.stats.peak = self.stats.peak.max(self.stats.held);
            return Ok(Chunk::from(bytes));
        }
        if self.fail.0 != 0 {
            return Err(io::Error::from_raw_os_error(self.fail.0));
        }
        let file = match &self.file {
            Some(f) => f.clone(),
            None => {
                let f = Arc::new(SpoolFile {
                    file: open_unlinked(&self.dir)?,
                    fail_reads: AtomicI32::new(self.fail.1),
                    reads: AtomicU64::new(0),
                });
                self.file = Some(f.clone());
                f
            }
        };
        let offset = self.end;
        file.file.write_all_at(&bytes, offset)?;
        self.end += len as u64;
        self.stats.spilled_chunks += 1;
        self.stats.spilled_bytes += len as u64;
        let mut head = [0; HEAD];
        let n = len.min(HEAD);
        head[..n].copy_from_slice(&bytes[..n]);
        Ok(Chunk(Repr::File {
            file,
            offset,
            len,
            head,
        }))
    }
}

/// A new read-write file in `dir` that no name points to: `O_TMPFILE`, else a unique name
/// created exclusively and unlinked at once.
///
/// # Errors
/// The directory's (`ENOENT`, `EACCES`, `ENOSPC`, ...).
pub fn open_unlinked(dir: &Path) -> io::Result<File> {
    let tmpfile = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir);
    match tmpfile {
        Ok(f) => return Ok(f),
        // Not supported by this file system or kernel: the portable way below.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) => {}
        Err(e) => return Err(e),
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".b2fs-spill-{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => {
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
    }

    #[test]
    fn chunks_past_the_bound_go_to_the_file_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::new(100, dir.path().to_path_buf());
        let a = s.add(pattern(60, 1)).unwrap();
        let b = s.add(pattern(50, 2)).unwrap(); // 110 > 100: to the file
        let c = s.add(pattern(40, 3)).unwrap(); // 100: fits
        let d = s.add(pattern(10, 4)).unwrap();
        let e = s.add(Vec::new()).unwrap();
        assert!(a.in_memory() && !b.in_memory() && c.in_memory() && !d.in_memory());
        assert!(e.in_memory() && e.is_empty());
        let st = s.stats();
        assert_eq!((st.held, st.peak), (100, 100));
        assert_eq!((st.spilled_chunks, st.spilled_bytes), (2, 60));
        for (ch, want) in [
            (&a, pattern(60, 1)),
            (&b, pattern(50, 2)),
            (&d, pattern(10, 4)),
        ] {
            assert_eq!(ch.len(), want.len());
            assert_eq!(ch.head(), &want[..want.len().min(32)]);
            assert_eq!(&*ch.bytes().unwrap(), &want[..]);
        }
        assert_eq!(s.reads(), 2);
        // Clones share the file; it outlives the spool.
        let b2 = b.clone();
        drop(s);
        assert_eq!(&*b2.bytes().unwrap(), &pattern(50, 2)[..]);
    }

    #[test]
    fn a_spool_that_fits_makes_no_file_and_failures_are_errors() {
        let missing = PathBuf::from("/nonexistent/b2fs-spool");
        let mut s = Spool::new(1 << 20, missing.clone());
        assert!(s.add(pattern(1000, 5)).unwrap().in_memory());
        assert!(s.file.is_none());
        let mut s = Spool::new(10, missing);
        assert!(s.add(pattern(100, 5)).is_err(), "no such directory");
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::new(0, dir.path().to_path_buf());
        s.fail_with(libc::ENOSPC, 0);
        let e = s.add(pattern(8, 1)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        s.fail_with(0, libc::EIO);
        let c = s.add(pattern(8, 1)).unwrap();
        assert_eq!(c.bytes().unwrap_err().raw_os_error(), Some(libc::EIO));
        s.fail_with(0, 0);
        assert_eq!(&*c.bytes().unwrap(), &pattern(8, 1)[..]);
    }
}
