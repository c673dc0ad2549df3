//! An observer component: it receives every lifecycle event, in order, on a task of its own, so
//! that neither a slow nor a faulty observer can hold up or change a run.

use std::sync::Arc;

use tokio::sync::mpsc;

use seam_core::events::{EventBus, ListenerId};
use seam_core::live::LiveCounts;
use wasmtime::component::InstancePre;

use super::state::{new_store, Serving, StoreData};
use super::{GuestFault, Runtime};
use crate::sandbox::Sandbox;
use crate::wit::latest::observer_world::ObserverPluginPre;

/// Events waiting for a slow observer beyond this are dropped (and counted in the log), so an
/// observer cannot make the host buffer without bound.
const QUEUE: usize = 4096;

struct ObserverParts {
    plugin: Arc<str>,
    config: Arc<str>,
    pre: ObserverPluginPre<StoreData>,
    engine: wasmtime::Engine,
    live: Arc<LiveCounts>,
    sandbox: Sandbox,
}

/// A linked observer component, not yet listening.
pub(crate) struct WasmObserver(Arc<ObserverParts>);

/// A listening observer; [`ObserverHandle::detach`] stops it.
pub(crate) struct ObserverHandle {
    listener: ListenerId,
    task: tokio::task::JoinHandle<()>,
}

impl WasmObserver {
    /// An observer over a component linked with the observer world's linker; it is first
    /// entered on the first event.
    pub(crate) fn new(
        runtime: &Runtime,
        plugin: Arc<str>,
        pre: InstancePre<StoreData>,
        config: Arc<str>,
        sandbox: Sandbox,
    ) -> wasmtime::Result<Self> {
        Ok(Self(Arc::new(ObserverParts {
            plugin,
            config,
            pre: ObserverPluginPre::new(pre)?,
            engine: runtime.engine.clone(),
            live: runtime.live.clone(),
            sandbox,
        })))
    }

    /// Subscribes to `events`: each event is queued (a copy, as JSON) and delivered in order.
    pub(crate) fn attach(self, events: &EventBus) -> ObserverHandle {
        let (tx, mut rx) = mpsc::channel::<String>(QUEUE);
        let plugin = self.0.plugin.clone();
        let listener = events.subscribe(move |event| {
            if tx.try_send(event.to_json()).is_err() {
                tracing::warn!(plugin = %plugin, event = event.name(), "observer queue full; event dropped");
            }
            Ok(())
        });
        let inner = self.0;
        let task = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                if let Err(e) = deliver(&inner, &event).await {
                    tracing::warn!(plugin = %inner.plugin, "observer failed: {e}");
                }
            }
        });
        ObserverHandle { listener, task }
    }
}

async fn deliver(inner: &ObserverParts, event: &str) -> Result<(), String> {
    let mut store = new_store(
        &inner.engine,
        &inner.live,
        inner.plugin.clone(),
        Serving::default(),
        &inner.sandbox,
    );
    let instance = inner
        .pre
        .instantiate_async(&mut store)
        .await
        .map_err(|e| format!("cannot instantiate: {}", GuestFault::from_error(&e)))?;
    match instance
        .seam_plugin_observer()
        .call_on_event(&mut store, &inner.config, event)
        .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(message),
        Err(e) => Err(GuestFault::from_error(&e).to_string()),
    }
}

impl ObserverHandle {
    /// Unsubscribes and stops delivering (events still queued are dropped).
    pub(crate) fn detach(self, events: &EventBus) {
        events.unsubscribe(self.listener);
        self.task.abort();
    }
}
