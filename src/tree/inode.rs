//! The inode numbering plan, as data: nodes (directories and generated files) are `1..=N`;
//! each array's chunk files follow as `base + index`; editors' scratch files start at
//! [`SCRATCH_BASE`]. Nothing is allocated per chunk.
//!
//! A writable tree with several arrays (a ctable's columns) gives each array
//! [`ARRAY_STRIDE`] numbers, so any of them can gain chunk files; otherwise arrays are
//! packed (and only the last one can grow). Numbers never change while mounted.

use crate::reader::{ArrayId, ChunkId};

/// Inode numbers of scratch files (editors' temp files in the mount root) start here, far
/// above any chunk file.
pub const SCRATCH_BASE: u64 = 1 << 62;

/// Chunk inode numbers a writable tree with several arrays reserves per array: more than any
/// source b2fs writes can hold (`MAX_NCHUNKS` of the container layer).
pub const ARRAY_STRIDE: u64 = 1 << 32;

/// What an inode number stands for, before anything is checked against the arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Located {
    /// Node `n` (index into the tree's nodes).
    Node(usize),
    /// A chunk file (it may not exist: check the array's chunk count).
    Chunk(ChunkId),
    /// A scratch file number (it may not exist).
    Scratch,
    /// Nothing.
    Nothing,
}

/// The numbering plan of one tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inodes {
    nodes: u64,
    /// First chunk inode of each array, increasing.
    bases: Vec<u64>,
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
        }
    }

    /// What `ino` stands for.
    pub fn locate(&self, ino: u64) -> Located {
        if ino == 0 {
            return Located::Nothing;
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
        self.bases[id.array.index()] + id.index as u64
    }

    /// How many chunk files array `id` can have: the numbers up to the next array's (or the
    /// scratch files).
    pub fn capacity(&self, id: ArrayId) -> u64 {
        let a = id.index();
        let end = self.bases.get(a + 1).copied().unwrap_or(SCRATCH_BASE);
        self.bases.get(a).map_or(0, |&b| end.saturating_sub(b))
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes as usize
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
    fn scratch_numbers_are_above_every_chunk() {
        let p = Inodes::new(4, &[usize::MAX / 2], false);
        assert_eq!(p.locate(SCRATCH_BASE), Located::Scratch);
        assert_eq!(p.locate(u64::MAX), Located::Scratch);
        assert!(matches!(p.locate(SCRATCH_BASE - 1), Located::Chunk(_)));
        // Too many chunks to stride: packed even when writable.
        let big = Inodes::new(4, &[ARRAY_STRIDE as usize, 1], true);
        assert_eq!(big.capacity(ArrayId(0)), ARRAY_STRIDE);
        assert_eq!(big.locate(5 + ARRAY_STRIDE), chunk(1, 0));
    }
}
