//! The inode numbering plan, as data: nodes (directories and generated files) are `1..=N`;
//! each array's chunk files follow as `base + index`; editors' scratch files start at
//! [`SCRATCH_BASE`]. Nothing is allocated per chunk.
//!
//! A writable tree with several arrays (a ctable's columns) gives each array
//! [`ARRAY_STRIDE`] numbers, so any of them can gain chunk files; otherwise arrays are
//! packed (and only the last one can grow). Numbers never change while mounted.
//!
//! A tree that gains nodes and arrays while mounted (a collection, whose leaves are built on
//! first access) uses the growing plan ([`Inodes::growing`]): nodes are `1..CHUNK_BASE` in
//! the order they are added, array `a`'s chunk files are `CHUNK_BASE + a * ARRAY_STRIDE +
//! index`, so nothing added later moves a number handed out earlier.
//!
//! The Zarr view numbers its nodes from 2^63 up by arithmetic of its own
//! (`super::zarr`'s `ino` module).

use crate::reader::{ArrayId, ChunkId};

/// Inode numbers of scratch files (editors' temp files in the mount root) start here, far
/// above any chunk file.
pub const SCRATCH_BASE: u64 = 1 << 62;

/// Chunk inode numbers a writable tree with several arrays reserves per array: more than any
/// source b2fs writes can hold (`MAX_NCHUNKS` of the container layer).
pub const ARRAY_STRIDE: u64 = 1 << 32;

/// First chunk inode number of the growing plan; nodes are below it.
pub const CHUNK_BASE: u64 = 1 << 32;

/// Most arrays the growing plan numbers.
pub const MAX_GROWING_ARRAYS: u64 = (SCRATCH_BASE - CHUNK_BASE) / ARRAY_STRIDE;

/// What an inode number stands for, before anything is checked against the arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Located {
    /// Node `n` (index into the tree's nodes).
    Node(usize),
    /// A chunk file (it may not exist: check the array's chunk count).
    Chunk(ChunkId),
    /// A scratch file number (it may not exist).
    Scratch,
    /// A number of the Zarr view ([`super::zarr::ZARR_BASE`] and up; it may not exist).
    Zarr,
    /// Nothing.
    Nothing,
}

/// The numbering plan of one tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inodes {
    nodes: u64,
    /// First chunk inode of each array, increasing.
    bases: Vec<u64>,
    /// The growing plan: `nodes` and `bases` are unused.
    growing: bool,
}

impl Inodes {
    /// The plan for `nodes` nodes and arrays of `nchunks[i]` chunks; `writable`: leave room
    /// for growth (strided) when there are several arrays and the numbers fit.
    pub fn new(nodes: usize, nchunks: &[usize], writable: bool) -> Inodes {
        let first = nodes as u64 + 1;
        let strided = writable
            && nchunks.len() > 1
            && nchunks.iter().all(|&n| (n as u64) < ARRAY_STRIDE)
            && (nchunks.len() as u64)
                .checked_mul(ARRAY_STRIDE)
                .and_then(|n| n.checked_add(first))
                .is_some_and(|end| end < SCRATCH_BASE);
        let mut next = first;
        let bases = nchunks
            .iter()
            .map(|&n| {
                let base = next;
                next = if strided {
                    next.saturating_add(ARRAY_STRIDE)
                } else {
                    next.saturating_add(n as u64)
                };
                base
            })
            .collect();
        Inodes {
            nodes: nodes as u64,
            bases,
            growing: false,
        }
    }

    /// The growing plan (see the module doc): any node below [`CHUNK_BASE`], arrays strided
    /// from there; existence is the caller's to check.
    pub fn growing() -> Inodes {
        Inodes {
            nodes: 0,
            bases: Vec::new(),
            growing: true,
        }
    }

    /// Whether this is the growing plan.
    pub fn is_growing(&self) -> bool {
        self.growing
    }

    /// What `ino` stands for.
    pub fn locate(&self, ino: u64) -> Located {
        if ino == 0 {
            return Located::Nothing;
        }
        if super::zarr::is_zarr(ino) {
            return Located::Zarr;
        }
        if self.growing {
            return match ino {
                SCRATCH_BASE.. => Located::Scratch,
                CHUNK_BASE.. => {
                    let rel = ino - CHUNK_BASE;
                    Located::Chunk(ChunkId::new(
                        ArrayId((rel / ARRAY_STRIDE) as u32),
                        (rel % ARRAY_STRIDE) as usize,
                    ))
                }
                _ => Located::Node((ino - 1) as usize),
            };
        }
        if ino <= self.nodes {
            return Located::Node((ino - 1) as usize);
        }
        if ino >= SCRATCH_BASE {
            return Located::Scratch;
        }
        // Bases are increasing: the last one at or below `ino`.
        match self.bases.partition_point(|&b| b <= ino).checked_sub(1) {
            Some(a) => Located::Chunk(ChunkId::new(
                ArrayId(a as u32),
                (ino - self.bases[a]) as usize,
            )),
            None => Located::Nothing,
        }
    }

