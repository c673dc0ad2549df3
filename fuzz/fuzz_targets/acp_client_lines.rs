//! Fuzzes `seam acp`'s side of the wire: any bytes, as what a client writes to Seam, answered
//! through the bounded outbox.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| seam_fuzz::acp_client_lines(data));
