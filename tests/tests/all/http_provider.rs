//! CONTRACT section 10, over `wasi:http`: the HTTP agent provider (a component) asks an
//! OpenAI-compatible endpoint (the loopback server) for each run's answer, only at an origin its
//! entry grants, within `http_timeout_ms`, and stops when cancelled. An ungranted origin is the
//! exfiltration attempt of the hostile suite: refused before any byte leaves, and logged.

use seam_host::{Event, Host, StopReason};
use seam_tests::*;
use serde_json::json;

use super::loopback::*;

/// The API key variable the tests grant; set once, to the same value, by every test.
const KEY_VAR: &str = "SEAM_TEST_HTTP_AGENT_KEY";

fn origin(server: &Server) -> String {
    server.base_url().trim_end_matches("/v1").to_string()
}

/// The provider's entry, granted `http` (TOML array items) and the key variable.
fn agent(server: &Server, extra: &str, http: &str, limits: &str) -> String {
    // SAFETY: every test sets the same value before any host reads it.
    unsafe { std::env::set_var(KEY_VAR, "sk-test") };
    format!(
        "[[plugin]]\nid = \"remote\"\ncomponent = \"http_agent_provider.wasm\"\n\
         config = {{ name = \"remote\", endpoint = \"{}\", model = \"m1\", apiKeyEnv = \"{KEY_VAR}\"{extra} }}\n\
         [plugin.grants]\nenv = [\"{KEY_VAR}\"]\nhttp = [{http}]\n{limits}\n",
        server.base_url()
    )
}

fn granted(server: &Server) -> String {
    format!("\"{}\"", origin(server))
}

async fn outcome(host: &Host, request: seam_host::StartRequest) -> seam_host::SubagentResult {
    let run = host.subagents().start("remote", request).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    result
}

fn completion(text: &str) -> serde_json::Value {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
}

fn delta(text: &str) -> serde_json::Value {
    json!({"choices": [{"index": 0, "delta": {"content": text}}]})
}

#[tokio::test]
async fn a_run_is_one_chat_completion_with_the_key_and_the_persona() {
    let server = Server::start(vec![ok(completion("the answer"))]).await;
    let host = host_with(&agent(&server, ", stream = false", &granted(&server), "")).await;
    let mut request = request("what is it?");
    request.persona = Some("You are terse.".into());
    let result = outcome(&host, request).await;
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    assert_eq!(result.output_text(), "the answer");
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-test");
    assert_eq!(seen[0].body["model"], "m1");
    assert_eq!(
        seen[0].body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "what is it?"}
        ])
    );
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn streamed_deltas_are_progress_and_make_the_answer() {
    let server = Server::start(vec![sse(&[delta("one "), delta("two "), delta("three")])]).await;
    let host = host_with(&agent(&server, "", &granted(&server), "")).await;
    let seen = record(&host);
    let result = outcome(&host, request("count")).await;
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    assert_eq!(result.output_text(), "one two three");
    let progress: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentProgress { content, .. } => {
                Some(content.iter().map(|b| b.as_text()).collect::<String>())
            }
            _ => None,
        })
        .collect();
    assert_eq!(progress, ["one ", "two ", "three"]);
}

