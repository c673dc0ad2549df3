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

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::time::{timeout, timeout_at, Instant};
use tokio_util::sync::CancellationToken;

use super::{
    ChatMessage, FinishReason, Model, ModelError, ModelReply, ModelRequest, OpenAiConfig, Role,
    ToolCall, ToolSpec,
};

/// Longest wait between two attempts, whatever the backoff or `Retry-After` asks for.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);
/// Largest response body (or stream) read, so a misbehaving endpoint cannot exhaust memory.
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Largest error body read: only a shortened form is reported anyway.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Characters of an error body kept in [`ModelError::Http`].
const ERROR_BODY_CHARS: usize = 300;
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

/// How one attempt failed.
enum Failure {
    /// A status worth retrying (429, 5xx).
    Retry {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    /// No answer began: the endpoint could not be reached, or did not answer in time. Worth
    /// retrying; reported as the error if the retries run out.
    Unreached(ModelError),
    /// Anything else: reported as is.
    Fatal(ModelError),
}

impl From<ModelError> for Failure {
    fn from(e: ModelError) -> Self {
        Failure::Fatal(e)
    }
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
        let mut retry = 0u32;
        loop {
            let (error, why, retry_after) = match self.attempt(&body, auth.as_ref()).await {
                Ok(reply) => return Ok(reply),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry {
                    status,
                    body,
                    retry_after,
                }) => (
                    ModelError::Http { status, body },
                    format!("the model endpoint answered HTTP {status}"),
                    retry_after,
                ),
                Err(Failure::Unreached(e)) => {
                    let why = e.to_string();
                    (e, why, None)
                }
            };
            if retry >= self.config.max_retries {
                return Err(error);
            }
            let delay = retry_after
                .unwrap_or_else(|| backoff(self.config.backoff_ms, retry))
                .min(MAX_RETRY_DELAY);
            tracing::warn!(
                model = %self.config.model,
                retry = retry + 1,
                of = self.config.max_retries,
                "{why}; retry {} of {} in {} ms",
                retry + 1,
                self.config.max_retries,
                delay.as_millis()
            );
            tokio::time::sleep(delay).await;
            retry += 1;
        }
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
            Ok(read_stream(response, limit, self.config.timeout_ms)
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

/// How long the server asks to wait: `retry-after-ms` (milliseconds), else `Retry-After` in
/// seconds or as an HTTP date (`now` turns a date into a wait).
fn retry_after(
    headers: &reqwest::header::HeaderMap,
    now: std::time::SystemTime,
) -> Option<Duration> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
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

/// `backoff_ms * 2^retry`, saturating.
fn backoff(backoff_ms: u64, retry: u32) -> Duration {
    Duration::from_millis(backoff_ms.saturating_mul(1u64.checked_shl(retry).unwrap_or(u64::MAX)))
}

/// Reads a whole body, refusing more than `max` bytes.
async fn read_body(mut response: Response, max: usize) -> Result<Vec<u8>, ModelError> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(&e))? {
        if out.len() + chunk.len() > max {
            return Err(ModelError::Protocol(format!(
                "the response is larger than {max} bytes"
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

fn transport(e: &reqwest::Error) -> ModelError {
    ModelError::Transport(error_chain(e))
}

/// An error and its sources on one line (reqwest's own message hides e.g. "connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = s.source();
    }
    message
}

/// The message inside an OpenAI-style error body (`{"error":{"message":..}}`), else the body.
fn error_message(raw: &str) -> String {
    let from_json = serde_json::from_str::<Value>(raw).ok().and_then(|v| {
        let error = v.get("error").unwrap_or(&v);
        match error {
            Value::String(s) => Some(s.clone()),
            other => other
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    });
    from_json.unwrap_or_else(|| raw.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn shorten(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Request

/// The JSON body of a chat-completions request.
fn request_body(config: &OpenAiConfig, request: &ModelRequest) -> Value {
    let mut body = json!({
        "model": config.model,
        "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
        "stream": config.stream,
    });
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(wire_tool).collect();
    }
    if let Some(t) = config.temperature {
        body["temperature"] = json!(t);
    }
    body
}

fn wire_message(message: &ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut out = json!({ "role": role, "content": message.content });
    if message.role == Role::Assistant && !message.tool_calls.is_empty() {
        // The wire format's way to say "this turn only called tools".
        if message.content.is_empty() {
            out["content"] = Value::Null;
        }
        out["tool_calls"] = message
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments },
                })
            })
            .collect();
    }
    if let Some(id) = &message.tool_call_id {
        out["tool_call_id"] = json!(id);
    }
    out
}

fn wire_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Reply (shared by both shapes). Every field is optional: servers differ in what they include.

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    /// Non-streaming.
    #[serde(default)]
    message: Option<WireMessage>,
    /// Streaming.
    #[serde(default)]
    delta: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    /// Present in stream deltas; some servers leave it out.
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    /// A JSON string per the spec; some local servers send the object itself.
    #[serde(default)]
    arguments: Option<Value>,
}

fn arguments_text(value: Option<Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
    }
}

