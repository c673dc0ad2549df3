//! Streams: what a running task's tree does, as status updates (a short agent message for each
//! tool call, each delegation and each child's progress report), and the server-sent events a
//! `SendStreamingMessage` or `SubscribeToTask` answer carries.

use std::convert::Infallible;
use std::sync::Arc;

use a2a::JsonRpcId;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::StreamBody;
use hyper::body::Frame;
use seam_agent::agent::AgentRegistry;
use seam_core::events::{Event, EventBus, ListenerId};
use seam_core::types::blocks_text;
use tokio::sync::broadcast;

use crate::wire::{self, StreamResponse, Task};

use seam_core::sync::lock;

use super::contexts::Contexts;

/// How long a stream may be silent before a keep-alive comment is sent.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(3);

/// Follows every served tree's tool calls, delegations and progress: an event belongs to the
/// context whose agent is the root of its agent's lineage, and is said on its running task.
pub(crate) fn follow(
    events: &EventBus,
    agents: Arc<AgentRegistry>,
    contexts: Arc<Contexts>,
) -> ListenerId {
    events.subscribe(move |event| {
        let (owner, text) = match &event {
            Event::AgentToolCall { id, tool, .. } => (id, format!("tool `{tool}`")),
            Event::SubagentStart {
                provider,
                id,
                parent,
            } => (&parent.id, format!("delegating to `{provider}` ({id})")),
            Event::SubagentProgress {
                id,
                content,
                parent,
                ..
            } => (&parent.id, format!("{id}: {}", blocks_text(content))),
            _ => return Ok(()),
        };
        let lineage = agents.lineage(owner);
        let Some(root) = lineage.last() else {
            return Ok(());
        };
        let running = lock(&contexts)
            .values()
            .find(|c| c.agent.id() == root)
            .and_then(|c| c.running.clone());
        if let Some(running) = running {
            // A child's doing names the child.
            let text = if owner != root && !matches!(event, Event::SubagentProgress { .. }) {
                format!("{owner}: {text}")
            } else {
                text
            };
            running.said(text);
        }
        Ok(())
    })
}

/// The body of a streamed answer.
pub(crate) type SseBody =
    StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// The events of a stream to request `id`: `first` (the task as it stands), then what
/// `updates` carry until the task's final status, or until `done` says it ended (for a
/// subscriber that fell behind).
pub(crate) fn sse(
    id: JsonRpcId,
    first: Task,
    updates: broadcast::Receiver<StreamResponse>,
    done: tokio::sync::watch::Receiver<Option<Task>>,
) -> SseBody {
    let frame = |id: &JsonRpcId, response: &StreamResponse| {
        Ok(Frame::data(wire::sse_event(&wire::success(
            id.clone(),
            response,
        ))))
    };
    let head = futures::stream::iter([frame(&id, &StreamResponse::Task(first))]);
    struct Follow {
        id: JsonRpcId,
        updates: broadcast::Receiver<StreamResponse>,
        done: tokio::sync::watch::Receiver<Option<Task>>,
        ended: bool,
    }
    let rest = futures::stream::unfold(
        Follow {
            id,
            updates,
            done,
            ended: false,
        },
        move |mut f| async move {
            if f.ended {
                return None;
            }
            loop {
                let Ok(next) = tokio::time::timeout(KEEP_ALIVE, f.updates.recv()).await else {
                    // Nothing to say for a while: a comment, which clients skip, keeps a client
                    // with a read timeout (httpx's default is 5 s) from dropping the stream.
                    return Some((Ok(Frame::data(Bytes::from_static(b": keep-alive\n\n"))), f));
                };
                match next {
                    Ok(update) => {
                        if let StreamResponse::StatusUpdate(s) = &update {
                            f.ended = s.status.state.is_terminal();
                        }
                        let out = frame(&f.id, &update);
                        return Some((out, f));
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!(skipped = n, "seam a2a: a slow stream skipped updates");
                    }
                    Err(broadcast::error::RecvError::Closed) => {
                        // The sender went with the turn: say how it ended, if the end is known.
                        f.ended = true;
                        let end = f.done.borrow_and_update().clone()?;
                        let update = StreamResponse::StatusUpdate(a2a::TaskStatusUpdateEvent {
                            task_id: end.id.clone(),
                            context_id: end.context_id.clone(),
                            status: end.status,
                            metadata: None,
                        });
                        let out = frame(&f.id, &update);
                        return Some((out, f));
                    }
                }
            }
        },
    );
    StreamBody::new(head.chain(rest).boxed())
}
