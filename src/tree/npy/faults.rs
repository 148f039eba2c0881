//! The latest page faults of `array.npy` files, which tell how a mapped reader goes: down a
//! column (a walk), through the file in order within a row (a scan), or a range at a time
//! (a mapped scan, `mapped.rs`).

use super::BELOW_DECODES;
use super::{NEAR_PAGES, PAGE, RECENT_FAULTS, SCAN_DECODES, SCAN_PAGES, WALK_FAULTS};

/// The latest page faults of `array.npy` files, newest last, the count of the pages
/// offered ahead of walks, and the bytes of `table.npy` whose blocks mapped scans asked for
/// (`ctable.rs`).
#[derive(Debug, Default)]
pub(in crate::tree) struct RecentFaults(std::collections::VecDeque<Fault>, Leads, u64);

/// Pages offered ahead of walks down a column (`walk.rs`): all of them, and those whose walk
/// reached the fault expected below them (the others were offered for nothing, or their walk
/// is still on its way there).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Leads {
    /// Pages offered ahead.
    pub pages: u64,
    /// Of those, the pages whose walk faulted where it was expected to, below them.
    pub reached: u64,
}

/// A page fault [`RecentFaults`] remembers.
#[derive(Debug, Clone, Copy)]
struct Fault {
    ino: u64,
    offset: u64,
    /// Faults in a row down its column up to this one.
    walk: u32,
    /// The file's latest fault lies less than a row before it.
    follows: bool,
    /// It continues a scan in file order: it follows the file's latest fault, which followed
    /// the one before (the second fault of a row may be a window's second page column).
    scan: bool,
    /// It continues a mapped scan (`mapped.rs`): it lies at the page where the file's
    /// latest fault expected the next one, after more than a row offered in file order or
    /// as the step of a mapped scan already (rows shorter than a page: as the third such
    /// fault in a row, [`RecentFaults::note`]).
    mapped: bool,
    /// Faults in a row before it, each at the page where the one before expected the next.
    steps: u32,
    /// Where the reader is expected to fault next, after the pages offered after it in file
    /// order (0 before they are).
    forward_end: u64,
    /// Where the pages offered after it in file order end (past `forward_end` when pages
    /// are offered beyond the next fault's page: `mapped.rs`).
    offered_end: u64,
    /// The `offered_end` of the file's latest fault before it.
    before_end: u64,
    /// How far the faults of its mapped scan, up to it, asked the prefetch threads for the
    /// blocks of `table.npy` (`ctable.rs`; 0: nothing asked).
    asked_to: u64,
    /// When it walks and its rows ahead were offered (`walk.rs`): the page where the walk's
    /// next fault is expected (the page the rows ahead leave out), else 0.
    lead: u64,
    /// The last page offered below that expected page (0 when none), and how many were.
    lead_to: u64,
    lead_pages: u64,
    /// Pages below it, up to this one, were offered ahead by the walk's fault before it
    /// (it lies at the page that fault expected); 0 when none were.
    led_to: u64,
}

/// How far below a page fault [`crate::tree::Tree::pages_near`] offers pages: rows, and
/// blocks decoded for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reach {
    pub(super) rows: u64,
    pub(super) decodes: usize,
}

impl Reach {
    pub(super) const NEAR: Reach = Reach {
        rows: NEAR_PAGES,
        decodes: BELOW_DECODES,
    };
    pub(super) const SCAN: Reach = Reach {
        rows: SCAN_PAGES,
        decodes: SCAN_DECODES,
    };
}

