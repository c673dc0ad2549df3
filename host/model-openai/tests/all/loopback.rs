//! A real HTTP/1.1 server (hyper) on 127.0.0.1:0 that speaks like an OpenAI-compatible API: it
//! records every request and answers from a script: JSON bodies, chunked server-sent events, or
//! silence. The model adapter's tests here and seam-tests' HTTP provider tests use it (they
//! include this file by path).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

// ---------------------------------------------------------------------------------------------
// The server

/// One scripted answer, used by one request, in order.
pub enum Answer {
    /// A complete body with a status and extra headers.
    Json {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: String,
    },
    /// `text/event-stream`, each piece written as its own chunk; then the stream ends, or stays
    /// open forever with `stall`.
    Sse { pieces: Vec<String>, stall: bool },
    /// Never answers (not even headers).
    Stall,
    /// `text/event-stream` with these pieces, then the connection is cut mid-body.
    Cut { pieces: Vec<String> },
}

pub fn ok(body: Value) -> Answer {
    Answer::Json {
        status: 200,
        headers: vec![],
        body: body.to_string(),
    }
}

pub fn status(status: u16, body: &str) -> Answer {
    Answer::Json {
        status,
        headers: vec![],
        body: body.to_string(),
    }
}

/// SSE events, one `data:` event per value, then `[DONE]`.
pub fn sse(chunks: &[Value]) -> Answer {
    let mut pieces: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    pieces.push("data: [DONE]\n\n".into());
    Answer::Sse {
        pieces,
        stall: false,
    }
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

pub struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    count: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which ends every connection task.
        self.task.abort();
    }
}

/// A body error makes hyper drop the connection mid-answer (a cut stream).
type Body = BoxBody<Bytes, std::io::Error>;

impl Server {
    pub async fn start(answers: Vec<Answer>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
        let (count_tx, count) = watch::channel(0usize);
        let count_tx = Arc::new(count_tx);
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut connections = JoinSet::new();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let seen = seen.clone();
                    let answers = answers.clone();
                    let count_tx = count_tx.clone();
                    let service = service_fn(move |request: Request<Incoming>| {
                        let seen = seen.clone();
                        let answers = answers.clone();
                        let count_tx = count_tx.clone();
                        async move { handle(request, seen, answers, count_tx).await }
                    });
                    connections.spawn(async move {
                        // A client that hangs up mid-answer is expected (abort, timeout tests).
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            })
        };
        Server {
            addr,
            seen,
            count,
            task,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }

    /// Waits until `n` requests have arrived (a guard turns a hang into a failure).
    pub async fn wait_for_requests(&self, n: usize) {
        let mut count = self.count.clone();
        tokio::time::timeout(Duration::from_secs(60), count.wait_for(|c| *c >= n))
            .await
            .expect("the request reached the server")
            .expect("server alive");
    }
}

async fn handle(
    request: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    count: Arc<watch::Sender<usize>>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    seen.lock().expect("seen lock").push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    });
    count.send_modify(|c| *c += 1);
    let answer = answers.lock().expect("answers lock").pop_front();
    let response = match answer {
        None => Response::builder()
            .status(599)
            .body(full("no scripted answer left")),
        Some(Answer::Json {
            status,
            headers,
            body,
        }) => {
            let mut builder = Response::builder()
                .status(status)
                .header("content-type", "application/json");
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            builder.body(full(&body))
        }
        Some(Answer::Sse { pieces, stall }) => {
            // Each piece is its own frame, so its own HTTP/1.1 chunk on the wire (the body has
            // no length, hence chunked encoding). The client's chunked decoder never hands out
            // bytes of two chunks in one read, whatever TCP coalesced, so the adapter sees the
            // events split exactly as scripted; no pause between pieces is needed.
            let pieces = futures::stream::iter(pieces)
                .map(|piece| Ok::<_, std::io::Error>(Frame::data(Bytes::from(piece))));
            let body = if stall {
                BodyExt::boxed(StreamBody::new(pieces.chain(futures::stream::pending())))
            } else {
                BodyExt::boxed(StreamBody::new(pieces))
            };
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(body)
        }
        Some(Answer::Stall) => std::future::pending().await,
        Some(Answer::Cut { pieces }) => {
            let pieces = futures::stream::iter(pieces)
                .map(|piece| Ok::<_, std::io::Error>(Frame::data(Bytes::from(piece))))
                .chain(futures::stream::once(async {
                    // Cut only once the headers and the pieces are on the wire: the client has
                    // begun reading the answer (a cut before the headers is "unreachable").
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Err(std::io::Error::other("cut"))
                }));
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .body(BodyExt::boxed(StreamBody::new(pieces)))
        }
    };
    Ok(response.expect("valid response"))
}

fn full(text: &str) -> Body {
    Full::new(Bytes::from(text.to_string()))
        .map_err(|never| match never {})
        .boxed()
}
