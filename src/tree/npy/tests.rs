//! Unit tests of `npy.rs`: how page faults are told apart (walks down a column, scans in file
//! order).

use super::*;
use faults::Reach;

#[test]
fn faults_down_one_column_count_as_a_walk() {
    let mut f = RecentFaults::default();
    // Rows of 16 pages: a 64-row window faults once, a strip once every 65 rows.
    let row = 16 * PAGE;
    let at = |r: u64, page: u64| 4 * PAGE + r * row + page * PAGE;
    assert_eq!(f.note(7, at(10, 3), row), 1);
    assert_eq!(f.note(7, at(75, 3), row), 2);
    assert_eq!(f.note(7, at(0, 9), row), 1, "another column");
    assert_eq!(f.note(8, at(140, 3), row), 1, "another file");
    assert_eq!(f.note(7, at(140, 3), row), 3);
    assert_eq!(f.note(7, at(141, 3), row), 4, "a row not stored: one below");
    assert_eq!(
        f.note(7, at(207, 3), row),
        1,
        "66 rows below: no fault of this walk"
    );
    assert_eq!(
        f.note(7, at(60, 9), row),
        1,
        "the fault above is not among the file's latest two"
    );
    assert_eq!(f.note(7, at(160, 12), row), 1);
    assert_eq!(f.note(7, at(150, 12), row), 1, "above: no walk down");
    // A strip whose columns straddle two pages faults on both, row after row.
    assert_eq!(f.note(7, at(200, 4), row), 1);
    assert_eq!(f.note(7, at(200, 5), row), 1);
    assert_eq!(f.note(7, at(265, 4), row), 2);
    assert_eq!(f.note(7, at(265, 5), row), 2);
    assert_eq!(f.note(7, at(330, 4), row), 3);
    // Whole rows through a map: every column of a row faults before the first one
    // again, 33 rows below: no walk.
    for r in [400, 433, 466] {
        for page in 0..16 {
            assert_eq!(f.note(11, at(r, page), row), 1, "row {r}, page {page}");
        }
    }
    // Rows of 8,800 bytes: the same column lies at another place of the page each row.
    let (row, base) = (8800, 2 * PAGE);
    let page = |r: u64| (base + r * row + 100) / PAGE * PAGE;
    assert_eq!(f.note(9, page(0), row), 1);
    assert_eq!(f.note(9, page(65), row), 2);
    assert_eq!(f.note(9, page(100), row), 3);
    assert_eq!(f.note(9, page(165), row), 4);
    // Only the latest faults are remembered.
    for k in 0..RECENT_FAULTS as u64 {
        f.note(10, k * PAGE, row);
    }
    assert_eq!(f.note(9, page(200), row), 1);
}

#[test]
fn faults_of_a_scan_in_file_order_offer_fewer_rows_below() {
    let mut f = RecentFaults::default();
    let row = 16 * PAGE;
    let at = |r: u64, page: u64| 4 * PAGE + r * row + page * PAGE;
    assert_eq!(f.reach(7, at(0, 0)), Reach::NEAR, "a fault not noted");
    // Faults in turn (file, row, page): the reach each is given.
    let faults = [
        (7, 10, 3, Reach::NEAR, "the file's first fault"),
        (8, 10, 4, Reach::NEAR, "another file's fault before it"),
        // The next fault within the row: a window's second page column, all its rows read.
        (7, 10, 5, Reach::NEAR, "the second fault of a row"),
        // A scan: a third fault after the latest, within a row.
        (7, 10, 6, Reach::SCAN, "a third fault within the row"),
        (7, 11, 1, Reach::SCAN, "the next row, before its column"),
        // A row or more after the latest, or before it: a window somewhere else.
        (7, 12, 1, Reach::NEAR, "a row after the latest"),
        (7, 12, 0, Reach::NEAR, "before the latest"),
    ];
    for (file, r, page, want, what) in faults {
        f.note(file, at(r, page), row);
        assert_eq!(f.reach(file, at(r, page)), want, "{what}");
    }
    assert_eq!(
        f.reach(7, at(10, 6)),
        Reach::SCAN,
        "each fault keeps its own"
    );
}

