//! Authority only narrows (contract 17): a child never sees a tool its parent could not call,
//! whatever its own tool filter asks for, on the real spawn provider and subagent tool.

use seam_host::{ContentBlock, StopReason};
use seam_tests::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_filter_is_a_ceiling_never_a_grant() {
    let call = |tool: &str| {
        format!("tool_calls = [{{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"p\" }} }}]")
    };
    let toml = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [{{ text = "lead sees {{tools}}", {narrow} }}, {{ text = "{{tool_results}}" }}]

[models.scripts.a]
steps = [{{ text = "a sees {{tools}}", {deeper} }}, {{ text = "a: {{tool_results}}" }}]

[models.scripts.b]
steps = [{{ text = "b sees {{tools}}" }}]

"#,
        narrow = call("narrow"),
        deeper = call("deeper"),
    ) + &entry("spawn", "spawn_provider", "")
        + &mock("vault", "reply = \"the secret\"")
        + &entry("secret", "subagent_tool", "provider = \"vault\", toolName = \"secret\"")
        // The lead's child sees only `deeper`.
        + &entry(
            "narrow",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"narrow\", agentOptions = { model = \"scripted:a\" }, toolFilter = { allow = [\"deeper\"] }",
        )
        // Its child asks for `secret` too, which its parent lacked.
        + &entry(
            "deeper",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"deeper\", agentOptions = { model = \"scripted:b\" }, toolFilter = { allow = [\"secret\", \"deeper\"] }",
        );
    let host = host_with(&toml).await;
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    host.agents().dispose(agent.id()).await;
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    let text = seam_host::blocks_text(&outcome.output);
    assert!(text.contains("a: b sees deeper"), "{text}");
    assert!(
        !text.contains("secret"),
        "the grandchild was given what its parent lacked: {text}"
    );
    assert_eq!(host.live_runs(), 0);
}

/// A delegation's `config.scope` narrows what every call and run below it may reach, checked
/// as each store is made: the HTTP agent provider, granted the endpoint's origin, is denied it
/// for the runs started through a tool whose scope leaves it out, and still reaches it for the
/// runs started through a tool with no scope.
#[tokio::test]
async fn a_scope_narrows_what_the_runs_below_a_delegation_may_reach() {
    use super::loopback::{ok, Server};
    let server = Server::start(vec![ok(serde_json::json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}]}))])
    .await;
    let origin = server.base_url().trim_end_matches("/v1").to_string();
    let call = |tool: &str| {
        format!("{{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"p\" }} }}")
    };
    let toml = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [{{ text = "asking", tool_calls = [{scoped}, {free}] }}, {{ text = "{{tool_results}}" }}]

[[plugin]]
id = "remote"
component = "http_agent_provider.wasm"
config = {{ name = "remote", endpoint = "{endpoint}", model = "m", stream = false }}
[plugin.grants]
http = ["{origin}"]

"#,
        scoped = call("ask_scoped"),
        free = call("ask_free"),
        endpoint = server.base_url(),
    ) + &entry(
        "ask_scoped",
        "subagent_tool",
        "provider = \"remote\", toolName = \"ask_scoped\", scope = { http = [\"https://elsewhere.example\"] }",
    ) + &entry(
        "ask_free",
        "subagent_tool",
        "provider = \"remote\", toolName = \"ask_free\"",
    );
    let host = host_with(&toml).await;
    // On this thread (a current-thread runtime): every task logs where the capture is.
    let (logs, _guard) = CapturedLog::start();
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    host.agents().dispose(agent.id()).await;
    let text = seam_host::blocks_text(&outcome.output);
    assert_eq!(text.matches("the answer").count(), 1, "{text}");
    assert!(
        text.contains("the host denied the request: its origin is not granted"),
        "{text}"
    );
    assert_eq!(server.seen().len(), 1, "the scoped run sent nothing");
    let denial = logs.of_plugin("remote", "removed for this subtree");
    assert!(
        denial
            .iter()
            .any(|l| l.contains("the scope of `remote-") && l.contains("config.scope")),
        "the denial names the scope that removed the grant: {denial:?}"
    );
}