impl RecentFaults {
    /// Notes a fault of inode `ino` at `offset` (rows `stride` bytes long, at least a page)
    /// and returns how many faults in a row walked down its column to it: one more than one
    /// of the file's latest two faults when that one lies at most [`NEAR_PAGES`] + 1 rows
    /// above it in the same column (within a page: faults are page-aligned), else 1. Only
    /// the latest two: a reader walking down a column faults on nothing else meanwhile (or
    /// on the next page of the same rows, when its columns straddle two pages), while a
    /// reader of whole rows through a map (a sum over the file) faults on every column of
    /// a row before it comes back to the first one, 33 or 65 rows below.
    ///
    /// The fault continues a scan in file order when the file's latest fault lies before it,
    /// less than a row before, and that one did too or walked down a column
    /// ([`RecentFaults::reach`]): the second fault within a row after a window's first is
    /// its second page column.
    ///
    /// Rows shorter than a page (`stride` below [`PAGE`]: a 1-D array) have no columns to
    /// walk down and no rows below: such a fault is never part of a walk, and it continues
    /// a mapped scan from the third fault in a row at the page the one before expected (a
    /// slice that only straddles the end of a fault's block faults twice in a row).
    pub(super) fn note(&mut self, ino: u64, offset: u64, stride: u64) -> u32 {
        let flat = stride < PAGE;
        let latest = self.0.iter().rev().find(|f| f.ino == ino);
        let follows =
            !flat && latest.is_some_and(|f| f.offset < offset && offset - f.offset < stride);
        // A window whose columns straddle two pages faults on the second within the row of
        // its first fault: all of its rows below are read (measured: 32 rows there made a
        // third fault at row 33; BENCHMARKS.md, "Session 20: windows"). Not after a fault
        // of a walk down a column (a strip's later faults: measured slower).
        let scan = follows && latest.is_some_and(|f| f.follows || f.walk > 1);
        let expected = latest.filter(|f| f.forward_end == offset && f.offset < offset);
        let steps = expected.map_or(0, |f| f.steps.saturating_add(1));
        // A window whose columns straddle the end of the pages offered after its first
        // fault faults there too, but those pages were less than a row.
        let mapped = expected.is_some_and(|f| {
            f.mapped
                || if flat {
                    steps >= 2
                } else {
                    f.forward_end - f.offset > stride
                }
        });
        let before_end = latest.map_or(0, |f| f.offered_end);
        let asked_to = expected.map_or(0, |f| f.asked_to);
        // The walk's fault before offered the rows below this page ahead: one of the file's
        // latest two faults (a strip whose columns straddle two pages faults on both).
        // Counted once: the walk's fault before expects no other fault there.
        let led = self
            .0
            .iter_mut()
            .rev()
            .filter(|f| f.ino == ino)
            .take(2)
            .find(|f| f.lead == offset && f.lead != 0)
            .map(|f| {
                f.lead = 0;
                (f.lead_to, f.lead_pages)
            });
        let led_to = led.map_or(0, |(to, pages)| {
            self.1.reached = self.1.reached.saturating_add(pages);
            to
        });
        let above = |&&Fault {
                         ino: i, offset: at, ..
                     }: &&Fault| {
            if flat {
                return false;
            }
            let d = offset.wrapping_sub(at);
            let (rows, shift) = (d / stride, d % stride);
            i == ino
                && at < offset
                && (shift < PAGE || stride - shift < PAGE)
                && (1..=NEAR_PAGES + 1).contains(&(rows + u64::from(stride - shift < PAGE)))
        };
        let n = self
            .0
            .iter()
            .rev()
            .filter(|f| f.ino == ino)
            .take(2)
            .find(above)
            .map_or(1, |f| f.walk.saturating_add(1));
        if self.0.len() >= RECENT_FAULTS {
            self.0.pop_front();
        }
        self.0.push_back(Fault {
            ino,
            offset,
            walk: n,
            follows,
            scan,
            mapped,
            steps,
            forward_end: 0,
            offered_end: 0,
            before_end,
            asked_to,
            lead: 0,
            lead_to: 0,
            lead_pages: 0,
            led_to,
        });
        n
    }

