//! `seam a2a CONFIG --http ADDR`: a host's top-level agent served as an A2A 1.0 agent over the
//! JSON-RPC binding (POST to the interface URL; streams as `text/event-stream`), with its Agent
//! Card at `/.well-known/agent-card.json`.
//!
//! The model: a **context** is a top-level agent session (`contextId` = its Seam session id, kept
//! in the config's session store), and a **task** is one turn of it (`taskId` =
//! `"{session}.{turn}"`). Tasks are read back from the store ([`tasks`]), so they outlive the
//! process; what only this process knows (a turn running here, an approval it waits for) is
//! laid over the store's record.
//!
//! - [`settings`]: the `[a2a]` table;
//! - [`card`]: the Agent Card;
//! - [`tasks`]: task <-> turn, reading tasks back from the store;
//! - `contexts`: the contexts open here and their running turns;
//! - `methods`: the JSON-RPC methods;
//! - `stream`: the tree's events as status updates, and server-sent events;
//! - `push`: push-notification webhooks;
//! - `approval`: the clients as an approvals surface.
//!
//! The guards are `seam mcp --http`'s (`seam_sandbox::http_guard`): a bearer token (required off
//! loopback, then of every request), `Origin` and `Host` checks, a capped request body (413
//! past it), every body read before the answer.

mod approval;
pub mod card;
mod contexts;
mod host;
mod methods;
mod push;
pub mod settings;
mod stream;
pub mod tasks;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use a2a::{A2AError, JsonRpcId, JsonRpcRequest};
use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use seam_sandbox::http_guard;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::wire;

pub use host::A2aHost;
pub use settings::{A2aSettings, SettingsError};

/// Connections served at once; past it the listener waits for one to close.
const MAX_CONNECTIONS: usize = 256;

/// How `seam a2a --http` serves: where (`bound`), and its guards (a token, required off
/// loopback; the origins and hosts allowed; the largest request body).
pub type HttpOptions = http_guard::Guards;

