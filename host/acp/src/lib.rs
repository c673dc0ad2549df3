//! ACP providers: a child agent that is another program, spoken to over the Agent Client
//! Protocol on its stdio (`kind = "acp"` entries).
//!
//! One process per run. A session per run in one shared process would save the agent's start-up
//! (tens of milliseconds for a Python agent), but a run's cancel, its limits and its dispose
//! would then reach only as far as the agent chooses to honour them; a process of its own can
//! always be stopped, and one faulty run cannot take its siblings down.
//!
//! A run: spawn with exactly the granted environment in the parent's working directory,
//! `initialize`, `session/new`, then `session/prompt`. `session/update` message chunks become
//! the answer and progress; the stop reason maps onto Seam's; a cancel sends `session/cancel`.
//! Permission requests are answered by the entry's policy. The agent is offered the file system
//! only inside the entry's `dirs` grants, and never a terminal; other requests are refused.

pub mod files;
pub mod outbox;
mod permission;
pub mod rpc;

pub mod process;
pub mod server;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use seam_agent::session::SessionEvent;
use seam_core::live::LiveCounts;
use seam_core::store::Write;
use seam_core::subagent::{Provider, RunContext, RunFailure, StoredSession};
use seam_core::types::{
    Capabilities, ContentBlock, ProviderDescriptor, RuntimeFeatures, StartRequest, StopReason,
    SubagentResult,
};
use serde::Deserialize;
use serde_json::{json, Value};

use process::AgentProcess;
use rpc::Incoming;
use seam_sandbox::{EntryError, Grants, Sandbox, SandboxError};

/// The ACP protocol version Seam speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Bytes each progress update is charged beyond its text, as a component's are: a flood of
/// tiny updates costs the host per update, not per byte.
const UPDATE_OVERHEAD: usize = 64;

/// How an entry answers the agent's permission requests (`config.permissions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Permissions {
    /// Refuse every request (the default).
    #[default]
    Reject,
    /// Allow tool calls that only read (`read`, `search`, `think`); refuse the rest.
    AllowRead,
    /// Allow every request.
    Allow,
    /// Ask whichever surface is there, as a call of the run's tree (see `[approvals]`).
    Ask,
}

/// An ACP entry's `config` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// The provider's registry name (default: the entry id).
    name: Option<String>,
    #[serde(default)]
    permissions: Permissions,
    /// Declares `resume`: each run's exchange is kept as the child's session in the store, and
    /// a resumed run continues the agent's own session with `session/load` (an agent that
    /// does not offer it fails the resumed run, saying so).
    #[serde(default)]
    resume: bool,
}

/// Refuses the grants that mean nothing to a process Seam does not sandbox: of the grants only
/// `env` (its whole environment) and `dirs` (where its `fs/*` requests may reach) apply to an
/// agent program, so the others are refused rather than ignored.
pub fn check_grants(grants: &Grants) -> Result<(), SandboxError> {
    grants.only(
        &["env", "dirs"],
        "an ACP agent is a process outside the sandbox: only `env` and `dirs` grants apply to it \
         (it reaches what the host's user can)",
    )
}

/// The provider of the ACP entry `plugin` (its `config` table) whose grants passed [`check_grants`], from its checked
/// `sandbox` (granted environment values, directories, limits); the error names the config key.
pub fn provider(
    plugin: &str,
    config: &Value,
    argv: &[String],
    sandbox: &Sandbox,
    grace: Duration,
    live: Arc<LiveCounts>,
) -> Result<(ProviderDescriptor, AcpProvider), EntryError> {
    let spec = AcpSpec {
        plugin: plugin.into(),
        argv: argv.to_vec(),
        config: config.clone(),
        env: sandbox.grants().env_values().to_vec(),
        grace,
        max_output_bytes: sandbox.limits().max_output_bytes,
        dirs: sandbox.grants().dirs.clone(),
        max_file_bytes: sandbox.limits().max_write_bytes,
    };
    AcpProvider::new(spec, live)
}

