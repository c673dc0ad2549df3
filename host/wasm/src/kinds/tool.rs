//! A tool component: bind at load, describe on mount, one fresh instance per call.

use seam_core::sync::lock;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use seam_agent::agent::AgentRegistry;
use seam_core::subagent::{SubagentRun, SubagentService};
use seam_core::tool::{DescribeError, Tool, ToolBinding, ToolSource};
use seam_core::types::{ParentRef, ProviderDescriptor, ToolDescriptor, ToolResult};
use tokio_util::sync::CancellationToken;
use wasmtime::component::InstancePre;

use super::error::PluginError;
use super::runtime::Runtime;
use crate::fault::GuestFault;
use crate::sandbox::gate::{blocks_size, Denied, RunGate};
use crate::sandbox::Sandbox;
use crate::store::context::{CallEnv, CallRuns, Quota};
use crate::store::{Serving, StoreData, Stores};
use crate::versions::delegate::Convert;
use crate::versions::exports::{
    mismatched, per_version, per_version_arms, raw_instance, versioned, wit_result, Answer,
    GuestError,
};
use crate::versions::latest::provider_world::seam::plugin::types as new;
use crate::versions::{for_each_version, rows_with};

/// Most bytes a tool's binding (its tool name and provider name) may take.
const MAX_BINDING_BYTES: usize = 256;

struct ToolParts {
    config: Arc<str>,
    pre: ToolPre,
    stores: Stores,
    /// Concurrency, wall-clock and size limits of its calls.
    gate: RunGate,
    subagents: Arc<SubagentService>,
    /// The cap of each run a call starts (`config.budget`).
    budget: Option<seam_core::spend::Budget>,
    /// For the lineage of a waiting call's caller; weak, as the registry reaches its tools.
    agents: Weak<AgentRegistry>,
    cancel_grace: Duration,
}

/// A tool backed by a component.
#[derive(Clone)]
pub struct WasmTool(Arc<ToolParts>);

impl WasmTool {
    /// Whether a call of its tool `name` needs a yes first (its entry's `config.approve`).
    pub fn approve(&self, name: &str) -> seam_core::approval::Policy {
        self.0.stores.sandbox.approve(name)
    }

