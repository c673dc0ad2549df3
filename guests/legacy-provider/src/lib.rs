//! A provider built against the frozen `seam:plugin@0.1.0` WIT (`wit/v0.1.0`): the proof that a
//! component built for the old contract keeps loading and serving on this host.
//!
//! Config: `name` (required), `delayMs` (optional: waits that long, cancellably, before
//! answering). It answers `legacy: <prompt>`; a run cancelled while waiting answers `aborted`.

wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "provider-plugin" });

use exports::seam::plugin::provider::Guest;
use seam::plugin::host::log;
use seam::plugin::run_context;
use seam::plugin::types::{
    Capabilities, ContentBlock, LogLevel, ProviderDescriptor, RuntimeFeatures, StartRequest,
    StopReason, SubagentResult,
};

struct Settings {
    name: String,
    delay_ms: u64,
}

fn settings(config: &str) -> Result<Settings, String> {
    let value: serde_json::Value =
        serde_json::from_str(config).map_err(|e| format!("config is not JSON: {e}"))?;
    let name = value
        .get("name")
        .and_then(|v| v.as_str())
        .ok_or("config key `name` (a string) is required")?
        .to_string();
    let delay_ms = value.get("delayMs").and_then(|v| v.as_u64()).unwrap_or(0);
    Ok(Settings { name, delay_ms })
}

fn text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) | ContentBlock::Json(t) => t.as_str(),
        })
        .collect()
}

struct LegacyProvider;

impl Guest for LegacyProvider {
    fn describe(config: String) -> Result<ProviderDescriptor, String> {
        let settings = settings(&config)?;
        Ok(ProviderDescriptor {
            name: settings.name,
            capabilities: Capabilities {
                output_schema: false,
                depth_limit: false,
                tool_filter: false,
                persona: false,
            },
            features: RuntimeFeatures {
                steering: false,
                resume: false,
            },
            inherits_parent_context: false,
        })
    }

    fn run(
        config: String,
        run_id: String,
        request: StartRequest,
    ) -> Result<SubagentResult, String> {
        let settings = settings(&config)?;
        run_context::ready();
        log(LogLevel::Info, &format!("legacy run {run_id} started"));
        if settings.delay_ms > 0 && !run_context::sleep(settings.delay_ms) {
            return Ok(SubagentResult {
                output: vec![ContentBlock::Text("cancelled".into())],
                structured: None,
                stop_reason: StopReason::Aborted,
            });
        }
        Ok(SubagentResult {
            output: vec![ContentBlock::Text(format!(
                "legacy: {}",
                text(&request.prompt)
            ))],
            structured: None,
            stop_reason: StopReason::Completed,
        })
    }
}

export!(LegacyProvider);
