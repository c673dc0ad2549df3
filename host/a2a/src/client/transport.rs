//! Calls to one A2A agent over the JSON-RPC binding: a call with one answer, and a stream of
//! server-sent events, each bounded in bytes (and a call in time).

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use a2a::JsonRpcId;
use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

use crate::wire::{self, StreamResponse, WireError};

/// Why a call to the agent failed.
#[derive(Debug, Error)]
pub enum CallError {
    /// The connection failed, or broke mid-answer.
    #[error("{0}")]
    Transport(String),
    /// The agent did not answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// An HTTP status other than success.
    #[error("HTTP {status}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer or the stream is larger than allowed.
    #[error("{what} is larger than {max} bytes")]
    TooLarge {
        /// What was read.
        what: &'static str,
        /// The cap.
        max: usize,
    },
    /// What came back is not A2A's JSON-RPC, or is its error.
    #[error(transparent)]
    Wire(#[from] WireError),
}

impl CallError {
    /// The A2A or JSON-RPC error code the agent answered with, if it did.
    pub fn code(&self) -> Option<i32> {
        match self {
            Self::Wire(e) => e.code(),
            _ => None,
        }
    }

    /// Whether the agent could not be reached or the connection broke: what following the task
    /// again may mend (an answer the agent gave, error or not, is not retried).
    pub fn is_connection(&self) -> bool {
        matches!(self, Self::Transport(_) | Self::Timeout(_))
            || matches!(self, Self::Status { status, .. } if *status >= 502)
    }
}

/// A stream of the agent's events, in order.
pub type Events = Pin<Box<dyn Stream<Item = Result<StreamResponse, CallError>> + Send>>;

/// One agent's JSON-RPC endpoint, with the entry's headers and bounds.
pub struct Peer {
    http: reqwest::Client,
    endpoint: String,
    headers: HeaderMap,
    timeout: Duration,
    /// The largest answer of a call, and the most bytes of one stream.
    max_body: usize,
    next_id: AtomicU64,
}

/// A header of `config.headers` that cannot be sent.
#[derive(Debug, Error)]
pub enum HeaderError {
    /// Not a header name.
    #[error("`{0}` is not a header name")]
    Name(String),
    /// Its value (from the granted variable) is not a header value.
    #[error("the value of `{0}` is not a header value")]
    Value(String),
}

/// The headers of every request: the entry's, and `A2A-Version`.
pub fn request_headers(headers: &[(String, String)]) -> Result<HeaderMap, HeaderError> {
    let mut map = HeaderMap::new();
    map.insert(
        HeaderName::from_static("a2a-version"),
        HeaderValue::from_static(wire::VERSION),
    );
    for (name, value) in headers {
        let key =
            HeaderName::try_from(name.as_str()).map_err(|_| HeaderError::Name(name.clone()))?;
        let value =
            HeaderValue::try_from(value.as_str()).map_err(|_| HeaderError::Value(name.clone()))?;
        map.insert(key, value);
    }
    Ok(map)
}

impl Peer {
    /// The endpoint `endpoint` (the card's JSON-RPC interface URL).
    pub fn new(
        http: reqwest::Client,
        endpoint: String,
        headers: HeaderMap,
        timeout: Duration,
        max_body: usize,
    ) -> Self {
        Self {
            http,
            endpoint,
            headers,
            timeout,
            max_body,
            next_id: AtomicU64::new(1),
        }
    }

    /// The endpoint's URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn id(&self) -> JsonRpcId {
        JsonRpcId::Number(self.next_id.fetch_add(1, Ordering::Relaxed) as i64)
    }

    fn post(
        &self,
        id: &JsonRpcId,
        method: &str,
        params: &impl Serialize,
    ) -> reqwest::RequestBuilder {
        self.http
            .post(&self.endpoint)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(wire::request(id, method, params))
    }

    /// Calls `method` and reads its one answer as `T`, within the entry's timeout.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<T, CallError> {
        tokio::time::timeout(self.timeout, self.call_until_answered(method, params))
            .await
            .map_err(|_| CallError::Timeout(self.timeout))?
    }

    /// Calls `method` and waits as long as its answer takes (a `SendMessage` that returns
    /// when the task ends; the run's own time limit bounds it).
    pub async fn call_until_answered<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<T, CallError> {
        let id = self.id();
        let request = self
            .post(&id, method, params)
            .header(ACCEPT, "application/json");
        let response = request.send().await.map_err(transport)?;
        let response = success(response).await?;
        let body = read_body(response, self.max_body, "the answer").await?;
        Ok(wire::result(method, &id, &body)?)
    }

    /// Calls the streaming `method`: its events as they come. A server that answers with one
    /// JSON-RPC response instead gives its error, or its result as the only event.
    pub async fn stream(&self, method: &str, params: &impl Serialize) -> Result<Events, CallError> {
        let id = self.id();
        let request = self
            .post(&id, method, params)
            .header(ACCEPT, "text/event-stream");
        let response = tokio::time::timeout(self.timeout, request.send())
            .await
            .map_err(|_| CallError::Timeout(self.timeout))?
            .map_err(transport)?;
        let response = success(response).await?;
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            let body = read_body(response, self.max_body, "the answer").await?;
            let one = wire::result::<StreamResponse>(method, &id, &body)?;
            return Ok(Box::pin(futures::stream::once(async move { Ok(one) })));
        }
        let method = method.to_string();
        let events = chunks(response, self.max_body)
            .eventsource()
            .filter_map(move |event| {
                let item = match event {
                    Ok(event) if event.data.is_empty() => None,
                    Ok(event) => Some(
                        wire::result::<StreamResponse>(&method, &id, event.data.as_bytes())
                            .map_err(CallError::from),
                    ),
                    Err(eventsource_stream::EventStreamError::Transport(e)) => Some(Err(e)),
                    Err(e) => Some(Err(CallError::Transport(format!(
                        "the event stream is not server-sent events: {e}"
                    )))),
                };
                futures::future::ready(item)
            });
        Ok(Box::pin(events))
    }
}

/// The response if its status is a success; else its status and the start of its body.
async fn success(response: reqwest::Response) -> Result<reqwest::Response, CallError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = read_body(response, 4096, "the error")
        .await
        .map(|b| String::from_utf8_lossy(&b).chars().take(200).collect())
        .unwrap_or_default();
    Err(CallError::Status {
        status: status.as_u16(),
        body,
    })
}

/// Reads a whole body, refusing more than `max` bytes.
async fn read_body(
    mut response: reqwest::Response,
    max: usize,
    what: &'static str,
) -> Result<Vec<u8>, CallError> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if out.len() + chunk.len() > max {
            return Err(CallError::TooLarge { what, max });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The body's chunks, at most `max` bytes in all: a stream that goes on past it ends with an
/// error rather than growing without bound.
fn chunks(response: reqwest::Response, max: usize) -> impl Stream<Item = Result<Bytes, CallError>> {
    futures::stream::unfold(Some((response, 0usize)), move |state| async move {
        let (mut response, received) = state?;
        match response.chunk().await {
            Ok(None) => None,
            Ok(Some(chunk)) if received + chunk.len() > max => Some((
                Err(CallError::TooLarge {
                    what: "the event stream",
                    max,
                }),
                None,
            )),
            Ok(Some(chunk)) => {
                let received = received + chunk.len();
                Some((Ok(chunk), Some((response, received))))
            }
            // Nothing is read after an error.
            Err(e) => Some((Err(transport(e)), None)),
        }
    })
}

/// A failed connection or read, with its causes.
fn transport(e: reqwest::Error) -> CallError {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    CallError::Transport(text)
}
