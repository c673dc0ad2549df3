//! What the page shows, read from the store: the sessions (with their first prompt and how
//! they stand), a session's turns and conversation, and its delegation tree with what this
//! process knows of its live runs laid over it (their progress, whether they take messages).

use std::collections::HashMap;
use std::sync::Mutex;

use seam_agent::session::SessionEvent;
use seam_core::approval::Status;
use seam_core::store::{SessionStore, SessionSummary, StoredEvent};
use seam_core::subagent::SubagentService;
use seam_core::types::blocks_text;
use serde_json::{json, Value};

use crate::error::ApiError;

/// How many top-level sessions the list reads (the most recently written first).
const LISTED: usize = 200;

/// How a top-level session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// A turn runs (here or in another process).
    Running,
    /// A turn runs and waits for an answer to a request for approval.
    Waiting,
    /// No turn runs.
    Idle,
    /// Its last turn was cut short by the end of the process that ran it.
    Interrupted,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Idle => "idle",
            Self::Interrupted => "interrupted",
        }
    }
}

/// The events of a session, parsed (an entry this version cannot read is left out).
fn parsed(events: &[StoredEvent]) -> Vec<(u64, u64, SessionEvent)> {
    events
        .iter()
        .filter_map(|e| {
            serde_json::from_str::<SessionEvent>(&e.body)
                .ok()
                .map(|p| (e.seq, e.at_ms, p))
        })
        .collect()
}

/// A session's turns: each with its prompt, its answer, its stop reason and times.
fn turns(events: &[(u64, u64, SessionEvent)]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for (_, at, event) in events {
        match event {
            SessionEvent::TurnStart { turn } => out.push(json!({
                "turn": turn, "prompt": Value::Null, "answer": Value::Null,
                "stop-reason": Value::Null, "started-ms": at, "ended-ms": Value::Null,
            })),
            SessionEvent::UserMessage { content } => {
                if let Some(turn) = out.last_mut().filter(|t| t["prompt"].is_null()) {
                    turn["prompt"] = json!(blocks_text(content));
                }
            }
            SessionEvent::AssistantMessage { text, .. } => {
                if let Some(turn) = out.last_mut() {
                    if !text.is_empty() {
                        turn["answer"] = json!(text);
                    }
                }
            }
            SessionEvent::TurnEnd { reason, usage, .. } => {
                if let Some(turn) = out.last_mut() {
                    turn["stop-reason"] = json!(reason);
                    turn["ended-ms"] = json!(at);
                    if let Some(usage) = usage {
                        turn["usage"] = json!(usage);
                    }
                }
            }
            SessionEvent::ToolResult { .. } | SessionEvent::RemoteTask { .. } => {}
        }
    }
    out
}

/// Whether the last turn of `turns` has not ended.
fn open_turn(turns: &[Value]) -> bool {
    turns.last().is_some_and(|t| t["ended-ms"].is_null())
}

/// What the list shows of a session's events: its first prompt, how many turns it has, and
/// whether its last turn has not ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gist {
    prompt: String,
    turns: usize,
    open: bool,
}

impl Gist {
    fn of(turns: &[Value]) -> Self {
        Self {
            prompt: turns
                .iter()
                .find_map(|t| t["prompt"].as_str())
                .unwrap_or_default()
                .to_string(),
            turns: turns.len(),
            open: open_turn(turns),
        }
    }
}

/// The gists of the sessions listed last, each with the count and size of the events it was
/// read from: a store's events are only ever appended, so a session whose count and size have
/// not moved has the same gist, and a refresh of the list reads the events of only the
/// sessions written since (rather than of all 200 every time).
#[derive(Default)]
pub(crate) struct Gists {
    seen: Mutex<HashMap<String, (Mark, Gist)>>,
}

/// A session's count and size of events, which move whenever it is written.
type Mark = (u64, u64);

