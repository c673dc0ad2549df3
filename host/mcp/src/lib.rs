//! MCP both ways, with the official Rust SDK (`rmcp`): [`client`] mounts an MCP server's tools
//! for Seam's agents (`kind = "mcp"` entries), [`server`] serves a host's mounted tools to MCP
//! clients (`seam mcp`, over stdio or streamable HTTP).

#![warn(missing_docs)]

pub mod client;
pub mod server;

pub use server::ToolHost;
