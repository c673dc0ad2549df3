//! A tool component: bind at load, describe on mount, one fresh instance per call, and the
//! host's `subagents` service as the tool sees it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, Resource};

use super::guest_fault;
use crate::bindings::provider::seam::plugin::types as wit;
use crate::bindings::request_from_wit;
use crate::bindings::tool::seam::plugin::subagents::{Host as SubagentsHost, HostRun};
use crate::bindings::tool::ToolPluginPre;
use crate::engine::SeamEngine;
use crate::live::LiveCounts;
use crate::sandbox::{
    blocks_size, new_store, request_size, Denied, PluginState, Role, RunGate, Sandbox,
};
use crate::subagent::{SubagentError, SubagentRun, SubagentService};
use crate::tool::Tool;
use crate::types::{ContentBlock, ParentRef, ProviderDescriptor, ToolDescriptor, ToolResult};

/// Most bytes a tool's binding (its tool name and provider name) may take.
const MAX_BINDING_BYTES: usize = 256;

/// A run handle held in a tool instance's resource table.
pub struct RunResource(SubagentRun);

/// What a tool store needs while it serves one call.
pub(crate) struct ToolCall {
    subagents: Arc<SubagentService>,
    caller: ParentRef,
    abort: CancellationToken,
    /// Every run this call started, shared with the host so that they are disposed when the
    /// call ends even if the guest forgot, trapped, or was dropped mid-call.
    runs: Arc<Mutex<Vec<SubagentRun>>>,
    /// The tool plugin's limits, for the size of the requests it sends.
    gate: RunGate,
}

/// How a tool plugin binds: its tool name and the provider it follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolBinding {
    pub(crate) tool_name: String,
    pub(crate) provider: Option<String>,
}

struct Inner {
    plugin: Arc<str>,
    config: Arc<str>,
    pre: ToolPluginPre<PluginState>,
    engine: wasmtime::Engine,
    live: Arc<LiveCounts>,
    sandbox: Sandbox,
    /// Concurrency, wall-clock and size limits of its calls.
    gate: RunGate,
    subagents: Arc<SubagentService>,
    cancel_grace: Duration,
}

/// A tool backed by a component.
#[derive(Clone)]
pub(crate) struct WasmTool(Arc<Inner>);

