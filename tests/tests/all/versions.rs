//! CONTRACT section 11: versions. Components built against the frozen 0.1.0, 0.2.0 and 0.3.0
//! WITs load and serve next to 0.4.0 ones; a component built for a version outside the range is
//! refused, naming it.

use seam_host::{ContentBlock, ParentRef, StopReason, WitVersion};
use seam_tests::*;
use tokio_util::sync::CancellationToken;

fn legacy_provider(id: &str, extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { ", " };
    entry(
        id,
        "legacy_provider",
        &format!("name = \"{id}\"{sep}{extra}"),
    )
}

fn legacy_tool(id: &str, provider: &str) -> String {
    entry(
        id,
        "legacy_tool",
        &format!("toolName = \"{id}\", provider = \"{provider}\""),
    )
}

/// The tool built against the frozen 0.2.0 WIT, delegating in the background to `provider`.
fn legacy_background_tool(id: &str, provider: &str) -> String {
    entry(
        id,
        "legacy_background_tool",
        &format!("toolName = \"{id}\", provider = \"{provider}\""),
    )
}

#[tokio::test]
async fn a_0_1_0_provider_loads_serves_and_cancels() {
    let host =
        host_with(&(legacy_provider("old", "") + &legacy_provider("slow", "delayMs = 60000")))
            .await;
    let info = host
        .inspect(
            &guest("legacy_provider"),
            Some(serde_json::json!({"name": "x"})),
        )
        .await
        .unwrap();
    assert_eq!(info.version, WitVersion::V0_1_0);
    assert!(
        info.exports
            .iter()
            .any(|e| e == "seam:plugin/provider@0.1.0"),
        "{:?}",
        info.exports
    );

    let run = host.subagents().start("old", request("hello")).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.output_text(), "legacy: hello");
    assert_eq!(result.diagnostic, None);
    run.dispose().await;

    // Its cancel goes through the 0.1.0 `run-context.sleep`, delegated to the latest one.
    let run = host.subagents().start("slow", request("wait")).unwrap();
    run.started().await.unwrap();
    run.cancel(Some("enough".into()));
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test]
async fn a_0_1_0_tool_delegates_to_old_and_new_providers_alike() {
    let host = host_with(
        &(legacy_provider("old", "")
            + &mock("new", "reply = \"from 0.3\"")
            + &entry(
                "broken",
                "faulty_provider",
                "name = \"broken\", mode = \"trap-after-ready\"",
            )
            + &legacy_tool("ask_old", "old")
            + &legacy_tool("ask_new", "new")
            + &legacy_tool("ask_broken", "broken")),
    )
    .await;
    let call = |tool: &'static str| {
        let host = host.clone();
        async move {
            host.call_tool(
                tool,
                seam_host::ParentRef::top_level("agent:1", "/w"),
                r#"{"prompt": "hi"}"#,
                CancellationToken::new(),
            )
            .await
            .unwrap()
        }
    };
    let old = call("ask_old").await;
    assert!(!old.is_error, "{}", old.text());
    assert_eq!(old.text(), "legacy: hi");
    let new = call("ask_new").await;
    assert!(!new.is_error, "{}", new.text());
    assert_eq!(new.text(), "from 0.3");
    // 0.1.0 has no `diagnostic`: a failure's text reaches an old tool as the output, as it did.
    let broken = call("ask_broken").await;
    assert!(broken.is_error);
    assert!(broken.text().contains("guest fault"), "{}", broken.text());
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test]
async fn a_0_2_0_tool_runs_background_runs_with_their_diagnostic() {
    let host = host_with(
        &(mock("new", "reply = \"from 0.3\"")
            + &entry(
                "broken",
                "faulty_provider",
                "name = \"broken\", mode = \"trap-after-ready\"",
            )
            + &legacy_background_tool("bg_new", "new")
            + &legacy_background_tool("bg_broken", "broken")),
    )
    .await;
    let info = host
        .inspect(
            &guest("legacy_background_tool"),
            Some(serde_json::json!({"toolName": "x", "provider": "new"})),
        )
        .await
        .unwrap();
    assert_eq!(info.version, WitVersion::V0_2_0);
    assert!(
        info.exports.iter().any(|e| e == "seam:plugin/tool@0.2.0"),
        "{:?}",
        info.exports
    );
    let caller = ParentRef::top_level("agent:1", "/w");
    let call = |tool: &'static str, args: &'static str| {
        let host = host.clone();
        let caller = caller.clone();
        async move {
            host.call_tool(tool, caller, args, CancellationToken::new())
                .await
                .unwrap()
        }
    };
    // `start-background`, `list`, `get`, `wait-result` and `info`, each through the 0.2.0
    // imports, on a 0.3.0 provider.
    let ok = call("bg_new", r#"{"prompt": "hi", "label": "greeting"}"#).await;
    assert!(!ok.is_error, "{}", ok.text());
    let text = ok.text();
    let fields: Vec<&str> = text.splitn(7, " | ").collect();
    assert_eq!(
        fields[1..],
        [
            "greeting",
            "listed: yes",
            "settled",
            "completed",
            "from 0.3",
            "-"
        ],
        "{text}"
    );
    // The run is the calling agent's, as the host sees it too.
    let runs = host.subagents().background_runs("agent:1");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        (runs[0].id.as_str(), runs[0].label.as_str()),
        (fields[0], "greeting")
    );

    // 0.2.0 has `diagnostic`: the failure text reaches it there, not folded into the output as
    // for 0.1.0.
    let broken = call("bg_broken", r#"{"prompt": "hi"}"#).await;
    assert!(broken.is_error, "{}", broken.text());
    let text = broken.text();
    let fields: Vec<&str> = text.splitn(7, " | ").collect();
    assert_eq!(fields[4..6], ["error", ""], "{text}");
    assert!(fields[6].contains("guest fault"), "{text}");

    host.subagents().dispose_background_of("agent:1").await;
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test]
async fn a_0_2_0_provider_reports_progress_takes_steering_and_delegates() {
    // The built 0.3.0 provider calls nothing 0.2.0 lacks, and 0.3.0 changed no type of 0.2.0's,
    // so relabelled 0.2.0 it is a 0.2.0 provider: its `run-context` (progress, the message and
    // cancel pollables) and its `subagents` go through the 0.2.0 imports.
    let dir = tempfile::tempdir().unwrap();
    let path = relabelled("legacy_v3_provider", "0.3.0", "0.2.0", dir.path());
    let host = test_host();
    let info = host.inspect(&path, None).await.unwrap();
    assert_eq!(info.version, WitVersion::V0_2_0);
    assert_eq!(info.link_error, None);
    let old = |id: &str, extra: &str| {
        format!(
            "[[plugin]]\nid = \"{id}\"\ncomponent = \"{}\"\nconfig = {{ name = \"{id}\", {extra} }}\n\n",
            path.display()
        )
    };
    let toml = old(
        "old",
        r#"steering = true, progress = ["working"], awaitMessages = 1, reply = "heard: {messages}""#,
    ) + &old(
        "old_outer",
        r#"delegateTo = "new", reply = "outer: {delegated}""#,
    ) + &mock("new", "reply = \"from 0.3\"");
    loaded(host.load(&config(&toml)).await);

    let run = host.subagents().start("old", request("x")).unwrap();
    run.started().await.unwrap();
    run.send_message(vec![ContentBlock::text("go")]).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.output_text(), "heard: go");
    let progress: Vec<String> = run
        .progress()
        .iter()
        .map(|b| b.as_text().to_string())
        .collect();
    assert_eq!(progress, ["working"]);
    run.dispose().await;

    let run = host.subagents().start("old_outer", request("x")).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.output_text(), "outer: from 0.3", "{result:?}");
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
}

