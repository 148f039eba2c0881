//! Sources on disk: contiguous and sparse Blosc2 frames, b2nd/caterva arrays, bcolz carray and
//! ctable directories. Opens a source (reading only its header, index and trailer), reports
//! geometry and metadata, and hands out each chunk's compressed bytes. Knows nothing of FUSE.
