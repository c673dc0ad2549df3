//! `seam mcp CONFIG [--http ADDR]`: serves every mounted tool of the config (Wasm tool
//! components, subagent tools, the background control tools) to an MCP client, over stdio by
//! default or streamable HTTP. The server itself is `seam_host::mcp::server` (the `server`
//! module of the seam-mcp crate: [`McpServer`], and `http` for streamable HTTP); this drives
//! it. Over stdio, stdout carries only the protocol: everything else Seam says goes to stderr.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use rmcp::ServiceExt;
use seam_host::mcp::server::guard::answered;
use seam_host::mcp::server::http::{HttpOptions, McpHttp};
use seam_host::mcp::server::McpServer;
use seam_host::{Config, Host, Reload};
use tokio_util::sync::CancellationToken;

use super::dev::Watched;
use super::{
    chain, load_for_use, print_events, read_config, with_host, working_directory, EXIT_OK,
};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Over HTTP the endpoint is http://ADDR/mcp (any path is served). A \
    non-loopback ADDR needs --token-env; a token, once set, is required of every request as \
    `Authorization: Bearer TOKEN`."
)]
pub(crate) struct Args {
    /// The config file (TOML).
    config: PathBuf,
    /// Print lifecycle events as JSON lines on stderr while serving.
    #[arg(long)]
    events: bool,
    /// Reload the config (and rebuilt components) when they change, as `seam dev` does; the
    /// client is sent `notifications/tools/list_changed` when the tools change.
    #[arg(long)]
    watch: bool,
    /// Serve streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:8765; port 0
    /// picks a free one, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// The most MCP sessions open at once over HTTP.
    #[arg(long, value_name = "N", default_value_t = 64, requires = "http")]
    max_sessions: usize,
    #[command(flatten)]
    guards: crate::http_guard::GuardArgs,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArg,
}

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let cwd = working_directory()?;
    let path = std::path::absolute(&args.config)
        .with_context(|| format!("cannot resolve `{}`", args.config.display()))?;
    let config = read_config(&path)?;
    with_host(|host| async move {
        args.metrics.start(&host, &interrupt).await?;
        load_for_use(&host, &config, &interrupt).await?;
        // Printed until the plugins are unloaded: the ends of the runs cut short show too.
        let _listener = args.events.then(|| print_events(&host));
        // Watching before serving: a change made once the client has its first answer is seen.
        let watching = if args.watch {
            Some(watch(host.clone(), path, config)?)
        } else {
            None
        };
        let served = match args.http {
            Some(addr) => serve_http(host, cwd, &args, addr, interrupt).await,
            None => serve_stdio(host, cwd, interrupt).await,
        };
        if let Some(watching) = watching {
            watching.abort();
            let _ = watching.await;
        }
        served?;
        Ok(EXIT_OK)
    })
    .await
}

/// How long the watched files must be quiet before a reload (a build writes in bursts).
const SETTLE: Duration = Duration::from_millis(200);

/// Watches `config` and its components (the watches in place when this returns), then reloads
/// it whenever they change, for ever, on a task of its own. A config that does not parse leaves
/// the last good one serving.
fn watch(host: Host, path: PathBuf, config: Config) -> Result<tokio::task::JoinHandle<()>> {
    let (tx, mut changes) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .context("cannot watch files")?;
    let mut watched = Watched::default();
    watched.follow(&mut watcher, &path, &config);
    Ok(tokio::spawn(async move {
        loop {
            watched.next_change(&mut changes, SETTLE).await;
            let config = match read_config(&path) {
                Ok(new) => new,
                Err(e) => {
                    errln!(
                        "seam mcp: {}; still serving the last good config",
                        chain(&e)
                    );
                    continue;
                }
            };
            let report = host.reconfigure_with(&config, Reload::Swap).await;
            for failure in &report.failed {
                errln!("warning: {failure}");
            }
            errln!("seam mcp: reloaded {}", path.display());
            watched.follow(&mut watcher, &path, &config);
        }
    }))
}

/// The top-level caller the stdio client's calls are made as.
const CALLER: &str = "mcp";

/// Serves one client on stdin and stdout until it closes them or the user interrupts.
async fn serve_stdio(host: Host, cwd: String, interrupt: CancellationToken) -> Result<()> {
    let server = McpServer::new(host.tool_host(), CALLER, cwd);
    let running = tokio::select! {
        // Guarded: no progress is written for a request once its cancel was read.
        running = server.serve(answered(rmcp::transport::stdio_pipes())) => running
            .context("the MCP client did not initialize")?,
        () = interrupt.cancelled() => return Ok(()),
    };
    let stop = running.cancellation_token();
    tokio::select! {
        _ = interrupt.cancelled() => stop.cancel(),
        quit = running.waiting() => { quit.context("the MCP server stopped")?; }
    }
    Ok(())
}

async fn serve_http(
    host: Host,
    cwd: String,
    args: &Args,
    addr: SocketAddr,
    interrupt: CancellationToken,
) -> Result<()> {
    let mut options = HttpOptions::new(addr);
    options.bearer_token = args.guards.token()?;
    options.allowed_origins = args.guards.allow_origins.clone();
    options.allowed_hosts = args.guards.allow_hosts.clone();
    options.max_sessions = args.max_sessions;
    options.max_request_bytes = args.guards.max_request_bytes;
    let endpoint = McpHttp::bind(options).await?;
    let bound = endpoint.local_addr().context("the bound address")?;
    errln!("seam mcp: serving on http://{bound}/mcp");
    endpoint.serve(host.tool_host(), cwd, interrupt).await;
    Ok(())
}
