//! `b2fs compact SOURCE`: rewrites a contiguous frame without dead space through
//! [`crate::container::write::compact`], with a progress bar on stderr for large sources.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{Error, check_source};
use crate::container::ContainerError;

/// Sources with at least this many chunks get a progress bar.
const PROGRESS_MIN_CHUNKS: usize = 64;

/// Compacts `source`, printing a progress bar on stderr for large sources.
///
/// # Errors
/// [`Error::SourcePath`] when `source` is missing; [`Error::Busy`] when a b2fs mount serves
/// it; [`Error::Source`] when it cannot be compacted (not a contiguous frame, or one this
/// process cannot write, or whose rewrite it cannot create: asked by
/// [`crate::container::write::compact`] before it starts); [`Error::Other`] for I/O errors
/// of the rewrite (the source is then as it was).
pub fn compact(source: &Path) -> Result<(), Error> {
    check_source(source)?;
    let before = std::fs::metadata(source).map(|m| m.len()).unwrap_or(0);
    let mut last = Instant::now();
    let mut shown = false;
    let mut progress = |done: usize, total: usize| {
        if total < PROGRESS_MIN_CHUNKS {
            return;
        }
        let now = Instant::now();
        if done < total && now.duration_since(last) < Duration::from_millis(100) && shown {
            return;
        }
        last = now;
        shown = true;
        let width = 40;
        let filled = done.saturating_mul(width) / total.max(1);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{}{}] {done}/{total} chunks",
            "#".repeat(filled),
            " ".repeat(width - filled.min(width))
        );
        let _ = err.flush();
    };
    let res = crate::container::write::compact(source, &mut progress);
    if shown {
        eprintln!();
    }
    res.map_err(|e| match e {
        // Writing (or reading back) the rewrite failed (a full disk, a file size limit; a
        // source that cannot be written, or a directory the rewrite cannot be made in, is
        // refused before as `Unsupported`): an I/O error, "other failure", not a source that
        // cannot be compacted.
        ContainerError::Io { .. } => Error::Other {
            what: format!("compact {}: {e}", source.display()),
            source: None,
        },
        e => Error::from_container("compact", source, e),
    })?;
    let after = std::fs::metadata(source).map(|m| m.len()).unwrap_or(0);
    eprintln!("compacted {}: {before} -> {after} bytes", source.display());
    Ok(())
}