impl WasmTool {
    /// Links the component and reads its binding (which validates its config).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn load(
        engine: &SeamEngine,
        live: &Arc<LiveCounts>,
        subagents: Arc<SubagentService>,
        plugin: Arc<str>,
        component: &Component,
        config: Arc<str>,
        sandbox: impl Into<Sandbox>,
        cancel_grace: Duration,
    ) -> Result<(ToolBinding, Self), String> {
        let pre = engine
            .tool_linker
            .instantiate_pre(component)
            .and_then(ToolPluginPre::new)
            .map_err(|e| format!("cannot link the tool component: {e:#}"))?;
        let sandbox = sandbox.into();
        let this = Self(Arc::new(Inner {
            gate: RunGate::new(plugin.clone(), sandbox.limits()),
            plugin,
            config,
            pre,
            engine: engine.engine.clone(),
            live: live.clone(),
            sandbox,
            subagents,
            cancel_grace,
        }));
        let binding = this.bind().await?;
        Ok((binding, this))
    }

    /// The plugin id.
    pub(crate) fn plugin(&self) -> &str {
        &self.0.plugin
    }

    async fn instance(
        &self,
        role: Role,
    ) -> Result<
        (
            wasmtime::Store<PluginState>,
            crate::bindings::tool::ToolPlugin,
        ),
        String,
    > {
        let inner = &self.0;
        let mut store = new_store(
            &inner.engine,
            &inner.live,
            inner.plugin.clone(),
            role,
            &inner.sandbox,
        );
        let instance = inner
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| format!("cannot instantiate: {}", guest_fault(&e)))?;
        Ok((store, instance))
    }

    async fn bind(&self) -> Result<ToolBinding, String> {
        let (mut store, instance) = self.instance(Role::Describe).await?;
        match instance
            .seam_plugin_tool()
            .call_bind(&mut store, &self.0.config)
            .await
        {
            Ok(Ok(b)) => {
                // Names travel in every tool event; keep them to what a name needs.
                let size = b.tool_name.len() + b.provider.as_ref().map_or(0, String::len);
                if b.tool_name.is_empty() || size > MAX_BINDING_BYTES {
                    return Err(format!(
                        "bind returned an empty tool name or a binding of more than \
                         {MAX_BINDING_BYTES} bytes ({size})"
                    ));
                }
                Ok(ToolBinding {
                    tool_name: b.tool_name,
                    provider: b.provider,
                })
            }
            Ok(Err(message)) => Err(format!("bind refused the config: {message}")),
            Err(e) => Err(format!("bind failed: {}", guest_fault(&e))),
        }
    }

    /// Asks the component for its model-facing description, given its provider's descriptor.
    pub(crate) async fn describe(
        &self,
        provider: Option<&ProviderDescriptor>,
    ) -> Result<ToolDescriptor, String> {
        let (mut store, instance) = self.instance(Role::Describe).await?;
        let provider = provider.map(wit::ProviderDescriptor::from);
        let d = match instance
            .seam_plugin_tool()
            .call_describe(&mut store, &self.0.config, provider.as_ref())
            .await
        {
            Ok(Ok(d)) => d,
            Ok(Err(message)) => return Err(format!("describe refused: {message}")),
            Err(e) => return Err(format!("describe failed: {}", guest_fault(&e))),
        };
        // What the model will see crosses the boundary too: the same cap as a result.
        let size = d.name.len() + d.description.len() + d.parameters_schema.len();
        if let Err(hit) = self.0.gate.check_size(size) {
            return Err(format!("describe failed: {hit}"));
        }
        let parameters = serde_json::from_str(&d.parameters_schema)
            .map_err(|e| format!("describe returned a parameters schema that is not JSON: {e}"))?;
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
        let _slot = match inner.gate.enter(abort.cancelled()).await {
            Ok(slot) => slot,
            Err(Denied::Cancelled) => return ToolResult::error("the tool call was aborted"),
            Err(Denied::Refused(hit)) => return ToolResult::error(hit.to_string()),
        };
        let runs = Arc::new(Mutex::new(Vec::new()));
        let call = ToolCall {
            subagents: inner.subagents.clone(),
            caller: caller.clone(),
            abort: abort.clone(),
            runs: runs.clone(),
            gate: inner.gate.clone(),
        };
        let work = async {
            let (mut store, instance) = self.instance(Role::Call(call)).await?;
            instance
                .seam_plugin_tool()
                .call_execute(&mut store, &inner.config, &caller.into(), &arguments)
                .await
                .map_err(|e| format!("guest fault: {}", guest_fault(&e)))
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
        let started: Vec<SubagentRun> =
            std::mem::take(&mut *runs.lock().unwrap_or_else(|p| p.into_inner()));
        futures::future::join_all(started.iter().map(SubagentRun::dispose)).await;
        match outcome {
            Some(Ok(r)) => {
                let content: Vec<ContentBlock> =
                    r.content.into_iter().map(ContentBlock::from).collect();
                match inner.gate.check_size(blocks_size(&content)) {
                    Ok(()) => ToolResult {
                        content,
                        is_error: r.is_error,
                    },
                    Err(hit) => {
                        ToolResult::error(format!("tool plugin `{}` failed: {hit}", inner.plugin))
                    }
                }
            }
            Some(Err(fault)) => {
                ToolResult::error(format!("tool plugin `{}` failed: {fault}", inner.plugin))
            }
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

fn call_of(state: &mut PluginState) -> Option<&mut ToolCall> {
    match &mut state.role {
        Role::Call(call) => Some(call),
        _ => None,
    }
}

fn run_of(
    state: &mut PluginState,
    handle: &Resource<RunResource>,
) -> wasmtime::Result<SubagentRun> {
    Ok(state.table().get(handle)?.0.clone())
}

impl SubagentsHost for PluginState {
    async fn start(
        &mut self,
        provider: String,
        request: wit::StartRequest,
    ) -> wasmtime::Result<Result<Resource<RunResource>, wit::SubagentError>> {
        let Some(call) = call_of(self) else {
            return Ok(Err(wit::SubagentError::Internal(
                "runs can only be started while executing a call".into(),
            )));
        };
        let mut request = match request_from_wit(request) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e.into())),
        };
        if let Err(hit) = call.gate.check_size(request_size(&request)) {
            return Ok(Err(wit::SubagentError::InvalidRequest(hit.to_string())));
        }
        // The host, not the guest, says who the caller is: a tool cannot lie about its depth.
        request.parent = call.caller.clone();
        request.signal = Some(call.abort.child_token());
        let run = match call.subagents.start(&provider, request) {
            Ok(run) => run,
            Err(e) => return Ok(Err(e.into())),
        };
        call.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(run.clone());
        Ok(Ok(self.table().push(RunResource(run))?))
    }

    async fn provider(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Option<wit::ProviderDescriptor>> {
        Ok(call_of(self)
            .and_then(|c| c.subagents.descriptor(&name))
            .map(|d| wit::ProviderDescriptor::from(&*d)))
    }

    async fn list_providers(&mut self) -> wasmtime::Result<Vec<wit::ProviderDescriptor>> {
        Ok(call_of(self)
            .map(|c| c.subagents.list())
            .unwrap_or_default()
            .iter()
            .map(|d| wit::ProviderDescriptor::from(&**d))
            .collect())
    }
}

impl HostRun for PluginState {
    async fn id(&mut self, handle: Resource<RunResource>) -> wasmtime::Result<String> {
        Ok(run_of(self, &handle)?.id().to_string())
    }

    async fn started(
        &mut self,
        handle: Resource<RunResource>,
    ) -> wasmtime::Result<Result<(), wit::SubagentError>> {
        let run = run_of(self, &handle)?;
        Ok(run.started().await.map_err(SubagentError::into))
    }

    async fn result(
        &mut self,
        handle: Resource<RunResource>,
    ) -> wasmtime::Result<Result<wit::SubagentResult, wit::SubagentError>> {
        let run = run_of(self, &handle)?;
        Ok(run
            .result()
            .await
            .map(wit::SubagentResult::from)
            .map_err(SubagentError::into))
    }

    async fn cancel(
        &mut self,
        handle: Resource<RunResource>,
        reason: Option<String>,
    ) -> wasmtime::Result<()> {
        run_of(self, &handle)?.cancel(reason);
        Ok(())
    }

    async fn dispose(&mut self, handle: Resource<RunResource>) -> wasmtime::Result<()> {
        run_of(self, &handle)?.dispose().await;
        Ok(())
    }

    async fn drop(&mut self, handle: Resource<RunResource>) -> wasmtime::Result<()> {
        let run = self.table().delete(handle)?;
        run.0.dispose().await;
        Ok(())
    }
}
