//! Write-back: the crash-safe commit of one batch of chunk and attribute edits ([`Edit`]) into
//! the source on disk, so that python-blosc2 / C-Blosc2, caterva and bcolz read the result, and
//! `compact` (a contiguous frame rewritten without dead space).
//!
//! This module does not know FUSE, buffers or when to commit: the caller hands it complete,
//! already compressed chunks (use [`chunk_cparams`] and [`crate::codec::compress`]; a big edit
//! keeps them in a [`Spool`], which holds a bounded amount in memory and the rest in an
//! unlinked file, `spool.rs`) and reopens
//! the source with [`super::open`] afterwards; the [`Array`] given to [`commit`] is never
//! updated. It decodes chunk data only where a commit must re-store rows it did not get:
//! special chunks re-encoded for variable-size frames (`frame/layout.rs`: they wait in the
//! edit's [`Spool`], [`Edit::spool`], like its own chunks) and the kept rows of the chunk a
//! ctable column is cut or extended in (`table.rs`).
//!
//! Spec: `docs/format/CONTAINERS.md` 1 (frame layout), 2 (sparse frames), 3 (how C-Blosc2 mutates),
//! 4.1/4.3 (vlmeta encoding, the b2nd metalayer), 5 (bcolz) and the safe commit orders of 6.2
//! (contiguous: shadow append), 6.3 (sparse) and 6.4 (bcolz).
//!
//! Subtleties and who handles them:
//! - **Readers see the old or the new source, never a mix** (frames): nothing before the old
//!   frame_len is written until the final header `pwrite`, the commit point
//!   (`frame/contiguous.rs`); sparse frames switch by `rename` of `chunks.b2frame`
//!   (`frame/sparse.rs`). bcolz has no multi-file transaction: growth and shrinkage are gated
//!   by `meta/sizes`, but a replaced full chunk is visible as soon as its rename lands
//!   (`bcolz.rs`).
//! - **header_len never changes** (pitfall 1): the header is patched in place (frame_len,
//!   nbytes, cbytes, chunksize, general_flags, has_vlmeta, the b2nd/caterva shape int64).
//! - **Fixed vs variable chunk sizes** (3.2, pitfall 5): a plain frame switches to variable
//!   mode (chunksize 0, flag 0x40, version 3) when a chunk follows a partial one; special
//!   chunks are then re-encoded as regular chunks: C-Blosc2 reads neither special offsets
//!   (no size in variable mode) nor stored 32-byte special chunks there; existing special
//!   offsets are materialised the same way (`frame/layout.rs`). Special offsets are written
//!   only for full-size chunks, so a later C-Blosc2 append cannot strand one.
//! - **vlmetalayers**: unchanged keys keep their stored chunk bytes; at most 16 (pitfall 3).
//! - **ctables keep one length** (`table.rs`): a row-count change of one column resizes
//!   every column in one commit ([`commit_column`]), the first column last when growing and
//!   first when shrinking (bcolz reads the table's length there); [`repair_table`] trims what
//!   a crash in between leaves. [`commit`] refuses to change one column's row count alone.
//! - **Refusals leave the source untouched**: every check runs before the first write. They
//!   are [`ContainerError::Refused`] (the edit breaks a rule), [`ContainerError::Unsupported`]
//!   (the source has a feature b2fs cannot write) or [`ContainerError::Changed`] (the source
//!   changed on disk since it was opened).
//! - **Crash testing**: [`commit_with_crash_after`] stops after a given number of durable
//!   steps (write, fsync, rename, unlink), leaving the files as a crash would (`io.rs`).
//! - **Locking**: when a `.b2lock` sidecar exists the commit holds `flock(LOCK_EX)` on it and
//!   bumps its generation counter (3.6). Mounts hold a shared `flock` on the source itself
//!   ([`lock_source_for_mount`]), which [`compact()`] takes exclusively (`io.rs`).
//!
//! Invariants: no panics on any input; every error names the file and the reason.
//!
//! The parts: this file holds the edit ([`Edit`]), the public entries ([`commit`],
//! [`commit_column`], [`repair_table`], [`commit_table_attrs`], [`check_attrs`],
//! [`lock_source_for_mount`] and their crash-test forms) and the errors every part makes;
//! `writable.rs` whether a source can be written; `cparams.rs` the compression parameters of
//! new chunks; `plan.rs` the new chunk list of an edit and the checks every commit shares;
//! `frame.rs` (with `frame/`), `bcolz.rs` and `table.rs` the commits of frames, bcolz carrays
//! and ctables; `store.rs`, `carrier.rs` and `embed.rs` those of collection members, new
//! `__vlmeta__` carriers and values embedded in `embed.b2e`; `compact.rs` compaction;
//! `spool.rs` where an edit's chunks wait; `io.rs` the counted durable steps and the locks.

