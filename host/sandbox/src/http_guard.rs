//! The guards of Seam's HTTP servers (`seam mcp --http`, `seam a2a --http`), decided in one
//! place so that both refuse the same requests for the same reasons:
//!
//! - an address that is not loopback is served only with a bearer token ([`check_bind`]), and a
//!   token, once given, is required of every request (`Authorization: Bearer ...`, compared in
//!   constant time: [`bearer_ok`]);
//! - `Origin`, when a browser sends one, must be a loopback origin or one allowed by name
//!   ([`origin_allowed`]), and `Host` a loopback name or one allowed, against DNS rebinding
//!   ([`host_allowed`]);
//! - a request body is at most a given size: a declared `Content-Length` past it is refused
//!   before a byte is read ([`declared_too_large`]), and the body is read within the cap
//!   ([`read_capped`]), or read and dropped for a refused request ([`drain_capped`]).
//!
//! Every request's body is read (within its cap) before any answer is given, refusals included:
//! hyper closes a kept-alive connection whose request body was left unread if that body had not
//! arrived yet, and may already have sent the answer without `Connection: close`, so a client
//! reusing the connection saw it drop without an answer.
//!
//! [`Guards::admit`] applies them all, in that order, and gives either the request with its
//! body read, or the refusal to send.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use thiserror::Error;

/// The default cap of a request body (4 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 << 20;

/// Why a server cannot start with the guards it was given.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BindRefused {
    /// An address other than loopback was asked for without a token.
    #[error("`{0}` is not a loopback address: serving there needs a bearer token (--token-env)")]
    TokenRequired(SocketAddr),
    /// A token was given but is empty.
    #[error("the bearer token is empty")]
    EmptyToken,
}

/// Whether `addr` may be served with `token`: off loopback a token is required, and a token is
/// never empty.
pub fn check_bind(addr: SocketAddr, token: Option<&str>) -> Result<(), BindRefused> {
    if token == Some("") {
        return Err(BindRefused::EmptyToken);
    }
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(BindRefused::TokenRequired(addr));
    }
    Ok(())
}

/// Why a server cannot listen.
#[derive(Debug, Error)]
pub enum ListenError {
    /// The guards refuse the address or the token (off loopback without a token, an empty
    /// token).
    #[error(transparent)]
    Refused(#[from] BindRefused),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Checks that `addr` may be served with `token` ([`check_bind`]), then binds it.
pub async fn listen(
    addr: SocketAddr,
    token: Option<&str>,
) -> Result<tokio::net::TcpListener, ListenError> {
    check_bind(addr, token)?;
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError::Bind { addr, source })
}

/// Compares in time that depends on the lengths only (a token's bytes are not leaked by how
/// long a wrong guess takes).
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `headers` carry the bearer token `token` (always, when none is required).
pub fn bearer_ok(headers: &HeaderMap, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    let given = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    same_secret(given.as_bytes(), token.as_bytes())
}

/// Whether `host` (a name or address, without port; IPv6 with or without brackets) is a
/// loopback one.
pub fn is_loopback_name(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.eq_ignore_ascii_case("localhost") {
        return true;
    }
    bare.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The host of a `Host` header value or an authority (`name`, `name:port`, `[::1]:port`).
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// Whether the request's `Origin` (if it has one: only browsers send it) is allowed: a
/// loopback origin (`http://localhost:*`, `http://127.0.0.1:*`, `http://[::1]:*`) or one of
/// `allowed`, compared whole ignoring case (each written with its scheme, and its port if not
/// the default: `https://app.example.com`).
pub fn origin_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if let Some(authority) = origin.strip_prefix("http://") {
        if !authority.contains('/')
            && !authority.contains('@')
            && is_loopback_name(host_of(authority))
        {
            return true;
        }
    }
    let origin = origin.trim_end_matches('/');
    allowed
        .iter()
        .any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(origin))
}

/// Whether the request's `Host` is allowed: a loopback name, or one of `allowed` (a name, or
/// `name:port` to allow that port only). With none allowed, a server bound off loopback
/// accepts any `Host` (the token is then what guards it), and one on loopback only loopback
/// names (against DNS rebinding).
pub fn host_allowed(headers: &HeaderMap, allowed: &[String], bound: SocketAddr) -> bool {
    if allowed.is_empty() && !bound.ip().is_loopback() {
        return true;
    }
    let Some(host) = headers.get(http::header::HOST) else {
        // HTTP/1.1 requires it; a request without one names nothing to rebind.
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    if is_loopback_name(host_of(host)) {
        return true;
    }
    allowed
        .iter()
        .any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(host_of(host)))
}

/// Whether the request declares a body longer than `max` (refused before a byte is read).
pub fn declared_too_large(headers: &HeaderMap, max: usize) -> bool {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > max as u64)
}

