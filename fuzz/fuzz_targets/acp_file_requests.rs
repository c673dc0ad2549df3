//! Fuzzes an ACP agent's file requests: any bytes, as reads, writes and link swaps inside a
//! granted directory that has links leading out of it.
#![no_main]

use std::sync::OnceLock;

fn root() -> &'static tempfile::TempDir {
    static ROOT: OnceLock<tempfile::TempDir> = OnceLock::new();
    ROOT.get_or_init(|| tempfile::tempdir().expect("a temp dir"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| seam_fuzz::acp_file_requests(root().path(), data));
