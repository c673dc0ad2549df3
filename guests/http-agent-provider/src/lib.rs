//! HTTP agent provider: each run's child is a model behind an OpenAI-compatible chat
//! completions endpoint, reached through `wasi:http` (so only at an origin the entry grants).
//!
//! Config: `endpoint` (the API's base URL, such as `https://api.deepseek.com/v1`; requests go to
//! `{endpoint}/chat/completions`), `model`, and optionally `name` (default `http-agent`),
//! `apiKeyEnv` (the environment variable holding the API key, which the entry must grant under
//! `env`; without it no `Authorization` header is sent) and `stream` (default true).
//!
//! A run sends the prompt's text as the user message, with the request's persona, or else its
//! system prompt, as the system message. Streamed content deltas are reported as progress and
//! make up the answer. A cancel is noticed within 100 ms while the request waits on the network.
//! A status other than 2xx, a denied origin, a broken stream or a malformed answer ends the run
//! `error` with a diagnostic saying which.
//!
//! Budgets (contract 0.4.0): the request asks for at most the output tokens the run's tree has
//! left (`max_tokens`), and the usage the endpoint reports is charged to the tree
//! (`report-usage`); a run with no output tokens left calls nothing and ends `budget`.

use seam_plugin::types::{LogLevel, ProviderDescriptor, SubagentResult};
use seam_plugin::{Provider, Run};
use serde::Deserialize;
use serde_json::{json, Value};
use wasi::http::outgoing_handler;
use wasi::http::types::{ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasi::io::poll::Pollable;
use wasi::io::streams::StreamError;

/// How long one wait on the network lasts before the run looks at its cancel again.
const CANCEL_CHECK_NS: u64 = 100_000_000;
/// Most bytes of an error response's body quoted in a diagnostic.
const EXCERPT: usize = 300;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    #[serde(default = "default_name")]
    name: String,
    endpoint: String,
    model: String,
    api_key_env: Option<String>,
    #[serde(default = "yes")]
    stream: bool,
}

fn default_name() -> String {
    "http-agent".into()
}

fn yes() -> bool {
    true
}

/// Where requests go, from `endpoint`.
struct Endpoint {
    scheme: Scheme,
    authority: String,
    path: String,
}

