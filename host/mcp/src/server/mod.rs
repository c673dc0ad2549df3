//! `seam mcp`: a host's mounted tools served to MCP clients. It serves a [`ToolHost`] (a host's
//! tool registry and event bus), which `seam_host::Host::tool_host` hands out, so this crate
//! never reaches the loader.
//!
//! - [`handler`]: every mounted tool (Wasm tool components, subagent tools, the background
//!   control tools) as MCP tools, to one client per [`handler::McpServer`];
//! - [`http`]: the streamable HTTP endpoint of `seam mcp --http`, with its guards (loopback by
//!   default, bearer token off loopback, `Origin` and `Host` checked, request size and session
//!   count capped);
//! - [`guard`]: the transport that sends no progress for a request once it was cancelled or
//!   answered;
//! - `approval`: the client as the surface a call's requests for approval are asked on
//!   (`elicitation/create`).

mod approval;
pub mod guard;
pub mod handler;
pub mod http;

use std::sync::Arc;

use seam_core::approvals::Approvals;
use seam_core::events::EventBus;
use seam_core::tool::ToolRegistry;
use seam_core::types::ToolDescriptor;

pub use handler::McpServer;

/// What `seam mcp` serves: a host's mounted tools, the bus their runs' events arrive on, and
/// the approvals engine a call that needs a yes asks.
#[derive(Clone)]
pub struct ToolHost {
    tools: Arc<ToolRegistry>,
    events: Arc<EventBus>,
    approvals: Arc<Approvals>,
}

impl ToolHost {
    /// The tools of `tools`, whose runs emit on `events` and ask `approvals`.
    pub fn new(tools: Arc<ToolRegistry>, events: Arc<EventBus>, approvals: Arc<Approvals>) -> Self {
        Self {
            tools,
            events,
            approvals,
        }
    }

    /// The approvals engine.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// The bus the tools' runs emit on.
    pub fn events(&self) -> &Arc<EventBus> {
        &self.events
    }

    /// The mounted tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The mounted tools, as the model sees them.
    pub fn tool_descriptors(&self) -> Vec<ToolDescriptor> {
        self.tools.list()
    }
}
