//! An observer component: it receives every lifecycle event, in order, on a task of its own, so
//! that neither a slow nor a faulty observer can hold up or change a run.

use std::sync::Arc;

use tokio::sync::mpsc;
use wasmtime::component::Component;

use super::guest_fault;
use crate::bindings::observer::ObserverPluginPre;
use crate::engine::SeamEngine;
use crate::events::{EventBus, ListenerId};
use crate::live::LiveCounts;
use crate::sandbox::{new_store, PluginState, Role, Sandbox};

/// Events waiting for a slow observer beyond this are dropped (and counted in the log), so an
/// observer cannot make the host buffer without bound.
const QUEUE: usize = 4096;

struct Inner {
    plugin: Arc<str>,
    config: Arc<str>,
    pre: ObserverPluginPre<PluginState>,
    engine: wasmtime::Engine,
    live: Arc<LiveCounts>,
    sandbox: Sandbox,
}

/// A linked observer component, not yet listening.
pub(crate) struct WasmObserver(Arc<Inner>);

/// A listening observer; [`ObserverHandle::detach`] stops it.
pub(crate) struct ObserverHandle {
    listener: ListenerId,
    task: tokio::task::JoinHandle<()>,
}

impl WasmObserver {
    /// Links the component; it is first entered on the first event.
    pub(crate) fn load(
        engine: &SeamEngine,
        live: &Arc<LiveCounts>,
        plugin: Arc<str>,
        component: &Component,
        config: Arc<str>,
        sandbox: Sandbox,
    ) -> Result<Self, String> {
        let pre = engine
            .observer_linker
            .instantiate_pre(component)
            .and_then(ObserverPluginPre::new)
            .map_err(|e| format!("cannot link the observer component: {e:#}"))?;
        Ok(Self(Arc::new(Inner {
            plugin,
            config,
            pre,
            engine: engine.engine.clone(),
            live: live.clone(),
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

async fn deliver(inner: &Inner, event: &str) -> Result<(), String> {
    let mut store = new_store(
        &inner.engine,
        &inner.live,
        inner.plugin.clone(),
        Role::Observe,
        &inner.sandbox,
    );
    let instance = inner
        .pre
        .instantiate_async(&mut store)
        .await
        .map_err(|e| format!("cannot instantiate: {}", guest_fault(&e)))?;
    match instance
        .seam_plugin_observer()
        .call_on_event(&mut store, &inner.config, event)
        .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(message),
        Err(e) => Err(guest_fault(&e)),
    }
}

impl ObserverHandle {
    /// Unsubscribes and stops delivering (events still queued are dropped).
    pub(crate) fn detach(self, events: &EventBus) {
        events.unsubscribe(self.listener);
        self.task.abort();
    }
}
