//! The MCP client of `seam mcp` as an approvals surface: a request for approval made by a call
//! (the served tool itself, or a run the call started, at any depth) is asked of the client that
//! made the call with `elicitation/create`, when the client declared the elicitation capability
//! on a protocol version that lets a server send it requests (before 2026-07-28).
//!
//! A surface is added for each call and removed when the call ends, so a client is only ever
//! asked about its own calls' requests.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::model::{
    BooleanSchema, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    PrimitiveSchemaDefinition,
};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use seam_core::approval::{Answer, ApprovalRecord, Surface};
use seam_core::events::{Event, EventBus, ListenerId};
use seam_core::sync::lock;
use seam_core::types::ParentRef;

/// Who an answer given here is recorded as.
pub const BY: &str = "mcp";

/// The runs one call started (their ids head the paths of the requests they make), and the
/// call's own session (the root of a request made by the call itself).
#[derive(Clone)]
pub(crate) struct CallTree {
    session: String,
    runs: Arc<Mutex<HashSet<String>>>,
}

impl CallTree {
    /// Follows the runs `caller` starts from now on; unsubscribe the returned listener when the
    /// call ends.
    pub(crate) fn follow(events: &EventBus, caller: &ParentRef) -> (Self, ListenerId) {
        let tree = Self {
            session: caller.session_id.clone(),
            runs: Arc::default(),
        };
        let (runs, id, session) = (
            tree.runs.clone(),
            caller.id.clone(),
            caller.session_id.clone(),
        );
        let listener = events.subscribe(move |event| {
            if let Event::SubagentStart {
                parent, id: run, ..
            } = &event
            {
                if parent.id == id && parent.session_id == session {
                    lock(&runs).insert(run.clone());
                }
            }
            Ok(())
        });
        (tree, listener)
    }

    fn holds(&self, request: &ApprovalRecord) -> bool {
        request.root == self.session
            || request
                .path
                .first()
                .is_some_and(|top| lock(&self.runs).contains(top))
    }
}

/// The client that made one call, as a surface for that call's requests.
pub(crate) struct Elicit {
    peer: Peer<RoleServer>,
    tree: CallTree,
}

impl Elicit {
    pub(crate) fn new(peer: Peer<RoleServer>, tree: CallTree) -> Self {
        Self { peer, tree }
    }
}

impl Surface for Elicit {
    fn name(&self) -> &str {
        BY
    }

    fn ask(&self, request: &ApprovalRecord) -> BoxFuture<'static, Option<Answer>> {
        // Another call's request, or a client that cannot be asked: not this surface's.
        if !self.tree.holds(request)
            || !self
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
        {
            return Box::pin(async { None });
        }
        let peer = self.peer.clone();
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message(request),
            requested_schema: schema(),
        };
        let id = request.id.clone();
        Box::pin(async move {
            match peer.create_elicitation(params).await {
                Ok(result) => Some(answer(result.action, result.content.as_ref())),
                // A 2026-07-28 client (which a server may not send requests), or one gone.
                Err(e) => {
                    tracing::debug!(approval = %id, error = %e, "seam mcp: cannot ask the client");
                    None
                }
            }
        })
    }
}

/// What the person reads: who asks, what, and the request's id.
fn message(request: &ApprovalRecord) -> String {
    format!(
        "Seam asks for approval ({}): {} wants to {}. Allow it?",
        request.id,
        request.path_text(),
        request.subject.describe()
    )
}

/// The form: `allow` (required) and `always` (for the rest of the session).
fn schema() -> ElicitationSchema {
    let mut properties = BTreeMap::new();
    properties.insert(
        "allow".to_string(),
        PrimitiveSchemaDefinition::Boolean(
            BooleanSchema::new()
                .title("Allow")
                .description("Let it go ahead")
                .with_default(false),
        ),
    );
    properties.insert(
        "always".to_string(),
        PrimitiveSchemaDefinition::Boolean(
            BooleanSchema::new()
                .title("Always")
                .description("Allow the same tool (or grant) for the rest of the session")
                .with_default(false),
        ),
    );
    ElicitationSchema::new(properties).with_required(vec!["allow".to_string()])
}

/// The answer an elicitation's result gives: accepted with `allow: true` allows (always, if
/// `always: true`); anything else denies.
fn answer(action: ElicitationAction, content: Option<&serde_json::Value>) -> Answer {
    let flag = |key: &str| {
        content
            .and_then(|c| c.get(key))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    };
    match action {
        ElicitationAction::Accept if flag("allow") => Answer::allow(BY, flag("always")),
        ElicitationAction::Accept => Answer::deny(BY, Some("not allowed in the MCP client".into())),
        ElicitationAction::Decline => Answer::deny(BY, Some("declined in the MCP client".into())),
        _ => Answer::deny(BY, Some("cancelled in the MCP client".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn elicitation_results_map_onto_answers() {
        let yes = json!({"allow": true});
        assert_eq!(
            answer(ElicitationAction::Accept, Some(&yes)),
            Answer::allow(BY, false)
        );
        let always = json!({"allow": true, "always": true});
        assert_eq!(
            answer(ElicitationAction::Accept, Some(&always)),
            Answer::allow(BY, true)
        );
        assert!(!answer(ElicitationAction::Accept, Some(&json!({"allow": false}))).allow);
        assert!(!answer(ElicitationAction::Accept, None).allow);
        assert!(!answer(ElicitationAction::Decline, None).allow);
        assert!(!answer(ElicitationAction::Cancel, None).allow);
        let form = serde_json::to_value(schema()).unwrap();
        assert_eq!(form["properties"]["allow"]["type"], "boolean", "{form}");
        assert_eq!(form["required"], json!(["allow"]));
    }
}
