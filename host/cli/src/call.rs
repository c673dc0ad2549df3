//! `seam call CONFIG --tool NAME --args JSON [--events]`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use seam_host::ParentRef;
use tokio_util::sync::CancellationToken;

use super::{print_events, with_loaded, working_directory, EXIT_OK, EXIT_UNSUCCESSFUL};

#[derive(Debug, clap::Args)]
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
}

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let path = args.config.clone();
    with_loaded(&path, &interrupt.clone(), |host| async move {
        run_on(&host, &args, interrupt).await
    })
    .await
}

/// The call itself, on a host that has the config loaded (`seam dev --then` uses it).
pub(crate) async fn run_on(
    host: &seam_host::Host,
    args: &Args,
    interrupt: CancellationToken,
) -> Result<u8> {
    serde_json::from_str::<serde_json::Value>(&args.arguments)
        .context("`--args` is not valid JSON")?;
    let caller = ParentRef::top_level("cli", working_directory()?);
    let listener = args.events.then(|| print_events(host));
    // Ctrl-C aborts the call (and the runs it started), enforced after the grace period.
    let outcome = host
        .call_tool(&args.tool, caller, &args.arguments, interrupt.child_token())
        .await;
    if let Some(id) = listener {
        host.events().unsubscribe(id);
    }
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
