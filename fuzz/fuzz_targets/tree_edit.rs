//! libFuzzer target: see `b2fs_fuzz::tree_edit`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| b2fs_fuzz::tree_edit(data));
