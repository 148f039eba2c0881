//! Checking one chunk: a thread's [`Worker`] (its decoder, reused buffers and the memo of the
//! last stored chunk) reads the chunk's stored bytes, checks the size its header declares
//! against its slot and decodes it, whole or by windows, a decoder panic counted as damage.

use std::sync::Arc;

use crate::codec::{self, CodecError, Decoder};
use crate::container::{Array, SourceKind};
use crate::error::display_chain;

/// Chunks declaring up to this many bytes are decoded whole into the thread's buffer.
const WHOLE_MAX: usize = 64 << 20;
/// Larger chunks are decoded by windows of about this many bytes (rounded to whole blocks).
const WINDOW: usize = 16 << 20;
/// Larger compressed buffers are not kept for the thread's next chunk.
const KEEP_COMPRESSED: usize = 64 << 20;
/// Special chunks (a repeated value, zeros) are checked on their first bytes only.
const SPECIAL_CHECK: usize = 4096;

/// What checking one sound chunk did.
pub(super) enum Outcome {
    /// A special index entry (nothing stored).
    Special,
    /// Decoded this many bytes.
    Decoded(usize),
}

/// Which stored chunk a memo is for: (target, index entry, last chunk of its array).
type MemoKey = (usize, i64, bool);

/// One checking thread's decoder and buffers.
#[derive(Default)]
pub(super) struct Worker {
    decoder: Decoder,
    out: Vec<u8>,
    compressed: Vec<u8>,
    /// The last stored chunk checked: (target, index entry, last chunk of its array) and the
    /// outcome. Index entries sharing stored bytes (a repeated index) are decoded once.
    memo: Option<(MemoKey, Result<usize, Arc<str>>)>,
}

impl Worker {
    /// [`Worker::check`] through the memo of the last stored chunk.
    pub(super) fn check_memo(
        &mut self,
        t: usize,
        a: &Array,
        i: usize,
    ) -> Result<Outcome, Arc<str>> {
        let Some(entry) = a.frame_index_entry(i) else {
            return self.check(a, i).map_err(Arc::from);
        };
        if entry < 0 {
            return Ok(Outcome::Special);
        }
        let key = (t, entry, i + 1 == a.nchunks());
        if let Some((k, r)) = &self.memo
            && *k == key
        {
            return r.clone().map(Outcome::Decoded);
        }
        let r = self.check(a, i).map_err(Arc::<str>::from);
        if let Ok(Outcome::Decoded(n)) = &r {
            self.memo = Some((key, Ok(*n)));
        } else if let Err(e) = &r {
            self.memo = Some((key, Err(e.clone())));
        }
        r
    }

    /// Checks chunk `i` of `a`: `Err(reason)` when it cannot be read back.
    fn check(&mut self, a: &Array, i: usize) -> Result<Outcome, String> {
        if a.frame_index_entry(i).is_some_and(|e| e < 0) {
            return Ok(Outcome::Special);
        }
        let expected = a.chunk_nbytes(i).map_err(|e| display_chain(&e))?;
        let bcolz = a.kind() == SourceKind::BcolzCarray;
        let full = a.chunksize();
        let Worker {
            decoder,
            out,
            compressed,
            ..
        } = self;
        let mut res = None;
        let mapped = a.with_mapped_chunk(i, false, &mut |c| {
            res = Some(guarded(|| decode(decoder, out, c, expected, bcolz, full)));
        });
        match (mapped, res) {
            (Ok(true), Some(r)) => return r.map(Outcome::Decoded),
            (Err(e), _) => return Err(display_chain(&e)),
            _ => {}
        }
        let n = a
            .chunk_bytes_into(i, compressed)
            .map_err(|e| display_chain(&e))?;
        let r = guarded(|| decode(decoder, out, &compressed[..n], expected, bcolz, full));
        if compressed.capacity() > KEEP_COMPRESSED {
            *compressed = Vec::new();
        }
        if out.capacity() > WHOLE_MAX {
            *out = Vec::new();
        }
        r.map(Outcome::Decoded)
    }
}

/// Runs a decode, turning a panic (a decoder bug on hostile input) into a damaged chunk.
fn guarded(f: impl FnOnce() -> Result<usize, String>) -> Result<usize, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err("the decoder panicked on this chunk (a b2fs bug; treated as damaged)".into())
    })
}

/// Decodes `chunk` (which must hold `expected` bytes; a bcolz chunk may hold more, up to a
/// full chunk of `full` bytes) into `out`, whole or by windows. Returns the bytes decoded.
fn decode(
    dec: &mut Decoder,
    out: &mut Vec<u8>,
    chunk: &[u8],
    expected: usize,
    bcolz: bool,
    full: usize,
) -> Result<usize, String> {
    let codec_err = |e: CodecError| e.to_string();
    let h = codec::chunk_info(chunk).map_err(codec_err)?;
    let size_ok = if bcolz {
        h.nbytes >= expected && h.nbytes <= full.max(expected)
    } else {
        h.nbytes == expected
    };
    if !size_ok {
        return Err(format!(
            "the chunk header says {} bytes, its slot holds {expected}",
            h.nbytes
        ));
    }
    if h.cbytes > chunk.len() {
        return Err(format!(
            "the chunk header says {} compressed bytes, {} are stored",
            h.cbytes,
            chunk.len()
        ));
    }
    let n = h.nbytes;
    if h.special() != codec::SpecialKind::None {
        // A pattern: its first bytes show the pattern is there; the rest repeats it.
        let len = n.min(SPECIAL_CHECK);
        crate::mem::grow_discarding(out, len);
        let got = dec
            .decompress_range(chunk, 0, &mut out[..len])
            .map_err(codec_err)?;
        return if got == len {
            Ok(n)
        } else {
            Err(format!("decoded {got} bytes, the header says {n}"))
        };
    }
    if n <= WHOLE_MAX {
        crate::mem::grow_discarding(out, n);
        dec.decompress_into(chunk, &mut out[..n])
            .map_err(codec_err)?;
        return Ok(n);
    }
    let bs = h.blocksize.max(1);
    let window = (WINDOW / bs).max(1).saturating_mul(bs);
    crate::mem::grow_discarding(out, window.min(n));
    let mut at = 0;
    while at < n {
        let len = window.min(n - at);
        let got = dec
            .decompress_range(chunk, at, &mut out[..len])
            .map_err(codec_err)?;
        if got != len {
            return Err(format!("decoded {} bytes, the header says {n}", at + got));
        }
        at += len;
    }
    Ok(n)
}
