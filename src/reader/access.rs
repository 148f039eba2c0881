//! The access pattern of one open file, one detector for every file that shows chunks (chunk
//! files, `array.npy`, the Zarr view's chunk objects): [`Access`] follows a handle's reads and
//! gives each a [`ReadHint`], which says how the read continues the earlier ones
//! ([`Pattern`], the read plan's input), whether the handle streams the file from its start,
//! and how long its current stream is ([`ReadHint::scan`], whether an assembled file's read
//! takes whole chunks). A re-laid-out Zarr object is one chunk read whole by Zarr readers: it
//! takes the whole chunk unless the read is [`Pattern::Random`] (`scan`'s length threshold is
//! for files of many chunks, like `array.npy`).

/// How a read continues the earlier reads of its handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// The handle's first read, at offset 0.
    FirstAtZero,
    /// Where the previous read ended, or back at offset 0.
    Sequential,
    /// Anywhere else.
    Random,
    /// Not from the detector: a part of the chunk its reader chose (a Zarr shard's inner
    /// chunks, `-o zarr_shards`), to decode by the blocks it overlaps, whatever its size,
    /// unless it is most of the chunk.
    Part,
}

/// What the caller knows of the access a read belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadHint {
    /// How the read continues the earlier reads of its handle.
    pub pattern: Pattern,
    /// Every read of the handle so far continued the previous one from offset 0: reaching the
    /// chunk's end streams it once (when the caller also confirms it is the sole reader).
    pub streaming: bool,
    /// Bytes of the handle's current stream, this read included: reads that continue one
    /// another (requests of one large read served out of order count) and cover their span
    /// about once. A scan grows it without end; an mmap reader's page faults and the
    /// readahead around them start a new stream at every jump.
    pub stream: u64,
}

/// Bytes a handle reads in one stream before its reads of an assembled file (`array.npy`)
/// take whole chunks (and prefetch): enough that the readahead around an mmap reader's page
/// faults (up to a few MiB per jump) never counts as a scan, and little beside a scan of a
/// large array (the blocks decoded for its first 16 MiB are decoded again with their chunks:
/// under 2% of a 1 GiB `np.load`).
const SCAN_MIN: u64 = 16 << 20;

impl ReadHint {
    /// A read that belongs to no scan.
    pub const RANDOM: ReadHint = ReadHint {
        pattern: Pattern::Random,
        streaming: false,
        stream: 0,
    };

    /// Whether this read of a file of `len` bytes belongs to a scan (`np.load`, `cp`, an mmap
    /// reader going through the file in order): its handle has read at least `SCAN_MIN`
    /// bytes in one stream, or half the file. Other reads of an assembled file decode only
    /// the blocks they touch: a header read, a page fault and the readahead around it need a
    /// few rows of a few chunks, and decoding whole chunks for them costs far more.
    pub fn scan(self, len: u64) -> bool {
        self.stream >= SCAN_MIN.min(len / 2).max(1)
    }
}

/// How far apart two reads may be and still belong to one stream: the requests of one large
/// read may be served out of order (several FUSE threads, asynchronous direct I/O).
pub(super) const STREAM_GAP: u64 = 8 << 20;

/// A run of reads that continue one another: the span they cover and the bytes they asked
/// for.
#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    start: u64,
    end: u64,
    bytes: u64,
}

impl Stream {
    /// Adds a read of `size` bytes at `offset` (or starts a new stream with it, when it is far
    /// from this one) and returns the stream's bytes, or 0 when the reads cover their span
    /// more than twice over (the same regions read again and again are no scan).
    fn record(&mut self, offset: u64, size: u64) -> u64 {
        let end = offset.saturating_add(size);
        let near = self.bytes > 0
            && offset <= self.end.saturating_add(STREAM_GAP)
            && end.saturating_add(STREAM_GAP) >= self.start;
        if near {
            self.start = self.start.min(offset);
            self.end = self.end.max(end);
            self.bytes = self.bytes.saturating_add(size);
        } else {
            *self = Stream {
                start: offset,
                end,
                bytes: size,
            };
        }
        let span = self.end - self.start;
        if self.bytes > span.saturating_mul(2) {
            0
        } else {
            self.bytes
        }
    }
}

