//! Checks made before any instance exists: descriptors at registration, requests at start.

use serde_json::Value;
use thiserror::Error;

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
        output_schema(schema).map_err(|e| SubagentError::InvalidRequest(e.to_string()))?;
    }
    Ok(())
}

/// Keywords of the supported JSON Schema subset; anything else (`$ref`, `oneOf`, ...) is refused
/// rather than silently ignored.
pub const SCHEMA_KEYWORDS: &[&str] = &[
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

/// Why an output schema is refused. Each names where in the schema the problem is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SchemaError {
    /// The root is not `"type": "object"`.
    #[error("output-schema must be an object schema (`\"type\": \"object\"`)")]
    NotObjectRooted,
    /// A (sub)schema is not a JSON object.
    #[error("{path}: a schema must be a JSON object")]
    NotAnObject {
        /// Where, e.g. `output-schema.properties.a`.
        path: String,
    },
    /// A keyword outside [`SCHEMA_KEYWORDS`].
    #[error("{path}: keyword `{keyword}` is outside the supported schema subset")]
    UnsupportedKeyword {
        /// Where.
        path: String,
        /// The keyword.
        keyword: String,
    },
    /// `type` names no JSON Schema type.
    #[error("{path}: `type` {value} is not a JSON Schema type")]
    BadType {
        /// Where.
        path: String,
        /// The value given, as JSON.
        value: String,
    },
    /// `properties` is not an object.
    #[error("{path}: `properties` must be an object")]
    PropertiesNotAnObject {
        /// Where.
        path: String,
    },
    /// `required` is not a list of names.
    #[error("{path}: `required` must be a list of names")]
    RequiredNotNames {
        /// Where.
        path: String,
    },
    /// The keywords are supported but their values do not make a schema (`"enum": 3`).
    #[error("output-schema is not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// Checks that `schema` is an object-rooted schema within the supported subset.
pub fn output_schema(schema: &Value) -> Result<(), SchemaError> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        _ => return Err(SchemaError::NotObjectRooted),
    }
    check_schema(schema, "output-schema")?;
    // The keywords are supported; their values must make a schema too (`"enum": 3`,
    // `"pattern": "("`), or the run would only find out after it started.
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(|e| SchemaError::Invalid(e.to_string()))
}

