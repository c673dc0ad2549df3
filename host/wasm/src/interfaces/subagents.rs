//! The `subagents` interface: a tool call, or a provider's run, starts runs on providers,
//! awaits, steers, cancels and disposes them, and keeps background runs for its agent; and it
//! lists, messages and interrupts the caller's child agents, and carries a child's report to its
//! parent (`SubagentService`'s continuable children). The host, not the guest, says who the
//! caller is; every run a call or run starts in the foreground is disposed when it ends, and
//! background runs are disposed with their owner.

use seam_core::sync::lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seam_core::subagent::{SubagentError, SubagentRun, SubagentService};
use seam_core::types::{ContentBlock, ParentRef, StartRequest};
use tokio_util::sync::CancellationToken;
use wasmtime::component::{Linker, Resource};

use crate::sandbox::gate::{blocks_size, request_size, RunGate};
use crate::sandbox::Limit;
use crate::store::context::{CallRuns, Quota, RUN_OVERHEAD};
use crate::store::view::{HasPlugin, PluginCtxView, PluginView};
use crate::versions::convert::request_from_wit;
use crate::versions::convert::SubagentFailure;
use crate::versions::latest::provider_world::seam::plugin::subagents as wit_subagents;
use crate::versions::latest::provider_world::seam::plugin::types as wit;

/// Adds `subagents` to a linker.
pub fn add_to_linker<T: PluginView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit_subagents::add_to_linker::<_, HasPlugin>(linker, T::plugin)
}

/// Who is asking, whether a tool call or a provider's run, and what its runs are charged to.
struct Caller {
    subagents: Arc<SubagentService>,
    /// The parent the started runs get.
    parent: ParentRef,
    /// Who owns background runs: the calling agent, or the run itself.
    owner: String,
    abort: CancellationToken,
    runs: Arc<Mutex<CallRuns>>,
    gate: RunGate,
    quota: Quota,
    /// The cap of each run started (a tool entry's `config.budget`).
    budget: Option<seam_core::spend::Budget>,
    /// What each run started may reach (a tool entry's `config.scope`).
    scope: Option<seam_core::scope::Scope>,
    /// Who answers the requests for approval below each run started (`config.approver`).
    approver: Option<seam_core::approval::Approver>,
}

impl Caller {
    fn runs(&self) -> std::sync::MutexGuard<'_, CallRuns> {
        lock(&self.runs)
    }

    /// Checks a guest's request and charges the plugin for the run it becomes. A call past the
    /// count or byte budget fails with the limit named (it traps the guest).
    fn admit(
        &self,
        request: wit::StartRequest,
    ) -> Result<(StartRequest, seam_core::budget::Charge), SubagentFailure> {
        let mut request = request_from_wit(request)?;
        let charge = self.afford(request_size(&request))?;
        // The host, not the guest, says who the caller is: a plugin cannot lie about its depth.
        request.parent = self.parent.clone();
        request.signal = Some(self.abort.child_token());
        // Nor about its budget: the entry's cap, carved from the caller's remainder.
        request.budget = self.budget;
        // Nor widen its scope: what it asks for is met with the entry's (and, as every scope
        // over the run, with its ancestors').
        request.scope = match (self.scope.as_ref(), request.scope.take()) {
            (Some(entry), Some(asked)) => Some(entry.narrower(&asked)),
            (entry, asked) => asked.or_else(|| entry.cloned()),
        };
        request.approver = self.approver;
        Ok((request, charge))
    }

    /// Checks that `size` bytes of a guest's request fit the output cap, and charges the plugin
    /// for one more run of that size. A run held by the caller is the guest's data in host
    /// memory until it is disposed: bounded in count and bytes, and a call past either fails
    /// with the limit named (it traps the guest).
    fn afford(&self, size: usize) -> Result<seam_core::budget::Charge, SubagentFailure> {
        self.check_size(size)?;
        if self.runs().len() >= self.quota.max_runs_per_call {
            return Err(self
                .quota
                .hit(Limit::RunsPerCall {
                    max: self.quota.max_runs_per_call,
                })
                .into());
        }
        Ok(self.quota.charge(size + RUN_OVERHEAD)?)
    }

    /// Checks that `size` bytes of a guest's message fit the output cap: a larger one is the
    /// guest's `invalid-request`.
    fn check_size(&self, size: usize) -> Result<(), wit::SubagentError> {
        self.gate
            .check_size(size)
            .map_err(|hit| wit::SubagentError::InvalidRequest(hit.to_string()))
    }

    /// Keeps a started run as one of the caller's foreground runs, and hands the guest a handle.
    fn keep(
        &self,
        table: &mut wasmtime::component::ResourceTable,
        run: SubagentRun,
        charge: seam_core::budget::Charge,
    ) -> wasmtime::Result<Resource<SubagentRun>> {
        self.runs()
            .insert(run.id().to_string(), (run.clone(), charge));
        Ok(table.push(run)?)
    }

    /// One of the caller's runs, foreground or background, by id.
    fn find(&self, id: &str) -> Option<SubagentRun> {
        if let Some((run, _)) = self.runs().get(id) {
            return Some(run.clone());
        }
        self.subagents
            .background_run(&self.owner, id)
            .map(|(run, _)| run)
    }
}

