//! libFuzzer target: see `b2fs_fuzz::zarr_edit`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| b2fs_fuzz::zarr_edit(data));
