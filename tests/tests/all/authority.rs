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
