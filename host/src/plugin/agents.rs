//! The `agents` host interface: an in-process provider's run creates its child agent here. The
//! host owns the child; it belongs to the run and goes when the run's store goes.

use std::sync::Arc;

use wasmtime::component::Resource;

use crate::agent::{Agent, AgentError, AgentRegistry, AgentSpec, TurnOutcome};
use crate::bindings::provider::seam::plugin::agents::{
    AgentError as WitAgentError, ChildOptions, ChildOutcome, Host as AgentsHost, HostChild, Seed,
};
use crate::bindings::provider::seam::plugin::types as wit;
use crate::sandbox::{PluginState, Role};
use crate::subagent::RunContext;
use crate::types::{ContentBlock, StartRequest, ToolFilter};

/// What a provider store needs to create its run's child.
pub(crate) struct RunEnv {
    pub(crate) ctx: RunContext,
    pub(crate) request: StartRequest,
    pub(crate) agents: Arc<AgentRegistry>,
}

/// The run's child, held in the run store's resource table. Dropping it (with the store, on
/// dispose or enforced cancel) tears the child down.
pub struct ChildResource {
    agent: Arc<Agent>,
    agents: Arc<AgentRegistry>,
    ctx: RunContext,
    pending: Vec<Vec<ContentBlock>>,
    last: Option<TurnOutcome>,
}

impl Drop for ChildResource {
    fn drop(&mut self) {
        self.ctx
            .record_child_session(self.agent.session().completed_prefix());
        self.agents.dispose_now(self.agent.id());
    }
}

fn outcome_to_wit(o: &TurnOutcome) -> ChildOutcome {
    ChildOutcome {
        output: o.output.iter().cloned().map(Into::into).collect(),
        structured: o.structured.as_ref().map(|v| v.to_string()),
        stop_reason: o.stop_reason.clone().into(),
    }
}

fn error_to_wit(e: AgentError) -> WitAgentError {
    match e {
        AgentError::DepthExceeded { attempted, max } => {
            WitAgentError::DepthExceeded(wit::DepthInfo { attempted, max })
        }
        AgentError::Disposed => WitAgentError::Aborted,
        other => WitAgentError::Invalid(other.to_string()),
    }
}

fn create(env: &RunEnv, options: ChildOptions) -> Result<Arc<Agent>, AgentError> {
    let request = &env.request;
    let parent = env.agents.get(&request.parent.id);
    let depth = request.parent.depth.saturating_add(1);
    if let Some(max) = request.max_depth {
        let max = u32::try_from(max).unwrap_or(0);
        if depth > max {
            return Err(AgentError::DepthExceeded {
                attempted: depth,
                max,
            });
        }
    }
    let defaults = env.agents.defaults();
    let agent_options = options.agent_options.unwrap_or(wit::AgentOptions {
        model: None,
        system_prompt: None,
    });
    let model = agent_options
        .model
        .or_else(|| parent.as_ref().map(|p| p.spec().model.clone()))
        .unwrap_or(defaults.model.clone());
    let output_schema =
        match options.output_schema {
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                AgentError::Invalid(format!("output-schema is not valid JSON: {e}"))
            })?),
            None => None,
        };
    let seed = match (env.ctx.resume_seed(), options.seed) {
        (Some(resumed), _) => resumed,
        (None, Seed::ParentCompletedTurns) => parent
            .as_ref()
            .map(|p| p.session().completed_prefix())
            .unwrap_or_default(),
        (None, Seed::None) => Vec::new(),
    };
    let spec = AgentSpec {
        id: Some(env.ctx.id().to_string()),
        model,
        system_prompt: agent_options.system_prompt,
        persona: options.persona.or(defaults.persona.clone()),
        depth,
        working_directory: request.parent.working_directory.clone(),
        parent: Some(request.parent.id.clone()),
        parent_session: Some(request.parent.session_id.clone()),
        tool_filter: options.tool_filter.map(|f| ToolFilter {
            allow: f.allow,
            deny: f.deny,
        }),
        output_schema,
        max_turns: defaults.max_turns,
        seed,
    };
    env.agents.create(spec, Some(env.ctx.token()))
}

fn child_of(
    state: &mut PluginState,
    handle: &Resource<ChildResource>,
) -> wasmtime::Result<Arc<Agent>> {
    Ok(state.table().get(handle)?.agent.clone())
}

impl AgentsHost for PluginState {
    async fn create_child(
        &mut self,
        options: ChildOptions,
    ) -> wasmtime::Result<Result<Resource<ChildResource>, WitAgentError>> {
        let Role::Run(env) = &self.role else {
            return Ok(Err(WitAgentError::Invalid(
                "a child can only be created during a run".into(),
            )));
        };
        if env.ctx.is_cancelled() {
            return Ok(Err(WitAgentError::Aborted));
        }
        if env.ctx.has_child() {
            return Ok(Err(WitAgentError::Busy));
        }
        let agent = match create(env, options) {
            Ok(a) => a,
            Err(e) => return Ok(Err(error_to_wit(e))),
        };
        // Published in the agent registry: this is the run's readiness.
        env.ctx.set_child(&agent);
        env.ctx.ready();
        let resource = ChildResource {
            agent,
            agents: env.agents.clone(),
            ctx: env.ctx.clone(),
            pending: Vec::new(),
            last: None,
        };
        Ok(Ok(self.table().push(resource)?))
    }
}

impl HostChild for PluginState {
    async fn id(&mut self, handle: Resource<ChildResource>) -> wasmtime::Result<String> {
        Ok(child_of(self, &handle)?.id().to_string())
    }

    async fn send(
        &mut self,
        handle: Resource<ChildResource>,
        prompt: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<Result<(), WitAgentError>> {
        let child = self.table().get_mut(&handle)?;
        if child.agent.is_aborted() {
            return Ok(Err(WitAgentError::Aborted));
        }
        child
            .pending
            .push(prompt.into_iter().map(ContentBlock::from).collect());
        Ok(Ok(()))
    }

    async fn wait_idle(
        &mut self,
        handle: Resource<ChildResource>,
    ) -> wasmtime::Result<Result<ChildOutcome, WitAgentError>> {
        let (agent, pending) = {
            let child = self.table().get_mut(&handle)?;
            (child.agent.clone(), std::mem::take(&mut child.pending))
        };
        let mut last = None;
        for prompt in pending {
            last = Some(agent.run_turn(prompt).await);
        }
        let child = self.table().get_mut(&handle)?;
        if last.is_some() {
            child.last = last;
        }
        Ok(match &child.last {
            Some(o) => Ok(outcome_to_wit(o)),
            None => Err(WitAgentError::Idle),
        })
    }

    async fn steer(
        &mut self,
        handle: Resource<ChildResource>,
        message: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<()> {
        child_of(self, &handle)?.steer(message.into_iter().map(ContentBlock::from).collect());
        Ok(())
    }

    async fn dispose(&mut self, handle: Resource<ChildResource>) -> wasmtime::Result<()> {
        let agent = child_of(self, &handle)?;
        let Role::Run(env) = &self.role else {
            return Ok(());
        };
        env.ctx
            .record_child_session(agent.session().completed_prefix());
        env.agents.dispose(agent.id()).await;
        Ok(())
    }

    async fn drop(&mut self, handle: Resource<ChildResource>) -> wasmtime::Result<()> {
        // ChildResource's Drop records the session and tears the agent down.
        self.table().delete(handle)?;
        Ok(())
    }
}