    /// A tool over a component linked with the tool world's linker.
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
        let budget = sandbox.budget();
        Ok(Self(Arc::new(ToolParts {
            budget,
            gate: RunGate::new(plugin.clone(), sandbox.limits()),
            config,
            pre: ToolPre::new(version, pre)?,
            stores: Stores::new(&engine, &runtime.live, plugin, sandbox),
            subagents: runtime.subagents.clone(),
            agents: Arc::downgrade(&runtime.agents),
            cancel_grace: runtime.cancel_grace,
        })))
    }

    /// A fresh instance serving a call, or (with `None`) for `bind` or `describe`, under
    /// their CPU budget.
    async fn instance(
        &self,
        serving: Option<Serving>,
    ) -> Result<(wasmtime::Store<StoreData>, ToolInstance), PluginError> {
        let inner = &self.0;
        let mut store = match serving {
            Some(serving) => inner.stores.make(serving),
            None => inner.stores.make_for_describe(),
        };
        let instance = inner.pre.instantiate(&mut store).await.map_err(|e| {
            PluginError::Instantiate(GuestFault::from_store_error(&e, store.data()))
        })?;
        Ok((store, instance))
    }

    /// Reads the binding (which validates the config) in a throwaway instance.
    pub async fn bind(&self) -> Result<ToolBinding, PluginError> {
        let (mut store, instance) = self.instance(None).await?;
        match instance.bind(&mut store, &self.0.config).await {
            Ok(Ok(b)) => {
                // Names travel in every tool event; keep them to what a name needs.
                let size = b.tool_name.len() + b.provider.as_ref().map_or(0, String::len);
                if b.tool_name.is_empty() || size > MAX_BINDING_BYTES {
                    return Err(PluginError::Malformed {
                        call: "bind",
                        problem: format!(
                            "an empty tool name or a binding of more than {MAX_BINDING_BYTES} \
                             bytes ({size})"
                        ),
                    });
                }
                Ok(b)
            }
            Ok(Err(GuestError(message))) => Err(PluginError::Refused {
                call: "bind",
                message,
            }),
            Err(e) => Err(PluginError::Fault {
                call: "bind",
                fault: GuestFault::from_store_error(&e, store.data()),
            }),
        }
    }

    /// Asks the component for its model-facing description, given its provider's descriptor.
    async fn describe_inner(
        &self,
        provider: Option<&ProviderDescriptor>,
    ) -> Result<ToolDescriptor, PluginError> {
        let (mut store, instance) = self.instance(None).await?;
        let d = match instance
            .describe(&mut store, &self.0.config, provider)
            .await
        {
            Ok(Ok(d)) => d,
            Ok(Err(GuestError(message))) => {
                return Err(PluginError::Refused {
                    call: "describe",
                    message,
                })
            }
            Err(e) => {
                return Err(PluginError::Fault {
                    call: "describe",
                    fault: GuestFault::from_store_error(&e, store.data()),
                })
            }
        };
        // What the model will see crosses the boundary too: the same cap as a result.
        let size = d.name.len() + d.description.len() + d.parameters_schema.len();
        if let Err(hit) = self.0.gate.check_size(size) {
            return Err(PluginError::Fault {
                call: "describe",
                fault: GuestFault::Limit(hit),
            });
        }
        let parameters =
            serde_json::from_str(&d.parameters_schema).map_err(|e| PluginError::Malformed {
                call: "describe",
                problem: format!("a parameters schema that is not JSON: {e}"),
            })?;
        Ok(ToolDescriptor {
            name: d.name,
            description: d.description,
            parameters,
        })
    }

    async fn execute_inner(
        &self,
        caller: ParentRef,
        arguments: String,
        abort: CancellationToken,
    ) -> ToolResult {
        let inner = &self.0;
        // A slot first: nothing is instantiated for a call that waits or is refused.
        // The calls that wait for this one are the ones its caller's ancestors made.
        let waiting_on_me = || match inner.agents.upgrade() {
            Some(agents) => agents.lineage(&caller.id).split_off(1),
            None => Vec::new(),
        };
        let _slot = match inner
            .gate
            .enter(&caller.id, waiting_on_me, abort.cancelled())
            .await
        {
            Ok(slot) => slot,
            Err(Denied::Cancelled) => return ToolResult::error("the tool call was aborted"),
            Err(Denied::Refused(hit)) => return ToolResult::error(hit.to_string()),
            Err(Denied::Deadlock(message)) => return ToolResult::error(message),
        };
        let runs = Arc::new(Mutex::new(CallRuns::new()));
        let call = CallEnv {
            subagents: inner.subagents.clone(),
            caller: caller.clone(),
            abort: abort.clone(),
            runs: runs.clone(),
            gate: inner.gate.clone(),
            quota: Quota::of(inner.stores.plugin.clone(), &inner.stores.sandbox),
            budget: inner.budget,
            scope: inner.stores.sandbox.scope().cloned(),
            approver: inner.stores.sandbox.approver(),
        };
        let work = async {
            let (mut store, instance) = self
                .instance(Some(Serving::call(call)))
                .await
                .map_err(|e| e.to_string())?;
            instance
                .execute(&mut store, &inner.config, &caller, &arguments)
                .await
                .map_err(|e| {
                    format!(
                        "guest fault: {}",
                        GuestFault::from_store_error(&e, store.data())
                    )
                })
        };
        let enforce = async {
            abort.cancelled().await;
            tokio::time::sleep(inner.cancel_grace).await;
        };
        let outcome = tokio::select! {
            biased;
            r = inner.gate.timed(work) => Some(r.unwrap_or_else(|hit| Err(hit.to_string()))),
            _ = enforce => None,
        };
        // Quiescence at the end of the call: whatever the guest did with its runs.
        let started: Vec<(SubagentRun, _)> =
            std::mem::take(&mut *lock(&runs)).into_values().collect();
        futures::future::join_all(started.iter().map(|(run, _)| run.dispose())).await;
        match outcome {
            Some(Ok(r)) => {
                let content = r.content;
                match inner.gate.check_size(blocks_size(&content)) {
                    Ok(()) => ToolResult {
                        content,
                        is_error: r.is_error,
                    },
                    Err(hit) => ToolResult::error(format!(
                        "tool plugin `{}` failed: {hit}",
                        inner.stores.plugin
                    )),
                }
            }
            Some(Err(fault)) => ToolResult::error(format!(
                "tool plugin `{}` failed: {fault}",
                inner.stores.plugin
            )),
            None => ToolResult::error("the tool call was aborted"),
        }
    }
}

