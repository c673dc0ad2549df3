//! A provider component: describe once at load, then one fresh instance per run.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use wasmtime::component::Component;

use super::agents::RunEnv;
use super::guest_fault;
use crate::agent::AgentRegistry;
use crate::bindings::provider::seam::plugin::run_context::Host as RunContextHost;
use crate::bindings::provider::ProviderPluginPre;
use crate::bindings::{request_to_wit, result_from_wit};
use crate::engine::SeamEngine;
use crate::live::LiveCounts;
use crate::sandbox::{new_store, PluginState, Role, Sandbox};
use crate::subagent::{Provider, RunContext, RunFailure};
use crate::types::{ProviderDescriptor, StartRequest, SubagentResult};

/// A provider backed by a component.
pub(crate) struct WasmProvider {
    plugin: Arc<str>,
    config: Arc<str>,
    pre: ProviderPluginPre<PluginState>,
    engine: wasmtime::Engine,
    live: Arc<LiveCounts>,
    sandbox: Sandbox,
    /// Weak: the agent registry reaches this provider through its tools, and a strong
    /// reference back would keep the whole host (and its memory pool) alive forever.
    agents: Weak<AgentRegistry>,
}

impl WasmProvider {
    /// Links the component and reads its descriptor in a throwaway instance.
    pub(crate) async fn load(
        engine: &SeamEngine,
        live: &Arc<LiveCounts>,
        plugin: Arc<str>,
        component: &Component,
        config: Arc<str>,
        sandbox: impl Into<Sandbox>,
        agents: Arc<AgentRegistry>,
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
            sandbox: sandbox.into(),
            agents: Arc::downgrade(&agents),
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
            &self.sandbox,
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
        let sandbox = self.sandbox.clone();
        let agents = self.agents.upgrade();
        Box::pin(async move {
            let agents = agents.ok_or_else(|| RunFailure("the host is shutting down".into()))?;
            let run_id = ctx.id().to_string();
            let wit_request = request_to_wit(&request);
            let env = RunEnv {
                ctx,
                request,
                agents,
            };
            // The store lives inside this future: when the host drops the future (dispose,
            // enforced cancel), the instance goes with it.
            let mut store = new_store(&engine, &live, plugin, Role::Run(env), &sandbox);
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
    async fn ready(&mut self) -> wasmtime::Result<()> {
        if let Role::Run(env) = &self.role {
            env.ctx.ready();
        }
        Ok(())
    }

    async fn cancel_reason(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(match &self.role {
            Role::Run(env) => env.ctx.cancel_reason(),
            _ => None,
        })
    }

    async fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(matches!(&self.role, Role::Run(env) if env.ctx.is_cancelled()))
    }

    async fn sleep(&mut self, ms: u64) -> wasmtime::Result<bool> {
        let nap = tokio::time::sleep(std::time::Duration::from_millis(ms));
        Ok(match &self.role {
            Role::Run(env) => {
                tokio::select! {
                    _ = nap => !env.ctx.is_cancelled(),
                    _ = env.ctx.cancelled() => false,
                }
            }
            _ => {
                nap.await;
                true
            }
        })
    }
}
