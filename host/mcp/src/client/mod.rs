//! `kind = "mcp"` entries: an MCP server's tools mounted for Seam's agents, as
//! `<prefix>__<tool>` (renamed, allowed and denied per entry).
//!
//! A server over stdio is a process the host starts in the parent's working directory with only
//! the entry's granted environment, in a contained tree of its own (`process/`, as ACP agents
//! are), ended and reaped when the entry goes. A server over streamable HTTP is reached at its
//! `url`, which the entry's `http` grant must list, with headers taken from granted variables.
//!
//! Each call has a timeout and an output cap; a cancelled call sends
//! `notifications/cancelled` (rmcp's request future is cancel-on-drop). A call is never sent
//! twice: one in flight when its server dies or its connection drops fails, naming the entry,
//! and the next call reconnects, with exponential backoff (`backon`, which retries connecting,
//! never a call). Its
//! `tools/list_changed` mounts and unmounts tools. What a bad server does ends that call or
//! that entry with a diagnostic naming the entry: it never finishes `initialize` (the
//! `init_timeout_ms`), answers garbage (the SDK's decoder; the call times out), offers more than
//! `max_tools` tools or a schema over `max_schema_bytes`, floods progress (its first
//! [`MAX_PROGRESS`] notifications of a call become the calling agent's run's progress, the rest
//! are dropped: nothing is queued), or returns more than `max_output_bytes`.

pub mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject, ProgressNotificationParam,
    ProgressToken, ServerResult, Tool as McpTool,
};
use rmcp::service::PeerRequestOptions;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use seam_agent::agent::AgentRegistry;
use seam_core::budget::{Charge, MemoryBudget};
use seam_core::live::LiveCounts;
use seam_core::tool::{DescribeError, Tool, ToolBinding, ToolRegistry, ToolSource};
use seam_core::types::{ContentBlock, ParentRef, ProviderDescriptor, ToolDescriptor, ToolResult};
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use seam_sandbox::{Sandbox, SandboxError};
pub use settings::McpSettings;

/// How a `kind = "mcp"` entry reaches its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// `command`: a program spoken to over its stdin and stdout.
    Stdio(Vec<String>),
    /// `url`: a streamable HTTP endpoint, behind the entry's `http` grant.
    Http(String),
}

/// Why an MCP entry cannot be connected or listed. Every message names the entry.
#[derive(Debug, Error)]
pub enum McpClientError {
    /// The server program cannot be started.
    #[error("MCP entry `{id}`: cannot start `{program}`: {message}")]
    Spawn {
        /// The entry.
        id: String,
        /// The program.
        program: String,
        /// Why.
        message: String,
    },
    /// The server did not finish `initialize` (or `tools/list`) in time.
    #[error("MCP entry `{id}`: the server did not answer `{step}` within {ms} ms")]
    Timeout {
        /// The entry.
        id: String,
        /// `initialize` or `tools/list`.
        step: &'static str,
        /// The timeout.
        ms: u64,
    },
    /// The protocol failed (the server closed, answered garbage, refused).
    #[error("MCP entry `{id}`: {step}: {message}")]
    Protocol {
        /// The entry.
        id: String,
        /// What was being done.
        step: &'static str,
        /// The SDK's error.
        message: String,
    },
    /// The server offers more than the entry allows.
    #[error("MCP entry `{id}`: {message}")]
    TooMuch {
        /// The entry.
        id: String,
        /// What is too much.
        message: String,
    },
}

