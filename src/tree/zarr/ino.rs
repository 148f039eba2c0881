//! The inode numbers of the Zarr view, as arithmetic: nothing is allocated per node.
//!
//! Every number of the view has the top bit set ([`ZARR_BASE`], above the chunk files and the
//! scratch files of [`super::super::inode`]); the next three bits say what it is:
//!
//! ```text
//! tag 0  the view's root group (`zarr/`)
//! tag 1  its zarr.json
//! tag 2  the Zarr directory (group or array) that mirrors native directory inode N
//! tag 3  that directory's zarr.json
//! tag 4  a node of an array's chunk tree: `c` and `c/i/...` directories, chunk objects
//!        (array: 23 bits, level: 5 bits, index: 32 bits)
//! tag 5  a directory made by `mkdir` for a new array, number N (`create.rs`)
//! tag 6  a node of the Zarr v2 view (`zarr2/`, `v2.rs`): its root, a directory, a metadata file
//! tag 7  a chunk object of the Zarr v2 view (array: 23 bits, index: 32 bits)
//! ```
//!
//! A chunk-tree node at level `k` stands for the key prefix `c/i0/.../i(k-1)`; its index is
//! the C-order rank of `(i0, ..., i(k-1))` in the first `k` dimensions of the chunk grid, so
//! at level `ndim` it is the chunk's index in the source (the same number as
//! `data/N.bin`), and growth along the first axis moves no number.

use crate::reader::ArrayId;

/// The first inode number of the Zarr view.
pub const ZARR_BASE: u64 = 1 << 63;

/// Where the tag starts (the v2 view's numbers use it too).
pub(super) const TAG_SHIFT: u32 = 60;
/// The bits below the tag.
pub(super) const PAYLOAD: u64 = (1 << TAG_SHIFT) - 1;
const LEVEL_SHIFT: u32 = 55;
const ARRAY_SHIFT: u32 = 32;

/// Most arrays whose chunks the view can number (2^23).
pub const MAX_ARRAYS: u32 = 1 << 23;
/// Most chunk-tree levels (`c` plus one per dimension: b2nd has at most 16, plus the
/// trailing axes of a subarray or raw-byte item).
pub const MAX_LEVELS: u8 = 31;
/// Most chunks (and key prefixes per level) an array can show (2^32).
pub const MAX_INDEX: u64 = 1 << 32;

/// What a Zarr inode number stands for (not checked against the tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZNode {
    /// `zarr/`.
    Root,
    /// `zarr/zarr.json` (with the consolidated metadata).
    RootJson,
    /// The group or array directory mirroring native directory `ino`.
    Dir(u64),
    /// Its `zarr.json`.
    Json(u64),
    /// A chunk-tree node of `array`: `level` key segments after `c`, prefix rank `index`.
    Chunks {
        /// The array.
        array: ArrayId,
        /// Key segments after `c` (0: `c` itself).
        level: u8,
        /// C-order rank of the prefix in the grid's first `level` dimensions.
        index: u64,
    },
    /// Directory `k` made by `mkdir` for a new array (`create.rs`): the array's directory
    /// once the array is made.
    Pending(u64),
}

impl ZNode {
    /// The inode number of this node, or `None` when its numbers do not fit the plan.
    pub fn ino(self) -> Option<u64> {
        let (tag, payload) = match self {
            ZNode::Root => (0, 0),
            ZNode::RootJson => (1, 0),
            ZNode::Dir(n) => (2, n),
            ZNode::Json(n) => (3, n),
            ZNode::Chunks {
                array,
                level,
                index,
            } => {
                if array.0 >= MAX_ARRAYS || level > MAX_LEVELS || index >= MAX_INDEX {
                    return None;
                }
                let p =
                    (u64::from(level) << LEVEL_SHIFT) | (u64::from(array.0) << ARRAY_SHIFT) | index;
                (4, p)
            }
            ZNode::Pending(k) => (5, k),
        };
        (payload <= PAYLOAD).then_some(ZARR_BASE | (tag << TAG_SHIFT) | payload)
    }

    /// The node inode number `ino` stands for (`None`: not a number of the view).
    pub fn of(ino: u64) -> Option<ZNode> {
        if ino & ZARR_BASE == 0 {
            return None;
        }
        let payload = ino & PAYLOAD;
        Some(match (ino & !ZARR_BASE) >> TAG_SHIFT {
            0 if payload == 0 => ZNode::Root,
            1 if payload == 0 => ZNode::RootJson,
            2 => ZNode::Dir(payload),
            3 => ZNode::Json(payload),
            4 => ZNode::Chunks {
                array: ArrayId(((payload >> ARRAY_SHIFT) & u64::from(MAX_ARRAYS - 1)) as u32),
                level: (payload >> LEVEL_SHIFT) as u8,
                index: payload & (MAX_INDEX - 1),
            },
            5 => ZNode::Pending(payload),
            _ => return None,
        })
    }
}

/// Whether `ino` is a number of the Zarr view.
pub fn is_zarr(ino: u64) -> bool {
    ino & ZARR_BASE != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_stay_in_the_view() {
        let nodes = [
            ZNode::Root,
            ZNode::RootJson,
            ZNode::Dir(1),
            ZNode::Json(1 << 32),
            ZNode::Chunks {
                array: ArrayId(MAX_ARRAYS - 1),
                level: MAX_LEVELS,
                index: MAX_INDEX - 1,
            },
            ZNode::Chunks {
                array: ArrayId(0),
                level: 0,
                index: 0,
            },
        ];
        let mut seen = std::collections::HashSet::new();
        for n in nodes {
            let ino = n.ino().unwrap();
            assert!(is_zarr(ino) && ino >= ZARR_BASE);
            assert_eq!(ZNode::of(ino), Some(n));
            assert!(seen.insert(ino));
        }
        assert_eq!(ZNode::of(1), None);
        assert_eq!(
            ZNode::of(super::super::super::inode::SCRATCH_BASE + 7),
            None
        );
        assert_eq!(ZNode::of(ZARR_BASE | (7 << TAG_SHIFT)), None);
        assert_eq!(
            ZNode::of(ZNode::Pending(9).ino().unwrap()),
            Some(ZNode::Pending(9))
        );
        assert_eq!(ZNode::of(ZARR_BASE | 5), None);
        let too_big = ZNode::Chunks {
            array: ArrayId(MAX_ARRAYS),
            level: 0,
            index: 0,
        };
        assert_eq!(too_big.ino(), None);
    }
}
