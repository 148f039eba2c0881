//! Reading the view: directory listings ([`Listing`], lazy for the chunk tree), what a
//! descriptor pins at open, and the bytes of `zarr.json` files and chunk objects.
//!
//! A chunk object is the chunk's items in C order over the full chunk shape: for a
//! [`Source::Prefix`] geometry the first bytes of the decoded chunk (zero-copy from the
//! reader's cache; a linear source's short last chunk is padded with zeros), else the runs
//! of the one-chunk grid gathered from the block-ordered chunk by the same code `array.npy`
//! uses (`Tree::fill_runs`). A shard (`-o zarr_shards`) is the decoded chunk as stored
//! followed by its index, made from the geometry alone ([`super::Geom::shard_index`]). All
//! read the reader's caches, so each chunk is decoded once whichever view reads it, and a
//! writer's descriptor sees the chunk's edit buffer.

use super::geom::Source;
use super::{Tree, TreeError, ZNode};
use crate::container::ndim::Run;
use crate::reader::{ArrayId, ChunkId, Pattern, ReadData, ReadHint};
use crate::tree::attr::EntryKind;
use crate::tree::handle::Pinned;
use crate::tree::layout::ROOT_INO;

/// Bytes a handle reads from a shard's start, in one stream, before its reads take whole
/// chunks: more than a few inner chunks (a window's, coalesced by zarr-python up to its
/// 1 MiB gap), so that a reader of the whole object (`read_bytes()`) decodes the chunk once.
const SHARD_SCAN_FROM_START: u64 = 1 << 20;

/// The entries of a Zarr directory after `.` and `..`.
#[derive(Debug, Clone)]
pub(crate) enum Listing {
    /// Named entries (groups, arrays, `zarr.json`, `c`).
    Names(Vec<(u64, EntryKind, String)>),
    /// Key segment `0..count` of the chunk tree of `array` below prefix `index` at `level`
    /// (children at `level + 1`; files when that is the last level).
    Chunks {
        /// The array.
        array: ArrayId,
        /// The children's level.
        level: u8,
        /// The first child's prefix rank.
        first: u64,
        /// How many children.
        count: u64,
        /// Whether they are chunk objects.
        files: bool,
    },
    /// A directory of the Zarr v2 view (`v2.rs`).
    V2(super::v2::Listing),
}

impl Listing {
    /// Number of entries.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Listing::Names(v) => v.len() as u64,
            Listing::Chunks { count, .. } => *count,
            Listing::V2(l) => l.len(),
        }
    }

    /// Entry `k`.
    pub(crate) fn get(&self, k: u64) -> Option<(u64, EntryKind, String)> {
        match self {
            Listing::Names(v) => v.get(usize::try_from(k).ok()?).cloned(),
            Listing::V2(l) => l.get(k),
            Listing::Chunks {
                array,
                level,
                first,
                count,
                files,
            } => {
                if k >= *count {
                    return None;
                }
                let ino = ZNode::Chunks {
                    array: *array,
                    level: *level,
                    index: first + k,
                }
                .ino()?;
                let kind = if *files {
                    EntryKind::File
                } else {
                    EntryKind::Directory
                };
                Some((ino, kind, k.to_string()))
            }
        }
    }
}

/// The key segment `name` stands for: canonical decimal only (`0`, `17`; not `017`, `+1`).
pub(crate) fn parse_key(name: &str) -> Option<u64> {
    let ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_digit())
        && (name == "0" || !name.starts_with('0'));
    ok.then(|| name.parse().ok()).flatten()
}

impl Tree {
    /// The parent of Zarr directory `z` (for `..`).
    fn zarr_parent(&self, z: ZNode) -> u64 {
        let root = self.zarr_root_ino();
        let dir = |n: u64| {
            if n == ROOT_INO {
                return root;
            }
            match self.node(n).map(|x| x.parent) {
                Some(ROOT_INO) | None => root,
                Some(p) => self.zarr_shown_ino(ZNode::Dir(p)).unwrap_or(root),
            }
        };
        match z {
            ZNode::Root => ROOT_INO,
            ZNode::Dir(n) => dir(n),
            ZNode::Chunks {
                array, level: 0, ..
            } => {
                let data = crate::tree::events::data_dir_of(&self.nodes, array);
                let n = self.node(data).map_or(ROOT_INO, |x| x.parent);
                self.zarr_shown_ino(ZNode::Dir(n)).unwrap_or(root)
            }
            ZNode::Chunks {
                array,
                level,
                index,
            } => {
                let up = level - 1;
                let g = self.zarr_geom(array, None).ok();
                let across = g.map_or(1, |g| g.grid[usize::from(up)].max(1));
                ZNode::Chunks {
                    array,
                    level: up,
                    index: index / across,
                }
                .ino()
                .unwrap_or(root)
            }
            ZNode::RootJson | ZNode::Json(_) => root,
            ZNode::Pending(k) => self.zarr_pending_parent(k),
        }
    }