/// What an ACP provider is made of, from its config entry.
pub struct AcpSpec {
    /// The entry id.
    pub plugin: Arc<str>,
    /// The agent program and its arguments.
    pub argv: Vec<String>,
    /// The entry's `config`.
    pub config: Value,
    /// The granted environment, values read at load.
    pub env: Vec<(String, String)>,
    /// How long the agent gets to stop on each step of the escalation.
    pub grace: Duration,
    /// The entry's `max_output_bytes`: the answer, and the progress, may not exceed it.
    pub max_output_bytes: usize,
    /// The entry's `dirs` grants (canonical host paths): where `fs/*` requests may reach.
    pub dirs: Vec<seam_sandbox::DirGrant>,
    /// The entry's `max_write_bytes`: the largest file the agent may read or write through Seam.
    pub max_file_bytes: u64,
}

/// A provider that runs an agent program per run.
pub struct AcpProvider {
    inner: Arc<Inner>,
}

struct Inner {
    /// Whether runs keep the child's session for `resume`.
    resume: bool,
    plugin: Arc<str>,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    permissions: Permissions,
    grace: Duration,
    max_output_bytes: usize,
    files: files::Files,
    live: Arc<LiveCounts>,
}

impl AcpProvider {
    /// Reads the entry's settings; the error names the config key.
    pub fn new(
        spec: AcpSpec,
        live: Arc<LiveCounts>,
    ) -> Result<(ProviderDescriptor, Self), EntryError> {
        let settings: Settings = serde_json::from_value(spec.config).map_err(|e| {
            EntryError::new(
                "config",
                format!(
                    "key `config`: {e} (an ACP entry takes `name`, `permissions` and `resume`)"
                ),
            )
        })?;
        let descriptor = ProviderDescriptor {
            name: settings.name.unwrap_or_else(|| spec.plugin.to_string()),
            // A persona reaches the agent as the prompt's first block; nothing else of a
            // start request can be enforced on a program Seam does not run the model of.
            capabilities: Capabilities {
                output_schema: false,
                depth_limit: false,
                tool_filter: false,
                persona: true,
            },
            features: RuntimeFeatures {
                steering: false,
                resume: settings.resume,
            },
            inherits_parent_context: false,
        };
        let inner = Inner {
            resume: settings.resume,
            plugin: spec.plugin,
            argv: spec.argv,
            env: spec.env,
            permissions: settings.permissions,
            grace: spec.grace,
            max_output_bytes: spec.max_output_bytes,
            files: files::Files::new(spec.dirs, spec.max_file_bytes),
            live,
        };
        Ok((
            descriptor,
            Self {
                inner: Arc::new(inner),
            },
        ))
    }
}

impl Provider for AcpProvider {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.run(ctx, request).await })
    }
}

impl Inner {
    /// A run: played back from the recording when replaying (the agent is not started: its
    /// own internals are not replayed, only its answer), else run for real and recorded.
    async fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> Result<SubagentResult, RunFailure> {
        use seam_core::cassette::Kind;
        let Some((tape, key)) = ctx.account().tape() else {
            return self.run_agent(ctx, request).await;
        };
        if tape.replaying() {
            tape.gap(format!(
                "ACP agent `{}`: its own internals are not run again, its answers are the \
                 recorded ones",
                self.plugin
            ));
            return match tape.play(&key, Kind::Run) {
                seam_core::tape::Played::Entry(_, body) => {
                    serde_json::from_value(body).map_err(|e| RunFailure::AgentProcess {
                        plugin: self.plugin.to_string(),
                        message: format!("replay: the recorded outcome is unreadable: {e}"),
                    })
                }
                _ => Err(RunFailure::AgentProcess {
                    plugin: self.plugin.to_string(),
                    message: "replay: the recording has no outcome for this run".into(),
                }),
            };
        }
        let outcome = self.run_agent(ctx, request).await;
        if let Ok(result) = &outcome {
            if let Ok(body) = serde_json::to_value(result) {
                tape.record(&key, Kind::Run, body);
            }
        }
        outcome
    }

