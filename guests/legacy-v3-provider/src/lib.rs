//! A provider built against the frozen `seam:plugin@0.3.0` WIT (`wit/v0.3.0`): the proof that a
//! component built for the contract before budgets keeps loading and serving on this host, and
//! (relabelled 0.2.0 by the tests, whose types it shares) that 0.2.0's imports still work.
//!
//! Config: `name` (required); `steering` (declare it); `progress` (texts reported once ready);
//! `awaitMessages` (steering messages to wait for before answering); `delegateTo` (a provider
//! to start a run on, with the same prompt, and wait for); `reply` (the answer, where
//! `{prompt}`, `{messages}` and `{delegated}` are the prompt, the messages received joined with
//! `, `, and the delegated run's answer or its stop reason).

wit_bindgen::generate!({ path: "../../wit/v0.3.0", world: "provider-plugin", generate_all });

use exports::seam::plugin::provider::Guest;
use seam::plugin::run_context;
use seam::plugin::subagents;
use seam::plugin::types::{
    Capabilities, ContentBlock, ProviderDescriptor, RuntimeFeatures, StartRequest, StopReason,
    SubagentResult,
};

struct Settings {
    name: String,
    steering: bool,
    progress: Vec<String>,
    await_messages: u64,
    delegate_to: Option<String>,
    reply: String,
}

fn settings(config: &str) -> Result<Settings, String> {
    let value: serde_json::Value =
        serde_json::from_str(config).map_err(|e| format!("config is not JSON: {e}"))?;
    let string = |key: &str| value.get(key).and_then(|v| v.as_str()).map(str::to_string);
    Ok(Settings {
        name: string("name").ok_or("config key `name` (a string) is required")?,
        steering: value
            .get("steering")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        progress: value
            .get("progress")
            .and_then(|v| v.as_array())
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        await_messages: value
            .get("awaitMessages")
            .and_then(|v| v.as_u64())
            .unwrap_or(0),
        delegate_to: string("delegateTo"),
        reply: string("reply").unwrap_or_else(|| "{prompt}".into()),
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

/// Runs the delegated run and says what it answered, or how it ended.
fn delegate(provider: &str, request: &StartRequest) -> String {
    let run = match subagents::start(provider, request) {
        Ok(run) => run,
        Err(e) => return format!("refused: {e:?}"),
    };
    let told = match run.result() {
        Ok(result) if matches!(result.stop_reason, StopReason::Completed) => text(&result.output),
        Ok(result) => reason(&result.stop_reason),
        Err(e) => format!("failed: {e:?}"),
    };
    run.dispose();
    told
}

struct LegacyV3Provider;

impl Guest for LegacyV3Provider {
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
                steering: settings.steering,
                resume: false,
            },
            inherits_parent_context: false,
        })
    }

    fn run(
        config: String,
        _run_id: String,
        request: StartRequest,
    ) -> Result<SubagentResult, String> {
        let settings = settings(&config)?;
        run_context::ready();
        for update in &settings.progress {
            run_context::progress(&[ContentBlock::Text(update.clone())]);
        }
        let mut messages = Vec::new();
        while (messages.len() as u64) < settings.await_messages {
            if run_context::is_cancelled() {
                break;
            }
            match run_context::next_message() {
                Some(message) => messages.push(text(&message)),
                None => {
                    let waiting = run_context::message_waiting();
                    let cancelled = run_context::cancelled();
                    wasi::io::poll::poll(&[&waiting, &cancelled]);
                }
            }
        }
        if run_context::is_cancelled() {
            return Ok(SubagentResult {
                output: Vec::new(),
                structured: None,
                stop_reason: StopReason::Aborted,
                diagnostic: run_context::cancel_reason(),
            });
        }
        let delegated = settings
            .delegate_to
            .as_deref()
            .map(|provider| delegate(provider, &request))
            .unwrap_or_default();
        let answer = settings
            .reply
            .replace("{prompt}", &text(&request.prompt))
            .replace("{messages}", &messages.join(", "))
            .replace("{delegated}", &delegated);
        Ok(SubagentResult {
            output: vec![ContentBlock::Text(answer)],
            structured: None,
            stop_reason: StopReason::Completed,
            diagnostic: None,
        })
    }
}

export!(LegacyV3Provider);
