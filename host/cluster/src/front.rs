//! A front-end's view of the cluster: the adverts in the key-value bucket become providers in
//! its registry, with their frozen descriptors, `provider-added` and `provider-removed`.
//!
//! A provider is registered when its first live replica is seen and removed when its last one
//! is gone: withdrawn by a drained worker, or silent for three of its heartbeats. A name that
//! a local provider already holds stays the local one's (the cluster's is logged and not
//! registered): what a config loads itself always wins.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use futures::StreamExt;
use tokio::task::JoinHandle;

use seam_core::subagent::SubagentService;
use seam_core::tool::ToolRegistry;

use crate::connect::ClusterConfig;
use crate::error::ClusterError;
use crate::members::{lock, plugin_name, FrontShared, Provider};
use crate::names::{self, Subjects};
use crate::remote::RemoteProvider;
use crate::wire::{Advert, PROTOCOL};

/// How often a front-end looks for silent workers.
const REAP_EVERY: Duration = Duration::from_millis(100);

/// A front-end joined to a cluster. Dropping it leaves the cluster's providers registered
/// until [`ClusterFront::leave`].
pub struct ClusterFront {
    shared: Arc<FrontShared>,
    tasks: Vec<JoinHandle<()>>,
}

impl ClusterFront {
    /// Connects, registers every provider the cluster serves now, and follows the bucket. Fails,
    /// naming the server or bucket, if either cannot be reached.
    pub async fn join(
        config: &ClusterConfig,
        service: Arc<SubagentService>,
        tools: Arc<ToolRegistry>,
    ) -> Result<Self, ClusterError> {
        let subjects = Subjects::new(&config.name)?;
        let client = config.connect("seam-front").await?;
        let js = async_nats::jetstream::new(client.clone());
        let store = crate::worker::bucket(&js, &subjects, config.heartbeat()).await?;
        let bad = |e: String| ClusterError::JetStream {
            bucket: subjects.bucket().to_string(),
            message: e,
        };
        // Watched before the snapshot is read, so that no change between the two is missed.
        let mut watch = store.watch_all().await.map_err(|e| bad(e.to_string()))?;
        // The inbox's last token is a NUID: unique among this server's clients.
        let inbox = client.new_inbox();
        let id = format!("f{}", inbox.rsplit('.').next().unwrap_or_default());
        let shared = Arc::new(FrontShared {
            client,
            subjects: subjects.clone(),
            cluster: config.name.clone(),
            start_timeout: Duration::from_millis(config.start_timeout_ms),
            heartbeat: config.heartbeat(),
            id,
            next_run: AtomicU64::new(1),
            service,
            tools,
            state: Mutex::default(),
        });
        shared
            .resync(&store)
            .await
            .map_err(|e| bad(e.to_string()))?;
        let mut tasks = Vec::new();
        {
            let shared = shared.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    while let Some(entry) = watch.next().await {
                        match entry {
                            Ok(entry) => shared.apply(entry).await,
                            Err(e) => {
                                tracing::warn!(error = %e, "the cluster's advert watch failed")
                            }
                        }
                    }
                    // The watch ended (its consumer lost with the server, say): watch again,
                    // and read what changed meanwhile.
                    match shared.watch_again(&store).await {
                        Some(again) => watch = again,
                        None => break,
                    }
                }
            }));
        }
        {
            let shared = shared.clone();
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(REAP_EVERY);
                loop {
                    tick.tick().await;
                    shared.reap().await;
                }
            }));
        }
        Ok(Self { shared, tasks })
    }

    /// The cluster providers registered now, by name.
    pub fn providers(&self) -> Vec<String> {
        let state = lock(&self.shared.state);
        let mut names: Vec<String> = state
            .providers
            .iter()
            .filter(|(_, p)| p.registered)
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    }

    /// The NATS client (for embedders that publish on the same connection).
    pub fn client(&self) -> &async_nats::Client {
        &self.shared.client
    }

    /// Stops following the cluster and removes its providers (their live runs end).
    pub async fn leave(self) {
        for task in &self.tasks {
            task.abort();
        }
        let names: Vec<String> = {
            let mut state = lock(&self.shared.state);
            state
                .providers
                .drain()
                .filter(|(_, p)| p.registered)
                .map(|(n, _)| n)
                .collect()
        };
        for name in names {
            self.shared.tools.provider_removed(&name).await;
            self.shared.service.unregister(&name).await;
        }
    }
}