    /// Whether the fault of inode `ino` at `offset` is at least the [`WALK_FAULTS`]th in a row
    /// down its column (and continues no mapped scan).
    pub(super) fn walking(&self, ino: u64, offset: u64) -> bool {
        self.find(ino, offset)
            .is_some_and(|f| f.walk >= WALK_FAULTS && !f.mapped)
    }

    /// The last page below the fault of inode `ino` at `offset` that the walk's fault before
    /// it offered ahead (0 when none did).
    pub(super) fn led_to(&self, ino: u64, offset: u64) -> u64 {
        self.find(ino, offset).map_or(0, |f| f.led_to)
    }

    /// Notes that `pages` pages below page `expected`, up to page `to`, were offered ahead of
    /// the walking fault of inode `ino` at `offset`, leaving out `expected`: the walk's next
    /// fault, expected there, finds them offered.
    pub(super) fn lead(&mut self, (ino, offset): (u64, u64), expected: u64, to: u64, pages: u64) {
        if let Some(f) = self.find_mut(ino, offset) {
            (f.lead, f.lead_to, f.lead_pages) = (expected, to, pages);
            self.1.pages = self.1.pages.saturating_add(pages);
        }
    }

    /// How far the mapped scan of the fault of inode `ino` at `offset` asked for blocks
    /// before it (0 when nothing was, or the fault is not remembered).
    pub(super) fn asked_to(&self, ino: u64, offset: u64) -> u64 {
        self.find(ino, offset).map_or(0, |f| f.asked_to)
    }

    /// Notes that the fault of inode `ino` at `offset` asked for blocks up to `to` (all of
    /// them before it), `bytes` of the file in all.
    pub(super) fn asked(&mut self, (ino, offset): (u64, u64), to: u64, bytes: u64) {
        if let Some(f) = self.find_mut(ino, offset) {
            f.asked_to = to;
        }
        self.2 = self.2.saturating_add(bytes);
    }

    /// Bytes of `table.npy` whose blocks mapped scans asked for so far.
    pub(super) fn asked_bytes(&self) -> u64 {
        self.2
    }

    /// The pages offered ahead of walks so far.
    pub(super) fn leads(&self) -> Leads {
        self.1
    }

    /// The fault of inode `ino` at `offset`, when it is remembered.
    fn find(&self, ino: u64, offset: u64) -> Option<&Fault> {
        self.0
            .iter()
            .rev()
            .find(|f| f.ino == ino && f.offset == offset)
    }

    /// The same, to note more of it.
    fn find_mut(&mut self, ino: u64, offset: u64) -> Option<&mut Fault> {
        self.0
            .iter_mut()
            .rev()
            .find(|f| f.ino == ino && f.offset == offset)
    }

    /// Whether the fault of inode `ino` at `offset` continues a mapped scan.
    pub(super) fn mapped(&self, ino: u64, offset: u64) -> bool {
        self.find(ino, offset).is_some_and(|f| f.mapped)
    }

    /// Notes that the pages offered after the fault of inode `ino` at `offset` in file order
    /// end at `end`.
    pub(super) fn forwarded(&mut self, ino: u64, offset: u64, end: u64, offered: u64) {
        if let Some(f) = self.find_mut(ino, offset) {
            f.forward_end = end;
            f.offered_end = offered;
        }
    }

    /// The `offered_end` of the file's latest fault before the one of inode `ino` at
    /// `offset`.
    pub(super) fn offered_before(&self, ino: u64, offset: u64) -> u64 {
        self.find(ino, offset).map_or(0, |f| f.before_end)
    }

    /// How far below the fault of inode `ino` at `offset` (its latest one noted) pages are
    /// offered: [`SCAN_PAGES`] when it continues a scan in file order, else [`NEAR_PAGES`]
    /// (also for a fault not noted).
    pub(super) fn reach(&self, ino: u64, offset: u64) -> Reach {
        let scan = self.find(ino, offset).is_some_and(|f| f.scan);
        if scan { Reach::SCAN } else { Reach::NEAR }
    }
}
