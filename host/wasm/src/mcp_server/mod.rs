//! `seam mcp`: a host's mounted tools served to MCP clients, with the official Rust SDK
//! (`rmcp`). A module of its own, apart from `mcp/` (the `kind = "mcp"` entries the loader
//! mounts): it serves a whole [`Host`](crate::Host), which the loader's kinds must not reach.
//!
//! - `server`: every mounted tool (Wasm tool components, subagent tools, the background
//!   control tools) as MCP tools, to one client per [`server::McpServer`];
//! - `http`: the streamable HTTP endpoint of `seam mcp --http`, with its guards (loopback by
//!   default, bearer token off loopback, `Origin` and `Host` checked, request size and session
//!   count capped);
//! - `guard`: the transport that sends no progress for a request once it was cancelled or
//!   answered.

pub mod guard;
pub mod http;
pub mod server;
