//! CONTRACT section 2: the registry.

use seam_host::{PluginState, SubagentError, ToolFilter};
use seam_tests::*;
use serde_json::json;

#[tokio::test]
async fn registered_descriptor_is_what_the_component_declared() {
    let host = host_with(&mock(
        "a",
        "capabilities = { persona = true }, inheritsParentContext = true, steering = true",
    ))
    .await;
    let d = host.subagents().descriptor("a").expect("registered");
    assert_eq!(d.name, "a");
    assert!(d.capabilities.persona);
    assert!(!d.capabilities.output_schema);
    assert!(d.inherits_parent_context);
    assert!(d.features.steering && !d.features.resume);
}

#[tokio::test]
async fn malformed_descriptors_are_refused_naming_the_plugin() {
    let long = "x".repeat(500);
    let toml = entry("empty", "faulty_provider", "name = \"\", mode = \"ok\"")
        + &entry(
            "huge",
            "faulty_provider",
            &format!("name = \"{long}\", mode = \"ok\""),
        )
        + &entry("spaces", "faulty_provider", "name = \"a b\", mode = \"ok\"")
        + &mock("good", "");
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    assert_eq!(report.failed.len(), 3);
    for (id, needle) in [
        ("empty", "name is empty"),
        ("huge", "500 bytes"),
        ("spaces", "may only contain"),
    ] {
        let e = report
            .failed
            .iter()
            .find(|e| e.id() == id)
            .unwrap_or_else(|| panic!("no error for {id}: {:?}", report.failed));
        assert!(e.to_string().contains("INVALID_DESCRIPTOR"), "{e}");
        assert!(e.to_string().contains(needle), "{e}");
    }
    assert_eq!(host.subagents().list().len(), 1, "only the good provider");
}

#[tokio::test]
async fn duplicate_name_fails_and_first_stays() {
    // `first` and `second` both declare the name `first`; a tool follows it.
    let toml = mock("first", "reply = \"one\"")
        + &entry(
            "second",
            "mock_provider",
            "name = \"first\", reply = \"two\"",
        )
        + &entry(
            "ask",
            "subagent_tool",
            "provider = \"first\", toolName = \"ask\"",
        );
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    assert_eq!(report.failed.len(), 1, "{}", report.failures());
    let e = report.failed[0].to_string();
    assert!(
        report.failed[0].id() == "second" && e.contains("DUPLICATE_PROVIDER"),
        "the later entry is the duplicate: {e}"
    );
    let state = |plugins: &[seam_host::PluginInfo], id: &str| {
        plugins.iter().find(|p| p.id == id).unwrap().state.clone()
    };
    let plugins = host.plugins().await;
    assert_eq!(state(&plugins, "first"), PluginState::Active);
    assert!(matches!(state(&plugins, "second"), PluginState::Failed(_)));
    // The first entry keeps serving, directly and through its tool.
    let first_serves = || {
        let host = host.clone();
        async move {
            let run = host.subagents().start("first", request("hi")).unwrap();
            let text = words(&run.result().await.unwrap());
            run.dispose().await;
            assert_eq!(text, "one");
            let r = host
                .call_tool(
                    "ask",
                    seam_host::ParentRef::top_level("p", "/w"),
                    &json!({"description": "d", "prompt": "p"}).to_string(),
                    tokio_util::sync::CancellationToken::new(),
                )
                .await
                .unwrap();
            assert!(!r.is_error, "{r:?}");
            assert_eq!(r.text(), "one");
        }
    };
    first_serves().await;

    // A later duplicate is refused too and changes nothing: no removal, no remount.
    let seen = record(&host);
    let again = toml
        + &entry(
            "third",
            "mock_provider",
            "name = \"first\", reply = \"three\"",
        );
    let report = host.reconfigure(&config(&again)).await;
    let failed: Vec<String> = report.failed.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        failed.len(),
        2,
        "second is retried, third is new: {failed:#?}"
    );
    for id in ["second", "third"] {
        assert!(
            report
                .failed
                .iter()
                .any(|e| e.id() == id && e.to_string().contains("DUPLICATE_PROVIDER")),
            "{id}: {failed:#?}"
        );
    }
    assert_eq!(report.kept, ["first", "ask"]);
    assert_eq!(host.subagents().list().len(), 1);
    first_serves().await;
    let churn: Vec<&str> = names(&seen)
        .into_iter()
        .filter(|n| n.starts_with("subagent/provider") || n.starts_with("tool/"))
        .collect();
    assert!(churn.is_empty(), "{churn:?}");
}

#[tokio::test]
async fn unknown_provider_is_no_provider() {
    let host = host_with(&mock("a", "")).await;
    let err = host.subagents().start("nope", request("hi")).unwrap_err();
    assert_eq!(err, SubagentError::NoProvider("nope".into()));
    assert_eq!(host.live_runs(), 0);
}

