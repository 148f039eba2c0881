//! The read plan: which path a read of one chunk takes, as a pure function of what the caller
//! knows of the access (the [`Pattern`] of `access.rs`) and of the chunk (unit-tested on its
//! own).
//!
//! - A read that continues a scan (or a first read at offset 0 that is large or takes the
//!   whole chunk) decodes the whole chunk through the cache and prefetches.
//! - A small read (at most [`RANGE_READ_MAX`], and the chunk more than `range_factor` times
//!   larger) that is not part of a scan, of a chunk not cached nor being loaded, decodes only
//!   the blocks it overlaps (pages, block cache, range decode).
//! - A part of the chunk its reader chose ([`Pattern::Part`]: a Zarr shard's inner chunks),
//!   at most half the chunk, of a chunk not cached nor being loaded, decodes only the blocks
//!   it overlaps, whatever its size.
//! - Anything else takes the whole chunk, without prefetch.
//!
//! `head -c`, `dd bs=4k` and magic-number sniffers read a few KiB from the start of a file:
//! such a first read at 0 must not decode the whole chunk and prefetch the next ones. Their
//! next read, if any, continues where this one ended and is sequential.

use std::ops::Range;

use super::RANGE_READ_MAX;
use super::access::Pattern;

/// The path a read takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Decode only the overlapped blocks (with the block and page caches).
    Small,
    /// The whole chunk through the cache, and prefetch what follows.
    Whole,
    /// The whole chunk through the cache, without prefetch.
    WholeNoPrefetch,
}

/// The plan of a read of window `r` of a chunk of `nbytes` (`cached`: the chunk is cached or
/// being loaded).
pub fn plan(
    pattern: Pattern,
    r: Range<usize>,
    nbytes: usize,
    range_factor: usize,
    cached: bool,
) -> Plan {
    let sequential = match pattern {
        Pattern::Sequential => true,
        Pattern::Random | Pattern::Part => false,
        Pattern::FirstAtZero => r.end == nbytes || r.len() > RANGE_READ_MAX,
    };
    if sequential {
        return Plan::Whole;
    }
    let small = match pattern {
        Pattern::Part => r.len() <= nbytes / 2,
        _ => r.len() <= RANGE_READ_MAX && nbytes / range_factor.max(1) > r.len(),
    };
    if small && !cached {
        Plan::Small
    } else {
        Plan::WholeNoPrefetch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn parts_a_reader_chose_decode_their_blocks_unless_most_of_the_chunk() {
        assert_eq!(
            plan(Pattern::Part, MIB..2 * MIB, 8 * MIB, 4, false),
            Plan::Small
        );
        assert_eq!(
            plan(Pattern::Part, 0..4 * MIB, 8 * MIB, 4, false),
            Plan::Small
        );
        assert_eq!(
            plan(Pattern::Part, 0..5 * MIB, 8 * MIB, 4, false),
            Plan::WholeNoPrefetch
        );
        assert_eq!(
            plan(Pattern::Part, MIB..2 * MIB, 8 * MIB, 4, true),
            Plan::WholeNoPrefetch
        );
    }

    #[test]
    fn scans_take_whole_chunks_and_prefetch() {
        assert_eq!(
            plan(Pattern::Sequential, 0..4096, 8 * MIB, 4, false),
            Plan::Whole
        );
        assert_eq!(
            plan(Pattern::FirstAtZero, 0..MIB, 8 * MIB, 4, false),
            Plan::Whole
        );
        // A first read that takes the whole (small) chunk.
        assert_eq!(
            plan(Pattern::FirstAtZero, 0..100, 100, 4, false),
            Plan::Whole
        );
    }

    #[test]
    fn small_first_reads_and_random_reads_decode_blocks() {
        assert_eq!(
            plan(Pattern::FirstAtZero, 0..4096, 8 * MIB, 4, false),
            Plan::Small
        );
        assert_eq!(
            plan(Pattern::Random, MIB..MIB + 4096, 8 * MIB, 4, false),
            Plan::Small
        );
    }

    #[test]
    fn cached_or_large_or_small_chunk_reads_take_the_whole_chunk_without_prefetch() {
        let whole = Plan::WholeNoPrefetch;
        assert_eq!(plan(Pattern::Random, 0..4096, 8 * MIB, 4, true), whole);
        assert_eq!(
            plan(Pattern::Random, 0..RANGE_READ_MAX + 1, 8 * MIB, 4, false),
            whole
        );
        // The chunk is not more than range_factor times larger than the read.
        assert_eq!(plan(Pattern::Random, 0..4096, 16 * 1024, 4, false), whole);
    }
}
