//! `wasi:http` on a tape. Recording, each response a component gets (status, headers, and its
//! body, read in full within the plugin's caps; or the error) is taken down as an `http` entry
//! under the store's key, with the request's method and URI and its place among the store's
//! requests. Replaying, nothing is sent: the request's body is read (within the same caps) and
//! the recorded response at its place is handed back if the method and URI match; otherwise,
//! or with none recorded there, the replay diverged and the request fails as denied.
//!
//! Errors are taken down by their kind (`connection-refused`, `response-body-size`, ...) and
//! replayed as that kind; trailers are not recorded.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use seam_core::cassette::Kind;
use seam_core::tape::Divergence;
use serde_json::{json, Value};
use wasmtime_wasi_http::{Error, WasiBody};

use super::replay::StoreTape;

type Sent = Box<dyn std::future::Future<Output = Result<(), Error>> + Send>;

/// A store's HTTP on its tape: how many requests it sent, and (replaying) the responses
/// recorded for it not handed back yet.
pub struct HttpTape {
    store: StoreTape,
    sent: u64,
    recorded: VecDeque<Value>,
}

impl HttpTape {
    /// The HTTP of the store on `store`'s tape; replaying, with every response recorded for it.
    pub fn new(store: StoreTape) -> Self {
        let recorded = if store.replaying() {
            store.tape().play_rest(store.key(), Kind::Http).into()
        } else {
            VecDeque::new()
        };
        Self {
            store,
            sent: 0,
            recorded,
        }
    }

    /// Whether requests are answered from the recording rather than sent.
    pub fn replaying(&self) -> bool {
        self.store.replaying()
    }

    /// Counts one more request of the store: its place, from 1.
    pub fn count_request(&mut self) -> u64 {
        self.sent += 1;
        self.sent
    }

    /// Replaying: the recorded response at place `n` if it was for `method uri`; else the
    /// divergence is kept and `None` returned.
    pub fn play(&mut self, n: u64, method: &str, uri: &str) -> Option<Value> {
        let now = format!("{method} {uri}");
        // Recorded with their place, in the order they finished.
        let at = self
            .recorded
            .iter()
            .position(|r| r.get("n").and_then(Value::as_u64) == Some(n));
        let Some(entry) = at.and_then(|i| self.recorded.remove(i)) else {
            self.diverge(
                n,
                format!(
                    "the component sent {now} (its request {n}), and the recording has no \
                     request {n} for this store"
                ),
                Value::Null,
                now,
            );
            return None;
        };
        let recorded = format!(
            "{} {}",
            entry.get("method").and_then(Value::as_str).unwrap_or("?"),
            entry.get("uri").and_then(Value::as_str).unwrap_or("?")
        );
        if recorded != now {
            self.diverge(
                n,
                format!("the component sent {now}, the recording has {recorded}"),
                Value::String(recorded),
                now,
            );
            return None;
        }
        Some(entry)
    }

    fn diverge(&self, step: u64, what: String, recorded: Value, now: String) {
        self.store.tape().diverge(Divergence {
            key: self.store.key().to_string(),
            kind: Kind::Http,
            step,
            what,
            recorded,
            now: Value::String(now),
        });
    }

    /// The store on the tape, for recording.
    pub fn store(&self) -> &StoreTape {
        &self.store
    }
}

