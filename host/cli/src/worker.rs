//! `seam worker CONFIG --nats URL [--cluster NAME]`: serve the config's providers to a cluster
//! until SIGTERM or Ctrl-C, then drain.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use seam_host::cluster::{ClusterConfig, Served, Worker, WorkerOptions, DEFAULT_KEEP_FINISHED};
use seam_host::sandbox::OnConcurrency;
use seam_host::{PluginKind, PluginState, WitVersion};
use tokio_util::sync::CancellationToken;

use super::{load_plugins, read_config, with_host, EXIT_OK};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "A worker runs only what its own config loads: a start names a provider \
    and carries a request, nothing that loads code. Each provider listens on the queue group \
    `seam.CLUSTER.start.PROVIDER`, and its advert (descriptor, capacity, contract version) is \
    put in the key-value bucket `seam-CLUSTER-providers` at every heartbeat. A run whose \
    front-end stops renewing its lease (the front-end died, or either side is cut off) is \
    cancelled. On SIGTERM or Ctrl-C the worker stops taking runs, lets live ones finish, \
    cancels the rest and withdraws its adverts, all within the drain grace, whether or not \
    the NATS server answers."
)]
pub(crate) struct Args {
    /// The config file (TOML); its `[cluster]` table, if any, gives the defaults below.
    config: PathBuf,
    /// The NATS server (`nats://HOST:PORT`).
    #[arg(long, value_name = "URL")]
    nats: Option<String>,
    /// The cluster's name (subjects `seam.NAME.*`; default `[cluster] name`, else `default`).
    #[arg(long, value_name = "NAME")]
    cluster: Option<String>,
    /// This worker's id in the cluster (default: the host name and the process id).
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// How often the worker puts its adverts, in milliseconds (default `[cluster]
    /// heartbeat_ms`, else 1000); three missed and front-ends count it gone.
    #[arg(long, value_name = "MS")]
    heartbeat_ms: Option<u64>,
    /// How long the drain may take in all, in milliseconds: live runs may finish until a
    /// quarter of it (at most 2 s) is left, kept for cancelling the rest and the end; no step
    /// waits for the NATS server past it.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    drain_grace_ms: u64,
    /// How long a finished, resumable run is kept for its front-end, in milliseconds.
    #[arg(long, value_name = "MS")]
    keep_finished_ms: Option<u64>,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArg,
}

pub(crate) async fn run(args: Args, interrupt: CancellationToken) -> Result<u8> {
    let config = read_config(&args.config)?;
    let mut cluster = match (&config.cluster, &args.nats) {
        (_, Some(url)) => {
            let mut c = config
                .cluster
                .clone()
                .unwrap_or_else(|| ClusterConfig::new(url.clone()));
            c.nats = url.clone();
            c
        }
        (Some(c), None) => c.clone(),
        (None, None) => anyhow::bail!(
            "{}: no NATS server: give `--nats URL` or a `[cluster] nats` key",
            args.config.display()
        ),
    };
    if let Some(name) = &args.cluster {
        cluster.name = name.clone();
    }
    if let Some(ms) = args.heartbeat_ms {
        cluster.heartbeat_ms = ms;
    }
    cluster.validate().context("bad cluster settings")?;
    let id = args.id.clone().unwrap_or_else(default_id);
    with_host(|host| async move {
        args.metrics.start(&host, &interrupt).await?;
        load_plugins(&host, &config, &interrupt).await?;
        let mut providers = Vec::new();
        for plugin in host.plugins().await {
            if plugin.kind != Some(PluginKind::Provider) || plugin.state != PluginState::Active {
                continue;
            }
            let (Some(name), Some(limits)) = (plugin.name, plugin.limits) else {
                continue;
            };
            providers.push(Served {
                name,
                capacity: u32::try_from(limits.max_concurrent_runs).unwrap_or(u32::MAX),
                waits: limits.on_concurrency == OnConcurrency::Wait,
            });
        }
        if providers.is_empty() {
            anyhow::bail!(
                "{}: no provider loaded: a worker has nothing to serve",
                args.config.display()
            );
        }
        let names: Vec<String> = providers.iter().map(|p| p.name.clone()).collect();
        let worker = Worker::serve(
            &cluster,
            host.subagents().clone(),
            host.events().clone(),
            WorkerOptions {
                id,
                providers,
                contract: format!("seam:plugin@{}", WitVersion::LATEST),
                keep_finished: args
                    .keep_finished_ms
                    .map_or(DEFAULT_KEEP_FINISHED, Duration::from_millis),
            },
        )
        .await
        .with_context(|| format!("cannot serve cluster `{}`", cluster.name))?;
        errln!(
            "worker `{}` serving {} on cluster `{}` at {}",
            worker.id(),
            names.join(", "),
            cluster.name,
            cluster.nats
        );
        interrupt.cancelled().await;
        errln!("worker `{}` draining", worker.id());
        worker
            .drain(Duration::from_millis(args.drain_grace_ms))
            .await;
        Ok(EXIT_OK)
    })
    .await
}

/// The host name (its letters, digits and dashes) and the process id.
fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let host = if host.is_empty() {
        "worker".into()
    } else {
        host
    };
    format!("{host}-{}", std::process::id())
}
