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

mod bcolz;
mod carrier;
mod compact;
mod embed;
mod frame;
mod io;
mod spool;
mod store;
mod table;

use std::path::Path;

use serde_json::Value;

pub use compact::{Space, compact, compact_mounted, compact_mounted_with_crash_after, space};
pub use io::{BeforeCreate, SourceLock};
pub use spool::{Chunk, DEFAULT_SPOOL_MEMORY, Spool, SpoolStats, open_unlinked};
pub use store::{
    commit_group_attrs, commit_group_attrs_with_crash_after, commit_member,
    commit_member_with_crash_after,
};
pub use table::TableRepair;

use super::{Array, ChunkKind, ContainerError, Inner, SourceKind, Table};
use crate::codec::{Blocksize, CParams, ChunkFormat, ChunkHeader, Codec, SpecialKind, SplitMode};

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

/// Refuses when `path` (a file or directory) cannot be written: no write permission bits, or
/// the OS refuses to open it for writing (files only).
fn check_path_writable(path: &Path) -> Result<(), ContainerError> {
    let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    if meta.permissions().readonly() {
        return Err(unsupported(path, "writing: the path is read-only"));
    }
    if meta.is_file() {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
    }
    Ok(())
}

/// Why a source cannot be written (`None` = writable): read-only file or directory
/// permissions, or an unsupported kind or layout (frames embedded in a bigger file, frames
/// with variable-length blocks, bcolz object dtype).
pub fn check_writable(array: &Array) -> Option<ContainerError> {
    writable(array, false).err()
}

/// [`check_writable`] for the array of a collection leaf, which commits through the
/// collection ([`commit_member`]): a frame at an offset of a `.b2z` is written by rebuilding
/// the zip, so only the other rules apply.
pub fn check_writable_member(array: &Array) -> Option<ContainerError> {
    writable(array, true).err()
}

fn writable(array: &Array, member: bool) -> Result<(), ContainerError> {
    let path = array.path();
    match &array.inner {
        Inner::Frame(f) => {
            let info = f.info();
            if info.start != 0 && !member {
                return Err(unsupported(
                    path,
                    format!(
                        "writing a frame embedded at offset {} of a bigger file",
                        info.start
                    ),
                ));
            }
            if info.general_flags & 0x80 != 0 {
                return Err(unsupported(
                    path,
                    "writing a frame of variable-length-block chunks",
                ));
            }
            if array.kind == SourceKind::Sframe {
                check_path_writable(path)?;
            }
            check_path_writable(f.source().path())
        }
        Inner::Bcolz(c) => {
            if c.is_blsk() {
                return Err(unsupported(path, "writing a 2012 blsk root (read-only)"));
            }
            if c.itemsize() == 0 {
                return Err(unsupported(
                    path,
                    format!("writing a carray of dtype {:?}", c.dtype()),
                ));
            }
            for p in [path.to_path_buf(), path.join("data"), path.join("meta")] {
                check_path_writable(&p)?;
            }
            Ok(())
        }
    }
}

