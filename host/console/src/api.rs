//! The JSON API behind the page, which a person can script as well (documented in the book's
//! console chapter). Every action goes through the host API the CLI and the control tools use:
//! a turn is an agent's `run_turn` (steered with `steer`), an interrupt a run's cancel (or the durable child's
//! `interrupt_agent`), a message a run's steering (or `send_to_agent`), an answer the approvals
//! engine's `answer`.

use std::sync::Arc;

use http::{Method, StatusCode};
use seam_core::approval::{Answer, Surface};
use seam_core::store::RunKey;
use seam_core::types::ContentBlock;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::held::Held;
use crate::host::ConsoleHost;
use crate::live::{Live, SseBody};
use crate::views;

/// Who an answer given on the page is recorded as.
pub const BY: &str = "seam ui";

/// What the console shares between its requests.
pub(crate) struct Console {
    pub host: ConsoleHost,
    pub held: Arc<Held>,
    pub live: Arc<Live>,
    /// What the session list last read of each session's events.
    pub gists: views::Gists,
    pub shutdown: CancellationToken,
}

/// An answer of the API.
pub(crate) enum Reply {
    /// JSON, with its status.
    Json(StatusCode, Value),
    /// Server-sent events.
    Events(SseBody),
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Self {
        Reply::Json(e.status, e.body())
    }
}

fn ok(value: Value) -> Reply {
    Reply::Json(StatusCode::OK, value)
}

/// The body's JSON as `T`, or a 400 naming what is wrong with it.
fn body<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        bytes
    };
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the request body: {e}")))
}

/// A path segment, percent-decoded.
fn segment(raw: &str) -> Result<String, ApiError> {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ApiError::bad_request(format!("`{raw}` is not UTF-8 once decoded")))
}

/// A run's key in the store, as the tree gives it (`key`).
fn run_key(raw: &str) -> Result<RunKey, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::bad_request(format!("`{raw}` is not a run key (the tree's `key`)")))
}

fn not_here(key: RunKey) -> ApiError {
    ApiError::not_found(format!(
        "no run with key {key} runs in this process (to reach a child of a session open here \
         that ended, name the top-level `session`)"
    ))
}

