//! Probes: a component instantiated in a store made exactly as a run's is (same engine, linker,
//! sandbox and default limits), without a run around it. For measuring what instantiation and a
//! host-to-guest call cost on their own (the benchmarks use it), and for embedders who want to
//! check that a component instantiates under the host's limits.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::{InstancePre, TypedFunc};
use wasmtime::Store;

use crate::engine::EngineError;
use crate::fault::GuestFault;
use crate::host::Host;
use crate::sandbox::{Granted, Sandbox};
use crate::versions::{Recognised, WitVersion};
use seam_core::types::PluginKind;
use seam_wasm::kinds::provider::{ProviderInstance as Versioned, ProviderPre};
use seam_wasm::store::{new_store, CpuBudget, Serving, StoreData};
use seam_wasm::versions::exports::GuestError;

/// Why a probe could not be made or called.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The component could not be read or compiled.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The provider linker cannot link it.
    #[error("cannot link: {0}")]
    Link(String),
    /// It does not export what the probe calls.
    #[error("no `{0}` export")]
    NoExport(&'static str),
    /// The guest faulted.
    #[error(transparent)]
    Fault(#[from] GuestFault),
    /// The guest answered with an error of its own.
    #[error("the guest refused: {0}")]
    Refused(String),
}

fn guest_fault(e: &wasmtime::Error) -> ProbeError {
    ProbeError::Fault(GuestFault::from_error(e))
}

/// A compiled and linked component, ready to instantiate in stores made like a run's.
pub struct Template {
    host: Host,
    plugin: Arc<str>,
    sandbox: Sandbox,
    pre: InstancePre<StoreData>,
    /// The contract version it is a provider of, or the latest for a component of no Seam
    /// world (one exporting `noop`).
    version: WitVersion,
}

impl Template {
    /// Compiles (through the host's cache) and links the component at `path` with the
    /// provider linker.
    pub fn new(host: &Host, path: &Path) -> Result<Self, ProbeError> {
        let component = host
            .inner
            .cache
            .compile(path, None, crate::cache::Tiering::Optimised)?
            .component;
        let exports: Vec<String> = component
            .component_type()
            .exports(component.engine())
            .map(|(name, _)| name.to_string())
            .collect();
        let version = match crate::versions::recognise(exports.iter().map(String::as_str)) {
            Recognised::Plugin(PluginKind::Provider, version) => version,
            _ => WitVersion::LATEST,
        };
        let pre = host
            .inner
            .runtime
            .linkers
            .of(PluginKind::Provider, version)
            .ok_or_else(|| ProbeError::Link(format!("{version} has no provider world")))?
            .instantiate_pre(&component)
            .map_err(|e| ProbeError::Link(format!("{e:#}")))?;
        let options = &host.inner.options;
        Ok(Self {
            host: host.clone(),
            plugin: "probe".into(),
            sandbox: Sandbox::new(
                options.limits.clone(),
                Granted::default(),
                options.engine.epoch_tick,
            ),
            pre,
            version,
        })
    }

    fn store(&self) -> Store<StoreData> {
        let inner = &self.host.inner;
        new_store(
            &inner.runtime.engine,
            &inner.runtime.live,
            self.plugin.clone(),
            Serving::default(),
            &self.sandbox,
            CpuBudget::Call,
        )
    }

    /// A fresh store and instance of a provider component.
    pub async fn provider(&self) -> Result<ProviderInstance, ProbeError> {
        let pre = ProviderPre::new(self.version, self.pre.clone())
            .map_err(|e| ProbeError::Link(format!("{e:#}")))?;
        let mut store = self.store();
        let plugin = pre
            .instantiate(&mut store)
            .await
            .map_err(|e| guest_fault(&e))?;
        Ok(ProviderInstance { store, plugin })
    }

    /// A fresh store and instance of a component exporting `noop: func()`.
    pub async fn noop(&self) -> Result<NoopInstance, ProbeError> {
        let mut store = self.store();
        let instance = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| guest_fault(&e))?;
        let noop = instance
            .get_typed_func::<(), ()>(&mut store, "noop")
            .map_err(|_| ProbeError::NoExport("noop"))?;
        Ok(NoopInstance { store, noop })
    }
}

/// A live provider instance in its own store.
pub struct ProviderInstance {
    store: Store<StoreData>,
    plugin: Versioned,
}

impl ProviderInstance {
    /// Calls `describe(config)` and returns the descriptor's name.
    pub async fn describe(&mut self, config: &str) -> Result<String, ProbeError> {
        match self.plugin.describe(&mut self.store, config).await {
            Ok(Ok(d)) => Ok(d.name),
            Ok(Err(GuestError(message))) => Err(ProbeError::Refused(message)),
            Err(e) => Err(guest_fault(&e)),
        }
    }
}

/// A live instance of a component exporting `noop`.
pub struct NoopInstance {
    store: Store<StoreData>,
    noop: TypedFunc<(), ()>,
}

impl NoopInstance {
    /// Calls `noop()`.
    pub async fn call(&mut self) -> Result<(), ProbeError> {
        self.noop
            .call_async(&mut self.store, ())
            .await
            .map_err(|e| guest_fault(&e))
    }
}

/// A wasmtime engine made exactly as a host's is (the compiler, epoch interruption, the pooling
/// allocator with warm slots where the kernel has PAGEMAP_SCAN, the memory reservation), with
/// its epoch ticker, and nothing else of the host: no linker, compile cache, sandbox or run
/// machinery. For measuring what wasmtime alone costs on Seam's engine settings.
pub struct BareEngine {
    seam: crate::engine::SeamEngine,
}

impl BareEngine {
    /// An engine configured from `options` as `Host::new` configures its own.
    pub fn new(options: &crate::engine::EngineOptions) -> Result<Self, EngineError> {
        Ok(Self {
            seam: crate::engine::SeamEngine::new(options)?,
        })
    }

    /// The engine; its epoch ticker runs as long as `self` lives.
    pub fn engine(&self) -> &wasmtime::Engine {
        &self.seam.engine
    }
}