    async fn run_agent(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> Result<SubagentResult, RunFailure> {
        let cwd = working_dir(&request.parent.working_directory);
        // A JSON-escaped chunk can be several times its text; past this a line is a flood.
        let max_line = self.max_output_bytes.saturating_mul(6).max(1 << 20);
        // Starting the agent's program is a use of a grant `[approvals] process` may ask for.
        ctx.approve_grant(
            seam_core::approval::GrantClass::Process,
            &self.plugin,
            &self.argv.join(" "),
        )
        .await
        .map_err(|refused| RunFailure::AgentProcess {
            plugin: self.plugin.to_string(),
            message: refused.to_string(),
        })?;
        let mut agent = AgentProcess::spawn(
            &self.argv, &self.env, &cwd, max_line, self.grace, &self.live,
        )
        .map_err(|e| RunFailure::AgentProcess {
            plugin: self.plugin.to_string(),
            message: e.to_string(),
        })?;
        let mut session = Session {
            inner: self,
            ctx: &ctx,
            agent: &mut agent,
            next_id: 0,
            answer: String::new(),
            reported: 0,
            cancel_sent: false,
            session_id: None,
            replaying: false,
        };
        let outcome = session.drive(&request, &cwd).await;
        let outcome = match outcome {
            Ok(result) => Ok(result),
            Err(Stop::Failed(message)) => {
                agent.stderr_read(self.grace).await;
                let stderr = agent
                    .stderr_tail()
                    .map(|t| format!("; its stderr ended with: {t}"))
                    .unwrap_or_default();
                Err(RunFailure::AgentProcess {
                    plugin: self.plugin.to_string(),
                    message: format!("{message}{stderr}"),
                })
            }
        };
        agent.finish().await;
        outcome
    }
}

/// The parent's working directory when it is one, else the host's.
fn working_dir(parent: &str) -> PathBuf {
    let path = PathBuf::from(parent);
    if path.is_absolute() && path.is_dir() {
        return path;
    }
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
}

/// Why a run stopped without a result of the agent's.
enum Stop {
    /// The diagnostic.
    Failed(String),
}

struct Session<'a> {
    inner: &'a Inner,
    ctx: &'a RunContext,
    agent: &'a mut AgentProcess,
    next_id: u64,
    /// The agent's message chunks so far.
    answer: String,
    /// Bytes of progress reported, overheads included (the answer's chunks also count in
    /// `answer`).
    reported: usize,
    cancel_sent: bool,
    session_id: Option<String>,
    /// While `session/load` replays the session: its updates are history, not this run's.
    replaying: bool,
}

