//! Directory listings ([`ReadDir`], lazy and positional) and the names of chunk files.
//!
//! Offsets are positions: `.` is 0, `..` is 1, then children in order, so resuming at any
//! offset a previous call returned is exact whatever buffer size the caller had. A data
//! directory's entries are computed from the array's chunk count, never allocated. Other
//! directories list the scratch files in them when the listing starts after their fixed
//! children (and the root after the Zarr view).

use std::borrow::Cow;

use super::Tree;
use super::attr::{DirEntry, EntryKind};
use super::layout::NodeKind;
use crate::reader::{ArrayId, ChunkId};

/// The file name of chunk `index`: 8-digit zero-padded decimal plus `.bin`.
pub fn chunk_name(index: usize) -> String {
    format!("{index:08}.bin")
}

/// The chunk index a file name stands for, accepting only the canonical spelling.
pub(crate) fn parse_chunk_name(name: &str) -> Option<usize> {
    let digits = name.strip_suffix(".bin")?;
    if digits.len() < 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: usize = digits.parse().ok()?;
    (chunk_name(index) == name).then_some(index)
}

/// A lazy directory listing; see [`Tree::readdir`].
#[derive(Debug)]
pub struct ReadDir<'a> {
    pub(crate) tree: &'a Tree,
    pub(crate) ino: u64,
    pub(crate) parent: u64,
    pub(crate) children: Cow<'a, [u64]>,
    /// The directory's scratch files (inode, name), listed after `children`.
    pub(crate) scratch: Vec<(u64, String)>,
    pub(crate) data: Option<ArrayId>,
    pub(crate) pos: u64,
    pub(crate) len: u64,
    /// A directory of the Zarr view: its entries.
    pub(crate) zarr: Option<super::zarr::Listing>,
    /// The root: the Zarr views' directories (inode, name: `zarr/`, `zarr2/`), listed after
    /// its children.
    pub(crate) views: Vec<(u64, String)>,
}

impl Iterator for ReadDir<'_> {
    type Item = DirEntry;

    fn next(&mut self) -> Option<DirEntry> {
        if self.pos >= self.len {
            return None;
        }
        let pos = self.pos;
        self.pos += 1;
        let (ino, kind, name) = match pos {
            0 => (self.ino, EntryKind::Directory, ".".to_owned()),
            1 => (self.parent, EntryKind::Directory, "..".to_owned()),
            _ => {
                let k = (pos - 2) as usize;
                if let Some(listing) = &self.zarr {
                    let (ino, kind, name) = listing.get(k as u64)?;
                    return Some(DirEntry {
                        ino,
                        next_offset: pos + 1,
                        kind,
                        name,
                    });
                }
                match self.data {
                    Some(array) => (
                        self.tree.inodes.chunk_ino(ChunkId::new(array, k)),
                        EntryKind::File,
                        chunk_name(k),
                    ),
                    // Fixed children, the Zarr views (the root's), then the scratch files.
                    None if k >= self.children.len()
                        && k < self.children.len() + self.views.len() =>
                    {
                        let (ino, name) = self.views[k - self.children.len()].clone();
                        (ino, EntryKind::Directory, name)
                    }
                    None if k >= self.children.len() => {
                        let first = self.children.len() + self.views.len();
                        let (ino, name) = self.scratch.get(k - first)?.clone();
                        (ino, EntryKind::File, name)
                    }
                    None => {
                        let child = self.children[k];
                        let node = self.tree.node(child)?;
                        let kind = match node.kind {
                            NodeKind::Dir { .. } | NodeKind::Leaf(_) => EntryKind::Directory,
                            NodeKind::File(_) => EntryKind::File,
                        };
                        (child, kind, node.name.clone())
                    }
                }
            }
        };
        Some(DirEntry {
            ino,
            next_offset: pos + 1,
            kind,
            name,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.len.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for ReadDir<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_names_round_trip_and_reject_aliases() {
        assert_eq!(chunk_name(0), "00000000.bin");
        assert_eq!(chunk_name(123_456_789), "123456789.bin");
        assert_eq!(parse_chunk_name("00000017.bin"), Some(17));
        assert_eq!(parse_chunk_name("123456789.bin"), Some(123_456_789));
        for bad in [
            "17.bin",
            "000000017.bin",
            "0000001a.bin",
            "00000017",
            "+0000017.bin",
        ] {
            assert_eq!(parse_chunk_name(bad), None, "{bad}");
        }
    }
}
