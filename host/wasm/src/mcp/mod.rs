//! The Model Context Protocol, both ways, with the official Rust SDK (`rmcp`).
//!
//! - `server`: every mounted tool of a [`Host`](crate::Host) (Wasm tool components, subagent
//!   tools, the background control tools) served as MCP tools, to one client per
//!   [`server::McpServer`]; `seam mcp` serves it over stdio or, through `http`, streamable HTTP.
//! - `http`: the streamable HTTP endpoint of `seam mcp --http`, with its guards (loopback by
//!   default, bearer token off loopback, `Origin` and `Host` checked, request size and session
//!   count capped).
//! - `client`: `kind = "mcp"` entries, an MCP server's tools mounted for Seam's agents.

pub mod client;
pub mod http;
pub mod server;
