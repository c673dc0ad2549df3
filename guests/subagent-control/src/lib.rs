//! Subagent control: the model's side of background runs and continuable child agents. One
//! component, loaded once per action, each entry one tool (its default name in brackets):
//!
//! - `action = "list"` (`subagent_list`): the calling agent's background runs;
//! - `action = "output"` (`subagent_output`, `{id, timeout_ms?}`): waits up to `timeout_ms`
//!   (default 0, at most 600000) for the run's outcome; answers its final output, or, while it
//!   is still going, the progress it reported so far;
//! - `action = "stop"` (`subagent_stop`, `{id, reason?}`): cancels the run;
//! - `action = "send"` (`subagent_send`, `{id, message}`): steers the run with a message;
//! - `action = "resume"` (`subagent_resume`, `{id, prompt}`): continues a finished run's
//!   conversation with a new prompt, in a new run this call waits for (providers declaring
//!   `resume`).
//!
//! The continuable children of `seam:plugin@0.3.0` (a child agent keeps its session across
//! activations, and is known by a durable id):
//!
//! - `action = "list_agents"` (`list_agents`, `{scope?, status?}`): the calling agent's children
//!   (`scope = "children"`, the default) or all its descendants (`"descendants"`), optionally
//!   only those of one status (`running`, `idle`, `ready`, `failed`, `interrupted`), one line
//!   each: id, provider, label, status, stop reason, report, queued messages;
//! - `action = "send_message"` (`send_message`, `{id, message}`): sends a child a message, and
//!   answers what happened to it: queued (the child is running), woken (it was waiting) or
//!   resumed (no process held it);
//! - `action = "interrupt_agent"` (`interrupt_agent`, `{id}`): stops a child's current
//!   activation, keeping its session and inbox;
//! - `action = "report"` (`report`, `{message, mode?}`): for a child to call: reports to its
//!   parent, kept for its listing (`mode = "quiet"`, the default) or also delivered before the
//!   parent's next step (`"next-step"`).
//!
//! Approvals (`seam:plugin@0.4.0`), for an agent a delegation named as the approver of the
//! requests made below it (`config.approver = "parent"` on its subagent tool entry):
//!
//! - `action = "approvals"` (`approvals`, `{timeout_ms?}`): the requests waiting for the calling
//!   agent's answer; when there is none, waits up to `timeout_ms` (default 0) for one;
//! - `action = "approve"` (`approve`, `{id?, allow, always?, reason?}`): answers one (the
//!   oldest when no `id` is given): `allow` lets it go ahead, `always` for the rest of the
//!   session; `reason` tells a denied child why.
//!
//! Only the calling agent's own runs and children are reachable: the host answers `no-run` for
//! any other id. A missing or mistyped argument is answered as a tool error naming it.

use seam_plugin::subagents::{self, Run};
use seam_plugin::tool::{self, ToolBinding, ToolDescriptor, ToolResult};
use seam_plugin::types::{
    AgentInfo, AgentScope, AgentStatus, ContentBlock, Delivery, ParentRef, ProviderDescriptor,
    ReportMode, RunInfo, RunState, StopReason, SubagentError, SubagentResult,
};
use seam_plugin::Tool;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Longest wait `subagent_output` accepts.
const MAX_TIMEOUT_MS: u64 = 600_000;

/// The config's `action`: which tool this entry is.
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Action {
    List,
    Output,
    Stop,
    Send,
    Resume,
    ListAgents,
    SendMessage,
    InterruptAgent,
    Report,
    Approvals,
    Approve,
}

/// The statuses `list_agents` filters by, as its schema and its errors name them.
const STATUSES: [&str; 5] = ["running", "idle", "ready", "failed", "interrupted"];

/// The entry's config; an unknown key refuses the plugin.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    action: Action,
    tool_name: Option<String>,
}