    /// The inode of chunk file `id`.
    pub fn chunk_ino(&self, id: ChunkId) -> u64 {
        if self.growing {
            return CHUNK_BASE + u64::from(id.array.0) * ARRAY_STRIDE + id.index as u64;
        }
        self.bases[id.array.index()] + id.index as u64
    }

    /// How many chunk files array `id` can have: the numbers up to the next array's (or the
    /// scratch files).
    pub fn capacity(&self, id: ArrayId) -> u64 {
        if self.growing {
            return ARRAY_STRIDE;
        }
        let a = id.index();
        let end = self.bases.get(a + 1).copied().unwrap_or(SCRATCH_BASE);
        self.bases.get(a).map_or(0, |&b| end.saturating_sub(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(a: u32, i: usize) -> Located {
        Located::Chunk(ChunkId::new(ArrayId(a), i))
    }

    #[test]
    fn packed_plan_numbers_chunks_after_the_nodes() {
        let p = Inodes::new(10, &[3, 5], false);
        assert_eq!(p.locate(0), Located::Nothing);
        assert_eq!(p.locate(1), Located::Node(0));
        assert_eq!(p.locate(10), Located::Node(9));
        assert_eq!(p.locate(11), chunk(0, 0));
        assert_eq!(p.locate(13), chunk(0, 2));
        assert_eq!(p.locate(14), chunk(1, 0));
        assert_eq!(p.chunk_ino(ChunkId::new(ArrayId(1), 4)), 18);
        assert_eq!(p.capacity(ArrayId(0)), 3);
        // The last array can grow up to the scratch files.
        assert_eq!(p.capacity(ArrayId(1)), SCRATCH_BASE - 14);
    }

    #[test]
    fn writable_plan_with_several_arrays_is_strided() {
        let p = Inodes::new(4, &[2, 2, 2], true);
        assert_eq!(p.locate(5), chunk(0, 0));
        assert_eq!(p.locate(5 + ARRAY_STRIDE), chunk(1, 0));
        assert_eq!(
            p.locate(5 + ARRAY_STRIDE - 1),
            chunk(0, (ARRAY_STRIDE - 1) as usize)
        );
        assert_eq!(p.capacity(ArrayId(1)), ARRAY_STRIDE);
        // One array, or a read-only tree: packed.
        assert_eq!(
            Inodes::new(4, &[2], true).capacity(ArrayId(0)),
            SCRATCH_BASE - 5
        );
        assert_eq!(
            Inodes::new(4, &[2, 2], false).chunk_ino(ChunkId::new(ArrayId(1), 0)),
            7
        );
    }

    #[test]
    fn growing_plan_numbers_do_not_depend_on_what_exists() {
        let p = Inodes::growing();
        assert_eq!(p.locate(1), Located::Node(0));
        assert_eq!(
            p.locate(CHUNK_BASE - 1),
            Located::Node((CHUNK_BASE - 2) as usize)
        );
        assert_eq!(p.locate(CHUNK_BASE), chunk(0, 0));
        let id = ChunkId::new(ArrayId(7), 12);
        assert_eq!(p.locate(p.chunk_ino(id)), Located::Chunk(id));
        let last = ChunkId::new(ArrayId((MAX_GROWING_ARRAYS - 1) as u32), 0);
        assert!(p.chunk_ino(last) < SCRATCH_BASE);
        assert_eq!(p.locate(SCRATCH_BASE), Located::Scratch);
        assert_eq!(p.capacity(ArrayId(3)), ARRAY_STRIDE);
    }

    #[test]
    fn scratch_numbers_are_above_every_chunk() {
        let p = Inodes::new(4, &[usize::MAX / 2], false);
        assert_eq!(p.locate(SCRATCH_BASE), Located::Scratch);
        assert_eq!(
            p.locate(super::super::zarr::ZARR_BASE - 1),
            Located::Scratch
        );
        // The Zarr view's numbers are above the scratch files.
        assert_eq!(p.locate(u64::MAX), Located::Zarr);
        assert!(matches!(p.locate(SCRATCH_BASE - 1), Located::Chunk(_)));
        // Too many chunks to stride: packed even when writable.
        let big = Inodes::new(4, &[ARRAY_STRIDE as usize, 1], true);
        assert_eq!(big.capacity(ArrayId(0)), ARRAY_STRIDE);
        assert_eq!(big.locate(5 + ARRAY_STRIDE), chunk(1, 0));
    }
}
