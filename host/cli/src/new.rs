//! `seam new provider|tool|observer NAME --lang rust [--dir DIR]`: a plugin project that builds
//! outside this repository with one command, with the WIT of this host, a README and an example
//! `seam.toml`.
//!
//! Only Rust is generated so far; `--lang python` and `--lang js` say so rather than writing a
//! project that does not build.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::EXIT_OK;

/// The plugin kind to generate.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Kind {
    Provider,
    Tool,
    Observer,
}

/// The language of the generated project.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Lang {
    Rust,
    Python,
    Js,
}

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to generate.
    kind: Kind,
    /// The project's name (a crate name: lowercase letters, digits, `-` and `_`).
    name: String,
    /// The language.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// Where to create the project (default: `./NAME`); it must not exist yet.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// The wit-bindgen version the generated projects pin: the one this host's guests are built
/// with.
const WIT_BINDGEN: &str = "0.63";

pub(crate) fn run(args: Args) -> Result<u8> {
    if !matches!(args.lang, Lang::Rust) {
        bail!(
            "`--lang {}` is not generated yet; `--lang rust` is. The README's \"Writing a \
             provider\" shows the contract, and `seam wit` writes the WIT any toolchain reads",
            match args.lang {
                Lang::Python => "python",
                _ => "js",
            }
        );
    }
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if args.name.is_empty()
        || !args.name.chars().all(valid)
        || !args.name.starts_with(|c: char| c.is_ascii_lowercase())
    {
        bail!(
            "`{}` is not a project name: use lowercase letters, digits, `-` and `_`, starting \
             with a letter",
            args.name
        );
    }
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists() {
        bail!("`{}` already exists; choose another --dir", dir.display());
    }
    let files = rust_project(args.kind, &args.name);
    for (path, text) in &files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create `{}`", parent.display()))?;
        }
        std::fs::write(&path, text)
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    let wit = seam_host::wit::write_package(&dir.join("wit"), None)
        .with_context(|| format!("cannot write the WIT into `{}`", dir.display()))?;
    for (path, _) in &files {
        outln!("{}", dir.join(path).display());
    }
    for path in wit {
        outln!("{}", path.display());
    }
    outln!(
        "\nbuild it: cd {} && cargo build --release --target wasm32-wasip2",
        dir.display()
    );
    outln!(
        "check it: seam test {}",
        Path::new(&dir).join(wasm_path(&args.name)).display()
    );
    Ok(EXIT_OK)
}

/// Where the built component lands, relative to the project.
fn wasm_path(name: &str) -> String {
    format!(
        "target/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    )
}

/// The project's files (the WIT is written separately).
fn rust_project(kind: Kind, name: &str) -> Vec<(&'static str, String)> {
    let cargo = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2021"

[lib]
crate-type = ["cdylib"]

[dependencies]
wit-bindgen = {{ version = "{WIT_BINDGEN}", default-features = false, features = ["macros", "realloc", "std"] }}
serde_json = "1"

# A small component: what each run instantiates.
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = true
panic = "abort"

# Builds on its own, even inside another workspace.
[workspace]
"#
    );
    let (lib, toml, what) = match kind {
        Kind::Provider => (PROVIDER_LIB, provider_toml(name), "provider"),
        Kind::Tool => (TOOL_LIB, tool_toml(name), "tool"),
        Kind::Observer => (OBSERVER_LIB, observer_toml(name), "observer"),
    };
    let readme = format!(
        "# {name}\n\nA Seam {what} plugin: a WebAssembly component for the `seam:plugin` \
         contract.\n\n```sh\ncargo build --release --target wasm32-wasip2   # needs `rustup target add wasm32-wasip2`\nseam test {wasm}{test_config}\nseam check seam.toml\n```\n\n\
         `wit/` is the contract of the host that generated this project (`seam wit --out wit` \
         writes it again). `src/lib.rs` reads its config strictly (an unknown key is an error), \
         and `seam.toml` loads it.\n",
        wasm = wasm_path(name),
        test_config = match kind {
            Kind::Tool => " --config '{\"toolName\": \"ask\", \"provider\": \"helper\"}'",
            _ => "",
        }
    );
    vec![
        ("Cargo.toml", cargo),
        ("src/lib.rs", lib.replace("{{NAME}}", name)),
        ("seam.toml", toml),
        ("README.md", readme),
    ]
}

