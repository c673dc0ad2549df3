//! `kind = "a2a"` entries: a remote A2A agent as a provider.
//!
//! The entry's `url` is the agent's base. Its Agent Card is fetched and checked when the entry
//! loads ([`card`]): a card Seam cannot honour (no A2A 1.0 JSON-RPC interface, an interface
//! outside the entry's `http` grants, input that is not text, a required extension) fails the
//! load naming the entry. A run is one task ([`run`]): `SendStreamingMessage` starts it (or
//! `SendMessage` for an agent that does not stream), its status and artifact updates are the
//! run's progress and answer, its terminal state the stop reason; a cancel sends `CancelTask`, a
//! steer a follow-up message in the same task, and a dropped stream is followed again with
//! `SubscribeToTask` and `GetTask`. The task is kept in the child's session in the store
//! ([`kept`]), so a continued child, or a restarted Seam, follows or continues the same task.

mod card;
mod kept;
mod run;
mod settings;
mod transport;

use std::sync::Arc;

use futures::future::BoxFuture;
use seam_core::subagent::{Provider, RunContext, RunFailure};
use seam_core::types::{
    Capabilities, ProviderDescriptor, RuntimeFeatures, StartRequest, SubagentResult,
};
use seam_sandbox::{EntryError, Grants, Sandbox, SandboxError};

pub use card::{card_url, Checked};
use run::Inner;
pub use settings::A2aSettings;
pub use transport::{CallError, Peer};

/// Refuses the grants that mean nothing to an agent Seam reaches over HTTP: only `http` (the
/// origins of its card and interface) and `env` (the variables its headers come from) apply;
/// `url` itself must be behind an `http` grant.
pub fn check_grants(url: &str, grants: &Grants) -> Result<(), SandboxError> {
    grants.only(
        &["env", "http"],
        "an A2A agent is reached over HTTP outside the sandbox: only `http` and `env` grants \
         apply to it",
    )?;
    grants.require_url(url, "the A2A agent")
}

/// A provider whose runs are tasks of one remote A2A agent.
pub struct A2aProvider {
    inner: Arc<Inner>,
    about: Option<String>,
}

impl A2aProvider {
    /// What its card said at load: the agent's name, whether it streams, its skills (none when
    /// the host loaded to replay, and fetched no card).
    pub fn about(&self) -> Option<String> {
        self.about.clone()
    }
}

/// The provider of the A2A entry `plugin` at `url` (its `config` table), from its checked
/// `sandbox`: the card is fetched and checked now, unless the host loads to `replay` (the
/// recording has the answers, and a replay reaches no peer). The error names the key.
pub async fn provider(
    plugin: &str,
    config: &serde_json::Value,
    url: &str,
    sandbox: &Sandbox,
    replay: bool,
) -> Result<(ProviderDescriptor, A2aProvider), EntryError> {
    let settings = A2aSettings::parse(config)?;
    let headers = seam_sandbox::header_values(sandbox.grants(), &settings.headers)?;
    let headers = transport::request_headers(&headers)
        .map_err(|e| EntryError::new("config.headers", format!("key `config.headers`: {e}")))?;
    // Redirects are not followed: a card or a call answered elsewhere would leave the grants.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(settings.timeout())
        .build()
        .map_err(|e| EntryError::new("url", format!("cannot make an HTTP client: {e}")))?;
    let (endpoint, streaming, about) = if replay {
        (url.to_string(), true, None)
    } else {
        let checked = card::fetch(
            &http,
            url,
            &headers,
            settings.timeout(),
            settings.max_card_bytes,
            sandbox.grants(),
        )
        .await?;
        tracing::info!(
            plugin,
            agent = %checked.card.name,
            endpoint = %checked.endpoint,
            streaming = checked.streaming,
            skills = ?checked.card.skills.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            "A2A agent card checked"
        );
        let skills: Vec<&str> = checked.card.skills.iter().map(|s| s.id.as_str()).collect();
        let about = format!(
            "`{}`, {}, skills: {}",
            checked.card.name,
            if checked.streaming {
                "streams"
            } else {
                "does not stream"
            },
            if skills.is_empty() {
                "none".to_string()
            } else {
                skills.join(", ")
            }
        );
        (checked.endpoint, checked.streaming, Some(about))
    };
    let max_output_bytes = sandbox.limits().max_output_bytes;
    // A stream carries the answer and the progress (each bounded by `max_output_bytes`) in
    // JSON with its envelopes: past this it is a flood.
    let max_body = max_output_bytes.saturating_mul(8).max(4 << 20);
    let descriptor = ProviderDescriptor {
        name: settings.name.clone().unwrap_or_else(|| plugin.to_string()),
        // A persona reaches the agent as the message's first part; nothing else of a start
        // request can be enforced on an agent whose model Seam does not run.
        capabilities: Capabilities {
            output_schema: false,
            depth_limit: false,
            tool_filter: false,
            persona: true,
        },
        features: RuntimeFeatures {
            // A follow-up message needs the task's id, which only a stream gives mid-run.
            steering: streaming,
            resume: settings.resume,
        },
        inherits_parent_context: false,
    };
    let peer = Peer::new(http, endpoint, headers, settings.timeout(), max_body);
    let inner = Inner {
        plugin: plugin.into(),
        streaming,
        settings,
        peer,
        max_output_bytes,
    };
    Ok((
        descriptor,
        A2aProvider {
            inner: Arc::new(inner),
            about,
        },
    ))
}

impl Provider for A2aProvider {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.run(ctx, request).await })
    }
}
