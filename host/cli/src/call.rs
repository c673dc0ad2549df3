//! `seam call CONFIG --tool NAME --args JSON [--events]`.
//!
//! A call that starts a background run returns at once; with no agent left to read the run's
//! output, the command then ends the run as it unloads its plugins (its `subagent/end` shows
//! under `--events`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use seam_host::ParentRef;
use tokio_util::sync::CancellationToken;

use super::{print_events, with_loaded, working_directory, EXIT_OK, EXIT_UNSUCCESSFUL};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "A tool that starts a background run (`run_in_background`) answers at once; \
    `seam call` has no agent to read the run's output later, so it ends the run (stop reason \
    `aborted`, with its `subagent/end` event) as it unloads its plugins, before it exits."
)]
pub(crate) struct Args {
    /// The config file (TOML).
    config: PathBuf,
    /// The mounted tool to call.
    #[arg(long, value_name = "NAME")]
    tool: String,
    /// The call's arguments, as a JSON object.
    #[arg(long = "args", value_name = "JSON")]
    arguments: String,
    /// Print lifecycle events during the call as JSON lines on stderr.
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
        // Printed until the plugins are unloaded: the end of a background run shows too.
        let listener = args.events.then(|| print_events(&host));
        let pictures = crate::pictures::Pictures::start(&host, args.tree, args.trace.as_deref());
        let outcome = call(&host, &args, interrupt.clone()).await;
        settle_starts(&host, &interrupt).await;
        host.unload_all().await;
        if let Some(id) = listener {
            host.events().unsubscribe(id);
        }
        if let Some(pictures) = pictures {
            pictures.finish(&host, CALLER, None, "seam call")?;
        }
        outcome
    })
    .await
}

/// The call itself, on a host that has the config loaded and keeps it (`seam dev --then`).
pub(crate) async fn run_on(
    host: &seam_host::Host,
    args: &Args,
    interrupt: CancellationToken,
) -> Result<u8> {
    let listener = args.events.then(|| print_events(host));
    let outcome = call(host, args, interrupt).await;
    if let Some(id) = listener {
        host.events().unsubscribe(id);
    }
    outcome
}

/// Waits until each background run the call started has started (or failed to): the caller
/// was told it started, so its `subagent/start` comes, and then its end, as the unload ends it.
async fn settle_starts(host: &seam_host::Host, interrupt: &CancellationToken) {
    let subagents = host.subagents();
    for info in subagents.background_runs(CALLER) {
        if let Some((run, _)) = subagents.background_run(CALLER, &info.id) {
            tokio::select! {
                _ = run.started() => {}
                () = interrupt.cancelled() => return,
            }
        }
    }
}

/// The agent id the command calls as.
const CALLER: &str = "cli";

async fn call(host: &seam_host::Host, args: &Args, interrupt: CancellationToken) -> Result<u8> {
    serde_json::from_str::<serde_json::Value>(&args.arguments)
        .context("`--args` is not valid JSON")?;
    let caller = ParentRef::top_level(CALLER, working_directory()?);
    // Ctrl-C aborts the call (and the runs it started), enforced after the grace period.
    let outcome = host
        .call_tool(&args.tool, caller, &args.arguments, interrupt.child_token())
        .await;
    let result = match outcome {
        Ok(result) => result,
        Err(e) => {
            let mounted: Vec<String> = host
                .tool_descriptors()
                .into_iter()
                .map(|d| format!("`{}`", d.name))
                .collect();
            let hint = if mounted.is_empty() {
                "no tool is mounted".to_string()
            } else {
                format!("mounted: {}", mounted.join(", "))
            };
            bail!("{e} ({hint})");
        }
    };
    outln!("{}", result.text());
    if result.is_error {
        errln!("tool `{}` returned an error result", args.tool);
        Ok(EXIT_UNSUCCESSFUL)
    } else {
        Ok(EXIT_OK)
    }
}
