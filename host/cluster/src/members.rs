//! What a front-end knows of the cluster, shared by its watcher and its providers' runs: the
//! replicas of each provider, and when each worker was last heard from.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seam_core::subagent::SubagentService;
use seam_core::tool::ToolRegistry;

use crate::names::Subjects;
use crate::wire::Advert;

/// The plugin name cluster providers are registered under (errors name it).
pub fn plugin_name(cluster: &str) -> String {
    format!("cluster:{cluster}")
}

/// What a front-end's providers and its watcher share.
pub(crate) struct FrontShared {
    pub(crate) client: async_nats::Client,
    pub(crate) subjects: Subjects,
    pub(crate) cluster: String,
    pub(crate) start_timeout: Duration,
    /// This front-end's heartbeat (`[cluster] heartbeat_ms`): how often it renews the lease of
    /// each run it holds.
    pub(crate) heartbeat: Duration,
    /// This front-end's id: the first part of its run tokens.
    pub(crate) id: String,
    pub(crate) next_run: AtomicU64,
    pub(crate) service: Arc<SubagentService>,
    /// The tools that follow providers: mounted and unmounted with the cluster's.
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) state: Mutex<State>,
}

#[derive(Default)]
pub(crate) struct State {
    /// Replicas by provider name.
    pub(crate) providers: HashMap<String, Provider>,
    /// When each worker was last heard from, and its heartbeat.
    pub(crate) workers: HashMap<String, (Instant, Duration)>,
    /// Names held by a local provider, already logged.
    pub(crate) hidden: HashSet<String>,
}

pub(crate) struct Provider {
    pub(crate) adverts: HashMap<String, Advert>,
    pub(crate) registered: bool,
}

impl FrontShared {
    /// Whether `worker` has been silent for three heartbeats: then its runs are lost.
    pub(crate) fn silence(&self, worker: &str) -> Option<Duration> {
        let state = lock(&self.state);
        match state.workers.get(worker) {
            Some((seen, beat)) => {
                let quiet = seen.elapsed();
                (quiet > *beat * 3).then_some(quiet)
            }
            None => Some(Duration::ZERO),
        }
    }

    /// The heartbeat of `worker`, as it advertised it.
    pub(crate) fn heartbeat_of(&self, worker: &str) -> Duration {
        lock(&self.state).workers.get(worker).map_or(
            Duration::from_millis(crate::connect::DEFAULT_HEARTBEAT_MS),
            |w| w.1,
        )
    }

    /// Whether any live replica of `provider` waits for capacity rather than refusing.
    pub(crate) fn waits(&self, provider: &str) -> bool {
        lock(&self.state)
            .providers
            .get(provider)
            .is_some_and(|p| p.adverts.values().any(|a| a.waits))
    }

    /// How many replicas of `provider` are advertised and not draining.
    pub(crate) fn replicas(&self, provider: &str) -> usize {
        lock(&self.state)
            .providers
            .get(provider)
            .map_or(0, |p| p.adverts.values().filter(|a| !a.draining).count())
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