impl FrontShared {
    /// Applies every advert in the bucket now.
    async fn resync(self: &Arc<Self>, store: &kv::Store) -> Result<(), ClusterError> {
        let bad = |e: String| ClusterError::JetStream {
            bucket: self.subjects.bucket().to_string(),
            message: e,
        };
        let mut keys = store.keys().await.map_err(|e| bad(e.to_string()))?;
        let mut snapshot = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key.map_err(|e| bad(e.to_string()))?;
            if let Ok(Some(entry)) = store.entry(key).await {
                snapshot.push(entry);
            }
        }
        for entry in snapshot {
            self.apply(entry).await;
        }
        Ok(())
    }

    /// A new watch of the bucket, retried with backoff until the server lets one be made,
    /// then the bucket read again.
    async fn watch_again(self: &Arc<Self>, store: &kv::Store) -> Option<kv::Watch> {
        use backon::{ExponentialBuilder, Retryable};
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(50))
            .with_max_delay(Duration::from_secs(5))
            .without_max_times();
        let watch = (|| async { store.watch_all().await })
            .retry(backoff)
            .notify(|e, _| tracing::warn!(error = %e, "cannot watch the cluster's adverts yet"))
            .await
            .inspect_err(
                |e| tracing::error!(error = %e, "the cluster's adverts are no longer followed"),
            )
            .ok()?;
        if let Err(e) = self.resync(store).await {
            tracing::warn!(error = %e, "cannot read the cluster's adverts");
        }
        Some(watch)
    }

    async fn apply(self: &Arc<Self>, entry: kv::Entry) {
        let Some((token, worker)) = names::parse_advert_key(&entry.key) else {
            return;
        };
        let name = names::provider_name(token);
        let worker = worker.to_string();
        match entry.operation {
            kv::Operation::Put => {
                let advert: Advert = match serde_json::from_slice(&entry.value) {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(key = %entry.key, error = %e, "an advert that is not one");
                        return;
                    }
                };
                if advert.protocol != PROTOCOL || advert.worker != worker {
                    tracing::warn!(
                        worker = %worker,
                        protocol = advert.protocol,
                        "an advert of another protocol version, or for another worker: ignored"
                    );
                    return;
                }
                if advert.descriptor.name != name {
                    tracing::warn!(key = %entry.key, "an advert whose descriptor names another provider: ignored");
                    return;
                }
                // An advert put more than three heartbeats ago is of a worker that is gone.
                let age = since_nanos(entry.created.unix_timestamp_nanos());
                let beat = Duration::from_millis(advert.heartbeat_ms.max(1));
                if age > beat * 3 {
                    return;
                }
                self.add(name, worker, advert, age).await;
            }
            kv::Operation::Delete | kv::Operation::Purge => self.remove(&name, &worker).await,
        }
    }

    async fn add(self: &Arc<Self>, name: String, worker: String, advert: Advert, age: Duration) {
        let beat = Duration::from_millis(advert.heartbeat_ms.max(1));
        let register = {
            let mut state = lock(&self.state);
            let seen = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
            state.workers.insert(worker.clone(), (seen, beat));
            let provider = state
                .providers
                .entry(name.clone())
                .or_insert_with(|| Provider {
                    adverts: HashMap::new(),
                    registered: false,
                });
            if let Some(first) = provider.adverts.values().next() {
                if first.descriptor != advert.descriptor && !provider.adverts.contains_key(&worker)
                {
                    tracing::warn!(
                        provider = %name,
                        worker = %worker,
                        "a replica whose descriptor differs from the others': its starts are still routed to it"
                    );
                }
            }
            provider.adverts.insert(worker, advert.clone());
            !provider.registered
        };
        if !register {
            return;
        }
        if self.service.descriptor(&name).is_some() {
            let mut state = lock(&self.state);
            if state.hidden.insert(name.clone()) {
                tracing::warn!(
                    provider = %name,
                    cluster = %self.cluster,
                    "a local provider holds this name: the cluster's is not registered"
                );
            }
            return;
        }
        let provider = Arc::new(RemoteProvider::new(self.clone(), name.clone()));
        match self
            .service
            .register(&plugin_name(&self.cluster), advert.descriptor, provider)
        {
            Ok(_) => {
                if let Some(p) = lock(&self.state).providers.get_mut(&name) {
                    p.registered = true;
                }
                self.tools.provider_added(&name).await;
                tracing::info!(provider = %name, cluster = %self.cluster, "cluster provider added");
            }
            Err(e) => {
                tracing::warn!(provider = %name, error = %e, "cannot register a cluster provider")
            }
        }
    }

    async fn remove(&self, name: &str, worker: &str) {
        let unregister = {
            let mut state = lock(&self.state);
            let Some(provider) = state.providers.get_mut(name) else {
                return;
            };
            provider.adverts.remove(worker);
            if !provider.adverts.is_empty() {
                return;
            }
            let registered = provider.registered;
            state.providers.remove(name);
            registered
        };
        if unregister {
            // Its runs end by themselves (their worker finished them, or went silent and they
            // end `error` naming it): retired, not unregistered, so that none ends `aborted`.
            self.tools.provider_removed(name).await;
            if let Some(removed) = self.service.retire(name) {
                tokio::spawn(removed);
            }
            tracing::info!(provider = %name, cluster = %self.cluster, "cluster provider removed");
        }
    }

    /// Removes the replicas of workers silent for three heartbeats.
    async fn reap(&self) {
        let gone: Vec<(String, String)> = {
            let state = lock(&self.state);
            let silent: HashSet<&String> = state
                .workers
                .iter()
                .filter(|(_, (seen, beat))| seen.elapsed() > *beat * 3)
                .map(|(w, _)| w)
                .collect();
            state
                .providers
                .iter()
                .flat_map(|(name, p)| {
                    p.adverts
                        .keys()
                        .filter(|w| silent.contains(w))
                        .map(|w| (name.clone(), w.clone()))
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        for (name, worker) in gone {
            tracing::warn!(provider = %name, worker = %worker, "a worker went silent: its replica is removed");
            self.remove(&name, &worker).await;
        }
    }
}

/// How long ago a key-value entry was put, by this machine's clock (zero if in the future).
fn since_nanos(created: i128) -> Duration {
    let now = std::time::SystemTime::now();
    let then =
        std::time::UNIX_EPOCH + Duration::from_nanos(created.clamp(0, u64::MAX as i128) as u64);
    now.duration_since(then).unwrap_or_default()
}
