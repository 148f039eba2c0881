//! The room `b2fs salvage` needs, checked before it writes anything: the copy of SOURCE
//! (twice for a contiguous frame, which the salvage compacts into a second file, and for a
//! `.b2z`, whose commit rewrites the zip beside it) plus the chunks of zeros that replace the
//! damaged ones (a bcolz chunk of zeros is a `.blp` file of its own; in a frame it is an index
//! entry), against the space free where DEST goes, and the zero chunks' bytes (held in memory
//! for the commit) against [`MAX_ZERO_BYTES`]. Everything that can refuse a salvage is checked
//! here, before anything is written, at the cost of encoding at most [`MAX_ZERO_BYTES`] (plus
//! one chunk) of zero chunks, in the time of their output.

use std::collections::HashMap;
use std::path::Path;

use super::super::Error;
use super::super::check::{self, Report};
use super::{ZeroChunks, copied_node, other, slot_nbytes};
use crate::container::store::Form;
use crate::container::{Container, Opened, SourceKind};

/// Most bytes of zero chunks one salvage writes (they are built in memory for the commit).
pub(super) const MAX_ZERO_BYTES: u64 = 1 << 30;
/// What a small file takes on disk at least (one block).
const BLOCK: u64 = 4096;

/// What a salvage will write.
pub(super) struct Need {
    /// Bytes of the copy of SOURCE (twice when the salvage rewrites it beside itself).
    copy: u64,
    /// Bytes on disk of the zero chunks (each at least a block).
    zeros_on_disk: u64,
    /// Chunks replaced.
    chunks: usize,
}

/// What salvaging the damaged chunks of `report` from `opened` (read from `local`) writes,
/// refusing the run as soon as it is known that it must be refused. First what costs no
/// encoding: the copy's size (a symbolic link to a directory in SOURCE refuses it) and the
/// size of every damaged chunk's slot (one that cannot be known refuses it); then the chunks
/// of zeros, as `zero_chunks` encodes them (once per format, size and typesize, in the time
/// of their output: the commit later writes those same bytes), stopping as soon as their sum
/// passes [`MAX_ZERO_BYTES`].
///
/// # Errors
/// When the size of `local` cannot be read, a slot's size is unknown, or the chunks of zeros
/// pass [`MAX_ZERO_BYTES`] (one line saying why).
pub(super) fn needed(
    opened: &Opened,
    local: &Path,
    report: &Report,
    zero_chunks: &ZeroChunks,
    source: &Path,
) -> Result<Need, Error> {
    let copy = tree_bytes(local)?;
    let mut scratch = Report::default();
    let targets = check::targets(opened, &mut scratch);
    let by_label: HashMap<&Option<String>, &crate::container::Array> =
        targets.iter().map(|t| (&t.label, &*t.array)).collect();
    let damaged: Vec<(&crate::container::Array, usize)> = report
        .damaged
        .iter()
        .filter_map(|d| Some((*by_label.get(&d.array)?, d.chunk)))
        .collect();
    for &(a, i) in &damaged {
        slot_nbytes(a, i)?;
    }
    let (mut zeros, mut zeros_on_disk) = (0u64, 0u64);
    for &(a, i) in &damaged {
        let len = zero_chunks.for_slot(a, i)?.len() as u64;
        zeros += len;
        if zeros > MAX_ZERO_BYTES {
            return Err(other(format!(
                "cannot salvage '{}': its {} damaged chunks become more than {} of zero \
                 chunks, the most salvage writes",
                source.display(),
                report.damaged.len(),
                human(MAX_ZERO_BYTES)
            )));
        }
        zeros_on_disk += if a.kind() == SourceKind::BcolzCarray {
            len.div_ceil(BLOCK).max(1) * BLOCK
        } else {
            len
        };
    }
    let rewritten = match opened {
        Opened::Single(Container::Array(a)) => a.kind() == SourceKind::Cframe,
        Opened::Collection(c) => c.form() == Form::Zip,
        Opened::Single(_) => false,
    };
    Ok(Need {
        // A leaf rebuilt from a lenient open is compacted too (counted as the whole copy).
        copy: if (rewritten && !report.damaged.is_empty()) || !report.lenient.is_empty() {
            copy.saturating_mul(2)
        } else {
            copy
        },
        zeros_on_disk,
        chunks: report.damaged.len(),
    })
}

/// Bytes of the file or directory tree at `path` (on-disk blocks: a file of `n` bytes counts
/// whole blocks).
fn tree_bytes(path: &Path) -> Result<u64, Error> {
    let io = |e: std::io::Error| Error::Other {
        what: format!("reading '{}'", path.display()),
        source: Some(e),
    };
    if let Some(len) = copied_node(path)? {
        return Ok(len.div_ceil(BLOCK) * BLOCK);
    }
    let mut total = BLOCK;
    for entry in std::fs::read_dir(path).map_err(io)? {
        total += tree_bytes(&entry.map_err(io)?.path())?;
    }
    Ok(total)
}

fn human(n: u64) -> String {
    super::super::info::human(n)
}

/// Refuses a salvage that does not fit the space free in `parent` (DEST's directory), in one
/// line.
///
/// # Errors
/// [`Error::Other`] saying why.
/// What extracting `bytes` of zip members and salvaging them writes (the extraction, renamed
/// into the salvage's copy, and the packed `.b2z` when `packed`), before the chunks of zeros
/// are known (they are checked again with them).
pub(super) fn extraction(bytes: u64, packed: bool) -> Need {
    Need {
        copy: bytes.saturating_mul(if packed { 2 } else { 1 }),
        zeros_on_disk: 0,
        chunks: 0,
    }
}

pub(super) fn check(parent: &Path, need: &Need, source: &Path) -> Result<(), Error> {
    let total = need.copy.saturating_add(need.zeros_on_disk);
    if let Ok(s) = rustix::fs::statvfs(parent) {
        let free = s.f_bavail.saturating_mul(s.f_frsize.max(1));
        if total > free {
            return Err(other(format!(
                "cannot salvage '{}': DEST needs about {} (a copy of {} and {} chunks of zeros), \
                 {} is free in '{}'",
                source.display(),
                human(total),
                human(need.copy),
                need.chunks,
                human(free),
                parent.display()
            )));
        }
    }
    Ok(())
}
