//! Subagent control: the model's side of background runs. One component, loaded once per
//! action, each entry one tool:
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
//! Only the calling agent's own runs are reachable: the host answers `no-run` for any other id.

use seam_plugin::subagents::{self, Run};
use seam_plugin::tool::{self, ToolBinding, ToolDescriptor, ToolResult};
use seam_plugin::types::{
    ContentBlock, ParentRef, ProviderDescriptor, RunInfo, RunState, StopReason, SubagentError,
    SubagentResult,
};
use seam_plugin::Tool;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Longest wait `subagent_output` accepts.
const MAX_TIMEOUT_MS: u64 = 600_000;

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Action {
    List,
    Output,
    Stop,
    Send,
    Resume,
}

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
            None => Ok(format!("subagent_{}", self.action.name())),
        }
    }
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::List => "list",
            Action::Output => "output",
            Action::Stop => "stop",
            Action::Send => "send",
            Action::Resume => "resume",
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
        }
    }
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