/// Why `seam a2a` cannot start.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The guards refuse the address or the token, or the address cannot be bound.
    #[error(transparent)]
    Listen(#[from] http_guard::ListenError),
    /// A key of `[a2a]` has a value that cannot be used.
    #[error("[a2a]: {0}")]
    Settings(#[from] SettingsError),
    /// `[a2a] skills` names a provider that is not loaded.
    #[error("[a2a]: key `skills`: no provider `{0}` is loaded")]
    UnknownSkill(String),
}

/// A bound A2A endpoint, not yet serving.
pub struct A2aServer {
    listener: TcpListener,
    options: HttpOptions,
    host: A2aHost,
    settings: A2aSettings,
    skills: Vec<seam_core::types::ProviderDescriptor>,
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

impl A2aServer {
    /// Checks the options and `settings` against `host` (every skill a loaded provider), and
    /// binds the address.
    pub async fn bind(
        options: HttpOptions,
        host: A2aHost,
        settings: A2aSettings,
    ) -> Result<Self, ServeError> {
        // Refused before the settings are read: an address off loopback without a token.
        http_guard::check_bind(options.bound, options.token.as_deref())
            .map_err(http_guard::ListenError::from)?;
        settings.validate()?;
        let skills = settings
            .skills
            .iter()
            .map(|name| {
                host.subagents
                    .descriptor(name)
                    .map(|d| (*d).clone())
                    .ok_or_else(|| ServeError::UnknownSkill(name.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let listener = http_guard::listen(options.bound, options.token.as_deref()).await?;
        Ok(Self {
            listener,
            options,
            host,
            settings,
            skills,
        })
    }

    /// The address actually bound (port 0 asks for any free port).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The URL clients reach the server at: `[a2a] url`, else `http://ADDR/`.
    pub fn url(&self) -> std::io::Result<String> {
        match &self.settings.url {
            Some(url) => Ok(url.clone()),
            None => Ok(format!("http://{}/", self.local_addr()?)),
        }
    }

    /// Serves until `shutdown` is cancelled; then every running turn is cancelled and every
    /// context's agent disposed. New contexts' agents work in `working_directory`.
    pub async fn serve(self, working_directory: String, shutdown: CancellationToken) {
        let url = self.url().unwrap_or_default();
        let system_prompt = self.host.agents.defaults().system_prompt;
        let card = card::card(&self.settings, &url, system_prompt.as_deref(), &self.skills);
        let card = Bytes::from(serde_json::to_vec(&card).unwrap_or_default());
        let push = push::Push::new(self.settings.origins().unwrap_or_default());
        let contexts: Arc<contexts::Contexts> = Arc::default();
        let served = Arc::new(methods::Served::new(
            self.host.clone(),
            contexts.clone(),
            push,
            working_directory,
        ));
        let listener_id = stream::follow(
            &self.host.events,
            self.host.agents.clone(),
            contexts.clone(),
        );
        let surface = self
            .host
            .approvals
            .add_surface(Arc::new(approval::Clients::new(&contexts)));
        let guard = Arc::new(Guard {
            guards: self.options.clone(),
            card,
            served: served.clone(),
        });
        let acceptor = http_guard::Acceptor::new(self.listener, MAX_CONNECTIONS, "seam a2a");
        let connections = http_guard::serve_http1(acceptor, &shutdown, move |request| {
            let guard = guard.clone();
            async move { guard.serve(request).await }
        })
        .await;
        drop(surface);
        self.host.events.unsubscribe(listener_id);
        served.shut_down().await;
        connections.close().await;
    }
}

/// The guards, then the card or the JSON-RPC methods.
struct Guard {
    guards: http_guard::Guards,
    card: Bytes,
    served: Arc<methods::Served>,
}

impl Guard {
    async fn serve(&self, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = match self.guards.admit(request).await {
            Ok(admitted) => admitted.into_parts(),
            Err(refused) => return refused.map(BodyExt::boxed_unsync),
        };
        match parts.method {
            hyper::Method::GET if parts.uri.path() == wire::CARD_PATH => {
                json_response(StatusCode::OK, self.card.clone())
            }
            hyper::Method::POST => self.rpc(&parts.headers, &body).await,
            _ => http_guard::plain(
                StatusCode::NOT_FOUND,
                "seam a2a serves the agent card (GET /.well-known/agent-card.json) and \
                 JSON-RPC (POST)",
            )
            .map(BodyExt::boxed_unsync),
        }
    }

    async fn rpc(&self, headers: &hyper::HeaderMap, body: &[u8]) -> Response<Body> {
        let request: JsonRpcRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                let error = if serde_json::from_slice::<serde_json::Value>(body).is_ok() {
                    A2AError::invalid_request(format!("not a JSON-RPC request: {e}"))
                } else {
                    A2AError::parse_error(format!("the body is not JSON: {e}"))
                };
                return rpc_error(JsonRpcId::Null, &error);
            }
        };
        let version = headers
            .get(wire::VERSION_HEADER)
            .and_then(|v| v.to_str().ok());
        if version.map(str::trim) != Some(wire::VERSION) {
            let error = A2AError::new(
                a2a::error_code::VERSION_NOT_SUPPORTED,
                format!(
                    "seam speaks A2A {}: send the header `{}: {}` (this request {})",
                    wire::VERSION,
                    wire::VERSION_HEADER,
                    wire::VERSION,
                    match version {
                        Some(v) => format!("asked for version `{v}`"),
                        None => "named no version, which means 0.3".to_string(),
                    }
                ),
            );
            return rpc_error(request.id, &error);
        }
        match self
            .served
            .call(&request.id, &request.method, request.params)
            .await
        {
            methods::Answer::Json(Ok(result)) => json_response(
                StatusCode::OK,
                Bytes::from(wire::success(request.id, &result)),
            ),
            methods::Answer::Json(Err(e)) => rpc_error(request.id, &e),
            methods::Answer::Stream(body) => {
                let mut response = Response::new(BodyExt::boxed_unsync(body));
                let headers = response.headers_mut();
                headers.insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/event-stream"),
                );
                headers.insert(
                    hyper::header::CACHE_CONTROL,
                    hyper::header::HeaderValue::from_static("no-cache"),
                );
                response
            }
        }
    }
}

fn rpc_error(id: JsonRpcId, error: &A2AError) -> Response<Body> {
    json_response(StatusCode::OK, Bytes::from(wire::failure(id, error)))
}

fn json_response(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed_unsync());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
