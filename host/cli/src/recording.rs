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
        host.events().unsubscribe(self.listener);
        let events = std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()));
        Recorded {
            events,
            took: self.began.elapsed(),
        }
    }
}

/// What a command draws when it ends: `--tree` on stderr, `--trace FILE`.
pub(crate) struct Pictures {
    recording: Recording,
    tree: bool,
    trace: Option<std::path::PathBuf>,
}

impl Pictures {
    /// Starts recording if `--tree` or `--trace` asks for it.
    pub(crate) fn start(host: &Host, tree: bool, trace: Option<&std::path::Path>) -> Option<Self> {
        (tree || trace.is_some()).then(|| Self {
            recording: Recording::start(host),
            tree,
            trace: trace.map(std::path::Path::to_path_buf),
        })
    }

    /// Stops recording; prints the tree under `root` (with how its turn ended, if it had
    /// one) and writes the trace of `command`.
    pub(crate) fn finish(
        self,
        host: &Host,
        root: &str,
        outcome: Option<&seam_host::StopReason>,
        command: &str,
    ) -> anyhow::Result<()> {
        let recorded = self.recording.finish(host);
        if self.tree {
            errln!(
                "{}",
                crate::tree::draw_tree(&recorded, root, outcome).trim_end()
            );
        }
        if let Some(path) = &self.trace {
            crate::trace::write_trace(&recorded, command, path)?;
        }
        Ok(())
    }
}
