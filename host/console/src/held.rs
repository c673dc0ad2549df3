//! The sessions this process has open: a top-level agent each (made for a new session, or
//! continuing one kept in the store), and the turn running in each. An agent stays open after
//! its turn, so that its background children go on; past a number of idle ones, the least
//! recently used with no child running is closed (its session stays in the store).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use seam_agent::agent::Agent;
use seam_core::sync::lock;
use seam_core::types::{ContentBlock, RunState};
use serde_json::json;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::host::ConsoleHost;
use crate::live::Live;
use crate::views;

/// Idle sessions whose agents stay open. Each open agent counts against `[agent]
/// max_live_agents`.
const IDLE: usize = 64;

struct Open {
    agent: Arc<Agent>,
    /// Set while a turn runs: it becomes `true` when the turn has ended.
    running: Option<watch::Receiver<bool>>,
    used_ms: u64,
}

/// The sessions open here.
pub(crate) struct Held {
    host: ConsoleHost,
    cwd: String,
    live: Arc<Live>,
    open: Mutex<HashMap<String, Open>>,
    turns: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Held {
    pub fn new(host: ConsoleHost, cwd: String, live: Arc<Live>) -> Arc<Self> {
        Arc::new(Self {
            host,
            cwd,
            live,
            open: Mutex::default(),
            turns: Mutex::default(),
        })
    }

    /// The agent of the session `id`, if it is open here.
    pub fn agent(&self, id: &str) -> Option<Arc<Agent>> {
        lock(&self.open).get(id).map(|o| o.agent.clone())
    }

    /// Starts a turn with `prompt`: in the top-level session `session` (continued from the store
    /// if it is not open here), or in a new one. Returns the session.
    pub fn start_turn(
        self: &Arc<Self>,
        session: Option<&str>,
        prompt: String,
    ) -> Result<String, ApiError> {
        if prompt.trim().is_empty() {
            return Err(ApiError::bad_request("`prompt`: the prompt is empty"));
        }
        let (session, agent, ended) = {
            let mut open = lock(&self.open);
            let session = self.open_session(&mut open, session)?;
            let Some(entry) = open.get_mut(&session) else {
                return Err(ApiError::internal("the session went away"));
            };
            if entry.running.is_some() {
                return Err(ApiError::conflict(format!(
                    "session `{session}` is running a turn: send it a message, interrupt it, or \
                     wait for it to end"
                )));
            }
            let (tx, rx) = watch::channel(false);
            entry.running = Some(rx);
            entry.used_ms = seam_core::store::now_ms();
            (session, entry.agent.clone(), tx)
        };
        self.live
            .notify(&json!({"what": "turn-started", "session": session}));
        let held = self.clone();
        let id = session.clone();
        let handle = tokio::spawn(async move {
            agent.run_turn(vec![ContentBlock::text(prompt)]).await;
            held.ended(&id);
            let _ = ended.send(true);
            held.live
                .notify(&json!({"what": "turn-ended", "session": id}));
        });
        let mut turns = lock(&self.turns);
        turns.retain(|h| !h.is_finished());
        turns.push(handle);
        Ok(session)
    }

    /// The session `id` names (continued from the store if it is not open here), or a new one.
    fn open_session(
        &self,
        open: &mut HashMap<String, Open>,
        id: Option<&str>,
    ) -> Result<String, ApiError> {
        let agents = &self.host.agents;
        let Some(id) = id else {
            let agent = agents
                .create_top_level(None, &self.cwd, None)
                .map_err(|e| ApiError::unavailable(format!("cannot create the agent: {e}")))?;
            let session = agent.as_parent().session_id;
            open.insert(session.clone(), self.entry(agent));
            return Ok(session);
        };
        if open.contains_key(id) {
            return Ok(id.to_string());
        }
        let store = agents.store();
        match store.session(id)? {
            Some(s) if s.parent.is_none() => {
                if views::runs_elsewhere(store.as_ref(), id)? {
                    return Err(ApiError::conflict(format!(
                        "session `{id}` is running a turn in another process: continue it once \
                         that turn has ended"
                    )));
                }
                let agent = agents
                    .create_top_level(None, &s.working_directory, Some(id))
                    .map_err(|e| {
                        ApiError::unavailable(format!("cannot continue session `{id}`: {e}"))
                    })?;
                open.insert(id.to_string(), self.entry(agent));
                Ok(id.to_string())
            }
            Some(_) => Err(ApiError::bad_request(format!(
                "session `{id}` is a child's: continue its top-level session, or send its run \
                 a message"
            ))),
            None => Err(ApiError::not_found(format!(
                "no session `{id}` in {}",
                store.name()
            ))),
        }
    }

    fn entry(&self, agent: Arc<Agent>) -> Open {
        Open {
            agent,
            running: None,
            used_ms: seam_core::store::now_ms(),
        }
    }

    /// A turn of `session` ended: it leaves its session, and idle sessions past the limit are
    /// closed.
    fn ended(&self, session: &str) {
        let closed = {
            let mut open = lock(&self.open);
            if let Some(entry) = open.get_mut(session) {
                entry.running = None;
            }
            self.close_idle(&mut open)
        };
        for agent in closed {
            let agents = self.host.agents.clone();
            tokio::spawn(async move { agents.dispose(agent.id()).await });
        }
    }

    /// Takes the least recently used idle sessions with no child running out of `open`, past
    /// [`IDLE`]; returns their agents, to dispose.
    fn close_idle(&self, open: &mut HashMap<String, Open>) -> Vec<Arc<Agent>> {
        let subagents = &self.host.subagents;
        let mut idle: Vec<(u64, String)> = open
            .iter()
            .filter(|(_, o)| o.running.is_none())
            .filter(|(_, o)| {
                !subagents
                    .background_runs(o.agent.id())
                    .iter()
                    .any(|r| r.state == RunState::Running)
            })
            .map(|(id, o)| (o.used_ms, id.clone()))
            .collect();
        if idle.len() <= IDLE {
            return Vec::new();
        }
        idle.sort();
        let excess = idle.len() - IDLE;
        idle.into_iter()
            .take(excess)
            .filter_map(|(_, id)| open.remove(&id).map(|o| o.agent))
            .collect()
    }

    /// Cancels the turn running in `session`, and waits (at most the host's cancel grace) for
    /// it to end.
    pub async fn interrupt(&self, session: &str) -> Result<(), ApiError> {
        let (agent, mut ended) = {
            let open = lock(&self.open);
            match open.get(session) {
                Some(Open {
                    agent,
                    running: Some(rx),
                    ..
                }) => (agent.clone(), rx.clone()),
                _ => {
                    return Err(ApiError::conflict(format!(
                        "session `{session}` runs no turn in this process"
                    )))
                }
            }
        };
        agent.cancel_turn();
        let _ = tokio::time::timeout(self.host.cancel_grace, ended.wait_for(|done| *done)).await;
        Ok(())
    }

    /// Steers the turn running in `session` with `text`: the model reads it before its next
    /// call (as A2A's message to a running task, or ACP's prompt during a turn).
    pub fn steer(&self, session: &str, text: String) -> Result<(), ApiError> {
        if text.trim().is_empty() {
            return Err(ApiError::bad_request("`text`: the message is empty"));
        }
        let open = lock(&self.open);
        match open.get(session) {
            Some(Open {
                agent,
                running: Some(_),
                ..
            }) => {
                agent.steer(vec![ContentBlock::text(text)]);
                Ok(())
            }
            _ => Err(ApiError::conflict(format!(
                "session `{session}` runs no turn in this process: continue it with a new prompt"
            ))),
        }
    }

    /// Whether a turn of `session` runs here.
    pub fn running(&self, session: &str) -> bool {
        lock(&self.open)
            .get(session)
            .is_some_and(|o| o.running.is_some())
    }

    /// Whether `session` is open here.
    pub fn holds(&self, session: &str) -> bool {
        lock(&self.open).contains_key(session)
    }

    /// The end of serving: every running turn is cancelled and every agent disposed.
    pub async fn shut_down(&self) {
        let agents: Vec<Arc<Agent>> = lock(&self.open).drain().map(|(_, o)| o.agent).collect();
        for agent in &agents {
            agent.cancel_turn();
        }
        let turns = std::mem::take(&mut *lock(&self.turns));
        let grace = self.host.cancel_grace;
        let _ = tokio::time::timeout(grace, futures::future::join_all(turns)).await;
        for agent in agents {
            self.host.agents.dispose(agent.id()).await;
        }
    }
}

impl views::Here for Held {
    fn holds(&self, session: &str) -> bool {
        Held::holds(self, session)
    }

    fn runs(&self, session: &str) -> bool {
        self.running(session)
    }
}