/// An error object the endpoint put in a 200 answer (or a stream chunk).
fn embedded_error(error: Option<Value>) -> Result<(), ModelError> {
    match error {
        None | Some(Value::Null) => Ok(()),
        Some(e) => Err(ModelError::Protocol(format!(
            "the endpoint reported an error: {}",
            shorten(&error_message(&e.to_string()), ERROR_BODY_CHARS)
        ))),
    }
}

/// A reply being put together (from one message or from many deltas).
#[derive(Default)]
struct Builder {
    text: String,
    refusal: String,
    /// Tool calls by their stream index.
    calls: BTreeMap<u32, PartialCall>,
    finish: Option<String>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl Builder {
    fn add(&mut self, message: WireMessage) {
        if let Some(content) = message.content {
            self.text.push_str(&content);
        }
        if let Some(refusal) = message.refusal {
            self.refusal.push_str(&refusal);
        }
        for (position, call) in message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let index = self.call_index(&call, position);
            let slot = self.calls.entry(index).or_default();
            // Id and name come once, first; a repeated one (some servers resend) is not appended.
            if let Some(id) = call.id.filter(|id| !id.is_empty()) {
                if slot.id.is_empty() {
                    slot.id = id;
                }
            }
            if let Some(function) = call.function {
                if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                    if slot.name.is_empty() {
                        slot.name = name;
                    }
                }
                slot.arguments.push_str(&arguments_text(function.arguments));
            }
        }
    }

    /// Which call a tool-call entry belongs to: its `index` when given; otherwise a new call when
    /// it brings a new id, else the latest call (servers that omit `index` send calls in order).
    fn call_index(&self, call: &WireToolCall, position: usize) -> u32 {
        if let Some(index) = call.index {
            return index;
        }
        let last = self.calls.iter().next_back();
        match (last, call.id.as_deref().filter(|id| !id.is_empty())) {
            (None, _) => u32::try_from(position).unwrap_or(u32::MAX),
            (Some((&i, slot)), Some(id)) if slot.id != id => i.saturating_add(1),
            (Some((&i, _)), _) => i,
        }
    }

    fn finish(self) -> Result<ModelReply, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (n, (index, call)) in self.calls.into_iter().enumerate() {
            if call.name.is_empty() {
                return Err(ModelError::Protocol(format!(
                    "tool call {index} has no function name"
                )));
            }
            tool_calls.push(ToolCall {
                // Some local servers send no id; the answer still needs one to refer to.
                id: if call.id.is_empty() {
                    format!("call_{n}")
                } else {
                    call.id
                },
                name: call.name,
                // A call with no arguments means `{}`, which every tool can parse.
                arguments: if call.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    call.arguments
                },
            });
        }
        let refused = !self.refusal.is_empty();
        let finish = match self.finish.as_deref() {
            _ if refused => FinishReason::Refusal,
            Some("stop") => FinishReason::Stop,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            // DeepSeek's "insufficient_system_resource" also means the reply was cut short.
            Some("length" | "insufficient_system_resource") => FinishReason::Length,
            Some("content_filter") => FinishReason::Refusal,
            // Missing or unknown: infer from what arrived.
            _ if !tool_calls.is_empty() => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        let text = if refused && self.text.is_empty() {
            self.refusal
        } else {
            self.text
        };
        Ok(ModelReply {
            text,
            tool_calls,
            finish,
        })
    }
}

/// Parses a non-streaming completion body.
fn parse_completion(bytes: &[u8]) -> Result<ModelReply, ModelError> {
    let completion: Completion = serde_json::from_slice(bytes).map_err(|e| {
        ModelError::Protocol(format!(
            "the completion is not valid JSON ({e}): {}",
            shorten(&String::from_utf8_lossy(bytes), 120)
        ))
    })?;
    embedded_error(completion.error)?;
    let choice = completion
        .choices
        .into_iter()
        .min_by_key(|c| c.index)
        .ok_or_else(|| ModelError::Protocol("the completion has no choices".into()))?;
    let message = choice
        .message
        .ok_or_else(|| ModelError::Protocol("the completion's choice has no message".into()))?;
    let mut builder = Builder::default();
    builder.add(message);
    builder.finish = choice.finish_reason;
    builder.finish()
}

