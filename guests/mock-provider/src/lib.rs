//! Mock provider: a scripted Seam subagent provider for tests and demos.
//!
//! It runs no model. Its descriptor and its answer come entirely from the plugin config: a reply
//! template, a stop reason, optional delays before and after declaring readiness, an optional
//! readiness failure, and an optional structured answer. That makes every lifecycle path of the
//! host reachable from a test without a real agent.
//!
//! The 0.2 contract's run-time paths are scripted too: `progress` (a list of texts reported
//! after readiness), `awaitMessages` (how many steering messages to wait for, on the
//! `message-waiting` and `cancelled` pollables together; the reply is then `{messages}`), and
//! `delegateTo` (a provider this run starts a run on; `{delegated}` is that run's output).
//! `announce` is logged at info level from `describe`, so that a test can tell when the
//! host has finished preparing this entry.

use seam_plugin::config::{self, Section};
use seam_plugin::host::log;
use seam_plugin::types::{
    Capabilities, ContentBlock, LogLevel, ProviderDescriptor, RuntimeFeatures, StartRequest,
    StopReason, SubagentResult,
};
use seam_plugin::{run_context, subagents, Provider, Run};
use serde_json::{Map, Value};

/// Every key the config may contain.
const KEYS: &[&str] = &[
    "name",
    "reply",
    "stopReason",
    "delayMs",
    "readyDelayMs",
    "failBeforeReady",
    "capabilities",
    "inheritsParentContext",
    "steering",
    "resume",
    "structured",
    "progress",
    "awaitMessages",
    "delegateTo",
    "announce",
];

struct MockProvider;

seam_plugin::export_provider!(MockProvider);

/// The validated plugin config.
struct Settings {
    name: String,
    reply: String,
    stop_reason: StopReason,
    delay_ms: u64,
    ready_delay_ms: u64,
    fail_before_ready: Option<String>,
    capabilities: Capabilities,
    features: RuntimeFeatures,
    inherits_parent_context: bool,
    structured: Option<Value>,
    progress: Vec<String>,
    await_messages: u64,
    delegate_to: Option<String>,
}

impl Settings {
    fn parse(fields: &Map<String, Value>) -> Result<Self, String> {
        let root = Section::root(fields, KEYS)?;
        Ok(Settings {
            name: root
                .non_empty_string("name")?
                .unwrap_or_else(|| "mock".to_owned()),
            reply: root
                .string("reply")?
                .unwrap_or_else(|| "mock reply".to_owned()),
            stop_reason: root
                .string("stopReason")?
                .map_or(StopReason::Completed, |name| parse_stop_reason(&name)),
            delay_ms: root.u64("delayMs")?.unwrap_or(0),
            ready_delay_ms: root.u64("readyDelayMs")?.unwrap_or(0),
            fail_before_ready: root.string("failBeforeReady")?,
            capabilities: parse_capabilities(&root)?,
            features: RuntimeFeatures {
                steering: root.bool("steering")?.unwrap_or(false),
                resume: root.bool("resume")?.unwrap_or(false),
            },
            inherits_parent_context: root.bool("inheritsParentContext")?.unwrap_or(false),
            structured: root.value("structured").cloned(),
            progress: root.string_list("progress")?.unwrap_or_default(),
            await_messages: root.u64("awaitMessages")?.unwrap_or(0),
            delegate_to: root.non_empty_string("delegateTo")?,
        })
    }
}

/// Reads the optional `capabilities` object; a missing object or key means "not supported".
fn parse_capabilities(root: &Section) -> Result<Capabilities, String> {
    let [output_schema, depth_limit, tool_filter, persona] = config::capability_flags(root)?;
    Ok(Capabilities {
        output_schema,
        depth_limit,
        tool_filter,
        persona,
    })
}

/// Maps a configured stop-reason name; unknown names become provider-specific reasons so tests
/// can exercise the host's handling of `other`.
fn parse_stop_reason(name: &str) -> StopReason {
    match name {
        "completed" => StopReason::Completed,
        "aborted" => StopReason::Aborted,
        "error" => StopReason::Error,
        "max-tokens" => StopReason::MaxTokens,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

/// The result of a run cancelled while the mock was waiting.
fn cancelled() -> SubagentResult {
    SubagentResult {
        output: Vec::new(),
        structured: None,
        stop_reason: StopReason::Aborted,
        diagnostic: Some("cancelled".to_owned()),
    }
}

/// Waits `ms` milliseconds, returning false if the run was cancelled meanwhile. A zero delay
/// makes no host call, so an unconfigured delay cannot turn into a cancellation point.
fn wait(ms: u64) -> bool {
    ms == 0 || run_context::sleep(ms)
}

/// The text blocks of the prompt, concatenated; JSON blocks are not part of the prompt text.
fn prompt_text(prompt: &[ContentBlock]) -> String {
    prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.as_str()),
            ContentBlock::Json(_) => None,
        })
        .collect()
}