mod bcolz;
mod carrier;
mod compact;
mod cparams;
mod create;
mod embed;
mod frame;
mod io;
mod plan;
mod spool;
mod store;
mod table;
mod writable;

use std::path::Path;

use serde_json::Value;

pub use compact::{Space, compact, compact_mounted, compact_mounted_with_crash_after, space};
pub use cparams::chunk_cparams;
pub use create::{
    MAX_FILL_BYTES, MAX_NEW_CHUNK_BYTES, NewArray, create_array, create_array_failing,
    create_array_with_crash_after, create_group_dir, create_group_dir_failing, create_store_array,
};
pub use io::{BeforeCreate, SourceLock};
pub use spool::{Chunk, DEFAULT_SPOOL_MEMORY, Spool, SpoolStats, open_unlinked};
pub use store::{
    commit_group_attrs, commit_group_attrs_with_crash_after, commit_member,
    commit_member_with_crash_after,
};
pub use table::TableRepair;
pub use writable::{check_writable, check_writable_member};

use plan::{Slot, header_special, no_shape0, plan};
use writable::{check_path_writable, writable};

use super::{Array, ContainerError, Inner, Table};

/// One batch of changes to a single array, committed atomically and crash-safely.
#[derive(Debug, Default, Clone)]
pub struct Edit {
    /// Replace chunk i with these compressed bytes (a complete chunk in the source's own chunk
    /// format: Blosc2 for frames, Blosc1 (version 2, 16-byte header) for bcolz): in memory,
    /// or in a [`Spool`]'s file, read back one chunk at a time as the commit writes it.
    pub updates: Vec<(usize, Chunk)>,
    /// Chunks appended after the last one (1-D sources only), in order.
    pub appends: Vec<Chunk>,
    /// Keep only the first n chunks (1-D sources; removing the last chunks).
    pub truncate: Option<usize>,
    /// The new first dimension of a b2nd/caterva array (a resize that does not end on a
    /// chunk boundary: its chunks keep their padded size; an N-dim array's resize along its
    /// first axis). The edit must leave whole rows of the chunk grid, `rows` of them, and the
    /// dimension must lie in the last: more than `(rows - 1) x chunkshape[0]`, at most
    /// `rows x chunkshape[0]`. `None`: what appends and truncation give (see [`commit`]).
    /// Refused for other sources (plain frames, bcolz carrays and ctable columns), whose
    /// length their chunks hold.
    pub shape0: Option<u64>,
    /// New user attributes (a JSON object in the container's attrs mapping) to store as
    /// vlmeta (frames) or the `__attrs__` file (bcolz).
    pub attrs: Option<serde_json::Value>,
    /// Where chunks the commit makes itself wait until written (special chunks re-encoded
    /// when a frame turns variable-size, `frame/layout.rs`): the [`Spool`] the edit's own chunks
    /// went through, so that they are held within the same bound; `None`: in memory.
    pub spool: Option<std::sync::Arc<parking_lot::Mutex<Spool>>>,
}

impl Edit {
    /// Whether the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
            && self.appends.is_empty()
            && self.truncate.is_none()
            && self.shape0.is_none()
            && self.attrs.is_none()
    }

    /// Whether the edit changes the attributes and nothing else.
    pub fn attrs_only(&self) -> bool {
        self.attrs.is_some()
            && self.updates.is_empty()
            && self.appends.is_empty()
            && self.truncate.is_none()
            && self.shape0.is_none()
    }
}

/// Most vlmetalayers a commit writes (C-Blosc2's writer limit; a frame with more gets
/// corrupted by its next C-Blosc2 append, `docs/format/CONTAINERS.md` 1.6).
pub const MAX_WRITE_VLMETALAYERS: usize = 16;