// ---------------------------------------------------------------------------------------------
// Streaming

/// Reads an SSE stream of completion chunks, each next piece within `idle`.
async fn read_stream(
    mut response: Response,
    idle: Duration,
    timeout_ms: u64,
) -> Result<ModelReply, ModelError> {
    let mut decoder = SseDecoder::default();
    let mut builder = Builder::default();
    let mut events = Vec::new();
    let mut received = 0usize;
    loop {
        let chunk = timeout(idle, response.chunk())
            .await
            .map_err(|_| ModelError::Timeout(timeout_ms))?
            .map_err(|e| transport(&e))?;
        let Some(chunk) = chunk else {
            decoder.finish(&mut events);
            if apply_events(&mut builder, &mut events)? || builder.finish.is_some() {
                // A finish reason without `[DONE]` is complete enough: some servers omit it.
                return builder.finish();
            }
            return Err(ModelError::Protocol(
                "the stream ended before the reply was complete".into(),
            ));
        };
        received += chunk.len();
        if received > MAX_BODY_BYTES {
            return Err(ModelError::Protocol(format!(
                "the stream is larger than {MAX_BODY_BYTES} bytes"
            )));
        }
        decoder.feed(&chunk, &mut events);
        if apply_events(&mut builder, &mut events)? {
            return builder.finish();
        }
    }
}

/// Applies decoded event data to the reply; true once `[DONE]` arrived.
fn apply_events(builder: &mut Builder, events: &mut Vec<String>) -> Result<bool, ModelError> {
    for data in events.drain(..) {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Completion = serde_json::from_str(data).map_err(|e| {
            ModelError::Protocol(format!(
                "a stream event is not valid JSON ({e}): {}",
                shorten(data, 120)
            ))
        })?;
        embedded_error(chunk.error)?;
        // Only the first choice is asked for; a final usage-only chunk has none.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta.or(choice.message) {
                builder.add(delta);
            }
            if let Some(reason) = choice.finish_reason {
                builder.finish = Some(reason);
            }
        }
    }
    Ok(false)
}

/// A server-sent-events decoder (the WHATWG event-stream format), reduced to what chat
/// completions use: `data` fields, joined per event. Comments (`: keep-alive`) and other fields
/// are skipped; lines may end in LF, CRLF or CR, split anywhere across network chunks.
#[derive(Default)]
struct SseDecoder {
    line: Vec<u8>,
    data: Option<String>,
    /// The previous chunk ended in CR: an LF starting this one belongs to it.
    skip_lf: bool,
}

impl SseDecoder {
    /// Feeds bytes; each completed event's data is pushed to `out`.
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) {
        for &byte in bytes {
            if std::mem::take(&mut self.skip_lf) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\n' => self.end_line(out),
                b'\r' => {
                    self.end_line(out);
                    self.skip_lf = true;
                }
                _ => self.line.push(byte),
            }
        }
    }

    /// End of stream: a last line or event without its terminator still counts.
    fn finish(&mut self, out: &mut Vec<String>) {
        if !self.line.is_empty() {
            self.end_line(out);
        }
        if let Some(data) = self.data.take() {
            out.push(data);
        }
    }

    fn end_line(&mut self, out: &mut Vec<String>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            // A blank line dispatches the event.
            if let Some(data) = self.data.take() {
                out.push(data);
            }
            return;
        }
        let line = String::from_utf8_lossy(&line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out);
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn sse_lines_split_anywhere_and_any_line_ending() {
        assert_eq!(
            decode(&[
                b"data: a\r",
                b"\n\r\n: keep-alive\n\nda",
                b"ta:b\n",
                b"data: c\n\ndata: d"
            ]),
            vec!["a", "b\nc", "d"]
        );
        assert_eq!(decode(&[b"data: x\r\rdata: y\r\r"]), vec!["x", "y"]);
        assert_eq!(decode(&[b"event: ping\nid: 1\n\n"]), Vec::<String>::new());
    }

    #[test]
    fn backoff_doubles_and_saturates() {
        assert_eq!(backoff(100, 0), Duration::from_millis(100));
        assert_eq!(backoff(100, 3), Duration::from_millis(800));
        assert_eq!(backoff(100, 200), Duration::from_millis(u64::MAX));
    }

    #[test]
    fn error_bodies_are_shortened() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"auth"}}"#),
            "bad key"
        );
        assert_eq!(error_message("  plain\n text "), "plain text");
        let long = "é".repeat(500);
        assert_eq!(shorten(&long, 10).chars().count(), 11);
    }
}