/// Rewrites every `seam:plugin/...@0.4.0` name in the built (latest) mock provider to `version`
/// (same length, so the binary stays well-formed).
fn rebuilt_for(version: &str, dir: &std::path::Path) -> std::path::PathBuf {
    relabelled("mock_provider", "0.4.0", version, dir)
}

/// `guest` with its `seam:plugin` names moved from version `from` to `to`.
fn relabelled(
    guest_name: &str,
    from: &str,
    version: &str,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    assert_eq!(version.len(), from.len());
    let bytes = std::fs::read(guest(guest_name)).unwrap();
    let from = format!("@{from}");
    let from = from.as_bytes();
    let to = format!("@{version}");
    let mut out = bytes.clone();
    let mut i = 0;
    let mut replaced = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            // Only names in the seam:plugin package (`seam:plugin/<interface>@`), not wasi's.
            let mut start = i;
            while start > 0 && (out[start - 1].is_ascii_lowercase() || out[start - 1] == b'-') {
                start -= 1;
            }
            if out[..start].ends_with(b"seam:plugin/") {
                out[i..i + from.len()].copy_from_slice(to.as_bytes());
                replaced += 1;
            }
        }
        i += 1;
    }
    assert!(replaced > 0);
    let path = dir.join(format!("{guest_name}_{version}.wasm"));
    std::fs::write(&path, out).unwrap();
    path
}

