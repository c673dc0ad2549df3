//! What a run says while it runs (progress) and what it hears (steering messages waiting for a
//! provider that has no in-process child to hand them to). Both are bounded: a run that floods
//! loses its oldest progress, and a full inbox refuses the sender.

use std::collections::VecDeque;

use thiserror::Error;
use tokio::sync::watch;

use crate::types::ContentBlock;

/// Most bytes of progress a run keeps for readers (`run.progress()`); the oldest updates go first.
pub const PROGRESS_HISTORY_BYTES: usize = 256 << 10;

/// Most bytes of progress held for the moment the run becomes ready; later ones are dropped.
const PROGRESS_PENDING_BYTES: usize = 256 << 10;

/// Most steering messages waiting in one run's inbox.
pub const INBOX_MESSAGES: usize = 64;

/// Most bytes of steering messages waiting in one run's inbox.
pub const INBOX_BYTES: usize = 1 << 20;

/// Bytes an update or message is charged beyond its text, per block (at least one): what it
/// costs to keep, so that a flood of empty updates is bounded by the caps like any other.
pub const UPDATE_OVERHEAD: usize = 64;

fn size(blocks: &[ContentBlock]) -> usize {
    let text: usize = blocks.iter().map(|b| b.as_text().len()).sum();
    text + UPDATE_OVERHEAD * blocks.len().max(1)
}

/// A run's progress: the sequence number of its updates, the updates reported before it was
/// ready, and what readers can still see.
#[derive(Default)]
pub(crate) struct Progress {
    seq: u64,
    pending: Vec<Vec<ContentBlock>>,
    pending_bytes: usize,
    history: VecDeque<Vec<ContentBlock>>,
    history_bytes: usize,
}

impl Progress {
    /// Records an update about to be emitted; returns its `seq` (1 for the first).
    pub(crate) fn record(&mut self, update: &[ContentBlock]) -> u64 {
        self.seq += 1;
        let bytes = size(update);
        self.history.push_back(update.to_vec());
        self.history_bytes += bytes;
        while self.history_bytes > PROGRESS_HISTORY_BYTES {
            match self.history.pop_front() {
                Some(old) => self.history_bytes -= size(&old),
                None => break,
            }
        }
        self.seq
    }

    /// Holds an update reported before the run was ready; dropped past the pending cap.
    pub(crate) fn hold(&mut self, update: Vec<ContentBlock>) {
        let bytes = size(&update);
        if self.pending_bytes + bytes <= PROGRESS_PENDING_BYTES {
            self.pending_bytes += bytes;
            self.pending.push(update);
        }
    }

    /// The updates held until readiness.
    pub(crate) fn take_pending(&mut self) -> Vec<Vec<ContentBlock>> {
        self.pending_bytes = 0;
        std::mem::take(&mut self.pending)
    }

    /// Every update readers can still see, oldest first, as one list.
    pub(crate) fn so_far(&self) -> Vec<ContentBlock> {
        self.history.iter().flatten().cloned().collect()
    }
}

/// Why a run's inbox refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum InboxFull {
    /// It holds [`INBOX_MESSAGES`] messages already.
    #[error("its inbox already holds {INBOX_MESSAGES} messages the provider has not read")]
    Messages,
    /// The message would pass [`INBOX_BYTES`].
    #[error("the message ({bytes} bytes) does not fit its inbox ({INBOX_BYTES} bytes)")]
    Bytes {
        /// The message's size.
        bytes: usize,
    },
}

/// Steering messages waiting for a provider to take them (`run-context.next-message`).
pub(crate) struct Inbox {
    queue: VecDeque<Vec<ContentBlock>>,
    bytes: usize,
    /// How many messages are waiting; watched by `message-waiting` pollables.
    waiting: watch::Sender<usize>,
}

impl Default for Inbox {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            bytes: 0,
            waiting: watch::channel(0).0,
        }
    }
}

impl Inbox {
    /// Queues a message; refuses one that would pass either cap, saying which.
    pub(crate) fn push(&mut self, message: Vec<ContentBlock>) -> Result<(), InboxFull> {
        let bytes = size(&message);
        if self.queue.len() >= INBOX_MESSAGES {
            return Err(InboxFull::Messages);
        }
        if self.bytes + bytes > INBOX_BYTES {
            return Err(InboxFull::Bytes { bytes });
        }
        self.bytes += bytes;
        self.queue.push_back(message);
        self.waiting.send_replace(self.queue.len());
        Ok(())
    }

    /// The oldest waiting message.
    pub(crate) fn pop(&mut self) -> Option<Vec<ContentBlock>> {
        let message = self.queue.pop_front()?;
        self.bytes -= size(&message);
        self.waiting.send_replace(self.queue.len());
        Some(message)
    }

    /// A receiver of the number of waiting messages.
    pub(crate) fn watch(&self) -> watch::Receiver<usize> {
        self.waiting.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Vec<ContentBlock> {
        vec![ContentBlock::text("x".repeat(n))]
    }

    #[test]
    fn progress_history_keeps_the_newest_within_its_cap() {
        let mut p = Progress::default();
        assert_eq!(p.record(&text(PROGRESS_HISTORY_BYTES / 2)), 1);
        assert_eq!(p.record(&text(PROGRESS_HISTORY_BYTES / 2)), 2);
        assert_eq!(p.record(&text(10)), 3);
        let kept: usize = p.so_far().iter().map(|b| b.as_text().len()).sum();
        assert_eq!(kept, PROGRESS_HISTORY_BYTES / 2 + 10);
    }

    #[test]
    fn empty_updates_count_against_the_caps_too() {
        let mut p = Progress::default();
        for _ in 0..100_000 {
            p.record(&[]);
            p.hold(vec![ContentBlock::text("")]);
        }
        assert_eq!(p.history.len(), PROGRESS_HISTORY_BYTES / UPDATE_OVERHEAD);
        assert_eq!(
            p.take_pending().len(),
            PROGRESS_PENDING_BYTES / UPDATE_OVERHEAD
        );
    }

    #[test]
    fn the_inbox_refuses_past_its_caps_and_signals_waiting_messages() {
        let mut inbox = Inbox::default();
        let rx = inbox.watch();
        for _ in 0..INBOX_MESSAGES {
            inbox.push(text(1)).unwrap();
        }
        assert_eq!(*rx.borrow(), INBOX_MESSAGES);
        assert_eq!(inbox.push(text(1)), Err(InboxFull::Messages));
        while inbox.pop().is_some() {}
        assert_eq!(*rx.borrow(), 0);
        assert_eq!(
            inbox.push(text(INBOX_BYTES + 1)),
            Err(InboxFull::Bytes {
                bytes: INBOX_BYTES + 1 + UPDATE_OVERHEAD
            })
        );
        assert!(inbox.pop().is_none());
    }
}
