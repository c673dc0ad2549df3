//! `wasi:http` for plugins: outgoing requests, only to the origins the entry grants (`http`
//! under `[plugin.grants]`). A request elsewhere fails with the wasi:http `HTTP-request-denied`
//! error and one `warn` line naming the plugin, the origin and the grant to add. A granted one
//! goes through wasmtime-wasi-http's sender (TLS by rustls with bundled roots), within
//! `http_timeout_ms` and with at most `max_http_mb` of request and response bodies.
//! In a recorded tree the responses are taken down, and in a replay answered from the
//! recording instead of sent (`super::http_tape`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::approve::GrantApprovals;
use super::http_tape::{self, HttpTape};
use super::replay::StoreTape;
use crate::sandbox::connections::{Connection, Connections};
use crate::sandbox::{Granted, HttpOrigin, Removed, Sandbox};

/// Most distinct denied origins one store warns about, so a guest probing hosts cannot flood
/// the log.
const DENIAL_WARNINGS: usize = 8;

type Sent = Box<dyn Future<Output = Result<(), Error>> + Send>;
type Response = Box<dyn Future<Output = Result<(http::Response<WasiBody>, Sent), Error>> + Send>;

/// The `wasi:http` hooks of one store.
pub struct HttpHooks {
    plugin: Arc<str>,
    grants: Arc<Granted>,
    /// What scopes over this store removed from the plugin's grants, and who.
    removed: Removed,
    timeout: Duration,
    max_bytes: u64,
    warned: Vec<String>,
    /// The plugin's connection slots (`max_http_connections`).
    pub connections: Arc<Connections>,
    /// The slot `wasi:http/outgoing-handler.handle` took for the request it is sending
    /// (`crate::wasi::http`); [`WasiHttpHooks::send_request`] moves it into the connection.
    pub pending: Option<Connection>,
    /// What asks for a yes before an origin is first used (`[approvals] http`).
    approvals: Option<GrantApprovals>,
    /// Where the store's responses are recorded, or played from.
    tape: Option<HttpTape>,
}

impl HttpHooks {
    /// The hooks of one of `plugin`'s stores: its `http` grant (`grants`, as the scopes over the
    /// store left it; `removed`, what they took away), time and byte caps.
    pub fn new(
        plugin: Arc<str>,
        sandbox: &Sandbox,
        grants: Arc<Granted>,
        removed: Removed,
    ) -> Self {
        Self {
            plugin,
            grants,
            removed,
            timeout: sandbox.limits().http_timeout,
            max_bytes: sandbox.limits().max_http_bytes,
            warned: Vec::new(),
            connections: sandbox.connections().clone(),
            pending: None,
            approvals: None,
            tape: None,
        }
    }

    /// The hooks recording their responses on `tape`, or answering from it.
    pub fn with_tape(mut self, tape: Option<StoreTape>) -> Self {
        self.tape = tape.map(HttpTape::new);
        self
    }

    /// The hooks asking `approvals` before each origin's first use.
    pub fn with_approvals(mut self, approvals: Option<GrantApprovals>) -> Self {
        self.approvals = approvals;
        self
    }

    fn warn_denied(&mut self, uri: &http::Uri, origin: Option<&HttpOrigin>) {
        let shown = origin.map_or_else(|| uri.to_string(), ToString::to_string);
        if self.warned.len() >= DENIAL_WARNINGS || self.warned.contains(&shown) {
            return;
        }
        let plugin = &*self.plugin;
        let by_scope = origin.and_then(|o| self.removed.http_to(o));
        match (origin, by_scope) {
            (Some(origin), Some(holder)) => tracing::warn!(
                plugin,
                %origin,
                scope = holder,
                "plugin `{plugin}` sent an HTTP request to {origin}, which its grants allow but \
                 the scope of `{holder}` removed for this subtree; to allow it, add \
                 \"{origin}\" to `http` in the `config.scope` of the tool entry that \
                 delegated to `{holder}`"
            ),
            (Some(origin), None) => tracing::warn!(
                plugin,
                %origin,
                "plugin `{plugin}` sent an HTTP request to {origin}, which its grants do not \
                 allow; to allow it, add \"{origin}\" to `http` under [plugin.grants]"
            ),
            (None, _) => tracing::warn!(
                plugin,
                uri = %shown,
                "plugin `{plugin}` sent an HTTP request to `{shown}`, which is not an http or \
                 https origin; it was refused"
            ),
        }
        self.warned.push(shown);
    }
}