impl PluginCtxView<'_> {
    fn caller(&self) -> Option<Caller> {
        if let Some(call) = &self.serving.call {
            return Some(Caller {
                subagents: call.subagents.clone(),
                parent: call.caller.clone(),
                owner: call.caller.id.clone(),
                abort: call.abort.clone(),
                runs: call.runs.clone(),
                gate: call.gate.clone(),
                quota: call.quota.clone(),
                budget: call.budget,
                scope: call.scope.clone(),
                approver: call.approver,
            });
        }
        let env = self.serving.run.as_ref()?;
        // A provider's run delegates as the child it is running: one level deeper.
        let parent = &env.request.parent;
        Some(Caller {
            subagents: env.subagents.clone(),
            parent: ParentRef {
                id: env.ctx.id().to_string(),
                session_id: parent.session_id.clone(),
                working_directory: parent.working_directory.clone(),
                depth: parent.depth.saturating_add(1),
            },
            owner: env.ctx.id().to_string(),
            abort: env.ctx.token(),
            runs: env.runs.clone(),
            gate: env.gate.clone(),
            quota: env.quota.clone(),
            budget: None,
            scope: None,
            approver: None,
        })
    }

    /// A disposed run leaves its caller's table, and gives back what it cost. Returns whether
    /// it was one of the caller's foreground runs.
    fn forget(&mut self, run: &SubagentRun) -> bool {
        self.caller()
            .is_some_and(|c| c.runs().remove(run.id()).is_some())
    }

    fn is_foreground(&self, run: &SubagentRun) -> bool {
        self.caller()
            .is_some_and(|c| c.runs().contains_key(run.id()))
    }
}

fn no_caller() -> wit::SubagentError {
    wit::SubagentError::Internal(
        "runs can only be started while executing a call or serving a run".into(),
    )
}

fn run_of(
    state: &mut PluginCtxView,
    handle: &Resource<SubagentRun>,
) -> wasmtime::Result<SubagentRun> {
    Ok(state.table.get(handle)?.clone())
}

