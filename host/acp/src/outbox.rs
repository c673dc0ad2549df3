//! A queue of outbound JSON-RPC lines bounded by bytes, for a peer that may read slowly.
//!
//! Every line is charged its length plus [`MESSAGE_OVERHEAD`], so that a flood of empty updates
//! costs what it costs the host. Lines are of three kinds, each with its own ceiling, so that
//! the queue can never fill with what may be lost while what may not waits:
//!
//! - an [`Kind::Answer`] (a response, a stop reason, the answer's text) is never dropped: it is
//!   queued whatever the queue holds, and a sender that can wait ([`Outbox::send`]) waits for
//!   room first, so answers too stay bounded by the senders' number;
//! - a [`Kind::Status`] update (a tool call began or ended) is dropped once the queue holds three
//!   quarters of its capacity;
//! - a [`Kind::Progress`] update is dropped once it holds half.
//!
//! Drops are counted: the first of a burst is logged at `warn`, and the burst's end (the queue
//! drained to a quarter, or closed) is logged with how many updates it dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Bytes charged to each line beyond its text: the queue's own bookkeeping and the allocator's,
/// and what a zero-length update still costs to produce and write.
pub const MESSAGE_OVERHEAD: usize = 256;

/// What a line is, which decides whether it may be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Must arrive: a response, a stop reason, the answer.
    Answer,
    /// May be dropped when the queue is three quarters full: a tool call's start or end.
    Status,
    /// May be dropped when the queue is half full: a progress update.
    Progress,
}

struct State {
    lines: VecDeque<(String, usize)>,
    bytes: usize,
    /// No sender is left: the reader ends once the queue is empty.
    closed: bool,
    /// The reader is gone: sending is pointless.
    gone: bool,
    /// Updates dropped in the current burst.
    burst: u64,
    /// Updates dropped since the queue was made.
    dropped: u64,
}

struct Shared {
    state: Mutex<State>,
    capacity: usize,
    /// What the queue's log lines are about (`seam acp`, a plugin's agent...).
    label: String,
    senders: AtomicUsize,
    /// A line was queued, or the queue closed.
    queued: Notify,
    /// A line was taken, or the reader went away.
    taken: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The sending side; clones share the queue. The queue closes when the last one is dropped.
pub struct Outbox(Arc<Shared>);

/// The receiving side: the task that writes the lines out.
pub struct OutboxReader(Arc<Shared>);

/// A queue of at most about `capacity` bytes (see the module's doc); `label` names it in logs.
pub fn outbox(capacity: usize, label: impl Into<String>) -> (Outbox, OutboxReader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            lines: VecDeque::new(),
            bytes: 0,
            closed: false,
            gone: false,
            burst: 0,
            dropped: 0,
        }),
        capacity,
        label: label.into(),
        senders: AtomicUsize::new(1),
        queued: Notify::new(),
        taken: Notify::new(),
    });
    (Outbox(shared.clone()), OutboxReader(shared))
}

/// What a line is charged.
pub fn cost(line: &str) -> usize {
    line.len().saturating_add(MESSAGE_OVERHEAD)
}

impl Outbox {
    /// Queues `line` if its kind still fits; `false` if it was dropped (counted) or the reader
    /// is gone. An answer always fits.
    pub fn offer(&self, line: String, kind: Kind) -> bool {
        let shared = &*self.0;
        let charge = cost(&line);
        let mut state = shared.lock();
        if state.gone {
            return false;
        }
        let ceiling = match kind {
            Kind::Answer => usize::MAX,
            Kind::Status => shared.capacity / 4 * 3,
            Kind::Progress => shared.capacity / 2,
        };
        if state.bytes.saturating_add(charge) > ceiling {
            if state.burst == 0 {
                tracing::warn!(
                    queue = %shared.label,
                    queued_bytes = state.bytes,
                    "{}: the reader is slower than the updates; dropping progress until it \
                     catches up",
                    shared.label
                );
            }
            state.burst += 1;
            state.dropped += 1;
            return false;
        }
        state.bytes += charge;
        state.lines.push_back((line, charge));
        drop(state);
        shared.queued.notify_one();
        true
    }

    /// Queues an answer once the queue has room for it (at once if it is empty), so that a
    /// sender that produces answers cannot outrun the reader; `false` if the reader is gone.
    pub async fn send(&self, line: String) -> bool {
        self.room(cost(&line)).await;
        self.offer(line, Kind::Answer)
    }

