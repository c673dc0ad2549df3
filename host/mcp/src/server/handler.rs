//! A host's mounted tools as an MCP server: `tools/list` gives each tool's name, the wording the
//! model sees and its input schema; `tools/call` calls it as a top-level caller of its own,
//! turning the run's progress events into `notifications/progress` for a client that sent a
//! `progressToken`; `notifications/cancelled` aborts the call and every run under it; a tool
//! that fails answers an `isError` result carrying its diagnostic. Tools mounting or unmounting
//! (a reload, a provider coming or going) send `notifications/tools/list_changed`: unasked to a
//! client of a handshake-era protocol version, on its `subscriptions/listen` stream to a
//! 2026-07-28 one. A call that needs a yes (the tool's `approve`, or a tool a run under the call
//! calls) is asked of the client with `elicitation/create` when it can be (see
//! `super::approval`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as McpContent,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use seam_core::events::{Event, ListenerId};
use seam_core::types::{blocks_text, ParentRef, ToolDescriptor, ToolResult};
use tokio::sync::mpsc;

use super::approval::{CallTree, Elicit};
use super::ToolHost;
use seam_core::approval::{Policy, Subject};
use seam_core::approvals::Asker;

/// Progress notifications waiting for one call's client: past this many, further updates of
/// that call are dropped (a run that floods progress cannot grow the host's memory).
const PROGRESS_QUEUE: usize = 64;

/// Numbers the calls of one process: each call's runs are told apart by it.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// The MCP server of one client (one stdio peer, or one HTTP session) over a host.
///
/// Every call it makes is on behalf of the top-level caller it was made with, so the
/// background runs one call starts are the ones the control tools of a later call see. Over
/// stdio that is the one client; over HTTP, where a 2026-07-28 client has no session (each
/// request gets a server of its own), every client of the endpoint shares one caller.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

struct Inner {
    host: ToolHost,
    caller: String,
    working_directory: String,
    /// The listener that turns tool mounts into `tools/list_changed`, once the client is ready.
    list_listener: Mutex<Option<ListenerId>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(id) = seam_core::sync::lock(&self.list_listener).take() {
            self.host.events().unsubscribe(id);
        }
    }
}

impl McpServer {
    /// A server over `host`'s mounted tools, calling them as the top-level agent `caller`
    /// working in `working_directory`.
    pub fn new(
        host: ToolHost,
        caller: impl Into<String>,
        working_directory: impl Into<String>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                host,
                caller: caller.into(),
                working_directory: working_directory.into(),
                list_listener: Mutex::new(None),
            }),
        }
    }

    /// The caller id this server's calls are made as.
    pub fn caller(&self) -> &str {
        &self.inner.caller
    }
}

/// A mounted tool as an MCP tool. A schema that is not an object (a tool that takes no
/// arguments may say `true`) becomes the empty object schema, which MCP requires at least.
pub fn mcp_tool(descriptor: &ToolDescriptor) -> McpTool {
    let schema: JsonObject = match &descriptor.parameters {
        serde_json::Value::Object(o) => o.clone(),
        _ => {
            let mut o = JsonObject::new();
            o.insert("type".into(), "object".into());
            o
        }
    };
    McpTool::new_with_raw(
        descriptor.name.clone(),
        Some(descriptor.description.clone().into()),
        Arc::new(schema),
    )
}

