//! Issue 21, bounded growth: a contiguous frame's dead space given back after the mount's
//! commits, by a compaction once the dead space passes the live bytes plus [`RECLAIM_SLACK`];
//! what the committer remembers of each frame's space between commits ([`Reclaim`]).

use super::Committer;
use crate::container::write;
use crate::reader::{Change, LiveArray};

/// Issue 21: a contiguous frame is compacted after a commit of the mount when its dead space
/// (bytes no chunk, index or trailer of the current version uses) exceeds its live bytes plus
/// this much: the file stays within twice its live bytes, plus this, plus one commit's chunks.
pub const RECLAIM_SLACK: u64 = 1 << 20;

/// What [`Committer`] knows of one frame's space (issue 21, bounded growth).
#[derive(Debug, Default)]
pub(super) struct Reclaim {
    /// Live bytes when last measured (or the file's length when first seen, which is at
    /// least that): the file is measured again once it is twice that plus
    /// [`RECLAIM_SLACK`].
    baseline: Option<u64>,
    /// The mount's shared lock on the file a compaction renamed in.
    lock: Option<write::SourceLock>,
}

impl Committer {
    /// Issue 21, bounded growth: after a commit of the mount, compacts the contiguous frame
    /// of `live` when its dead space passes its live bytes plus [`RECLAIM_SLACK`]
    /// ([`write::compact_mounted`]: a temp file renamed in; descriptors reading older
    /// versions keep the old file), then serves the new file with every stamp kept. The
    /// file is measured (one chunk header per chunk) only once it has grown to twice what
    /// was live when last measured, so the cost stays proportional to what commits wrote.
    /// Best effort: a failure is logged and leaves the source as it was. Collection leaves
    /// (committed through their store) are not compacted here.
    pub(super) fn reclaim(&mut self, live: &LiveArray) {
        if live.leaf_key().is_some() {
            return;
        }
        let array = live.get();
        let Some(len) = array.file_state().map(|s| s.len) else {
            return;
        };
        let path = live.path();
        let r = self.reclaim.entry(path.to_path_buf()).or_default();
        let baseline = *r.baseline.get_or_insert(len);
        if len <= baseline.saturating_mul(2).saturating_add(RECLAIM_SLACK) {
            return;
        }
        let space = match write::space(&array) {
            Ok(Some(s)) => s,
            Ok(None) => return,
            Err(e) => {
                log::warn!("{}: cannot measure dead space: {e}", path.display());
                r.baseline = Some(len);
                return;
            }
        };
        r.baseline = Some(space.live);
        if space.len <= space.live.saturating_mul(2).saturating_add(RECLAIM_SLACK) {
            return;
        }
        match write::compact_mounted(&array) {
            Ok(lock) => {
                r.lock = Some(lock);
                if let Err(e) = live.reload(Change::Compacted) {
                    log::warn!(
                        "{}: compacted, but reopening it failed: {e}",
                        path.display()
                    );
                    return;
                }
                let now = live.get().file_state().map_or(0, |s| s.len);
                r.baseline = Some(now);
                log::info!(
                    "{}: compacted: {} bytes of dead space given back ({} -> {now} bytes, {} live)",
                    path.display(),
                    space.len.saturating_sub(now),
                    space.len,
                    space.live
                );
            }
            Err(e) => log::warn!(
                "{}: not compacted ({} bytes, {} live): {e}",
                path.display(),
                space.len,
                space.live
            ),
        }
    }
}