/// Compression parameters for new chunks: what the existing chunks use, read from the header
/// of the first regular chunk (codec, filters, filters_meta, typesize; split from the
/// dont-split flag; blocksize: the chunk's for b2nd/caterva arrays, whose blocks are the
/// blockshape, automatic otherwise). clevel is not stored in chunk headers: it comes from the
/// frame header (codec_flags high nibble) or the bcolz `storage.cparams.clevel`. Frames get
/// [`ChunkFormat::Blosc2`], bcolz [`ChunkFormat::Blosc1`]. Without a regular chunk the frame
/// header's defaults (bcolz: `storage.cparams`) are used.
///
/// # Errors
///
/// A chunk header that cannot be read or names a codec b2fs cannot encode.
pub fn chunk_cparams(array: &Array) -> Result<CParams, ContainerError> {
    let path = array.path();
    let first = array.first_regular_header()?;
    let header_codec = |h: &ChunkHeader| {
        h.codec()
            .map_err(|e| unsupported(path, format!("new chunks for this source: {e}")))
    };
    match &array.inner {
        Inner::Frame(f) => {
            let info = f.info();
            let clevel = info.clevel().min(9);
            let mut p = match &first {
                Some(h) => CParams {
                    format: ChunkFormat::Blosc2,
                    codec: header_codec(h)?,
                    clevel,
                    typesize: usize::from(h.typesize.max(1)),
                    filters: h.filters,
                    filters_meta: h.filters_meta,
                    splitmode: if h.dont_split() {
                        SplitMode::Never
                    } else {
                        SplitMode::Always
                    },
                    blocksize: Blocksize::Auto,
                    allow_special: true,
                },
                None => CParams {
                    format: ChunkFormat::Blosc2,
                    codec: Codec::from_compcode(info.compcode())
                        .filter(|c| *c != Codec::Snappy)
                        .ok_or_else(|| {
                            unsupported(path, format!("codec {} for new chunks", info.compcode()))
                        })?,
                    clevel,
                    // Types over 255 bytes are stored as typesize 1, as C-Blosc2 does.
                    typesize: usize::try_from(info.typesize)
                        .ok()
                        .filter(|ts| (1..=255).contains(ts))
                        .unwrap_or(1),
                    filters: info.filters,
                    filters_meta: info.filters_meta,
                    splitmode: match info.other_flags & 3 {
                        0 => SplitMode::Always,
                        1 => SplitMode::Never,
                        _ => SplitMode::Auto,
                    },
                    blocksize: Blocksize::Auto,
                    allow_special: true,
                },
            };
            if let Some(nd) = array.nd_meta() {
                // b2nd chunks are laid out in blocks of blockshape: keep that blocksize.
                let items: u64 = nd.blockshape.iter().product();
                let bs = items.saturating_mul(u64::from(info.typesize));
                let bs = match &first {
                    Some(h) => h.blocksize,
                    None => usize::try_from(bs).unwrap_or(0),
                };
                p.blocksize = Blocksize::explicit_or_auto(bs, p.typesize);
            }
            Ok(p)
        }
        Inner::Bcolz(c) => {
            let cp = c.storage().get("cparams");
            let clevel = cp
                .and_then(|v| v.get("clevel"))
                .and_then(Value::as_u64)
                .unwrap_or(5)
                .min(9) as u8;
            let cname = cp.and_then(|v| v.get("cname")).and_then(Value::as_str);
            match &first {
                Some(h) => Ok(CParams {
                    format: ChunkFormat::Blosc1,
                    // A Blosc1 header says "lz4" for LZ4HC too; storage names the codec.
                    codec: match (header_codec(h)?, cname) {
                        (Codec::Lz4, Some("lz4hc")) => Codec::Lz4Hc,
                        (c, _) => c,
                    },
                    clevel,
                    typesize: usize::from(h.typesize.max(1)),
                    filters: h.filters,
                    filters_meta: [0; 6],
                    splitmode: SplitMode::ForwardCompat,
                    blocksize: Blocksize::Auto,
                    allow_special: false,
                }),
                None => {
                    let name = cname.unwrap_or("blosclz");
                    let codec = Codec::from_name(name)
                        .filter(|c| *c != Codec::Snappy)
                        .ok_or_else(|| unsupported(path, format!("codec {name:?}")))?;
                    let filter = match cp.and_then(|v| v.get("shuffle")) {
                        Some(Value::Bool(true)) => 1,
                        Some(v) => v.as_u64().unwrap_or(1).min(2) as u8,
                        None => 1,
                    };
                    let ts = super::bcolz::dtype_info(c.dtype()).map_or(1, |d| d.blosc_typesize);
                    Ok(CParams::blosc1(codec, clevel, ts.max(1), filter))
                }
            }
        }
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

/// What the new chunk list of a 1-D edit looks like: for each new chunk, either an old chunk
/// kept as is or new bytes, plus the checks shared by every source kind.
#[derive(Debug)]
pub(super) enum Slot<'e> {
    /// Old chunk `i`, unchanged.
    Old(usize),
    /// New compressed bytes (read back when written) and their parsed header.
    New(&'e Chunk, ChunkHeader),
}

/// Applies truncate, updates and appends to the old chunk numbering (no size rules yet):
/// returns the new slot list. `format` is the chunk format the source needs. Every commit
/// goes through it (frames, bcolz carrays, ctable columns): the edit's checks that do not
/// depend on the layout are made here, [`Edit::shape0`] refused for a source that cannot
/// take it among them.
pub(super) fn plan<'e>(
    array: &Array,
    edit: &'e Edit,
    format: ChunkFormat,
) -> Result<Vec<Slot<'e>>, ContainerError> {
    let path = array.path();
    if edit.shape0.is_some() && !takes_shape0(array) {
        return Err(no_shape0(path));
    }
    if let (Some(n), Some(nd)) = (edit.shape0, array.nd_meta())
        && nd.shape.first() != Some(&n)
        && (nd.chunkshape.contains(&0) || nd.blockshape.contains(&0))
    {
        // python-blosc2 makes an empty array with chunks `(0,)`; no chunk grid can hold
        // another length (python-blosc2's `resize` refuses it too).
        return Err(refused(
            path,
            format!(
                "setting the first dimension to {n}: the chunk shape {:?} has a zero length",
                nd.chunkshape
            ),
        ));
    }
    let old_n = array.nchunks();
    let resizing = edit.truncate.is_some_and(|t| t != old_n) || !edit.appends.is_empty();
    if resizing {
        let one_d = match (&array.inner, array.nd_meta()) {
            (Inner::Bcolz(_), _) | (Inner::Frame(_), None) => true,
            // An N-dim array grows and shrinks by whole rows of its chunk grid along its
            // first axis (the chunks of a row are the last ones in C order), with its new
            // first dimension given: checked against the chunk count by the frame layout.
            (Inner::Frame(_), Some(nd)) => nd.shape.len() == 1 || edit.shape0.is_some(),
        };
        if !one_d {
            return Err(refused(
                path,
                format!(
                    "appending or truncating chunks of a {}-dimensional array (only 1-D sources can change their number of chunks)",
                    array.geometry().shape.len()
                ),
            ));
        }
    }
    let keep = match edit.truncate {
        Some(t) if t > old_n => {
            return Err(refused(
                path,
                format!("truncating to {t} chunks: the source has only {old_n}"),
            ));
        }
        Some(t) => t,
        None => old_n,
    };
    let mut slots: Vec<Slot<'e>> = (0..keep).map(Slot::Old).collect();
    let parse = |what: String, bytes: &'e Chunk| -> Result<ChunkHeader, ContainerError> {
        let h = ChunkHeader::parse(bytes.head())
            .map_err(|e| refused(path, format!("{what}: not a valid chunk: {e}")))?;
        let blosc2 = h.is_extended();
        let ok_format = match format {
            ChunkFormat::Blosc2 => blosc2 && h.version >= 3,
            ChunkFormat::Blosc1 => !blosc2 && h.version == 2,
        };
        if !ok_format {
            let want = match format {
                ChunkFormat::Blosc2 => "a Blosc2 chunk (32-byte header)",
                ChunkFormat::Blosc1 => "a Blosc1 chunk (version 2, 16-byte header)",
            };
            return Err(refused(
                path,
                format!(
                    "{what}: version {} flags 0x{:02x}, this source needs {want}",
                    h.version, h.flags
                ),
            ));
        }
        if h.cbytes != bytes.len() {
            return Err(refused(
                path,
                format!(
                    "{what}: header cbytes {} but {} bytes given",
                    h.cbytes,
                    bytes.len()
                ),
            ));
        }
        if h.is_vl() || h.is_lazy() {
            return Err(refused(
                path,
                format!("{what}: variable-length-block or lazy chunk"),
            ));
        }
        if h.nbytes == 0 {
            return Err(refused(path, format!("{what}: an empty chunk")));
        }
        Ok(h)
    };
    let mut seen = std::collections::HashSet::new();
    for (i, bytes) in &edit.updates {
        if *i >= keep {
            return Err(refused(
                path,
                format!("updating chunk {i}: the source has {keep} chunks after truncation"),
            ));
        }
        if !seen.insert(*i) {
            return Err(refused(path, format!("chunk {i} updated twice")));
        }
        let h = parse(format!("chunk {i}"), bytes)?;
        if let Some(s) = slots.get_mut(*i) {
            *s = Slot::New(bytes, h);
        }
    }
    for (k, bytes) in edit.appends.iter().enumerate() {
        let h = parse(format!("appended chunk {k}"), bytes)?;
        slots.push(Slot::New(bytes, h));
    }
    if slots.len() as u64 > super::frame::MAX_NCHUNKS {
        return Err(refused(
            path,
            format!(
                "{} chunks: more than the {} a frame index can hold",
                slots.len(),
                super::frame::MAX_NCHUNKS
            ),
        ));
    }
    if edit.attrs.as_ref().is_some_and(|a| !a.is_object()) {
        return Err(refused(path, "attrs: not a JSON object"));
    }
    Ok(slots)
}

/// Whether [`Edit::shape0`] can be set on `array`: a b2nd/caterva frame (a plain frame's
/// and a bcolz carray's length is what their chunks hold).
fn takes_shape0(array: &Array) -> bool {
    matches!(array.inner, Inner::Frame(_)) && array.nd_meta().is_some()
}

/// The refusal of an [`Edit::shape0`] by a source that cannot take it ([`takes_shape0`]).
pub(super) fn no_shape0(path: &Path) -> ContainerError {
    refused(
        path,
        "setting the first dimension of a source without a b2nd/caterva metalayer \
         (its length is what its chunks hold)",
    )
}

/// The special kind of a new Blosc2 chunk that is only its 32-byte header and stands for
/// zeros, NaN or uninitialised values (what a frame index can carry as a special offset).
pub(super) fn header_special(h: &ChunkHeader) -> Option<ChunkKind> {
    if h.cbytes != 32 {
        return None;
    }
    match h.special() {
        SpecialKind::Zeros => Some(ChunkKind::Zeros),
        SpecialKind::Nan => Some(ChunkKind::Nan),
        SpecialKind::Uninit => Some(ChunkKind::Uninit),
        SpecialKind::None | SpecialKind::Value => None,
    }
}
