//! The `seam` binary end to end: one test binary, one module per area (as `tests/tests/all`),
//! so the workspace links the CLI's tests once rather than once per file.

mod a2a;
mod approvals;
mod cli;
mod cluster;
mod contain;
mod descriptors;
mod docs;
mod mcp;
mod oci;
mod replay;
mod sessions;
mod telemetry;
mod ui;
