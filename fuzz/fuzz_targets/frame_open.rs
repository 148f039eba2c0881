//! libFuzzer target: see `b2fs_fuzz::frame_open`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| b2fs_fuzz::frame_open(data));
