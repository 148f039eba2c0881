//! A byte-budgeted LRU cache of decompressed chunks, shared by worker threads, that loads each
//! cold entry once however many readers ask for it at the same time.
