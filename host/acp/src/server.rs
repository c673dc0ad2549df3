//! `seam acp CONFIG`: serves the config's top-level agent over the Agent Client Protocol on
//! stdio, so that an editor speaking ACP can drive a Seam agent tree.
//!
//! Each `session/new` creates a top-level agent (`[agent]` of the config) in the session's
//! working directory, keeping its session in the config's session store (`[sessions]`);
//! `session/load` continues a kept one, replaying its conversation first (the `loadSession`
//! capability); `session/prompt` runs one turn of it. The tree's tool calls and
//! delegations stream as `tool_call` / `tool_call_update`s, the answer as an
//! `agent_message_chunk`; `session/cancel` aborts the whole tree. A request for approval made
//! anywhere in a session's tree is sent to the client as `session/request_permission` (see
//! `crate::permission`) while the client is connected. Stdout carries only the protocol:
//! everything else Seam says goes to stderr.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use seam_agent::agent::{Agent, AgentRegistry, SessionEvent};
use seam_core::approvals::Approvals;
use seam_core::events::{Event, EventBus, ListenerId};
use seam_core::types::{blocks_text, ContentBlock, StopReason};

use crate::outbox::{self, Kind, Outbox};
use crate::permission::{Asked, Editor};
use crate::rpc::{self, Incoming, LineReader};
use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio_util::sync::CancellationToken;

/// The longest line accepted from the client.
const MAX_LINE: usize = 8 << 20;

/// Bytes of lines waiting for a client that reads slowly (each charged a per-line overhead too):
/// past half of it progress updates are dropped, past three quarters tool-call updates; answers
/// are never dropped, and no new request is read until they fit.
const OUTBOX_BYTES: usize = 4 << 20;

/// What `seam acp` serves: a host's agent registry (whose defaults make each session's
/// top-level agent), the bus its trees emit on, and the approvals engine their requests for
/// approval go through. `seam_host::Host::agent_host` hands one out.
#[derive(Clone)]
pub struct AgentHost {
    events: Arc<EventBus>,
    agents: Arc<AgentRegistry>,
    approvals: Arc<Approvals>,
}

impl AgentHost {
    /// The agents of `agents`, whose trees emit on `events` and ask `approvals`.
    pub fn new(
        events: Arc<EventBus>,
        agents: Arc<AgentRegistry>,
        approvals: Arc<Approvals>,
    ) -> Self {
        Self {
            events,
            agents,
            approvals,
        }
    }

    fn events(&self) -> &Arc<EventBus> {
        &self.events
    }

    fn agents(&self) -> &Arc<AgentRegistry> {
        &self.agents
    }
}

/// One ACP session (keyed by its id in the session store): a top-level agent, and whether a
/// prompt is running on it.
struct Session {
    agent: Arc<Agent>,
    busy: bool,
}

type Sessions = Arc<Mutex<HashMap<String, Session>>>;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Answers requests until stdin closes or the user interrupts; then every session's tree is
/// aborted and disposed.
pub async fn serve(host: &AgentHost, interrupt: CancellationToken) {
    let (out, mut queue) = outbox::outbox(OUTBOX_BYTES, "seam acp");
    let writer = tokio::spawn(async move {
        let mut stdout = BufWriter::new(tokio::io::stdout());
        while let Some(line) = queue.next().await {
            // Flushed when nothing else waits: a burst goes out in few writes.
            if stdout.write_all(line.as_bytes()).await.is_err()
                || (queue.is_empty() && stdout.flush().await.is_err())
            {
                break;
            }
        }
        let _ = stdout.flush().await;
    });
    let sessions: Sessions = Arc::default();
    let listener = stream_updates(host, sessions.clone(), out.clone());
    // The client answers the served trees' requests for approval while it is connected.
    let asked = Asked::default();
    let surface = host.approvals.add_surface(Arc::new(Editor::new(
        out.clone(),
        asked.clone(),
        session_of(sessions.clone()),
    )));
    let mut lines = LineReader::new(BufReader::new(tokio::io::stdin()), MAX_LINE);
    loop {
        let line = tokio::select! {
            // The answers to what was read must fit before more is read.
            line = async { out.room(0).await; lines.next().await } => line,
            () = interrupt.cancelled() => break,
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                eprintln!("seam acp: stdin: {e}");
                break;
            }
        };
        match rpc::parse(&line) {
            Ok(Incoming::Request { id, method, params }) => {
                handle(host, &sessions, &out, id, &method, params);
            }
            Ok(Incoming::Notification { method, params }) if method == "session/cancel" => {
                // Only the prompt in flight: the session takes the next one. An idle session
                // has nothing to cancel (and must not have its next turn cancelled).
                let session = params.get("sessionId").and_then(Value::as_str);
                if let Some(s) = session.and_then(|s| {
                    lock(&sessions)
                        .get(s)
                        .filter(|s| s.busy)
                        .map(|s| s.agent.clone())
                }) {
                    s.cancel_turn();
                }
            }
            Ok(Incoming::Response { id, result }) => {
                if !asked.settle(&id, result) {
                    tracing::debug!(%id, "seam acp: a response to no request waiting");
                }
            }
            Ok(_) => {}
            // JSON-RPC answers a line it cannot read, so that a client waiting on it hears why.
            Err(e) => {
                eprintln!("seam acp: a line that is not JSON-RPC: {e}");
                out.offer(rpc::error_response(&e.id, e.code, &e.message), Kind::Answer);
            }
        }
    }
    host.events().unsubscribe(listener);
    let agents: Vec<Arc<Agent>> = lock(&sessions).drain().map(|(_, s)| s.agent).collect();
    for agent in agents {
        agent.abort();
        host.agents().dispose(agent.id()).await;
    }
    // The surface holds a sender of the queue: it goes before the queue is closed.
    drop(surface);
    drop(out);
    let _ = writer.await;
}

