//! `seam acp CONFIG`: serves the config's top-level agent over the Agent Client Protocol on
//! stdio (the server is `seam_host::acp::server`; this loads the config and drives it).

use std::path::PathBuf;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use super::{config_store, load_for_use, read_config, with_host_store, EXIT_OK};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file (TOML): its plugins, `[agent]` and `[models]`.
    config: PathBuf,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArg,
}

pub async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let config = read_config(&args.config)?;
    with_host_store(config_store(&config)?, |host| async move {
        args.metrics.start(&host, &interrupt).await?;
        load_for_use(&host, &config, &interrupt).await?;
        seam_host::acp::server::serve(&host.agent_host(), interrupt).await;
        Ok(EXIT_OK)
    })
    .await
}
