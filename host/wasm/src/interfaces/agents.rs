//! The `agents` interface: an in-process provider's run creates its child agent here. The host
//! owns the child ([`RunChild`]); it belongs to the run and goes when the run's store goes.

use std::sync::Arc;

use seam_agent::agent::{Agent, AgentError, AgentSpec, RunChild, RunSessionSeed, TurnOutcome};
use seam_core::types::{ContentBlock, ToolFilter};
use wasmtime::component::{Linker, Resource};

use crate::sandbox::gate::blocks_size;
use crate::sandbox::Limit;
use crate::store::context::{RunEnv, MESSAGE_OVERHEAD};
use crate::store::view::{HasPlugin, PluginCtxView, PluginView};
use crate::versions::convert::AgentFailure;
use crate::versions::latest::provider_world::seam::plugin::agents::{
    self as wit_agents, AgentError as WitAgentError, ChildOptions, ChildOutcome, Seed,
};
use crate::versions::latest::provider_world::seam::plugin::types as wit;

/// Adds `agents` to a linker.
pub fn add_to_linker<T: PluginView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit_agents::add_to_linker::<_, HasPlugin>(linker, T::plugin)
}

fn outcome_to_wit(o: &TurnOutcome) -> ChildOutcome {
    ChildOutcome {
        output: o.output.iter().cloned().map(Into::into).collect(),
        structured: o.structured.as_ref().map(|v| v.to_string()),
        stop_reason: o.stop_reason.clone().into(),
        diagnostic: o.diagnostic.clone(),
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
    // A resumed child continues its session (from the store, whichever process wrote it).
    let (seed, session_id) = match (env.ctx.resume_seed(), options.seed) {
        (Some(resumed), _) => resumed.start_from(env.agents.store().as_ref())?,
        (None, Seed::ParentCompletedTurns) => (
            parent
                .as_ref()
                .map(|p| p.session().completed_prefix())
                .unwrap_or_default(),
            None,
        ),
        (None, Seed::None) => (Vec::new(), None),
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
        session_id,
        // A run's child spends from its run's account.
        budget: None,
    };
    env.agents.create(spec, Some(env.ctx.token()))
}

/// What a queued message costs the plugin.
fn message_bytes(blocks: &[ContentBlock]) -> usize {
    blocks_size(blocks) + MESSAGE_OVERHEAD * blocks.len().max(1)
}

fn child_of(
    state: &mut PluginCtxView,
    handle: &Resource<RunChild>,
) -> wasmtime::Result<Arc<Agent>> {
    Ok(state.table.get(handle)?.agent().clone())
}

impl wit_agents::Host for PluginCtxView<'_> {
    fn convert_agent_error(&mut self, err: AgentFailure) -> wasmtime::Result<WitAgentError> {
        err.guest()
    }

    async fn create_child(
        &mut self,
        options: ChildOptions,
    ) -> Result<Resource<RunChild>, AgentFailure> {
        let Some(env) = &self.serving.run else {
            return Err(
                WitAgentError::Invalid("a child can only be created during a run".into()).into(),
            );
        };
        if env.ctx.is_cancelled() {
            return Err(WitAgentError::Aborted.into());
        }
        if env.ctx.has_child() {
            return Err(WitAgentError::Busy.into());
        }
        let agent = create(env, options).map_err(error_to_wit)?;
        // Published in the agent registry: this is the run's readiness.
        let child = RunChild::new(agent, env.agents.clone(), env.ctx.clone());
        env.ctx.ready();
        Ok(self.table.push(child)?)
    }
}

impl wit_agents::HostChild for PluginCtxView<'_> {
    async fn id(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<String> {
        Ok(child_of(self, &handle)?.id().to_string())
    }

    async fn send(
        &mut self,
        handle: Resource<RunChild>,
        prompt: Vec<wit::ContentBlock>,
    ) -> Result<(), AgentFailure> {
        let Some(quota) = self.serving.run.as_ref().map(|env| env.quota.clone()) else {
            return Err(WitAgentError::Invalid("no run".into()).into());
        };
        let prompt: Vec<ContentBlock> = prompt.into_iter().map(ContentBlock::from).collect();
        let child = self.table.get_mut(&handle)?;
        if child.agent().is_aborted() {
            return Err(WitAgentError::Aborted.into());
        }
        // Queued prompts are the guest's data in host memory: bounded in count and bytes, and
        // a plugin past either ends its run with the limit named.
        if child.pending_len() >= quota.max_queued_messages {
            return Err(quota
                .hit(Limit::QueuedMessages {
                    max: quota.max_queued_messages,
                })
                .into());
        }
        let charge = quota.charge(message_bytes(&prompt))?;
        child.hold(charge);
        child.queue(prompt);
        Ok(())
    }

    async fn wait_idle(
        &mut self,
        handle: Resource<RunChild>,
    ) -> Result<ChildOutcome, AgentFailure> {
        let (agent, pending) = {
            let child = self.table.get_mut(&handle)?;
            (child.agent().clone(), child.take_pending())
        };
        let mut last = None;
        for prompt in pending {
            last = Some(agent.run_turn(prompt).await);
        }
        let child = self.table.get_mut(&handle)?;
        if let Some(outcome) = last {
            child.set_last(outcome);
        }
        match child.last() {
            Some(o) => Ok(outcome_to_wit(o)),
            None => Err(WitAgentError::Idle.into()),
        }
    }

    async fn steer(
        &mut self,
        handle: Resource<RunChild>,
        message: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<()> {
        let Some(quota) = self.serving.run.as_ref().map(|env| env.quota.clone()) else {
            return Ok(());
        };
        let message: Vec<ContentBlock> = message.into_iter().map(ContentBlock::from).collect();
        let child = self.table.get_mut(&handle)?;
        if child.agent().queued_steering() >= quota.max_queued_messages {
            return Err(quota
                .hit(Limit::QueuedMessages {
                    max: quota.max_queued_messages,
                })
                .into());
        }
        let charge = quota.charge(message_bytes(&message))?;
        child.hold(charge);
        child.agent().steer(message);
        Ok(())
    }

    async fn dispose(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<()> {
        let agent = child_of(self, &handle)?;
        if let Some(env) = &self.serving.run {
            let session = agent.session();
            env.ctx.record_child_session(
                session.header.session_id.clone(),
                session.completed_prefix(),
            );
            env.agents.dispose(agent.id()).await;
        }
        Ok(())
    }

    async fn drop(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<()> {
        // RunChild's Drop records the session and tears the agent down.
        self.table.delete(handle)?;
        Ok(())
    }
}
