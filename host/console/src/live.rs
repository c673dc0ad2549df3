//! What the page follows live, as server-sent events: every event of this host's bus (`bus`),
//! what the console itself changed (`console`: a turn started or ended here), and a note that
//! the store changed under another process (`store`), for a page to read again.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::StreamBody;
use hyper::body::Frame;
use seam_core::events::{EventBus, ListenerId};
use seam_core::store::SessionStore;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Events kept for a page that reads slowly; one that falls further behind is told to read
/// everything again (`event: lagged`).
const BACKLOG: usize = 4096;

/// How long a stream may be silent before a keep-alive comment is sent.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// How often the store is looked at for other processes' writes.
const STORE_POLL: Duration = Duration::from_millis(500);

/// A stream of server-sent events.
pub(crate) type SseBody =
    StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// The live side of the console: one broadcast that every page's stream follows.
pub(crate) struct Live {
    tx: broadcast::Sender<Bytes>,
}

/// One server-sent event: `event: KIND` and its JSON on one `data:` line.
fn frame(kind: &str, json: &str) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {json}\n\n"))
}

impl Live {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            tx: broadcast::channel(BACKLOG).0,
        })
    }

    /// Follows every event of `bus`; returns the subscription, to end it with.
    pub fn follow(self: &Arc<Self>, bus: &EventBus) -> ListenerId {
        let live = Arc::downgrade(self);
        bus.subscribe(move |event| {
            if let Some(live) = live.upgrade() {
                // Nobody following is not an error.
                let _ = live.tx.send(frame("bus", &event.to_json()));
            }
            Ok(())
        })
    }

    /// Tells the pages that the console changed `what` (a turn started or ended here).
    pub fn notify(&self, what: &serde_json::Value) {
        let _ = self.tx.send(frame("console", &what.to_string()));
    }

    /// Watches `store` for writes of other processes, until `shutdown`, comparing its listing
    /// (every backend has one; SQLite's `data_version` does not see another process's commits
    /// until this connection reads).
    pub async fn watch_store(
        self: &Arc<Self>,
        store: Arc<dyn SessionStore>,
        shutdown: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let live = Arc::downgrade(self);
        // Looked at before any page can follow, and then whether a page follows or not: every
        // change after the server starts is found against the look before it, so none made
        // while a page subscribes is missed.
        let look = |store: Arc<dyn SessionStore>| async move {
            tokio::task::spawn_blocking(move || fingerprint(store.as_ref()))
                .await
                .ok()
                .flatten()
        };
        let mut last = look(store.clone()).await;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(STORE_POLL) => {}
                }
                let Some(live) = live.upgrade() else { return };
                let now = look(store.clone()).await;
                if now.is_some() && last.is_some() && now != last {
                    let _ = live.tx.send(frame("store", "{}"));
                }
                if now.is_some() {
                    last = now;
                }
            }
        })
    }

    /// A page's stream: everything from now on, until `shutdown`.
    pub fn stream(&self, shutdown: CancellationToken) -> SseBody {
        let rx = self.tx.subscribe();
        // The first frame tells the page that it follows now: what it reads after this is
        // not older than what the stream brings.
        let head = futures::stream::iter([Ok(Frame::data(frame("ready", "{}")))]);
        let rest = futures::stream::unfold((rx, shutdown), |(mut rx, shutdown)| async move {
            let next = tokio::select! {
                () = shutdown.cancelled() => return None,
                next = tokio::time::timeout(KEEP_ALIVE, rx.recv()) => next,
            };
            let out = match next {
                Err(_) => Bytes::from_static(b": keep-alive\n\n"),
                Ok(Ok(bytes)) => bytes,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => frame("lagged", "{}"),
                Ok(Err(broadcast::error::RecvError::Closed)) => return None,
            };
            Some((Ok(Frame::data(out)), (rx, shutdown)))
        });
        StreamBody::new(head.chain(rest).boxed())
    }
}

/// A number that changes when the store does: a hash of its listing (the sessions, their
/// sizes and times, and the approvals' states).
fn fingerprint(store: &dyn SessionStore) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    for s in store.sessions().ok()? {
        (s.id, s.updated_ms, s.events, s.interrupted).hash(&mut hash);
    }
    for a in store.approvals(None).ok()? {
        (a.id, a.status.as_str()).hash(&mut hash);
    }
    Some(hash.finish())
}