/// Recording: takes down what sending request `n` (`method uri`) gave, reading the response's
/// body in full first (the connection driven meanwhile); gives the guest the same: the status,
/// headers and bytes, and the body's error after them if reading it failed.
pub async fn record(
    store: StoreTape,
    n: u64,
    method: String,
    uri: String,
    sent: Result<(http::Response<WasiBody>, Sent), Error>,
) -> Result<(http::Response<WasiBody>, Sent), Error> {
    let (response, io) = match sent {
        Ok(sent) => sent,
        Err(e) => {
            store.tape().record(
                store.key(),
                Kind::Http,
                json!({ "n": n, "method": method, "uri": uri, "error": error_json(&e) }),
            );
            return Err(e);
        }
    };
    // The connection's task moves the body's bytes: it runs while the body is read.
    let io = wasmtime_wasi::runtime::spawn(Box::into_pin(io));
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    let mut failed = None;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                }
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    drop(body);
    let mut entry = json!({
        "n": n,
        "method": method,
        "uri": uri,
        "status": parts.status.as_u16(),
        "headers": headers_json(&parts.headers),
    });
    put_body(&mut entry, &bytes);
    if let Some(e) = &failed {
        entry["body_error"] = error_json(e);
    }
    store.tape().record(store.key(), Kind::Http, entry);
    let response =
        http::Response::from_parts(parts, Played::new(bytes.into(), failed).boxed_unsync());
    Ok((response, Box::new(io) as Sent))
}

/// Replaying: reads the request's body (within `max` bytes, as a sent one would be) and gives
/// the recorded response `entry`.
pub async fn replay(
    request: http::Request<WasiBody>,
    max: u64,
    entry: Value,
) -> Result<(http::Response<WasiBody>, Sent), Error> {
    let mut body = request.into_body();
    let mut read = 0u64;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            read = read.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
            if read > max {
                return Err(Error::HttpRequestBodySize(Some(max)));
            }
        }
    }
    if let Some(e) = entry.get("error") {
        return Err(error_of(e));
    }
    let status = entry
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| http::StatusCode::from_u16(s).ok())
        .ok_or_else(|| Error::InternalError(Some("a recorded response with no status".into())))?;
    let mut response = http::Response::builder().status(status);
    for pair in entry
        .get("headers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(name), Some(value)) = (
            pair.get(0).and_then(Value::as_str),
            pair.get(1).and_then(Value::as_str),
        ) {
            response = response.header(name, value);
        }
    }
    let failed = entry.get("body_error").map(error_of);
    let response = response
        .body(Played::new(body_of(&entry).into(), failed).boxed_unsync())
        .map_err(|e| Error::InternalError(Some(format!("a recorded response: {e}"))))?;
    Ok((response, Box::new(async { Ok(()) }) as Sent))
}

fn headers_json(headers: &http::HeaderMap) -> Value {
    headers
        .iter()
        .map(|(name, value)| json!([name.as_str(), String::from_utf8_lossy(value.as_bytes())]))
        .collect()
}

/// The body as text when it is UTF-8 (readable and editable in a cassette), else in hex.
fn put_body(entry: &mut Value, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => entry["body"] = text.into(),
        Err(_) => {
            entry["body_hex"] = bytes
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                .into();
        }
    }
}