impl Gists {
    /// The gist of `summary`'s session, read from the store only if it was written since.
    fn of(&self, store: &dyn SessionStore, summary: &SessionSummary) -> Result<Gist, ApiError> {
        let mark = (summary.events, summary.bytes);
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, gist)) = seen.get(&summary.id).filter(|(at, _)| *at == mark) {
            return Ok(gist.clone());
        }
        drop(seen);
        let gist = Gist::of(&turns(&parsed(&store.events(&summary.id)?)));
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(summary.id.clone(), (mark, gist.clone()));
        Ok(gist)
    }

    /// Forgets the sessions not in `listed` (those no longer among the most recent).
    fn keep(&self, listed: &[&str]) {
        let listed: std::collections::HashSet<&str> = listed.iter().copied().collect();
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|id, _| listed.contains(id.as_str()));
    }
}

/// How a session stands: `running_here` says whether this process runs a turn of it.
fn state(summary: &SessionSummary, gist: &Gist, running_here: bool, pending: usize) -> State {
    let running = running_here || (gist.open && !summary.interrupted);
    match (running, pending > 0) {
        (true, true) => State::Waiting,
        (true, false) => State::Running,
        (false, _) if summary.interrupted => State::Interrupted,
        (false, _) => State::Idle,
    }
}

/// One session as the list shows it.
fn listing(
    summary: &SessionSummary,
    gist: &Gist,
    running_here: bool,
    held_here: bool,
    pending: usize,
) -> Value {
    json!({
        "id": summary.id,
        "agent": summary.agent,
        "parent": summary.parent,
        "working-directory": summary.working_directory,
        "created-ms": summary.created_ms,
        "updated-ms": summary.updated_ms,
        "events": summary.events,
        "interrupted": summary.interrupted,
        "prompt": gist.prompt,
        "turns": gist.turns,
        "state": state(summary, gist, running_here, pending).as_str(),
        "here": held_here,
        "pending-approvals": pending,
    })
}

/// What this process holds of the sessions: which it has open, which run a turn here.
pub(crate) trait Here {
    /// Whether this process has the session open (its agent is held here).
    fn holds(&self, session: &str) -> bool;
    /// Whether this process runs a turn of the session.
    fn runs(&self, session: &str) -> bool;
}

/// The pending requests for approval of every tree, by top-level session.
fn pending_by_root(store: &dyn SessionStore) -> Result<HashMap<String, usize>, ApiError> {
    let mut out = HashMap::new();
    for r in store.approvals(None)? {
        if r.status == Status::Pending {
            *out.entry(r.root).or_default() += 1;
        }
    }
    Ok(out)
}

/// The top-level sessions, most recently written first, whose id, first prompt or state
/// contains `query` (ignoring case; every one for an empty query).
pub(crate) fn sessions(
    store: &dyn SessionStore,
    gists: &Gists,
    here: &dyn Here,
    query: &str,
) -> Result<Vec<Value>, ApiError> {
    let query = query.trim().to_lowercase();
    let pending = pending_by_root(store)?;
    let listed: Vec<SessionSummary> = store
        .sessions()?
        .into_iter()
        .filter(|s| s.parent.is_none())
        .take(LISTED)
        .collect();
    gists.keep(&listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>());
    let mut out = Vec::new();
    for summary in &listed {
        let row = listing(
            summary,
            &gists.of(store, summary)?,
            here.runs(&summary.id),
            here.holds(&summary.id),
            pending.get(&summary.id).copied().unwrap_or(0),
        );
        let matches = query.is_empty()
            || ["id", "prompt", "state"].iter().any(|k| {
                row[*k]
                    .as_str()
                    .is_some_and(|v| v.to_lowercase().contains(&query))
            });
        if matches {
            out.push(row);
        }
    }
    Ok(out)
}

