//! `kind = "mcp"`: an MCP server's tools, over stdio (`command`) or HTTP (`url`) (`seam-mcp`).

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use seam_core::tool::ToolRegistry;
use seam_core::types::PluginKind;
use seam_mcp::client::{McpEntry, McpTransport};

use super::backend::{absolute_program, string_list, watched_program, BackendEntry, Context, Entry, EntryBackend, Made, MountError, MountTools, Summary};
use crate::sandbox::{EntryError, Grants, SandboxError};

/// The `mcp` kind.
pub(super) struct Mcp;

/// An MCP entry: how its server is reached.
#[derive(Debug, PartialEq)]
struct McpSource(McpTransport);

impl EntryBackend for Mcp {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn plugin_kind(&self) -> PluginKind {
        PluginKind::Tool
    }

    fn read(&self, table: &mut toml::Table, base: &Path) -> Result<BackendEntry, EntryError> {
        let mut transport = mcp_transport(table)?;
        if let McpTransport::Stdio(argv) = &mut transport {
            absolute_program(base, &mut argv[0]);
        }
        Ok(BackendEntry::new(McpSource(transport)))
    }

    // An MCP entry mounts as many tools as its server offers (and the entry admits).
    fn what(&self, p: &Summary<'_>) -> String {
        if !p.active {
            return String::new();
        }
        format!(
            "MCP server `{}`, {} tool(s) mounted",
            p.written.display(),
            p.tools_mounted
        )
    }

    // An MCP server is no component: of the limits, only its host memory applies.
    fn host_memory_only(&self) -> bool {
        true
    }
}

impl Entry for McpSource {
    fn backend(&self) -> &'static dyn EntryBackend {
        &Mcp
    }

    fn written(&self) -> PathBuf {
        match &self.0 {
            McpTransport::Stdio(argv) => PathBuf::from(&argv[0]),
            McpTransport::Http(url) => PathBuf::from(url),
        }
    }

    fn watched_file(&self) -> Option<PathBuf> {
        match &self.0 {
            McpTransport::Stdio(argv) => watched_program(argv),
            McpTransport::Http(_) => None,
        }
    }

    fn not_compiled(&self) -> &'static str {
        "an MCP server, nothing to compile"
    }

    fn check_grants(&self, grants: &Grants) -> Result<(), SandboxError> {
        seam_mcp::client::check_grants(&self.0, grants)
    }

    // The server is connected when the entry is committed.
    fn prepare<'a>(&'a self, cx: Context<'a>) -> BoxFuture<'a, Result<Made, EntryError>> {
        let made = McpEntry::new(
            cx.id,
            cx.config,
            self.0.clone(),
            cx.sandbox,
            cx.cancel_grace,
            cx.live.clone(),
            cx.agents.clone(),
        )
        .map(|entry| Made::Tools(Box::new(entry)));
        Box::pin(std::future::ready(made))
    }

    fn same(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<Self>() == Some(self)
    }
}

impl MountTools for McpEntry {
    fn mount<'a>(&'a self, tools: &'a Arc<ToolRegistry>) -> BoxFuture<'a, Result<(), MountError>> {
        Box::pin(async move { McpEntry::mount(self, tools).await.map_err(MountError::from) })
    }
}

/// Takes `kind = "mcp"` and its `command` or `url` out of an MCP entry's table.
fn mcp_transport(table: &mut toml::Table) -> Result<McpTransport, EntryError> {
    table.remove("kind");
    if table.contains_key("component") {
        return Err(EntryError::new(
            "component",
            "key `component` does not apply to `kind = \"mcp\"`: the server is `command` or `url`"
                .into(),
        ));
    }
    match (table.remove("command"), table.remove("url")) {
        (Some(command), None) => match string_list(&command) {
            Some(argv) if !argv[0].is_empty() => Ok(McpTransport::Stdio(argv)),
            _ => Err(EntryError::new(
                "command",
                "key `command` must be a non-empty list of strings, as \
                 `command = [\"program\", \"arg\"]`"
                    .into(),
            )),
        },
        (None, Some(url)) => match url.as_str() {
            Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
                Ok(McpTransport::Http(u.to_string()))
            }
            _ => Err(EntryError::new(
                "url",
                "key `url` must be an http:// or https:// URL".into(),
            )),
        },
        (Some(_), Some(_)) => Err(EntryError::new(
            "url",
            "an MCP entry has `command` (stdio) or `url` (HTTP), not both".into(),
        )),
        (None, None) => Err(EntryError::new(
            "command",
            "an MCP entry names its server: `command = [\"program\"]` or `url = \"http://...\"`"
                .into(),
        )),
    }
}