fn all_features() -> seam_host::StartRequest {
    let mut r = request("task");
    r.output_schema = Some(json!({"type": "object", "properties": {"reply": {"type": "string"}}}));
    r.max_depth = Some(3);
    r.tool_filter = Some(ToolFilter {
        allow: Some(vec!["read".into()]),
        deny: None,
    });
    r.persona = Some("terse".into());
    r
}

#[tokio::test]
async fn capabilities_are_checked_in_order_before_any_instance() {
    let caps = [
        ("none", "", "output-schema"),
        ("s", "outputSchema = true", "depth-limit"),
        (
            "sd",
            "outputSchema = true, depthLimit = true",
            "tool-filter",
        ),
        (
            "sdt",
            "outputSchema = true, depthLimit = true, toolFilter = true",
            "persona",
        ),
    ];
    let toml: String = caps
        .iter()
        .map(|(id, c, _)| mock(id, &format!("capabilities = {{ {c} }}")))
        .collect();
    let host = host_with(&toml).await;
    for (id, _, missing) in caps {
        let err = host.subagents().start(id, all_features()).unwrap_err();
        assert_eq!(
            err,
            SubagentError::UnsupportedCapability {
                provider: id.into(),
                capability: missing.into()
            }
        );
        assert_eq!(err.code(), "UNSUPPORTED_CAPABILITY");
        assert_eq!(host.live_runs(), 0, "no run for {id}");
        assert_eq!(host.live_instances(), 0, "no instance for {id}");
    }
}

#[tokio::test]
async fn each_capability_is_accepted_when_present() {
    let host = host_with(&mock(
        "all",
        "capabilities = { outputSchema = true, depthLimit = true, toolFilter = true, persona = true }, reply = \"p={persona}\"",
    ))
    .await;
    let run = host.subagents().start("all", all_features()).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert!(result.stop_reason.is_success());
    assert_eq!(words(&result), "p=terse");
    assert_eq!(result.structured, Some(json!({"reply": "p=terse"})));
}