impl Session<'_> {
    async fn drive(
        &mut self,
        request: &StartRequest,
        cwd: &std::path::Path,
    ) -> Result<SubagentResult, Stop> {
        let init = self
            .call(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {
                        "fs": {
                            "readTextFile": self.inner.files.can_read(),
                            "writeTextFile": self.inner.files.can_write()
                        },
                        "terminal": false
                    },
                    "clientInfo": {"name": "seam", "version": env!("CARGO_PKG_VERSION")}
                }),
            )
            .await?;
        let Some(init) = init else {
            return Ok(aborted(String::new()));
        };
        let version = init.get("protocolVersion").and_then(Value::as_u64);
        if version != Some(PROTOCOL_VERSION) {
            return Err(Stop::Failed(format!(
                "it speaks ACP protocol version {}, Seam speaks {PROTOCOL_VERSION}",
                version.map_or_else(|| "(none given)".to_string(), |v| v.to_string())
            )));
        }
        let loads = init
            .pointer("/agentCapabilities/loadSession")
            .and_then(Value::as_bool)
            == Some(true);
        let resumed = self
            .ctx
            .resumed_from()
            .and_then(|seed| seed.downcast_ref::<StoredSession>().cloned());
        let (session_id, kept) = match resumed {
            Some(StoredSession(kept)) => match self.load(&kept, loads, cwd).await? {
                Some(session_id) => (session_id, Some(kept)),
                None => return Ok(aborted(String::new())),
            },
            None => {
                let created = self
                    .call(
                        "session/new",
                        json!({"cwd": cwd.to_string_lossy(), "mcpServers": []}),
                    )
                    .await?;
                let Some(created) = created else {
                    return Ok(aborted(String::new()));
                };
                let Some(session_id) = created.get("sessionId").and_then(Value::as_str) else {
                    return Err(Stop::Failed(
                        "its `session/new` answer has no `sessionId`".into(),
                    ));
                };
                (session_id.to_string(), None)
            }
        };
        self.session_id = Some(session_id.clone());
        let child = self
            .inner
            .resume
            .then(|| self.keep_session(kept, &session_id, request, cwd));
        self.ctx.ready();
        let answer = self
            .call(
                "session/prompt",
                json!({"sessionId": session_id, "prompt": prompt_blocks(request)}),
            )
            .await?;
        if let (Some(Some((session, turn))), Some(answer)) = (&child, &answer) {
            let reason = answer
                .get("stopReason")
                .and_then(Value::as_str)
                .unwrap_or("end_turn");
            self.record_answer(session, *turn, reason);
        }
        let answer_text = std::mem::take(&mut self.answer);
        let Some(answer) = answer else {
            return Ok(aborted(answer_text));
        };
        let stop_reason = match answer.get("stopReason").and_then(Value::as_str) {
            Some("end_turn") => StopReason::Completed,
            Some("max_tokens") => StopReason::MaxTokens,
            Some("refusal") => StopReason::Refusal,
            Some("cancelled") => StopReason::Aborted,
            Some(other) => StopReason::Other(other.replace('_', "-")),
            None => {
                return Err(Stop::Failed(
                    "its `session/prompt` answer has no `stopReason`".into(),
                ))
            }
        };
        let output = if answer_text.is_empty() {
            Vec::new()
        } else {
            vec![ContentBlock::text(answer_text)]
        };
        Ok(SubagentResult {
            output,
            structured: None,
            stop_reason,
            diagnostic: None,
        })
    }

    /// `session/load` of the agent's session kept as the store's session `kept`; returns the
    /// agent's session id (`None`: cancelled first).
    async fn load(
        &mut self,
        kept: &str,
        loads: bool,
        cwd: &std::path::Path,
    ) -> Result<Option<String>, Stop> {
        if !loads {
            return Err(Stop::Failed(
                "it does not offer `session/load` (loadSession), so its session cannot be \
                 continued"
                    .into(),
            ));
        }
        let agent_session = match self.ctx.store().session(kept) {
            Ok(Some(summary)) => summary.agent,
            Ok(None) => {
                return Err(Stop::Failed(format!(
                    "session `{kept}` is not in the session store"
                )))
            }
            Err(e) => return Err(Stop::Failed(format!("the session store: {e}"))),
        };
        self.session_id = Some(agent_session.clone());
        self.replaying = true;
        let loaded = self
            .call(
                "session/load",
                json!({"sessionId": agent_session, "cwd": cwd.to_string_lossy(), "mcpServers": []}),
            )
            .await;
        self.replaying = false;
        Ok(loaded?.map(|_| agent_session))
    }

    /// Keeps this run's exchange as the child's session in the store (`kept`, for a resumed
    /// run, else a new one whose agent is the ACP session id `session/load` takes), linked to
    /// the run, with the turn's start and prompt. Returns the session and the turn's number.
    fn keep_session(
        &mut self,
        kept: Option<String>,
        agent_session: &str,
        request: &StartRequest,
        cwd: &std::path::Path,
    ) -> Option<(String, u32)> {
        let store = self.ctx.store().clone();
        let id = kept.unwrap_or_else(|| format!("{}-acp-{}", store.id_prefix(), self.ctx.id()));
        let turn = store
            .events(&id)
            .map(|e| e.iter().filter(|e| e.kind == "turn/start").count())
            .unwrap_or(0) as u32
            + 1;
        let event = |e: SessionEvent| Write::Append {
            session: id.clone(),
            kind: e.kind().to_string(),
            body: e.to_json(),
        };
        let writes = vec![
            Write::OpenSession {
                id: id.clone(),
                agent: agent_session.to_string(),
                parent: Some(request.parent.session_id.clone()),
                working_directory: cwd.to_string_lossy().into_owned(),
            },
            event(SessionEvent::TurnStart { turn }),
            event(SessionEvent::UserMessage {
                content: request.prompt.clone(),
            }),
        ];
        if let Err(e) = store.commit(writes) {
            tracing::warn!(plugin = %self.inner.plugin, error = %e, "cannot keep the ACP child's session");
            return None;
        }
        self.ctx.link_child_session(&id);
        Some((id, turn))
    }

    /// The turn's answer and end, in the child's kept session.
    fn record_answer(&self, session: &str, turn: u32, reason: &str) {
        let event = |e: SessionEvent| Write::Append {
            session: session.to_string(),
            kind: e.kind().to_string(),
            body: e.to_json(),
        };
        let reason = match reason {
            "end_turn" => StopReason::Completed,
            "cancelled" => StopReason::Aborted,
            "max_tokens" => StopReason::MaxTokens,
            "refusal" => StopReason::Refusal,
            other => StopReason::Other(other.replace('_', "-")),
        };
        let writes = vec![
            event(SessionEvent::AssistantMessage {
                text: self.answer.clone(),
                tool_calls: Vec::new(),
            }),
            event(SessionEvent::TurnEnd {
                turn,
                reason,
                usage: None,
            }),
        ];
        if let Err(e) = self.ctx.store().commit(writes) {
            tracing::warn!(plugin = %self.inner.plugin, error = %e, "cannot keep the ACP child's answer");
        }
    }

    /// Sends a request and serves the agent until its answer comes. `None`: the run was
    /// cancelled before a session existed to cancel (nothing to wait for).
    async fn call(&mut self, method: &str, mut params: Value) -> Result<Option<Value>, Stop> {
        // The run's trace, for an agent that traces: W3C trace context in `_meta`, as MCP and
        // ACP carry it.
        if let (Some(traceparent), Some(fields)) = (self.ctx.traceparent(), params.as_object_mut())
        {
            fields.insert("_meta".into(), json!({ "traceparent": traceparent }));
        }
        self.next_id += 1;
        let id = self.next_id;
        if !self.agent.send(rpc::request(id, method, params)).await {
            return Err(self.gone(method).await);
        }
        loop {
            let line = tokio::select! {
                line = self.agent.lines.next() => line,
                () = self.ctx.cancelled(), if !self.cancel_sent => {
                    self.cancel_sent = true;
                    match &self.session_id {
                        Some(session) => {
                            let note = rpc::notification("session/cancel", json!({"sessionId": session}));
                            let _ = self.agent.send(note).await;
                            continue;
                        }
                        None => return Ok(None),
                    }
                }
            };
            let line = match line {
                Ok(Some(line)) => line,
                Ok(None) => return Err(self.gone(method).await),
                Err(e) => {
                    return Err(Stop::Failed(format!(
                        "it wrote {e} to stdout while Seam waited for `{method}`"
                    )))
                }
            };
            match rpc::parse(&line) {
                Ok(Incoming::Response { id: got, result }) if got == json!(id) => {
                    return match result {
                        Ok(value) => Ok(Some(value)),
                        Err(e) => Err(Stop::Failed(format!(
                            "it answered `{method}` with an error: {e}"
                        ))),
                    };
                }
                // An answer to nothing we asked: ignored, as JSON-RPC peers do.
                Ok(Incoming::Response { .. }) => {}
                Ok(Incoming::Notification {
                    method: note,
                    params,
                }) => {
                    if note == "session/update" && !self.replaying {
                        self.update(&params)?;
                    }
                }
                Ok(Incoming::Request {
                    id,
                    method: asked,
                    params,
                }) => {
                    let reply = self.answer_request(&id, &asked, &params).await;
                    if !self.agent.send(reply).await {
                        return Err(self.gone(method).await);
                    }
                }
                Err(e) => {
                    return Err(Stop::Failed(format!(
                        "it wrote something that is not ACP on stdout: {e}"
                    )))
                }
            }
        }
    }

    /// The diagnostic for an agent whose stdout closed while `method` was pending.
    async fn gone(&mut self, method: &str) -> Stop {
        let status = match self.agent.exit_status(self.inner.grace).await {
            Some(status) => format!("exited ({status})"),
            None => "closed its stdout".to_string(),
        };
        Stop::Failed(format!(
            "the process {status} before it answered `{method}`"
        ))
    }

    /// One `session/update`: message chunks make the answer and progress; tool calls are
    /// reported as progress.
    fn update(&mut self, params: &Value) -> Result<(), Stop> {
        let limit = self.inner.max_output_bytes;
        match agent_update(params) {
            AgentUpdate::Chunk(text) => {
                if self.answer.len() + text.len() > limit {
                    return Err(Stop::Failed(format!(
                        "its answer exceeds max_output_bytes ({limit} bytes); the process was stopped"
                    )));
                }
                self.answer.push_str(text);
                // The answer keeps every chunk; progress keeps them while its budget lasts.
                if !text.is_empty() {
                    self.report(text.to_string());
                }
            }
            AgentUpdate::ToolCall(title) => self.report(format!("tool call: {title}")),
            AgentUpdate::Other => {}
        }
        Ok(())
    }

    /// Reports `text` as progress if it fits the run's progress budget (`max_output_bytes`,
    /// each update charged [`UPDATE_OVERHEAD`] beyond its text); past it progress is dropped,
    /// not kept: the answer is what matters.
    fn report(&mut self, text: String) {
        let cost = text.len().saturating_add(UPDATE_OVERHEAD);
        if self.reported.saturating_add(cost) <= self.inner.max_output_bytes {
            self.reported += cost;
            self.ctx.progress(vec![ContentBlock::text(text)]);
        }
    }

    /// The answer to a request from the agent.
    async fn answer_request(&self, id: &Value, method: &str, params: &Value) -> String {
        match method {
            "session/request_permission" => {
                let outcome = self.permission(params).await;
                rpc::response(id, json!({"outcome": outcome}))
            }
            "fs/read_text_file" | "fs/write_text_file" if self.inner.files.can_read() => {
                // The entry's directories as the scopes over this run leave them, now.
                let scopes = self.ctx.account().scopes();
                let files = if scopes.is_empty() {
                    self.inner.files.clone()
                } else {
                    self.inner.files.narrowed(&scopes)
                };
                let (method_owned, params_owned) = (method.to_string(), params.clone());
                let served =
                    tokio::task::spawn_blocking(move || files.serve(&method_owned, &params_owned))
                        .await
                        .map_err(|e| format!("the file task failed: {e}"))
                        .and_then(|served| served.map_err(|e| e.to_string()));
                tracing::info!(plugin = %self.inner.plugin, method, ok = served.is_ok(), "served the agent's file request");
                match served {
                    Ok(result) => rpc::response(id, result),
                    Err(message) => rpc::error_response(id, rpc::INVALID_PARAMS, &message),
                }
            }
            m if m.starts_with("fs/") => rpc::error_response(
                id,
                rpc::METHOD_NOT_FOUND,
                &format!("`{m}`: this agent is granted no directory (`grants.dirs`)"),
            ),
            m if m.starts_with("terminal/") => rpc::error_response(
                id,
                rpc::METHOD_NOT_FOUND,
                &format!("`{m}`: Seam offers an ACP agent no terminal"),
            ),
            m => rpc::error_response(id, rpc::METHOD_NOT_FOUND, &format!("`{m}` is not offered")),
        }
    }

    /// Answers a permission request by the entry's policy ([`choose_permission`]), after
    /// asking a surface when it says `ask`; `cancelled` once the run is cancelled.
    async fn permission(&self, params: &Value) -> Value {
        if self.cancel_sent || self.ctx.is_cancelled() {
            return json!({"outcome": "cancelled"});
        }
        let mut policy = self.inner.permissions;
        if policy == Permissions::Ask {
            let call = params.get("toolCall").cloned().unwrap_or(Value::Null);
            let title = call
                .get("title")
                .and_then(Value::as_str)
                .or_else(|| call.get("kind").and_then(Value::as_str))
                .unwrap_or("(untitled)")
                .to_string();
            let subject = seam_core::approval::Subject::Tool {
                tool: title,
                plugin: self.inner.plugin.to_string(),
                arguments: call.get("rawInput").cloned().unwrap_or(call),
            };
            policy = match self
                .ctx
                .approve(seam_core::approval::Policy::Ask, subject)
                .await
            {
                Ok(()) => Permissions::Allow,
                Err(refused) => {
                    tracing::info!(plugin = %self.inner.plugin, "{refused}");
                    Permissions::Reject
                }
            };
        }
        let (outcome, kind, allow) = choose_permission(policy, params);
        tracing::info!(
            plugin = %self.inner.plugin,
            kind,
            allowed = allow,
            "answered the agent's permission request"
        );
        outcome
    }
}

