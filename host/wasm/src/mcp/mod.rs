//! `kind = "mcp"` entries: an MCP server's tools mounted for Seam's agents, with the official
//! Rust SDK (`rmcp`). Serving Seam's own tools over MCP is `mcp_server/`.

pub mod client;
