//! Opening a leaf for its metadata only ([`super::Leaf::open_head`]): the frame's bytes are
//! read as one window at its start (the whole frame when it is small, as most leaves of a
//! many-member store are) plus, for a larger frame, one window at its end (the index chunk and
//! the trailer with the vlmetalayers), so opening it costs one or two reads instead of the
//! five a plain open makes (prefix, trailer tail, metalayers, index, trailer). Reads outside
//! the windows (a metalayer section longer than the head window, a long index) go to the
//! backing bytes.
//!
//! Knows nothing of frames: it is a [`ByteSource`] of `len` bytes at `base` of a file or of
//! another byte source.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::SystemTime;

use crate::container::{ByteSource, ContainerError};

/// A frame up to this long is read whole in one read.
pub const WHOLE_MAX: u64 = 128 << 10;
/// The window read at the start of a larger frame (its header and metalayers).
const HEAD: u64 = 16 << 10;
/// The window read at the end of a larger frame (index chunk and trailer).
const TAIL: u64 = 64 << 10;

/// Where the bytes come from.
#[derive(Debug)]
pub(crate) enum Backing {
    /// A local file (a `.b2z`, a `.b2d` leaf file).
    File(Arc<File>),
    /// A byte source (a remote object).
    Bytes(Arc<dyn ByteSource>),
    /// Nothing: every byte is in the head window.
    Memory,
}

impl Backing {
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        match self {
            Backing::File(f) => f.read_exact_at(buf, offset),
            Backing::Bytes(b) => b.read_exact_at(offset, buf),
            Backing::Memory => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("{} bytes at {offset}: not held", buf.len()),
            )),
        }
    }
}

/// `len` bytes at `base` of a backing, with a head (and tail) window read at creation.
#[derive(Debug)]
pub(crate) struct Windowed {
    name: String,
    base: u64,
    len: u64,
    mtime: SystemTime,
    backing: Backing,
    head: Vec<u8>,
    /// Where the tail window starts (relative to `base`) and its bytes.
    tail: (u64, Vec<u8>),
}

impl Windowed {
    /// Reads the windows of the `len` bytes at `base` of `backing` (named `name` in
    /// messages).
    ///
    /// # Errors
    /// [`ContainerError::Io`] when a window cannot be read.
    pub(crate) fn read(
        name: &str,
        backing: Backing,
        base: u64,
        len: u64,
        mtime: SystemTime,
    ) -> Result<Windowed, ContainerError> {
        let io = |source| ContainerError::Io {
            path: name.into(),
            source,
        };
        let head_len = if len <= WHOLE_MAX { len } else { HEAD };
        let mut head = vec![0u8; head_len as usize];
        backing.read(base, &mut head).map_err(io)?;
        let tail = if len <= WHOLE_MAX {
            (len, Vec::new())
        } else {
            let at = len - TAIL;
            let mut t = vec![0u8; TAIL as usize];
            backing.read(base + at, &mut t).map_err(io)?;
            (at, t)
        };
        Ok(Windowed {
            name: name.to_owned(),
            base,
            len,
            mtime,
            backing,
            head,
            tail,
        })
    }

    /// `bytes` held in memory (an embedded value's frame).
    pub(crate) fn in_memory(name: &str, bytes: Vec<u8>, mtime: SystemTime) -> Windowed {
        Windowed {
            name: name.to_owned(),
            base: 0,
            len: bytes.len() as u64,
            mtime,
            backing: Backing::Memory,
            tail: (bytes.len() as u64, Vec::new()),
            head: bytes,
        }
    }

    /// The bytes at `offset` of `window` (starting at `at`) when they lie inside it.
    fn inside(window: &[u8], at: u64, offset: u64, n: usize) -> Option<&[u8]> {
        let from = usize::try_from(offset.checked_sub(at)?).ok()?;
        window.get(from..from.checked_add(n)?)
    }
}

impl ByteSource for Windowed {
    fn name(&self) -> &str {
        &self.name
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn mtime(&self) -> SystemTime {
        self.mtime
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let n = buf.len();
        if offset.checked_add(n as u64).is_none_or(|e| e > self.len) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("{}: {n} bytes at {offset} past its end", self.name),
            ));
        }
        let window = Windowed::inside(&self.head, 0, offset, n)
            .or_else(|| Windowed::inside(&self.tail.1, self.tail.0, offset, n));
        match window {
            Some(w) => {
                buf.copy_from_slice(w);
                Ok(())
            }
            None => self.backing.read(self.base + offset, buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_serve_their_bytes_and_the_rest_comes_from_the_backing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let bytes: Vec<u8> = (0..(300u32 << 10)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &bytes).unwrap();
        let open = || Backing::File(Arc::new(File::open(&p).unwrap()));
        // A small window: read whole.
        let w = Windowed::read("f", open(), 10, 1000, SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(w.head.len(), 1000);
        let mut buf = [0u8; 16];
        w.read_exact_at(984, &mut buf).unwrap();
        assert_eq!(&buf[..], &bytes[994..1010]);
        assert!(w.read_exact_at(990, &mut buf).is_err(), "past the end");
        // A large one: head and tail windows, the middle from the file.
        let len = 250u64 << 10;
        let w = Windowed::read("f", open(), 7, len, SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!((w.head.len() as u64, w.tail.0), (HEAD, len - TAIL));
        for at in [0, HEAD - 8, HEAD + 100, len - TAIL - 8, len - 16] {
            w.read_exact_at(at, &mut buf).unwrap();
            assert_eq!(
                &buf[..],
                &bytes[(7 + at) as usize..(7 + at + 16) as usize],
                "{at}"
            );
        }
    }
}