/// `?key=value` of `query`.
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Prompt {
    prompt: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Steering {
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    text: String,
    /// The top-level session the run belongs to, to reach a child that no longer runs here
    /// through its parent agent.
    #[serde(default)]
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum AnswerKind {
    Allow,
    AllowAlways,
    Deny,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answering {
    answer: AnswerKind,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Replaying {
    #[serde(default)]
    until: Option<u64>,
}

impl Console {
    /// Answers an API request (`path` starts with `/api`).
    pub async fn api(
        self: &Arc<Self>,
        method: &Method,
        path: &str,
        query: Option<&str>,
        bytes: &[u8],
    ) -> Reply {
        match self.route(method, path, query, bytes).await {
            Ok(reply) => reply,
            Err(e) => e.into(),
        }
    }

    async fn route(
        self: &Arc<Self>,
        method: &Method,
        path: &str,
        query: Option<&str>,
        bytes: &[u8],
    ) -> Result<Reply, ApiError> {
        let parts: Vec<&str> = path
            .trim_start_matches("/api")
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        let store = self.host.store().clone();
        match (method, parts.as_slice()) {
            (&Method::GET, []) => Ok(ok(index())),
            (&Method::GET, ["events"]) => {
                Ok(Reply::Events(self.live.stream(self.shutdown.clone())))
            }
            (&Method::GET, ["sessions"]) => {
                let q = query_value(query, "q").unwrap_or_default();
                let rows = blocking(
                    move |c| views::sessions(store.as_ref(), &c.gists, c.held.as_ref(), &q),
                    self,
                )
                .await?;
                Ok(ok(json!({ "sessions": rows })))
            }
            (&Method::POST, ["sessions"]) => {
                let Prompt { prompt } = body(bytes)?;
                let session = self.held.start_turn(None, prompt)?;
                Ok(Reply::Json(
                    StatusCode::ACCEPTED,
                    json!({ "session": session }),
                ))
            }
            (&Method::GET, ["sessions", id]) => {
                let id = segment(id)?;
                let view = blocking(
                    move |c| {
                        views::session(store.as_ref(), &c.host.subagents, c.held.as_ref(), &id)
                    },
                    self,
                )
                .await?;
                Ok(ok(view))
            }
            (&Method::POST, ["sessions", id, "turns"]) => {
                let id = segment(id)?;
                let Prompt { prompt } = body(bytes)?;
                let session = self.held.start_turn(Some(&id), prompt)?;
                Ok(Reply::Json(
                    StatusCode::ACCEPTED,
                    json!({ "session": session }),
                ))
            }
            (&Method::POST, ["sessions", id, "messages"]) => {
                let id = segment(id)?;
                let Steering { text } = body(bytes)?;
                self.held.steer(&id, text)?;
                Ok(ok(json!({ "session": id, "delivery": "steered" })))
            }
            (&Method::POST, ["sessions", id, "interrupt"]) => {
                let id = segment(id)?;
                self.held.interrupt(&id).await?;
                Ok(ok(json!({ "session": id, "interrupted": true })))
            }
            (&Method::POST, ["sessions", id, "replay"]) => {
                let id = segment(id)?;
                let Replaying { until } = body(bytes)?;
                self.replay(id, until).await.map(ok)
            }
            (&Method::POST, ["runs", key, "interrupt"]) => {
                let key = run_key(key)?;
                self.interrupt_run(key).await.map(ok)
            }
            (&Method::POST, ["runs", key, "messages"]) => {
                let key = run_key(key)?;
                let message: Message = body(bytes)?;
                self.send(key, message).map(ok)
            }
            (&Method::GET, ["approvals"]) => {
                let session = query_value(query, "session");
                let all = store.approvals(session.as_deref())?;
                Ok(ok(json!({ "approvals": views::approvals_json(&all) })))
            }
            (&Method::POST, ["approvals", id]) => {
                let id = segment(id)?;
                let answering: Answering = body(bytes)?;
                self.answer(&id, answering).map(ok)
            }
            (_, ["events" | "sessions" | "approvals" | "runs", ..]) | (_, []) => Err(ApiError {
                status: StatusCode::METHOD_NOT_ALLOWED,
                code: "bad-request",
                message: format!("{method} is not served at {path} (GET /api lists the API)"),
            }),
            _ => Err(ApiError::not_found(format!(
                "nothing is served at {path} (GET /api lists the API)"
            ))),
        }
    }

    /// Interrupts the live run whose record is `key`: a durable child of an agent through
    /// `interrupt_agent` (its session kept for a later message), any other through its cancel.
    async fn interrupt_run(&self, key: RunKey) -> Result<Value, ApiError> {
        let subagents = &self.host.subagents;
        let run = subagents.live_run(key).ok_or_else(|| not_here(key))?;
        let id = run.id().to_string();
        if run.try_result().is_some() {
            return Err(ApiError::conflict(format!("run `{id}` has already ended")));
        }
        let parent = run.parent().clone();
        if subagents.background_run(&parent.id, &id).is_some() {
            let info = subagents
                .interrupt_agent(&parent, &id)
                .await
                .map_err(|e| ApiError::conflict(e.to_string()))?;
            return Ok(json!({ "run": id, "key": key, "agent": info }));
        }
        run.cancel(Some("interrupted from the console".into()));
        let _ = tokio::time::timeout(self.host.cancel_grace, run.result()).await;
        Ok(json!({ "run": id, "key": key, "ended": run.try_result().is_some() }))
    }

    /// Sends a message to the run whose record is `key`: a live run whose provider takes
    /// steering gets it at once; a child that keeps a session gets it through its parent
    /// (queued in its inbox while it runs, else woken or resumed): the parent is the run's
    /// caller while it runs, else the top-level agent of `session`, open here.
    fn send(&self, key: RunKey, message: Message) -> Result<Value, ApiError> {
        if message.text.trim().is_empty() {
            return Err(ApiError::bad_request("`text`: the message is empty"));
        }
        let content = vec![ContentBlock::text(message.text)];
        let subagents = &self.host.subagents;
        let live = subagents.live_run(key).filter(|r| r.try_result().is_none());
        let (parent, id) = match (&live, &message.session) {
            (Some(run), _) if run.steerable() => {
                run.send_message(content)
                    .map_err(|e| ApiError::conflict(e.to_string()))?;
                return Ok(json!({ "run": run.id(), "key": key, "delivery": "steered" }));
            }
            (Some(run), _) => (run.parent().clone(), run.id().to_string()),
            (None, Some(session)) => {
                let agent = self.held.agent(session).ok_or_else(|| {
                    ApiError::conflict(format!(
                        "session `{session}` is not open in this process: continue it first"
                    ))
                })?;
                let record = self
                    .host
                    .store()
                    .runs_of(session)?
                    .into_iter()
                    .find(|r| r.key == key)
                    .ok_or_else(|| {
                        ApiError::not_found(format!(
                            "session `{session}`'s agent started no run with key {key}"
                        ))
                    })?;
                let id = record.child_session.unwrap_or(record.start.run_id);
                (agent.as_parent(), id)
            }
            (None, None) => return Err(not_here(key)),
        };
        let delivery = subagents
            .send_to_agent(&parent, &id, content)
            .map_err(|e| ApiError::unsupported(e.to_string()))?;
        let delivery = match delivery {
            seam_core::types::Delivery::Queued => "queued",
            seam_core::types::Delivery::Woken => "woken",
            seam_core::types::Delivery::Resumed => "resumed",
        };
        Ok(json!({ "run": id, "key": key, "delivery": delivery }))
    }

    /// Answers the request for approval `id` through the approvals engine (this process's
    /// request at once; another process's through the store, for it to find).
    fn answer(&self, id: &str, answering: Answering) -> Result<Value, ApiError> {
        let answer = match answering.answer {
            AnswerKind::Allow => Answer::allow(BY, false),
            AnswerKind::AllowAlways => Answer::allow(BY, true),
            AnswerKind::Deny => Answer::deny(
                BY,
                Some(
                    answering
                        .reason
                        .unwrap_or_else(|| "denied from the console".into()),
                ),
            ),
        };
        let record = self.host.approvals().answer(id, answer).map_err(|e| {
            use seam_core::approvals::ApprovalError;
            match e {
                ApprovalError::Unknown(_) => ApiError::not_found(e.to_string()),
                ApprovalError::Answered { .. } => ApiError::conflict(e.to_string()),
                other => ApiError::unavailable(other.to_string()),
            }
        })?;
        self.live
            .notify(&json!({"what": "approval-answered", "approval": id}));
        Ok(json!({ "approval": record }))
    }

    /// Replays the top-level session `id` with the replayer the host was given.
    async fn replay(&self, id: String, until: Option<u64>) -> Result<Value, ApiError> {
        let replayer =
            self.host.replayer.clone().ok_or_else(|| {
                ApiError::unsupported("this console was started without a replayer")
            })?;
        let store = self.host.store().clone();
        match store.session(&id)? {
            Some(s) if s.parent.is_none() => {}
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "session `{id}` is a child's: replay its top-level session"
                )))
            }
            None => {
                return Err(ApiError::not_found(format!(
                    "no session `{id}` in {}",
                    store.name()
                )))
            }
        }
        if self.held.running(&id) {
            return Err(ApiError::conflict(format!(
                "session `{id}` is running a turn: replay it once the turn has ended"
            )));
        }
        replayer
            .replay(store, id, until)
            .await
            .map_err(|e| ApiError::unsupported(e.to_string()))
    }
}

