//! A chat-completions endpoint on 127.0.0.1 (hyper) for agents on the `openai` model: it
//! records the body of every request, which is exactly what the agent's model was sent, and
//! answers each one from the test's function of that body. The requests the test picks are held
//! in groups: each waits until its group has arrived, so a group of two is a barrier proving
//! that two agents were inside a model call at the same time. The others are answered at once.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use seam_tests::BARRIER_TIMEOUT;

type Answer = dyn Fn(&Value) -> Value + Send + Sync;
type Hold = dyn Fn(&Value) -> bool + Send + Sync;

/// The endpoint; dropping it ends its connections.
pub struct ChatServer {
    base_url: String,
    seen: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ChatServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ChatServer {
    /// Serves on a free port; the request bodies are answered by `answer`, those for which
    /// `hold` is true in groups of `group`.
    pub async fn start(
        group: usize,
        hold: impl Fn(&Value) -> bool + Send + Sync + 'static,
        answer: impl Fn(&Value) -> Value + Send + Sync + 'static,
    ) -> ChatServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("address"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answer> = Arc::new(answer);
        let hold: Arc<Hold> = Arc::new(hold);
        let (arrived, _) = watch::channel(0usize);
        let arrived = Arc::new(arrived);
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut connections = JoinSet::new();
                while let Ok((stream, _)) = listener.accept().await {
                    let server = Shared {
                        group,
                        seen: seen.clone(),
                        hold: hold.clone(),
                        answer: answer.clone(),
                        arrived: arrived.clone(),
                    };
                    let service = service_fn(move |request: Request<Incoming>| {
                        let server = server.clone();
                        async move { handle(request, &server).await }
                    });
                    connections.spawn(async move {
                        // An agent cancelled mid-call hangs up; that is no failure here.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            })
        };
        ChatServer {
            base_url,
            seen,
            task,
        }
    }

    /// The `[models.openai]` section pointing at this server (no key, no retries, no stream).
    pub fn models_section(&self) -> String {
        format!(
            "[models.openai]\nbase_url = \"{}\"\nmodel = \"test-model\"\nstream = false\nmax_retries = 0\n\n",
            self.base_url
        )
    }

    /// The request bodies received so far, in arrival order.
    pub fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

/// What every connection of the server shares.
#[derive(Clone)]
struct Shared {
    group: usize,
    seen: Arc<Mutex<Vec<Value>>>,
    hold: Arc<Hold>,
    answer: Arc<Answer>,
    /// How many held requests have arrived.
    arrived: Arc<watch::Sender<usize>>,
}

async fn handle(
    request: Request<Incoming>,
    server: &Shared,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let bytes = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    server.seen.lock().unwrap().push(body.clone());
    let (status, reply) = if (server.hold)(&body) {
        let mut index = 0;
        server.arrived.send_modify(|n| {
            *n += 1;
            index = *n;
        });
        // This request's group is complete once `index` rounded up to a whole group has arrived.
        let group = server.group.max(1);
        let complete = index.div_ceil(group) * group;
        let mut rx = server.arrived.subscribe();
        let waited = tokio::time::timeout(BARRIER_TIMEOUT, rx.wait_for(|n| *n >= complete))
            .await
            .is_ok_and(|r| r.is_ok());
        if waited {
            (200, (server.answer)(&body))
        } else {
            (
                500,
                json!({"error": {"message": format!("held request {index}: its group never arrived")}}),
            )
        }
    } else {
        (200, (server.answer)(&body))
    };
    Ok(Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(reply.to_string())))
        .expect("a valid response"))
}

/// A completion that answers with text.
pub fn text_reply(text: &str) -> Value {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
}

/// A completion that calls one tool with `arguments`.
pub fn tool_reply(id: &str, name: &str, arguments: &Value) -> Value {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
    ]}, "finish_reason": "tool_calls"}]})
}

/// The text of the last user message of a request body.
pub fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The `parameters` of the tool `name` a request body offered, if it offered it.
pub fn offered(body: &Value, name: &str) -> Option<Value> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["function"]["name"] == name)
        .map(|t| t["function"]["parameters"].clone())
}
