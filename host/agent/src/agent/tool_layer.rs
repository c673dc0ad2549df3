//! An agent's tool layer: the host's mounted tools seen through the agent's tool filter and the
//! `tools` of every scope over it, plus the `structured_output` capture tool when an output
//! schema was asked for.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::AgentError;
use crate::model::{ToolSpec, STRUCTURED_OUTPUT_TOOL};
use seam_core::sync::lock;
use seam_core::tool::ToolRegistry;
use seam_core::types::{ContentBlock, ParentRef, ToolFilter, ToolResult};

/// The forced capture tool of a child asked for structured output.
struct Capture {
    schema: Value,
    validator: jsonschema::Validator,
    captured: Mutex<Option<Value>>,
}

/// What an agent may see and call.
pub struct ToolLayer {
    tools: Arc<ToolRegistry>,
    filter: Option<ToolFilter>,
    /// The scopes over the agent that limit its tools (`tools` set), nearest first, each with
    /// who set it.
    scopes: seam_core::scope::ScopeChain,
    capture: Option<Capture>,
}

/// What running one call decided.
pub(crate) enum CallOutcome {
    /// An ordinary tool result.
    Result(ToolResult),
    /// A valid structured answer was captured: the turn ends.
    Captured(ToolResult),
}

impl ToolLayer {
    /// A layer over `tools`. Every name in `filter` must be a mounted tool (or the capture tool).
    pub fn new(
        tools: Arc<ToolRegistry>,
        filter: Option<ToolFilter>,
        output_schema: Option<Value>,
    ) -> Result<Self, AgentError> {
        if let Some(f) = &filter {
            let known: Vec<String> = tools.list().into_iter().map(|t| t.name).collect();
            for name in f.allow.iter().chain(f.deny.iter()).flatten() {
                if name != STRUCTURED_OUTPUT_TOOL && !known.contains(name) {
                    return Err(AgentError::Invalid(format!(
                        "tool-filter names `{name}`, which is not a mounted tool (mounted: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    )));
                }
            }
        }
        let capture = match output_schema {
            Some(schema) => {
                let validator = jsonschema::validator_for(&schema).map_err(|e| {
                    AgentError::Invalid(format!("output-schema does not compile: {e}"))
                })?;
                Some(Capture {
                    schema,
                    validator,
                    captured: Mutex::new(None),
                })
            }
            None => None,
        };
        Ok(Self {
            tools,
            filter,
            scopes: Vec::new(),
            capture,
        })
    }

    /// This layer under the scopes of `chain` (its agent's account's, nearest first): a tool
    /// that a scope's `tools` leaves out is neither offered nor run.
    pub fn under_scopes(mut self, chain: seam_core::scope::ScopeChain) -> Self {
        self.scopes = chain
            .into_iter()
            .filter(|(_, s)| s.tools.is_some())
            .collect();
        self
    }

    fn visible(&self, name: &str) -> bool {
        let filtered = match &self.filter {
            None => true,
            Some(f) => {
                let allowed = f.allow.as_ref().is_none_or(|a| a.iter().any(|n| n == name));
                let denied = f.deny.as_ref().is_some_and(|d| d.iter().any(|n| n == name));
                allowed && !denied
            }
        };
        filtered && self.out_of_scope(name).is_none()
    }

    /// Who set the nearest scope whose `tools` leaves `name` out, if one does.
    fn out_of_scope(&self, name: &str) -> Option<&str> {
        self.scopes
            .iter()
            .find(|(_, scope)| !scope.allows_tool(name))
            .map(|(holder, _)| holder.as_str())
    }

    /// The names of the mounted tools this agent may call (not its capture tool): the most a
    /// child it delegates to may see.
    pub fn visible_names(&self) -> Vec<String> {
        self.tools
            .list()
            .into_iter()
            .map(|t| t.name)
            .filter(|name| self.visible(name))
            .collect()
    }

    /// Whether a call of the tool `name` needs a yes first, and the plugin that provides it
    /// (`None`: not a tool this agent may call).
    pub fn policy(&self, name: &str) -> Option<(seam_core::approval::Policy, String)> {
        if !self.visible(name) {
            return None;
        }
        self.tools.get(name).map(|t| (t.approve, t.plugin))
    }

    /// Whether the tool `name` is served outside Wasm (an MCP server's), whose results a
    /// recording keeps and a replay answers from.
    pub fn served_outside(&self, name: &str) -> bool {
        self.tools.get(name).is_some_and(|t| t.served_outside())
    }

    /// The tools offered to the model.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .tools
            .list()
            .into_iter()
            .filter(|t| self.visible(&t.name))
            .map(|t| ToolSpec {
                name: t.name,
                description: t.description,
                parameters: t.parameters,
            })
            .collect();
        if let Some(c) = &self.capture {
            specs.push(ToolSpec {
                name: STRUCTURED_OUTPUT_TOOL.into(),
                description: "Return your final answer as structured data matching the schema. \
                              Call this exactly once, when you are done; it ends your turn."
                    .into(),
                parameters: c.schema.clone(),
            });
        }
        specs
    }

    /// Whether a structured answer is required and not yet captured.
    pub fn capture_pending(&self) -> bool {
        self.capture
            .as_ref()
            .is_some_and(|c| lock(&c.captured).is_none())
    }

    /// The captured structured answer.
    pub fn captured(&self) -> Option<Value> {
        self.capture
            .as_ref()
            .and_then(|c| lock(&c.captured).clone())
    }

    /// Handles a call to the capture tool without running anything else.
    pub(crate) fn try_capture(&self, name: &str, arguments: &str) -> Option<CallOutcome> {
        if name != STRUCTURED_OUTPUT_TOOL {
            return None;
        }
        let Some(c) = &self.capture else {
            return Some(CallOutcome::Result(ToolResult::error(format!(
                "tool `{name}` is not available: no output schema was requested"
            ))));
        };
        let mut captured = lock(&c.captured);
        if captured.is_some() {
            return Some(CallOutcome::Result(ToolResult::error(
                "the structured answer was already captured",
            )));
        }
        let value: Value = match serde_json::from_str(arguments) {
            Ok(v) => v,
            Err(e) => {
                return Some(CallOutcome::Result(ToolResult::error(format!(
                    "arguments are not valid JSON: {e}; call structured_output again"
                ))))
            }
        };
        let problems = seam_core::subagent::structured::schema_problems(&c.validator, &value);
        if !problems.is_empty() {
            return Some(CallOutcome::Result(ToolResult::error(format!(
                "arguments do not match the schema: {}; fix them and call structured_output again",
                problems.join("; ")
            ))));
        }
        *captured = Some(value);
        Some(CallOutcome::Captured(ToolResult {
            content: vec![ContentBlock::text("structured answer captured")],
            is_error: false,
        }))
    }

    /// Runs a host tool, refusing hidden ones.
    pub(crate) async fn run(
        &self,
        name: &str,
        caller: ParentRef,
        arguments: String,
        abort: CancellationToken,
    ) -> ToolResult {
        if let Some(holder) = self.out_of_scope(name) {
            tracing::info!(
                tool = name,
                scope = holder,
                "a call of tool `{name}` was refused: the scope of `{holder}` leaves it out"
            );
            return ToolResult::error(scope_refusal(name, holder));
        }
        if !self.visible(name) {
            return ToolResult::error(format!("tool `{name}` is not available to this agent"));
        }
        match self.tools.execute(name, caller, arguments, abort).await {
            Ok(r) => r,
            Err(e) => ToolResult::error(e.to_string()),
        }
    }
}

/// The words of a call refused by a scope: what was refused, whose scope removed it, and the
/// config line that would allow it.
fn scope_refusal(name: &str, holder: &str) -> String {
    format!(
        "refused: tool `{name}` is outside the scope of `{holder}`, which removed it for this \
         subtree; to allow it, add \"{name}\" (or a pattern matching it) to `tools` in the \
         `config.scope` of the tool entry that delegated to `{holder}`"
    )
}
