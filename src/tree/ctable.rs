//! `table.npy` of a python-blosc2 CTable inside a store (read-only): the table's valid rows
//! as one structured NPY file beside the group's own subtree (`_meta/`, `_cols/<col>/`,
//! `_valid_rows/`, `_indexes/`), which stays as it was. The pure geometry is the container
//! layer's ([`crate::container::npy::ctable`]).
//!
//! Rules:
//! - **Recognised by names at mount** ([`is_ctable_group`]): a group with a leaf `_meta`, a
//!   leaf `_valid_rows` and a group `_cols` gets a `table.npy` node; nothing is opened then
//!   (a store of 10,000 members mounts as fast as before).
//! - **Laid out on first `stat` or `open`** ([`Tree::ctable_view`]): the group's `_meta`,
//!   `_valid_rows` and column leaves are laid out as if their directories were visited, the
//!   schema read from `_meta`'s attributes, and the mask read once into runs of valid rows
//!   (a mask chunk stored as special zeros or uninitialised, a stretch of deleted rows
//!   python-blosc2 writes that way, is not read: its rows are invalid).
//!   A table whose schema `table.npy` cannot show, whose column is missing or damaged, gives
//!   EIO on `table.npy` with a log line; a mask of more than
//!   [`crate::container::npy::ctable::MAX_RUNS`] runs or
//!   [`crate::container::npy::ctable::MAX_MASK_ROWS`] rows gives EFBIG. Every other file
//!   works.
//! - **Reads** assemble the requested rows from each column's bytes for the physical rows
//!   they span, read through the reader (block reads for small windows, whole chunks for
//!   scans) once per column when the deleted rows in between are at most as many as the rows
//!   read, else once per run of valid rows; each row's bytes go to the column's offset in
//!   its record. Page faults of a mapped reader are told apart and a mapped scan is answered
//!   a range at a time, assembled from the columns' blocks (`src/tree/npy/ctable.rs`).
//! - **One version per view.** A view holds the versions of `_meta`, `_valid_rows` and the
//!   columns it was rendered from; a read-only descriptor reads the view it opened. When
//!   the mount follows another writer and any of those arrays was reloaded, the next
//!   `stat`, `open` or read renders the view again.
//! - **A failed read is tried again.** A failure to read what the view is made of (the
//!   mask, `_meta`'s attributes: an S3 or HTTP hiccup, a file briefly unreadable) is kept
//!   for [`RETRY_AFTER`], doubled for each failure in a row with the same reason (up to
//!   64 times: a mask that never decodes is not read again every second); the first access
//!   after that renders the view again (one access at a time: the others meanwhile get the
//!   kept error). A table that cannot be shown by
//!   what it holds (its schema, its row counts, too many runs) is kept until an array it
//!   read changes. A view is swapped in only once wholly rendered. A failure is logged when
//!   it first happens or its reason changes, and the recovery once.
//! - Writes, truncation and renames are refused: EROFS (a view, not a stored array).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::handle::Pinned;
use super::layout::{FileKind, NodeKind};
use super::{Entry, Tree, TreeError};
use crate::container::ChunkKind;
use crate::container::npy::Dtype;
use crate::container::npy::Npy;
use crate::container::npy::ctable::{
    CTableNpy, MAX_MASK_ROWS, MAX_RUNS, RunBuilder, schema_columns,
};
use crate::container::npy::dtype;
use crate::reader::{ArrayId, ChunkStore, ReadData, ReadHint};

/// Physical rows `(first, count)` read in one go per column, and the `(logical row,
/// physical row, rows)` runs placed from them.
type Span = (u64, u64, Vec<(u64, u64, u64)>);

/// Bytes of the mask read at a time while it is turned into runs.
const MASK_STEP: u64 = 1 << 20;

/// Most bytes a read assembles at once beyond what it returns (two partial records).
const MAX_READ: u64 = 64 << 20;

/// How long a view that failed to read its arrays keeps the failure before the next access
/// renders it again.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Whether a group whose children are `(name, is a leaf)` is a CTable's: a leaf `_meta`, a
/// leaf `_valid_rows` and a group `_cols`.
pub(crate) fn is_ctable_group<'a>(children: impl Iterator<Item = (&'a str, bool)>) -> bool {
    let (mut meta, mut valid, mut cols) = (false, false, false);
    for (name, leaf) in children {
        match (name, leaf) {
            ("_meta", true) => meta = true,
            ("_valid_rows", true) => valid = true,
            ("_cols", false) => cols = true,
            _ => {}
        }
    }
    meta && valid && cols
}