/// Why a body could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BodyRefused {
    /// It is longer than the cap (answer 413, and close the connection: its rest is unread).
    #[error("the request body is too large")]
    TooLarge,
    /// The connection failed mid-body (answer 400, and close the connection).
    #[error("the request body could not be read")]
    Unreadable,
}

/// Reads a whole body of at most `max` bytes.
pub async fn read_capped<B>(body: B, max: usize) -> Result<Bytes, BodyRefused>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match Limited::new(body, max).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyRefused::TooLarge),
        Err(_) => Err(BodyRefused::Unreadable),
    }
}

/// Reads and drops a body of at most `max` bytes, holding none of it (for a request refused
/// before its body matters, so that the connection can carry the next one).
pub async fn drain_capped<B>(body: B, max: usize) -> Result<(), BodyRefused>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let body = Limited::new(body, max);
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        if let Err(e) = frame {
            return Err(if e.is::<http_body_util::LengthLimitError>() {
                BodyRefused::TooLarge
            } else {
                BodyRefused::Unreadable
            });
        }
    }
    Ok(())
}

/// The connections of a server: at most a number held at once, each accepted with
/// `TCP_NODELAY` (events and progress are small writes, which Nagle's algorithm would hold back
/// for the client's delayed ACK: 40 ms each on Linux).
pub struct Acceptor {
    listener: tokio::net::TcpListener,
    slots: std::sync::Arc<tokio::sync::Semaphore>,
    server: &'static str,
}

impl Acceptor {
    /// Accepts on `listener`, holding at most `max` connections; `server` names it in logs.
    pub fn new(listener: tokio::net::TcpListener, max: usize, server: &'static str) -> Self {
        Self {
            listener,
            slots: std::sync::Arc::new(tokio::sync::Semaphore::new(max)),
            server,
        }
    }

    /// The next connection, once a slot is free, with the slot it holds until dropped; `None`
    /// once `shutdown` is cancelled. A failed accept is logged and the next one waited for.
    pub async fn next(
        &self,
        shutdown: &tokio_util::sync::CancellationToken,
    ) -> Option<(tokio::net::TcpStream, tokio::sync::OwnedSemaphorePermit)> {
        let slot = tokio::select! {
            slot = self.slots.clone().acquire_owned() => slot.ok()?,
            () = shutdown.cancelled() => return None,
        };
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = shutdown.cancelled() => return None,
            };
            match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    return Some((stream, slot));
                }
                Err(e) => {
                    tracing::warn!(error = %e, server = self.server, "cannot accept a connection")
                }
            }
        }
    }
}

/// The connections a server has open, once it stops accepting.
pub struct Connections(tokio::task::JoinSet<()>);

impl Connections {
    /// Drops whatever connection is still open, and waits for each to be gone.
    pub async fn close(mut self) {
        self.0.abort_all();
        while self.0.join_next().await.is_some() {}
    }
}

/// Serves HTTP/1.1 on each connection `acceptor` gives, answering every request with
/// `answer`, until `shutdown` is cancelled; then each open connection is asked to end once its
/// answer in flight has (a stream ends at its next frame), and the connections are returned
/// for the server to close once it has wound down what their answers wait on.
pub async fn serve_http1<F, Fut, B>(
    acceptor: Acceptor,
    shutdown: &tokio_util::sync::CancellationToken,
    answer: F,
) -> Connections
where
    F: Fn(Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<B>> + Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut connections = tokio::task::JoinSet::new();
    while let Some((stream, slot)) = acceptor.next(shutdown).await {
        let answer = answer.clone();
        let stop = shutdown.clone();
        connections.spawn(async move {
            let _slot = slot;
            let serve = hyper::service::service_fn(move |request| {
                let reply = answer(request);
                async move { Ok::<_, std::convert::Infallible>(reply.await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), serve);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
            }
        });
        // Finished connections are collected as they go, not kept until shutdown.
        while connections.try_join_next().is_some() {}
    }
    Connections(connections)
}

/// What a server's guards are set to.
#[derive(Debug, Clone)]
pub struct Guards {
    /// The address served (what `Host` may name besides loopback names).
    pub bound: SocketAddr,
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
    /// Browser origins allowed besides the loopback ones.
    pub allowed_origins: Vec<String>,
    /// `Host` values allowed besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// The largest request body.
    pub max_request_bytes: usize,
}

/// A refusal, as the servers send it.
pub type Refusal = Response<Full<Bytes>>;

impl Guards {
    /// Loopback-only defaults for a server at `bound`: no token, no other origin or host,
    /// [`DEFAULT_MAX_REQUEST_BYTES`].
    pub fn new(bound: SocketAddr) -> Self {
        Self {
            bound,
            token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }

    /// `request` with its body read, if every guard lets it through; else the refusal to send
    /// (the body read and dropped within its cap, or the connection closed past it).
    pub async fn admit<B>(&self, request: Request<B>) -> Result<Request<Bytes>, Refusal>
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let max = self.max_request_bytes;
        // A declared length past the cap is refused before a byte of the body is read.
        if declared_too_large(request.headers(), max) {
            return Err(too_large());
        }
        let (parts, body) = request.into_parts();
        if !bearer_ok(&parts.headers, self.token.as_deref()) {
            let mut refused = plain(StatusCode::UNAUTHORIZED, "a bearer token is required");
            refused.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
            // Read and dropped: a client without the token makes the server hold nothing.
            return Err(match drain_capped(body, max).await {
                Ok(()) => refused,
                Err(_) => closing(refused),
            });
        }
        let body = match read_capped(body, max).await {
            Ok(body) => body,
            Err(BodyRefused::TooLarge) => return Err(too_large()),
            Err(BodyRefused::Unreadable) => {
                return Err(closing(plain(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read",
                )))
            }
        };
        if !origin_allowed(&parts.headers, &self.allowed_origins) {
            return Err(plain(
                StatusCode::FORBIDDEN,
                "the request's Origin is not allowed",
            ));
        }
        if !host_allowed(&parts.headers, &self.allowed_hosts, self.bound) {
            return Err(plain(
                StatusCode::FORBIDDEN,
                "the request's Host is not allowed",
            ));
        }
        Ok(Request::from_parts(parts, body))
    }
}

/// A plain-text answer.
pub fn plain(status: StatusCode, text: &'static str) -> Refusal {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
}

/// The refusal of a body past the cap, whose rest is left unread.
fn too_large() -> Refusal {
    closing(plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        "the request body is too large",
    ))
}

