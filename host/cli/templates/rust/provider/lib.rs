//! {{NAME}}: a Seam subagent provider.

use seam_plugin::types::{ProviderDescriptor, SubagentResult};
use seam_plugin::{Provider, Run};
use serde::Deserialize;

/// The plugin's config (`config = { ... }` in seam.toml). A key this struct does not read is
/// refused at load, so a typo never passes silently.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
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

struct Plugin;

impl Provider for Plugin {
    type Config = Config;

    fn describe(config: &Config) -> Result<ProviderDescriptor, String> {
        // Declares no start-time capability: the host refuses requests that need one.
        Ok(seam_plugin::descriptor(&config.name))
    }

    fn run(config: Config, run: Run) -> Result<SubagentResult, String> {
        // The child exists: `started` resolves and `subagent/start` is emitted.
        seam_plugin::ready();
        seam_plugin::progress("working on it");
        // `sleep` returns false as soon as the run is cancelled. (To wait on I/O and the cancel
        // together, poll `seam_plugin::run_context::cancelled()` with it.)
        if config.delay_ms > 0 && !seam_plugin::sleep(config.delay_ms) {
            return Ok(seam_plugin::aborted());
        }
        let answer = config.reply.replace("{prompt}", &run.prompt_text());
        Ok(seam_plugin::answer(answer))
    }
}

seam_plugin::export_provider!(Plugin);
