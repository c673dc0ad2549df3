//! The `subagents` interface: a tool call starts runs on providers, awaits, cancels and disposes
//! them. The host, not the guest, says who the caller is, and every run a call starts is
//! disposed when the call ends.

use seam_core::subagent::{SubagentError, SubagentRun};
use wasmtime::component::{HasSelf, Linker, Resource};

use super::context::RUN_OVERHEAD;
use super::state::StoreData;
use crate::sandbox::gate::request_size;
use crate::sandbox::Limit;
use crate::wit::latest::provider_world::seam::plugin::types as wit;
use crate::wit::latest::request_from_wit;
use crate::wit::latest::tool_world::seam::plugin::subagents as wit_subagents;

/// Adds `subagents` to a linker.
pub(crate) fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    wit_subagents::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)
}

impl StoreData {
    /// A disposed run leaves its call's table, and gives back what it cost.
    fn forget(&mut self, run: &SubagentRun) {
        if let Some(call) = &self.serving.call {
            call.runs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(run.id());
        }
    }
}

fn run_of(state: &mut StoreData, handle: &Resource<SubagentRun>) -> wasmtime::Result<SubagentRun> {
    Ok(state.table().get(handle)?.clone())
}

impl wit_subagents::Host for StoreData {
    async fn start(
        &mut self,
        provider: String,
        request: wit::StartRequest,
    ) -> wasmtime::Result<Result<Resource<SubagentRun>, wit::SubagentError>> {
        let Some(call) = &self.serving.call else {
            return Ok(Err(wit::SubagentError::Internal(
                "runs can only be started while executing a call".into(),
            )));
        };
        let mut request = match request_from_wit(request) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e.into())),
        };
        let size = request_size(&request);
        if let Err(hit) = call.gate.check_size(size) {
            return Ok(Err(wit::SubagentError::InvalidRequest(hit.to_string())));
        }
        // A run held by the call is the guest's data in host memory until it is disposed:
        // bounded in count and bytes, and a call past either ends with the limit named.
        let held = call.runs.lock().unwrap_or_else(|p| p.into_inner()).len();
        if held >= call.quota.max_runs_per_call {
            return Err(call
                .quota
                .hit(Limit::RunsPerCall {
                    max: call.quota.max_runs_per_call,
                })
                .into());
        }
        let charge = call.quota.charge(size + RUN_OVERHEAD)?;
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
            .insert(run.id().to_string(), (run.clone(), charge));
        Ok(Ok(self.table().push(run)?))
    }

    async fn provider(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Option<wit::ProviderDescriptor>> {
        Ok(self
            .serving
            .call
            .as_ref()
            .and_then(|c| c.subagents.descriptor(&name))
            .map(|d| wit::ProviderDescriptor::from(&*d)))
    }

    async fn list_providers(&mut self) -> wasmtime::Result<Vec<wit::ProviderDescriptor>> {
        Ok(self
            .serving
            .call
            .as_ref()
            .map(|c| c.subagents.list())
            .unwrap_or_default()
            .iter()
            .map(|d| wit::ProviderDescriptor::from(&**d))
            .collect())
    }
}

impl wit_subagents::HostRun for StoreData {
    async fn id(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<String> {
        Ok(run_of(self, &handle)?.id().to_string())
    }

    async fn started(
        &mut self,
        handle: Resource<SubagentRun>,
    ) -> wasmtime::Result<Result<(), wit::SubagentError>> {
        let run = run_of(self, &handle)?;
        Ok(run.started().await.map_err(SubagentError::into))
    }

    async fn result(
        &mut self,
        handle: Resource<SubagentRun>,
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
        handle: Resource<SubagentRun>,
        reason: Option<String>,
    ) -> wasmtime::Result<()> {
        run_of(self, &handle)?.cancel(reason);
        Ok(())
    }

    async fn dispose(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<()> {
        let run = run_of(self, &handle)?;
        run.dispose().await;
        self.forget(&run);
        Ok(())
    }

    async fn drop(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<()> {
        let run = self.table().delete(handle)?;
        run.dispose().await;
        self.forget(&run);
        Ok(())
    }
}
