//! Probes: a component instantiated in a store made exactly as a run's is (same engine, linker,
//! sandbox and default limits), without a run around it. For measuring what instantiation and a
//! host-to-guest call cost on their own (the benchmarks use it), for embedders who want to
//! check that a component instantiates under the host's limits, and for calling an export of
//! a component's own under a config entry's grants and limits
//! ([`Template::for_entry`], [`Template::call_async`]).

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::{InstancePre, TypedFunc};
use wasmtime::Store;

use crate::config::{EntrySource, PluginEntry};
use crate::engine::EngineError;
use crate::fault::GuestFault;
use crate::host::Host;
use crate::loader::LoadError;
use crate::sandbox::{Granted, Sandbox};
use crate::versions::latest::provider_world::{ProviderPlugin, ProviderPluginPre};
use seam_core::types::PluginKind;
use seam_wasm::store::{new_store, CpuBudget, Serving, StoreData};

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
    /// The entry cannot be sandboxed as its config says (a grant the host cannot honour).
    #[error(transparent)]
    Sandbox(Box<LoadError>),
    /// The entry names no component file.
    #[error("entry `{0}` is not a component file")]
    NotAComponent(String),
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
        let pre = host
            .inner
            .runtime
            .linkers
            .of(PluginKind::Provider, crate::versions::WitVersion::LATEST)
            .ok_or_else(|| ProbeError::Link("the latest version has no provider world".into()))?
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
        })
    }

    /// The component of `entry` (a component file), sandboxed as the loader sandboxes the
    /// entry: its grants checked against the host, its limits over the host's defaults, and its
    /// id as the plugin's; linked with the linker of the world and version it exports. Its
    /// stores share one disk quota and one set of connection slots, as an entry's runs do. The
    /// entry need not be loaded.
    pub async fn for_entry(host: &Host, entry: &PluginEntry) -> Result<Self, ProbeError> {
        let EntrySource::Component(path) = &entry.source else {
            return Err(ProbeError::NotAComponent(entry.id.clone()));
        };
        let inner = &host.inner;
        let (compiled, kind, version) = inner
            .cache
            .compile_and_recognise(path, None, crate::cache::Tiering::Optimised)
            .await?;
        let pre = inner
            .runtime
            .linkers
            .of(kind, version)
            .ok_or_else(|| ProbeError::Link(format!("{} {kind:?} has no world", version.as_str())))?
            .instantiate_pre(&compiled.component)
            .map_err(|e| ProbeError::Link(format!("{e:#}")))?;
        let mut info = crate::loader::Loader::info_for(entry);
        let sandbox = inner
            .loader
            .sandbox_for(entry, &mut info)
            .map_err(|e| ProbeError::Sandbox(Box::new(e)))?;
        Ok(Self {
            host: host.clone(),
            plugin: entry.id.as_str().into(),
            sandbox,
            pre,
        })
    }

    /// Calls `name`, an export `async func(string) -> string` of the component's own (outside
    /// its Seam world), with `arg`, in a fresh store and instance made as a run's but serving
    /// no run (so no `[approvals]` are asked: they ask on a run's or a call's behalf). A trap,
    /// or a limit the call hit, is a [`ProbeError::Fault`].
    pub async fn call_async(&self, name: &str, arg: &str) -> Result<String, ProbeError> {
        let mut store = self.store();
        let instance = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| guest_fault(&e))?;
        let export = instance
            .get_typed_func::<(String,), (String,)>(&mut store, name)
            .map_err(|_| ProbeError::NoExport("async func(string) -> string"))?;
        let (answer,) = export
            .call_async(&mut store, (arg.to_string(),))
            .await
            .map_err(|e| ProbeError::Fault(GuestFault::from_store_error(&e, store.data())))?;
        Ok(answer)
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
        let pre = ProviderPluginPre::new(self.pre.clone())
            .map_err(|e| ProbeError::Link(format!("{e:#}")))?;
        let mut store = self.store();
        let plugin = pre
            .instantiate_async(&mut store)
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
    plugin: ProviderPlugin,
}

impl ProviderInstance {
    /// Calls `describe(config)` and returns the descriptor's name.
    pub async fn describe(&mut self, config: &str) -> Result<String, ProbeError> {
        match self
            .plugin
            .seam_plugin_provider()
            .call_describe(&mut self.store, config)
            .await
        {
            Ok(Ok(d)) => Ok(d.name),
            Ok(Err(message)) => Err(ProbeError::Refused(message)),
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
