//! Subagent tool: the model-facing `subagent` tool of Seam, bound by config to one provider.
//!
//! A call starts one run on the bound provider through the host's `subagents` service, waits
//! for its outcome, disposes it, and hands the model only the child's final output. The wording
//! the model sees follows the provider's descriptor: a child that does not inherit the parent's
//! conversation needs a standalone prompt, a forked child can be pointed at earlier turns.
//!
//! With `runInBackground = true` in its config the model may also pass `run_in_background:
//! true`: the run then belongs to the calling agent, the call answers with its id at once, and
//! the model follows it with the `subagent-control` tools (its agent is told when it settles).
//!
//! With `scopeArgument = true` the model may pass a `scope` object (the keys of a tool entry's
//! `config.scope`): the run's subtree is narrowed to what both it and the entry's scope allow.
//! It never widens anything: the host meets it with the entry's scope and every ancestor's.
//! Without it the parameters are exactly `{description, prompt}` (and `run_in_background`).

wit_bindgen::generate!({ path: "../../wit/v0.4.0", world: "tool-plugin", generate_all });

use exports::seam::plugin::tool::{Guest, ToolBinding, ToolDescriptor, ToolResult};
use seam::plugin::host::log;
use seam::plugin::subagents;
use seam::plugin::types::{
    AgentOptions, ContentBlock, LogLevel, ParentRef, ProviderDescriptor, StartRequest, StopReason,
    SubagentError, SubagentResult, ToolFilter,
};
use seam_plugin::config::{self, Section};
use serde_json::{json, Value};

/// Every key the config may contain.
const KEYS: &[&str] = &[
    "provider",
    "toolName",
    "agentOptions",
    "persona",
    "toolFilter",
    "maxDepth",
    "runInBackground",
    "scopeArgument",
];

/// The tool name used when the config gives none.
const DEFAULT_TOOL_NAME: &str = "subagent";

/// The keys a call's arguments may always contain (both required); `scope` and
/// `run_in_background` are accepted when the config allows them.
const ARGUMENT_KEYS: &[&str] = &["description", "prompt"];

/// The keys of a `scope` argument (the host checks their values).
const SCOPE_KEYS: &[&str] = &["dirs", "write", "http", "network", "env", "tools"];

struct SubagentTool;

export!(SubagentTool);

/// The validated plugin config.
struct Settings {
    provider: String,
    tool_name: String,
    agent_options: Option<AgentOptions>,
    persona: Option<String>,
    tool_filter: Option<ToolFilter>,
    max_depth: Option<i32>,
    run_in_background: bool,
    /// Whether the model may narrow a call's subtree with a `scope` argument.
    scope_argument: bool,
}

impl Settings {
    fn parse(text: &str) -> Result<Self, String> {
        let fields = config::parse(text)?;
        let root = Section::root(&fields, KEYS)?;
        Ok(Settings {
            provider: root.required_string("provider")?,
            tool_name: parse_tool_name(&root)?,
            agent_options: root
                .object("agentOptions", &["model", "systemPrompt"])?
                .map(|section| {
                    Ok::<_, String>(AgentOptions {
                        model: section.string("model")?,
                        system_prompt: section.string("systemPrompt")?,
                    })
                })
                .transpose()?,
            persona: root.string("persona")?,
            tool_filter: parse_tool_filter(&root)?,
            max_depth: root
                .u64("maxDepth")?
                // The request carries the cap as s32, so anything larger is unrepresentable.
                .map(|depth| {
                    i32::try_from(depth).map_err(|_| {
                        root.invalid(
                            "maxDepth",
                            "a non-negative integer no greater than 2147483647",
                        )
                    })
                })
                .transpose()?,
            run_in_background: root.bool("runInBackground")?.unwrap_or(false),
            scope_argument: root.bool("scopeArgument")?.unwrap_or(false),
        })
    }
}

