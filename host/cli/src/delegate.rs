//! `seam delegate CONFIG --provider NAME --prompt TEXT [...]`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use seam_host::{ParentRef, StartRequest};
use tokio_util::sync::CancellationToken;

use super::{print_events, with_loaded, working_directory, EXIT_ERROR, EXIT_OK, EXIT_UNSUCCESSFUL};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "The subagent's own background runs end with it. `seam delegate` has no \
    agent to read a run's output later: whatever is still running when the run ends is ended \
    (with its `subagent/end` event) as the command unloads its plugins, before it exits."
)]
pub(crate) struct Args {
    /// The config file (TOML).
    config: PathBuf,
    /// The provider to run the subagent on.
    #[arg(long, value_name = "NAME")]
    provider: String,
    /// The task for the subagent.
    #[arg(long, value_name = "TEXT")]
    prompt: String,
    /// A JSON Schema file (object-rooted) for a structured answer; needs the provider's
    /// `output-schema` capability.
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    /// Cap on delegation depth; needs the provider's `depth-limit` capability.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    max_depth: Option<i64>,
    /// A persona for this subagent; needs the provider's `persona` capability.
    #[arg(long, value_name = "TEXT")]
    persona: Option<String>,
    /// Print the run's lifecycle events as JSON lines on stderr.
    #[arg(long)]
    events: bool,
    /// Print the delegation tree on stderr when the command ends (see `seam run --tree`).
    #[arg(long)]
    tree: bool,
    /// Write the command's runs, turns and tool calls to FILE as Chrome trace-event JSON (open
    /// it in ui.perfetto.dev).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let path = args.config.clone();
    with_loaded(&path, &interrupt.clone(), |host| async move {
        // Printed until the plugins are unloaded: the end of every run shows.
        let listener = args.events.then(|| print_events(&host));
        let pictures = crate::pictures::Pictures::start(&host, args.tree, args.trace.as_deref());
        let outcome = delegate_on(&host, &args, interrupt).await;
        host.unload_all().await;
        if let Some(id) = listener {
            host.events().unsubscribe(id);
        }
        if let Some(pictures) = pictures {
            pictures.finish(&host, "cli", None, "seam delegate")?;
        }
        outcome
    })
    .await
}

/// The delegation itself, on a host that has the config loaded and keeps it (`seam dev
/// --then`).
pub(crate) async fn run_on(
    host: &seam_host::Host,
    args: &Args,
    interrupt: CancellationToken,
) -> Result<u8> {
    let listener = args.events.then(|| print_events(host));
    let outcome = delegate_on(host, args, interrupt).await;
    if let Some(id) = listener {
        host.events().unsubscribe(id);
    }
    outcome
}

async fn delegate_on(
    host: &seam_host::Host,
    args: &Args,
    interrupt: CancellationToken,
) -> Result<u8> {
    let output_schema = match &args.output_schema {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the output schema `{}`", path.display()))?;
            let schema: serde_json::Value = serde_json::from_str(&text).with_context(|| {
                format!("the output schema `{}` is not valid JSON", path.display())
            })?;
            Some(schema)
        }
    };
    let parent = ParentRef::top_level("cli", working_directory()?);
    let mut request = StartRequest::new(args.prompt.clone(), parent);
    request.output_schema = output_schema;
    request.max_depth = args.max_depth;
    request.persona = args.persona.clone();

    delegate(host, &args.provider, request, interrupt).await
}

async fn delegate(
    host: &seam_host::Host,
    provider: &str,
    request: StartRequest,
    interrupt: CancellationToken,
) -> Result<u8> {
    let run = host
        .subagents()
        .start(provider, request)
        .with_context(|| format!("cannot start a run on provider `{provider}`"))?;

    // Ctrl-C cancels the run; the host enforces it after its grace period.
    let watcher = {
        let run = run.clone();
        tokio::spawn(async move {
            interrupt.cancelled().await;
            run.cancel(Some("interrupted by Ctrl-C".into()));
        })
    };
    let started = run.started().await;
    let result = run.result().await;
    watcher.abort();
    run.dispose().await;

    if let Err(e) = started {
        // The child never existed: a start failure, not a stop reason.
        errln!("error: run `{}` did not start: {e}", run.id());
        return Ok(EXIT_ERROR);
    }
    let result = result.with_context(|| format!("run `{}` failed", run.id()))?;
    outln!("{}", result.output_text());
    if let Some(structured) = &result.structured {
        let text = serde_json::to_string_pretty(structured)
            .context("cannot print the structured answer")?;
        outln!("{text}");
    }
    if result.stop_reason.is_success() {
        Ok(EXIT_OK)
    } else {
        errln!(
            "run `{}` ended with stop reason `{}`",
            run.id(),
            result.stop_reason
        );
        Ok(EXIT_UNSUCCESSFUL)
    }
}