/// Why an MCP entry's tools could not be mounted: its server, or the registry (a name taken).
#[derive(Debug, Error)]
pub enum MountError {
    /// The server could not be reached or listed.
    #[error(transparent)]
    Client(#[from] McpClientError),
    /// A tool could not be mounted.
    #[error("MCP entry `{id}`: {source}")]
    Tool {
        /// The entry.
        id: String,
        /// The registry's error.
        source: seam_core::tool::ToolError,
    },
}

/// The grants that apply to an MCP entry: `env` (a stdio server's environment, and the
/// variables headers come from) and `http` (the origin of a `url` server).
pub fn check_grants(
    transport: &McpTransport,
    grants: &seam_sandbox::Grants,
) -> Result<(), SandboxError> {
    grants.only(
        &["env", "http"],
        "an MCP server is reached outside the sandbox: only `env` (and, for a `url`, `http`) \
         grants apply to it",
    )?;
    if let McpTransport::Http(url) = transport {
        grants.require_url(url, "the MCP server")?;
    }
    Ok(())
}

/// An MCP entry, ready to mount: its settings, how to reach the server, and what it may use.
pub struct McpEntry {
    shared: Arc<Shared>,
}

struct Shared {
    id: String,
    settings: McpSettings,
    transport: McpTransport,
    env: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    /// Which of its tools' calls need a yes first, by the server's tool names.
    approve: Sandbox,
    grace: Duration,
    live: Arc<LiveCounts>,
    conn: tokio::sync::Mutex<Option<Connection>>,
    /// The entry's `host_memory_mb`: the mounted tool list, and each result while it is held.
    memory: Arc<MemoryBudget>,
    /// What the mounted tool list holds of it.
    list_charge: Mutex<Option<Charge>>,
    /// Held while reconnecting, and while the mounted tools follow the server's list.
    reconnecting: tokio::sync::Mutex<()>,
    reconciling: tokio::sync::Mutex<()>,
    /// The registry the tools are mounted in, and the (Seam name, server name) of each.
    mounted: Mutex<Mounted>,
    /// Connections made so far: the next one's [`Connection::generation`].
    connections: std::sync::atomic::AtomicU64,
    /// The agents calls are made for: a server's progress on a call is reported as their run's.
    agents: Weak<AgentRegistry>,
    /// Calls going, by the progress token the SDK gave their request, and progress that came
    /// for a token before its call was registered (the request is sent first).
    calls: Mutex<Calls>,
}

/// Calls going, and progress that arrived ahead of its call's registration.
#[derive(Default)]
struct Calls {
    going: HashMap<ProgressToken, Going>,
    early: Vec<ProgressNotificationParam>,
}

/// Progress notifications kept for calls not yet registered: a server that sends progress for
/// no call of ours fills nothing past this.
const MAX_EARLY: usize = 64;

/// A call going, as its server's progress needs it.
struct Going {
    /// The calling agent.
    agent: String,
    /// The tool's Seam name.
    tool: String,
    /// Progress notifications reported so far (at most [`MAX_PROGRESS`]).
    reported: u32,
    /// The last progress value reported: the SDK hands notifications over concurrently, and
    /// one that comes after a later one (progress only grows) is dropped, not reordered.
    last: f64,
}

/// Progress notifications of one call reported as its run's progress; a server that sends more
/// floods nothing: the rest are dropped.
const MAX_PROGRESS: u32 = 64;

/// Removes a call's progress registration when the call ends, however it ends.
struct Registered<'a> {
    shared: &'a Shared,
    token: ProgressToken,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        seam_core::sync::lock(&self.shared.calls)
            .going
            .remove(&self.token);
    }
}

/// The registry an entry's tools are mounted in, and the (Seam name, server name) of each.
type Mounted = (Weak<ToolRegistry>, Vec<(String, String)>);

struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// Which connection of the entry this is: a call that saw its connection drop forgets
    /// that one, never a newer one another call made.
    generation: u64,
    /// A stdio server's process tree, ended and reaped when the connection is dropped.
    _process: Option<seam_process::Contained>,
}

impl McpEntry {
    /// The entry `id` with its `config`, from its checked sandbox (granted environment values);
    /// the error names the key.
    pub fn new(
        id: &str,
        config: &serde_json::Value,
        transport: McpTransport,
        sandbox: &Sandbox,
        grace: Duration,
        live: Arc<LiveCounts>,
        agents: Weak<AgentRegistry>,
    ) -> Result<Self, seam_sandbox::EntryError> {
        let settings = McpSettings::parse(config)?;
        let env = sandbox.grants().env_values().to_vec();
        let headers = seam_sandbox::header_values(sandbox.grants(), &settings.headers)?;
        Ok(Self {
            shared: Arc::new(Shared {
                id: id.to_string(),
                settings,
                transport,
                env,
                headers,
                approve: sandbox.clone(),
                grace,
                live,
                conn: tokio::sync::Mutex::new(None),
                memory: sandbox.host_memory().clone(),
                list_charge: Mutex::new(None),
                reconnecting: tokio::sync::Mutex::new(()),
                reconciling: tokio::sync::Mutex::new(()),
                mounted: Mutex::new((Weak::new(), Vec::new())),
                connections: std::sync::atomic::AtomicU64::new(0),
                agents,
                calls: Mutex::default(),
            }),
        })
    }

