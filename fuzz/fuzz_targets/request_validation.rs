//! Fuzzes the start-time checks: any bytes, decoded into a descriptor and a start request.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| seam_fuzz::request_validation(data));
