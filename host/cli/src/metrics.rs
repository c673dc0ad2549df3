//! `--metrics ADDR` of the long-running commands (`seam dev`, `seam acp`, `seam mcp`,
//! `seam worker`): the host's metrics as Prometheus text on `GET /metrics`.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use seam_host::telemetry::metrics::serve;
use seam_host::Host;
use tokio_util::sync::CancellationToken;

/// The flag.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct MetricsArg {
    /// Serve the host's metrics as Prometheus text on this address (`GET /metrics`; port 0
    /// picks a free one, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
}

impl MetricsArg {
    /// Counts `host`'s events and serves them until `stop` fires, if the flag was given. A
    /// port that cannot be bound fails the command, naming the flag and the address.
    pub(crate) async fn start(&self, host: &Host, stop: &CancellationToken) -> Result<()> {
        let Some(addr) = self.metrics else {
            return Ok(());
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--metrics {addr}: cannot listen there"))?;
        let bound = listener
            .local_addr()
            .with_context(|| format!("--metrics {addr}"))?;
        errln!("metrics on http://{bound}/metrics");
        tokio::spawn(serve(listener, host.metrics(), stop.clone()));
        Ok(())
    }
}