/// `response`, telling the client that the connection ends with it.
fn closing<B>(mut response: Response<B>) -> Response<B> {
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_secret(b"secret", b"secret"));
        assert!(!same_secret(b"secret", b"secreT"));
        assert!(!same_secret(b"secret", b"secret2"));
        assert!(!same_secret(b"", b"secret"));
        let given = headers(&[("authorization", "Bearer s3cret")]);
        assert!(bearer_ok(&given, Some("s3cret")));
        assert!(!bearer_ok(&given, Some("other")));
        assert!(!bearer_ok(&HeaderMap::new(), Some("s3cret")));
        assert!(bearer_ok(&HeaderMap::new(), None));
    }

    #[test]
    fn off_loopback_needs_a_token() {
        let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(check_bind(any, None), Err(BindRefused::TokenRequired(any)));
        assert_eq!(check_bind(lo, Some("")), Err(BindRefused::EmptyToken));
        assert_eq!(check_bind(any, Some("t")), Ok(()));
        assert_eq!(check_bind(lo, None), Ok(()));
    }

    #[test]
    fn origins_and_hosts() {
        let allowed = vec!["https://app.example.com".to_string()];
        assert!(origin_allowed(&HeaderMap::new(), &[]));
        assert!(origin_allowed(
            &headers(&[("origin", "http://localhost:3000")]),
            &[]
        ));
        assert!(origin_allowed(
            &headers(&[("origin", "http://[::1]:9")]),
            &[]
        ));
        assert!(!origin_allowed(
            &headers(&[("origin", "https://evil.example")]),
            &allowed
        ));
        assert!(origin_allowed(
            &headers(&[("origin", "https://app.example.com")]),
            &allowed
        ));
        assert!(!origin_allowed(
            &headers(&[("origin", "http://localhost.evil.example")]),
            &[]
        ));

        let lo: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:80".parse().unwrap();
        assert!(host_allowed(
            &headers(&[("host", "127.0.0.1:8080")]),
            &[],
            lo
        ));
        assert!(!host_allowed(
            &headers(&[("host", "evil.example:8080")]),
            &[],
            lo
        ));
        assert!(host_allowed(
            &headers(&[("host", "evil.example")]),
            &[],
            any
        ));
        let named = vec!["seam.example".to_string()];
        assert!(host_allowed(
            &headers(&[("host", "seam.example:443")]),
            &named,
            any
        ));
        assert!(!host_allowed(
            &headers(&[("host", "evil.example")]),
            &named,
            any
        ));
    }

    #[tokio::test]
    async fn bodies_are_capped() {
        let body = http_body_util::Full::new(Bytes::from_static(b"0123456789"));
        assert_eq!(read_capped(body.clone(), 10).await.unwrap().len(), 10);
        assert_eq!(
            read_capped(body.clone(), 9).await,
            Err(BodyRefused::TooLarge)
        );
        assert_eq!(drain_capped(body, 9).await, Err(BodyRefused::TooLarge));
        assert!(declared_too_large(
            &headers(&[("content-length", "11")]),
            10
        ));
        assert!(!declared_too_large(
            &headers(&[("content-length", "10")]),
            10
        ));
    }
}
