//! The Agent Card `seam a2a` serves at `/.well-known/agent-card.json`.

use seam_core::types::ProviderDescriptor;

use crate::wire::{AgentCapabilities, AgentCard, AgentInterface, AgentSkill, JSONRPC, VERSION};

use super::settings::A2aSettings;

/// The description when neither `[a2a] description` nor a system prompt gives one.
const DEFAULT_DESCRIPTION: &str = "A Seam agent: a top-level agent that delegates to subagents.";

/// The card of the agent served at `url`: `settings` name it, `system_prompt` (the top-level
/// agent's) describes it by default, and `skills` are the providers `[a2a] skills` lists (their
/// descriptors, in that order).
pub fn card(
    settings: &A2aSettings,
    url: &str,
    system_prompt: Option<&str>,
    skills: &[ProviderDescriptor],
) -> AgentCard {
    let description = settings.description.clone().unwrap_or_else(|| {
        system_prompt
            .and_then(|p| p.lines().map(str::trim).find(|l| !l.is_empty()))
            .map(str::to_string)
            .unwrap_or_else(|| DEFAULT_DESCRIPTION.to_string())
    });
    let mut all = vec![AgentSkill {
        id: "agent".into(),
        name: "agent".into(),
        description: format!("Talk to the top-level agent: {description}"),
        tags: vec!["agent".into()],
        examples: None,
        input_modes: None,
        output_modes: None,
        security_requirements: None,
    }];
    all.extend(skills.iter().map(skill_of));
    let mut interface = AgentInterface::new(url, JSONRPC);
    interface.protocol_version = VERSION.to_string();
    AgentCard {
        name: settings.name.clone().unwrap_or_else(|| "seam".into()),
        description,
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: vec![interface],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            extensions: None,
            extended_agent_card: None,
        },
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: all,
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: None,
        security_requirements: None,
        signatures: None,
    }
}

/// A provider as a skill: descriptors have no prose, so the description says what the
/// descriptor declares.
fn skill_of(d: &ProviderDescriptor) -> AgentSkill {
    let mut honours = Vec::new();
    let c = &d.capabilities;
    for (on, what) in [
        (c.output_schema, "output schemas"),
        (c.depth_limit, "depth limits"),
        (c.tool_filter, "tool filters"),
        (c.persona, "personas"),
        (d.features.steering, "steering"),
        (d.features.resume, "resume"),
    ] {
        if on {
            honours.push(what);
        }
    }
    let mut description = format!("Seam subagent provider `{}`", d.name);
    if d.inherits_parent_context {
        description.push_str(", whose child sees the parent's conversation");
    }
    if !honours.is_empty() {
        description.push_str(&format!("; honours {}", honours.join(", ")));
    }
    description.push('.');
    AgentSkill {
        id: d.name.clone(),
        name: d.name.clone(),
        description,
        tags: vec!["provider".into()],
        examples: None,
        input_modes: None,
        output_modes: None,
        security_requirements: None,
    }
}
