//! The host imports of `seam:plugin@0.1.0`: each converts its 0.1.0 arguments and delegates to
//! the latest implementation (`crate::interfaces`), so that one implementation
//! serves every supported version. The bindings and type conversions are in
//! the parent module.

use wasmtime::component::{HasSelf, Linker, Resource};

use seam_core::agent::RunChild;
use seam_core::types::{ContentBlock, ProviderDescriptor, StopReason};
use seam_core::SubagentRun;

use crate::store::StoreData;
use crate::versions::latest::provider_world::seam::plugin as new;
use crate::versions::v0_1_0::provider_world::seam::plugin::types as wit;
use crate::versions::v0_1_0::provider_world::seam::plugin::{agents, host, run_context};
use crate::versions::v0_1_0::tool_world::seam::plugin::subagents;
use crate::versions::v0_1_0::{folded, request_from_wit};

/// Adds the 0.1.0 interfaces `kind`'s world imports to a linker (WASI is added by the caller).
pub fn add_to_linker(
    linker: &mut Linker<StoreData>,
    kind: seam_core::PluginKind,
) -> wasmtime::Result<()> {
    use seam_core::PluginKind;
    wit::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)?;
    host::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)?;
    match kind {
        PluginKind::Provider => {
            run_context::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)?;
            agents::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)
        }
        PluginKind::Tool => subagents::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s),
        PluginKind::Observer => Ok(()),
        // A frozen version never gains a kind: the linkers ask it only for the kinds its row
        // in `for_each_version!` lists, so a kind added later needs no arm here.
        #[allow(unreachable_patterns)]
        other => Err(wasmtime::Error::msg(format!(
            "this version has no `{other}` world"
        ))),
    }
}

fn blocks(b: Vec<wit::ContentBlock>) -> Vec<new::types::ContentBlock> {
    b.into_iter()
        .map(|b| ContentBlock::from(b).into())
        .collect()
}

fn descriptor(d: new::types::ProviderDescriptor) -> wit::ProviderDescriptor {
    (&ProviderDescriptor::from(d)).into()
}

fn error(e: new::types::SubagentError) -> wit::SubagentError {
    use new::types::SubagentError as E;
    match e {
        E::DuplicateProvider(n) => wit::SubagentError::DuplicateProvider(n),
        E::NoProvider(n) => wit::SubagentError::NoProvider(n),
        E::UnsupportedCapability(c) => wit::SubagentError::UnsupportedCapability(c),
        E::InvalidRequest(m) => wit::SubagentError::InvalidRequest(m),
        E::DepthExceeded(d) => wit::SubagentError::DepthExceeded(wit::DepthInfo {
            attempted: d.attempted,
            max: d.max,
        }),
        E::Aborted(r) => wit::SubagentError::Aborted(r),
        E::StartFailed(m) => wit::SubagentError::StartFailed(m),
        E::Disposed => wit::SubagentError::Disposed,
        E::Internal(m) => wit::SubagentError::Internal(m),
        E::UnsupportedFeature(f) => {
            wit::SubagentError::Internal(format!("unsupported feature `{f}`"))
        }
        E::InvalidState(m) => wit::SubagentError::Internal(format!("invalid state: {m}")),
        E::NoRun(id) => wit::SubagentError::Internal(format!("no run `{id}`")),
    }
}

fn result(r: new::types::SubagentResult) -> wit::SubagentResult {
    crate::versions::latest::result_from_wit(r).into()
}

impl wit::Host for StoreData {}

impl host::Host for StoreData {
    async fn log(&mut self, level: host::LogLevel, message: String) -> wasmtime::Result<()> {
        use host::LogLevel as Old;
        use new::host::LogLevel as New;
        let level = match level {
            Old::Trace => New::Trace,
            Old::Debug => New::Debug,
            Old::Info => New::Info,
            Old::Warn => New::Warn,
            Old::Error => New::Error,
        };
        new::host::Host::log(self, level, message).await
    }
}

impl run_context::Host for StoreData {
    async fn ready(&mut self) -> wasmtime::Result<()> {
        new::run_context::Host::ready(self).await
    }

    async fn cancel_reason(&mut self) -> wasmtime::Result<Option<String>> {
        new::run_context::Host::cancel_reason(self).await
    }

    async fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        new::run_context::Host::is_cancelled(self).await
    }

    async fn sleep(&mut self, ms: u64) -> wasmtime::Result<bool> {
        new::run_context::Host::sleep(self, ms).await
    }
}

