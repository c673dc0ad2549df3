//! `[cluster]`: which NATS server, which cluster on it, which credentials; and the connection.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::ClusterError;
use crate::names;

/// Default cluster name.
pub const DEFAULT_CLUSTER: &str = "default";
/// Default heartbeat of a worker, in milliseconds.
pub const DEFAULT_HEARTBEAT_MS: u64 = 1_000;
/// Default deadline of a start request, in milliseconds.
pub const DEFAULT_START_TIMEOUT_MS: u64 = 5_000;

/// `[cluster]` of a config (and the flags of `seam worker`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// `nats`: the server's URL (`nats://HOST:PORT`, `tls://...`).
    pub nats: String,
    /// `name`: the cluster (subjects `seam.NAME.*`); default `default`.
    #[serde(default = "default_cluster")]
    pub name: String,
    /// `token_env`: the environment variable holding a token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// `nkey_env`: the environment variable holding an nkey seed.
    #[serde(default)]
    pub nkey_env: Option<String>,
    /// `creds`: a `.creds` file (JWT and nkey seed).
    #[serde(default)]
    pub creds: Option<PathBuf>,
    /// `tls_ca`: a PEM file of root certificates to trust (and TLS required).
    #[serde(default)]
    pub tls_ca: Option<PathBuf>,
    /// `tls_required`: refuse a connection without TLS.
    #[serde(default)]
    pub tls_required: bool,
    /// `heartbeat_ms`: how often a worker puts its adverts.
    #[serde(default = "default_heartbeat")]
    pub heartbeat_ms: u64,
    /// `start_timeout_ms`: how long a start waits for a worker's answer.
    #[serde(default = "default_start_timeout")]
    pub start_timeout_ms: u64,
}

fn default_cluster() -> String {
    DEFAULT_CLUSTER.into()
}

fn default_heartbeat() -> u64 {
    DEFAULT_HEARTBEAT_MS
}

fn default_start_timeout() -> u64 {
    DEFAULT_START_TIMEOUT_MS
}

impl ClusterConfig {
    /// A config for `nats` with every default.
    pub fn new(nats: impl Into<String>) -> Self {
        Self {
            nats: nats.into(),
            name: default_cluster(),
            token_env: None,
            nkey_env: None,
            creds: None,
            tls_ca: None,
            tls_required: false,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            start_timeout_ms: DEFAULT_START_TIMEOUT_MS,
        }
    }

    /// Checks what can be checked without a server: the name, the intervals.
    pub fn validate(&self) -> Result<(), ClusterError> {
        names::check("cluster name", &self.name)?;
        if self.heartbeat_ms == 0 {
            return Err(ClusterError::Config {
                key: "heartbeat_ms",
                message: "must be at least 1 (milliseconds)".into(),
            });
        }
        if self.start_timeout_ms == 0 {
            return Err(ClusterError::Config {
                key: "start_timeout_ms",
                message: "must be at least 1 (milliseconds)".into(),
            });
        }
        Ok(())
    }

    /// The heartbeat.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms)
    }

    /// Connects, with the configured credentials. The client reconnects by itself after the
    /// server goes away, for ever, re-subscribing what was subscribed.
    pub async fn connect(&self, client_name: &str) -> Result<async_nats::Client, ClusterError> {
        Ok(self.connect_watching(client_name).await?.0)
    }

    /// [`ClusterConfig::connect`], with a count of the times the connection came back after
    /// being lost (a worker advertises again at once then).
    pub async fn connect_watching(
        &self,
        client_name: &str,
    ) -> Result<(async_nats::Client, tokio::sync::watch::Receiver<u64>), ClusterError> {
        self.validate()?;
        let (back, comebacks) = tokio::sync::watch::channel(0u64);
        let lost = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let env = |key: &'static str, var: &str| {
            std::env::var(var).map_err(|_| ClusterError::Config {
                key,
                message: format!("environment variable `{var}` is not set"),
            })
        };
        let mut options = async_nats::ConnectOptions::new()
            .name(client_name)
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(5))
            .ping_interval(Duration::from_secs(10))
            .event_callback(move |event| {
                let (back, lost) = (back.clone(), lost.clone());
                async move {
                    use std::sync::atomic::Ordering;
                    match event {
                        async_nats::Event::Disconnected => lost.store(true, Ordering::SeqCst),
                        async_nats::Event::Connected if lost.swap(false, Ordering::SeqCst) => {
                            back.send_modify(|n| *n += 1)
                        }
                        _ => {}
                    }
                }
            });
        if let Some(var) = &self.token_env {
            options = options.token(env("token_env", var)?);
        }
        if let Some(var) = &self.nkey_env {
            options = options.nkey(env("nkey_env", var)?);
        }
        if let Some(path) = &self.creds {
            options = options
                .credentials_file(path)
                .await
                .map_err(|e| ClusterError::Config {
                    key: "creds",
                    message: format!("cannot read {}: {e}", path.display()),
                })?;
        }
        if let Some(ca) = &self.tls_ca {
            if !ca.is_file() {
                return Err(ClusterError::Config {
                    key: "tls_ca",
                    message: format!("{} is not a file", ca.display()),
                });
            }
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        } else if self.tls_required {
            options = options.require_tls(true);
        }
        let client =
            options
                .connect(self.nats.as_str())
                .await
                .map_err(|e| ClusterError::Connect {
                    url: self.nats.clone(),
                    message: e.to_string(),
                })?;
        Ok((client, comebacks))
    }
}

/// Checks a message against the server's `max_payload` before it is sent.
pub fn fits(
    client: &async_nats::Client,
    what: impl FnOnce() -> String,
    body: &[u8],
) -> Result<(), ClusterError> {
    let max = client.server_info().max_payload;
    if max > 0 && body.len() > max {
        return Err(ClusterError::TooLarge {
            what: what(),
            size: body.len(),
            max,
        });
    }
    Ok(())
}
