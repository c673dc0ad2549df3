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

/// Two schemas no answer satisfies both of: each requires its own property and allows no other.
fn schema_of(property: &str, kind: &str) -> serde_json::Value {
    json!({"type": "object", "properties": {property: {"type": kind}},
           "required": [property], "additionalProperties": false})
}

#[tokio::test]
async fn two_concurrent_structured_children_each_get_and_are_held_to_their_own_schema() {
    use super::chat_server::{last_user, offered, text_reply, tool_reply, ChatServer};
    let title = schema_of("title", "string");
    let count = schema_of("count", "integer");
    let own = |form: &str| match form {
        "A" => json!({"title": "alpha"}),
        _ => json!({"count": 2}),
    };
    // A child's first model call is held until the other child's has arrived: both are inside a
    // model call at once. A child's prompt says which form it fills and whether it answers with
    // its own shape or the other one's; a child whose capture was refused gives up in words.
    let refused = |body: &serde_json::Value| {
        body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
    };
    let server = ChatServer::start(
        2,
        move |body| !refused(body),
        move |body| {
            let prompt = last_user(body);
            let (form, honest) = prompt.split_once(' ').unwrap_or((prompt.as_str(), "own"));
            if refused(body) {
                return text_reply("I give up");
            }
            let other = if form == "A" { "B" } else { "A" };
            let shape = if honest == "own" {
                own(form)
            } else {
                own(other)
            };
            tool_reply(&format!("call-{form}"), "structured_output", &shape)
        },
    )
    .await;
    let toml = server.models_section() + &entry("spawn", "spawn_provider", "");
    let host = host_with(&toml).await;
    let start = |prompt: &str, schema: &serde_json::Value| {
        let mut r = request(prompt);
        r.agent_options = Some(seam_host::AgentOptions {
            model: Some("openai".into()),
            system_prompt: None,
        });
        r.output_schema = Some(schema.clone());
        let run = host.subagents().start("spawn", r).unwrap();
        async move {
            let result = run.result().await.unwrap();
            run.dispose().await;
            result
        }
    };

    // Each answers with its own shape: both captures are kept, each its own.
    let (a, b) = tokio::join!(start("A own", &title), start("B own", &count));
    assert_eq!(a.stop_reason, StopReason::Completed, "{a:?}");
    assert_eq!(a.structured, Some(json!({"title": "alpha"})));
    assert_eq!(b.stop_reason, StopReason::Completed, "{b:?}");
    assert_eq!(b.structured, Some(json!({"count": 2})));
    // What each child's model was offered as structured_output: its own schema.
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    for body in &seen {
        let schema = match last_user(body).as_str() {
            "A own" => &title,
            "B own" => &count,
            other => panic!("unexpected prompt {other:?}"),
        };
        assert_eq!(
            offered(body, "structured_output").as_ref(),
            Some(schema),
            "{body:#}"
        );
    }

    // Each answers with the other's shape, at the same time: both captures are refused against
    // the child's own schema, the model is told why, and without a capture the run fails.
    let (a, b) = tokio::join!(start("A swap", &title), start("B swap", &count));
    for (form, result, schema, missing) in [("A", &a, &title, "title"), ("B", &b, &count, "count")]
    {
        assert_eq!(result.stop_reason, StopReason::Error, "{result:?}");
        assert_eq!(result.structured, None, "{result:?}");
        let diagnostic = result.diagnostic.as_deref().unwrap_or_default();
        assert!(
            diagnostic.contains("without calling structured_output"),
            "{result:?}"
        );
        assert_eq!(result.output_text(), "I give up", "the child's own words");
        let asked: Vec<serde_json::Value> = server
            .seen()
            .into_iter()
            .filter(|body| last_user(body) == format!("{form} swap"))
            .collect();
        assert_eq!(asked.len(), 2, "a call, then a retry: {asked:#?}");
        for body in &asked {
            assert_eq!(
                offered(body, "structured_output").as_ref(),
                Some(schema),
                "{body:#}"
            );
        }
        // The retry carries the refusal, which names what the child's own schema missed.
        let refusal = asked[1]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string();
        assert!(
            refusal.contains("do not match the schema")
                && refusal.contains(&format!("\"{missing}\" is a required property")),
            "{form}: {refusal}"
        );
    }
    assert_eq!(server.seen().len(), 6, "two calls and two retries");
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_agents(), 0);
}