/// The guest's own timeout if it set a shorter one, else the plugin's.
fn within(asked: Option<Duration>, limit: Duration) -> Option<Duration> {
    Some(asked.map_or(limit, |d| d.min(limit)))
}

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Sent,
    ) -> Response {
        // Held until the connection closes; a request that goes nowhere gives it back here.
        let connection = self.pending.take();
        let origin = HttpOrigin::of(request.uri());
        if !origin
            .as_ref()
            .is_some_and(|o| self.grants.http.contains(o))
        {
            self.warn_denied(request.uri(), origin.as_ref());
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        let max = self.max_bytes;
        // Its place among the store's requests, and what it was, for the tape.
        let mut taped = None;
        if let Some(tape) = &mut self.tape {
            let n = tape.count_request();
            let (method, uri) = (request.method().to_string(), request.uri().to_string());
            if tape.replaying() {
                // Nothing is sent (and nothing asked): the recorded response stands in.
                drop(connection);
                return match tape.play(n, &method, &uri) {
                    Some(entry) => Box::new(http_tape::replay(request, max, entry)),
                    None => Box::new(async { Err(Error::HttpRequestDenied) }),
                };
            }
            taped = Some((tape.store().clone(), n, method, uri));
        }
        // The trace of the run or tool call the request is made for, unless the guest gave
        // its own.
        let mut request = request;
        if !request.headers().contains_key("traceparent") {
            if let Some(value) =
                seam_core::trace::current().and_then(|t| http::HeaderValue::from_str(&t).ok())
            {
                request.headers_mut().insert("traceparent", value);
            }
        }
        let limit = self.timeout;
        let asked = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: within(asked.connect_timeout, limit),
            first_byte_timeout: within(asked.first_byte_timeout, limit),
            between_bytes_timeout: within(asked.between_bytes_timeout, limit),
        };
        // An origin whose first use needs a yes waits for it before anything is sent.
        let approval = self
            .approvals
            .clone()
            .filter(|a| a.needs(seam_core::approval::GrantClass::Http))
            .zip(origin.clone());
        let plugin = self.plugin.clone();
        let sent = async move {
            if let Some((approvals, origin)) = approval {
                if let Err(refused) = approvals
                    .check(seam_core::approval::GrantClass::Http, origin.to_string())
                    .await
                {
                    tracing::warn!(plugin = %plugin, %origin, "{refused}");
                    return Err(Error::HttpRequestDenied);
                }
            }
            // Request and response bodies share one count.
            let used = Arc::new(AtomicU64::new(0));
            let deadline = Instant::now() + limit;
            let request = request.map(|body| {
                Capped {
                    inner: body,
                    used: used.clone(),
                    max,
                    too_big: Error::HttpRequestBodySize,
                    deadline,
                }
                .boxed_unsync()
            });
            let sent = tokio::time::timeout(
                limit,
                wasmtime_wasi_http::default_send_request(request, Some(options)),
            )
            .await
            .map_err(|_| Error::ConnectionReadTimeout)??;
            let (response, io) = sent;
            let response = response.map(|body| {
                Capped {
                    inner: body.boxed_unsync(),
                    used,
                    max,
                    too_big: Error::HttpResponseBodySize,
                    deadline,
                }
                .boxed_unsync()
            });
            let io = async move {
                let _connection = connection;
                io.await
            };
            Ok((response, Box::new(io) as Sent))
        };
        Box::new(async move {
            match taped {
                Some((store, n, method, uri)) => {
                    http_tape::record(store, n, method, uri, sent.await).await
                }
                None => sent.await,
            }
        })
    }
}

/// A body that fails once the bytes counted in `used` pass `max`, or once `deadline` passes.
struct Capped {
    inner: WasiBody,
    used: Arc<AtomicU64>,
    max: u64,
    too_big: fn(Option<u64>) -> Error,
    deadline: Instant,
}

impl Body for Capped {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(Some(Err(Error::ConnectionReadTimeout)));
        }
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame {
            if let Some(data) = frame.data_ref() {
                let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
                let total = self
                    .used
                    .fetch_add(len, Ordering::Relaxed)
                    .saturating_add(len);
                if total > self.max {
                    return Poll::Ready(Some(Err((self.too_big)(Some(self.max)))));
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