fn handle(
    host: &AgentHost,
    sessions: &Sessions,
    out: &Outbox,
    id: Value,
    method: &str,
    params: Value,
) {
    let reply = |line: String| {
        out.offer(line, Kind::Answer);
    };
    match method {
        "initialize" => reply(rpc::response(
            &id,
            json!({
                "protocolVersion": crate::PROTOCOL_VERSION,
                "agentCapabilities": {
                    "loadSession": true,
                    "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false}
                },
                "authMethods": [],
                "agentInfo": {"name": "seam", "version": env!("CARGO_PKG_VERSION")}
            }),
        )),
        "session/new" => {
            let cwd = params.get("cwd").and_then(Value::as_str).unwrap_or("/");
            match host.agents().create_top_level(None, cwd, None) {
                Ok(agent) => {
                    let session = agent.as_parent().session_id;
                    lock(sessions).insert(session.clone(), Session { agent, busy: false });
                    reply(rpc::response(&id, json!({"sessionId": session})));
                }
                Err(e) => reply(rpc::error_response(
                    &id,
                    rpc::INTERNAL_ERROR,
                    &format!("cannot create the agent: {e}"),
                )),
            }
        }
        "session/load" => reply(load(host, sessions, out, &id, &params)),
        "session/prompt" => {
            let session = params
                .get("sessionId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let agent = {
                let mut all = lock(sessions);
                match all.get_mut(&session) {
                    Some(s) if !s.busy => {
                        s.busy = true;
                        Ok(s.agent.clone())
                    }
                    Some(_) => Err("a prompt is already running in this session"),
                    None => Err("no such session"),
                }
            };
            let agent = match agent {
                Ok(agent) => agent,
                Err(why) => {
                    return reply(rpc::error_response(&id, rpc::INVALID_PARAMS, why));
                }
            };
            let prompt: Vec<ContentBlock> = params
                .get("prompt")
                .and_then(Value::as_array)
                .map(|blocks| {
                    blocks
                        .iter()
                        .filter_map(|b| b.get("text").and_then(Value::as_str))
                        .map(ContentBlock::text)
                        .collect()
                })
                .unwrap_or_default();
            let (out, sessions) = (out.clone(), sessions.clone());
            tokio::spawn(async move {
                let outcome = agent.run_turn(prompt).await;
                let text = blocks_text(&outcome.output);
                if !text.is_empty() {
                    out.send(update(
                        &session,
                        json!({"sessionUpdate": "agent_message_chunk",
                               "content": {"type": "text", "text": text}}),
                    ))
                    .await;
                }
                let stop = match &outcome.stop_reason {
                    StopReason::Completed => Some("end_turn"),
                    StopReason::Aborted => Some("cancelled"),
                    StopReason::MaxTokens => Some("max_tokens"),
                    StopReason::Refusal => Some("refusal"),
                    // ACP has no stop reason for a budget: the error names what ran out.
                    StopReason::Error | StopReason::Budget | StopReason::Other(_) => None,
                };
                let line = match stop {
                    Some(stop) => rpc::response(&id, json!({"stopReason": stop})),
                    None => rpc::error_response(
                        &id,
                        rpc::INTERNAL_ERROR,
                        &format!(
                            "the agent ended with stop reason `{}`{}",
                            outcome.stop_reason,
                            outcome
                                .diagnostic
                                .map(|d| format!(": {d}"))
                                .unwrap_or_default()
                        ),
                    ),
                };
                out.send(line).await;
                if let Some(s) = lock(&sessions).get_mut(&session) {
                    s.busy = false;
                }
            });
        }
        other => reply(rpc::error_response(
            &id,
            rpc::METHOD_NOT_FOUND,
            &format!("`{other}` is not offered by seam acp"),
        )),
    }
}