impl Config {
    fn tool_name(&self) -> Result<String, String> {
        match &self.tool_name {
            Some(name) if name.is_empty() => {
                Err("config key `toolName`: expected a non-empty string".into())
            }
            Some(name) => Ok(name.clone()),
            None => Ok(self.action.default_tool_name()),
        }
    }
}

impl Action {
    /// The tool's name when the config gives none: `subagent_*` for the background-run actions,
    /// the action itself for the continuable-children ones.
    fn default_tool_name(self) -> String {
        let run = |name: &str| format!("subagent_{name}");
        match self {
            Action::List => run("list"),
            Action::Output => run("output"),
            Action::Stop => run("stop"),
            Action::Send => run("send"),
            Action::Resume => run("resume"),
            Action::ListAgents => "list_agents".into(),
            Action::SendMessage => "send_message".into(),
            Action::InterruptAgent => "interrupt_agent".into(),
            Action::Report => "report".into(),
            Action::Approvals => "approvals".into(),
            Action::Approve => "approve".into(),
        }
    }

    fn describe(self) -> (&'static str, Value) {
        let id = json!({"type": "string", "description": "The background run's id."});
        match self {
            Action::List => (
                "List your background subagent runs: id, provider, label, state and, once \
                 finished, how they ended.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ),
            Action::Output => (
                "Read a background subagent run: waits up to timeout_ms for it to finish and \
                 returns its final answer, or, if it is still running, the progress it reported \
                 so far.",
                json!({"type": "object", "properties": {
                    "id": id,
                    "timeout_ms": {"type": "integer", "minimum": 0, "maximum": MAX_TIMEOUT_MS,
                                   "description": "How long to wait for it to finish (default 0)."}
                }, "required": ["id"], "additionalProperties": false}),
            ),
            Action::Stop => (
                "Stop a background subagent run.",
                json!({"type": "object", "properties": {
                    "id": id,
                    "reason": {"type": "string", "description": "Why, for the record."}
                }, "required": ["id"], "additionalProperties": false}),
            ),
            Action::Resume => (
                "Continue a finished background subagent's conversation with a new prompt; \
                 returns its new answer.",
                json!({"type": "object", "properties": {
                    "id": id,
                    "prompt": {"type": "string", "description": "What to ask it next."}
                }, "required": ["id", "prompt"], "additionalProperties": false}),
            ),
            Action::Send => (
                "Send a steering message to a running background subagent.",
                json!({"type": "object", "properties": {
                    "id": id,
                    "message": {"type": "string", "description": "What to tell it."}
                }, "required": ["id", "message"], "additionalProperties": false}),
            ),
            Action::ListAgents => (
                "List your child agents (or all your descendants): one line each with its id, \
                 provider, label, status, how its latest activation ended, its latest report \
                 and how many messages wait for it. Listing resumes nothing.",
                json!({"type": "object", "properties": {
                    "scope": {"type": "string", "enum": ["children", "descendants"],
                              "description": "Your children (default), or all your descendants."},
                    "status": {"type": "string", "enum": STATUSES,
                               "description": "Only the agents of this status."}
                }, "additionalProperties": false}),
            ),
            Action::SendMessage => (
                "Send a message to one of your child agents, by its id: it is queued while the \
                 child runs, wakes it if it waits, and resumes it if no process holds it. \
                 Answers which of these happened.",
                json!({"type": "object", "properties": {
                    "id": agent_id(),
                    "message": {"type": "string", "description": "What to tell it."}
                }, "required": ["id", "message"], "additionalProperties": false}),
            ),
            Action::InterruptAgent => (
                "Stop the current activation of one of your child agents. It keeps its session \
                 and its waiting messages; send it a message to continue it.",
                json!({"type": "object", "properties": {
                    "id": agent_id()
                }, "required": ["id"], "additionalProperties": false}),
            ),
            Action::Report => (
                "Report to the agent that started you. `quiet` (default) keeps the report for \
                 its listing of its agents; `next-step` also delivers it before its next step.",
                json!({"type": "object", "properties": {
                    "message": {"type": "string", "description": "What to report."},
                    "mode": {"type": "string", "enum": ["quiet", "next-step"],
                             "description": "How it reaches your parent (default quiet)."}
                }, "required": ["message"], "additionalProperties": false}),
            ),
            Action::Approvals => (
                "List the requests for approval waiting for your answer (from the agents you \
                 delegated to as their approver): id, who asked, what. Waits up to timeout_ms \
                 for one when there is none.",
                json!({"type": "object", "properties": {
                    "timeout_ms": {"type": "integer", "minimum": 0, "maximum": MAX_TIMEOUT_MS,
                                   "description": "How long to wait for one (default 0)."}
                }, "additionalProperties": false}),
            ),
            Action::Approve => (
                "Answer a request for approval waiting for you: allow it (once, or always for \
                 this session) or deny it, saying why.",
                json!({"type": "object", "properties": {
                    "id": {"type": "string", "description": "The request's id (default: the oldest waiting)."},
                    "allow": {"type": "boolean", "description": "Whether it may go ahead."},
                    "always": {"type": "boolean", "description": "Allow the same for the rest of the session (default false)."},
                    "reason": {"type": "string", "description": "Why, when denying."}
                }, "required": ["allow"], "additionalProperties": false}),
            ),
        }
    }
}

/// The schema of a child agent's `id` argument.
fn agent_id() -> Value {
    json!({"type": "string", "description": "The child agent's id (as `list_agents` shows it)."})
}

fn text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) | ContentBlock::Json(t) => t.as_str(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn reason(r: &StopReason) -> &str {
    match r {
        StopReason::Completed => "completed",
        StopReason::Aborted => "aborted",
        StopReason::Error => "error",
        StopReason::MaxTokens => "max-tokens",
        StopReason::Refusal => "refusal",
        StopReason::Budget => "budget",
        StopReason::Other(name) => name,
    }
}

fn error(e: &SubagentError) -> String {
    match e {
        SubagentError::NoRun(id) => format!("NO_RUN: you have no background run `{id}`"),
        SubagentError::UnsupportedFeature(f) => {
            format!("UNSUPPORTED_FEATURE: the run's provider does not support `{f}`")
        }
        SubagentError::InvalidState(why) => format!("INVALID_STATE: {why}"),
        other => format!("{other:?}"),
    }
}

/// A child agent's failure in words; `NO_RUN` names an id that is not one of the caller's
/// children.
fn agent_error(e: &SubagentError) -> String {
    match e {
        SubagentError::NoRun(id) => format!("NO_RUN: you have no child agent `{id}`"),
        other => error(other),
    }
}

fn status_name(s: AgentStatus) -> &'static str {
    match s {
        AgentStatus::Running => "running",
        AgentStatus::Idle => "idle",
        AgentStatus::Ready => "ready",
        AgentStatus::Failed => "failed",
        AgentStatus::Interrupted => "interrupted",
    }
}