/// A tool's result as an MCP result: text and JSON blocks as text content, `is_error` as
/// `isError`.
pub fn mcp_result(result: &ToolResult) -> CallToolResult {
    let content: Vec<McpContent> = result
        .content
        .iter()
        .map(|b| McpContent::text(b.as_text()))
        .collect();
    if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("seam", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.inner.host.tool_descriptors();
        Ok(ListToolsResult::with_all_items(
            tools.iter().map(mcp_tool).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<McpTool> {
        self.inner
            .host
            .tools()
            .get(name)
            .map(|m| mcp_tool(&m.descriptor))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let inner = &self.inner;
        let name = request.name.to_string();
        let Some(mounted) = inner.host.tools().get(&name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool named `{name}` is mounted"),
                None,
            ));
        };
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let n = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
        // The caller is the server's (background runs outlive one call); the session id is the
        // call's, so that the progress of this call's runs is told apart from another's.
        let caller = ParentRef {
            id: inner.caller.clone(),
            session_id: format!("{}-call-{n}", inner.caller),
            working_directory: inner.working_directory.clone(),
            depth: 0,
        };
        let token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        // The client is asked about this call's requests for approval (and only those) while
        // it lasts.
        let (tree, runs) = CallTree::follow(inner.host.events(), &caller);
        let _surface = inner
            .host
            .approvals()
            .add_surface(Arc::new(Elicit::new(context.peer.clone(), tree)));
        let approved = approve(&inner.host, &mounted, &caller, &arguments, &context).await;
        if let Err(refused) = approved {
            inner.host.events().unsubscribe(runs);
            return Ok(CallToolResult::error(vec![McpContent::text(refused)]).into());
        }
        let listener = token.map(|token| forward_progress(&inner.host, &caller, token, &context));
        // `ct` is cancelled by the client's `notifications/cancelled` (and when the client
        // goes): the call's runs are linked to it, so the whole tree under the call ends.
        let outcome = inner
            .host
            .tools()
            .execute(&name, caller, arguments.to_string(), context.ct.clone())
            .await;
        if let Some((id, forwarding)) = listener {
            // The run's progress events were all emitted before it settled, and the flush has
            // delivered them (a batching store delivers a run's events after their commit):
            // once the listener (and its sender) is gone, the task sends what is queued and
            // ends, so every notification goes out before the answer (a client drops progress
            // that comes after). A cancelled call's task has stopped at the cancel, sending
            // nothing more.
            if let Err(e) = inner.host.events().flush() {
                tracing::warn!(error = %e, "the session store could not write the call's events");
            }
            inner.host.events().unsubscribe(id);
            let _ = forwarding.await;
        }
        inner.host.events().unsubscribe(runs);
        match outcome {
            Ok(result) => Ok(mcp_result(&result).into()),
            // Unmounted between the check and the call (a reload): the client hears why.
            Err(e) => Ok(CallToolResult::error(vec![McpContent::text(e.to_string())]).into()),
        }
    }

    /// A 2026-07-28 client hears of tool changes on a `subscriptions/listen` stream (an older one
    /// gets them unasked, see `on_initialized`).
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // One pending change is enough: the client lists again, and sees them all.
        let (tx, mut changed) = mpsc::channel::<()>(1);
        let id = self.inner.host.events().subscribe(move |event| {
            if matches!(
                event,
                Event::ToolMounted { .. } | Event::ToolUnmounted { .. }
            ) {
                let _ = tx.try_send(());
            }
            Ok(())
        });
        loop {
            tokio::select! {
                () = context.cancelled() => break,
                Some(()) = changed.recv() => {
                    if context.sink().notify_tool_list_changed().await.is_err() {
                        break;
                    }
                }
            }
        }
        self.inner.host.events().unsubscribe(id);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer.clone();
        let id = self.inner.host.events().subscribe(move |event| {
            if matches!(
                event,
                Event::ToolMounted { .. } | Event::ToolUnmounted { .. }
            ) {
                let peer = peer.clone();
                // A client that has gone is nothing to tell.
                tokio::spawn(async move { peer.notify_tool_list_changed().await });
            }
            Ok(())
        });
        let old = seam_core::sync::lock(&self.inner.list_listener).replace(id);
        if let Some(old) = old {
            self.inner.host.events().unsubscribe(old);
        }
    }
}

/// A direct call of a tool whose entry says `approve` (the agent's tool-call path asks for the
/// calls a model makes; a client's call comes here instead): `Err` with the words the client
/// reads when it is not allowed.
async fn approve(
    host: &ToolHost,
    mounted: &seam_core::tool::MountedTool,
    caller: &ParentRef,
    arguments: &serde_json::Value,
    context: &RequestContext<RoleServer>,
) -> Result<(), String> {
    if mounted.approve == Policy::Allow {
        return Ok(());
    }
    let asker = Asker {
        path: vec![caller.id.clone()],
        session: caller.session_id.clone(),
        root: caller.session_id.clone(),
        approver: None,
    };
    let subject = Subject::Tool {
        tool: mounted.descriptor.name.clone(),
        plugin: mounted.plugin.clone(),
        arguments: arguments.clone(),
    };
    host.approvals()
        .check(mounted.approve, &asker, subject, &context.ct)
        .await
        .map_err(|refused| {
            format!(
                "refused: {refused}; tool `{}` was not called",
                mounted.descriptor.name
            )
        })
}

/// Subscribes a listener that sends the progress events of the runs `caller` starts to the
/// client as `notifications/progress` for `token`, in order, dropping updates past
/// [`PROGRESS_QUEUE`] waiting ones. Unsubscribing the listener ends the forwarding task (returned)
/// once it has sent what is queued; the request's cancellation (`context.ct`, which rmcp
/// cancels as it reads `notifications/cancelled`) ends it at once, what is queued dropped.
fn forward_progress(
    host: &ToolHost,
    caller: &ParentRef,
    token: ProgressToken,
    context: &RequestContext<RoleServer>,
) -> (ListenerId, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<String>(PROGRESS_QUEUE);
    let (id, session) = (caller.id.clone(), caller.session_id.clone());
    let listener = host.events().subscribe(move |event| {
        if let Event::SubagentProgress {
            parent, content, ..
        } = &event
        {
            if parent.id == id && parent.session_id == session {
                let _ = tx.try_send(blocks_text(content));
            }
        }
        Ok(())
    });
    let peer: Peer<RoleServer> = context.peer.clone();
    let cancelled = context.ct.clone();
    let forwarding = tokio::spawn(async move {
        // MCP wants progress that increases: the count of updates sent, whichever run sent them.
        let mut sent = 0u64;
        loop {
            let message = tokio::select! {
                biased;
                () = cancelled.cancelled() => break,
                message = rx.recv() => match message {
                    Some(message) => message,
                    None => break,
                },
            };
            sent += 1;
            let note =
                ProgressNotificationParam::new(token.clone(), sent as f64).with_message(message);
            // Checked again right before the send, in the same poll that hands the notification
            // to the connection (rmcp's queue takes it without waiting): nothing is handed over
            // once the cancel was read. Over stdio the transport (`guard::Answered`) also drops
            // what was handed over before and written after.
            if cancelled.is_cancelled() || peer.notify_progress(note).await.is_err() {
                break;
            }
        }
    });
    (listener, forwarding)
}