/// Reads `toolName`, which must be a name every model API accepts for a function.
fn parse_tool_name(root: &Section) -> Result<String, String> {
    let Some(name) = root.string("toolName")? else {
        return Ok(DEFAULT_TOOL_NAME.to_owned());
    };
    let valid_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if (1..=64).contains(&name.len()) && name.chars().all(valid_char) {
        Ok(name)
    } else {
        Err(root.invalid(
            "toolName",
            "1 to 64 characters from `A-Z`, `a-z`, `0-9`, `_` and `-`",
        ))
    }
}

/// Reads the optional `toolFilter` object, which must name at least one of its lists.
fn parse_tool_filter(root: &Section) -> Result<Option<ToolFilter>, String> {
    let Some(section) = root.object("toolFilter", &["allow", "deny"])? else {
        return Ok(None);
    };
    let filter = ToolFilter {
        allow: section.string_list("allow")?,
        deny: section.string_list("deny")?,
    };
    if filter.allow.is_none() && filter.deny.is_none() {
        return Err(root.invalid("toolFilter", "at least one of `allow` and `deny`"));
    }
    Ok(Some(filter))
}

/// The arguments of one call.
struct Arguments {
    description: String,
    prompt: String,
    /// The scope asked for, as JSON text.
    scope: Option<String>,
    background: bool,
}