#[tokio::test]
async fn malformed_requests_fail_before_start() {
    let host = host_with(&mock(
        "all",
        "capabilities = { outputSchema = true, depthLimit = true, toolFilter = true, persona = true }",
    ))
    .await;
    let cases: Vec<(&str, seam_host::StartRequest)> = vec![
        ("max-depth must be 0 or more", {
            let mut r = request("x");
            r.max_depth = Some(-1);
            r
        }),
        ("absurd", {
            let mut r = request("x");
            r.max_depth = Some(1_000_000);
            r
        }),
        ("needs `allow` or `deny`", {
            let mut r = request("x");
            r.tool_filter = Some(ToolFilter::default());
            r
        }),
        ("outside the supported schema subset", {
            let mut r = request("x");
            r.output_schema = Some(json!({"type": "object", "oneOf": []}));
            r
        }),
        ("must be an object schema", {
            let mut r = request("x");
            r.output_schema = Some(json!({"type": "array"}));
            r
        }),
        ("not a JSON Schema type", {
            let mut r = request("x");
            r.output_schema =
                Some(json!({"type": "object", "properties": {"a": {"type": "thing"}}}));
            r
        }),
        ("prompt is empty", request("  ")),
        ("not valid JSON", {
            let mut r = request("x");
            r.prompt.push(seam_host::ContentBlock::Json("{nope".into()));
            r
        }),
    ];
    for (needle, r) in cases {
        let err = host.subagents().start("all", r).unwrap_err();
        assert_eq!(err.code(), "INVALID_REQUEST", "{needle}: {err}");
        assert!(err.to_string().contains(needle), "{needle}: {err}");
    }
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn depth_beyond_max_is_refused_with_both_depths() {
    let host = host_with(&mock("d", "capabilities = { depthLimit = true }")).await;
    let mut r = request("x");
    r.parent.depth = 2;
    r.max_depth = Some(2);
    let err = host.subagents().start("d", r).unwrap_err();
    assert_eq!(
        err,
        SubagentError::DepthExceeded {
            attempted: 3,
            max: 2
        }
    );
    let mut r = request("x");
    r.parent.depth = 1;
    r.max_depth = Some(2);
    let run = host.subagents().start("d", r).unwrap();
    assert!(run.result().await.unwrap().stop_reason.is_success());
    run.dispose().await;
}

// The request is moved into `start`, so a caller cannot mutate it afterwards; what the host
// keeps is its snapshot, and the one place that snapshot is read again is `resume`. A resumed
// run must see the options given at start (model, system prompt, persona, parent), not the
// caller's later copy nor defaults.
#[tokio::test]
async fn resume_reuses_the_request_snapshotted_at_start() {
    let toml = "[agent]\nmodel = \"scripted:default\"\npersona = \"deployment\"\n\n\
        [models.scripts.default]\nsteps = [ { text = \"default model\" } ]\n\n\
        [models.scripts.echo]\nsteps = [ { text = \"echo <{system}> {prompt}\" } ]\n\n"
        .to_string()
        + &entry("spawn", "spawn_provider", "");
    let host = host_with(&toml).await;
    let mut events = watch_events(&host);
    let mut mine = request("first");
    mine.parent.id = "caller".into();
    mine.parent.depth = 2;
    mine.agent_options = Some(seam_host::AgentOptions {
        model: Some("scripted:echo".into()),
        system_prompt: Some("be exact".into()),
    });
    mine.persona = Some("pirate".into());
    mine.max_depth = Some(3);
    let run = host.subagents().start("spawn", mine.clone()).unwrap();
    // The caller's copy changes after start; none of it may reach either run.
    mine.agent_options = None;
    mine.persona = Some("mutated".into());
    mine.parent.depth = 9;
    let first = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(words(&first), "echo <be exact\n\nPersona: pirate> first");

    let resumed = host
        .subagents()
        .resume(&run, vec![seam_host::ContentBlock::text("again")])
        .unwrap();
    let second = resumed.result().await.unwrap();
    resumed.dispose().await;
    assert_eq!(
        words(&second),
        "echo <be exact\n\nPersona: pirate> again",
        "the resumed child runs with the snapshot's model, system prompt and persona"
    );
    wait_for(&mut events, "both runs' start", |seen| {
        seen.iter()
            .filter(|e| matches!(e, seam_host::Event::SubagentStart { .. }))
            .count()
            == 2
    })
    .await;
    let parents: Vec<(String, u32)> = events
        .borrow()
        .iter()
        .filter_map(|e| match e {
            seam_host::Event::SubagentStart { parent, .. } => {
                Some((parent.id.clone(), parent.depth))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        parents,
        [("caller".to_string(), 2), ("caller".to_string(), 2)]
    );
    let depths: Vec<u32> = events
        .borrow()
        .iter()
        .filter_map(|e| match e {
            seam_host::Event::AgentCreated { depth, .. } => Some(*depth),
            _ => None,
        })
        .collect();
    assert_eq!(depths, [3, 3], "both children at the snapshot's depth + 1");
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_agents(), 0);
}

#[tokio::test]
async fn removing_a_provider_cancels_and_disposes_its_runs() {
    let host = host_with(&(mock("slow", "delayMs = 10000") + &mock("other", ""))).await;
    let seen = record(&host);
    let run = host.subagents().start("slow", request("x")).unwrap();
    run.started().await.unwrap();
    assert_eq!(host.live_runs(), 1);
    let report = host.reconfigure(&config(&mock("other", ""))).await;
    assert_eq!(report.unloaded, vec!["slow".to_string()]);
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, seam_host::StopReason::Aborted);
    assert!(run.is_disposed());
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
    let names = names(&seen);
    let end = names.iter().position(|n| *n == "subagent/end").unwrap();
    let removed = names
        .iter()
        .position(|n| *n == "subagent/provider-removed")
        .unwrap();
    assert!(end < removed, "{names:?}");
    assert!(host.subagents().descriptor("slow").is_none());
    // Re-registration after removal works.
    loaded(
        host.reconfigure(&config(&(mock("slow", "") + &mock("other", ""))))
            .await,
    );
    let run = host.subagents().start("slow", request("x")).unwrap();
    assert!(run.result().await.unwrap().stop_reason.is_success());
    run.dispose().await;
}

#[tokio::test]
async fn list_is_in_registration_order() {
    let host = test_host();
    let mut toml = String::new();
    for id in ["zeta", "alpha", "mid"] {
        toml += &mock(id, "");
        loaded(host.reconfigure(&config(&toml)).await);
    }
    let names: Vec<String> = host
        .subagents()
        .list()
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(names, ["zeta", "alpha", "mid"]);
}

#[tokio::test]
async fn what_was_registered_does_not_change_when_the_component_file_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.wasm");
    std::fs::copy(guest("mock_provider"), &file).unwrap();
    let toml = format!(
        "[[plugin]]\nid = \"p\"\ncomponent = \"{}\"\nconfig = {{ name = \"p\", reply = \"original\" }}\n",
        file.display()
    );
    let host = host_with(&toml).await;
    let before = host.subagents().descriptor("p").unwrap();
    // Swap the file for a different component: the registered provider is frozen.
    std::fs::copy(guest("faulty_provider"), &file).unwrap();
    let run = host.subagents().start("p", request("x")).unwrap();
    assert_eq!(words(&run.result().await.unwrap()), "original");
    run.dispose().await;
    assert_eq!(host.subagents().descriptor("p").unwrap(), before);
}