fn unsupported(path: &Path, what: impl Into<String>) -> ContainerError {
    ContainerError::Unsupported {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

fn refused(path: &Path, why: impl Into<String>) -> ContainerError {
    ContainerError::Refused {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

fn changed(path: &Path, why: impl Into<String>) -> ContainerError {
    ContainerError::Changed {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

fn io_err(path: &Path, source: std::io::Error) -> ContainerError {
    ContainerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Whether `attrs` can be stored as `array`'s attributes ([`Edit::attrs`]): what a commit of
/// them would refuse (not an object; for a frame more than [`MAX_WRITE_VLMETALAYERS`], a
/// name past 31 bytes, a value its encoding cannot hold), checked without writing anything.
///
/// # Errors
/// [`ContainerError::Refused`] as [`commit`] would give it.
pub fn check_attrs(array: &Array, attrs: &serde_json::Value) -> Result<(), ContainerError> {
    match &array.inner {
        Inner::Frame(_) => frame::check_vlmeta(array, attrs),
        Inner::Bcolz(_) if attrs.is_object() => Ok(()),
        Inner::Bcolz(_) => Err(refused(array.path(), "attrs: not a JSON object")),
    }
}

/// Commits `edit` to the source on disk, crash-safely (commit orders of `docs/format/CONTAINERS.md`
/// 6.2-6.4), fsyncing so that when it returns `Ok` the change is durable. The [`Array`] itself
/// is **not** updated: reopen the source ([`super::open`]) afterwards.
///
/// Chunk rules (checked before anything is written; a refused edit leaves the source
/// untouched): updates name existing chunks (after `truncate`), each at most once; a chunk
/// must be a complete chunk in the source's format with the uncompressed size its slot needs:
/// b2nd/caterva frames the header chunksize; bcolz chunklen x atomsize except the last chunk
/// (a multiple of the atomsize, at most that); plain frames the old size for updated chunks
/// other than the last, anything positive for appended chunks and the last chunk (switching
/// to variable-size chunks when needed). Appends and truncation need a 1-D source (bcolz:
/// rows along the first axis), or an N-dim b2nd/caterva array with [`Edit::shape0`] (whole
/// rows of its chunk grid); a b2nd/caterva shape then becomes [`Edit::shape0`] when given,
/// else `nchunks x chunkshape` (appends) or `min(shape, nchunks x chunkshape)` (truncation). A contiguous frame cannot be
/// truncated to 0 chunks.
///
/// A ctable column is committed like a carray as long as its row count stays; an edit that
/// changes it is refused here: use [`commit_column`], which resizes every column together.
///
/// # Errors
///
/// [`ContainerError::Refused`] for an edit the rules above refuse,
/// [`ContainerError::Unsupported`] for a source b2fs cannot write (naming the reason),
/// [`ContainerError::Changed`] when the source changed on disk since `array` was opened,
/// [`ContainerError::Io`] for I/O failures (the source then still reads as before or as
/// after the commit), `EEXIST` among them when a file another writer made holds the name of
/// one of the commit's own temp files (`src/container/leftover.rs`, `own_temp`; that file is left alone);
/// [`ContainerError::Restored`] for one undone whose modification time could not be given
/// back.
pub fn commit(array: &Array, edit: &Edit) -> Result<(), ContainerError> {
    let mut io = io::Io::new(None);
    commit_io(array, edit, &mut io)
}

/// [`commit`] with a simulated crash: performs only the first `steps` durable steps (each
/// write, fsync, rename or unlink counts one) and stops there, leaving the files exactly as a
/// crash at that point would (page-cache loss is not simulated). Returns `Ok(true)` when the
/// commit completed within `steps`, `Ok(false)` when it was cut short. For crash-safety tests.
///
/// # Errors
///
/// As [`commit`].
pub fn commit_with_crash_after(
    array: &Array,
    edit: &Edit,
    steps: usize,
) -> Result<bool, ContainerError> {
    io::Io::until_crash(steps, |io| commit_io(array, edit, io))
}

/// Tests: [`commit`], where giving a file back its modification time (the undoing of a
/// contiguous frame's commit that failed before its commit point) fails with `errno`.
///
/// # Errors
///
/// As [`commit`].
#[doc(hidden)]
pub fn commit_failing_time_reset(
    array: &Array,
    edit: &Edit,
    errno: i32,
) -> Result<(), ContainerError> {
    let mut io = io::Io::new(None);
    io.fail_times_with(errno);
    commit_io(array, edit, &mut io)
}

/// Tests: [`commit`], with `hook` called before each new file the commit makes (a sparse
/// frame's chunk files, every temp file), where a test may stand for another writer making it
/// first.
///
/// # Errors
///
/// As [`commit`].
#[doc(hidden)]
pub fn commit_racing(array: &Array, edit: &Edit, hook: BeforeCreate) -> Result<(), ContainerError> {
    let mut io = io::Io::new(None);
    io.before_create(hook);
    commit_io(array, edit, &mut io)
}

fn commit_io(array: &Array, edit: &Edit, io: &mut io::Io) -> Result<(), ContainerError> {
    writable(array, false)?;
    if edit.is_empty() {
        return Ok(());
    }
    match &array.inner {
        Inner::Frame(f) => frame::commit(array, f, edit, io),
        Inner::Bcolz(c) => bcolz::commit(array, c, edit, io),
    }
}

/// Takes the lock a mount holds on its source while it serves it: a shared `flock` on the
/// source itself (file or directory), without waiting; drop it after unmounting.
/// [`compact()`] takes the same lock exclusively, so it refuses a mounted source and a mount
/// refuses a source being compacted. Works whatever path spelling, symlink, bind mount or
/// mount namespace each side uses (the lock is on the inode), and a killed daemon's lock
/// goes with it.
///
/// # Errors
/// [`ContainerError::Busy`] while `compact` runs on the source; [`ContainerError::Io`] when
/// it cannot be opened.
pub fn lock_source_for_mount(path: &Path) -> Result<SourceLock, ContainerError> {
    SourceLock::acquire(path, io::LockMode::Mount)
}

/// Commits `edit` to column `column` (an index into `table.columns`, `__rootdirs__` order)
/// of a ctable. When the edit changes the column's row count (appended chunks, a last chunk
/// grown, shrunk or removed), every other column is resized to the same count in the same
/// commit: rows below the table's length are kept and new rows hold the column's `dflt`
/// (`meta/storage`; zeros without one), as bcolz's own `resize` fills them. Columns are
/// committed one by one, crash-safely each: growing, the first column last (bcolz takes the
/// table's length from it); shrinking, the first column first. A crash in between leaves a
/// table bcolz opens with its old or its new length and every row of it readable, where other
/// columns may hold extra rows past that length; [`repair_table`] removes them.
///
/// `table` must be freshly opened; whether the caller's own view of the column (the one the
/// edit was made against) is still current is for the caller to check
/// ([`Array::changed_on_disk`]).
///
/// # Errors
///
/// As [`commit`], plus [`ContainerError::Refused`] when the columns do not all have the
/// first column's row count (the edited column must; others may only be longer), or a
/// column's `dflt` cannot be encoded in its dtype.
pub fn commit_column(table: &Table, column: usize, edit: &Edit) -> Result<(), ContainerError> {
    let mut io = io::Io::new(None);
    table::commit_column(table, column, edit, &mut io)
}

/// [`commit_column`] with a simulated crash after `steps` durable steps, as
/// [`commit_with_crash_after`].
///
/// # Errors
///
/// As [`commit_column`].
pub fn commit_column_with_crash_after(
    table: &Table,
    column: usize,
    edit: &Edit,
    steps: usize,
) -> Result<bool, ContainerError> {
    io::Io::until_crash(steps, |io| table::commit_column(table, column, edit, io))
}

/// Brings a ctable whose columns have different row counts back to one: columns longer than
/// the first (what an interrupted [`commit_column`] leaves) are trimmed to the first column's
/// row count, which is the table's length for bcolz. Columns shorter than the first are only
/// reported: b2fs never makes them, and it has no data for the missing rows. Nothing is
/// written when every column has the first one's length.
///
/// # Errors
///
/// As [`commit`] (a longer column that cannot be written, I/O).
pub fn repair_table(table: &Table) -> Result<TableRepair, ContainerError> {
    let mut io = io::Io::new(None);
    table::repair_table(table, &mut io)
}

/// Replaces a ctable's root `__attrs__` atomically (temp file, fsync, rename, directory
/// fsync), written as bcolz writes JSON.
///
/// # Errors
///
/// [`ContainerError::Unsupported`] when `attrs` is not a JSON object or the directory is
/// read-only; [`ContainerError::Io`].
pub fn commit_table_attrs(table: &Table, attrs: &Value) -> Result<(), ContainerError> {
    check_path_writable(&table.path)?;
    let mut io = io::Io::new(None);
    bcolz::write_attrs(&table.path, attrs, &mut io)
}
