//! A provider component: describe once at load, then one fresh instance per run.

use std::sync::Arc;

use futures::future::BoxFuture;
use wasmtime::component::Component;

use super::guest_fault;
use crate::bindings::provider::seam::plugin::run_context::Host as RunContextHost;
use crate::bindings::provider::ProviderPluginPre;
use crate::bindings::{request_to_wit, result_from_wit};
use crate::engine::SeamEngine;
use crate::live::LiveCounts;
use crate::sandbox::{new_store, Limits, PluginState, Role};
use crate::subagent::{Provider, RunContext, RunFailure};
use crate::types::{ProviderDescriptor, StartRequest, SubagentResult};

/// A provider backed by a component.
pub(crate) struct WasmProvider {
    plugin: Arc<str>,
    config: Arc<str>,
    pre: ProviderPluginPre<PluginState>,
    engine: wasmtime::Engine,
    live: Arc<LiveCounts>,
    limits: Limits,
}

impl WasmProvider {
    /// Links the component and reads its descriptor in a throwaway instance.
    pub(crate) async fn load(
        engine: &SeamEngine,
        live: &Arc<LiveCounts>,
        plugin: Arc<str>,
        component: &Component,
        config: Arc<str>,
        limits: Limits,
    ) -> Result<(ProviderDescriptor, Self), String> {
        let pre = engine
            .provider_linker
            .instantiate_pre(component)
            .and_then(ProviderPluginPre::new)
            .map_err(|e| format!("cannot link the provider component: {e:#}"))?;
        let this = Self {
            plugin,
            config,
            pre,
            engine: engine.engine.clone(),
            live: live.clone(),
            limits,
        };
        let descriptor = this.describe().await?;
        Ok((descriptor, this))
    }

    async fn describe(&self) -> Result<ProviderDescriptor, String> {
        let mut store = new_store(
            &self.engine,
            &self.live,
            self.plugin.clone(),
            Role::Describe,
            &self.limits,
        );
        let instance = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| format!("cannot instantiate: {}", guest_fault(&e)))?;
        match instance
            .seam_plugin_provider()
            .call_describe(&mut store, &self.config)
            .await
        {
            Ok(Ok(d)) => Ok(d.into()),
            Ok(Err(message)) => Err(format!("describe refused the config: {message}")),
            Err(e) => Err(format!("describe failed: {}", guest_fault(&e))),
        }
    }
}

impl Provider for WasmProvider {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let pre = self.pre.clone();
        let engine = self.engine.clone();
        let live = self.live.clone();
        let plugin = self.plugin.clone();
        let config = self.config.clone();
        let limits = self.limits.clone();
        Box::pin(async move {
            let run_id = ctx.id().to_string();
            let wit_request = request_to_wit(&request);
            // The store lives inside this future: when the host drops the future (dispose,
            // enforced cancel), the instance goes with it.
            let mut store = new_store(&engine, &live, plugin, Role::Run(ctx), &limits);
            let instance = pre
                .instantiate_async(&mut store)
                .await
                .map_err(|e| RunFailure(format!("cannot instantiate: {}", guest_fault(&e))))?;
            match instance
                .seam_plugin_provider()
                .call_run(&mut store, &config, &run_id, &wit_request)
                .await
            {
                Ok(Ok(result)) => Ok(result_from_wit(result)),
                Ok(Err(message)) => Err(RunFailure(message)),
                Err(e) => Err(RunFailure(format!("guest fault: {}", guest_fault(&e)))),
            }
        })
    }
}

impl RunContextHost for PluginState {
    async fn ready(&mut self) {
        if let Role::Run(ctx) = &self.role {
            ctx.ready();
        }
    }

    async fn cancel_reason(&mut self) -> Option<String> {
        match &self.role {
            Role::Run(ctx) => ctx.cancel_reason(),
            _ => None,
        }
    }

    async fn is_cancelled(&mut self) -> bool {
        matches!(&self.role, Role::Run(ctx) if ctx.is_cancelled())
    }

    async fn sleep(&mut self, ms: u64) -> bool {
        let nap = tokio::time::sleep(std::time::Duration::from_millis(ms));
        match &self.role {
            Role::Run(ctx) => {
                tokio::select! {
                    _ = nap => !ctx.is_cancelled(),
                    _ = ctx.cancelled() => false,
                }
            }
            _ => {
                nap.await;
                true
            }
        }
    }
}
