//! {{NAME}}: a Seam tool that delegates its `prompt` argument to the provider it follows.

use seam_plugin::subagents;
use seam_plugin::tool::{self, ToolBinding, ToolDescriptor, ToolResult};
use seam_plugin::types::{ParentRef, ProviderDescriptor, StopReason};
use seam_plugin::Tool;
use serde::Deserialize;

/// The plugin's config; a key this struct does not read is refused at load.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    /// The name the model calls the tool by.
    tool_name: String,
    /// The provider the tool delegates to; the tool is mounted only while it is registered.
    provider: String,
}

/// The model's arguments; anything else is answered with an error result.
#[derive(Deserialize)]
struct Args {
    prompt: String,
}

const SCHEMA: &str = r#"{"type":"object","properties":{"prompt":{"type":"string","description":"The task, self-contained."}},"required":["prompt"],"additionalProperties":false}"#;

struct Plugin;

impl Tool for Plugin {
    type Config = Config;
    type Args = Args;

    fn bind(config: &Config) -> Result<ToolBinding, String> {
        if config.tool_name.is_empty() || config.provider.is_empty() {
            return Err("config keys `toolName` and `provider` must not be empty".into());
        }
        Ok(ToolBinding {
            tool_name: config.tool_name.clone(),
            provider: Some(config.provider.clone()),
        })
    }

    fn describe(
        config: &Config,
        provider: Option<ProviderDescriptor>,
    ) -> Result<ToolDescriptor, String> {
        let on = provider.map_or_else(|| "a subagent".to_string(), |p| format!("`{}`", p.name));
        Ok(ToolDescriptor {
            name: config.tool_name.clone(),
            description: format!("Ask {on} to do a task; only its final answer comes back."),
            parameters_schema: SCHEMA.into(),
        })
    }

    fn execute(config: Config, caller: ParentRef, args: Args) -> ToolResult {
        let request = seam_plugin::request(caller, args.prompt);
        // The host disposes the run when this call ends, whatever happens here.
        let run = match subagents::start(&config.provider, &request) {
            Ok(run) => run,
            Err(e) => return tool::error(format!("cannot start a run: {e:?}")),
        };
        match run.result() {
            Ok(r) if matches!(r.stop_reason, StopReason::Completed) => ToolResult {
                content: r.output,
                is_error: false,
            },
            Ok(r) => tool::error(
                r.diagnostic
                    .unwrap_or_else(|| format!("the run ended {:?}", r.stop_reason)),
            ),
            Err(e) => tool::error(format!("the run failed: {e:?}")),
        }
    }
}

seam_plugin::export_tool!(Plugin);