    /// Connects, lists the server's tools and mounts those the entry admits in `tools`.
    /// A failed entry leaves nothing mounted and no server running.
    pub async fn mount(&self, tools: &Arc<ToolRegistry>) -> Result<(), MountError> {
        let shared = &self.shared;
        seam_core::sync::lock(&shared.mounted).0 = Arc::downgrade(tools);
        let mounted = match shared.connect_and_list().await {
            Ok(listed) => {
                shared
                    .reconcile(tools, listed)
                    .await
                    .map_err(|source| MountError::Tool {
                        id: shared.id.clone(),
                        source,
                    })
            }
            Err(e) => Err(e.into()),
        };
        if mounted.is_err() {
            tools.remove_plugin(&shared.id).await;
            *shared.conn.lock().await = None;
        }
        mounted
    }
}

impl Shared {
    /// A fresh connection (replacing any old one), and the server's tools.
    async fn connect_and_list(self: &Arc<Self>) -> Result<Vec<McpTool>, McpClientError> {
        let mut conn = self.conn.lock().await;
        *conn = None;
        let (service, process) = self.connect().await?;
        let peer = service.peer().clone();
        *conn = Some(Connection {
            service,
            generation: self
                .connections
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            _process: process,
        });
        drop(conn);
        self.list(&peer).await
    }

    async fn connect(
        self: &Arc<Self>,
    ) -> Result<
        (
            RunningService<RoleClient, Handler>,
            Option<seam_process::Contained>,
        ),
        McpClientError,
    > {
        let handler = Handler {
            shared: Arc::downgrade(self),
        };
        let id = self.id.clone();
        // A line (one message) may hold a whole result or tool list; past this it is dropped.
        let max_line = (self.settings.max_output_bytes * 4).max(4 << 20);
        let protocol = |e: String| McpClientError::Protocol {
            id: id.clone(),
            step: "initialize",
            message: e,
        };
        match &self.transport {
            McpTransport::Stdio(argv) => {
                let mut tree = self.spawn(argv)?;
                let pipes = tree
                    .child_mut()
                    .map(|c| (c.stdin.take(), c.stdout.take(), c.stderr.take()));
                let Some((Some(stdin), Some(stdout), Some(stderr))) = pipes else {
                    return Err(self.spawn_error(argv, "the process has no pipes".into()));
                };
                log_stderr(self.id.clone(), stderr);
                let transport =
                    AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(max_line);
                Ok((self.initialize(handler, transport).await?, Some(tree)))
            }
            McpTransport::Http(url) => {
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let mut headers = std::collections::HashMap::new();
                for (name, value) in &self.headers {
                    let name = http::HeaderName::try_from(name.as_str())
                        .map_err(|e| protocol(format!("header `{name}`: {e}")))?;
                    let value = http::HeaderValue::try_from(value.as_str())
                        .map_err(|e| protocol(format!("header `{name}`: {e}")))?;
                    headers.insert(name, value);
                }
                // Its TLS uses the process's rustls provider, which `Host::with_store` installs.
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(headers);
                let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                Ok((self.initialize(handler, transport).await?, None))
            }
        }
    }

