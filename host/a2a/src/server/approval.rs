//! The A2A clients as an approvals surface: a request for approval made anywhere in a running
//! task's tree puts the task in `INPUT_REQUIRED` (its status message names what is asked and
//! carries `metadata.approval`), and the client's answer is a message to the task (`allow`,
//! `allow always`, `deny`, or a data part `{"approval": ...}`), given to the approvals engine.
//! Other surfaces may answer first: the engine takes the first answer, and the task works again
//! whoever gave it.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use seam_core::approval::{Answer, ApprovalRecord, Surface};

use crate::wire::{Message, PartContent};

use seam_core::sync::lock;

use super::contexts::{Contexts, Running};

/// Who an answer given here is recorded as.
pub const BY: &str = "a2a";

/// The served contexts as a surface.
pub(crate) struct Clients {
    contexts: Weak<Contexts>,
}

impl Clients {
    pub fn new(contexts: &Arc<Contexts>) -> Self {
        Self {
            contexts: Arc::downgrade(contexts),
        }
    }

    /// The running task a request belongs to: the one of the context whose session is the
    /// request's root, or whose agent is at the top of the path of runs that asked.
    fn running(&self, request: &ApprovalRecord) -> Option<Arc<Running>> {
        let contexts = self.contexts.upgrade()?;
        let top = request.path.first();
        let contexts = lock(&contexts);
        contexts
            .iter()
            .find(|(session, c)| {
                **session == request.root || top.is_some_and(|t| t == c.agent.id())
            })
            .and_then(|(_, c)| c.running.clone())
    }
}

/// Marks the task as working again when the question is over (answered anywhere, or withdrawn).
struct Over {
    running: Arc<Running>,
    id: String,
}

impl Drop for Over {
    fn drop(&mut self) {
        self.running.answered(&self.id);
    }
}

impl Surface for Clients {
    fn name(&self) -> &str {
        BY
    }

    fn ask(&self, request: &ApprovalRecord) -> BoxFuture<'static, Option<Answer>> {
        let Some(running) = self.running(request) else {
            // Not a served task's: not ours to answer.
            return Box::pin(async { None });
        };
        // The top-level agent's own requests name no path; a run's say which run asks.
        let what = if request.path.len() > 1 {
            format!("{}: {}", request.path_text(), request.subject.describe())
        } else {
            request.subject.describe()
        };
        running.asks(
            &request.id,
            format!(
                "approval {} needed: {what}. Answer with a message to this task: `allow`, \
                 `allow always` or `deny`",
                request.id
            ),
        );
        let over = Over {
            running,
            id: request.id.clone(),
        };
        // The answer reaches the engine through `Approvals::answer` (a client's message, or
        // another surface): this only keeps the task waiting until then.
        Box::pin(async move {
            let _over = over;
            futures::future::pending().await
        })
    }
}

/// The answer `message` gives to an approval, if it is one: its text `allow`, `allow always`
/// (or `allow-always`) or `deny`, any case; or a data part `{"approval": "allow" |
/// "allow-always" | "deny"}`.
pub(crate) fn answer_of(message: &Message) -> Option<Answer> {
    let said = message.parts.iter().find_map(|p| match &p.content {
        PartContent::Text(t) => Some(t.trim().to_ascii_lowercase()),
        PartContent::Data(d) => d
            .get("approval")
            .and_then(|a| a.as_str())
            .map(|a| a.trim().to_ascii_lowercase()),
        _ => None,
    })?;
    match said.as_str() {
        "allow" => Some(Answer::allow(BY, false)),
        "allow always" | "allow-always" => Some(Answer::allow(BY, true)),
        "deny" => Some(Answer::deny(BY, Some("denied by the A2A client".into()))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Part, Role};

    #[test]
    fn answers_are_read() {
        let text = |t: &str| Message::new(Role::User, vec![Part::text(t)]);
        assert_eq!(answer_of(&text(" Allow ")), Some(Answer::allow(BY, false)));
        assert_eq!(
            answer_of(&text("ALLOW always")),
            Some(Answer::allow(BY, true))
        );
        assert!(!answer_of(&text("deny")).unwrap().allow);
        assert_eq!(answer_of(&text("please continue")), None);
        let data = Message::new(
            Role::User,
            vec![Part::data(serde_json::json!({"approval": "allow-always"}))],
        );
        assert_eq!(answer_of(&data), Some(Answer::allow(BY, true)));
    }
}
