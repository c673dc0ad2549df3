//! Structured answers checked against the requested output schema, on every run path.

use serde_json::Value;
use thiserror::Error;

use crate::types::{StopReason, SubagentResult};

/// What is wrong with `value` under `validator`, one entry per failure, each naming the path
/// (`/answer: "answer" is a required property`).
pub fn schema_problems(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                format!("(root): {e}")
            } else {
                format!("{at}: {e}")
            }
        })
        .collect()
}

/// Why a value does not satisfy an output schema.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Mismatch {
    /// The schema itself does not compile.
    #[error("the output schema cannot be compiled: {0}")]
    Uncompilable(String),
    /// The value breaks the schema: one entry per failure, each naming its path.
    #[error("{}", .0.join("; "))]
    Violations(Vec<String>),
}

/// Why `value` does not satisfy `schema`, if it does not.
pub fn check(schema: &Value, value: &Value) -> Result<(), Mismatch> {
    let validator =
        jsonschema::validator_for(schema).map_err(|e| Mismatch::Uncompilable(e.to_string()))?;
    let problems = schema_problems(&validator, value);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Mismatch::Violations(problems))
    }
}

/// Applies the contract to a result a provider returned: `structured` survives only on a
/// `completed` run whose request asked for a schema and whose answer satisfies it. A completed
/// run with a missing or non-conforming answer ends `error`, with a diagnostic naming the
/// provider and the failing path (its output, the child's own words, stays).
pub fn enforce(provider: &str, schema: Option<&Value>, result: &mut SubagentResult) {
    let Some(schema) = schema else {
        result.structured = None;
        return;
    };
    if result.stop_reason != StopReason::Completed {
        result.structured = None;
        return;
    }
    let problem = match &result.structured {
        None => "it returned no structured answer".to_string(),
        Some(value) => match check(schema, value) {
            Ok(()) => return,
            Err(problems) => {
                format!("its structured answer does not satisfy the output schema: {problems}")
            }
        },
    };
    let message = format!("provider `{provider}` completed, but {problem}");
    tracing::info!("{message}");
    result.structured = None;
    result.stop_reason = StopReason::Error;
    result.diagnostic = Some(message);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::ContentBlock;

    fn completed(structured: Option<Value>) -> SubagentResult {
        SubagentResult {
            output: vec![ContentBlock::text("child words")],
            structured,
            stop_reason: StopReason::Completed,
            diagnostic: None,
        }
    }

    fn schema() -> Value {
        json!({"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}})
    }

    #[test]
    fn a_conforming_answer_is_kept() {
        let mut r = completed(Some(json!({"answer": "yes"})));
        enforce("p", Some(&schema()), &mut r);
        assert_eq!(r.stop_reason, StopReason::Completed);
        assert_eq!(r.structured, Some(json!({"answer": "yes"})));
    }

    #[test]
    fn a_non_conforming_answer_ends_the_run_error_naming_the_path() {
        let mut r = completed(Some(json!({"answer": 3})));
        enforce("p", Some(&schema()), &mut r);
        assert_eq!(r.stop_reason, StopReason::Error);
        assert_eq!(r.structured, None);
        let text = r.diagnostic.clone().unwrap_or_default();
        assert!(text.contains("provider `p`"), "{text}");
        assert!(text.contains("/answer"), "{text}");
        // The child's own words stay where they were.
        assert_eq!(crate::types::blocks_text(&r.output), "child words");
    }

    #[test]
    fn a_missing_required_property_names_the_root() {
        let mut r = completed(Some(json!({"reply": "x"})));
        enforce("p", Some(&schema()), &mut r);
        assert_eq!(r.stop_reason, StopReason::Error);
        assert!(r.diagnostic.unwrap_or_default().contains("answer"));
    }

    #[test]
    fn a_missing_answer_is_an_error_and_an_unrequested_one_is_dropped() {
        let mut r = completed(None);
        enforce("p", Some(&schema()), &mut r);
        assert_eq!(r.stop_reason, StopReason::Error);

        let mut r = completed(Some(json!({"answer": "unasked"})));
        enforce("p", None, &mut r);
        assert_eq!(r.stop_reason, StopReason::Completed);
        assert_eq!(r.structured, None);
    }

    #[test]
    fn a_failed_run_keeps_its_reason_and_loses_its_answer() {
        let mut r = completed(Some(json!({"answer": "yes"})));
        r.stop_reason = StopReason::MaxTokens;
        enforce("p", Some(&schema()), &mut r);
        assert_eq!(r.stop_reason, StopReason::MaxTokens);
        assert_eq!(r.structured, None);
    }
}
