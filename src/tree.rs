//! The filesystem logic: the directory tree a mounted source shows, as an in-process API
//! (lookup, getattr, readdir, open, read, release) that tests drive without a kernel.