/// The `table.npy` node of a CTable group, before and after its first access.
#[derive(Debug)]
pub struct CTableFile {
    /// The group's key (for log lines).
    pub(super) group: String,
    /// Inodes of the group's `_meta` and `_valid_rows` leaf directories and `_cols` directory.
    pub(super) meta: u64,
    pub(super) valid: u64,
    pub(super) cols: u64,
    /// The view as last rendered (or why there is none), and the array versions it read.
    state: Mutex<Option<Rendered>>,
}

impl CTableFile {
    /// The node of a group `group` whose `_meta`, `_valid_rows`, `_cols` are those inodes.
    pub(crate) fn new(group: String, meta: u64, valid: u64, cols: u64) -> CTableFile {
        CTableFile {
            group,
            meta,
            valid,
            cols,
            state: Mutex::new(None),
        }
    }

    /// The view rendered last, if it rendered (no rendering here).
    pub(crate) fn rendered(&self) -> Option<Arc<CTableView>> {
        match self.state.lock().as_ref().map(|r| &r.view) {
            Some(Ok(v)) => Some(v.clone()),
            _ => None,
        }
    }
}

/// A rendering of `table.npy`, and the array versions it was made from.
#[derive(Debug)]
struct Rendered {
    /// The arrays read (`_meta`, `_valid_rows`, columns) with the versions read.
    read: Vec<(ArrayId, Arc<dyn ChunkStore>)>,
    view: Result<Arc<CTableView>, Failure>,
    /// When it was rendered (or last tried again).
    at: Instant,
    /// Renders in a row that failed for the same reason: the retry waits
    /// [`RETRY_AFTER`] doubled for each (up to 64 times), so a mask that never decodes is
    /// not read again every second.
    fails: u32,
}

impl Rendered {
    /// How long its failure is kept before the next access renders it again.
    fn retry_after(&self) -> std::time::Duration {
        RETRY_AFTER * (1u32 << self.fails.saturating_sub(1).min(6))
    }
}

/// Why a CTable has no `table.npy` (kept until one of the arrays read changes, or for
/// [`RETRY_AFTER`] when `retry`).
#[derive(Debug, Clone)]
struct Failure {
    why: Arc<str>,
    too_big: bool,
    /// A read failed (I/O, a chunk that did not decode): the next access after
    /// [`RETRY_AFTER`] tries again.
    retry: bool,
}

impl Failure {
    fn error(&self) -> TreeError {
        match self.too_big {
            true => TreeError::TooBig(self.why.to_string()),
            false => TreeError::Unavailable(self.why.to_string()),
        }
    }
}

/// One column of a rendered view.
#[derive(Debug)]
pub(crate) struct ViewColumn {
    pub(crate) array: ArrayId,
    /// The column array's own NPY view (its layout maps row bytes to chunks).
    pub(crate) npy: Arc<Npy>,
    /// The version read.
    store: Arc<dyn ChunkStore>,
}

/// `table.npy` as rendered: the geometry and the columns' versions.
#[derive(Debug)]
pub(crate) struct CTableView {
    pub(crate) npy: CTableNpy,
    pub(crate) columns: Vec<ViewColumn>,
}

impl ViewColumn {
    /// The version of the column read.
    pub(crate) fn store(&self) -> Arc<dyn ChunkStore> {
        self.store.clone()
    }
}

impl CTableView {
    /// The arrays of the columns.
    pub(crate) fn arrays(&self) -> impl Iterator<Item = ArrayId> + '_ {
        self.columns.iter().map(|c| c.array)
    }
}

impl Tree {
    /// The child named `name` of directory `dir` (a leaf's laid out now if it was not).
    fn child_named(&self, dir: u64, name: &str) -> Result<u64, String> {
        let node = self.node(dir).ok_or("no such directory")?;
        let children = self.children(dir, node).map_err(|e| e.to_string())?;
        children
            .iter()
            .copied()
            .find(|&c| self.node(c).is_some_and(|n| n.name == name))
            .ok_or_else(|| format!("no {name}"))
    }