#[tokio::test]
async fn a_component_whose_types_do_not_match_its_version_is_refused_naming_the_function() {
    // A 0.1.0 provider relabelled 0.2.0: its `run` returns a 3-field result, 0.2.0 has 4.
    let dir = tempfile::tempdir().unwrap();
    let path = relabelled("legacy_provider", "0.1.0", "0.2.0", dir.path());
    let host = test_host();
    let info = host
        .inspect(&path, Some(serde_json::json!({"name": "x"})))
        .await
        .unwrap();
    let error = info.link_error.expect("this host cannot run it");
    assert!(
        error.contains("provider.run") && error.contains("type mismatch"),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
}

#[tokio::test]
async fn a_component_for_an_unknown_version_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(&mock("good", "")).await;
    for version in ["0.1.1", "0.6.0", "1.0.0"] {
        let path = rebuilt_for(version, dir.path());
        let err = host.inspect(&path, None).await.unwrap_err().to_string();
        assert!(
            err.contains(&format!("built for seam:plugin@{version}"))
                && err.contains("this host supports 0.1.0, 0.2.0, 0.3.0, 0.4.0 and 0.5.0"),
            "{err}"
        );
        let toml = format!(
            "[[plugin]]\nid = \"v\"\ncomponent = \"{}\"\nconfig = {{ name = \"v\" }}\n",
            path.display()
        );
        let report = host.reconfigure(&config(&(mock("good", "") + &toml))).await;
        assert_eq!(report.failed.len(), 1, "{}", report.failures());
        assert!(report.failures().contains(version), "{}", report.failures());
    }
    // The other plugin kept serving.
    let run = host.subagents().start("good", request("x")).unwrap();
    assert_eq!(
        run.result().await.unwrap().stop_reason,
        StopReason::Completed
    );
    run.dispose().await;
}

/// A provider built for 0.3.0, before budgets, loads unchanged and serves next to 0.4.0 ones; a
/// budget's refusal reaches it as what 0.3.0 can carry (`start-failed`, with the same words).
#[tokio::test]
async fn a_0_3_0_provider_loads_unchanged_and_reads_a_budget_refusal_in_its_own_terms() {
    let v3 = |id: &str, extra: &str| {
        entry(
            id,
            "legacy_v3_provider",
            &format!("name = \"{id}\", {extra}"),
        )
    };
    let host = host_with(
        &(v3("v3", r#"delegateTo = "new", reply = "v3: {delegated}""#)
            + &mock("new", "reply = \"fresh\"")),
    )
    .await;
    let info = host
        .inspect(&guest("legacy_v3_provider"), None)
        .await
        .unwrap();
    assert_eq!(info.version, WitVersion::V0_3_0);
    let run = host.subagents().start("v3", request("x")).unwrap();
    assert_eq!(run.result().await.unwrap().output_text(), "v3: fresh");
    run.dispose().await;
    // No run left for its delegation: refused, in 0.3.0's terms.
    let mut broke = request("x");
    broke.budget = Some(seam_host::spend::Budget {
        runs: Some(0),
        ..Default::default()
    });
    let run = host.subagents().start("v3", broke).unwrap();
    let text = run.result().await.unwrap().output_text();
    assert!(
        text.starts_with("v3: refused: ")
            && text.contains("StartFailed(\"BUDGET_EXHAUSTED: budget exhausted: runs started"),
        "{text}"
    );
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
}
