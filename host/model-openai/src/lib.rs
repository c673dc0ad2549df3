//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`), as spoken by OpenAI,
//! DeepSeek and local servers (llama.cpp, vLLM, Ollama, ...).
//!
//! One [`Model::complete`] call is one logical request. It is retried, with exponential backoff,
//! on 429 and 5xx, and when the endpoint cannot be reached or does not answer in time; the
//! server's `Retry-After` (seconds or an HTTP date) or `retry-after-ms` wins over the backoff,
//! and each wait is logged at `warn` (on stderr in the CLI). Each attempt is bounded by
//! `timeout_ms`, and the whole call (including backoff sleeps) ends promptly with
//! [`ModelError::Aborted`] when the abort token fires. Replies are read either as one JSON body
//! or as a server-sent-event stream of deltas; a stream that breaks after the answer began is
//! reported as such, not retried (part of the answer was already taken).
//!
//! `seam-core`'s [`ModelRegistry`](seam_agent::model::ModelRegistry) resolves `openai`,
//! `openai:MODEL` and `[models.endpoints.NAME]` through the adapter a host gives it:
//! [`adapter`].

mod body;
mod retry;
mod sse;
mod wire;

use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Response, StatusCode};
use serde_json::Value;
use tokio::time::{timeout_at, Instant};
use tokio_util::sync::CancellationToken;

use body::{error_chain, read_body, transport, MAX_BODY_BYTES, MAX_ERROR_BODY_BYTES};
use retry::{retry_after, retrying, Failure, Policy};
use wire::{error_message, parse_completion, request_body, shorten, ERROR_BODY_CHARS};

/// The adapter a [`ModelRegistry`](seam_agent::model::ModelRegistry) builds endpoint models
/// with.
pub fn adapter() -> std::sync::Arc<seam_agent::model::EndpointAdapter> {
    std::sync::Arc::new(|config| {
        OpenAiModel::new(config).map(|m| std::sync::Arc::new(m) as std::sync::Arc<dyn Model>)
    })
}

use seam_agent::model::{Model, ModelError, ModelReply, ModelRequest, OpenAiConfig};
/// What the adapter calls itself in `User-Agent`.
const USER_AGENT: &str = concat!("seam/", env!("CARGO_PKG_VERSION"));

/// An OpenAI-compatible endpoint.
pub struct OpenAiModel {
    config: OpenAiConfig,
    client: reqwest::Client,
    url: String,
}

impl OpenAiModel {
    /// Checks the config and builds the client. The API key is read from `api_key_env` at each
    /// call, not here, so a missing key surfaces as a [`ModelError::Config`] on the first call.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let err = |message: String| ModelError::Config {
            model: format!("openai:{}", config.model),
            message,
        };
        if config.model.trim().is_empty() {
            return Err(err("`model` is empty".into()));
        }
        let base = config.base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(err(format!(
                "`base_url` `{}` must start with http:// or https://",
                config.base_url
            )));
        }
        let url = format!("{base}/chat/completions");
        reqwest::Url::parse(&url).map_err(|e| {
            err(format!(
                "`base_url` `{}` is not a URL: {e}",
                config.base_url
            ))
        })?;
        if config.timeout_ms == 0 {
            return Err(err(
                "`timeout_ms` is 0: every attempt would time out at once (give milliseconds, \
                 such as 60000)"
                    .into(),
            ));
        }
        if config
            .api_key_env
            .as_deref()
            .is_some_and(|v| v.trim().is_empty())
        {
            return Err(err(
                "`api_key_env` is empty (leave it out for no key)".into()
            ));
        }
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| err(format!("cannot build the HTTP client: {}", error_chain(&e))))?;
        Ok(Self {
            config,
            client,
            url,
        })
    }
}

impl Model for OpenAiModel {
    fn prices(&self) -> Option<seam_core::spend::Prices> {
        self.config.prices
    }

    fn max_tokens(&self) -> Option<u64> {
        self.config.max_tokens
    }

    fn complete(
        &self,
        request: ModelRequest,
        abort: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelReply, ModelError>> {
        let call = Call {
            config: self.config.clone(),
            client: self.client.clone(),
            url: self.url.clone(),
        };
        Box::pin(async move {
            // `biased` so an already-fired token wins before any network traffic; dropping the
            // losing future closes its connection and cancels any backoff sleep.
            tokio::select! {
                biased;
                _ = abort.cancelled() => Err(ModelError::Aborted),
                result = call.run(request) => result,
            }
        })
    }
}

/// Everything one call needs, owned so the returned future is `'static`.
struct Call {
    config: OpenAiConfig,
    client: reqwest::Client,
    url: String,
}

impl Call {
    fn config_error(&self, message: String) -> ModelError {
        ModelError::Config {
            model: format!("openai:{}", self.config.model),
            message,
        }
    }

    async fn run(&self, request: ModelRequest) -> Result<ModelReply, ModelError> {
        let auth = self.authorization()?;
        let body = request_body(&self.config, &request);
        let traceparent = request
            .traceparent
            .as_deref()
            .and_then(|t| HeaderValue::from_str(t).ok());
        let policy = Policy {
            model: &self.config.model,
            max_retries: self.config.max_retries,
            backoff_ms: self.config.backoff_ms,
        };
        retrying(policy, || {
            self.attempt(&body, auth.as_ref(), traceparent.as_ref())
        })
        .await
    }