    /// The MCP handshake over `transport`, within `config.init_timeout_ms`.
    async fn initialize<T, E, A>(
        &self,
        handler: Handler,
        transport: T,
    ) -> Result<RunningService<RoleClient, Handler>, McpClientError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let ms = self.settings.init_timeout_ms;
        tokio::time::timeout(Duration::from_millis(ms), handler.serve(transport))
            .await
            .map_err(|_| McpClientError::Timeout {
                id: self.id.clone(),
                step: "initialize",
                ms,
            })?
            .map_err(|e| McpClientError::Protocol {
                id: self.id.clone(),
                step: "initialize",
                message: e.to_string(),
            })
    }

    fn spawn_error(&self, argv: &[String], message: String) -> McpClientError {
        McpClientError::Spawn {
            id: self.id.clone(),
            program: argv[0].clone(),
            message,
        }
    }

    /// Starts the server in the host's working directory (the parent's) with only the granted
    /// environment, in a contained tree.
    fn spawn(&self, argv: &[String]) -> Result<seam_process::Contained, McpClientError> {
        let program =
            seam_process::resolve(&argv[0]).map_err(|e| self.spawn_error(argv, e.to_string()))?;
        let mut command = tokio::process::Command::new(&program);
        command
            .args(&argv[1..])
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut tree = seam_process::spawn(&mut command, self.grace)
            .map_err(|e| self.spawn_error(argv, e.to_string()))?;
        tree.hold(self.live.process_guard());
        Ok(tree)
    }

    /// The server's tools, within the entry's bounds.
    async fn list(&self, peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, McpClientError> {
        let ms = self.settings.init_timeout_ms;
        let tools = tokio::time::timeout(Duration::from_millis(ms), peer.list_all_tools())
            .await
            .map_err(|_| McpClientError::Timeout {
                id: self.id.clone(),
                step: "tools/list",
                ms,
            })?
            .map_err(|e| McpClientError::Protocol {
                id: self.id.clone(),
                step: "tools/list",
                message: e.to_string(),
            })?;
        if tools.len() > self.settings.max_tools {
            return Err(McpClientError::TooMuch {
                id: self.id.clone(),
                message: format!(
                    "the server offers {} tools, more than `config.max_tools` ({})",
                    tools.len(),
                    self.settings.max_tools
                ),
            });
        }
        let mut held = 0usize;
        for tool in &tools {
            let size = serde_json::to_string(&tool.input_schema).map_or(0, |s| s.len());
            held += size + tool.name.len() + tool.description.as_deref().map_or(0, str::len);
            if size > self.settings.max_schema_bytes {
                return Err(McpClientError::TooMuch {
                    id: self.id.clone(),
                    message: format!(
                        "tool `{}` has an input schema of {size} bytes, more than \
                         `config.max_schema_bytes` ({})",
                        tool.name, self.settings.max_schema_bytes
                    ),
                });
            }
        }
        let charge = self
            .memory
            .charge(held)
            .map_err(|over| McpClientError::TooMuch {
                id: self.id.clone(),
                message: format!(
                    "the server's tool list holds {held} bytes, more than is left of the entry's \
                     `limits.host_memory_mb` ({} of {} bytes used)",
                    over.used, over.limit
                ),
            })?;
        // The new list replaces the old; its charge, the old one's.
        *seam_core::sync::lock(&self.list_charge) = Some(charge);
        Ok(tools)
    }

    /// Mounts the admitted tools of `listed` not mounted yet, and unmounts those no longer
    /// listed, one change of the list at a time. What is mounted is recorded even when a tool
    /// fails to mount (a name another plugin has).
    async fn reconcile(
        self: &Arc<Self>,
        tools: &Arc<ToolRegistry>,
        listed: Vec<McpTool>,
    ) -> Result<(), seam_core::tool::ToolError> {
        let _one_at_a_time = self.reconciling.lock().await;
        let wanted: Vec<(String, McpTool)> = listed
            .into_iter()
            .filter(|t| self.settings.admits(&t.name))
            .map(|t| (self.settings.seam_name(&self.id, &t.name), t))
            .collect();
        let before = seam_core::sync::lock(&self.mounted).1.clone();
        let mut now = Vec::new();
        for (seam_name, server_name) in before {
            if wanted.iter().any(|(n, _)| *n == seam_name) {
                now.push((seam_name, server_name));
            } else {
                tools.remove_tool(&self.id, &seam_name).await;
            }
        }
        let mut outcome = Ok(());
        for (seam_name, tool) in wanted {
            if now.iter().any(|(n, _)| *n == seam_name) {
                continue;
            }
            let source = McpToolSource {
                shared: self.clone(),
                server_name: tool.name.to_string(),
                descriptor: ToolDescriptor {
                    name: seam_name.clone(),
                    description: tool.description.as_deref().unwrap_or_default().to_string(),
                    parameters: serde_json::Value::Object((*tool.input_schema).clone()),
                },
            };
            let binding = ToolBinding {
                tool_name: seam_name.clone(),
                provider: None,
                approve: self.approve.approve(&tool.name),
            };
            match tools.add_plugin(binding, Arc::new(source)).await {
                Ok(()) => now.push((seam_name, tool.name.to_string())),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        seam_core::sync::lock(&self.mounted).1 = now;
        outcome
    }

    /// The live connection's peer and generation, reconnecting (with backoff) when the server
    /// has gone. Backoff retries the connection only, never a call.
    async fn peer(self: &Arc<Self>) -> Result<(Peer<RoleClient>, u64), McpClientError> {
        let alive =
            |c: &&Connection| !c.service.is_closed() && !c.service.peer().is_transport_closed();
        let current = |c: &Connection| (c.service.peer().clone(), c.generation);
        if let Some(c) = self.conn.lock().await.as_ref().filter(alive) {
            return Ok(current(c));
        }
        // Calls that find the server gone at once reconnect it once, the first of them.
        let _one_reconnect = self.reconnecting.lock().await;
        if let Some(c) = self.conn.lock().await.as_ref().filter(alive) {
            return Ok(current(c));
        }
        tracing::warn!(plugin = %self.id, "the MCP server has gone; reconnecting");
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(2))
            .with_max_times(3);
        let listed = (|| self.connect_and_list()).retry(backoff).await?;
        let registry = seam_core::sync::lock(&self.mounted).0.upgrade();
        if let Some(registry) = registry {
            if let Err(e) = self.reconcile(&registry, listed).await {
                tracing::warn!(plugin = %self.id, error = %e, "cannot mount the reconnected server's tools");
            }
        }
        let conn = self.conn.lock().await;
        conn.as_ref()
            .map(current)
            .ok_or_else(|| McpClientError::Protocol {
                id: self.id.clone(),
                step: "reconnect",
                message: "the connection closed again".into(),
            })
    }

    /// Drops the connection `generation`, if it is still the current one (its server is
    /// ended and reaped): the next call reconnects.
    async fn forget(&self, generation: u64) {
        let mut conn = self.conn.lock().await;
        if conn.as_ref().is_some_and(|c| c.generation == generation) {
            *conn = None;
        }
    }

    /// One call: within the timeout, its result text within the output cap; `abort` drops the
    /// request, which sends `notifications/cancelled`.
    async fn call(
        self: Arc<Self>,
        caller: ParentRef,
        server_name: String,
        seam_name: String,
        arguments: String,
        abort: CancellationToken,
    ) -> ToolResult {
        let fail = |message: String| {
            ToolResult::error(format!(
                "tool `{seam_name}` (MCP entry `{}`): {message}",
                self.id
            ))
        };
        let arguments: Option<JsonObject> =
            match serde_json::from_str::<serde_json::Value>(&arguments) {
                Ok(serde_json::Value::Object(o)) => Some(o),
                Ok(serde_json::Value::Null) => None,
                Ok(_) => return fail("the arguments are not a JSON object".into()),
                Err(e) => return fail(format!("the arguments are not JSON: {e}")),
            };
        let mut params = CallToolRequestParams::new(server_name);
        params.arguments = arguments;
        // The calling tool call's trace, for a server that traces (the SDK adds its progress
        // token beside it).
        if let Some(traceparent) =
            seam_core::trace::traceparent(seam_core::trace::Scope::Agent(&caller.id))
        {
            let mut meta = JsonObject::new();
            meta.insert("traceparent".into(), traceparent.into());
            params.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
                meta,
            )));
        }

        let ms = self.settings.timeout_ms;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
        // A call is never sent twice: only one the SDK refused to hand to its connection (found
        // closed before the request was queued, so nothing of it reached the server) is tried
        // again, once, on a new connection. One whose connection drops after it was queued fails
        // (the server may have started it); the next call reconnects.
        let mut attempts = 0;
        let response = loop {
            attempts += 1;
            let (peer, generation) = match self.peer().await {
                Ok(found) => found,
                Err(e) => return ToolResult::error(e.to_string()),
            };
            let sent = self
                .call_once(&peer, &params, &caller, &seam_name, deadline, &abort)
                .await;
            match sent {
                Ok(Sent::Answered(answer)) => break *answer,
                Ok(Sent::Unsent(rmcp::ServiceError::TransportClosed)) if attempts == 1 => {
                    tracing::debug!(plugin = %self.id, "the connection was closed before the call was sent");
                    self.forget(generation).await;
                }
                Ok(Sent::Unsent(e)) => return fail(format!("the call could not be sent: {e}")),
                Ok(Sent::Dropped) => {
                    // Its connection is gone: the next call makes a new one.
                    self.forget(generation).await;
                    return fail(
                        "the connection to the server closed during the call (the server exited \
                         or the connection dropped); the call is not sent again, the next call \
                         reconnects"
                            .into(),
                    );
                }
                Err(Ended::Timeout) => {
                    return fail(format!("no answer within {ms} ms (`config.timeout_ms`)"))
                }
                Err(Ended::Aborted) => return ToolResult::error("cancelled"),
            }
        };
        let result = match response {
            Ok(ServerResult::CallToolResult(result)) => result,
            Ok(_) => {
                return fail(
                    "the server asked for input or made a task, which Seam does not support".into(),
                )
            }
            Err(e) => return fail(e.to_string()),
        };
        let mut text = String::new();
        for block in &result.content {
            if let Some(t) = block.as_text() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&t.text);
            }
        }
        if text.is_empty() {
            if let Some(structured) = &result.structured_content {
                text = structured.to_string();
            }
        }
        if text.len() > self.settings.max_output_bytes {
            return fail(format!(
                "the result of {} bytes is more than `config.max_output_bytes` ({})",
                text.len(),
                self.settings.max_output_bytes
            ));
        }
        // Checked against what is left of the entry's budget, of which the tool list holds part.
        if let Err(over) = self.memory.charge(text.len()) {
            return fail(format!(
                "the result of {} bytes is more than is left of `limits.host_memory_mb` ({} of {} \
                 bytes used)",
                text.len(),
                over.used,
                over.limit
            ));
        }
        ToolResult {
            content: vec![ContentBlock::text(text)],
            is_error: result.is_error.unwrap_or(false),
        }
    }
}