    /// Waits until `bytes` more fit in the queue, or it is empty, or the reader is gone.
    pub async fn room(&self, bytes: usize) {
        let shared = &*self.0;
        loop {
            let taken = shared.taken.notified();
            tokio::pin!(taken);
            taken.as_mut().enable();
            {
                let state = shared.lock();
                if state.gone
                    || state.bytes == 0
                    || state.bytes.saturating_add(bytes) <= shared.capacity
                {
                    return;
                }
            }
            taken.await;
        }
    }

    /// Bytes queued now.
    pub fn queued_bytes(&self) -> usize {
        self.0.lock().bytes
    }

    /// Updates dropped since the queue was made.
    pub fn dropped(&self) -> u64 {
        self.0.lock().dropped
    }
}

impl Clone for Outbox {
    fn clone(&self) -> Self {
        self.0.senders.fetch_add(1, Ordering::Relaxed);
        Self(self.0.clone())
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.lock().closed = true;
            self.0.queued.notify_one();
        }
    }
}

impl OutboxReader {
    /// The oldest line; `None` once every sender is gone and the queue is empty.
    pub async fn next(&mut self) -> Option<String> {
        let shared = &*self.0;
        loop {
            let queued = shared.queued.notified();
            tokio::pin!(queued);
            queued.as_mut().enable();
            {
                let mut state = shared.lock();
                if let Some((line, charge)) = state.lines.pop_front() {
                    state.bytes -= charge;
                    if state.burst > 0 && state.bytes <= shared.capacity / 4 {
                        end_burst(shared, &mut state);
                    }
                    drop(state);
                    shared.taken.notify_waiters();
                    return Some(line);
                }
                if state.closed {
                    return None;
                }
            }
            queued.await;
        }
    }

    /// Whether nothing is waiting (a writer flushes then).
    pub fn is_empty(&self) -> bool {
        self.0.lock().lines.is_empty()
    }
}

impl Drop for OutboxReader {
    /// The writer stopped (its peer closed the stream): senders stop waiting, and what is
    /// queued is freed.
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.gone = true;
        state.lines.clear();
        state.bytes = 0;
        if state.burst > 0 {
            end_burst(&self.0, &mut state);
        }
        drop(state);
        self.0.taken.notify_waiters();
    }
}

fn end_burst(shared: &Shared, state: &mut State) {
    tracing::warn!(
        queue = %shared.label,
        dropped = state.burst,
        "{}: dropped {} updates while the reader was slow ({} in all)",
        shared.label,
        state.burst,
        state.dropped
    );
    state.burst = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn updates_are_dropped_by_kind_and_answers_never() {
        let (out, mut reader) = outbox(4 * MESSAGE_OVERHEAD, "test");
        // Empty updates cost the overhead: two fill the progress half.
        assert!(out.offer(String::new(), Kind::Progress));
        assert!(out.offer(String::new(), Kind::Progress));
        assert!(!out.offer(String::new(), Kind::Progress));
        assert!(out.offer(String::new(), Kind::Status));
        assert!(!out.offer(String::new(), Kind::Status));
        assert!(out.offer("answer".into(), Kind::Answer));
        assert!(out.offer("another".into(), Kind::Answer));
        assert_eq!(out.dropped(), 2);
        assert_eq!(
            out.queued_bytes(),
            5 * MESSAGE_OVERHEAD + "answer".len() + "another".len()
        );
        // Over capacity, a waiting sender waits until the reader takes enough.
        let waiting = {
            let out = out.clone();
            tokio::spawn(async move { out.send("late".into()).await })
        };
        for _ in 0..4 {
            reader.next().await.unwrap();
        }
        assert!(waiting.await.unwrap());
        let mut rest = Vec::new();
        drop(out);
        while let Some(line) = reader.next().await {
            rest.push(line);
        }
        assert_eq!(rest, ["another", "late"]);
    }

    #[tokio::test]
    async fn senders_stop_waiting_when_the_reader_goes() {
        let (out, reader) = outbox(MESSAGE_OVERHEAD, "test");
        assert!(out.offer("x".repeat(10), Kind::Answer));
        let waiting = {
            let out = out.clone();
            tokio::spawn(async move { out.send("y".into()).await })
        };
        drop(reader);
        assert!(!waiting.await.unwrap());
        assert!(!out.offer("z".into(), Kind::Answer));
        assert_eq!(out.queued_bytes(), 0);
    }
}