/// Everything the page shows of one session (top-level or a child's): its listing, turns,
/// conversation, tree of runs, what it spent against its budget, and the requests for
/// approval of its tree.
pub(crate) fn session(
    store: &dyn SessionStore,
    subagents: &SubagentService,
    here: &dyn Here,
    id: &str,
) -> Result<Value, ApiError> {
    let Some(summary) = store.session(id)? else {
        return Err(ApiError::not_found(format!(
            "no session `{id}` in {}",
            store.name()
        )));
    };
    let stored = store.events(id)?;
    let events = parsed(&stored);
    let turns = turns(&events);
    // The requests of a tree are kept with its top-level session.
    let root = root_of(store, &summary)?;
    let approvals = store.approvals(Some(&root))?;
    let pending = approvals
        .iter()
        .filter(|r| r.status == Status::Pending)
        .count();
    let mut runs = seam_core::store::tree::tree(store, id)?;
    overlay(subagents, &mut runs);
    from_journal(&mut runs, id, &journal(store, &root));
    let spend = store.spend(id)?.unwrap_or_default();
    let conversation: Vec<Value> = stored
        .iter()
        .map(|e| {
            json!({
                "seq": e.seq,
                "at-ms": e.at_ms,
                "event": serde_json::from_str::<Value>(&e.body).unwrap_or(Value::Null),
            })
        })
        .collect();
    Ok(json!({
        "session": listing(
            &summary,
            &Gist::of(&turns),
            here.runs(id),
            here.holds(id),
            pending
        ),
        "root": root,
        "turns": turns,
        "conversation": conversation,
        "runs": runs,
        "spent": spend.spent.report(),
        "budget": spend.budget,
        "approvals": approvals_json(&approvals),
    }))
}

/// The top-level session above `summary` (itself for a top-level one).
fn root_of(store: &dyn SessionStore, summary: &SessionSummary) -> Result<String, ApiError> {
    let mut current = summary.clone();
    // Sessions link one way, child to parent here; a bound keeps a damaged store from looping.
    for _ in 0..64 {
        let Some(parent) = current.parent.clone() else {
            break;
        };
        match store.session(&parent)? {
            Some(p) => current = p,
            None => break,
        }
    }
    Ok(current.id)
}

/// Marks each running run of the tree that is live in this process (`live`), with whether it
/// takes messages (`steerable`) and its latest progress (`progress`), found by its record's key
/// (run ids are unique in their process only).
fn overlay(subagents: &SubagentService, runs: &mut [Value]) {
    for node in runs {
        let live = node["key"].as_i64().and_then(|key| subagents.live_run(key));
        match live {
            Some(run) if node["status"] == "running" => {
                node["live"] = json!(true);
                node["steerable"] = json!(run.steerable());
                if let Some(last) = run.progress().last() {
                    node["progress"] = json!(blocks_text(std::slice::from_ref(last)));
                }
            }
            _ => node["live"] = json!(false),
        }
        if let Some(children) = node["runs"].as_array_mut() {
            overlay(subagents, children);
        }
    }
}

/// Whether the session `id`'s last turn is open in the store and not interrupted: a turn that
/// another process runs, when this one does not.
pub(crate) fn runs_elsewhere(store: &dyn SessionStore, id: &str) -> Result<bool, ApiError> {
    let Some(summary) = store.session(id)? else {
        return Ok(false);
    };
    Ok(!summary.interrupted && open_turn(&turns(&parsed(&store.events(id)?))))
}

/// Requests for approval as the page shows them: each record with what it asks, in words
/// (`what`).
pub(crate) fn approvals_json(records: &[seam_core::approval::ApprovalRecord]) -> Vec<Value> {
    records
        .iter()
        .map(|r| {
            let mut json = serde_json::to_value(r).unwrap_or(Value::Null);
            json["what"] = json!(r.subject.describe());
            json
        })
        .collect()
}

/// What the journal of the processes that ran the tree under `root` says of each run, by the
/// calling session and the run id: its ends (`subagent/end`, oldest first) and its latest
/// progress. A store that cannot tell has nothing.
#[derive(Default)]
struct Journal {
    ends: HashMap<(String, String), Vec<Value>>,
    progress: HashMap<(String, String), String>,
}