/// Replaces each `{placeholder}` of `template` in a single left-to-right pass, so that text
/// substituted in (a prompt mentioning `{model}`, say) is never expanded again.
fn substitute(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        rest = &rest[open..];
        match values
            .iter()
            .find(|(placeholder, _)| rest.starts_with(placeholder))
        {
            Some((placeholder, value)) => {
                out.push_str(value);
                rest = &rest[placeholder.len()..];
            }
            None => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Waits for `count` steering messages, on the message and cancel pollables at once; `None` if
/// the run was cancelled first.
fn await_messages(count: u64) -> Option<Vec<String>> {
    let arrived = run_context::message_waiting();
    let cancelled = run_context::cancelled();
    let mut messages = Vec::new();
    while (messages.len() as u64) < count {
        if let Some(message) = run_context::next_message() {
            messages.push(prompt_text(&message));
            continue;
        }
        if run_context::is_cancelled() {
            return None;
        }
        seam_plugin::poll::poll(&[&arrived, &cancelled]);
    }
    Some(messages)
}

/// Starts a run on `provider` as this run's own child and waits for its output.
fn delegate(provider: &str, request: &StartRequest) -> Result<String, String> {
    let run = subagents::start(provider, request).map_err(|e| format!("{e:?}"))?;
    let result = run.result().map_err(|e| format!("{e:?}"))?;
    if !matches!(result.stop_reason, StopReason::Completed) {
        return Err(format!(
            "the run delegated to `{provider}` ended {:?}: {}",
            result.stop_reason,
            result.diagnostic.unwrap_or_default()
        ));
    }
    Ok(prompt_text(&result.output))
}

/// The configured reply with the request's values filled in.
fn render_reply(template: &str, request: &StartRequest) -> String {
    let prompt = prompt_text(&request.prompt);
    let depth = request.parent.depth.to_string();
    let persona = request.persona.as_deref().unwrap_or("");
    let model = request
        .agent_options
        .as_ref()
        .and_then(|options| options.model.as_deref())
        .unwrap_or("");
    substitute(
        template,
        &[
            ("{prompt}", &prompt),
            ("{parent}", &request.parent.id),
            ("{depth}", &depth),
            ("{persona}", persona),
            ("{model}", model),
        ],
    )
}

impl Provider for MockProvider {
    /// Read by hand with [`Section`], to check each key's type with its own message.
    type Config = Map<String, Value>;

    fn describe(config: &Map<String, Value>) -> Result<ProviderDescriptor, String> {
        let settings = Settings::parse(config)?;
        if let Some(Value::String(announce)) = config.get("announce") {
            log(LogLevel::Info, announce);
        }
        Ok(ProviderDescriptor {
            name: settings.name,
            capabilities: settings.capabilities,
            features: settings.features,
            inherits_parent_context: settings.inherits_parent_context,
        })
    }

    fn run(config: Map<String, Value>, run: Run) -> Result<SubagentResult, String> {
        let Run {
            id: run_id,
            request,
        } = run;
        let settings = Settings::parse(&config)?;
        log(
            LogLevel::Debug,
            &format!(
                "mock provider `{}`: run `{run_id}` for parent `{}` at depth {}",
                settings.name, request.parent.id, request.parent.depth
            ),
        );

        // Cancelled while "starting": the run ends without ever declaring readiness.
        if !wait(settings.ready_delay_ms) {
            return Ok(cancelled());
        }
        // Failing after the ready delay lets a test observe a start that is pending, then fails.
        if let Some(message) = settings.fail_before_ready {
            return Err(message);
        }
        run_context::ready();
        if !wait(settings.delay_ms) {
            return Ok(cancelled());
        }

        for update in &settings.progress {
            run_context::progress(&[ContentBlock::Text(update.clone())]);
        }
        let messages = match await_messages(settings.await_messages) {
            Some(m) => m.join(" | "),
            None => return Ok(cancelled()),
        };
        let delegated = match &settings.delegate_to {
            Some(provider) => delegate(provider, &request)?,
            None => String::new(),
        };
        let reply = substitute(
            &render_reply(&settings.reply, &request),
            &[("{messages}", &messages), ("{delegated}", &delegated)],
        );
        // Only a provider that claims the capability may answer a schema, so the mock stays
        // honest about what it declared.
        let structured = (request.output_schema.is_some() && settings.capabilities.output_schema)
            .then(|| {
                settings
                    .structured
                    .unwrap_or_else(|| serde_json::json!({ "reply": reply }))
                    .to_string()
            });
        Ok(SubagentResult {
            output: vec![ContentBlock::Text(reply)],
            structured,
            stop_reason: settings.stop_reason,
            diagnostic: None,
        })
    }
}
