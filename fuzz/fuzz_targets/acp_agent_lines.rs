//! Fuzzes the ACP provider's side of the wire: any bytes, as what an agent writes to Seam.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| seam_fuzz::acp_agent_lines(data));