    /// The `Authorization` header, from the variable named by `api_key_env` (read per call, so a
    /// rotated key is picked up). No variable configured means no header (local servers).
    fn authorization(&self) -> Result<Option<HeaderValue>, ModelError> {
        let Some(var) = self.config.api_key_env.as_deref() else {
            return Ok(None);
        };
        let key = match std::env::var(var) {
            Ok(key) => key,
            Err(std::env::VarError::NotPresent) => {
                return Err(self.config_error(format!(
                    "the API key variable `{var}` (api_key_env) is not set"
                )))
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(self.config_error(format!(
                    "the API key variable `{var}` (api_key_env) is not valid UTF-8"
                )))
            }
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(self.config_error(format!(
                "the API key variable `{var}` (api_key_env) is empty"
            )));
        }
        let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
            self.config_error(format!(
                "the API key in `{var}` has characters not allowed in an HTTP header"
            ))
        })?;
        // Keeps the key out of debug output.
        value.set_sensitive(true);
        Ok(Some(value))
    }

    async fn attempt(
        &self,
        body: &Value,
        auth: Option<&HeaderValue>,
        traceparent: Option<&HeaderValue>,
    ) -> Result<ModelReply, Failure> {
        let limit = Duration::from_millis(self.config.timeout_ms);
        let deadline = Instant::now() + limit;
        let timed_out = || ModelError::Timeout(self.config.timeout_ms);

        let mut builder = self
            .client
            .post(&self.url)
            .header(
                ACCEPT,
                if self.config.stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .json(body);
        if let Some(auth) = auth {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        if let Some(traceparent) = traceparent {
            builder = builder.header("traceparent", traceparent.clone());
        }
        let response = timeout_at(deadline, builder.send())
            .await
            .map_err(|_| Failure::Unreached(timed_out()))?
            .map_err(|e| Failure::Unreached(transport(&e)))?;

        let status = response.status();
        if !status.is_success() {
            return Err(self.status_failure(response, deadline).await);
        }

        // Some servers answer a streaming request with a plain JSON body, and some local ones
        // send events without the right content type: only a JSON type means "not a stream".
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));
        if self.config.stream && !is_json {
            // With streaming, `timeout_ms` bounds the wait for each next piece rather than the
            // whole reply: a long answer that keeps arriving is not a hung endpoint.
            Ok(sse::read_stream(response, limit, self.config.timeout_ms)
                .await
                .map_err(broke)?)
        } else {
            let bytes = timeout_at(deadline, read_body(response, MAX_BODY_BYTES))
                .await
                .map_err(|_| timed_out())??;
            Ok(parse_completion(&bytes)?)
        }
    }

    /// Turns an error status into a retry or a final [`ModelError::Http`].
    async fn status_failure(&self, response: Response, deadline: Instant) -> Failure {
        let status = response.status();
        let retry_after = retry_after(response.headers(), std::time::SystemTime::now());
        // The body is only decoration: a slow or broken one must not hide the status.
        let raw = match timeout_at(deadline, read_body(response, MAX_ERROR_BODY_BYTES)).await {
            Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            _ => String::new(),
        };
        let body = self.describe_error(status, &raw);
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Failure::Retry {
                status: status.as_u16(),
                body,
                retry_after,
            }
        } else {
            Failure::Fatal(ModelError::Http {
                status: status.as_u16(),
                body,
            })
        }
    }

    /// A shortened error body, prefixed with a hint for the statuses a user can fix.
    fn describe_error(&self, status: StatusCode, raw: &str) -> String {
        let detail = shorten(&error_message(raw), ERROR_BODY_CHARS);
        let key = match &self.config.api_key_env {
            Some(var) => format!("the API key in `{var}`"),
            None => "no API key is configured (set api_key_env)".to_string(),
        };
        let hint = match status {
            StatusCode::UNAUTHORIZED => Some(format!("unauthorized: check {key}")),
            StatusCode::FORBIDDEN => Some(format!("forbidden: check {key} and its permissions")),
            StatusCode::NOT_FOUND => Some(format!(
                "not found: check base_url `{}` and model `{}`",
                self.config.base_url, self.config.model
            )),
            StatusCode::TOO_MANY_REQUESTS => Some("rate limited".to_string()),
            _ => None,
        };
        match (hint, detail.is_empty()) {
            (Some(hint), true) => hint,
            (Some(hint), false) => format!("{hint} ({detail})"),
            (None, false) => detail,
            (None, true) => status
                .canonical_reason()
                .unwrap_or("empty error body")
                .to_string(),
        }
    }
}

/// A stream that failed after the 200: said as such, so a reader does not look for a network
/// problem before the answer began.
fn broke(e: ModelError) -> ModelError {
    match e {
        ModelError::Transport(why) => ModelError::StreamBroke(why),
        ModelError::Timeout(ms) => ModelError::Protocol(format!(
            "the stream stopped: no next piece within {ms} ms (timeout_ms)"
        )),
        other => other,
    }
}
