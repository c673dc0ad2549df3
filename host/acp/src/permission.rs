//! The editor of `seam acp` as an approvals surface: a request for approval made anywhere in a
//! served session's tree is sent to the client as `session/request_permission`, and its answer
//! (the option the person picked) becomes the request's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use seam_core::approval::{Answer, ApprovalRecord, GrantClass, Subject, Surface};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::outbox::Outbox;
use crate::rpc::{self, RpcError};

/// Who an answer given here is recorded as.
pub const BY: &str = "acp";

/// The ids of the options offered, as the client sends them back.
const ALLOW_ONCE: &str = "allow";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT_ONCE: &str = "reject";

/// The senders of the responses awaited, by request id.
type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>>;

/// Finds the ACP session a request for approval belongs to.
type SessionOf = Box<dyn Fn(&ApprovalRecord) -> Option<String> + Send + Sync>;

/// Requests `seam acp` sent the client, waiting for its response, by id.
#[derive(Clone, Default)]
pub(crate) struct Asked {
    waiting: Waiting,
    next: Arc<AtomicU64>,
}

impl Asked {
    /// Hands a response to the request that waits for it; `false` if none does (it was
    /// withdrawn, or the id is not one of ours).
    pub(crate) fn settle(&self, id: &Value, result: Result<Value, RpcError>) -> bool {
        let Some(id) = id.as_u64() else {
            return false;
        };
        match seam_core::sync::lock(&self.waiting).remove(&id) {
            Some(tx) => tx.send(result).is_ok(),
            None => false,
        }
    }

    /// A new request id and the receiver of its response; the entry goes when the returned
    /// guard is dropped (the question withdrawn), so that a late response finds nothing.
    fn open(&self) -> (u64, oneshot::Receiver<Result<Value, RpcError>>, Withdraw) {
        // Ids of our own requests: the client's are its own, in the other direction.
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        seam_core::sync::lock(&self.waiting).insert(id, tx);
        let withdraw = Withdraw {
            waiting: self.waiting.clone(),
            id,
        };
        (id, rx, withdraw)
    }
}

/// Removes a request's entry when its question is over.
struct Withdraw {
    waiting: Waiting,
    id: u64,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        seam_core::sync::lock(&self.waiting).remove(&self.id);
    }
}

/// The ACP client as a surface. `session_of` finds the ACP session a request belongs to (from
/// its root session and the path of runs that asked); a request of no served session is not
/// this client's to answer.
pub(crate) struct Editor {
    out: Outbox,
    asked: Asked,
    session_of: SessionOf,
}

impl Editor {
    pub(crate) fn new(
        out: Outbox,
        asked: Asked,
        session_of: impl Fn(&ApprovalRecord) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self {
            out,
            asked,
            session_of: Box::new(session_of),
        }
    }
}

impl Surface for Editor {
    fn name(&self) -> &str {
        BY
    }

    fn ask(&self, request: &ApprovalRecord) -> BoxFuture<'static, Option<Answer>> {
        let Some(session) = (self.session_of)(request) else {
            return Box::pin(async { None });
        };
        let (id, response, withdraw) = self.asked.open();
        let line = rpc::request(id, "session/request_permission", params(&session, request));
        let out = self.out.clone();
        let approval = request.id.clone();
        Box::pin(async move {
            let _withdraw = withdraw;
            // A request must arrive: it waits for room rather than being dropped.
            if !out.send(line).await {
                return None;
            }
            drop(out);
            match response.await {
                Ok(Ok(result)) => Some(answer(&result)),
                Ok(Err(e)) => {
                    // A client that does not offer permission requests cannot answer.
                    tracing::warn!(approval = %approval, error = %e, "seam acp: the client did not answer session/request_permission");
                    None
                }
                // The server ended before the client answered.
                Err(_) => None,
            }
        })
    }
}

/// The parameters of `session/request_permission` for `request`: the call (or use of a grant)
/// as a tool call whose id is the request's, and the options allow once, allow always, reject.
fn params(session: &str, request: &ApprovalRecord) -> Value {
    let (kind, raw_input) = match &request.subject {
        Subject::Tool { arguments, .. } => ("other", arguments.clone()),
        Subject::Grant { class, target, .. } => (
            match class {
                GrantClass::Write => "edit",
                GrantClass::Http => "fetch",
                GrantClass::Process => "execute",
            },
            json!({ "target": target }),
        ),
    };
    // The top-level agent's own requests name no path; a run's say which run asks.
    let title = if request.path.len() > 1 {
        format!("{}: {}", request.path_text(), request.subject.describe())
    } else {
        request.subject.describe()
    };
    json!({
        "sessionId": session,
        "toolCall": {
            "toolCallId": request.id,
            "title": title,
            "kind": kind,
            "status": "pending",
            "rawInput": raw_input,
        },
        "options": [
            { "optionId": ALLOW_ONCE, "name": "Allow", "kind": "allow_once" },
            { "optionId": ALLOW_ALWAYS, "name": "Allow for this session", "kind": "allow_always" },
            { "optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once" },
        ],
        "_meta": { "seam": { "approval": request.id, "path": request.path } },
    })
}

/// The answer a `session/request_permission` result gives: the option picked, or a cancel
/// (the prompt turn was cancelled, or the person dismissed the question), which denies.
fn answer(result: &Value) -> Answer {
    let outcome = &result["outcome"];
    match outcome["outcome"].as_str() {
        Some("selected") => match outcome["optionId"].as_str() {
            Some(ALLOW_ONCE) => Answer::allow(BY, false),
            Some(ALLOW_ALWAYS) => Answer::allow(BY, true),
            Some(REJECT_ONCE) => Answer::deny(BY, Some("rejected in the editor".into())),
            other => Answer::deny(
                BY,
                Some(format!(
                    "the editor picked an option seam did not offer: {}",
                    other.unwrap_or("(none)")
                )),
            ),
        },
        Some("cancelled") => Answer::deny(BY, Some("cancelled in the editor".into())),
        _ => Answer::deny(
            BY,
            Some(format!(
                "the editor's answer has no outcome seam reads: {result}"
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_map_onto_answers() {
        let picked =
            |id: &str| answer(&json!({"outcome": {"outcome": "selected", "optionId": id}}));
        assert_eq!(picked(ALLOW_ONCE), Answer::allow(BY, false));
        assert_eq!(picked(ALLOW_ALWAYS), Answer::allow(BY, true));
        assert!(!picked(REJECT_ONCE).allow);
        assert!(!picked("made-up").allow);
        assert!(!answer(&json!({"outcome": {"outcome": "cancelled"}})).allow);
        assert!(!answer(&json!({})).allow);
    }
}
