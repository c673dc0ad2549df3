//! `seam ui CONFIG [--http ADDR]`: the console, a local web page where a person watches,
//! steers and approves trees of runs (the server is `seam_host::console`; this loads the config
//! and drives it). Sessions are the config's session store's: the page lists them all, runs
//! new turns here, and follows what other processes on the same store do. Ctrl-C or SIGTERM
//! cancels the turns running here, disposes the agents and exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use seam_host::console::{ConsoleServer, ReplayFailed, Replayer};
use seam_host::session_store::SessionStore;
use tokio_util::sync::CancellationToken;

use super::{
    config_store, load_for_use, print_events, read_config, with_host_store, working_directory,
    EXIT_OK,
};

/// Where the console listens when `--http` is not given.
const DEFAULT_ADDR: &str = "127.0.0.1:8780";

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Open http://ADDR/ in a browser. The JSON API behind the page is under \
    http://ADDR/api (GET /api lists it). A non-loopback ADDR needs --token-env; a browser then \
    opens http://ADDR/?token=TOKEN once (a cookie carries the token from there), a script sends \
    `Authorization: Bearer TOKEN`."
)]
pub(crate) struct Args {
    /// The config file (TOML): its plugins, `[agent]`, `[models]`, `[sessions]` and
    /// `[approvals]`.
    config: PathBuf,
    /// Serve the page on this address (default 127.0.0.1:8780; port 0 picks a free one,
    /// printed on stderr).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Print lifecycle events as JSON lines on stderr while serving.
    #[arg(long)]
    events: bool,
    #[command(flatten)]
    guards: crate::http_guard::GuardArgs,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArg,
}

/// Replays for the page, with the config the console serves (its sessions ran with it).
struct WithConfig(PathBuf);

impl Replayer for WithConfig {
    fn replay(
        &self,
        store: Arc<dyn SessionStore>,
        session: String,
        until: Option<u64>,
    ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, ReplayFailed>> {
        let config = self.0.clone();
        Box::pin(async move {
            super::replay::replay_session(store, &session, &config, until)
                .await
                .map_err(|e| ReplayFailed(super::chain(&e)))
        })
    }
}

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let cwd = working_directory()?;
    let config = read_config(&args.config)?;
    let addr = match args.http {
        Some(addr) => addr,
        None => DEFAULT_ADDR.parse().context("the default address")?,
    };
    let options = args.guards.guards(addr)?;
    let config_path = std::path::absolute(&args.config).unwrap_or_else(|_| args.config.clone());
    with_host_store(config_store(&config)?, |host| async move {
        args.metrics.start(&host, &interrupt).await?;
        load_for_use(&host, &config, &interrupt).await?;
        let _listener = args.events.then(|| print_events(&host));
        let console = host
            .console_host()
            .with_replayer(Arc::new(WithConfig(config_path)));
        let server = match ConsoleServer::bind(options, console).await {
            Ok(server) => server,
            // The default address may be taken: say how to pick another.
            Err(e) if args.http.is_none() => anyhow::bail!(
                "{e} (the default address; give another with --http, 127.0.0.1:0 picks a free \
                 port)"
            ),
            Err(e) => return Err(e.into()),
        };
        let bound = server.local_addr().context("the bound address")?;
        errln!("seam ui: serving http://{bound}/");
        server.serve(cwd, interrupt).await;
        Ok(EXIT_OK)
    })
    .await
}
