//! Sessions: an append-only log of what happened in an agent, with a header saying where it
//! came from.

use serde::{Deserialize, Serialize};

use seam_core::types::{ContentBlock, StopReason, ToolCall};

/// Who and where a session belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SessionHeader {
    /// Session id.
    pub session_id: String,
    /// Working directory of the agent.
    pub working_directory: String,
    /// The parent's session, for a child agent (lineage).
    pub parent_session: Option<String>,
}

/// One entry of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SessionEvent {
    /// A turn began.
    #[serde(rename = "turn/start")]
    TurnStart {
        /// Turn number, from 1.
        turn: u32,
    },
    /// A user (or delegating parent, or steering) message.
    UserMessage {
        /// Its content.
        content: Vec<ContentBlock>,
    },
    /// A model reply.
    AssistantMessage {
        /// Its text.
        text: String,
        /// The tool calls it made.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's answer to a call.
    ToolResult {
        /// The call answered.
        call_id: String,
        /// The tool.
        name: String,
        /// Its content.
        content: Vec<ContentBlock>,
        /// Whether it failed.
        is_error: bool,
    },
    /// A turn ended.
    #[serde(rename = "turn/end")]
    TurnEnd {
        /// Turn number.
        turn: u32,
        /// Why.
        reason: StopReason,
        /// The tokens the turn's model calls used, when the endpoint said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<seam_core::types::Usage>,
    },
    /// The task of a remote agent this session follows (an A2A child's kept session): what a
    /// continued child, or a restarted host, picks up again. Not part of the conversation.
    RemoteTask {
        /// The remote task's id.
        task: String,
        /// The remote context the task belongs to.
        context: String,
    },
}

impl SessionEvent {
    /// Its type, as its JSON says (`turn/start`, `user-message`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TurnStart { .. } => "turn/start",
            Self::UserMessage { .. } => "user-message",
            Self::AssistantMessage { .. } => "assistant-message",
            Self::ToolResult { .. } => "tool-result",
            Self::TurnEnd { .. } => "turn/end",
            Self::RemoteTask { .. } => "remote-task",
        }
    }

    /// The event as one JSON line.
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// An append-only session log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Session {
    /// Where it belongs.
    pub header: SessionHeader,
    events: Vec<SessionEvent>,
}

impl Session {
    /// A session starting from `seed` (which must be balanced: see [`Session::completed_prefix`]).
    pub fn new(header: SessionHeader, seed: Vec<SessionEvent>) -> Self {
        Self {
            header,
            events: seed,
        }
    }

    /// Appends an event.
    pub fn push(&mut self, event: SessionEvent) {
        self.events.push(event);
    }

    /// All events, oldest first.
    pub fn events(&self) -> &[SessionEvent] {
        &self.events
    }

    /// The balanced completed-turn prefix: every event up to and including the last `turn/end`.
    /// A turn in flight is left out; with no completed turn the prefix is empty.
    pub fn completed_prefix(&self) -> Vec<SessionEvent> {
        let end = self
            .events
            .iter()
            .rposition(|e| matches!(e, SessionEvent::TurnEnd { .. }))
            .map(|i| i + 1)
            .unwrap_or(0);
        self.events[..end].to_vec()
    }

    /// Number of completed turns.
    pub fn turns(&self) -> u32 {
        self.events
            .iter()
            .filter(|e| matches!(e, SessionEvent::TurnEnd { .. }))
            .count() as u32
    }
}
