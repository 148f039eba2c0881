//! The view's inodes for the kernel: whether one exists now, its attributes, and the entry a
//! name gives in a Zarr directory (chunk keys, members, temp files), with the chunk a chunk
//! object shows.

use super::super::layout::NodeKind;
use super::super::{Attr, EntryKind, Tree, TreeError};
use super::{ZNode, read};
use crate::reader::ChunkId;

/// The names zarr-python probes for Zarr v2 metadata: answered ENOENT at once, without
/// opening anything.
const V2_PROBES: &[&str] = &[".zarray", ".zattrs", ".zgroup", ".zmetadata"];

impl Tree {
    /// Whether `node` stands for something that exists now.
    pub(crate) fn zarr_exists(&self, z: ZNode) -> bool {
        match z {
            ZNode::Root | ZNode::RootJson => true,
            ZNode::Pending(k) => self.zarr_pending(k) == Some(z),
            ZNode::Dir(n) | ZNode::Json(n) => matches!(
                self.node(n).map(|n| &n.kind),
                Some(NodeKind::Dir { data: None, .. } | NodeKind::Leaf(_))
            ),
            ZNode::Chunks {
                array,
                level,
                index,
            } => {
                if array.index() >= self.reader.arrays() {
                    return false;
                }
                match self.zarr_geom(array, None) {
                    Ok(g) => usize::from(level) <= g.ndim() && index < g.prefixes(level.into()),
                    Err(_) => false,
                }
            }
        }
    }

    /// The chunk `ino` shows when it is a chunk object of the view.
    pub(crate) fn zarr_chunk_of(&self, ino: u64) -> Option<ChunkId> {
        match ZNode::of(ino)? {
            ZNode::Chunks {
                array,
                level,
                index,
            } => {
                let g = self.zarr_geom(array, None).ok()?;
                (usize::from(level) == g.ndim() && index < g.nchunks())
                    .then(|| ChunkId::new(array, index as usize))
            }
            _ => None,
        }
    }

    /// The inode of the chunk object that shows chunk `id` (`None`: the array has none).
    pub(crate) fn zarr_chunk_ino(&self, id: ChunkId) -> Option<u64> {
        let g = self.zarr_geom(id.array, None).ok()?;
        ZNode::Chunks {
            array: id.array,
            level: u8::try_from(g.ndim()).ok()?,
            index: id.index as u64,
        }
        .ino()
    }

    /// Whether Zarr node `z` (inode `ino`) is a directory.
    pub(crate) fn zarr_is_dir(&self, ino: u64, z: ZNode) -> bool {
        match z {
            ZNode::Root | ZNode::Dir(_) | ZNode::Pending(_) => true,
            ZNode::RootJson | ZNode::Json(_) => false,
            ZNode::Chunks { .. } => self.zarr_chunk_of(ino).is_none(),
        }
    }

    /// The attributes of Zarr inode `ino` (`z`).
    pub(crate) fn zarr_getattr(&self, ino: u64, z: ZNode) -> Result<Attr, TreeError> {
        if !self.zarr_exists(z) {
            return Err(TreeError::NotFound);
        }
        match z {
            ZNode::Root | ZNode::Pending(_) => Ok(self.dir_attr(ino, 2)),
            ZNode::Dir(n) => {
                // A collection leaf is not opened by a stat (1 = "count unknown").
                let nlink = match self.node(n).map(|x| &x.kind) {
                    Some(NodeKind::Leaf(l)) if !l.built.tried() => 1,
                    _ => 2,
                };
                Ok(self.dir_attr(ino, nlink))
            }
            // Size 0 for metadata that cannot be made (`zarr_size`): its open gives EIO.
            ZNode::RootJson | ZNode::Json(_) => {
                let len = self.zarr_size(z)?;
                Ok(self.attr(ino, EntryKind::File, len, 1))
            }
            ZNode::Chunks { array, level, .. } => {
                let g = self
                    .zarr_geom(array, None)
                    .map_err(|_| TreeError::NotFound)?;
                if usize::from(level) < g.ndim() {
                    Ok(self.dir_attr(ino, 2))
                } else {
                    let mut a = self.attr(ino, EntryKind::File, g.object_size(), 1);
                    if let Some(s) = &g.shard {
                        // Readers size their buffers from it (Python's `open` takes it as
                        // its buffer): an inner chunk's, so that a read of a few inner
                        // chunks asks for those, not for a whole megabyte of blocks.
                        a.blksize = s.inner_bytes.clamp(4096, u64::from(a.blksize)) as u32;
                    }
                    Ok(a)
                }
            }
        }
    }

    /// The entry `name` of Zarr directory `parent` (`z`).
    pub(crate) fn zarr_lookup(&self, parent: u64, z: ZNode, name: &str) -> Result<Attr, TreeError> {
        if V2_PROBES.contains(&name) || !self.zarr_exists(z) {
            return Err(TreeError::NotFound);
        }
        let child = match z {
            ZNode::Chunks {
                array,
                level,
                index,
            } => {
                let (g, level) = self.zarr_chunk_dir(parent, array, level)?;
                let i = read::parse_key(name).filter(|&i| i < g.grid[level]);
                match i {
                    Some(i) => ZNode::Chunks {
                        array,
                        level: (level + 1) as u8,
                        index: index * g.grid[level] + i,
                    },
                    None => return self.zarr_scratch_lookup(parent, name),
                }
            }
            ZNode::RootJson | ZNode::Json(_) => return Err(TreeError::NotADirectory(parent)),
            // A directory made for a new array holds only temp files and the directories made
            // in it until its zarr.json.
            ZNode::Pending(_) => match self.zarr_named(parent, name, None) {
                Some(p @ ZNode::Pending(_)) => {
                    return self.getattr(p.ino().ok_or(TreeError::NotFound)?);
                }
                _ => return self.zarr_scratch_lookup(parent, name),
            },
            // A directory made through the view answers with its pending directory's inode,
            // before and after its member is made (`pending.rs`).
            _ => match self.zarr_named(parent, name, self.zarr_child(z, name)?) {
                Some(p @ ZNode::Pending(_)) => {
                    return self.getattr(p.ino().ok_or(TreeError::NotFound)?);
                }
                Some(child) => child,
                None => return self.zarr_scratch_lookup(parent, name),
            },
        };
        let ino = child.ino().ok_or(TreeError::NotFound)?;
        self.zarr_getattr(ino, child)
    }

    /// A temp file `name` of Zarr directory `parent`, if there is one.
    pub(super) fn zarr_scratch_lookup(&self, parent: u64, name: &str) -> Result<Attr, TreeError> {
        let ino = self
            .scratch_in(self.zarr_dir_ino(parent), name)
            .ok_or(TreeError::NotFound)?;
        self.getattr(ino)
    }
}
