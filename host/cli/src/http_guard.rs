//! The flags of the guards of an HTTP server command (`seam mcp --http`, `seam a2a`), read the
//! same way for both.

use anyhow::{Context, Result};
use seam_host::sandbox::http_guard::{self, Guards, DEFAULT_MAX_REQUEST_BYTES};

/// `--token-env`, `--allow-origin`, `--allow-host`, `--max-request-bytes`.
#[derive(Debug, clap::Args)]
pub(crate) struct GuardArgs {
    /// The environment variable holding the bearer token HTTP requests must carry.
    #[arg(long, value_name = "VAR", requires = "http")]
    pub token_env: Option<String>,
    /// A browser origin allowed besides loopback ones (e.g. https://app.example.com:443);
    /// repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub allow_origins: Vec<String>,
    /// A `Host` header value allowed besides loopback names; repeatable.
    #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
    pub allow_hosts: Vec<String>,
    /// The largest HTTP request body, in bytes (413 past it).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_REQUEST_BYTES, requires = "http")]
    pub max_request_bytes: usize,
}

impl GuardArgs {
    /// The bearer token `--token-env` names, read now.
    pub fn token(&self) -> Result<Option<String>> {
        self.token_env
            .as_ref()
            .map(|var| {
                std::env::var(var)
                    .with_context(|| format!("--token-env {var}: the variable is not set"))
            })
            .transpose()
    }

    /// The guards of a server at `addr`, checked before anything loads: an address off
    /// loopback without a token is refused.
    pub fn guards(&self, addr: std::net::SocketAddr) -> Result<Guards> {
        let mut guards = Guards::new(addr);
        guards.token = self.token()?;
        guards.allowed_origins = self.allow_origins.clone();
        guards.allowed_hosts = self.allow_hosts.clone();
        guards.max_request_bytes = self.max_request_bytes;
        http_guard::check_bind(addr, guards.token.as_deref())?;
        Ok(guards)
    }
}