fn provider_toml(name: &str) -> String {
    format!(
        "# `seam delegate seam.toml --provider {name} --prompt hello`\n[[plugin]]\nid = \"{name}\"\ncomponent = \"{}\"\nconfig = {{ name = \"{name}\", reply = \"Hello from {name}: {{prompt}}\" }}\n",
        wasm_path(name)
    )
}

fn tool_toml(name: &str) -> String {
    format!(
        "# The tool follows the provider named in its config: add that provider's entry here,\n# then `seam call seam.toml --tool ask --args '{{\"prompt\": \"hello\"}}'`.\n[[plugin]]\nid = \"{name}\"\ncomponent = \"{}\"\nconfig = {{ toolName = \"ask\", provider = \"helper\" }}\n",
        wasm_path(name)
    )
}

fn observer_toml(name: &str) -> String {
    format!(
        "# Logs every event (`RUST_LOG=seam_host=info` shows it).\n[[plugin]]\nid = \"{name}\"\ncomponent = \"{}\"\n",
        wasm_path(name)
    )
}

const PROVIDER_LIB: &str = r#"//! {{NAME}}: a Seam subagent provider.

// `generate_all` also generates the `wasi:io/poll` bindings the contract's pollables use.
wit_bindgen::generate!({ path: "wit", world: "provider-plugin", generate_all });

use exports::seam::plugin::provider::Guest;
use seam::plugin::run_context;
use seam::plugin::types::{
    Capabilities, ContentBlock, ProviderDescriptor, RuntimeFeatures, StartRequest, StopReason,
    SubagentResult,
};

/// The config keys this provider reads; any other key is refused.
const KEYS: &[&str] = &["name", "reply", "delayMs"];

struct Settings {
    name: String,
    reply: String,
    delay_ms: u64,
}

fn settings(config: &str) -> Result<Settings, String> {
    let value: serde_json::Value =
        serde_json::from_str(config).map_err(|e| format!("the config is not JSON: {e}"))?;
    let fields = value.as_object().ok_or("the config must be a JSON object")?;
    if let Some(key) = fields.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("config key `{key}` is unknown; known keys: {}", KEYS.join(", ")));
    }
    let text = |key: &str, default: &str| match fields.get(key) {
        None => Ok(default.to_string()),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("config key `{key}` must be a string")),
    };
    Ok(Settings {
        name: text("name", "{{NAME}}")?,
        reply: text("reply", "{prompt}")?,
        delay_ms: match fields.get("delayMs") {
            None => 0,
            Some(v) => v.as_u64().ok_or("config key `delayMs` must be a whole number")?,
        },
    })
}

fn prompt_text(prompt: &[ContentBlock]) -> String {
    prompt
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) | ContentBlock::Json(t) => t.as_str(),
        })
        .collect()
}

struct Plugin;

impl Guest for Plugin {
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
            features: RuntimeFeatures { steering: false, resume: false },
            inherits_parent_context: false,
        })
    }

    fn run(config: String, _run_id: String, request: StartRequest) -> Result<SubagentResult, String> {
        let settings = settings(&config)?;
        // The child exists: `started` resolves and `subagent/start` is emitted.
        run_context::ready();
        run_context::progress(&[ContentBlock::Text("working on it".into())]);
        // A cancellable wait: `sleep` returns false as soon as the run is cancelled. (To wait
        // on I/O and the cancel together, poll `run_context::cancelled()` with it.)
        if settings.delay_ms > 0 && !run_context::sleep(settings.delay_ms) {
            return Ok(SubagentResult {
                output: Vec::new(),
                structured: None,
                stop_reason: StopReason::Aborted,
                diagnostic: Some("cancelled while waiting".into()),
            });
        }
        let answer = settings.reply.replace("{prompt}", &prompt_text(&request.prompt));
        Ok(SubagentResult {
            output: vec![ContentBlock::Text(answer)],
            structured: None,
            stop_reason: StopReason::Completed,
            diagnostic: None,
        })
    }
}

export!(Plugin);
"#;

const TOOL_LIB: &str = r##"//! {{NAME}}: a Seam tool that delegates its `prompt` argument to the provider it follows.

