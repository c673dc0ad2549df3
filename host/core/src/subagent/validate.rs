//! Checks made before any instance exists: descriptors at registration, requests at start.

use serde_json::Value;

use super::SubagentError;
use crate::types::{ProviderDescriptor, StartRequest};

/// Longest provider name accepted.
pub const MAX_PROVIDER_NAME: usize = 64;
/// Largest `max-depth` accepted; deeper trees are surely a mistake.
pub const MAX_DEPTH_LIMIT: i64 = 64;
/// Largest prompt accepted, in bytes.
pub const MAX_PROMPT_BYTES: usize = 1 << 20;

/// Refuses a descriptor that could not be used safely as a registry key or in messages.
pub fn descriptor(plugin: &str, d: &ProviderDescriptor) -> Result<(), SubagentError> {
    let bad = |reason: String| SubagentError::InvalidDescriptor {
        plugin: plugin.to_string(),
        reason,
    };
    if d.name.is_empty() {
        return Err(bad("provider name is empty".into()));
    }
    if d.name.len() > MAX_PROVIDER_NAME {
        return Err(bad(format!(
            "provider name is {} bytes long; the limit is {MAX_PROVIDER_NAME}",
            d.name.len()
        )));
    }
    if !d
        .name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(bad(format!(
            "provider name `{}` may only contain ASCII letters, digits, `-`, `_` and `.`",
            d.name.escape_debug()
        )));
    }
    Ok(())
}

/// Checks each requested start-time feature against the provider, in the contract's order:
/// output-schema, max-depth (depth-limit), tool-filter, persona. The first missing one wins.
pub fn capabilities(d: &ProviderDescriptor, r: &StartRequest) -> Result<(), SubagentError> {
    let caps = &d.capabilities;
    let checks = [
        (
            r.output_schema.is_some(),
            caps.output_schema,
            "output-schema",
        ),
        (r.max_depth.is_some(), caps.depth_limit, "depth-limit"),
        (r.tool_filter.is_some(), caps.tool_filter, "tool-filter"),
        (r.persona.is_some(), caps.persona, "persona"),
    ];
    for (requested, supported, name) in checks {
        if requested && !supported {
            return Err(SubagentError::UnsupportedCapability {
                provider: d.name.clone(),
                capability: name.into(),
            });
        }
    }
    Ok(())
}

/// Refuses malformed requests. Runs after the capability checks.
pub fn request(r: &StartRequest) -> Result<(), SubagentError> {
    let invalid = |m: String| Err(SubagentError::InvalidRequest(m));
    if r.prompt.iter().all(|b| b.as_text().trim().is_empty()) {
        return invalid("prompt is empty".into());
    }
    let size: usize = r.prompt.iter().map(|b| b.as_text().len()).sum();
    if size > MAX_PROMPT_BYTES {
        return invalid(format!(
            "prompt is {size} bytes; the limit is {MAX_PROMPT_BYTES}"
        ));
    }
    for block in &r.prompt {
        if let crate::types::ContentBlock::Json(text) = block {
            if serde_json::from_str::<Value>(text).is_err() {
                return invalid("a json prompt block is not valid JSON".into());
            }
        }
    }
    if let Some(max) = r.max_depth {
        if max < 0 {
            return invalid(format!("max-depth must be 0 or more, got {max}"));
        }
        if max > MAX_DEPTH_LIMIT {
            return invalid(format!(
                "max-depth {max} is absurd; the limit is {MAX_DEPTH_LIMIT}"
            ));
        }
    }
    if let Some(filter) = &r.tool_filter {
        if filter.allow.is_none() && filter.deny.is_none() {
            return invalid("tool-filter needs `allow` or `deny`".into());
        }
        let names = filter.allow.iter().chain(filter.deny.iter()).flatten();
        for name in names {
            if name.trim().is_empty() {
                return invalid("tool-filter contains an empty tool name".into());
            }
        }
    }
    if let Some(persona) = &r.persona {
        if persona.trim().is_empty() {
            return invalid("persona is empty".into());
        }
    }
    if let Some(schema) = &r.output_schema {
        output_schema(schema).map_err(SubagentError::InvalidRequest)?;
    }
    Ok(())
}

/// Keywords of the supported JSON Schema subset; anything else (`$ref`, `oneOf`, ...) is refused
/// rather than silently ignored.
const SCHEMA_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "description",
    "title",
    "default",
    "additionalProperties",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "$schema",
];

const SCHEMA_TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Checks that `schema` is an object-rooted schema within the supported subset.
pub fn output_schema(schema: &Value) -> Result<(), String> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        _ => return Err("output-schema must be an object schema (`\"type\": \"object\"`)".into()),
    }
    check_schema(schema, "output-schema")
}

fn check_schema(schema: &Value, path: &str) -> Result<(), String> {
    let obj = schema
        .as_object()
        .ok_or_else(|| format!("{path}: a schema must be a JSON object"))?;
    for (key, value) in obj {
        if !SCHEMA_KEYWORDS.contains(&key.as_str()) {
            return Err(format!(
                "{path}: keyword `{key}` is outside the supported schema subset"
            ));
        }
        match key.as_str() {
            "type" => {
                let ok = match value {
                    Value::String(t) => SCHEMA_TYPES.contains(&t.as_str()),
                    Value::Array(ts) => ts
                        .iter()
                        .all(|t| t.as_str().is_some_and(|t| SCHEMA_TYPES.contains(&t))),
                    _ => false,
                };
                if !ok {
                    return Err(format!("{path}: `type` {value} is not a JSON Schema type"));
                }
            }
            "properties" => {
                let props = value
                    .as_object()
                    .ok_or_else(|| format!("{path}: `properties` must be an object"))?;
                for (name, sub) in props {
                    check_schema(sub, &format!("{path}.properties.{name}"))?;
                }
            }
            "items" => check_schema(value, &format!("{path}.items"))?,
            "additionalProperties" if !value.is_boolean() => {
                check_schema(value, &format!("{path}.additionalProperties"))?
            }
            "required" => {
                let ok = value
                    .as_array()
                    .is_some_and(|r| r.iter().all(Value::is_string));
                if !ok {
                    return Err(format!("{path}: `required` must be a list of names"));
                }
            }
            _ => {}
        }
    }
    Ok(())
}