/// What one `session/update` from an agent is to Seam.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentUpdate<'a> {
    /// A text chunk of the answer.
    Chunk(&'a str),
    /// A tool call began, with its title (`(untitled)` when it has none).
    ToolCall(&'a str),
    /// Anything else (plans, thoughts, non-text chunks): ignored.
    Other,
}

/// Reads a `session/update`'s params.
pub fn agent_update(params: &Value) -> AgentUpdate<'_> {
    let Some(update) = params.get("update") else {
        return AgentUpdate::Other;
    };
    match update.get("sessionUpdate").and_then(Value::as_str) {
        Some("agent_message_chunk") => update
            .get("content")
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
            .and_then(|c| c.get("text"))
            .and_then(Value::as_str)
            .map_or(AgentUpdate::Other, AgentUpdate::Chunk),
        Some("tool_call") => AgentUpdate::ToolCall(
            update
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or("(untitled)"),
        ),
        _ => AgentUpdate::Other,
    }
}

/// Picks a permission request's option by `policy`: an `allow_*` option when the policy allows
/// the tool call's kind, else a `reject_*` one; `cancelled` when no option fits. Returns the
/// outcome to answer with, the tool call's kind and whether the policy allowed it.
pub fn choose_permission(policy: Permissions, params: &Value) -> (Value, &str, bool) {
    let kind = params
        .get("toolCall")
        .and_then(|t| t.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("other");
    let allow = match policy {
        Permissions::Allow => true,
        Permissions::AllowRead => matches!(kind, "read" | "search" | "think"),
        // Decided by a surface before this is called (see `Session::permission`); what is
        // left undecided is refused.
        Permissions::Reject | Permissions::Ask => false,
    };
    let wanted: &[&str] = if allow {
        &["allow_once", "allow_always"]
    } else {
        &["reject_once", "reject_always"]
    };
    let options = params.get("options").and_then(Value::as_array);
    let chosen = wanted.iter().find_map(|want| {
        options?.iter().find_map(|o| {
            (o.get("kind").and_then(Value::as_str) == Some(want))
                .then(|| o.get("optionId").cloned())
                .flatten()
        })
    });
    let outcome = match chosen {
        Some(option) => json!({"outcome": "selected", "optionId": option}),
        None => json!({"outcome": "cancelled"}),
    };
    (outcome, kind, allow)
}

/// The request's prompt as ACP content blocks, the persona and system prompt first.
fn prompt_blocks(request: &StartRequest) -> Vec<Value> {
    let mut blocks: Vec<Value> = request
        .preamble()
        .map(|text| json!({"type": "text", "text": text}))
        .collect();
    for block in &request.prompt {
        blocks.push(json!({"type": "text", "text": block.as_text()}));
    }
    blocks
}

fn aborted(answer: String) -> SubagentResult {
    let output = if answer.is_empty() {
        Vec::new()
    } else {
        vec![ContentBlock::text(answer)]
    };
    SubagentResult {
        output,
        structured: None,
        stop_reason: StopReason::Aborted,
        diagnostic: None,
    }
}
