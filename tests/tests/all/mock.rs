//! CONTRACT section 7: the mock provider.

use seam_host::{Config, StopReason};
use seam_tests::*;
use serde_json::json;

#[tokio::test]
async fn stop_reason_and_name_are_configurable() {
    let host = host_with(
        &(mock("e", "stopReason = \"error\"")
            + &mock("t", "stopReason = \"max-tokens\"")
            + &mock("r", "stopReason = \"refusal\"")
            + &mock("o", "stopReason = \"overheated\"")),
    )
    .await;
    for (name, reason) in [
        ("e", StopReason::Error),
        ("t", StopReason::MaxTokens),
        ("r", StopReason::Refusal),
        ("o", StopReason::Other("overheated".into())),
    ] {
        let run = host.subagents().start(name, request("x")).unwrap();
        assert_eq!(run.result().await.unwrap().stop_reason, reason);
        run.dispose().await;
    }
}

#[tokio::test]
async fn structured_output_needs_the_capability_and_a_schema() {
    let host = host_with(
        &(mock("plain", "reply = \"r\"")
            + &mock(
                "schema",
                "reply = \"r\", capabilities = { outputSchema = true }",
            )
            + &mock(
                "custom",
                "capabilities = { outputSchema = true }, structured = { score = 7 }",
            )),
    )
    .await;
    let schema = json!({"type": "object", "properties": {"reply": {"type": "string"}}});

    let err = {
        let mut r = request("x");
        r.output_schema = Some(schema.clone());
        host.subagents().start("plain", r).unwrap_err()
    };
    assert_eq!(err.code(), "UNSUPPORTED_CAPABILITY");

    let run = host.subagents().start("schema", request("x")).unwrap();
    assert_eq!(
        run.result().await.unwrap().structured,
        None,
        "not requested"
    );
    run.dispose().await;

    for (name, expected) in [
        ("schema", json!({"reply": "r"})),
        ("custom", json!({"score": 7})),
    ] {
        let mut r = request("x");
        r.output_schema = Some(schema.clone());
        let run = host.subagents().start(name, r).unwrap();
        assert_eq!(run.result().await.unwrap().structured, Some(expected));
        run.dispose().await;
    }
}

#[tokio::test]
async fn unloading_the_mock_unregisters_it() {
    let host = host_with(&mock("m", "")).await;
    assert!(host.subagents().descriptor("m").is_some());
    host.reconfigure(&Config::default()).await;
    assert!(host.subagents().descriptor("m").is_none());
    let err = host.subagents().start("m", request("x")).unwrap_err();
    assert_eq!(err.code(), "NO_PROVIDER");
}

#[tokio::test]
async fn a_bad_mock_config_is_refused_naming_the_key() {
    let host = test_host();
    let report = host.load(&config(&mock("m", "delayMs = \"soon\""))).await;
    assert_eq!(report.failed[0].id(), "m");
    let e = report.failed[0].to_string();
    assert!(e.contains("delayMs"), "{e}");
}