#[tokio::test]
async fn an_error_status_ends_the_run_error_quoting_it() {
    let server = Server::start(vec![
        status(401, r#"{"error": {"message": "bad key"}}"#),
        status(503, "overloaded"),
    ])
    .await;
    let host = host_with(&agent(&server, ", stream = false", &granted(&server), "")).await;
    for (code, text) in [("401", "bad key"), ("503", "overloaded")] {
        let result = outcome(&host, request("x")).await;
        assert_eq!(result.stop_reason, StopReason::Error);
        let why = result.diagnostic.unwrap_or_default();
        assert!(
            why.contains(&format!("HTTP {code}")) && why.contains(text),
            "{why}"
        );
    }
}

#[tokio::test]
async fn a_request_to_an_ungranted_origin_is_refused_and_logged() {
    let (log, _guard) = CapturedLog::start();
    let server = Server::start(vec![ok(completion("leaked"))]).await;
    // Granted another origin only: the attempt to reach the server is an exfiltration attempt.
    let host = host_with(&agent(&server, "", "\"https://api.example.com\"", "")).await;
    let result = outcome(&host, request("secret")).await;
    assert_eq!(result.stop_reason, StopReason::Error);
    let why = result.diagnostic.unwrap_or_default();
    assert!(why.contains("denied"), "{why}");
    assert!(server.seen().is_empty(), "nothing reached the server");
    let origin = origin(&server);
    let lines = log.of_plugin("remote", &format!("add \"{origin}\" to `http`"));
    assert_eq!(lines.len(), 1, "{:#?}", log.lines());
    // The plugin with the grant serves on.
    let info = host.plugins().await.remove(0);
    assert!(info
        .grants
        .unwrap()
        .summary()
        .contains("HTTP to https://api.example.com"));
}

#[tokio::test]
async fn a_silent_endpoint_times_out_within_http_timeout_ms() {
    let server = Server::start(vec![Answer::Stall]).await;
    let limits = "[plugin.limits]\nhttp_timeout_ms = 300";
    let host = host_with(&agent(&server, "", &granted(&server), limits)).await;
    let result = outcome(&host, request("x")).await;
    assert_eq!(result.stop_reason, StopReason::Error);
    let why = result.diagnostic.unwrap_or_default();
    assert!(why.contains("http_timeout_ms"), "{why}");
}

#[tokio::test]
async fn a_cancel_mid_stream_aborts_the_run() {
    let server = Server::start(vec![Answer::Sse {
        pieces: vec![format!("data: {}\n\n", delta("partial"))],
        stall: true,
    }])
    .await;
    let host = host_with(&agent(&server, "", &granted(&server), "")).await;
    let mut events = watch_events(&host);
    let run = host.subagents().start("remote", request("x")).unwrap();
    wait_for(&mut events, "the first delta", |seen| {
        seen.iter()
            .any(|e| matches!(e, Event::SubagentProgress { .. }))
    })
    .await;
    run.cancel(Some("enough".into()));
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}

/// Contract 16 for a component that calls a model itself (0.4.0): it asks for at most what the
/// tree has left, its usage is charged to the tree, and past the budget its run ends `budget`;
/// with nothing left it calls nothing.
#[tokio::test]
async fn a_component_calling_a_model_is_held_to_the_trees_budget_through_its_usage() {
    let mut used = completion("a long answer");
    used["usage"] = json!({"prompt_tokens": 12, "completion_tokens": 90});
    let server = Server::start(vec![ok(used.clone()), ok(used)]).await;
    let host = host_with(&agent(&server, ", stream = false", &granted(&server), "")).await;
    let capped = |output_tokens: u64| {
        let mut r = request("go");
        r.budget = Some(seam_host::spend::Budget {
            output_tokens: Some(output_tokens),
            ..Default::default()
        });
        r
    };
    let run = host.subagents().start("remote", capped(100)).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed, "{result:?}");
    assert_eq!(
        server.seen()[0].body["max_tokens"],
        100,
        "asks for what is left"
    );
    let spent = run.account().spent();
    assert_eq!(
        (spent.input_tokens, spent.output_tokens, spent.model_calls),
        (12, 90, 1)
    );
    run.dispose().await;

    // A cap of 50: the endpoint (which ignores max_tokens here) reports 90, past the cap. The
    // report is refused and the run ends `budget`, naming what ran out.
    let run = host.subagents().start("remote", capped(50)).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Budget, "{result:?}");
    let why = result.diagnostic.clone().unwrap_or_default();
    assert!(
        why.contains("budget exhausted: output tokens") && why.contains("allows 50, 90 spent"),
        "{why}"
    );
    run.dispose().await;

    // Nothing left: no request leaves.
    let result = outcome(&host, capped(0)).await;
    assert_eq!(result.stop_reason, StopReason::Budget, "{result:?}");
    assert_eq!(server.seen().len(), 2, "no model call was made");
}

/// The same exfiltration attempt by a WASI 0.3 component (`wasi:http/client.send`, the hostile
/// 0.3 guest): refused before any byte leaves, and logged with the grant to add, as 0.2's is;
/// granted the origin, the same request goes through.
#[tokio::test]
async fn a_wasi_0_3_request_to_an_ungranted_origin_is_refused_and_logged() {
    use crate::hostile::{good, Attacks, Guest};
    let (log, _guard) = CapturedLog::start();
    let server = Server::start(vec![ok(completion("fine"))]).await;
    let origin = origin(&server);
    let authority = origin.trim_start_matches("http://");
    let get = format!("mode = \"http-get\", authority = \"{authority}\"");
    let toml = Guest::P3.hostile(
        "exfil",
        &get,
        "[plugin.grants]\nhttp = [\"https://api.example.com\"]\n",
    ) + &Guest::P3.hostile(
        "allowed",
        &get,
        &format!("[plugin.grants]\nhttp = [{}]\n", granted(&server)),
    ) + &good();
    let attacks = Attacks::load(&toml).await;
    assert_eq!(
        attacks.attack("exfil").await,
        "refused: ErrorCode::HttpRequestDenied"
    );
    assert!(server.seen().is_empty(), "nothing reached the server");
    let lines = log.of_plugin("exfil", &format!("add \"{origin}\" to `http`"));
    assert_eq!(lines.len(), 1, "{:#?}", log.lines());
    assert_eq!(attacks.attack("allowed").await, "status 200");
    assert_eq!(server.seen().len(), 1);
    assert_eq!(server.seen()[0].method, "GET");
}