    /// The geometry of `array` and `level`, when its chunk-tree node `ino` at `level` is a
    /// directory.
    pub(crate) fn zarr_chunk_dir(
        &self,
        ino: u64,
        array: ArrayId,
        level: u8,
    ) -> Result<(std::sync::Arc<super::Geom>, usize), TreeError> {
        let g = self
            .zarr_geom(array, None)
            .map_err(|_| TreeError::NotFound)?;
        let level = usize::from(level);
        if level >= g.ndim() {
            return Err(TreeError::NotADirectory(ino));
        }
        Ok((g, level))
    }

    /// The listing of Zarr directory `z` and its parent's inode.
    ///
    /// # Errors
    /// [`TreeError::NotFound`], [`TreeError::NotADirectory`], EIO for a leaf that cannot be
    /// opened.
    pub(crate) fn zarr_listing(&self, ino: u64, z: ZNode) -> Result<(u64, Listing), TreeError> {
        if !self.zarr_exists(z) {
            return Err(TreeError::NotFound);
        }
        let parent = self.zarr_parent(z);
        if let ZNode::Chunks {
            array,
            level,
            index,
        } = z
        {
            let (g, level) = self.zarr_chunk_dir(ino, array, level)?;
            let count = g.grid[level];
            return Ok((
                parent,
                Listing::Chunks {
                    array,
                    level: (level + 1) as u8,
                    first: index * count,
                    count,
                    files: level + 1 == g.ndim(),
                },
            ));
        }
        let mut names = Vec::new();
        if let ZNode::Pending(_) = z {
            // Only the pending directories made in it (`create.rs`).
            for (name, child) in self.zarr_pending_in(ino, &[]) {
                if let Some(c) = child.ino() {
                    names.push((c, EntryKind::Directory, name));
                }
            }
            return Ok((parent, Listing::Names(names)));
        }
        for (name, child) in self.zarr_children(z)? {
            let Some(c) = self.zarr_shown_ino(child) else {
                continue;
            };
            let kind = match child {
                ZNode::RootJson | ZNode::Json(_) => EntryKind::File,
                ZNode::Chunks { level, .. } => {
                    let g = self.zarr_geom(level_array(child), None);
                    match g {
                        Ok(g) if usize::from(level) == g.ndim() => EntryKind::File,
                        _ => EntryKind::Directory,
                    }
                }
                _ => EntryKind::Directory,
            };
            names.push((c, kind, name));
        }
        Ok((parent, Listing::Names(names)))
    }

    /// What a read-only descriptor of Zarr file `z` reads: the metadata of now, or the
    /// chunk's version and the NPY view of now.
    pub(crate) fn zarr_pin(&self, z: ZNode, p: &mut Pinned) {
        match z {
            ZNode::RootJson | ZNode::Json(_) => p.content = self.zarr_json(z).ok(),
            ZNode::Chunks { array, .. } => {
                p.stores.push((array, self.reader.pinned(array)));
                p.npy = self.npy_view(array);
            }
            _ => {}
        }
    }

    /// Up to `size` bytes of Zarr file `z` (inode `ino`) from `offset`.
    pub(crate) fn zarr_read(
        &self,
        ino: u64,
        z: ZNode,
        (offset, size): (u64, u32),
        hint: ReadHint,
        pinned: Option<&Pinned>,
    ) -> Result<ReadData, TreeError> {
        let ZNode::Chunks { array, index, .. } = z else {
            let bytes = self.zarr_json(z)?;
            let r = crate::reader::window(bytes.len(), offset, size);
            return Ok(ReadData::Fixed(bytes, r));
        };
        let npy = pinned.and_then(|p| p.npy.clone());
        let g = self
            .zarr_geom(array, npy)
            .map_err(|_| TreeError::NotFound)?;
        self.zarr_read_object(ino, (&g, array, index), (offset, size), hint, pinned)
    }