fn endpoint(text: &str) -> Result<Endpoint, String> {
    let (scheme, rest) = if let Some(rest) = text.strip_prefix("https://") {
        (Scheme::Https, rest)
    } else if let Some(rest) = text.strip_prefix("http://") {
        (Scheme::Http, rest)
    } else {
        return Err(format!(
            "config key `endpoint`: `{text}` must start with http:// or https://"
        ));
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.is_empty() {
        return Err(format!("config key `endpoint`: `{text}` has no host"));
    }
    Ok(Endpoint {
        scheme,
        authority: authority.to_string(),
        path: format!("/{}", path.trim_end_matches('/')),
    })
}

struct HttpAgent;

impl Provider for HttpAgent {
    type Config = Config;

    fn describe(config: &Config) -> Result<ProviderDescriptor, String> {
        endpoint(&config.endpoint)?;
        if config.model.is_empty() {
            return Err("config key `model` must not be empty".into());
        }
        let mut descriptor = seam_plugin::descriptor(&config.name);
        // The persona becomes the system message.
        descriptor.capabilities.persona = true;
        Ok(descriptor)
    }

    fn run(config: Config, run: Run) -> Result<SubagentResult, String> {
        let key = match &config.api_key_env {
            None => None,
            Some(var) => Some(std::env::var(var).map_err(|_| {
                format!(
                    "environment variable `{var}` (config key `apiKeyEnv`) is not set, or not \
                     granted: add \"{var}\" to `env` under [plugin.grants]"
                )
            })?),
        };
        seam_plugin::ready();
        let system = run.request.persona.clone().or_else(|| {
            run.request
                .agent_options
                .as_ref()
                .and_then(|o| o.system_prompt.clone())
        });
        let mut messages = Vec::new();
        if let Some(system) = system {
            messages.push(json!({ "role": "system", "content": system }));
        }
        messages.push(json!({ "role": "user", "content": run.prompt_text() }));
        let mut body =
            json!({ "model": config.model, "messages": messages, "stream": config.stream });
        match seam_plugin::output_tokens_left() {
            Some(0) => {
                return Ok(seam_plugin::out_of_budget(
                    "budget exhausted: output tokens (none left for the model call)",
                ))
            }
            Some(left) => body["max_tokens"] = json!(left),
            None => {}
        }
        if config.stream {
            // The usage of a streamed answer comes in a last chunk, only when asked for.
            body["stream_options"] = json!({ "include_usage": true });
        }
        Ok(match complete(&config, key.as_deref(), &body.to_string()) {
            Ok(Some((text, usage))) => {
                if let Some((input, output)) = usage {
                    // Past the budget, the host stops the run (it ends `budget`): the answer
                    // that spent it is still this call's.
                    if let Err(e) = seam_plugin::report_usage(input, output, None) {
                        seam_plugin::log(LogLevel::Info, format!("report-usage: {e:?}"));
                    }
                }
                seam_plugin::answer(text)
            }
            Ok(None) => seam_plugin::aborted(),
            Err(why) => {
                seam_plugin::log(LogLevel::Warn, &why);
                seam_plugin::failed(why)
            }
        })
    }
}

seam_plugin::export_provider!(HttpAgent);

/// Waits on `pollable` for at most [`CANCEL_CHECK_NS`]; false once the run is cancelled.
fn wait(pollable: &Pollable) -> bool {
    let tick = wasi::clocks::monotonic_clock::subscribe_duration(CANCEL_CHECK_NS);
    wasi::io::poll::poll(&[pollable, &tick]);
    !seam_plugin::is_cancelled()
}

fn explain(e: &ErrorCode) -> String {
    match e {
        ErrorCode::HttpRequestDenied => "the host denied the request: its origin is not granted \
                                         (add it to `http` under [plugin.grants])"
            .into(),
        ErrorCode::ConnectionRefused => "the endpoint refused the connection".into(),
        ErrorCode::ConnectionTimeout | ErrorCode::ConnectionReadTimeout => {
            "the endpoint did not answer in time (`http_timeout_ms`)".into()
        }
        ErrorCode::HttpResponseBodySize(_) | ErrorCode::HttpRequestBodySize(_) => {
            "the answer is larger than the plugin may receive (`max_http_mb`)".into()
        }
        other => format!("the request failed: {other:?}"),
    }
}

/// Tokens an answer used, as the endpoint said: (prompt, completion).
type Usage = Option<(u64, u64)>;

/// Sends the chat completion and reads the answer and its usage: `Ok(None)` if the run was
/// cancelled.
fn complete(
    config: &Config,
    key: Option<&str>,
    body: &str,
) -> Result<Option<(String, Usage)>, String> {
    let to = endpoint(&config.endpoint)?;
    let headers = Fields::new();
    let accept = if config.stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    let set = |name: &str, value: &str| {
        headers
            .append(name, value.as_bytes())
            .map_err(|e| format!("header `{name}`: {e:?}"))
    };
    set("content-type", "application/json")?;
    set("accept", accept)?;
    if let Some(key) = key {
        set("authorization", &format!("Bearer {key}"))?;
    }
    let request = OutgoingRequest::new(headers);
    let path = format!("{}/chat/completions", to.path.trim_end_matches('/'));
    request
        .set_method(&Method::Post)
        .and_then(|()| request.set_scheme(Some(&to.scheme)))
        .and_then(|()| request.set_authority(Some(&to.authority)))
        .and_then(|()| request.set_path_with_query(Some(&path)))
        .map_err(|()| format!("`{}` is not a valid endpoint", config.endpoint))?;
    let outgoing = request
        .body()
        .map_err(|()| "cannot write the request body")?;
    {
        let stream = outgoing
            .write()
            .map_err(|()| "cannot write the request body")?;
        // `blocking-write-and-flush` takes at most 4096 bytes at a time.
        for chunk in body.as_bytes().chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| format!("cannot send the request: {e:?}"))?;
        }
    }
    OutgoingBody::finish(outgoing, None).map_err(|e| explain(&e))?;
    let future = outgoing_handler::handle(request, None).map_err(|e| explain(&e))?;
    let response = loop {
        if let Some(outcome) = future.get() {
            break outcome
                .map_err(|()| "the response was taken twice")?
                .map_err(|e| explain(&e))?;
        }
        if !wait(&future.subscribe()) {
            return Ok(None);
        }
    };
    let status = response.status();
    let incoming = response
        .consume()
        .map_err(|()| "cannot read the response body")?;
    let stream = incoming
        .stream()
        .map_err(|()| "cannot read the response body")?;
    let ok = (200..300).contains(&status);
    let mut reader = Reader::new(config.stream && ok);
    loop {
        match stream.read(64 * 1024) {
            Ok(bytes) if bytes.is_empty() => {
                if !wait(&stream.subscribe()) {
                    return Ok(None);
                }
            }
            Ok(bytes) => {
                if seam_plugin::is_cancelled() {
                    return Ok(None);
                }
                if reader.take(&bytes)? {
                    break;
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(format!(
                    "the response stream broke after HTTP {status}: {}",
                    e.to_debug_string()
                ));
            }
        }
    }
    if !ok {
        let text = String::from_utf8_lossy(&reader.raw);
        let excerpt: String = text.chars().take(EXCERPT).collect();
        return Err(format!("the endpoint answered HTTP {status}: {excerpt}"));
    }
    reader.finish()
}