fn check_schema(schema: &Value, path: &str) -> Result<(), SchemaError> {
    let at = || path.to_string();
    let obj = schema
        .as_object()
        .ok_or_else(|| SchemaError::NotAnObject { path: at() })?;
    for (key, value) in obj {
        if !SCHEMA_KEYWORDS.contains(&key.as_str()) {
            return Err(SchemaError::UnsupportedKeyword {
                path: at(),
                keyword: key.clone(),
            });
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
                    return Err(SchemaError::BadType {
                        path: at(),
                        value: value.to_string(),
                    });
                }
            }
            "properties" => {
                let props = value
                    .as_object()
                    .ok_or_else(|| SchemaError::PropertiesNotAnObject { path: at() })?;
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
                    return Err(SchemaError::RequiredNotNames { path: at() });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::{Capabilities, ContentBlock, ParentRef, RuntimeFeatures, ToolFilter};

    fn named(name: &str) -> ProviderDescriptor {
        ProviderDescriptor {
            name: name.to_string(),
            capabilities: Capabilities::default(),
            features: RuntimeFeatures::default(),
            inherits_parent_context: false,
        }
    }

    fn req() -> StartRequest {
        StartRequest::new("task", ParentRef::top_level("parent", "/work"))
    }

    /// The message of an `INVALID_REQUEST`, or a panic naming what came back instead.
    fn refused(r: &StartRequest) -> String {
        match request(r) {
            Err(SubagentError::InvalidRequest(m)) => m,
            other => panic!("expected INVALID_REQUEST, got {other:?}"),
        }
    }

    fn schema_error(schema: serde_json::Value) -> String {
        output_schema(&schema)
            .expect_err(&format!("{schema} should be refused"))
            .to_string()
    }

    #[test]
    fn descriptor_names_are_checked_and_errors_name_the_plugin() {
        for ok in [
            "a",
            "mock-1",
            "my_provider.v2",
            &"x".repeat(MAX_PROVIDER_NAME),
        ] {
            assert_eq!(descriptor("p", &named(ok)), Ok(()), "{ok}");
        }
        let long = "x".repeat(MAX_PROVIDER_NAME + 1);
        for (name, needle) in [
            ("", "provider name is empty"),
            (long.as_str(), "65 bytes long; the limit is 64"),
            ("a b", "provider name `a b` may only contain"),
            ("a/b", "may only contain"),
            ("a:b", "may only contain"),
            ("é", "may only contain"),
            ("a\nb", "`a\\nb`"),
        ] {
            match descriptor("plug-in", &named(name)) {
                Err(SubagentError::InvalidDescriptor { plugin, reason }) => {
                    assert_eq!(plugin, "plug-in");
                    assert!(reason.contains(needle), "{name:?}: {reason}");
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn capabilities_are_checked_in_the_contracts_order() {
        let mut all = req();
        all.output_schema = Some(json!({"type": "object"}));
        all.max_depth = Some(1);
        all.tool_filter = Some(ToolFilter {
            allow: Some(vec!["t".into()]),
            deny: None,
        });
        all.persona = Some("terse".into());
        let mut d = named("p");
        let missing = |d: &ProviderDescriptor| match capabilities(d, &all) {
            Ok(()) => None,
            Err(SubagentError::UnsupportedCapability {
                provider,
                capability,
            }) => {
                assert_eq!(provider, "p");
                Some(capability)
            }
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(missing(&d).as_deref(), Some("output-schema"));
        d.capabilities.output_schema = true;
        assert_eq!(missing(&d).as_deref(), Some("depth-limit"));
        d.capabilities.depth_limit = true;
        assert_eq!(missing(&d).as_deref(), Some("tool-filter"));
        d.capabilities.tool_filter = true;
        assert_eq!(missing(&d).as_deref(), Some("persona"));
        d.capabilities.persona = true;
        assert_eq!(missing(&d), None);
        // What is not requested needs no capability.
        assert_eq!(capabilities(&named("bare"), &req()), Ok(()));
        let mut only_persona = req();
        only_persona.persona = Some("x".into());
        let err = capabilities(&named("bare"), &only_persona).unwrap_err();
        assert_eq!(err.code(), "UNSUPPORTED_CAPABILITY");
        assert!(err.to_string().contains("persona"), "{err}");
    }

    #[test]
    fn prompts_must_have_text_fit_the_limit_and_be_json_where_they_say_so() {
        assert_eq!(request(&req()), Ok(()));
        for prompt in [
            vec![],
            vec![ContentBlock::text("")],
            vec![ContentBlock::text(" \n\t"), ContentBlock::text("  ")],
        ] {
            let mut r = req();
            r.prompt = prompt;
            assert_eq!(refused(&r), "prompt is empty");
        }
        // One non-blank block is enough.
        let mut r = req();
        r.prompt = vec![ContentBlock::text(" "), ContentBlock::text("go")];
        assert_eq!(request(&r), Ok(()));
        // The limit counts every block; exactly at it is fine.
        let half = MAX_PROMPT_BYTES / 2;
        r.prompt = vec![
            ContentBlock::text("a".repeat(half)),
            ContentBlock::text("b".repeat(MAX_PROMPT_BYTES - half)),
        ];
        assert_eq!(request(&r), Ok(()));
        r.prompt.push(ContentBlock::text("c"));
        assert_eq!(
            refused(&r),
            format!(
                "prompt is {} bytes; the limit is {MAX_PROMPT_BYTES}",
                MAX_PROMPT_BYTES + 1
            )
        );
        r.prompt = vec![
            ContentBlock::text("x"),
            ContentBlock::Json(r#"{"a": [1, 2]}"#.into()),
        ];
        assert_eq!(request(&r), Ok(()));
        for bad in ["{nope", "", "[1,", "{\"a\": 1} trailing"] {
            r.prompt = vec![ContentBlock::text("x"), ContentBlock::Json(bad.into())];
            assert_eq!(
                refused(&r),
                "a json prompt block is not valid JSON",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn max_depth_is_bounded_on_both_sides() {
        let mut r = req();
        for ok in [0, 1, MAX_DEPTH_LIMIT] {
            r.max_depth = Some(ok);
            assert_eq!(request(&r), Ok(()), "{ok}");
        }
        r.max_depth = Some(-1);
        assert_eq!(refused(&r), "max-depth must be 0 or more, got -1");
        r.max_depth = Some(i64::MIN);
        assert!(refused(&r).contains("must be 0 or more"));
        r.max_depth = Some(MAX_DEPTH_LIMIT + 1);
        assert_eq!(refused(&r), "max-depth 65 is absurd; the limit is 64");
        r.max_depth = Some(i64::MAX);
        assert!(refused(&r).contains("is absurd"));
    }

    #[test]
    fn tool_filters_need_a_list_and_names_and_personas_need_text() {
        let mut r = req();
        let filter = |allow: Option<Vec<&str>>, deny: Option<Vec<&str>>| {
            Some(ToolFilter {
                allow: allow.map(|v| v.into_iter().map(String::from).collect()),
                deny: deny.map(|v| v.into_iter().map(String::from).collect()),
            })
        };
        r.tool_filter = filter(None, None);
        assert_eq!(refused(&r), "tool-filter needs `allow` or `deny`");
        for (allow, deny) in [
            (Some(vec!["a"]), None),
            (None, Some(vec!["a"])),
            (Some(vec!["a"]), Some(vec!["b"])),
            // An empty allow list is a filter too: it hides everything.
            (Some(vec![]), None),
        ] {
            r.tool_filter = filter(allow.clone(), deny.clone());
            assert_eq!(request(&r), Ok(()), "{allow:?} {deny:?}");
        }
        for (allow, deny) in [(Some(vec!["a", ""]), None), (None, Some(vec!["  "]))] {
            r.tool_filter = filter(allow, deny);
            assert_eq!(refused(&r), "tool-filter contains an empty tool name");
        }
        r.tool_filter = None;
        r.persona = Some(" \n".into());
        assert_eq!(refused(&r), "persona is empty");
        r.persona = Some("pirate".into());
        assert_eq!(request(&r), Ok(()));
    }

    #[test]
    fn output_schemas_must_be_object_rooted_and_within_the_subset() {
        let good = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "title": "Answer",
            "properties": {
                "answer": {"type": "string", "minLength": 1, "pattern": "^a"},
                "score": {"type": ["integer", "null"], "minimum": 0, "maximum": 10},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
                "nested": {
                    "type": "object",
                    "additionalProperties": {"type": "number"},
                },
            },
            "required": ["answer"],
            "additionalProperties": false,
        });
        assert_eq!(output_schema(&good), Ok(()));

        for root in [
            json!({}),
            json!({"type": "array"}),
            json!({"type": ["object"]}),
            json!({"properties": {}}),
            json!("object"),
            json!(null),
        ] {
            assert_eq!(
                schema_error(root),
                "output-schema must be an object schema (`\"type\": \"object\"`)"
            );
        }
        // Each refusal names where the problem is.
        for (schema, message) in [
            (
                json!({"type": "object", "oneOf": []}),
                "output-schema: keyword `oneOf` is outside the supported schema subset",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/x"}}}),
                "output-schema.properties.a: keyword `$ref` is outside the supported schema subset",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": {"allOf": []}}}}),
                "output-schema.properties.a.items: keyword `allOf` is outside the supported schema subset",
            ),
            (
                json!({"type": "object", "additionalProperties": {"not": {}}}),
                "output-schema.additionalProperties: keyword `not` is outside the supported schema subset",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "thing"}}}),
                "output-schema.properties.a: `type` \"thing\" is not a JSON Schema type",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": ["string", 3]}}}),
                "output-schema.properties.a: `type` [\"string\",3] is not a JSON Schema type",
            ),
            (
                json!({"type": "object", "properties": []}),
                "output-schema: `properties` must be an object",
            ),
            (
                json!({"type": "object", "properties": {"a": 3}}),
                "output-schema.properties.a: a schema must be a JSON object",
            ),
            (
                json!({"type": "object", "required": "a"}),
                "output-schema: `required` must be a list of names",
            ),
            (
                json!({"type": "object", "required": ["a", 1]}),
                "output-schema: `required` must be a list of names",
            ),
        ] {
            assert_eq!(schema_error(schema.clone()), message, "{schema}");
        }
        // Through `request`, the schema's message is the request's.
        let mut r = req();
        r.output_schema = Some(json!({"type": "object", "anyOf": []}));
        assert_eq!(
            refused(&r),
            "output-schema: keyword `anyOf` is outside the supported schema subset"
        );
    }

    // Values of supported keywords are checked too (they once were not): a schema that is not
    // valid JSON Schema is refused by `request`, before the run starts.
    #[test]
    fn malformed_keyword_values_are_refused_before_start() {
        for schema in [
            json!({"type": "object", "properties": {"a": {"enum": 3}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}),
            json!({"type": "object", "properties": {"a": {"type": "number", "minimum": "x"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}}),
        ] {
            assert!(output_schema(&schema).is_err(), "{schema} was accepted");
        }
    }
}
