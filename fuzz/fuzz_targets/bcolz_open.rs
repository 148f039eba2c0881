//! libFuzzer target: see `b2fs_fuzz::bcolz_open`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| b2fs_fuzz::bcolz_open(data));