fn agent_error(e: new::agents::AgentError) -> agents::AgentError {
    use new::agents::AgentError as E;
    match e {
        E::DepthExceeded(d) => agents::AgentError::DepthExceeded(wit::DepthInfo {
            attempted: d.attempted,
            max: d.max,
        }),
        E::Invalid(m) => agents::AgentError::Invalid(m),
        E::Busy => agents::AgentError::Busy,
        E::Idle => agents::AgentError::Idle,
        E::Aborted => agents::AgentError::Aborted,
    }
}

impl agents::Host for StoreData {
    async fn create_child(
        &mut self,
        options: agents::ChildOptions,
    ) -> wasmtime::Result<Result<Resource<RunChild>, agents::AgentError>> {
        let options = new::agents::ChildOptions {
            agent_options: options.agent_options.map(|o| new::types::AgentOptions {
                model: o.model,
                system_prompt: o.system_prompt,
            }),
            persona: options.persona,
            tool_filter: options.tool_filter.map(|f| new::types::ToolFilter {
                allow: f.allow,
                deny: f.deny,
            }),
            output_schema: options.output_schema,
            seed: match options.seed {
                agents::Seed::None => new::agents::Seed::None,
                agents::Seed::ParentCompletedTurns => new::agents::Seed::ParentCompletedTurns,
            },
        };
        Ok(new::agents::Host::create_child(self, options)
            .await?
            .map_err(agent_error))
    }
}

impl agents::HostChild for StoreData {
    async fn id(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<String> {
        new::agents::HostChild::id(self, handle).await
    }

    async fn send(
        &mut self,
        handle: Resource<RunChild>,
        prompt: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<Result<(), agents::AgentError>> {
        Ok(new::agents::HostChild::send(self, handle, blocks(prompt))
            .await?
            .map_err(agent_error))
    }

    async fn wait_idle(
        &mut self,
        handle: Resource<RunChild>,
    ) -> wasmtime::Result<Result<agents::ChildOutcome, agents::AgentError>> {
        let outcome = new::agents::HostChild::wait_idle(self, handle).await?;
        Ok(outcome.map_err(agent_error).map(|o| agents::ChildOutcome {
            output: folded(o.output.into_iter().map(Into::into).collect(), o.diagnostic),
            structured: o.structured,
            stop_reason: StopReason::from(o.stop_reason).into(),
        }))
    }

    async fn steer(
        &mut self,
        handle: Resource<RunChild>,
        message: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<()> {
        new::agents::HostChild::steer(self, handle, blocks(message)).await
    }

    async fn dispose(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<()> {
        new::agents::HostChild::dispose(self, handle).await
    }

    async fn drop(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<()> {
        new::agents::HostChild::drop(self, handle).await
    }
}

impl subagents::Host for StoreData {
    async fn start(
        &mut self,
        provider: String,
        request: wit::StartRequest,
    ) -> wasmtime::Result<Result<Resource<SubagentRun>, wit::SubagentError>> {
        let request = match request_from_wit(request) {
            Ok(r) => crate::versions::latest::request_to_wit(&r),
            Err(e) => return Ok(Err(e.into())),
        };
        Ok(new::subagents::Host::start(self, provider, request)
            .await?
            .map_err(error))
    }

    async fn provider(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Option<wit::ProviderDescriptor>> {
        Ok(new::subagents::Host::provider(self, name)
            .await?
            .map(descriptor))
    }

    async fn list_providers(&mut self) -> wasmtime::Result<Vec<wit::ProviderDescriptor>> {
        Ok(new::subagents::Host::list_providers(self)
            .await?
            .into_iter()
            .map(descriptor)
            .collect())
    }
}

impl subagents::HostRun for StoreData {
    async fn id(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<String> {
        new::subagents::HostRun::id(self, handle).await
    }

    async fn started(
        &mut self,
        handle: Resource<SubagentRun>,
    ) -> wasmtime::Result<Result<(), wit::SubagentError>> {
        Ok(new::subagents::HostRun::started(self, handle)
            .await?
            .map_err(error))
    }

    async fn result(
        &mut self,
        handle: Resource<SubagentRun>,
    ) -> wasmtime::Result<Result<wit::SubagentResult, wit::SubagentError>> {
        Ok(new::subagents::HostRun::result(self, handle)
            .await?
            .map(result)
            .map_err(error))
    }

    async fn cancel(
        &mut self,
        handle: Resource<SubagentRun>,
        reason: Option<String>,
    ) -> wasmtime::Result<()> {
        new::subagents::HostRun::cancel(self, handle, reason).await
    }

    async fn dispose(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<()> {
        new::subagents::HostRun::dispose(self, handle).await
    }

    async fn drop(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<()> {
        new::subagents::HostRun::drop(self, handle).await
    }
}