#[test]
fn a_fault_continues_a_mapped_scan_at_the_page_expected_after_more_than_a_row() {
    let mut f = RecentFaults::default();
    let row = 16 * PAGE;
    let at = |r: u64, page: u64| 4 * PAGE + r * row + page * PAGE;
    // A window whose columns straddle the end of the pages offered after its first fault
    // (less than a row): its second fault there is no mapped scan.
    f.note(7, at(10, 3), row);
    f.forwarded(7, at(10, 3), at(10, 5), at(10, 5));
    f.note(7, at(10, 5), row);
    assert!(!f.mapped(7, at(10, 5)));
    // More than a row offered: a fault at the expected page continues a mapped scan, and so
    // does the next one at its expected page, with what the one before offered beyond it.
    f.forwarded(7, at(10, 5), at(12, 0), at(12, 0));
    f.note(7, at(12, 0), row);
    assert!(f.mapped(7, at(12, 0)));
    f.forwarded(7, at(12, 0), at(14, 0), at(16, 0));
    f.note(7, at(14, 0), row);
    assert!(f.mapped(7, at(14, 0)));
    assert_eq!(f.offered_before(7, at(14, 0)), at(16, 0));
    // Elsewhere (another page, another file): not.
    f.forwarded(7, at(14, 0), at(16, 0), at(18, 0));
    f.note(7, at(16, 1), row);
    assert!(!f.mapped(7, at(16, 1)));
    f.note(8, at(18, 0), row);
    assert!(!f.mapped(8, at(18, 0)));
}

#[test]
fn faults_of_rows_shorter_than_a_page_are_never_walks_and_step_a_mapped_scan() {
    let mut f = RecentFaults::default();
    // A 1-D array (stride 0): faults a page apart are no walk down a column.
    for k in 0..4 {
        assert_eq!(f.note(7, (10 + k) * PAGE, 0), 1, "fault {k}");
        assert_eq!(f.reach(7, (10 + k) * PAGE), Reach::NEAR);
    }
    // The third fault in a row where the one before expected the next continues a mapped
    // scan, even when those offered no page beyond their own reads; the second (a slice
    // straddling the end of the first fault's block) does not.
    f.forwarded(7, 13 * PAGE, 14 * PAGE, 14 * PAGE);
    f.note(7, 14 * PAGE, 0);
    assert!(!f.mapped(7, 14 * PAGE));
    f.forwarded(7, 14 * PAGE, 40 * PAGE, 40 * PAGE);
    f.note(7, 40 * PAGE, 0);
    assert!(f.mapped(7, 40 * PAGE));
    // Anywhere else: not (a page further, another file, before it).
    f.forwarded(7, 40 * PAGE, 300 * PAGE, 300 * PAGE);
    f.note(7, 301 * PAGE, 0);
    assert!(!f.mapped(7, 301 * PAGE));
    f.forwarded(7, 301 * PAGE, 302 * PAGE, 302 * PAGE);
    f.note(8, 302 * PAGE, 0);
    assert!(!f.mapped(8, 302 * PAGE));
    f.note(7, 5 * PAGE, 0);
    assert!(!f.mapped(7, 5 * PAGE));
    // Rows of 1,000 bytes (shorter than a page) count the same way.
    f.forwarded(7, 5 * PAGE, 6 * PAGE, 6 * PAGE);
    assert_eq!(f.note(7, 6 * PAGE, 1000), 1);
    assert!(!f.mapped(7, 6 * PAGE));
    f.forwarded(7, 6 * PAGE, 7 * PAGE, 7 * PAGE);
    f.note(7, 7 * PAGE, 1000);
    assert!(f.mapped(7, 7 * PAGE));
}

#[test]
fn a_walks_next_fault_at_the_page_expected_finds_its_rows_offered_ahead() {
    let mut f = RecentFaults::default();
    let row = 16 * PAGE;
    let at = |r: u64, page: u64| 4 * PAGE + r * row + page * PAGE;
    for r in [0, 65, 130] {
        f.note(7, at(r, 3), row);
    }
    assert!(f.walking(7, at(130, 3)));
    assert!(!f.walking(7, at(65, 3)), "the second fault of a walk");
    // Rows 196-259 offered ahead of the fault at row 130; its next is expected at 195.
    f.lead((7, at(130, 3)), at(195, 3), at(259, 3), 64);
    assert_eq!(
        f.leads(),
        Leads {
            pages: 64,
            reached: 0
        }
    );
    f.note(7, at(195, 3), row);
    assert_eq!(f.led_to(7, at(195, 3)), at(259, 3));
    assert_eq!(
        f.leads(),
        Leads {
            pages: 64,
            reached: 64
        }
    );
    // Another fault there (a duplicate) is not counted again; a fault elsewhere has none.
    f.note(7, at(195, 3), row);
    assert_eq!(f.led_to(7, at(195, 3)), 0);
    f.lead((7, at(195, 3)), at(260, 3), at(324, 3), 64);
    f.note(7, at(261, 3), row);
    assert_eq!(f.led_to(7, at(261, 3)), 0, "not the page expected");
    f.note(8, at(260, 3), row);
    assert_eq!(f.led_to(8, at(260, 3)), 0, "another file");
    assert_eq!(
        f.leads(),
        Leads {
            pages: 128,
            reached: 64
        }
    );
}