    /// Up to `size` bytes from `offset` of the object (inode `ino`) of chunk `index` of
    /// `array` in geometry `g`: the v3 view's chunk objects and shards, and the v2 view's
    /// chunk objects (`v2.rs`, always unsharded).
    pub(super) fn zarr_read_object(
        &self,
        ino: u64,
        (g, array, index): (&super::Geom, ArrayId, u64),
        (offset, size): (u64, u32),
        hint: ReadHint,
        pinned: Option<&Pinned>,
    ) -> Result<ReadData, TreeError> {
        let end = offset.saturating_add(u64::from(size)).min(g.object_size());
        if offset >= end {
            return Ok(ReadData::Owned(Vec::new()));
        }
        if end > g.object_len {
            // A shard's index (synthesized), after what the read takes of its data.
            let data_end = g.object_len.max(offset);
            let mut out = Vec::with_capacity((end - offset) as usize);
            if offset < data_end {
                let n = (data_end - offset) as u32;
                let data =
                    self.zarr_read_object(ino, (g, array, index), (offset, n), hint, pinned)?;
                out.extend_from_slice(&data);
                // (Short when the chunk is gone: the index still goes at its own offset.)
                out.resize(n as usize, 0);
            }
            out.extend(g.shard_index(data_end - g.object_len, end - g.object_len));
            return Ok(ReadData::Owned(out));
        }
        let store = self.version_of(pinned, array);
        if index as usize >= store.nchunks() {
            return Ok(ReadData::Owned(Vec::new()));
        }
        let id = ChunkId::new(array, index as usize);
        let buffers = pinned.is_none() && self.options.writable;
        let eio = |source| TreeError::Container { ino, source };
        let len = (end - offset) as usize;
        match &g.source {
            Source::Prefix => {
                let valid = g.valid(index).max(offset).min(end);
                let mut out = Vec::new();
                if valid > offset {
                    let n = (valid - offset) as u32;
                    let edited = if buffers {
                        self.edited_window(id, offset, n)?
                    } else {
                        None
                    };
                    match edited {
                        Some(bytes) => out = bytes,
                        None => {
                            // A shard's inner chunks are parts its reader chose: only their
                            // blocks are decoded, however the kernel splits the read into
                            // requests (a read of 5 inner chunks may arrive as requests
                            // that continue one another). A stream over half the object, or
                            // over 1 MiB from its start, is a scan of it (`cp`, a Zarr
                            // reader's whole-shard read): whole chunk, prefetch.
                            let scan = hint.scan(g.object_len)
                                || (hint.streaming && hint.stream > SHARD_SCAN_FROM_START);
                            let hint = match &g.shard {
                                Some(_) if !scan => ReadHint {
                                    pattern: Pattern::Part,
                                    ..hint
                                },
                                _ => hint,
                            };
                            let sole = || self.handles.sole_reader(ino);
                            let got = self
                                .reader
                                .read_in(store.as_ref(), id, offset, n, hint, sole)
                                .map_err(eio)?;
                            if got.len() == len {
                                return Ok(got);
                            }
                            out = got.to_vec();
                        }
                    }
                }
                out.resize(len, 0);
                Ok(ReadData::Owned(out))
            }
            Source::Relayout(_) => {
                let mut out = vec![0u8; len];
                let runs = g
                    .runs(offset, len as u64)
                    .into_iter()
                    .flatten()
                    .map(|r| Run { chunk: index, ..r });
                // Zarr readers read an object whole, from its start (the handle's first read
                // at 0, then sequential ones): those take whole chunks through the cache. A
                // read elsewhere (a tool seeking into the object) takes only the blocks its
                // runs fall in, as a page fault of `array.npy` does.
                let small = hint.pattern == Pattern::Random;
                self.fill_runs(ino, (store.as_ref(), array, buffers), runs, small, &mut out)?;
                Ok(ReadData::Owned(out))
            }
        }
    }

    /// The size of Zarr file `z` now.
    pub(crate) fn zarr_size(&self, z: ZNode) -> Result<u64, TreeError> {
        match z {
            ZNode::Chunks { array, .. } => self
                .zarr_geom(array, None)
                .map(|g| g.object_size())
                .map_err(|_| TreeError::NotFound),
            // Metadata that cannot be made (a group's attributes whose carrier does not
            // read) is listed with size 0; its open and reads give EIO.
            _ => match self.zarr_json(z) {
                Ok(json) => Ok(json.len() as u64),
                Err(TreeError::Unavailable(_)) => Ok(0),
                Err(e) => Err(e),
            },
        }
    }
}

/// The array of a chunk-tree node (`ArrayId(u32::MAX)` for others: never a real one).
fn level_array(z: ZNode) -> ArrayId {
    match z {
        ZNode::Chunks { array, .. } => array,
        _ => ArrayId(u32::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_canonical_decimals() {
        assert_eq!(parse_key("0"), Some(0));
        assert_eq!(parse_key("17"), Some(17));
        for bad in ["", "017", "+1", "1a", "-1", "99999999999999999999999"] {
            assert_eq!(parse_key(bad), None, "{bad}");
        }
    }
}