/// One child agent on one line: its free text (label, report) with line breaks folded.
fn agent_line(a: &AgentInfo) -> String {
    let one_line = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let stop = a.stop_reason.as_ref().map_or("-", reason);
    let report = a.report.as_deref().map_or("-".to_string(), one_line);
    format!(
        "{} | {} | {} | {} | stop: {stop} | report: {report} | queued: {}",
        a.id,
        a.provider,
        one_line(&a.label),
        status_name(a.status),
        a.queued
    )
}

/// An optional string argument that must be one of `allowed`.
fn choice<'a>(
    args: &'a Map<String, Value>,
    key: &str,
    allowed: &[&str],
) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(Some(s)),
        Some(_) => Err(format!(
            "argument `{key}` must be one of {}",
            allowed
                .iter()
                .map(|a| format!("\"{a}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn info_line(i: &RunInfo) -> String {
    let state = match (&i.state, &i.stop_reason) {
        (RunState::Settled, Some(r)) => format!("finished: {}", reason(r)),
        (RunState::Settled, None) => "finished".to_string(),
        (RunState::Running, _) => "running".to_string(),
    };
    format!("{} | {} | {} | {state}", i.id, i.provider, i.label)
}

fn outcome(id: &str, r: &SubagentResult) -> String {
    let mut out = format!("run `{id}` finished: {}", reason(&r.stop_reason));
    if let Some(d) = &r.diagnostic {
        out.push_str(&format!("\ncause: {d}"));
    }
    let words = text(&r.output);
    if !words.is_empty() {
        out.push_str(&format!("\n{words}"));
    }
    out
}

/// The call's arguments, as an object.
fn string_arg(args: &Map<String, Value>, key: &str) -> Result<String, String> {
    match args.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(_) => Err(format!("argument `{key}` must be a non-empty string")),
        None => Err(format!("missing required argument `{key}`")),
    }
}

fn run_of(args: &Map<String, Value>) -> Result<(String, Run), String> {
    let id = string_arg(args, "id")?;
    let run = subagents::get(&id).map_err(|e| error(&e))?;
    Ok((id, run))
}

fn act(action: Action, args: &Map<String, Value>) -> Result<String, String> {
    match action {
        Action::List => {
            let runs = subagents::list();
            if runs.is_empty() {
                return Ok("no background runs".into());
            }
            Ok(runs.iter().map(info_line).collect::<Vec<_>>().join("\n"))
        }
        Action::Output => {
            let (id, run) = run_of(args)?;
            let timeout = match args.get("timeout_ms") {
                None => 0,
                Some(v) => v.as_u64().filter(|t| *t <= MAX_TIMEOUT_MS).ok_or(format!(
                    "argument `timeout_ms` must be an integer from 0 to {MAX_TIMEOUT_MS}"
                ))?,
            };
            match run.wait_result(timeout) {
                Some(Ok(r)) => Ok(outcome(&id, &r)),
                Some(Err(e)) => Err(error(&e)),
                None => {
                    let so_far = text(&run.progress());
                    Ok(if so_far.is_empty() {
                        format!("run `{id}` is still running; no progress reported yet")
                    } else {
                        format!("run `{id}` is still running; progress so far:\n{so_far}")
                    })
                }
            }
        }
        Action::Stop => {
            let (id, run) = run_of(args)?;
            let why = args
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            run.cancel(why.as_deref());
            Ok(format!("run `{id}` stopped"))
        }
        Action::Resume => {
            let id = string_arg(args, "id")?;
            let prompt = string_arg(args, "prompt")?;
            // The new run is this call's: the host disposes it when the call ends.
            let run =
                subagents::resume(&id, &[ContentBlock::Text(prompt)]).map_err(|e| error(&e))?;
            let result = run.result().map_err(|e| error(&e))?;
            Ok(outcome(&run.id(), &result))
        }
        Action::Send => {
            let (id, run) = run_of(args)?;
            let message = string_arg(args, "message")?;
            run.send_message(&[ContentBlock::Text(message)])
                .map_err(|e| error(&e))?;
            Ok(format!("message sent to run `{id}`"))
        }
        Action::ListAgents => {
            let scope = match choice(args, "scope", &["children", "descendants"])? {
                Some("descendants") => AgentScope::Descendants,
                _ => AgentScope::Children,
            };
            let status = choice(args, "status", &STATUSES)?.map(|s| match s {
                "running" => AgentStatus::Running,
                "idle" => AgentStatus::Idle,
                "ready" => AgentStatus::Ready,
                "failed" => AgentStatus::Failed,
                _ => AgentStatus::Interrupted,
            });
            let agents = subagents::list_agents(scope, status).map_err(|e| agent_error(&e))?;
            if agents.is_empty() {
                return Ok("no agents".into());
            }
            Ok(agents.iter().map(agent_line).collect::<Vec<_>>().join("\n"))
        }
        Action::SendMessage => {
            let id = string_arg(args, "id")?;
            let message = string_arg(args, "message")?;
            let delivery = subagents::send_to_agent(&id, &[ContentBlock::Text(message)])
                .map_err(|e| agent_error(&e))?;
            Ok(match delivery {
                Delivery::Queued => format!(
                    "queued: agent `{id}` is running; it reads the message when its current \
                     activation ends"
                ),
                Delivery::Woken => {
                    format!("woken: agent `{id}` was waiting; it is now reading the message")
                }
                Delivery::Resumed => format!(
                    "resumed: no process held agent `{id}`; it was resumed from its session to \
                     read the message"
                ),
            })
        }
        Action::InterruptAgent => {
            let id = string_arg(args, "id")?;
            let agent = subagents::interrupt_agent(&id).map_err(|e| agent_error(&e))?;
            Ok(format!(
                "agent `{id}` interrupted; it keeps its session and waiting messages\n{}",
                agent_line(&agent)
            ))
        }
        Action::Approvals => {
            let timeout = match args.get("timeout_ms") {
                None => 0,
                Some(v) => v.as_u64().filter(|t| *t <= MAX_TIMEOUT_MS).ok_or(format!(
                    "argument `timeout_ms` must be an integer from 0 to {MAX_TIMEOUT_MS}"
                ))?,
            };
            let pending = subagents::pending_approvals(timeout);
            if pending.is_empty() {
                return Ok("no requests for approval wait for you".into());
            }
            Ok(pending
                .iter()
                .map(|r| format!("{}  {}: {}", r.id, r.path.join(" > "), r.what))
                .collect::<Vec<_>>()
                .join("\n"))
        }
        Action::Approve => {
            let allow = match args.get("allow") {
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("argument `allow` must be true or false".into()),
                None => return Err("missing required argument `allow`".into()),
            };
            let always = match args.get("always") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("argument `always` must be true or false".into()),
            };
            let id = match args.get("id") {
                None => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err("argument `id` must be a string".into()),
            };
            let reason = args
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            let answered =
                subagents::answer_approval(id.as_deref(), allow, always, reason.as_deref())
                    .map_err(|e| error(&e))?;
            Ok(format!(
                "request `{answered}` {}",
                match (allow, always) {
                    (true, true) => "allowed, and the same for the rest of the session",
                    (true, false) => "allowed",
                    (false, _) => "denied",
                }
            ))
        }
        Action::Report => {
            let message = string_arg(args, "message")?;
            let mode = match choice(args, "mode", &["quiet", "next-step"])? {
                Some("next-step") => ReportMode::NextStep,
                _ => ReportMode::Quiet,
            };
            subagents::report(mode, &[ContentBlock::Text(message)]).map_err(|e| error(&e))?;
            Ok(match mode {
                ReportMode::Quiet => "reported: your parent sees it when it lists its agents",
                ReportMode::NextStep => "reported: your parent reads it before its next step",
            }
            .into())
        }
    }
}

struct SubagentControl;

impl Tool for SubagentControl {
    type Config = Config;
    /// Read by hand, to answer each missing or mistyped argument with its own message.
    type Args = Map<String, Value>;

    fn bind(config: &Config) -> Result<ToolBinding, String> {
        Ok(ToolBinding {
            tool_name: config.tool_name()?,
            provider: None,
        })
    }

    fn describe(
        config: &Config,
        _provider: Option<ProviderDescriptor>,
    ) -> Result<ToolDescriptor, String> {
        let (description, schema) = config.action.describe();
        Ok(ToolDescriptor {
            name: config.tool_name()?,
            description: description.into(),
            parameters_schema: schema.to_string(),
        })
    }

    fn execute(config: Config, _caller: ParentRef, args: Map<String, Value>) -> ToolResult {
        match act(config.action, &args) {
            Ok(text) => tool::ok(text),
            Err(message) => tool::error(message),
        }
    }
}

seam_plugin::export_tool!(SubagentControl);