/// `session/load`: continues the kept session `sessionId` in a new top-level agent, after
/// replaying its completed turns as `session/update`s (user and agent messages, and each tool
/// call with how it ended). Returns the answer line.
fn load(host: &AgentHost, sessions: &Sessions, out: &Outbox, id: &Value, params: &Value) -> String {
    let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
        return rpc::error_response(id, rpc::INVALID_PARAMS, "`sessionId` is missing");
    };
    if lock(sessions).contains_key(session) {
        return rpc::error_response(
            id,
            rpc::INVALID_PARAMS,
            &format!("session `{session}` is already open"),
        );
    }
    match host.agents().store().session(session) {
        Ok(Some(_)) => {}
        Ok(None) => {
            return rpc::error_response(
                id,
                rpc::INVALID_PARAMS,
                &format!("no session `{session}` in the session store"),
            )
        }
        Err(e) => {
            return rpc::error_response(id, rpc::INTERNAL_ERROR, &format!("the session store: {e}"))
        }
    }
    let cwd = params.get("cwd").and_then(Value::as_str).unwrap_or("/");
    let agent = match host.agents().create_top_level(None, cwd, Some(session)) {
        Ok(agent) => agent,
        Err(e) => {
            return rpc::error_response(
                id,
                rpc::INTERNAL_ERROR,
                &format!("cannot continue session `{session}`: {e}"),
            )
        }
    };
    let text = |kind: &str, text: String| json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}});
    for event in agent.session().events() {
        let body = match event {
            SessionEvent::UserMessage { content } => {
                text("user_message_chunk", blocks_text(content))
            }
            SessionEvent::AssistantMessage { text: said, .. } if !said.is_empty() => {
                text("agent_message_chunk", said.clone())
            }
            SessionEvent::ToolResult {
                call_id,
                name,
                is_error,
                ..
            } => json!({"sessionUpdate": "tool_call", "toolCallId": call_id,
                        "title": format!("tool `{name}`"), "kind": "other",
                        "status": if *is_error { "failed" } else { "completed" }}),
            _ => continue,
        };
        // The history is the answer's: never dropped, in order, before it.
        out.offer(update(session, body), Kind::Answer);
    }
    lock(sessions).insert(session.to_string(), Session { agent, busy: false });
    rpc::response(id, json!({}))
}

/// Finds the ACP session a request for approval belongs to: the one whose session is the
/// request's root, or whose agent is at the top of the path of runs that asked.
fn session_of(
    sessions: Sessions,
) -> impl Fn(&seam_core::approval::ApprovalRecord) -> Option<String> {
    move |request| {
        let top = request.path.first();
        lock(&sessions)
            .iter()
            .find(|(id, s)| **id == request.root || top.is_some_and(|t| t == s.agent.id()))
            .map(|(id, _)| id.clone())
    }
}

/// A `session/update` notification line.
fn update(session: &str, update: Value) -> String {
    rpc::notification(
        "session/update",
        json!({"sessionId": session, "update": update}),
    )
}

/// Streams each session tree's tool calls and delegations as `session/update`s. An event
/// belongs to the session whose agent is the root of its agent's lineage.
fn stream_updates(host: &AgentHost, sessions: Sessions, out: Outbox) -> ListenerId {
    let agents = host.agents().clone();
    host.events().subscribe(move |event| {
        // The agent the event is about: the caller, for a delegation.
        let owner = match &event {
            Event::AgentToolCall { id, .. } | Event::AgentToolResult { id, .. } => id,
            Event::SubagentStart { parent, .. }
            | Event::SubagentProgress { parent, .. }
            | Event::SubagentEnd { parent, .. } => &parent.id,
            _ => return Ok(()),
        };
        let lineage = agents.lineage(owner);
        let Some(root) = lineage.last() else {
            return Ok(());
        };
        let Some(session) = lock(&sessions)
            .iter()
            .find(|(_, s)| s.agent.id() == root)
            .map(|(id, _)| id.clone())
        else {
            return Ok(());
        };
        let status = |ok: bool| if ok { "completed" } else { "failed" };
        let kind = match &event {
            Event::SubagentProgress { .. } => Kind::Progress,
            _ => Kind::Status,
        };
        let body = match &event {
            Event::AgentToolCall { id, call, tool } => {
                let title = if id == root {
                    format!("tool `{tool}`")
                } else {
                    format!("{id}: tool `{tool}`")
                };
                json!({"sessionUpdate": "tool_call", "toolCallId": format!("{id}/{call}"),
                       "title": title, "kind": "other", "status": "in_progress"})
            }
            Event::AgentToolResult {
                id, call, is_error, ..
            } => json!({"sessionUpdate": "tool_call_update",
                        "toolCallId": format!("{id}/{call}"), "status": status(!is_error)}),
            Event::SubagentStart { provider, id, .. } => {
                json!({"sessionUpdate": "tool_call", "toolCallId": id,
                       "title": format!("delegate to `{provider}` ({id})"),
                       "kind": "other", "status": "in_progress"})
            }
            Event::SubagentProgress { id, content, .. } => {
                let text = blocks_text(content);
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                       "content": [{"type": "content", "content": {"type": "text", "text": text}}]})
            }
            Event::SubagentEnd {
                id, stop_reason, ..
            } => json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                        "status": status(stop_reason.is_success())}),
            _ => return Ok(()),
        };
        out.offer(update(&session, body), kind);
        Ok(())
    })
}