impl wit_subagents::Host for PluginCtxView<'_> {
    async fn start(
        &mut self,
        provider: String,
        request: wit::StartRequest,
    ) -> Result<Resource<SubagentRun>, SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        let (request, charge) = caller.admit(request)?;
        let run = caller.subagents.start_on_task(&provider, request)?;
        Ok(caller.keep(self.table, run, charge)?)
    }

    async fn provider(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Option<wit::ProviderDescriptor>> {
        Ok(self
            .caller()
            .and_then(|c| c.subagents.descriptor(&name))
            .map(|d| wit::ProviderDescriptor::from(&*d)))
    }

    async fn list_providers(&mut self) -> wasmtime::Result<Vec<wit::ProviderDescriptor>> {
        Ok(self
            .caller()
            .map(|c| c.subagents.list())
            .unwrap_or_default()
            .iter()
            .map(|d| wit::ProviderDescriptor::from(&**d))
            .collect())
    }

    async fn resume(
        &mut self,
        run_id: String,
        prompt: Vec<wit::ContentBlock>,
    ) -> Result<Resource<SubagentRun>, SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        let old = caller.find(&run_id).ok_or(SubagentError::NoRun(run_id))?;
        let prompt: Vec<ContentBlock> = prompt.into_iter().map(Into::into).collect();
        let charge = caller.afford(blocks_size(&prompt))?;
        let run = caller.subagents.resume_on_task(&old, prompt)?;
        Ok(caller.keep(self.table, run, charge)?)
    }

    async fn start_background(
        &mut self,
        provider: String,
        request: wit::StartRequest,
        label: String,
    ) -> Result<wit::RunInfo, SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        let (request, _charge) = caller.admit(request)?;
        // A label travels in every listing: keep it to what a label needs.
        let label: String = label.chars().take(200).collect();
        // The run belongs to the owner, which bounds how many it keeps (the charge above only
        // checked that the plugin could afford one more).
        let run =
            caller
                .subagents
                .start_background(&caller.owner, &provider, request, label.clone())?;
        Ok(run.info(&label).into())
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<wit::RunInfo>> {
        Ok(self
            .caller()
            .map(|c| c.subagents.background_runs(&c.owner))
            .unwrap_or_default()
            .into_iter()
            .map(Into::into)
            .collect())
    }

    async fn get(&mut self, id: String) -> Result<Resource<SubagentRun>, SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        let (run, _) = caller
            .subagents
            .background_run(&caller.owner, &id)
            .ok_or(SubagentError::NoRun(id))?;
        Ok(self.table.push(run)?)
    }

    async fn list_agents(
        &mut self,
        scope: wit::AgentScope,
        status: Option<wit::AgentStatus>,
    ) -> Result<Vec<wit::AgentInfo>, SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        let agents =
            caller
                .subagents
                .list_agents(&caller.parent, scope.into(), status.map(Into::into))?;
        Ok(agents.into_iter().map(Into::into).collect())
    }

    async fn send_to_agent(
        &mut self,
        id: String,
        prompt: Vec<wit::ContentBlock>,
    ) -> Result<wit::Delivery, SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        let prompt: Vec<ContentBlock> = prompt.into_iter().map(Into::into).collect();
        caller.check_size(blocks_size(&prompt))?;
        Ok(caller
            .subagents
            .send_to_agent(&caller.parent, &id, prompt)?
            .into())
    }

    async fn interrupt_agent(&mut self, id: String) -> Result<wit::AgentInfo, SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        Ok(caller
            .subagents
            .interrupt_agent(&caller.parent, &id)
            .await?
            .into())
    }

    async fn report(
        &mut self,
        mode: wit::ReportMode,
        content: Vec<wit::ContentBlock>,
    ) -> Result<(), SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        let content: Vec<ContentBlock> = content.into_iter().map(Into::into).collect();
        caller.check_size(blocks_size(&content))?;
        Ok(caller
            .subagents
            .report(&caller.parent, mode.into(), content)?)
    }

    async fn pending_approvals(
        &mut self,
        timeout_ms: u64,
    ) -> wasmtime::Result<Vec<wit::ApprovalRequest>> {
        Ok(self.pending_approvals_of(timeout_ms).await)
    }

    async fn answer_approval(
        &mut self,
        id: Option<String>,
        allow: bool,
        always: bool,
        reason: Option<String>,
    ) -> Result<String, SubagentFailure> {
        let caller = self.caller().ok_or_else(no_caller)?;
        let answer = if allow {
            seam_core::approval::Answer::allow("parent", always)
        } else {
            seam_core::approval::Answer::deny("parent", reason)
        };
        let answered = caller
            .subagents
            .approvals()
            .answer_for(&caller.parent.id, id.as_deref(), answer)
            .map_err(|e| match e {
                seam_core::approvals::ApprovalError::NotForYou { .. }
                | seam_core::approvals::ApprovalError::Unknown(_) => {
                    SubagentError::NoRun(e.to_string())
                }
                e => SubagentError::InvalidState(e.to_string()),
            })?;
        Ok(answered.id)
    }
}