/// Parses a call's arguments: an object with exactly the non-empty strings `description` and
/// `prompt`. The messages are written for the model, which is the one that has to fix them.
fn parse_arguments(
    text: &str,
    background_allowed: bool,
    scope_allowed: bool,
) -> Result<Arguments, String> {
    let fields = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => fields,
        Ok(_) => return Err("subagent: the arguments must be a JSON object".to_owned()),
        Err(err) => return Err(format!("subagent: the arguments are not valid JSON: {err}")),
    };
    let mut accepted = ARGUMENT_KEYS.to_vec();
    if scope_allowed {
        accepted.push("scope");
    }
    if background_allowed {
        accepted.push("run_in_background");
    }
    if let Some(key) = fields.keys().find(|key| !accepted.contains(&key.as_str())) {
        return Err(format!(
            "subagent: unknown argument `{key}`; only {} are accepted",
            accepted
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let background = match fields.get("run_in_background") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => return Err("subagent: argument `run_in_background` must be a boolean".into()),
    };
    let scope = match fields.get("scope") {
        None | Some(Value::Null) => None,
        Some(Value::Object(keys)) => {
            if let Some(key) = keys.keys().find(|k| !SCOPE_KEYS.contains(&k.as_str())) {
                return Err(format!(
                    "subagent: argument `scope` has the unknown key `{key}`; its keys are {}",
                    SCOPE_KEYS
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Some(Value::Object(keys.clone()).to_string())
        }
        Some(_) => return Err("subagent: argument `scope` must be an object".into()),
    };
    let field = |key: &str| match fields.get(key) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
        Some(Value::String(_)) => Err(format!("subagent: argument `{key}` must not be empty")),
        Some(_) => Err(format!("subagent: argument `{key}` must be a string")),
        None => Err(format!("subagent: missing required argument `{key}`")),
    };
    Ok(Arguments {
        description: field("description")?,
        prompt: field("prompt")?,
        scope,
        background,
    })
}

/// The model-facing wording: `(tool description, prompt parameter description)`.
fn wording(inherits_parent_context: bool) -> (&'static str, &'static str) {
    if inherits_parent_context {
        (
            "Delegate a task to a subagent forked from this conversation. The subagent already \
             sees the completed turns of this conversation, so the prompt can refer to them \
             instead of repeating them. Only the subagent's final answer comes back to you; its \
             intermediate steps are not shown.",
            "The task for the subagent. It sees the completed turns of this conversation, so the \
             prompt can refer to them. Only its final answer comes back.",
        )
    } else {
        (
            "Delegate a task to a subagent that works on it independently. The subagent does NOT \
             see this conversation: write a standalone prompt that includes all the context it \
             needs (goal, relevant files and facts, constraints, what to report). Only the \
             subagent's final answer comes back to you; its intermediate steps are not shown.",
            "The task for the subagent. It does NOT see this conversation, so the prompt must be \
             standalone and contain all needed context. Only its final answer comes back.",
        )
    }
}

/// A readable message for a failure of the subagent service, led by its stable code so that a
/// model (or a log search) can tell the cases apart.
fn error_message(provider: &str, error: &SubagentError) -> String {
    match error {
        SubagentError::DuplicateProvider(name) => {
            format!("subagent: DUPLICATE_PROVIDER: provider `{name}` is already registered")
        }
        SubagentError::NoProvider(name) => {
            format!("subagent: NO_PROVIDER: provider `{name}` is not registered")
        }
        SubagentError::UnsupportedCapability(feature) => format!(
            "subagent: UNSUPPORTED_CAPABILITY: provider `{provider}` does not support `{feature}`"
        ),
        SubagentError::InvalidRequest(why) => format!("subagent: INVALID_REQUEST: {why}"),
        SubagentError::DepthExceeded(depth) => format!(
            "subagent: DEPTH_EXCEEDED: the child would be at depth {} but max-depth is {}",
            depth.attempted, depth.max
        ),
        SubagentError::Aborted(Some(reason)) => {
            format!("subagent: ABORTED before the child started: {reason}")
        }
        SubagentError::Aborted(None) => "subagent: ABORTED before the child started".to_owned(),
        SubagentError::StartFailed(why) => {
            format!("subagent: START_FAILED: provider `{provider}` failed to start: {why}")
        }
        SubagentError::Disposed => "subagent: DISPOSED: the run was disposed".to_owned(),
        SubagentError::Internal(why) => format!("subagent: INTERNAL: {why}"),
        SubagentError::UnsupportedFeature(feature) => format!(
            "subagent: UNSUPPORTED_FEATURE: provider `{provider}` does not support `{feature}`"
        ),
        SubagentError::InvalidState(why) => format!("subagent: INVALID_STATE: {why}"),
        SubagentError::NoRun(id) => format!("subagent: NO_RUN: no run `{id}` of yours"),
        SubagentError::BudgetExhausted(why) => format!("subagent: BUDGET_EXHAUSTED: {why}"),
    }
}

/// The WIT name of a stop reason; a provider-specific reason is shown as given.
fn stop_reason_name(reason: &StopReason) -> &str {
    match reason {
        StopReason::Completed => "completed",
        StopReason::Aborted => "aborted",
        StopReason::Error => "error",
        StopReason::MaxTokens => "max-tokens",
        StopReason::Refusal => "refusal",
        StopReason::Budget => "budget",
        StopReason::Other(name) => name,
    }
}

/// The text of a content block; a JSON block is passed on as its serialised text.
fn block_text(block: ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) | ContentBlock::Json(text) => text,
    }
}

fn error_result(message: String) -> ToolResult {
    ToolResult {
        content: vec![ContentBlock::Text(message)],
        is_error: true,
    }
}

/// Turns the child's outcome into the tool's answer. Only the child's final output is passed
/// on; the structured answer is dropped because this tool never asks for one.
fn map_result(tool_name: &str, result: SubagentResult) -> ToolResult {
    if matches!(result.stop_reason, StopReason::Completed) {
        return ToolResult {
            content: result
                .output
                .into_iter()
                .map(|block| ContentBlock::Text(block_text(block)))
                .collect(),
            is_error: false,
        };
    }
    let mut message = format!(
        "subagent `{tool_name}` ended with stop reason `{}`",
        stop_reason_name(&result.stop_reason)
    );
    let partial = result
        .output
        .into_iter()
        .map(block_text)
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(why) = result.diagnostic.filter(|d| !d.is_empty()) {
        message.push_str("\ncause: ");
        message.push_str(&why);
    }
    if !partial.is_empty() {
        message.push_str("\npartial output: ");
        message.push_str(&partial);
    }
    error_result(message)
}

/// Runs one call; an `Err` is a failure message for the model.
fn run_call(config: &str, caller: ParentRef, arguments: &str) -> Result<ToolResult, String> {
    let settings =
        Settings::parse(config).map_err(|err| format!("subagent: invalid config: {err}"))?;
    let arguments = parse_arguments(
        arguments,
        settings.run_in_background,
        settings.scope_argument,
    )?;
    log(
        LogLevel::Debug,
        &format!(
            "subagent tool `{}`: starting a run on provider `{}` for `{}`: {}",
            settings.tool_name, settings.provider, caller.id, arguments.description
        ),
    );
    let request = StartRequest {
        prompt: vec![ContentBlock::Text(arguments.prompt)],
        parent: caller,
        agent_options: settings.agent_options,
        output_schema: None,
        max_depth: settings.max_depth,
        tool_filter: settings.tool_filter,
        persona: settings.persona,
        scope: arguments.scope,
    };
    if arguments.background {
        let info =
            subagents::start_background(&settings.provider, &request, &arguments.description)
                .map_err(|err| error_message(&settings.provider, &err))?;
        return Ok(ToolResult {
            content: vec![ContentBlock::Text(format!(
                "started background run `{}` ({}). You will be told when it finishes; follow \
                 it with subagent_output, steer it with subagent_send, stop it with \
                 subagent_stop.",
                info.id, arguments.description
            ))],
            is_error: false,
        });
    }
    let run = subagents::start(&settings.provider, &request)
        .map_err(|err| error_message(&settings.provider, &err))?;
    let outcome = run.result();
    // Dispose explicitly on every path so nothing of the child outlives this call, rather than
    // relying on when the handle happens to be dropped.
    run.dispose();
    let result = outcome.map_err(|err| error_message(&settings.provider, &err))?;
    Ok(map_result(&settings.tool_name, result))
}

/// The optional `scope` argument, for the model: it can only take authority away.
fn scope_schema() -> Value {
    let list =
        |what: &str| json!({ "type": "array", "items": { "type": "string" }, "description": what });
    json!({
        "type": "object",
        "description": "Optional: narrow what the subagent (and everything it starts) may reach. \
                        It can only take away: the subagent never gets more than you have. \
                        Leave a key out to keep what you have.",
        "properties": {
            "dirs": list("Absolute host directories its granted directories must be within."),
            "write": { "type": "boolean", "description": "false: every directory read-only." },
            "http": list("HTTP origins (https://host[:port]) it may still reach."),
            "network": list("Socket addresses (ip:port) it may still connect to."),
            "env": list("Environment variable names it may still read."),
            "tools": list("Tool-name patterns (* matches anything) of the tools it may still see and call."),
        },
        "additionalProperties": false,
    })
}

impl Guest for SubagentTool {
    fn bind(config: String) -> Result<ToolBinding, String> {
        let settings = Settings::parse(&config)?;
        Ok(ToolBinding {
            tool_name: settings.tool_name,
            provider: Some(settings.provider),
        })
    }

    fn describe(
        config: String,
        provider: Option<ProviderDescriptor>,
    ) -> Result<ToolDescriptor, String> {
        let settings = Settings::parse(&config)?;
        let Some(provider) = provider else {
            return Err(format!(
                "provider `{}` is not registered",
                settings.provider
            ));
        };
        let (description, prompt_description) = wording(provider.inherits_parent_context);
        let mut schema = json!({
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A short (3-5 word) summary of the task.",
                },
                "prompt": {
                    "type": "string",
                    "description": prompt_description,
                },
            },
            "required": ["description", "prompt"],
            "additionalProperties": false,
        });
        if settings.scope_argument {
            schema["properties"]["scope"] = scope_schema();
        }
        if settings.run_in_background {
            schema["properties"]["run_in_background"] = json!({
                "type": "boolean",
                "description": "Run the subagent in the background: you get its run id at once \
                                and carry on; you are told when it finishes.",
            });
        }
        Ok(ToolDescriptor {
            name: settings.tool_name,
            description: description.to_owned(),
            parameters_schema: schema.to_string(),
        })
    }

    fn execute(config: String, caller: ParentRef, arguments: String) -> ToolResult {
        run_call(&config, caller, &arguments).unwrap_or_else(error_result)
    }
}