/// Runs a store read off the async workers (a SQLite read may wait on the disk).
async fn blocking<T, F>(f: F, console: &Arc<Console>) -> Result<T, ApiError>
where
    F: FnOnce(&Console) -> Result<T, ApiError> + Send + 'static,
    T: Send + 'static,
{
    let console = console.clone();
    tokio::task::spawn_blocking(move || f(&console))
        .await
        .map_err(|e| ApiError::internal(format!("a read failed: {e}")))?
}

/// `GET /api`: what is served, for a person scripting it.
fn index() -> Value {
    json!({
        "api": "seam ui",
        "endpoints": [
            "GET /api/sessions?q=TEXT",
            "POST /api/sessions {\"prompt\"}",
            "GET /api/sessions/SESSION",
            "POST /api/sessions/SESSION/turns {\"prompt\"}",
            "POST /api/sessions/SESSION/messages {\"text\"}",
            "POST /api/sessions/SESSION/interrupt",
            "POST /api/sessions/SESSION/replay {\"until\"?}",
            "POST /api/runs/KEY/interrupt",
            "POST /api/runs/KEY/messages {\"text\", \"session\"?}",
            "GET /api/approvals?session=SESSION",
            "POST /api/approvals/ID {\"answer\": \"allow\" | \"allow-always\" | \"deny\", \"reason\"?}",
            "GET /api/events (text/event-stream: bus, console, store, lagged)",
        ],
    })
}

/// The page as an approvals surface: a request made in a tree this process runs waits, shown
/// on the page, until someone answers it there (or through another surface, the store, or the
/// timeout).
pub(crate) struct Page;

impl Surface for Page {
    fn name(&self) -> &str {
        BY
    }

    fn ask(
        &self,
        _request: &seam_core::approval::ApprovalRecord,
    ) -> futures::future::BoxFuture<'static, Option<Answer>> {
        // The answer reaches the engine through `Approvals::answer`: this only keeps the
        // request waiting until then.
        Box::pin(futures::future::pending())
    }
}