/// The text of the content blocks of a journaled event's `key`.
fn blocks_of(event: &Value, key: &str) -> String {
    event[key]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["value"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn journal(store: &dyn SessionStore, root: &str) -> Journal {
    let mut out = Journal::default();
    for line in store.journal_of(root).unwrap_or_default() {
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(session)) =
            (event["id"].as_str(), event["parent"]["session-id"].as_str())
        else {
            continue;
        };
        let key = (session.to_string(), id.to_string());
        match event["event"].as_str() {
            Some("subagent/end") => out.ends.entry(key).or_default().push(event),
            Some("subagent/progress") => {
                out.progress.insert(key, blocks_of(&event, "content"));
            }
            _ => {}
        }
    }
    out
}

/// Gives each run of `runs` (started by the session `session`) what the journal says of it:
/// an ended run its answer (`answer`) and the tokens and cost its tree reported (`usage`,
/// `cost-usd`), from the latest end the journal has for its id that ended as it did (run ids
/// are unique in their process only); a running one its latest progress, when this process
/// does not run it.
fn from_journal(runs: &mut [Value], session: &str, journal: &Journal) {
    for node in runs {
        let key = (
            session.to_string(),
            node["run"].as_str().unwrap_or_default().to_string(),
        );
        if node["status"] == "running" {
            if let (Some(text), true) = (journal.progress.get(&key), node["progress"].is_null()) {
                node["progress"] = json!(text);
            }
        } else if let Some(ends) = journal.ends.get(&key) {
            let reason = node["stop-reason"].clone();
            if let Some(end) = ends.iter().rev().find(|e| e["stop-reason"] == reason) {
                let answer = blocks_of(end, "last-assistant-message");
                if !answer.is_empty() {
                    node["answer"] = json!(answer);
                }
                for field in ["usage", "cost-usd"] {
                    if !end[field].is_null() {
                        node[field] = end[field].clone();
                    }
                }
            }
        }
        let child = node["session"].as_str().map(str::to_string);
        if let (Some(child), Some(below)) = (child, node["runs"].as_array_mut()) {
            from_journal(below, &child, journal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seam_core::store::{MemoryStore, Write};
    use seam_core::types::{ContentBlock, StopReason, ToolCall};

    fn summary(interrupted: bool) -> SessionSummary {
        SessionSummary {
            id: "s1-1".into(),
            agent: "agent:1".into(),
            parent: None,
            working_directory: "/w".into(),
            created_ms: 1,
            updated_ms: 2,
            events: 0,
            bytes: 0,
            interrupted,
        }
    }

    fn text(s: &str) -> Vec<ContentBlock> {
        vec![ContentBlock::text(s)]
    }

    #[test]
    fn turns_carry_their_prompt_answer_and_end() {
        let events = vec![
            (1, 10, SessionEvent::TurnStart { turn: 1 }),
            (
                2,
                11,
                SessionEvent::UserMessage {
                    content: text("<b>hi</b>"),
                },
            ),
            (
                3,
                12,
                SessionEvent::AssistantMessage {
                    text: "calling".into(),
                    tool_calls: vec![ToolCall {
                        id: "c".into(),
                        name: "t".into(),
                        arguments: "{}".into(),
                    }],
                },
            ),
            // A steering message later in the turn is not its prompt.
            (
                4,
                13,
                SessionEvent::UserMessage {
                    content: text("also"),
                },
            ),
            (
                5,
                14,
                SessionEvent::AssistantMessage {
                    text: "done".into(),
                    tool_calls: Vec::new(),
                },
            ),
            (
                6,
                15,
                SessionEvent::TurnEnd {
                    turn: 1,
                    reason: StopReason::Completed,
                    usage: None,
                },
            ),
            (7, 16, SessionEvent::TurnStart { turn: 2 }),
        ];
        let turns = turns(&events);
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0]["prompt"], "<b>hi</b>");
        assert_eq!(turns[0]["answer"], "done");
        assert_eq!(turns[0]["stop-reason"], "completed");
        assert_eq!(turns[0]["ended-ms"], 15);
        let gist = Gist::of(&turns);
        assert!(gist.open);
        assert_eq!(gist.turns, 2);
        // An open turn runs (here or elsewhere), or was cut short by its process's end.
        assert_eq!(state(&summary(false), &gist, false, 0), State::Running);
        assert_eq!(state(&summary(false), &gist, false, 1), State::Waiting);
        assert_eq!(state(&summary(true), &gist, false, 0), State::Interrupted);
        assert_eq!(state(&summary(true), &gist, true, 0), State::Running);
        let ended = Gist::of(&turns[..1]);
        assert_eq!(state(&summary(false), &ended, false, 0), State::Idle);
        let listed = listing(&summary(false), &gist, false, true, 0);
        assert_eq!(listed["prompt"], "<b>hi</b>");
        assert_eq!(listed["state"], "running");
        assert_eq!(listed["here"], true);
    }

    struct Nowhere;

    impl Here for Nowhere {
        fn holds(&self, _: &str) -> bool {
            false
        }
        fn runs(&self, _: &str) -> bool {
            false
        }
    }

    fn append(store: &dyn SessionStore, session: &str, events: &[SessionEvent]) {
        let writes = events
            .iter()
            .map(|e| Write::Append {
                session: session.into(),
                kind: e.kind().into(),
                body: serde_json::to_string(e).expect("an event serialises"),
            })
            .collect();
        store
            .commit(writes)
            .expect("the memory store takes the events");
    }

    fn open(store: &dyn SessionStore, id: &str, prompt: &str) {
        store
            .commit(vec![Write::OpenSession {
                id: id.into(),
                agent: "agent:1".into(),
                parent: None,
                working_directory: "/w".into(),
            }])
            .expect("the memory store opens a session");
        append(
            store,
            id,
            &[
                SessionEvent::TurnStart { turn: 1 },
                SessionEvent::UserMessage {
                    content: text(prompt),
                },
                SessionEvent::TurnEnd {
                    turn: 1,
                    reason: StopReason::Completed,
                    usage: None,
                },
            ],
        );
    }

    fn row<'a>(rows: &'a [Value], id: &str) -> &'a Value {
        rows.iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("`{id}` is not listed in {rows:?}"))
    }

    #[test]
    fn the_list_follows_what_is_written_and_forgets_what_is_gone() {
        let store = MemoryStore::new(Default::default());
        let gists = Gists::default();
        open(&store, "a", "first of a");
        open(&store, "b", "first of b");
        let rows = sessions(&store, &gists, &Nowhere, "").expect("listed");
        assert_eq!(row(&rows, "a")["prompt"], "first of a");
        assert_eq!(row(&rows, "a")["turns"], 1);
        assert_eq!(row(&rows, "a")["state"], "idle");

        // A new turn of `a`, still open: its row moves although its first prompt does not.
        append(
            &store,
            "a",
            &[
                SessionEvent::TurnStart { turn: 2 },
                SessionEvent::UserMessage {
                    content: text("second"),
                },
            ],
        );
        let rows = sessions(&store, &gists, &Nowhere, "").expect("listed");
        assert_eq!(row(&rows, "a")["prompt"], "first of a");
        assert_eq!(row(&rows, "a")["turns"], 2);
        assert_eq!(row(&rows, "a")["state"], "running");
        assert_eq!(row(&rows, "b")["turns"], 1);
        let searched = sessions(&store, &gists, &Nowhere, "OF B").expect("listed");
        assert_eq!(searched.len(), 1);
        assert_eq!(searched[0]["id"], "b");

        // A removed session leaves the list and the console's memory of it.
        assert!(store.remove("b").expect("removed"));
        let rows = sessions(&store, &gists, &Nowhere, "").expect("listed");
        assert_eq!(rows.len(), 1);
        let seen = gists.seen.lock().expect("not poisoned");
        assert_eq!(seen.keys().collect::<Vec<_>>(), ["a"]);
    }
}
