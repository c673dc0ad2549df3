//! `seam mcp --http ADDR`: the MCP server over streamable HTTP (rmcp's `StreamableHttpService`
//! on a hyper HTTP/1.1 server), one [`McpServer`] per session.
//!
//! The guards, checked before rmcp sees a request (decided by `seam_sandbox::http_guard`, which
//! `seam a2a --http` shares):
//! - an address that is not loopback is served only with a bearer token, and a token, once
//!   given, is required of every request (`Authorization: Bearer ...`, compared in constant
//!   time);
//! - `Origin`, when a browser sends one, must be a loopback origin or one allowed by name, and
//!   `Host` a loopback name or one allowed (against DNS rebinding; rmcp checks both);
//! - a request body is at most `max_request_bytes` (413 past it), and at most `max_sessions`
//!   sessions are open at once (a new one past it is refused with 503).
//!
//! A session's `DELETE` is answered 204 (rmcp says 202, which clients take as a failure).
//!
//! Every request's body is read (within its cap) before any answer is given, refusals
//! included: hyper closes a kept-alive connection whose request body was left unread if that
//! body had not arrived yet, and may already have sent the answer without `Connection: close`,
//! so a client reusing the connection saw it drop without an answer (a race that lost the MCP
//! SDK's second request under load). A request without the token has its body read and
//! dropped, never held; a body past its cap is refused with `Connection: close`, its rest
//! unread.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use seam_sandbox::http_guard;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::handler::McpServer;
use super::ToolHost;

/// Connections served at once; past it the listener waits for one to close.
const MAX_CONNECTIONS: usize = 256;

/// The top-level caller every HTTP client's calls are made as.
pub const HTTP_CALLER: &str = "mcp-http";

/// How `seam mcp --http` serves.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The bearer token every request must carry; required when `addr` is not loopback.
    pub bearer_token: Option<String>,
    /// Browser origins allowed besides the loopback ones (`http://localhost:*` and the like),
    /// each with its scheme (`https://app.example.com:443`).
    pub allowed_origins: Vec<String>,
    /// `Host` names (or `host:port`) allowed besides the loopback ones. Off loopback with none
    /// given, any `Host` is accepted: the token is then what guards the server.
    pub allowed_hosts: Vec<String>,
    /// The largest request body accepted.
    pub max_request_bytes: usize,
    /// The most sessions open at once.
    pub max_sessions: usize,
}

impl HttpOptions {
    /// Loopback-only defaults for `addr`: no token, 4 MiB requests, 64 sessions.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            bearer_token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_request_bytes: 4 << 20,
            max_sessions: 64,
        }
    }
}

/// Why the HTTP server cannot start: the guards refuse the address or the token, or it cannot
/// be bound.
pub type HttpError = http_guard::ListenError;

/// A bound MCP HTTP endpoint, not yet serving.
pub struct McpHttp {
    listener: TcpListener,
    options: HttpOptions,
}

type Body = BoxBody<Bytes, Infallible>;

impl McpHttp {
    /// Checks the options and binds the address.
    pub async fn bind(options: HttpOptions) -> Result<Self, HttpError> {
        let listener = http_guard::listen(options.addr, options.bearer_token.as_deref()).await?;
        Ok(Self { listener, options })
    }

    /// The address actually bound (port 0 asks for any free port).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `host`'s tools until `shutdown` is cancelled; then every session ends.
    pub async fn serve(
        self,
        host: ToolHost,
        working_directory: String,
        shutdown: CancellationToken,
    ) {
        let options = self.options;
        let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("http://{h}:*"))
            .collect();
        origins.extend(options.allowed_origins.iter().cloned());
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_origins(origins)
            .with_max_request_body_bytes(options.max_request_bytes)
            .with_cancellation_token(shutdown.child_token());
        if !options.allowed_hosts.is_empty() {
            let mut hosts = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
            hosts.extend(options.allowed_hosts.iter().cloned());
            config = config.with_allowed_hosts(hosts);
        } else if !options.addr.ip().is_loopback() {
            config = config.disable_allowed_hosts();
        }
        let sessions = Arc::new(LocalSessionManager::default());
        let service = StreamableHttpService::new(
            move || {
                Ok(McpServer::new(
                    host.clone(),
                    HTTP_CALLER,
                    working_directory.clone(),
                ))
            },
            sessions.clone(),
            config,
        );
        let guard = Arc::new(Guard {
            guards: http_guard::Guards {
                bound: options.addr,
                token: options.bearer_token.clone(),
                allowed_origins: options.allowed_origins.clone(),
                allowed_hosts: options.allowed_hosts.clone(),
                max_request_bytes: options.max_request_bytes,
            },
            max_sessions: options.max_sessions,
            sessions,
        });
        let acceptor = http_guard::Acceptor::new(self.listener, MAX_CONNECTIONS, "seam mcp");
        let connections = http_guard::serve_http1(acceptor, &shutdown, move |request| {
            let (service, guard) = (service.clone(), guard.clone());
            async move { guard.serve(&service, request).await }
        })
        .await;
        connections.close().await;
    }
}

/// What is checked before rmcp sees a request: the body's size, the bearer token and the
/// session count.
struct Guard {
    guards: http_guard::Guards,
    max_sessions: usize,
    sessions: Arc<LocalSessionManager>,
}

impl Guard {
    /// The answer to `request`: a refusal, or rmcp's.
    async fn serve(
        &self,
        service: &StreamableHttpService<McpServer, LocalSessionManager>,
        request: Request<Incoming>,
    ) -> Response<Body> {
        // rmcp checks Origin and Host too; refused here first, so that both servers decide
        // alike.
        let (parts, body) = match self.guards.admit(request).await {
            Ok(admitted) => admitted.into_parts(),
            Err(refused) => return refused.map(BodyExt::boxed),
        };
        let body = Full::new(body);
        // A POST without a session id opens a session (or is a stateless request).
        let opens =
            parts.method == hyper::Method::POST && !parts.headers.contains_key("mcp-session-id");
        if opens && self.sessions.sessions.read().await.len() >= self.max_sessions {
            return http_guard::plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many MCP sessions are open",
            )
            .map(BodyExt::boxed);
        }
        let deleting = parts.method == hyper::Method::DELETE;
        let answer = service.handle(Request::from_parts(parts, body)).await;
        // rmcp answers a session's DELETE with 202, which MCP clients do not take as the
        // session ended (the Python SDK accepts 200 or 204 and warns "Session termination
        // failed: 202"): it is ended, with nothing to say.
        if deleting && answer.status() == StatusCode::ACCEPTED {
            let mut ended = Response::new(Full::new(Bytes::new()).boxed());
            *ended.status_mut() = StatusCode::NO_CONTENT;
            return ended;
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn off_loopback_needs_a_token() {
        let addr: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let refused = McpHttp::bind(HttpOptions::new(addr)).await;
        assert!(matches!(
            refused,
            Err(HttpError::Refused(http_guard::BindRefused::TokenRequired(
                _
            )))
        ));
        let mut options = HttpOptions::new(addr);
        options.bearer_token = Some(String::new());
        assert!(matches!(
            McpHttp::bind(options).await,
            Err(HttpError::Refused(http_guard::BindRefused::EmptyToken))
        ));
    }
}