fn body_of(entry: &Value) -> Vec<u8> {
    if let Some(text) = entry.get("body").and_then(Value::as_str) {
        return text.as_bytes().to_vec();
    }
    let hex = entry.get("body_hex").and_then(Value::as_str).unwrap_or("");
    (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// An error as recorded: its kind, what the guest would be told, and its words.
fn error_json(e: &Error) -> Value {
    let (code, size) = match e {
        Error::HttpRequestDenied => ("denied", None),
        Error::Connect(io) if io.kind() == std::io::ErrorKind::AddrNotAvailable => {
            ("dns-error", None)
        }
        Error::Connect(io) if io.to_string().starts_with("failed to lookup address") => {
            ("dns-error", None)
        }
        Error::Connect(_) | Error::ConnectionRefused => ("connection-refused", None),
        Error::ConnectionTimeout => ("connection-timeout", None),
        Error::ConnectionReadTimeout => ("connection-read-timeout", None),
        Error::ConnectionTerminated => ("connection-terminated", None),
        Error::DnsTimeout => ("dns-timeout", None),
        Error::DnsError { .. } => ("dns-error", None),
        Error::DestinationNotFound => ("destination-not-found", None),
        Error::Tls(_) | Error::TlsProtocolError => ("tls-protocol-error", None),
        Error::TlsCertificateError => ("tls-certificate-error", None),
        Error::HttpRequestBodySize(n) => ("request-body-size", *n),
        Error::HttpResponseBodySize(n) => ("response-body-size", *n),
        Error::HttpResponseIncomplete => ("response-incomplete", None),
        Error::HttpResponseTimeout => ("response-timeout", None),
        Error::Hyper(h) if h.is_timeout() => ("response-timeout", None),
        Error::Hyper(_) | Error::HttpProtocolError => ("protocol-error", None),
        _ => ("internal", None),
    };
    json!({ "code": code, "size": size, "message": e.to_string() })
}

/// The error `v` records, of the same kind.
fn error_of(v: &Value) -> Error {
    let size = v.get("size").and_then(Value::as_u64);
    let message = v.get("message").and_then(Value::as_str).map(str::to_string);
    match v.get("code").and_then(Value::as_str).unwrap_or("internal") {
        "denied" => Error::HttpRequestDenied,
        "connection-refused" => Error::ConnectionRefused,
        "connection-timeout" => Error::ConnectionTimeout,
        "connection-read-timeout" => Error::ConnectionReadTimeout,
        "connection-terminated" => Error::ConnectionTerminated,
        "dns-timeout" => Error::DnsTimeout,
        "dns-error" => Error::DnsError {
            rcode: Some("address not available".into()),
            info_code: None,
        },
        "destination-not-found" => Error::DestinationNotFound,
        "tls-protocol-error" => Error::TlsProtocolError,
        "tls-certificate-error" => Error::TlsCertificateError,
        "request-body-size" => Error::HttpRequestBodySize(size),
        "response-body-size" => Error::HttpResponseBodySize(size),
        "response-incomplete" => Error::HttpResponseIncomplete,
        "response-timeout" => Error::HttpResponseTimeout,
        "protocol-error" => Error::HttpProtocolError,
        _ => Error::InternalError(message),
    }
}

/// A body already read: its bytes in one frame, then the error reading it ended with, if any.
struct Played {
    bytes: Option<Bytes>,
    failed: Option<Error>,
}

impl Played {
    fn new(bytes: Bytes, failed: Option<Error>) -> Self {
        Self {
            bytes: (!bytes.is_empty()).then_some(bytes),
            failed,
        }
    }
}

impl Body for Played {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if let Some(bytes) = self.bytes.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        Poll::Ready(self.failed.take().map(Err))
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none() && self.failed.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.bytes, &self.failed) {
            (Some(b), None) => SizeHint::with_exact(b.len() as u64),
            (None, None) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_utf8_round_trips_in_hex() {
        let mut entry = json!({});
        put_body(&mut entry, &[0xff, 0x00, 0x41]);
        assert_eq!(entry["body_hex"], "ff0041");
        assert_eq!(body_of(&entry), vec![0xff, 0x00, 0x41]);
        let mut entry = json!({});
        put_body(&mut entry, b"text");
        assert_eq!(
            (entry["body"].as_str(), body_of(&entry)),
            (Some("text"), b"text".to_vec())
        );
    }

    #[test]
    fn errors_are_replayed_as_their_kind() {
        for e in [
            Error::ConnectionRefused,
            Error::HttpResponseBodySize(Some(7)),
            Error::Connect(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
            Error::InternalError(Some("odd".into())),
        ] {
            let recorded = error_json(&e);
            assert_eq!(
                error_json(&error_of(&recorded))["code"],
                recorded["code"],
                "{e}"
            );
        }
        assert!(matches!(
            error_of(&error_json(&Error::HttpResponseBodySize(Some(7)))),
            Error::HttpResponseBodySize(Some(7))
        ));
    }

    #[tokio::test]
    async fn a_played_body_gives_its_bytes_then_its_error() {
        let mut body = Played::new(
            Bytes::from_static(b"abc"),
            Some(Error::ConnectionReadTimeout),
        );
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.data_ref().unwrap().as_ref(), b"abc");
        assert!(matches!(
            body.frame().await,
            Some(Err(Error::ConnectionReadTimeout))
        ));
        assert!(body.frame().await.is_none());
        assert!(body.is_end_stream());
    }
}
