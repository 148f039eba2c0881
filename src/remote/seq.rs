//! Sequential-access detection shared by the request plans of an object (chunk extents) and
//! of a prefix (chunk objects): two reads in order open a prefetch window after the one just
//! read, the window doubling (1, 2, 4, ... items) up to a byte cap; reads a few items behind
//! the last one (other threads finishing out of order) leave it alone, any other jump
//! resets it. It only says which items to fetch ahead; the plans fetch them.

use std::ops::Range;

/// How far behind the last item read a read may fall without breaking a sequence.
const BEHIND: usize = 8;

/// The state of one reader's sequence.
#[derive(Debug, Default)]
pub(crate) struct Sequence {
    /// The last item read.
    last: Option<usize>,
    /// The window in items (0: no prefetch).
    window: usize,
    /// Items before this one are already prefetched or read.
    ahead: usize,
}

impl Sequence {
    /// Records a read of item `i` of `n`. When it continues a sequence, returns the items
    /// after `i` inside the window that were not asked for before (possibly none): the
    /// window stops before the item whose `size` would take it past `cap` bytes, and before
    /// the first item `joins(i, j)` says does not follow `i` (another array's chunks).
    /// `top_up(new)` decides, when some of the window is already under way, whether the
    /// `new` items are worth asking for now (else they are left for a later read).
    pub(crate) fn read(
        &mut self,
        i: usize,
        n: usize,
        cap: u64,
        size: impl Fn(usize) -> u64,
        joins: impl Fn(usize, usize) -> bool,
        top_up: impl Fn(Range<usize>) -> bool,
    ) -> Option<Range<usize>> {
        match self.last {
            Some(l) if l == i => return None,
            Some(l) if i < l && l - i <= BEHIND => return None,
            // The next item, or one inside the window: sequential.
            Some(l) if i > l && i - l <= self.window + 1 => {
                self.window = (self.window * 2).clamp(1, n.max(1));
            }
            _ => {
                self.window = 0;
                self.ahead = i + 1;
            }
        }
        self.last = Some(i);
        if self.window == 0 {
            return None;
        }
        let mut to = i + 1;
        let mut bytes = 0u64;
        while to < n && to <= i + self.window && joins(i, to) {
            bytes += size(to);
            if bytes > cap {
                break;
            }
            to += 1;
        }
        let from = self.ahead.max(i + 1);
        if from > i + 1 && !top_up(from..to.max(from)) {
            return None;
        }
        self.ahead = to.max(self.ahead);
        Some(from..to.max(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &mut Sequence, i: usize) -> Option<Range<usize>> {
        s.read(i, 100, 10, |_| 1, |a, b| a / 50 == b / 50, |_| true)
    }

    #[test]
    fn the_window_doubles_up_to_its_cap_and_a_jump_resets_it() {
        let mut s = Sequence::default();
        assert_eq!(read(&mut s, 0), None, "one read is no sequence");
        assert_eq!(read(&mut s, 1), Some(2..3));
        assert_eq!(read(&mut s, 2), Some(3..5));
        assert_eq!(read(&mut s, 3), Some(5..8));
        assert_eq!(read(&mut s, 4), Some(8..13));
        // Capped at 10 items of 1 byte after the one read.
        assert_eq!(read(&mut s, 5), Some(13..16));
        assert_eq!(read(&mut s, 3), None, "a reader behind: no change");
        assert_eq!(read(&mut s, 6), Some(16..17));
        // Items of another group (50 onwards) are not part of the window.
        let mut t = Sequence::default();
        read(&mut t, 47);
        assert_eq!(read(&mut t, 48), Some(49..50));
        assert_eq!(read(&mut t, 49), Some(50..50));
        // A jump: no window until two reads in order again.
        assert_eq!(read(&mut s, 90), None);
        assert_eq!(read(&mut s, 91), Some(92..93));
    }
}
