//! A structured answer is checked against the requested schema on every run path.
//! CONTRACT section 3.

use seam_host::{blocks_text, StopReason, SubagentResult};
use seam_tests::*;
use serde_json::json;

/// Runs provider `m` once with `schema` as the request's output schema, and disposes the run.
async fn run_with_schema(host: &seam_host::Host, schema: serde_json::Value) -> SubagentResult {
    let mut r = request("x");
    r.output_schema = Some(schema);
    let run = host.subagents().start("m", r).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    result
}

#[tokio::test]
async fn a_component_answer_that_breaks_the_schema_ends_the_run_error() {
    // The mock answers `{"reply": ...}` whatever the schema asks for.
    let host = host_with(&mock(
        "m",
        "reply = \"r\", capabilities = { outputSchema = true }",
    ))
    .await;
    let seen = record(&host);
    let schema = json!({"type": "object", "required": ["answer"],
                        "properties": {"answer": {"type": "string"}}});
    let result = run_with_schema(&host, schema).await;
    assert_eq!(result.stop_reason, StopReason::Error);
    assert_eq!(result.structured, None);
    let text = result.diagnostic.clone().unwrap_or_default();
    assert!(text.contains("provider `m`"), "{text}");
    assert!(text.contains("\"answer\" is a required property"), "{text}");
    // The event carries the same outcome.
    let end = seen.lock().unwrap().iter().find_map(|e| match e {
        seam_host::Event::SubagentEnd { stop_reason, .. } => Some(stop_reason.clone()),
        _ => None,
    });
    assert_eq!(end, Some(StopReason::Error));
}

#[tokio::test]
async fn a_wrongly_typed_property_is_named_by_its_path() {
    let host = host_with(&mock(
        "m",
        "capabilities = { outputSchema = true }, structured = { score = \"high\" }",
    ))
    .await;
    let schema = json!({"type": "object", "properties": {"score": {"type": "integer"}}});
    let result = run_with_schema(&host, schema).await;
    assert_eq!(result.stop_reason, StopReason::Error);
    assert!(
        result
            .diagnostic
            .as_deref()
            .unwrap_or("")
            .contains("/score"),
        "{result:?}"
    );
    assert_eq!(
        blocks_text(&result.output),
        "mock reply",
        "the child's words stay"
    );
}

#[tokio::test]
async fn a_conforming_component_answer_is_kept() {
    let host = host_with(&mock(
        "m",
        "capabilities = { outputSchema = true }, structured = { score = 7 }",
    ))
    .await;
    let schema = json!({"type": "object", "required": ["score"],
                        "properties": {"score": {"type": "integer"}}});
    let result = run_with_schema(&host, schema).await;
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.structured, Some(json!({"score": 7})));
}