    /// Whether native directory `n` is part of a python-blosc2 CTable the tree shows with a
    /// `table.npy`: its `_meta` or `_valid_rows` leaf, or a column leaf in its `_cols`.
    pub(crate) fn in_ctable(&self, n: u64) -> bool {
        let of = |group: u64| -> Option<(u64, u64, u64)> {
            let ino = self.child_named(group, "table.npy").ok()?;
            match self.entry(ino).ok()? {
                Entry::File(FileKind::CTableNpy(f)) => Some((f.meta, f.valid, f.cols)),
                _ => None,
            }
        };
        let Some(parent) = self.node(n).map(|x| x.parent) else {
            return false;
        };
        if of(parent).is_some_and(|(meta, valid, _)| n == meta || n == valid) {
            return true;
        }
        let grand = self.node(parent).map(|x| x.parent);
        grand
            .and_then(of)
            .is_some_and(|(_, _, cols)| cols == parent)
    }

    /// The array shown by leaf directory `leaf` and its `array.npy` view.
    fn leaf_array(&self, leaf: u64, what: &str) -> Result<(ArrayId, Arc<Npy>), String> {
        let npy = self
            .child_named(leaf, "array.npy")
            .map_err(|e| format!("{what}: {e}"))?;
        match self.node(npy).map(|n| &n.kind) {
            Some(NodeKind::File(FileKind::Npy(id, cell))) => Ok((*id, cell.get())),
            _ => Err(format!("{what}: no array")),
        }
    }

    /// The `table.npy` view of node `ino` (`file`), rendered now if it never was or if an
    /// array it read has been reloaded since.
    ///
    /// # Errors
    /// [`TreeError::Unavailable`] (EIO) when the table cannot be shown,
    /// [`TreeError::TooBig`] (EFBIG) past the run bound.
    pub(crate) fn ctable_view(
        &self,
        ino: u64,
        file: &CTableFile,
    ) -> Result<Arc<CTableView>, TreeError> {
        let (failed_before, fails) = {
            let mut state = file.state.lock();
            match state.as_mut().filter(|r| !self.stale(&r.read)) {
                Some(r) => match &r.view {
                    Ok(v) => return Ok(v.clone()),
                    Err(f) if !f.retry || r.at.elapsed() < r.retry_after() => {
                        return Err(f.error());
                    }
                    // Tried again by this access alone: the others keep the error meanwhile.
                    Err(f) => {
                        r.at = Instant::now();
                        (Some(f.why.clone()), r.fails)
                    }
                },
                None => (
                    state
                        .as_ref()
                        .and_then(|r| r.view.as_ref().err().map(|f| f.why.clone())),
                    0,
                ),
            }
        };
        // Rendered without the lock: laying out leaves takes the tree's own locks.
        let mut read = Vec::new();
        let view = self.render_ctable(ino, file, &mut read).map(Arc::new);
        match (&view, &failed_before) {
            (Err(f), Some(before)) if *before == f.why => {}
            (Err(f), _) => log::warn!("{}: no table.npy: {}", file.group, f.why),
            (Ok(_), Some(_)) => log::warn!("{}: table.npy shown again", file.group),
            (Ok(_), None) => {}
        }
        let out = view.clone().map_err(|f| f.error());
        let fails = match (&view, &failed_before) {
            (Ok(_), _) => 0,
            (Err(f), Some(before)) if *before == f.why => fails.saturating_add(1),
            (Err(_), _) => 1,
        };
        *file.state.lock() = Some(Rendered {
            read,
            view,
            at: Instant::now(),
            fails,
        });
        out
    }

    /// Whether any array in `read` has another version now.
    fn stale(&self, read: &[(ArrayId, Arc<dyn ChunkStore>)]) -> bool {
        read.iter()
            .any(|(a, s)| !Arc::ptr_eq(&self.reader.pinned(*a), s))
    }

