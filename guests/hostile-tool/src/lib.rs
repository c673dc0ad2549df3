//! Hostile tool: a Seam tool component that misuses the host's `subagents` service and its own
//! limits, for the hostile-guest suite.
//!
//! Config: `toolName` (default `hostile`), `provider` (the provider it starts runs on, and
//! follows when `follow` is true; default not following), `mode`:
//! - `ok`: answers `ok`.
//! - `leak-runs`: starts `count` runs and returns without disposing them (the handles are
//!   forgotten, so not even dropping them disposes them).
//! - `leak-and-trap`: starts `count` runs, then traps.
//! - `spin`: burns CPU forever.
//! - `huge-result`: answers a text of `bytes` bytes.
//! - `huge-describe`: describes itself to the model with a text of `bytes` bytes.
//! - `huge-request`: starts a run with a prompt of `bytes` bytes and reports what `start` said.
//! - `flood`: starts `count` runs at once, waits for each to start, and reports how many
//!   started and how many were refused, then disposes them.
//! - `churn`: `count` times, starts a run, awaits its result and disposes it; answers
//!   `completed N` (a well-behaved tool that keeps delegating).
//!
//! `announce`, in any mode, is logged at info level from `bind`, so that a test can tell when
//! the host has finished preparing this entry.

wit_bindgen::generate!({ path: "../../wit/v0.3.0", world: "tool-plugin", generate_all });

use exports::seam::plugin::tool::{Guest, ToolBinding, ToolDescriptor, ToolResult};
use seam::plugin::subagents;
use seam::plugin::types::{ContentBlock, ParentRef, ProviderDescriptor, StartRequest};
use seam_plugin::config::{self, Section};

const KEYS: &[&str] = &[
    "toolName", "provider", "follow", "mode", "count", "bytes", "announce",
];

struct HostileTool;

export!(HostileTool);

struct Settings {
    tool_name: String,
    provider: Option<String>,
    follow: bool,
    mode: String,
    count: u64,
    bytes: u64,
    announce: Option<String>,
}

impl Settings {
    fn parse(text: &str) -> Result<Self, String> {
        let fields = config::parse(text)?;
        let root = Section::root(&fields, KEYS)?;
        Ok(Settings {
            tool_name: root
                .non_empty_string("toolName")?
                .unwrap_or_else(|| "hostile".to_owned()),
            provider: root.non_empty_string("provider")?,
            follow: root.bool("follow")?.unwrap_or(false),
            mode: root.required_string("mode")?,
            count: root.u64("count")?.unwrap_or(1),
            bytes: root.u64("bytes")?.unwrap_or(1 << 20),
            announce: root.string("announce")?,
        })
    }

    fn provider(&self) -> Result<&str, String> {
        self.provider
            .as_deref()
            .ok_or_else(|| "config key `provider` is required for this mode".to_owned())
    }
}

fn answer(text: String, is_error: bool) -> ToolResult {
    ToolResult {
        content: vec![ContentBlock::Text(text)],
        is_error,
    }
}

fn request(caller: &ParentRef, prompt: String) -> StartRequest {
    StartRequest {
        prompt: vec![ContentBlock::Text(prompt)],
        parent: caller.clone(),
        agent_options: None,
        output_schema: None,
        max_depth: None,
        tool_filter: None,
        persona: None,
    }
}

fn start_many(settings: &Settings, caller: &ParentRef) -> Result<Vec<subagents::Run>, String> {
    let provider = settings.provider()?;
    (0..settings.count)
        .map(|i| {
            subagents::start(provider, &request(caller, format!("task {i}")))
                .map_err(|e| format!("start failed: {e:?}"))
        })
        .collect()
}

fn call(settings: &Settings, caller: ParentRef) -> Result<ToolResult, String> {
    Ok(match settings.mode.as_str() {
        "ok" => answer("ok".into(), false),
        "leak-runs" => {
            let runs = start_many(settings, &caller)?;
            let n = runs.len();
            // Forgotten: the guest never disposes them, not even by dropping the handles.
            std::mem::forget(runs);
            answer(format!("leaked {n} runs"), false)
        }
        "leak-and-trap" => {
            let runs = start_many(settings, &caller)?;
            std::mem::forget(runs);
            core::arch::wasm32::unreachable()
        }
        "spin" => {
            let mut state: u64 = 1;
            loop {
                state = std::hint::black_box(state.wrapping_mul(31).wrapping_add(7));
            }
        }
        "huge-result" => answer("r".repeat(settings.bytes as usize), false),
        "huge-request" => {
            let prompt = "p".repeat(settings.bytes as usize);
            match subagents::start(settings.provider()?, &request(&caller, prompt)) {
                Ok(run) => {
                    run.dispose();
                    answer("started".into(), false)
                }
                Err(e) => answer(format!("refused: {e:?}"), true),
            }
        }
        "flood" => {
            let runs = start_many(settings, &caller)?;
            let mut started = 0;
            let mut refused = Vec::new();
            for run in &runs {
                match run.started() {
                    Ok(()) => started += 1,
                    Err(e) => refused.push(format!("{e:?}")),
                }
            }
            for run in runs {
                run.dispose();
            }
            answer(
                format!(
                    "started {started}, refused {}: {}",
                    refused.len(),
                    refused.first().map(String::as_str).unwrap_or("")
                ),
                false,
            )
        }
        "churn" => {
            let provider = settings.provider()?;
            let mut completed = 0;
            for i in 0..settings.count {
                let run = subagents::start(provider, &request(&caller, format!("task {i}")))
                    .map_err(|e| format!("start {i} failed: {e:?}"))?;
                if run.result().is_ok() {
                    completed += 1;
                }
                run.dispose();
            }
            answer(format!("completed {completed}"), false)
        }
        other => return Err(format!("unknown mode `{other}`")),
    })
}

impl Guest for HostileTool {
    fn bind(config: String) -> Result<ToolBinding, String> {
        let settings = Settings::parse(&config)?;
        if let Some(announce) = &settings.announce {
            seam::plugin::host::log(seam::plugin::host::LogLevel::Info, announce);
        }
        Ok(ToolBinding {
            tool_name: settings.tool_name.clone(),
            provider: settings.provider.clone().filter(|_| settings.follow),
        })
    }

    fn describe(
        config: String,
        _provider: Option<ProviderDescriptor>,
    ) -> Result<ToolDescriptor, String> {
        let settings = Settings::parse(&config)?;
        let description = if settings.mode == "huge-describe" {
            "d".repeat(settings.bytes as usize)
        } else {
            "A tool that misbehaves on purpose.".into()
        };
        Ok(ToolDescriptor {
            name: settings.tool_name,
            description,
            parameters_schema: r#"{"type":"object"}"#.into(),
        })
    }

    fn execute(config: String, caller: ParentRef, _arguments: String) -> ToolResult {
        match Settings::parse(&config).and_then(|s| call(&s, caller)) {
            Ok(result) => result,
            Err(message) => answer(message, true),
        }
    }
}
