//! A provider component: describe once at load, then one fresh instance per run, or, where its
//! entry shares instances and its `run` is async, a run on a shared instance (`super::shared`).

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use seam_agent::agent::AgentRegistry;
use seam_core::subagent::{Provider, RunContext, RunFailure, SubagentService};
use seam_core::types::{ProviderDescriptor, StartRequest, SubagentResult};
use wasmtime::component::InstancePre;

use super::error::PluginError;
pub use super::provider_exports::{ProviderInstance, ProviderPre};
use super::runtime::Runtime;
use super::shared::SharedPool;
use crate::fault::GuestFault;
use crate::sandbox::gate::RunGate;
use crate::sandbox::Sandbox;
use crate::store::context::{Quota, RunEnv};
use crate::store::{Serving, StoreData, Stores};
use crate::versions::exports::{GuestError, RunCall};

/// A provider backed by a component.
pub struct WasmProvider {
    config: Arc<str>,
    pre: ProviderPre,
    stores: Stores,
    /// Weak: the agent registry reaches this provider through its tools, and a strong
    /// reference back would keep the whole host (and its memory pool) alive forever.
    agents: Weak<AgentRegistry>,
    /// Weak for the same reason: the service holds this provider.
    subagents: Weak<SubagentService>,
    /// For the size of the requests its runs send through `subagents`.
    gate: RunGate,
    /// The instances its runs share, when its entry says so (`config.share_instance`).
    shared: Option<Arc<SharedPool>>,
}

impl WasmProvider {
    /// A provider over a component linked with the provider world's linker.
    pub fn new(
        runtime: &Runtime,
        plugin: Arc<str>,
        version: crate::versions::WitVersion,
        pre: InstancePre<StoreData>,
        config: Arc<str>,
        sandbox: Sandbox,
    ) -> wasmtime::Result<Self> {
        // A tiered host serves a component from the engine that compiled it.
        let engine = pre.engine().clone();
        let pre = ProviderPre::new(version, pre)?;
        let shared_runs = sandbox.shared_runs();
        let stores = Stores::new(&engine, &runtime.live, plugin.clone(), sandbox);
        let shared = match shared_runs {
            None => None,
            Some(_) if !pre.concurrent_run() => {
                return Err(wasmtime::Error::msg(format!(
                    "key `config.share_instance`: plugin `{plugin}` is built against \
                     seam:plugin@{version}, whose `provider.run` is blocking; one instance can \
                     serve several runs only with an async `run` (seam:plugin@0.5.0 or later)"
                )))
            }
            Some(runs) => Some(Arc::new(SharedPool::new(
                pre.clone(),
                stores.clone(),
                config.clone(),
                runs,
            ))),
        };
        Ok(Self {
            config,
            pre,
            shared,
            gate: RunGate::new(plugin, stores.sandbox.limits()),
            stores,
            agents: Arc::downgrade(&runtime.agents),
            subagents: Arc::downgrade(&runtime.subagents),
        })
    }

    /// Reads the descriptor in a throwaway instance.
    pub async fn describe(&self) -> Result<ProviderDescriptor, PluginError> {
        let mut store = self.stores.make_for_describe();
        let instance = self.pre.instantiate(&mut store).await.map_err(|e| {
            PluginError::Instantiate(GuestFault::from_store_error(&e, store.data()))
        })?;
        match instance.describe(&mut store, &self.config).await {
            Ok(Ok(d)) => Ok(d),
            Ok(Err(GuestError(message))) => Err(PluginError::Refused {
                call: "describe",
                message,
            }),
            Err(e) => Err(PluginError::Fault {
                call: "describe",
                fault: GuestFault::from_store_error(&e, store.data()),
            }),
        }
    }
}

impl Provider for WasmProvider {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let (Some(agents), Some(subagents)) = (self.agents.upgrade(), self.subagents.upgrade())
        else {
            return Box::pin(async { Err(RunFailure::ShuttingDown) });
        };
        // Shared with the store, for the imports that read it.
        let request = Arc::new(request);
        let stores = self.stores.clone();
        let env = RunEnv {
            ctx: ctx.clone(),
            request: request.clone(),
            agents,
            quota: Quota::of(stores.plugin.clone(), &stores.sandbox),
            max_output_bytes: stores.sandbox.limits().max_output_bytes,
            progress_bytes: 0,
            progress_cut: false,
            runs: Arc::default(),
            subagents,
            gate: self.gate.clone(),
        };
        // A run on a shared instance is a small future of its own: the one below holds a whole
        // instantiation and call, kilobytes that a live shared run would carry for nothing.
        if let Some(shared) = self.shared.as_ref().filter(|pool| pool.admits(&env)) {
            let shared = shared.clone();
            return Box::pin(async move { shared.run(env, request).await });
        }
        let pre = self.pre.clone();
        let config = self.config.clone();
        Box::pin(async move {
            // The store lives inside this future: when the host drops the future (dispose,
            // enforced cancel), the instance goes with it.
            let mut store = stores.make(Serving::run(env));
            let instance = pre.instantiate(&mut store).await.map_err(|e| {
                RunFailure::Instantiate(GuestFault::from_store_error(&e, store.data()).to_string())
            })?;
            let call = RunCall {
                config: &config,
                ctx: &ctx,
                request: &request,
            };
            match instance.run(&mut store, call).await {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(GuestError(message))) => Err(RunFailure::Refused(message)),
                Err(e) => Err(RunFailure::GuestFault(
                    GuestFault::from_store_error(&e, store.data()).to_string(),
                )),
            }
        })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        match &self.shared {
            Some(pool) => {
                let pool = pool.clone();
                Box::pin(async move { pool.close().await })
            }
            None => Box::pin(async {}),
        }
    }
}