/// The longest `pending-approvals` waits.
const MAX_APPROVAL_WAIT_MS: u64 = 600_000;

impl PluginCtxView<'_> {
    async fn pending_approvals_of(&mut self, timeout_ms: u64) -> Vec<wit::ApprovalRequest> {
        let Some(caller) = self.caller() else {
            return Vec::new();
        };
        let (approvals, agent) = (
            caller.subagents.approvals().clone(),
            caller.parent.id.clone(),
        );
        let wait = Duration::from_millis(timeout_ms.min(MAX_APPROVAL_WAIT_MS));
        approvals
            .pending_for(&agent, wait)
            .await
            .into_iter()
            .map(|r| wit::ApprovalRequest {
                what: r.subject.describe(),
                subject: serde_json::to_string(&r.subject).unwrap_or_default(),
                id: r.id,
                path: r.path,
            })
            .collect()
    }
}

impl wit_subagents::HostRun for PluginCtxView<'_> {
    async fn id(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<String> {
        Ok(run_of(self, &handle)?.id().to_string())
    }

    async fn started(&mut self, handle: Resource<SubagentRun>) -> Result<(), SubagentFailure> {
        let run = run_of(self, &handle)?;
        Ok(run.started().await?)
    }

    async fn result(
        &mut self,
        handle: Resource<SubagentRun>,
    ) -> Result<wit::SubagentResult, SubagentFailure> {
        let run = run_of(self, &handle)?;
        Ok(run.result().await?.into())
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

    async fn send_message(
        &mut self,
        handle: Resource<SubagentRun>,
        prompt: Vec<wit::ContentBlock>,
    ) -> Result<(), SubagentFailure> {
        let run = run_of(self, &handle)?;
        let prompt: Vec<ContentBlock> = prompt.into_iter().map(Into::into).collect();
        if let Some(caller) = self.caller() {
            caller.check_size(blocks_size(&prompt))?;
        }
        Ok(run.send_message(prompt)?)
    }

    async fn progress(
        &mut self,
        handle: Resource<SubagentRun>,
    ) -> wasmtime::Result<Vec<wit::ContentBlock>> {
        let run = run_of(self, &handle)?;
        Ok(run.progress().into_iter().map(Into::into).collect())
    }

    async fn wait_result(
        &mut self,
        handle: Resource<SubagentRun>,
        timeout_ms: u64,
    ) -> wasmtime::Result<Option<Result<wit::SubagentResult, wit::SubagentError>>> {
        let run = run_of(self, &handle)?;
        let waited = tokio::time::timeout(Duration::from_millis(timeout_ms), run.result()).await;
        Ok(waited.ok().map(|r| {
            r.map(wit::SubagentResult::from)
                .map_err(SubagentError::into)
        }))
    }

    async fn info(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<wit::RunInfo> {
        let run = run_of(self, &handle)?;
        let label = self
            .caller()
            .and_then(|c| c.subagents.background_run(&c.owner, run.id()))
            .map(|(_, label)| label)
            .unwrap_or_default();
        Ok(run.info(&label).into())
    }

    async fn drop(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<()> {
        let run = self.table.delete(handle)?;
        // Dropping a handle on a foreground run disposes it; a background run belongs to its
        // owner, not to the handle.
        if self.is_foreground(&run) {
            run.dispose().await;
            self.forget(&run);
        }
        Ok(())
    }
}
