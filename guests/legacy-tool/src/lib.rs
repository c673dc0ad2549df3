//! A tool built against the frozen `seam:plugin@0.1.0` WIT (`wit/v0.1.0`): it delegates its
//! `prompt` argument to the provider it binds to and answers with the run's output, so that the
//! 0.1.0 `subagents` path is exercised on a host whose latest contract is newer.
//!
//! Config: `toolName` and `provider` (both required).

wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "tool-plugin" });

use exports::seam::plugin::tool::{Guest, ToolBinding, ToolDescriptor, ToolResult};
use seam::plugin::subagents;
use seam::plugin::types::{ContentBlock, ParentRef, ProviderDescriptor, StartRequest, StopReason};

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

fn failed(message: String) -> ToolResult {
    ToolResult {
        content: vec![ContentBlock::Text(message)],
        is_error: true,
    }
}

struct LegacyTool;

impl Guest for LegacyTool {
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
            description: format!("Delegates a prompt to `{on}` (a seam:plugin@0.1.0 tool)."),
            parameters_schema: r#"{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}"#.into(),
        })
    }

    fn execute(config: String, caller: ParentRef, arguments: String) -> ToolResult {
        let provider = match binding(&config) {
            Ok(b) => b.provider.unwrap_or_default(),
            Err(e) => return failed(e),
        };
        let prompt = serde_json::from_str::<serde_json::Value>(&arguments)
            .ok()
            .and_then(|v| v.get("prompt").and_then(|p| p.as_str()).map(str::to_string))
            .unwrap_or_default();
        let request = StartRequest {
            prompt: vec![ContentBlock::Text(prompt)],
            parent: caller,
            agent_options: None,
            output_schema: None,
            max_depth: None,
            tool_filter: None,
            persona: None,
        };
        let run = match subagents::start(&provider, &request) {
            Ok(run) => run,
            Err(e) => return failed(format!("{e:?}")),
        };
        match run.result() {
            Ok(r) => ToolResult {
                content: vec![ContentBlock::Text(text(&r.output))],
                is_error: !matches!(r.stop_reason, StopReason::Completed),
            },
            Err(e) => failed(format!("{e:?}")),
        }
    }
}

export!(LegacyTool);