/// Logs what a stdio server writes on stderr, line by line, naming the entry.
fn log_stderr(id: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(plugin = %id, "{line}");
        }
    });
}

/// The client side's handler: the server's list changes re-mount its tools.
#[derive(Clone)]
struct Handler {
    shared: Weak<Shared>,
}

/// What became of a `tools/call` handed to a connection.
enum Sent {
    /// The server answered (or the SDK reported the request failed, e.g. to be written).
    Answered(Box<Result<ServerResult, rmcp::ServiceError>>),
    /// The connection was closed before the request was queued: nothing reached the server.
    Unsent(rmcp::ServiceError),
    /// The connection ended after the request was queued, without an answer: the server may
    /// have started the call.
    Dropped,
}

/// How a call ended without an answer.
enum Ended {
    Timeout,
    Aborted,
}

impl Shared {
    /// Sends one `tools/call`, its progress token registered for the caller, and waits for the
    /// answer until `deadline` or `abort`; either sends `notifications/cancelled`.
    async fn call_once(
        &self,
        peer: &Peer<RoleClient>,
        params: &CallToolRequestParams,
        caller: &ParentRef,
        seam_name: &str,
        deadline: tokio::time::Instant,
        abort: &CancellationToken,
    ) -> Result<Sent, Ended> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let mut handle = tokio::select! {
            sent = peer.send_cancellable_request(request, PeerRequestOptions::no_options()) => match sent {
                Ok(handle) => handle,
                // The SDK queues the request only once the connection has taken it: an error
                // here means it never left this side.
                Err(e) => return Ok(Sent::Unsent(e)),
            },
            () = tokio::time::sleep_until(deadline) => return Err(Ended::Timeout),
            () = abort.cancelled() => return Err(Ended::Aborted),
        };
        // Registered once the SDK has numbered the request; progress that beat it is replayed.
        let _registered = self.register(handle.progress_token.clone(), caller, seam_name);
        let ended = tokio::select! {
            answer = &mut handle.rx => {
                // The SDK drops the answer's sender when the connection ends, or answers that
                // the transport closed (the HTTP client, for a request its connection lost).
                return Ok(match answer {
                    Ok(Err(rmcp::ServiceError::TransportClosed)) | Err(_) => Sent::Dropped,
                    Ok(answer) => Sent::Answered(Box::new(answer)),
                });
            }
            () = tokio::time::sleep_until(deadline) => Ended::Timeout,
            () = abort.cancelled() => Ended::Aborted,
        };
        let reason = match ended {
            Ended::Timeout => "timeout",
            Ended::Aborted => "cancelled",
        };
        let _ = handle.cancel(Some(reason.into())).await;
        Err(ended)
    }

    /// Registers a call's progress token, and reports what came for it ahead of this.
    fn register<'a>(
        &'a self,
        token: ProgressToken,
        caller: &ParentRef,
        seam_name: &str,
    ) -> Registered<'a> {
        // Under the lock throughout: what came early is reported before what comes next.
        let mut calls = seam_core::sync::lock(&self.calls);
        calls.going.insert(
            token.clone(),
            Going {
                agent: caller.id.clone(),
                tool: seam_name.to_string(),
                reported: 0,
                last: f64::NEG_INFINITY,
            },
        );
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut calls.early)
            .into_iter()
            .partition(|p| p.progress_token == token);
        calls.early = others;
        for params in &mine {
            self.report(&mut calls, params);
        }
        drop(calls);
        Registered {
            shared: self,
            token,
        }
    }

    /// A server's progress on a call, reported as the calling agent's run's progress.
    fn progress(&self, params: &ProgressNotificationParam) {
        let mut calls = seam_core::sync::lock(&self.calls);
        self.report(&mut calls, params);
    }

    /// Reports `params` for its call, in order with every other report (the caller holds the
    /// calls' lock), or keeps it for a call not registered yet.
    fn report(&self, calls: &mut Calls, params: &ProgressNotificationParam) {
        let Some(going) = calls.going.get_mut(&params.progress_token) else {
            if calls.early.len() < MAX_EARLY {
                calls.early.push(params.clone());
            }
            return;
        };
        if going.reported >= MAX_PROGRESS || params.progress <= going.last {
            return;
        }
        going.reported += 1;
        going.last = params.progress;
        let amount = match params.total {
            Some(total) => format!("{}/{}", params.progress, total),
            None => params.progress.to_string(),
        };
        let text = match &params.message {
            Some(m) => format!("tool `{}`: {amount}: {m}", going.tool),
            None => format!("tool `{}`: {amount}", going.tool),
        };
        match self.agents.upgrade().and_then(|a| a.get(&going.agent)) {
            Some(found) => found.report_progress(text),
            None => {
                tracing::debug!(plugin = %self.id, agent = %going.agent, "progress for an agent that is gone")
            }
        }
    }
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(shared) = self.shared.upgrade() {
            shared.progress(&params);
        }
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let peer = context.peer.clone();
        // Not in the handler: listing waits on the same connection's answers.
        tokio::spawn(async move {
            let registry = seam_core::sync::lock(&shared.mounted).0.upgrade();
            let Some(registry) = registry else { return };
            match shared.list(&peer).await {
                Ok(listed) => {
                    if let Err(e) = shared.reconcile(&registry, listed).await {
                        tracing::warn!(plugin = %shared.id, error = %e, "cannot mount the changed tools");
                    }
                }
                Err(e) => {
                    tracing::warn!(plugin = %shared.id, error = %e, "cannot list the changed tools")
                }
            }
        });
    }
}

/// One tool of an MCP entry, as the registry mounts it.
struct McpToolSource {
    shared: Arc<Shared>,
    server_name: String,
    descriptor: ToolDescriptor,
}

impl Tool for McpToolSource {
    fn execute(
        &self,
        caller: ParentRef,
        arguments: String,
        abort: CancellationToken,
    ) -> BoxFuture<'static, ToolResult> {
        Box::pin(self.shared.clone().call(
            caller,
            self.server_name.clone(),
            self.descriptor.name.clone(),
            arguments,
            abort,
        ))
    }

    fn served_outside(&self) -> bool {
        true
    }
}

impl ToolSource for McpToolSource {
    fn plugin(&self) -> &str {
        &self.shared.id
    }

    fn describe(
        &self,
        _provider: Option<Arc<ProviderDescriptor>>,
    ) -> BoxFuture<'static, Result<ToolDescriptor, DescribeError>> {
        let descriptor = self.descriptor.clone();
        Box::pin(async move { Ok(descriptor) })
    }
}
