//! The child's session an A2A run keeps in the store (with `config.resume`, the default): its
//! prompts, the remote task and context it followed, and its answers, so that a continued child
//! picks up the same task or context, in this process or after a restart.

use seam_agent::session::SessionEvent;
use seam_core::store::Write;
use seam_core::subagent::RunContext;
use seam_core::types::{ContentBlock, StopReason};

/// The kept session of one run.
pub struct Kept {
    /// The store's session id.
    pub session: String,
    turn: u32,
}

/// The remote task a kept session last followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followed {
    /// The task's id.
    pub task: String,
    /// Its context.
    pub context: String,
}

/// The task the kept `session` last followed, if it names one.
pub fn followed(ctx: &RunContext, session: &str) -> Option<Followed> {
    let events = ctx.store().events(session).ok()?;
    events.iter().rev().find_map(
        |e| match serde_json::from_str::<SessionEvent>(&e.body).ok()? {
            SessionEvent::RemoteTask { task, context } => Some(Followed { task, context }),
            _ => None,
        },
    )
}

impl Kept {
    /// Opens (or, for a continued child, goes on with) the run's session, linked to the run,
    /// with the turn's start and prompt. `None`: the store refused it (logged; the run goes on
    /// without a kept session).
    pub fn open(
        ctx: &RunContext,
        plugin: &str,
        continued: Option<String>,
        parent_session: &str,
        working_directory: &str,
        prompt: &[ContentBlock],
    ) -> Option<Self> {
        let store = ctx.store().clone();
        let session =
            continued.unwrap_or_else(|| format!("{}-a2a-{}", store.id_prefix(), ctx.id()));
        let turn = store
            .events(&session)
            .map(|e| e.iter().filter(|e| e.kind == "turn/start").count())
            .unwrap_or(0) as u32
            + 1;
        let kept = Self { session, turn };
        let writes = vec![
            Write::OpenSession {
                id: kept.session.clone(),
                agent: plugin.to_string(),
                parent: Some(parent_session.to_string()),
                working_directory: working_directory.to_string(),
            },
            kept.event(SessionEvent::TurnStart { turn }),
            kept.event(SessionEvent::UserMessage {
                content: prompt.to_vec(),
            }),
        ];
        if let Err(e) = store.commit(writes) {
            tracing::warn!(plugin, error = %e, "cannot keep the A2A child's session");
            return None;
        }
        ctx.link_child_session(&kept.session);
        Some(kept)
    }

    fn event(&self, event: SessionEvent) -> Write {
        Write::Append {
            session: self.session.clone(),
            kind: event.kind().to_string(),
            body: event.to_json(),
        }
    }

    fn commit(&self, ctx: &RunContext, writes: Vec<Write>) {
        if let Err(e) = ctx.store().commit(writes) {
            tracing::warn!(session = %self.session, error = %e, "cannot keep the A2A child's exchange");
        }
    }

    /// The remote task the run follows, once the agent named it: committed before the run
    /// reads on, so that a process killed from here on leaves it to be followed again.
    pub fn task(&self, ctx: &RunContext, followed: &Followed) {
        let event = self.event(SessionEvent::RemoteTask {
            task: followed.task.clone(),
            context: followed.context.clone(),
        });
        self.commit(ctx, vec![event]);
    }

    /// A steering message sent to the task.
    pub fn steered(&self, ctx: &RunContext, content: &[ContentBlock]) {
        let event = self.event(SessionEvent::UserMessage {
            content: content.to_vec(),
        });
        self.commit(ctx, vec![event]);
    }

    /// The turn's answer and end.
    pub fn answered(&self, ctx: &RunContext, answer: &str, reason: StopReason) {
        let writes = vec![
            self.event(SessionEvent::AssistantMessage {
                text: answer.to_string(),
                tool_calls: Vec::new(),
            }),
            self.event(SessionEvent::TurnEnd {
                turn: self.turn,
                reason,
                usage: None,
            }),
        ];
        self.commit(ctx, writes);
    }
}