impl Tool for WasmTool {
    fn execute(
        &self,
        caller: ParentRef,
        arguments: String,
        abort: CancellationToken,
    ) -> BoxFuture<'static, ToolResult> {
        let this = self.clone();
        Box::pin(async move { this.execute_inner(caller, arguments, abort).await })
    }
}

impl ToolSource for WasmTool {
    fn plugin(&self) -> &str {
        &self.0.stores.plugin
    }

    fn describe(
        &self,
        provider: Option<Arc<ProviderDescriptor>>,
    ) -> BoxFuture<'static, Result<ToolDescriptor, DescribeError>> {
        let this = self.clone();
        Box::pin(async move {
            this.describe_inner(provider.as_deref())
                .await
                .map_err(DescribeError::from)
        })
    }
}

// The tool world's exports, in every version that has it: the versions' bindings are
// dispatched on here, so that the kind is one module.
for_each_version!(
    rows_with,
    Tool,
    versioned,
    ToolPre,
    ToolInstance,
    tool_world::ToolPluginPre,
    ToolPlugin
);

/// A tool's description as the guest gave it, before the host checks its size and parses its
/// schema.
pub struct GuestToolDescriptor {
    /// The tool's name.
    pub name: String,
    /// What the model is told it does.
    pub description: String,
    /// Its parameters' JSON Schema, as text.
    pub parameters_schema: String,
}

impl ToolPre {
    async fn mismatch(&self, store: &mut wasmtime::Store<StoreData>) -> Option<String> {
        use seam_core::PluginKind::Tool;
        let version = self.version();
        per_version!(Tool: self, pre, v => {
            use v::provider_world::seam::plugin::types as t;
            use v::tool_world::exports::seam::plugin::tool as x;
            let i = raw_instance(pre.instance_pre(), store).await?;
            mismatched!(store, &i, (Tool, version), "tool",
                "bind": (&str) -> wit_result!(x::ToolBinding),
                "describe": (&str, Option<&t::ProviderDescriptor>) -> wit_result!(x::ToolDescriptor),
                "execute": (&str, &t::ParentRef, &str) -> x::ToolResult,
            )
        })
    }
}

impl ToolInstance {
    /// `tool.bind`.
    pub async fn bind(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        config: &str,
    ) -> Answer<ToolBinding> {
        per_version!(Tool: self, i, _v => Ok(i
        .seam_plugin_tool()
        .call_bind(store, config)
        .await?
        .map(|b| ToolBinding {
            tool_name: b.tool_name,
            provider: b.provider,
            approve: Default::default(),
        })
        .map_err(GuestError)))
    }

    /// `tool.describe`.
    pub async fn describe(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        config: &str,
        provider: Option<&ProviderDescriptor>,
    ) -> Answer<GuestToolDescriptor> {
        per_version!(Tool: self, i, v => {
            let provider: Option<v::provider_world::seam::plugin::types::ProviderDescriptor> =
                provider.map(|d| new::ProviderDescriptor::from(d).convert());
            Ok(i.seam_plugin_tool()
                .call_describe(store, config, provider.as_ref())
                .await?
                .map(|d| GuestToolDescriptor {
                    name: d.name,
                    description: d.description,
                    parameters_schema: d.parameters_schema,
                })
                .map_err(GuestError))
        })
    }

    /// `tool.execute`.
    pub async fn execute(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        config: &str,
        caller: &ParentRef,
        arguments: &str,
    ) -> wasmtime::Result<ToolResult> {
        per_version!(Tool: self, i, _v => {
            let r = i
                .seam_plugin_tool()
                .call_execute(store, config, &new::ParentRef::from(caller.clone()).convert(), arguments)
                .await?;
            let content: Vec<new::ContentBlock> = r.content.convert();
            Ok(ToolResult {
                content: content.into_iter().map(Into::into).collect(),
                is_error: r.is_error,
            })
        })
    }
}