wit_bindgen::generate!({ path: "wit", world: "tool-plugin", generate_all });

use exports::seam::plugin::tool::{Guest, ToolBinding, ToolDescriptor, ToolResult};
use seam::plugin::subagents;
use seam::plugin::types::{ContentBlock, ParentRef, ProviderDescriptor, StartRequest, StopReason};

/// The config keys this tool reads; any other key is refused.
const KEYS: &[&str] = &["toolName", "provider"];

fn binding(config: &str) -> Result<ToolBinding, String> {
    let value: serde_json::Value =
        serde_json::from_str(config).map_err(|e| format!("the config is not JSON: {e}"))?;
    let fields = value.as_object().ok_or("the config must be a JSON object")?;
    if let Some(key) = fields.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("config key `{key}` is unknown; known keys: {}", KEYS.join(", ")));
    }
    let text = |key: &str| match fields.get(key) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(format!("config key `{key}` (a non-empty string) is required")),
    };
    Ok(ToolBinding { tool_name: text("toolName")?, provider: Some(text("provider")?) })
}

fn failed(message: String) -> ToolResult {
    ToolResult { content: vec![ContentBlock::Text(message)], is_error: true }
}

struct Plugin;

impl Guest for Plugin {
    fn bind(config: String) -> Result<ToolBinding, String> {
        binding(&config)
    }

    fn describe(config: String, provider: Option<ProviderDescriptor>) -> Result<ToolDescriptor, String> {
        let b = binding(&config)?;
        let on = provider.map_or_else(|| "a subagent".to_string(), |p| format!("`{}`", p.name));
        Ok(ToolDescriptor {
            name: b.tool_name,
            description: format!("Ask {on} to do a task; only its final answer comes back."),
            parameters_schema: r#"{"type":"object","properties":{"prompt":{"type":"string","description":"The task, self-contained."}},"required":["prompt"],"additionalProperties":false}"#.into(),
        })
    }

    fn execute(config: String, caller: ParentRef, arguments: String) -> ToolResult {
        let provider = match binding(&config) {
            Ok(b) => b.provider.unwrap_or_default(),
            Err(e) => return failed(e),
        };
        let prompt = match serde_json::from_str::<serde_json::Value>(&arguments) {
            Ok(v) => match v.get("prompt").and_then(|p| p.as_str()) {
                Some(p) => p.to_string(),
                None => return failed("missing required argument `prompt`".into()),
            },
            Err(e) => return failed(format!("the arguments are not JSON: {e}")),
        };
        let request = StartRequest {
            prompt: vec![ContentBlock::Text(prompt)],
            parent: caller,
            agent_options: None,
            output_schema: None,
            max_depth: None,
            tool_filter: None,
            persona: None,
        };
        // The host disposes the run when this call ends, whatever happens here.
        let run = match subagents::start(&provider, &request) {
            Ok(run) => run,
            Err(e) => return failed(format!("{e:?}")),
        };
        match run.result() {
            Ok(r) if matches!(r.stop_reason, StopReason::Completed) => ToolResult {
                content: r.output,
                is_error: false,
            },
            Ok(r) => failed(r.diagnostic.unwrap_or_else(|| format!("the run ended {:?}", r.stop_reason))),
            Err(e) => failed(format!("{e:?}")),
        }
    }
}

export!(Plugin);
"##;

const OBSERVER_LIB: &str = r#"//! {{NAME}}: a Seam observer that logs the name of every lifecycle event.

wit_bindgen::generate!({ path: "wit", world: "observer-plugin", generate_all });

use exports::seam::plugin::observer::Guest;
use seam::plugin::host::log;
use seam::plugin::types::LogLevel;

struct Plugin;

impl Guest for Plugin {
    fn on_event(config: String, event: String) -> Result<(), String> {
        if config.trim() != "{}" {
            return Err("this observer takes no config".into());
        }
        let value: serde_json::Value =
            serde_json::from_str(&event).map_err(|e| format!("the event is not JSON: {e}"))?;
        let name = value.get("event").and_then(|n| n.as_str()).unwrap_or("?");
        log(LogLevel::Info, &format!("{{NAME}} saw {name}"));
        Ok(())
    }
}

export!(Plugin);
"#;
