//! The thin fuser adapter: each FUSE operation converts its arguments, calls [`crate::tree`],
//! and replies.