/// The reads of one handle so far, as far as the hint of the next one needs them.
#[derive(Debug, Clone)]
pub struct Access {
    /// Where a sequential scan's next read starts.
    next: u64,
    /// Every read so far continued the previous one, starting at offset 0.
    from_start: bool,
    /// The current stream.
    stream: Stream,
    /// Reads recorded so far.
    reads: u64,
}

impl Default for Access {
    fn default() -> Access {
        Access {
            next: 0,
            from_start: true,
            stream: Stream::default(),
            reads: 0,
        }
    }
}

impl Access {
    /// Records a read of `size` bytes at `offset` and says how it continues the earlier ones.
    pub fn record(&mut self, offset: u64, size: u64) -> ReadHint {
        let pattern = if offset == 0 && self.next == 0 {
            Pattern::FirstAtZero
        } else if offset == 0 || offset == self.next {
            Pattern::Sequential
        } else {
            Pattern::Random
        };
        self.from_start &= offset == self.next;
        self.next = offset.saturating_add(size);
        self.reads += 1;
        ReadHint {
            pattern,
            streaming: self.from_start,
            stream: self.stream.record(offset, size),
        }
    }

    /// Counts `len` bytes at `offset` into the current stream without a read (pages handed
    /// to the kernel's cache for this handle, which its reader will not ask for).
    pub fn credit(&mut self, offset: u64, len: u64) {
        self.stream.record(offset, len);
    }

    /// Reads recorded so far.
    pub fn reads(&self) -> u64 {
        self.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_scan_grows_one_stream_even_out_of_order() {
        let mut s = Stream::default();
        assert_eq!(s.record(0, MIB), MIB);
        // The requests of one large read served out of order.
        assert_eq!(s.record(2 * MIB, MIB), 2 * MIB);
        assert_eq!(s.record(MIB, MIB), 3 * MIB);
        for i in 3..32 {
            s.record(i * MIB, MIB);
        }
        assert_eq!(s.record(32 * MIB, MIB), 33 * MIB);
    }

    #[test]
    fn jumps_start_new_streams_and_rereads_are_no_scan() {
        let mut s = Stream::default();
        for i in 0..4 {
            s.record(500 * MIB + i * MIB, MIB);
        }
        // A window elsewhere: a new stream of its own.
        assert_eq!(s.record(100 * MIB, MIB), MIB);
        // The same region read again and again: not a scan.
        for _ in 0..4 {
            s.record(100 * MIB, MIB);
        }
        assert_eq!(s.record(100 * MIB, MIB), 0);
    }

    #[test]
    fn patterns_follow_the_previous_read() {
        let mut a = Access::default();
        let h = a.record(0, 4096);
        assert_eq!((h.pattern, h.streaming), (Pattern::FirstAtZero, true));
        let h = a.record(4096, 4096);
        assert_eq!((h.pattern, h.streaming), (Pattern::Sequential, true));
        let h = a.record(1 << 30, 4096);
        assert_eq!((h.pattern, h.streaming), (Pattern::Random, false));
        // Back at 0: sequential again, but no longer a stream from the start.
        let h = a.record(0, 4096);
        assert_eq!((h.pattern, h.streaming), (Pattern::Sequential, false));
        assert_eq!(a.reads(), 4);
    }

    #[test]
    fn a_scan_of_an_assembled_file_needs_scan_min_or_half_of_it() {
        let mut a = Access::default();
        let mut hint = ReadHint::RANDOM;
        // Readahead around a page fault of a large file: no scan.
        for i in 0..8 {
            hint = a.record(700 * MIB + i * 512 * 1024, 512 * 1024);
        }
        assert!(!hint.scan(1 << 30));
        for i in 8..40 {
            hint = a.record(700 * MIB + i * 512 * 1024, 512 * 1024);
        }
        assert!(hint.scan(1 << 30), "{hint:?}");
        // A small file: half of it is a scan.
        let mut a = Access::default();
        assert!(!a.record(0, 4096).scan(10_000));
        assert!(a.record(4096, 1000).scan(10_000));
        assert!(!ReadHint::RANDOM.scan(1));
    }

    #[test]
    fn credited_pages_grow_the_stream() {
        let mut a = Access::default();
        a.record(0, 4096);
        a.credit(4096, MIB);
        assert_eq!(a.record(MIB + 4096, 4096).stream, MIB + 8192);
        assert_eq!(a.reads(), 2);
    }
}
