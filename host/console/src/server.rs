//! The HTTP side of `seam ui`: the guards of Seam's HTTP servers, the page's files, the JSON
//! API and its stream of events.
//!
//! With a token (required off loopback) every request must carry it: as `Authorization: Bearer
//! TOKEN` (a script), or in the cookie a browser gets by opening the page once at
//! `/?token=TOKEN` (a page cannot set headers on its navigation or its event stream). A request
//! that changes something is a POST whose body is JSON (`Content-Type: application/json`): a
//! page of another origin cannot send one without the preflight this server never grants.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use hyper::body::Incoming;
use seam_sandbox::http_guard::{self, Guards};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::{Console, Page, Reply};
use crate::assets;
use crate::held::Held;
use crate::host::ConsoleHost;
use crate::live::Live;

/// Connections served at once; past it the listener waits for one to close.
const MAX_CONNECTIONS: usize = 256;

/// The cookie that carries the token for a browser.
pub const TOKEN_COOKIE: &str = "seam-ui-token";

/// How `seam ui` serves: where (`bound`), and its guards.
pub type HttpOptions = Guards;

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Why `seam ui` cannot start: the guards refuse the address or the token, or it cannot be
/// bound.
pub type ServeError = http_guard::ListenError;

/// A bound console, not yet serving.
pub struct ConsoleServer {
    listener: TcpListener,
    guards: Guards,
    host: ConsoleHost,
}

impl ConsoleServer {
    /// Checks the guards (a token off loopback) and binds the address.
    pub async fn bind(guards: HttpOptions, host: ConsoleHost) -> Result<Self, ServeError> {
        let listener = http_guard::listen(guards.bound, guards.token.as_deref()).await?;
        Ok(Self {
            listener,
            guards,
            host,
        })
    }

    /// The address actually bound (port 0 asks for any free port).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled; then every running turn is cancelled and every
    /// session's agent disposed. New sessions' agents work in `working_directory`.
    pub async fn serve(self, working_directory: String, shutdown: CancellationToken) {
        let live = Live::new();
        let listener_id = live.follow(&self.host.events);
        let watcher = live
            .watch_store(self.host.store().clone(), shutdown.clone())
            .await;
        let held = Held::new(self.host.clone(), working_directory, live.clone());
        let surface = self.host.approvals().add_surface(Arc::new(Page));
        let console = Arc::new(Console {
            host: self.host.clone(),
            held: held.clone(),
            live,
            gists: Default::default(),
            shutdown: shutdown.clone(),
        });
        let guard = Arc::new(Guard {
            guards: self.guards,
            console,
        });
        let acceptor = http_guard::Acceptor::new(self.listener, MAX_CONNECTIONS, "seam ui");
        let connections = http_guard::serve_http1(acceptor, &shutdown, move |request| {
            let guard = guard.clone();
            async move { guard.serve(request).await }
        })
        .await;
        drop(surface);
        self.host.events.unsubscribe(listener_id);
        watcher.abort();
        held.shut_down().await;
        connections.close().await;
    }
}

/// The guards, then the page's files or the API.
struct Guard {
    guards: Guards,
    console: Arc<Console>,
}

/// The value of the cookie `name` in `headers`.
fn cookie<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The `token` of a query string.
fn query_token(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
}

impl Guard {
    async fn serve(&self, mut request: Request<Incoming>) -> Response<Body> {
        // A browser's ways of carrying the token become the header the guards check.
        let login = if self.guards.token.is_some() && request.method() == Method::GET {
            query_token(request.uri().query())
        } else {
            None
        };
        let carried = match &login {
            Some(token) => Some(token.clone()),
            None if !request.headers().contains_key(header::AUTHORIZATION) => {
                cookie(request.headers(), TOKEN_COOKIE).map(str::to_string)
            }
            None => None,
        };
        if let Some(token) = carried {
            if let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}")) {
                request.headers_mut().insert(header::AUTHORIZATION, value);
            }
        }
        let (parts, body) = match self.guards.admit(request).await {
            Ok(admitted) => admitted.into_parts(),
            Err(refused) => return refused.map(BodyExt::boxed_unsync),
        };
        if let Some(token) = login {
            // In: the cookie carries the token from now on, and the address bar loses it.
            return see_other(parts.uri.path(), &token);
        }
        let path = parts.uri.path();
        if parts.method == Method::POST && !is_json(&parts.headers) {
            return text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "seam ui takes JSON: send `Content-Type: application/json`",
            );
        }
        if path == "/api" || path.starts_with("/api/") {
            return match self
                .console
                .api(&parts.method, path, parts.uri.query(), &body)
                .await
            {
                Reply::Json(status, value) => json(status, &value),
                Reply::Events(stream) => {
                    let mut response = Response::new(BodyExt::boxed_unsync(stream));
                    let headers = response.headers_mut();
                    headers.insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("text/event-stream"),
                    );
                    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                    response
                }
            };
        }
        match (parts.method, assets::asset(path)) {
            (Method::GET, Some(asset)) => {
                let mut response = answer(
                    StatusCode::OK,
                    asset.content_type,
                    Bytes::from_static(asset.bytes),
                );
                response.headers_mut().insert(
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static(assets::CONTENT_SECURITY_POLICY),
                );
                response
            }
            _ => text(
                StatusCode::NOT_FOUND,
                "seam ui serves its page at / and its JSON API under /api",
            ),
        }
    }
}

/// Whether the request's body is declared JSON.
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// Headers every answer carries: no sniffing of content types, no framing, nothing cached.
fn secure(headers: &mut http::HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    answer(status, "application/json", Bytes::from(value.to_string()))
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    answer(
        status,
        "text/plain; charset=utf-8",
        Bytes::from_static(body.as_bytes()),
    )
}

fn answer(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed_unsync());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    secure(headers);
    response
}

/// `303 See Other` to `path`, setting the token's cookie.
fn see_other(path: &str, token: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed_unsync());
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(path) {
        headers.insert(header::LOCATION, location);
    }
    // The token came through the guards' check, so it is a header-safe value.
    if let Ok(cookie) = HeaderValue::from_str(&format!(
        "{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    )) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    secure(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_and_queries_are_read() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; seam-ui-token=s3cret; b=2"),
        );
        assert_eq!(cookie(&headers, TOKEN_COOKIE), Some("s3cret"));
        assert_eq!(cookie(&headers, "c"), None);
        assert_eq!(query_token(Some("x=1&token=a%20b")), Some("a b".into()));
        assert_eq!(query_token(None), None);
        let mut json_headers = http::HeaderMap::new();
        json_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(is_json(&json_headers));
        assert!(!is_json(&headers));
    }
}
