//! b2fs: mount Blosc2 frames, b2nd/caterva arrays and bcolz containers as plain directories.
//!
//! The crate is layered; dependencies only point downward:
//!
//! ```text
//! cli -> fuse -> tree -> reader -> container -> codec
//!                    \--> commit -> reader, container, codec   (the write path)
//!                          reader -> cache   (both use mem; every layer uses error)
//! cli -> remote -> container (implements its ByteSource: remote objects below the container)
//! ```
//!
//! - [`codec`]: the Blosc1/Blosc2 chunk format (headers, filters, codecs). Bytes in, bytes out;
//!   it knows nothing of frames or files.
//! - [`container`]: sources on disk (contiguous and sparse frames, b2nd/caterva metalayers,
//!   bcolz carray/ctable). Geometry, metadata and each chunk's compressed bytes. No FUSE.
//! - [`cache`]: a byte-budgeted LRU of decompressed chunks shared by worker threads.
//! - [`mem`]: large reusable buffers whose first touch is cheap (huge pages).
//! - [`reader`]: decoded bytes of any window of any chunk through the caches, with prefetch;
//!   the live (swappable) arrays. Knows chunks, not files.
//! - [`commit`]: the write path beside the reader: one entry, `commit(target, edit)`, over
//!   the container layer's crash-safe commits.
//! - [`error`]: one-line display of an error chain.
//! - [`tree`]: the filesystem logic as an in-process API (lookup, getattr, readdir, read, ...)
//!   that tests drive without a kernel.
//! - [`fuse`]: the thin fuser adapter over [`tree`].
//! - [`remote`]: S3 and HTTP(S) objects read by ranged GETs, as a byte source of [`container`]
//!   (feature `remote`).
//! - [`cli`]: the `b2fs` command (mount, umount, info, verify, salvage, compact, log, ...).

pub mod cache;
pub mod cli;
pub mod codec;
pub mod commit;
pub mod container;
pub mod error;
pub mod fuse;
pub mod mem;
pub mod reader;
pub mod remote;
pub mod tree;
