//! Rows stored ahead of a walk down a column of `array.npy` (a tall strip through a map):
//! once a page fault is known to continue a walk, the pages of the walk's next rows are
//! offered with no answer waiting for them, so that the reader walks through pages already
//! in the page cache instead of waiting at each fault for its rows' stores.
//!
//! The rows ahead leave out one page: the one where the walk's next fault is expected (the
//! row after the pages offered below this fault). The reader faults there, which says where
//! it is: that fault finds its rows below offered already (it offers none itself) and offers
//! the rows after its own next fault. So the lead is one fault's rows ahead of the reader,
//! and it ends with the walk: a reader that stops walking (a fault elsewhere, another file,
//! the end of the array) makes no fault that offers more, and at most one fault's rows were
//! offered for nothing ([`Leads`] counts them). Nothing is offered for a read-write tree or a
//! fault that is no walk ([`Tree::pages_near`]'s rules).

use super::faults::Leads;
use super::{NEAR_PAGES, PAGE, below_pages, page_below, row_stride};
use crate::reader::Pieces;
use crate::tree::Tree;

impl Tree {
    /// After a page fault of `array.npy` (inode `ino`) at `offset` (as [`Tree::pages_near`]
    /// takes them) has been answered: when it continues a walk down a column
    /// ([`Tree::fault_ahead`]), the pages of the walk's next rows to store ahead of the
    /// reader: the same columns of the 64 rows below the page where the walk's next fault is
    /// expected (the row after the 64 below this fault), leaving that page out, as far as
    /// their blocks are decoded already (the walk asked the prefetch threads for them two
    /// faults ahead, [`Tree::walk_ahead`]): nothing is decoded or waited for here, so the
    /// worker that calls this goes back to its requests at once. Rows whose blocks are not
    /// decoded yet are offered below the walk's next fault as usual.
    ///
    /// Nothing on a read-write tree, for reads that are not page faults of `array.npy`, or
    /// for a fault that does not walk. The walk's next fault, when it comes at the page
    /// expected, offers no rows below itself up to the last page offered here (they are in
    /// the page cache or queued).
    pub fn walk_lead(&self, ino: u64, offset: u64, size: u32) -> Vec<(u64, Pieces)> {
        let mut pages = Vec::new();
        let Some((array, npy)) = self.fault_view(ino, offset, size) else {
            return pages;
        };
        let stride = row_stride(&npy);
        if stride < PAGE || !self.faults.lock().walking(ino, offset) {
            return pages;
        }
        let expected = page_below(offset, NEAR_PAGES + 1, stride);
        let Some(expected) = expected.filter(|&at| at < npy.len()) else {
            return pages;
        };
        let store = self.reader.pinned(array);
        // Only blocks decoded already: this runs on a FUSE worker, which waits for no decode.
        let mut decodes = 0;
        let mut to = 0;
        for at in below_pages(&npy, expected, NEAR_PAGES) {
            let end = (at + PAGE).min(npy.len());
            let span = at..end;
            let Some(page) = self.page_of((store.as_ref(), array), &npy, span, &mut decodes) else {
                break;
            };
            pages.push((at, Pieces::from(page)));
            to = at;
        }
        if !pages.is_empty() {
            let n = pages.len() as u64;
            self.faults.lock().lead((ino, offset), expected, to, n);
        }
        pages
    }

    /// The pages offered ahead of walks down a column so far ([`Tree::walk_lead`]), and how
    /// many of them lay above a fault where their walk was expected to fault next.
    pub fn walk_leads(&self) -> Leads {
        self.faults.lock().leads()
    }
}
