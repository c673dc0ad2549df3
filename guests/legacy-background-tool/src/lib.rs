//! A tool built against the frozen `seam:plugin@0.2.0` WIT (`wit/v0.2.0`), so that the 0.2.0
//! `subagents` path is exercised on a host whose latest contract is newer. It uses what 0.2.0
//! added over 0.1.0: it starts its `prompt` as a background run on the provider it binds to
//! (`start-background`, with `label`), finds the run in `list`, takes a handle on it with `get`,
//! waits for it with `wait-result`, reads `info`, and answers one line with all of it, the
//! result's `diagnostic` included:
//!
//! `<id> | <label> | listed: <yes|no> | <state> | <stop reason> | <output> | <diagnostic or ->`
//!
//! Config: `toolName` and `provider` (both required).

wit_bindgen::generate!({ path: "../../wit/v0.2.0", world: "tool-plugin" });

use exports::seam::plugin::tool::{Guest, ToolBinding, ToolDescriptor, ToolResult};
use seam::plugin::subagents;
use seam::plugin::types::{
    ContentBlock, ParentRef, ProviderDescriptor, RunState, StartRequest, StopReason,
};

/// How long it waits for the run it started: a bound on a broken test, not a timing assumption.
const WAIT_MS: u64 = 60_000;

fn binding(config: &str) -> Result<ToolBinding, String> {
    let value: serde_json::Value =
        serde_json::from_str(config).map_err(|e| format!("config is not JSON: {e}"))?;
    let key = |k: &str| {
        value
            .get(k)
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or(format!("config key `{k}` (a string) is required"))
    };
    Ok(ToolBinding {
        tool_name: key("toolName")?,
        provider: Some(key("provider")?),
    })
}

fn text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) | ContentBlock::Json(t) => t.as_str(),
        })
        .collect()
}

fn reason(r: &StopReason) -> String {
    match r {
        StopReason::Completed => "completed".into(),
        StopReason::Aborted => "aborted".into(),
        StopReason::Error => "error".into(),
        StopReason::MaxTokens => "max-tokens".into(),
        StopReason::Refusal => "refusal".into(),
        StopReason::Other(name) => name.clone(),
    }
}

fn failed(message: String) -> ToolResult {
    ToolResult {
        content: vec![ContentBlock::Text(message)],
        is_error: true,
    }
}

/// The string argument `key`, empty when missing.
fn arg(arguments: &str, key: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|v| v.get(key).and_then(|p| p.as_str()).map(str::to_string))
        .unwrap_or_default()
}

fn delegate(provider: &str, caller: ParentRef, arguments: &str) -> Result<ToolResult, String> {
    let request = StartRequest {
        prompt: vec![ContentBlock::Text(arg(arguments, "prompt"))],
        parent: caller,
        agent_options: None,
        output_schema: None,
        max_depth: None,
        tool_filter: None,
        persona: None,
    };
    let label = arg(arguments, "label");
    let started =
        subagents::start_background(provider, &request, &label).map_err(|e| format!("{e:?}"))?;
    let listed = subagents::list().iter().any(|i| i.id == started.id);
    let run = subagents::get(&started.id).map_err(|e| format!("{e:?}"))?;
    let result = match run.wait_result(WAIT_MS) {
        Some(r) => r.map_err(|e| format!("{e:?}"))?,
        None => return Err(format!("run `{}` did not finish", started.id)),
    };
    let info = run.info();
    let state = match info.state {
        RunState::Running => "running",
        RunState::Settled => "settled",
    };
    let line = format!(
        "{} | {} | listed: {} | {state} | {} | {} | {}",
        info.id,
        info.label,
        if listed { "yes" } else { "no" },
        reason(&result.stop_reason),
        text(&result.output),
        result.diagnostic.as_deref().unwrap_or("-"),
    );
    Ok(ToolResult {
        content: vec![ContentBlock::Text(line)],
        is_error: !matches!(result.stop_reason, StopReason::Completed),
    })
}

struct LegacyBackgroundTool;

impl Guest for LegacyBackgroundTool {
    fn bind(config: String) -> Result<ToolBinding, String> {
        binding(&config)
    }

    fn describe(
        config: String,
        provider: Option<ProviderDescriptor>,
    ) -> Result<ToolDescriptor, String> {
        let b = binding(&config)?;
        let on = provider.map_or_else(|| "nothing".to_string(), |p| p.name);
        Ok(ToolDescriptor {
            name: b.tool_name,
            description: format!(
                "Delegates a prompt to `{on}` in the background and waits for it (a \
                 seam:plugin@0.2.0 tool)."
            ),
            parameters_schema: r#"{"type":"object","properties":{"prompt":{"type":"string"},"label":{"type":"string"}},"required":["prompt"]}"#.into(),
        })
    }

    fn execute(config: String, caller: ParentRef, arguments: String) -> ToolResult {
        let provider = match binding(&config) {
            Ok(b) => b.provider.unwrap_or_default(),
            Err(e) => return failed(e),
        };
        delegate(&provider, caller, &arguments).unwrap_or_else(failed)
    }
}

export!(LegacyBackgroundTool);
