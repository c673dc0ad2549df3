//! Benchmark-only access to the engine, behind the `bench` feature: what the `seam-bench` crate
//! needs to time a host-to-guest call on its own, apart from a whole run. Not part of the API.
//!
//! Every store here is made exactly as a run's is (same engine, linker, sandbox and limits), so
//! the figures are the ones a run pays.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::{InstancePre, TypedFunc};
use wasmtime::Store;

use crate::bindings::provider::{ProviderPlugin, ProviderPluginPre};
use crate::host::Host;
use crate::plugin::guest_fault;
use crate::sandbox::{new_store, Granted, PluginState, Role, Sandbox};

/// A compiled and linked component, ready to instantiate in stores made like a run's.
pub struct Template {
    host: Host,
    plugin: Arc<str>,
    sandbox: Sandbox,
    pre: InstancePre<PluginState>,
}

impl Template {
    /// Compiles (through the host's cache) and links the component at `path` with the
    /// provider linker.
    pub fn new(host: &Host, path: &Path) -> Result<Self, String> {
        let engine = &host.inner.engine;
        let component = engine.compile(path).map_err(|e| e.to_string())?;
        let pre = engine
            .provider_linker
            .instantiate_pre(&component)
            .map_err(|e| format!("cannot link: {e:#}"))?;
        let options = &host.inner.options;
        Ok(Self {
            host: host.clone(),
            plugin: "bench".into(),
            sandbox: Sandbox::new(
                options.limits.clone(),
                Granted::default(),
                options.engine.epoch_tick,
            ),
            pre,
        })
    }

    fn store(&self) -> Store<PluginState> {
        let inner = &self.host.inner;
        new_store(
            &inner.engine.engine,
            &inner.live,
            self.plugin.clone(),
            Role::Describe,
            &self.sandbox,
        )
    }

    /// A fresh store and instance of a provider component.
    pub async fn provider(&self) -> Result<ProviderInstance, String> {
        let pre = ProviderPluginPre::new(self.pre.clone()).map_err(|e| format!("{e:#}"))?;
        let mut store = self.store();
        let plugin = pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| guest_fault(&e))?;
        Ok(ProviderInstance { store, plugin })
    }

    /// A fresh store and instance of a component exporting `noop: func()`.
    pub async fn noop(&self) -> Result<NoopInstance, String> {
        let mut store = self.store();
        let instance = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| guest_fault(&e))?;
        let noop = instance
            .get_typed_func::<(), ()>(&mut store, "noop")
            .map_err(|e| format!("no `noop` export: {e:#}"))?;
        Ok(NoopInstance { store, noop })
    }
}

/// A live provider instance in its own store.
pub struct ProviderInstance {
    store: Store<PluginState>,
    plugin: ProviderPlugin,
}

impl ProviderInstance {
    /// Calls `describe(config)` and returns the descriptor's name.
    pub async fn describe(&mut self, config: &str) -> Result<String, String> {
        match self
            .plugin
            .seam_plugin_provider()
            .call_describe(&mut self.store, config)
            .await
        {
            Ok(Ok(d)) => Ok(d.name),
            Ok(Err(message)) => Err(message),
            Err(e) => Err(guest_fault(&e)),
        }
    }
}

/// A live instance of a component exporting `noop`.
pub struct NoopInstance {
    store: Store<PluginState>,
    noop: TypedFunc<(), ()>,
}

impl NoopInstance {
    /// Calls `noop()`.
    pub async fn call(&mut self) -> Result<(), String> {
        self.noop
            .call_async(&mut self.store, ())
            .await
            .map_err(|e| guest_fault(&e))
    }
}
