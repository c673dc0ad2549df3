//! Fuzzes config parsing: any bytes, as a config file.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| seam_fuzz::config_parse(data));
