//! {{NAME}}: a Seam subagent provider with an async `run` (seam:plugin@{{WIT_VERSION}}, WASI 0.3).
//!
//! One instance can serve many runs at once when its entry sets `share_instance` (see
//! seam.toml): each run is a call of `run` of its own, and everything a run asks of the host
//! names it by its id (`runs`). Statics are shared by every run of the instance; keep per-run
//! state in `run`.

wit_bindgen::generate!({
    path: "wit",
    world: "provider-plugin",
    generate_all,
});

use std::future::IntoFuture;

use exports::seam::plugin::provider::Guest;
use futures::future::{select, Either};
use seam::plugin::runs;
use seam::plugin::types::{
    Capabilities, ContentBlock, ProviderDescriptor, RuntimeFeatures, StartRequest, StopReason,
    SubagentResult,
};
use serde::Deserialize;
use wit_bindgen::{FutureReader, StreamReader};

/// The plugin's config (`config = { ... }` in seam.toml). A key this struct does not read is
/// refused at load, so a typo never passes silently.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Config {
    /// The provider's name in the host's registry.
    #[serde(default = "default_name")]
    name: String,
    /// The answer; `{prompt}` is replaced by the prompt's text.
    #[serde(default = "default_reply")]
    reply: String,
    /// How long to "work" before answering, in milliseconds (cancellable).
    #[serde(default)]
    delay_ms: u64,
}

fn default_name() -> String {
    "{{NAME}}".into()
}

fn default_reply() -> String {
    "{prompt}".into()
}

fn config(text: &str) -> Result<Config, String> {
    serde_json::from_str(text).map_err(|e| format!("config: {e}"))
}

struct Plugin;

impl Guest for Plugin {
    fn describe(config_json: String) -> Result<ProviderDescriptor, String> {
        let config = config(&config_json)?;
        // Declares no start-time capability: the host refuses requests that need one. It takes
        // steering messages (`messages` in `run`).
        Ok(ProviderDescriptor {
            name: config.name,
            capabilities: Capabilities {
                output_schema: false,
                depth_limit: false,
                tool_filter: false,
                persona: false,
            },
            features: RuntimeFeatures {
                steering: true,
                resume: false,
            },
            inherits_parent_context: false,
        })
    }

    async fn run(
        config_json: String,
        run_id: String,
        request: StartRequest,
        cancel: FutureReader<Option<String>>,
        mut messages: StreamReader<Vec<ContentBlock>>,
    ) -> Result<SubagentResult, String> {
        let config = config(&config_json)?;
        // The child exists: `started` resolves and `subagent/start` is emitted.
        runs::ready(&run_id);
        runs::progress(&run_id, &[ContentBlock::Text("working on it".into())]);
        let mut prompt = text(&request.prompt);
        // Work (here: wait on WASI 0.3's clock) until done, steered, or cancelled.
        let work = Box::pin(wasip3::clocks::monotonic_clock::wait_for(
            config.delay_ms.saturating_mul(1_000_000),
        ));
        let steered = Box::pin(async move { messages.next().await });
        let cancel = Box::pin(cancel.into_future());
        match select(select(work, steered), cancel).await {
            Either::Left((Either::Left(((), _)), _)) => {}
            Either::Left((Either::Right((Some(message), _)), _)) => {
                prompt = text(&message);
            }
            Either::Left((Either::Right((None, _)), _)) => {}
            Either::Right((_reason, _)) => {
                return Ok(result(StopReason::Aborted, String::new()));
            }
        }
        Ok(result(
            StopReason::Completed,
            config.reply.replace("{prompt}", &prompt),
        ))
    }
}

fn result(stop_reason: StopReason, answer: String) -> SubagentResult {
    SubagentResult {
        output: vec![ContentBlock::Text(answer)],
        structured: None,
        stop_reason,
        diagnostic: None,
    }
}

fn text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) | ContentBlock::Json(t) => t.as_str(),
        })
        .collect()
}

export!(Plugin);