/// Reads an answer: server-sent events of content deltas, or one JSON completion.
struct Reader {
    sse: bool,
    raw: Vec<u8>,
    answer: String,
    done: bool,
    usage: Usage,
}

/// The usage of a completion or of a stream's last chunk, if it has one.
fn usage_of(value: &Value) -> Usage {
    let usage = &value["usage"];
    Some((
        usage["prompt_tokens"].as_u64()?,
        usage["completion_tokens"].as_u64()?,
    ))
}

impl Reader {
    fn new(sse: bool) -> Self {
        Self {
            sse,
            raw: Vec::new(),
            answer: String::new(),
            done: false,
            usage: None,
        }
    }

    /// Takes more bytes; true once the stream said `[DONE]`.
    fn take(&mut self, bytes: &[u8]) -> Result<bool, String> {
        if !self.sse {
            self.raw.extend_from_slice(bytes);
            return Ok(false);
        }
        // Events may end lines with CRLF.
        self.raw.extend(bytes.iter().filter(|&&b| b != b'\r'));
        // Each event ends with a blank line; a partial one waits for the next read.
        while let Some(end) = find(&self.raw, b"\n\n") {
            let event: Vec<u8> = self.raw.drain(..end + 2).collect();
            let event = String::from_utf8_lossy(&event);
            for line in event.lines() {
                let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                    continue;
                };
                if data == "[DONE]" {
                    self.done = true;
                    return Ok(true);
                }
                let chunk: Value = serde_json::from_str(data)
                    .map_err(|e| format!("the stream sent an event that is not JSON: {e}"))?;
                if let Some(usage) = usage_of(&chunk) {
                    self.usage = Some(usage);
                }
                if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
                    if !piece.is_empty() {
                        seam_plugin::progress(piece);
                        self.answer.push_str(piece);
                    }
                }
            }
        }
        Ok(false)
    }

    fn finish(self) -> Result<Option<(String, Usage)>, String> {
        if self.sse {
            if !self.done && self.answer.is_empty() {
                return Err("the stream ended without an answer".into());
            }
            return Ok(Some((self.answer, self.usage)));
        }
        let value: Value = serde_json::from_slice(&self.raw)
            .map_err(|e| format!("the answer is not JSON: {e}"))?;
        value["choices"][0]["message"]["content"]
            .as_str()
            .map(|text| Some((text.to_string(), usage_of(&value))))
            .ok_or_else(|| "the answer has no `choices[0].message.content`".into())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
