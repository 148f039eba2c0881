//! The filter pipeline (section 3): forward and backward transforms of one block, slot by slot.

pub mod bitshuffle;
pub mod bytedelta;
pub mod delta;
pub mod shuffle;
