//! A value published once that any number of tasks can wait for: what a run's readiness,
//! result and disposal are.
//!
//! A `watch` channel would do, but its every send wakes eight notifiers under a lock each and
//! its every channel is an allocation, and a run publishes three of them: on a run that settles
//! inside `start`, nobody is waiting by the time they are published. A latch notifies only when
//! a waiter has registered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::sync::lock;

/// A value set once (a later set replaces it, for whoever reads after), and waited for.
pub(crate) struct Latch<T> {
    value: Mutex<Option<T>>,
    /// Waiters that may be asleep: a set notifies only if there are any.
    waiting: AtomicUsize,
    set: Notify,
}

impl<T: Clone> Latch<T> {
    /// An unset latch.
    pub(crate) fn new() -> Self {
        Self {
            value: Mutex::new(None),
            waiting: AtomicUsize::new(0),
            set: Notify::new(),
        }
    }

    /// Publishes `value` and wakes whoever waits for it.
    pub(crate) fn set(&self, value: T) {
        *lock(&self.value) = Some(value);
        // A waiter registers before it reads the value (below), so one that read none is
        // counted here and its `Notified` is enabled.
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.set.notify_waiters();
        }
    }

    /// The value, if it is set.
    pub(crate) fn get(&self) -> Option<T> {
        lock(&self.value).clone()
    }

    /// Whether it is set.
    pub(crate) fn is_set(&self) -> bool {
        lock(&self.value).is_some()
    }

    /// The value, once it is set.
    ///
    /// Takes a unit of the task's cooperative budget, as tokio's own channels do: a caller that
    /// loops on runs which settle inside `start` never waits, and must still give way to the
    /// other tasks of its worker (a timer, another caller) once its budget is spent.
    pub(crate) async fn wait(&self) -> T {
        tokio::task::consume_budget().await;
        if let Some(value) = self.get() {
            return value;
        }
        let _waiting = Waiting::register(&self.waiting);
        loop {
            let notified = self.set.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(value) = self.get() {
                return value;
            }
            notified.await;
        }
    }
}

/// Counts a waiter for as long as it lives (a waiter dropped mid-wait uncounts itself).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn register(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_value_set_before_the_wait_is_returned_at_once() {
        let latch = Latch::new();
        assert!(!latch.is_set());
        latch.set(7);
        assert_eq!(latch.wait().await, 7);
        assert_eq!(latch.get(), Some(7));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_waiter_wakes_when_the_value_is_set_from_another_thread() {
        for _ in 0..200 {
            let latch = Arc::new(Latch::new());
            let waiters: Vec<_> = (0..4)
                .map(|_| {
                    let latch = latch.clone();
                    tokio::spawn(async move { latch.wait().await })
                })
                .collect();
            let setter = latch.clone();
            std::thread::spawn(move || setter.set("done"))
                .join()
                .unwrap();
            for waiter in waiters {
                assert_eq!(waiter.await.unwrap(), "done");
            }
            assert_eq!(latch.waiting.load(Ordering::SeqCst), 0);
        }
    }

    #[tokio::test]
    async fn a_waiter_dropped_mid_wait_is_no_longer_counted() {
        let latch: Latch<u8> = Latch::new();
        {
            let wait = latch.wait();
            let mut wait = std::pin::pin!(wait);
            assert!(futures::poll!(wait.as_mut()).is_pending());
            assert_eq!(latch.waiting.load(Ordering::SeqCst), 1);
        }
        assert_eq!(latch.waiting.load(Ordering::SeqCst), 0);
        latch.set(1);
        assert_eq!(latch.wait().await, 1);
    }
}