    /// Renders the view of `file` (inode `ino`), noting in `read` the array versions read.
    fn render_ctable(
        &self,
        ino: u64,
        file: &CTableFile,
        read: &mut Vec<(ArrayId, Arc<dyn ChunkStore>)>,
    ) -> Result<CTableView, Failure> {
        let fail = |why: String| Failure {
            why: why.into(),
            too_big: false,
            retry: false,
        };
        let failed_read = |why: String| Failure {
            retry: true,
            ..fail(why)
        };
        let (meta, _) = self.leaf_array(file.meta, "_meta").map_err(fail)?;
        read.push((meta, self.reader.pinned(meta)));
        let attrs = match self.live(meta) {
            Some(live) => live.get().attrs().clone(),
            None => {
                let f = self.child_named(file.meta, "__attrs__").map_err(fail)?;
                match self.node(f).map(|n| &n.kind) {
                    Some(NodeKind::File(FileKind::Attrs(_, g))) => {
                        let text = g
                            .get()
                            .map_err(|e| failed_read(format!("_meta attributes: {e}")))?;
                        serde_json::from_slice(&text)
                            .map_err(|e| fail(format!("_meta attributes: {e}")))?
                    }
                    _ => return Err(fail("_meta has no attributes".into())),
                }
            }
        };
        let names = schema_columns(&attrs).map_err(fail)?;
        let (valid, valid_npy) = self.leaf_array(file.valid, "_valid_rows").map_err(fail)?;
        let valid_store = self.reader.pinned(valid);
        read.push((valid, valid_store.clone()));
        let mut columns = Vec::with_capacity(names.len());
        let mut fields = Vec::with_capacity(names.len());
        for name in &names {
            let what = format!("column {name}");
            let leaf = self
                .child_named(file.cols, name)
                .map_err(|e| fail(format!("{what}: {e}")))?;
            let (array, npy) = self.leaf_array(leaf, &what).map_err(fail)?;
            let store = self.reader.pinned(array);
            read.push((array, store.clone()));
            let base = dtype::parse(npy.descr()).map_err(|e| fail(format!("{what}: {e}")))?;
            let trailing = npy.shape().get(1..).unwrap_or(&[]).to_vec();
            if npy.shape().is_empty() {
                return Err(fail(format!("{what}: 0-d")));
            }
            let field = match trailing.is_empty() {
                true => base,
                false => Dtype::Subarray {
                    base: Box::new(base),
                    shape: trailing,
                },
            };
            fields.push((name.clone(), field));
            columns.push(ViewColumn { array, npy, store });
        }
        // The mask, read once into runs.
        if valid_npy.shape().len() != 1 || valid_npy.layout().data_len() != valid_npy.shape()[0] {
            return Err(fail(format!(
                "_valid_rows is not a 1-D bool array ({})",
                valid_npy.descr()
            )));
        }
        let total = valid_npy.layout().data_len();
        if total > MAX_MASK_ROWS {
            return Err(Failure {
                why: format!("_valid_rows has {total} rows, more than {MAX_MASK_ROWS}").into(),
                too_big: true,
                retry: false,
            });
        }
        let mut runs = RunBuilder::new(MAX_RUNS);
        let mut buf = Vec::new();
        let mut at = 0;
        while at < total {
            let n = (total - at).min(MASK_STEP);
            buf.clear();
            buf.resize(n as usize, 0);
            // A chunk stored as all zeros (or uninitialised: read as zeros) marks no row
            // valid: its pieces are left as the zeros `buf` holds, not decoded.
            let mut last: Option<(u64, bool)> = None;
            let pieces = valid_npy.layout().runs(at, n).filter(|r| {
                let zeros = match last {
                    Some((chunk, zeros)) if chunk == r.chunk => zeros,
                    _ => {
                        let kind = usize::try_from(r.chunk)
                            .ok()
                            .and_then(|c| valid_store.chunk_kind(c).ok());
                        let zeros = matches!(kind, Some(ChunkKind::Zeros | ChunkKind::Uninit));
                        last = Some((r.chunk, zeros));
                        zeros
                    }
                };
                !zeros
            });
            self.fill_runs(
                ino,
                (valid_store.as_ref(), valid, false),
                pieces,
                false,
                &mut buf,
            )
            .map_err(|e| failed_read(format!("_valid_rows: {}", super::display_chain(&e))))?;
            runs.push(&buf).map_err(|e| Failure {
                why: e.to_string().into(),
                too_big: true,
                retry: false,
            })?;
            at += n;
        }
        let runs = runs.finish();
        let end = runs.phys_end();
        for (name, c) in names.iter().zip(&columns) {
            let rows = c.npy.shape()[0];
            if rows < end {
                return Err(fail(format!(
                    "column {name} has {rows} rows, _valid_rows marks row {} valid",
                    end - 1
                )));
            }
        }
        let npy = CTableNpy::new(fields, runs).map_err(fail)?;
        Ok(CTableView { npy, columns })
    }

