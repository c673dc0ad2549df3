//! What `--tree` and `--trace` draw from: the lifecycle events of a command's runs, agents and
//! tool calls, each with the time it came, recorded from the bus while the command runs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seam_host::{Event, Host, ListenerId};

/// Records a command's events.
pub(crate) struct Recording {
    seen: Arc<Mutex<Vec<(Duration, Event)>>>,
    listener: ListenerId,
    began: Instant,
}

/// A command's events, in order, each with its time since the recording began.
pub(crate) struct Recorded {
    /// The events.
    pub(crate) events: Vec<(Duration, Event)>,
    /// How long the recording ran.
    pub(crate) took: Duration,
}

impl Recording {
    /// Starts recording `host`'s events (those `--tree` and `--trace` draw).
    pub(crate) fn start(host: &Host) -> Self {
        let seen: Arc<Mutex<Vec<(Duration, Event)>>> = Arc::default();
        let sink = seen.clone();
        let began = Instant::now();
        let listener = host.events().subscribe(move |event| {
            let kept = matches!(
                event,
                Event::SubagentStart { .. }
                    | Event::SubagentEnd { .. }
                    | Event::SubagentProgress { .. }
                    | Event::AgentCreated { .. }
                    | Event::AgentTurnStart { .. }
                    | Event::AgentTurnEnd { .. }
                    | Event::AgentToolCall { .. }
                    | Event::AgentToolResult { .. }
                    | Event::ApprovalRequested { .. }
                    | Event::ApprovalResolved { .. }
            );
            if kept {
                let at = began.elapsed();
                sink.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((at, event));
            }
            Ok(())
        });
        Self {
            seen,
            listener,
            began,
        }
    }

    /// Stops recording.
    pub(crate) fn finish(self, host: &Host) -> Recorded {
        // A batching store delivers a run's events after their commit: every one emitted
        // before now is heard first.
        if let Err(e) = host.events().flush() {
            tracing::warn!(error = %e, "the session store could not write the last events");
        }
        host.events().unsubscribe(self.listener);
        let events = std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()));
        Recorded {
            events,
            took: self.began.elapsed(),
        }
    }
}
