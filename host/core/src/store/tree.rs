//! A session's delegation tree as read back from a store: every run its agent started, each
//! with the runs below it (through the child sessions they kept), as the JSON that `seam
//! sessions tree --json` prints and the console draws.

use super::{RunRecord, SessionStore, StoreError};

/// How deep a tree is followed: sessions link one way, parent to child, so a bound keeps a
/// damaged store from looping.
const MAX_DEPTH: usize = 64;

/// The runs `session`'s agent started, oldest first, each with what its child session spent
/// (`spent`, over all its activations) and the runs below it (`runs`).
pub fn tree(store: &dyn SessionStore, session: &str) -> Result<Vec<serde_json::Value>, StoreError> {
    below(store, session, 0)
}

fn below(
    store: &dyn SessionStore,
    session: &str,
    depth: usize,
) -> Result<Vec<serde_json::Value>, StoreError> {
    if depth > MAX_DEPTH {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for run in store.runs_of(session)? {
        let (children, spent) = match &run.child_session {
            Some(child) => (
                below(store, child, depth + 1)?,
                store.spend(child)?.map(|r| r.spent),
            ),
            None => (Vec::new(), None),
        };
        let mut json = run_json(&run, children);
        if let Some(spent) = spent {
            json["spent"] = spent.report();
        }
        out.push(json);
    }
    Ok(out)
}

/// One run record, with `children` as its `runs`.
pub fn run_json(run: &RunRecord, children: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({
        "run": run.start.run_id,
        "key": run.key,
        "provider": run.start.provider,
        "label": run.start.label,
        "background": run.start.background,
        "status": run.status.as_str(),
        "stop-reason": run.stop_reason,
        "diagnostic": run.diagnostic,
        "session": run.child_session,
        "started-ms": run.started_ms,
        "ended-ms": run.ended_ms,
        "prompt": crate::types::blocks_text(&run.start.request.prompt),
        "budget": run.start.request.budget,
        "scope": run.start.request.scope,
        "approver": run.start.request.approver,
        "report": run.report,
        "runs": children,
    })
}