    /// The size of `table.npy` (inode `ino`).
    pub(crate) fn ctable_size(&self, ino: u64, file: &CTableFile) -> Result<u64, TreeError> {
        self.ctable_view(ino, file).map(|v| v.npy.len())
    }

    /// Up to `size` bytes of `table.npy` (inode `ino`) from `offset`, from the view `pinned`
    /// holds or the current one.
    pub(crate) fn ctable_read(
        &self,
        ino: u64,
        file: &CTableFile,
        (offset, size): (u64, u32),
        hint: ReadHint,
        pinned: Option<&Pinned>,
    ) -> Result<ReadData, TreeError> {
        let view = match pinned.and_then(|p| p.ctable.clone()) {
            Some(v) => v,
            None => self.ctable_view(ino, file)?,
        };
        let t = &view.npy;
        let w = t.window(offset, size as usize);
        let mut out = vec![0u8; w.out_len];
        out[..w.header.len()].copy_from_slice(&t.header()[w.header.clone()]);
        let rb = t.row_bytes();
        if w.data.end <= w.data.start || rb == 0 {
            return Ok(ReadData::Owned(out));
        }
        let (r0, r1) = (w.data.start / rb, w.data.end.div_ceil(rb));
        let span = (r1 - r0) * rb;
        if span > MAX_READ + w.out_len as u64 {
            return Err(TreeError::TooBig(format!("a read of {span} bytes")));
        }
        let mut rows = vec![0u8; span as usize];
        let small = !hint.scan(t.len());
        let segments = t.segments(r0, r1);
        // Reads per column: the physical rows the window's runs span, in one read when the
        // deleted rows between them are at most as many as the rows read (a table with
        // scattered deletions: one read, not one per run), else one read per run.
        let spans: Vec<Span> = match (segments.first(), segments.last()) {
            (Some(&(_, p0, _)), Some(&(_, p, n))) if p + n - p0 <= 2 * (r1 - r0) => {
                vec![(p0, p + n - p0, segments)]
            }
            _ => segments.iter().map(|&s| (s.1, s.2, vec![s])).collect(),
        };
        let mut col = Vec::new();
        for (p0, count, segs) in &spans {
            for (c, geo) in view.columns.iter().zip(t.columns()) {
                if geo.atom == 0 {
                    continue;
                }
                col.clear();
                col.resize((count * geo.atom) as usize, 0);
                let pieces = c.npy.layout().runs(p0 * geo.atom, count * geo.atom);
                self.fill_runs(
                    ino,
                    (c.store.as_ref(), c.array, false),
                    pieces,
                    small,
                    &mut col,
                )
                .inspect_err(|e| {
                    log::warn!(
                        "{}: table.npy: column read failed: {}",
                        file.group,
                        super::display_chain(e)
                    )
                })?;
                // The mapped scan's placement (fixed-width moves, every range checked).
                super::npy::place_rows(
                    &col,
                    (*p0, segs),
                    (r0, rb, geo.offset, geo.atom),
                    &mut rows,
                )
                .ok_or_else(|| {
                    TreeError::Unavailable(format!(
                        "{}: table.npy: a column's rows do not fit its records",
                        file.group
                    ))
                })?;
            }
        }
        let from = (w.data.start - r0 * rb) as usize;
        let len = (w.data.end - w.data.start) as usize;
        out[w.data_dst..].copy_from_slice(&rows[from..from + len]);
        Ok(ReadData::Owned(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_in_a_row_doubles_the_wait_up_to_64_times() {
        let after = |fails| {
            Rendered {
                read: Vec::new(),
                view: Err(Failure {
                    why: "x".into(),
                    too_big: false,
                    retry: true,
                }),
                at: Instant::now(),
                fails,
            }
            .retry_after()
        };
        assert_eq!(after(0), RETRY_AFTER);
        assert_eq!(after(1), RETRY_AFTER);
        assert_eq!(after(2), RETRY_AFTER * 2);
        assert_eq!(after(4), RETRY_AFTER * 8);
        assert_eq!(after(7), RETRY_AFTER * 64);
        assert_eq!(after(u32::MAX), RETRY_AFTER * 64);
    }
}
