//! `seam a2a CONFIG --http ADDR`: serves the config's top-level agent as an A2A 1.0 agent
//! (the server is `seam_host::a2a::server`; this loads the config and drives it). A context is
//! a top-level agent session kept in the config's session store, a task one of its turns.
//! Ctrl-C or SIGTERM cancels the running turns, disposes the agents and exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use seam_host::a2a::server::A2aServer;
use tokio_util::sync::CancellationToken;

use super::{
    config_store, load_for_use, print_events, read_config, with_host_store, working_directory,
    EXIT_OK,
};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "The JSON-RPC endpoint is http://ADDR/ (any path takes POSTs), the agent card \
    http://ADDR/.well-known/agent-card.json. Every request must carry `A2A-Version: 1.0`. A \
    non-loopback ADDR needs --token-env; a token, once set, is required of every request as \
    `Authorization: Bearer TOKEN`."
)]
pub(crate) struct Args {
    /// The config file (TOML): its plugins, `[agent]`, `[models]`, `[sessions]` and `[a2a]`.
    config: PathBuf,
    /// Serve A2A's JSON-RPC binding over HTTP on this address (e.g. 127.0.0.1:8766; port 0
    /// picks a free one, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    http: SocketAddr,
    /// Print lifecycle events as JSON lines on stderr while serving.
    #[arg(long)]
    events: bool,
    #[command(flatten)]
    guards: crate::http_guard::GuardArgs,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArg,
}

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let cwd = working_directory()?;
    let config = read_config(&args.config)?;
    let options = args.guards.guards(args.http)?;
    with_host_store(config_store(&config)?, |host| async move {
        args.metrics.start(&host, &interrupt).await?;
        load_for_use(&host, &config, &interrupt).await?;
        // Printed until the plugins are unloaded: the ends of the runs cut short show too.
        let _listener = args.events.then(|| print_events(&host));
        let settings = config.a2a.clone().unwrap_or_default();
        let server = A2aServer::bind(options, host.a2a_host(), settings).await?;
        let bound = server.local_addr().context("the bound address")?;
        errln!(
            "seam a2a: serving http://{bound}/ (agent card at http://{bound}{})",
            seam_host::a2a::wire::CARD_PATH
        );
        server.serve(cwd, interrupt).await;
        Ok(EXIT_OK)
    })
    .await
}
