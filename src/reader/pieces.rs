//! Bytes made of several windows of decoded buffers, in order, without copying them into one
//! buffer: what a range of `array.npy` offered to the kernel's page cache is when its rows lie
//! in different chunks (or blocks). Whoever sends them hands the windows to one `writev`.

use std::io::IoSlice;
use std::ops::Range;

use super::ReadData;

/// Windows of decoded buffers (or bytes made for them), one after the other.
#[derive(Debug, Default)]
pub struct Pieces {
    parts: Vec<ReadData>,
    len: usize,
}

impl Pieces {
    /// No bytes.
    pub fn new() -> Pieces {
        Pieces::default()
    }

    /// Appends `part`; a window of the same buffer that continues the last one extends it.
    pub fn push(&mut self, part: ReadData) {
        if part.is_empty() {
            return;
        }
        self.len += part.len();
        if let (Some(ReadData::Chunk(last, r)), ReadData::Chunk(b, next)) =
            (self.parts.last_mut(), &part)
            && std::sync::Arc::ptr_eq(last, b)
            && r.end == next.start
        {
            r.end = next.end;
            return;
        }
        self.parts.push(part);
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Windows appended (after merging those that continue one another).
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// The windows, in order.
    pub fn as_parts(&self) -> &[ReadData] {
        &self.parts
    }

    /// Keeps the first `len` bytes (all when there are fewer): windows are shortened, not
    /// copied (bytes of another kind are copied).
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        let (mut at, mut keep) = (0, 0);
        for part in &mut self.parts {
            let n = part.len();
            if at + n <= len {
                (at, keep) = (at + n, keep + 1);
                continue;
            }
            let cut = len - at;
            if cut > 0 {
                *part = match std::mem::replace(part, ReadData::Owned(Vec::new())) {
                    ReadData::Chunk(b, r) => ReadData::Chunk(b, r.start..r.start + cut),
                    ReadData::Fixed(b, r) => ReadData::Fixed(b, r.start..r.start + cut),
                    other => ReadData::Owned(other[..cut].to_vec()),
                };
                keep += 1;
            }
            break;
        }
        self.parts.truncate(keep);
        self.len = len;
    }

    /// The windows that hold bytes `range` (clamped to the bytes there are), in order.
    pub fn slices(&self, range: Range<usize>) -> Vec<IoSlice<'_>> {
        let mut out = Vec::new();
        let mut at = 0;
        for part in &self.parts {
            let (start, end) = (at, at + part.len());
            at = end;
            if end <= range.start {
                continue;
            }
            if start >= range.end {
                break;
            }
            let from = range.start.max(start) - start;
            let to = range.end.min(end) - start;
            out.push(IoSlice::new(&part[from..to]));
        }
        out
    }

    /// Bytes `range` copied into one buffer (tests, and stores that take one slice).
    pub fn to_vec(&self, range: Range<usize>) -> Vec<u8> {
        let mut out = Vec::with_capacity(range.len().min(self.len));
        for s in self.slices(range) {
            out.extend_from_slice(&s);
        }
        out
    }
}

impl From<ReadData> for Pieces {
    fn from(part: ReadData) -> Pieces {
        let mut p = Pieces::new();
        p.push(part);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn windows_of_one_buffer_that_continue_merge_and_slices_cut_any_range() {
        let a = Arc::new((0u8..100).collect::<Vec<u8>>());
        let b = Arc::new((100u8..200).collect::<Vec<u8>>());
        let mut p = Pieces::new();
        p.push(ReadData::Chunk(a.clone(), 10..20));
        p.push(ReadData::Chunk(a.clone(), 20..30));
        p.push(ReadData::Chunk(b.clone(), 0..5));
        p.push(ReadData::Owned(Vec::new()));
        p.push(ReadData::Owned(vec![7, 8]));
        assert_eq!(p.len(), 27);
        assert_eq!(p.parts(), 3);
        let all: Vec<u8> = (10u8..30).chain(100..105).chain([7, 8]).collect();
        assert_eq!(p.to_vec(0..27), all);
        for (s, e) in [(0, 1), (5, 25), (19, 21), (20, 27), (26, 40), (30, 40)] {
            let want = &all[s.min(27)..e.min(27)];
            assert_eq!(p.to_vec(s..e), want, "{s}..{e}");
        }
        // Truncated anywhere: the same bytes up to there, the windows shortened.
        for len in [27, 26, 25, 24, 20, 21, 19, 1, 0] {
            let mut q = Pieces::new();
            q.push(ReadData::Chunk(a.clone(), 10..30));
            q.push(ReadData::Chunk(b.clone(), 0..5));
            q.push(ReadData::Owned(vec![7, 8]));
            q.truncate(len);
            assert_eq!(q.len(), len);
            assert_eq!(q.to_vec(0..40), &all[..len], "truncated to {len}");
            if len > 0 {
                assert!(
                    matches!(q.as_parts()[0], ReadData::Chunk(..)),
                    "copied at {len}"
                );
            }
            let windows = if len > 25 {
                3
            } else if len > 20 {
                2
            } else {
                usize::from(len > 0)
            };
            assert_eq!(q.parts(), windows, "truncated to {len}");
        }
    }
}
