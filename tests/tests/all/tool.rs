//! CONTRACT section 5: the model-facing `subagent` tool component.

use seam_host::{ParentRef, PluginState, StopReason};
use seam_tests::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn tool(id: &str, provider: &str, extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { ", " };
    entry(
        id,
        "subagent_tool",
        &format!("provider = \"{provider}\", toolName = \"{id}\"{sep}{extra}"),
    )
}

fn caller() -> ParentRef {
    ParentRef::top_level("agent-0", "/work")
}

fn args(prompt: &str) -> String {
    json!({"description": "a task", "prompt": prompt}).to_string()
}

#[tokio::test]
async fn the_model_sees_description_and_prompt_only_with_wording_from_the_provider() {
    let toml = mock("spawnish", "")
        + &mock("forkish", "inheritsParentContext = true")
        + &tool("delegate", "spawnish", "")
        + &tool("branch", "forkish", "");
    let host = host_with(&toml).await;
    let tools = host.tool_descriptors();
    assert_eq!(tools.len(), 2);
    for t in &tools {
        assert_eq!(
            t.parameters["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["description", "prompt"]
        );
        assert_eq!(t.parameters["required"], json!(["description", "prompt"]));
        assert_eq!(t.parameters["additionalProperties"], json!(false));
    }
    let spawn = tools.iter().find(|t| t.name == "delegate").unwrap();
    let fork = tools.iter().find(|t| t.name == "branch").unwrap();
    assert!(
        spawn.description.contains("standalone"),
        "{}",
        spawn.description
    );
    assert!(!spawn.description.contains("sees the completed turns"));
    assert!(
        fork.description.contains("sees the completed turns"),
        "{}",
        fork.description
    );
}

#[tokio::test]
async fn two_instances_are_bound_to_two_providers() {
    let toml = mock("a", "reply = \"from a: {prompt}\"")
        + &mock("b", "reply = \"from b: {prompt}\"")
        + &tool("ask_a", "a", "")
        + &tool("ask_b", "b", "");
    let host = host_with(&toml).await;
    for (tool, expected) in [("ask_a", "from a: hello"), ("ask_b", "from b: hello")] {
        let r = host
            .call_tool(tool, caller(), &args("hello"), CancellationToken::new())
            .await
            .unwrap();
        assert!(!r.is_error, "{r:?}");
        assert_eq!(r.text(), expected);
    }
    assert_eq!(host.live_runs(), 0, "the tool disposed its runs");
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn a_duplicate_tool_name_is_a_clear_error_and_the_first_stays() {
    let toml = mock("a", "reply = \"from a\"")
        + &mock("b", "reply = \"from b\"")
        + &entry(
            "t1",
            "subagent_tool",
            "provider = \"a\", toolName = \"same\"",
        )
        + &entry(
            "t2",
            "subagent_tool",
            "provider = \"b\", toolName = \"same\"",
        );
    let host = test_host();
    let report = host.load(&config(&toml)).await;
    assert_eq!(report.failed.len(), 1, "{}", report.failures());
    assert_eq!(report.failed[0].id(), "t2");
    let e = report.failed[0].to_string();
    assert!(
        e.contains("tool name `same` is already used by plugin `t1`"),
        "{e}"
    );
    let tools = host.tool_descriptors();
    assert_eq!(tools.len(), 1);
    // The first entry's tool is the one mounted, and it still serves its own provider.
    let r = host
        .call_tool("same", caller(), &args("x"), CancellationToken::new())
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.text(), "from a");
    assert_eq!(host.plugins().await[2].state, PluginState::Active);
}

#[tokio::test]
async fn the_tool_follows_its_provider_in_any_load_order() {
    let host = test_host();
    let seen = record(&host);
    // The tool loads first; its provider does not exist yet.
    let t = tool("ask", "late", "");
    loaded(host.load(&config(&t)).await);
    assert!(host.tool_descriptors().is_empty());
    let waiting = host.tools().unmounted().await;
    assert_eq!(
        waiting,
        [seam_host::tool::WaitingTool {
            plugin: "ask".into(),
            tool_name: "ask".into(),
            provider: Some("late".into()),
        }]
    );
    let err = host
        .call_tool("ask", caller(), &args("x"), CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err, seam_host::ToolError::NotMounted("ask".into()));

    // Another provider's arrival changes nothing.
    loaded(
        host.reconfigure(&config(&(t.clone() + &mock("other", ""))))
            .await,
    );
    assert!(host.tool_descriptors().is_empty());

    // Its provider arrives: mounted.
    let with = t.clone() + &mock("other", "") + &mock("late", "reply = \"hi\"");
    loaded(host.reconfigure(&config(&with)).await);
    assert_eq!(host.tool_descriptors().len(), 1);
    let r = host
        .call_tool("ask", caller(), &args("x"), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(r.text(), "hi");

    // Removed: unmounted. Back: remounted.
    loaded(
        host.reconfigure(&config(&(t.clone() + &mock("other", ""))))
            .await,
    );
    assert!(host.tool_descriptors().is_empty());
    loaded(host.reconfigure(&config(&with)).await);
    assert_eq!(host.tool_descriptors().len(), 1);
    let mounts = names(&seen)
        .into_iter()
        .filter(|n| n.starts_with("tool/"))
        .collect::<Vec<_>>();
    assert_eq!(mounts, ["tool/mounted", "tool/unmounted", "tool/mounted"]);
    let plugins = host.plugins().await;
    assert!(plugins.iter().all(|p| p.state == PluginState::Active));
}

#[tokio::test]
async fn non_completed_runs_become_error_results() {
    let toml = mock(
        "bad",
        "stopReason = \"max-tokens\", reply = \"half an answ\"",
    ) + &mock("no", "stopReason = \"refusal\", reply = \"I won't\"")
        + &mock("odd", "stopReason = \"weird\", reply = \"who knows\"")
        + &entry(
            "trap",
            "faulty_provider",
            "name = \"trap\", mode = \"trap-after-ready\"",
        )
        + &tool("ask_bad", "bad", "")
        + &tool("ask_no", "no", "")
        + &tool("ask_odd", "odd", "")
        + &tool("ask_trap", "trap", "");
    let host = host_with(&toml).await;
    // Each is an error result led by its stop reason; partial output is only ever reported as
    // partial, never as the answer. An unknown reason is a failure like any other.
    for (tool, reason, rest) in [
        ("ask_bad", "max-tokens", "partial output: half an answ"),
        ("ask_no", "refusal", "partial output: I won't"),
        ("ask_odd", "weird", "partial output: who knows"),
        ("ask_trap", "error", "provider `trap` failed"),
    ] {
        let r = host
            .call_tool(tool, caller(), &args("x"), CancellationToken::new())
            .await
            .unwrap();
        assert!(r.is_error, "{tool}: {r:?}");
        let text = r.text();
        assert!(
            text.starts_with(&format!(
                "subagent `{tool}` ended with stop reason `{reason}`"
            )),
            "{tool}: {text}"
        );
        assert!(text.contains(rest), "{tool}: {text}");
    }
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn aborting_the_call_aborts_the_run_and_disposes_it() {
    let toml = mock("slow", "delayMs = 10000") + &tool("ask", "slow", "");
    let host = host_with(&toml).await;
    let seen = record(&host);
    let mut events = watch_events(&host);
    let abort = CancellationToken::new();
    let call = {
        let host = host.clone();
        let abort = abort.clone();
        tokio::spawn(async move { host.call_tool("ask", caller(), &args("x"), abort).await })
    };
    wait_for(&mut events, "the run's subagent/start", |seen| {
        seen.iter().any(|e| e.name() == "subagent/start")
    })
    .await;
    abort.cancel();
    let r = call.await.unwrap().unwrap();
    assert!(r.is_error);
    assert!(r.text().contains("aborted"), "{}", r.text());
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
    let events = seen.lock().unwrap().clone();
    assert!(events.iter().any(|e| matches!(
        e,
        seam_host::Event::SubagentEnd {
            stop_reason: StopReason::Aborted,
            ..
        }
    )));
}

#[tokio::test]
async fn tool_config_reaches_the_request_and_capabilities_are_enforced() {
    let toml = mock(
        "p",
        "reply = \"{persona}/{model}\", capabilities = { persona = true, depthLimit = true }",
    ) + &mock("plain", "")
        + &tool(
            "styled",
            "p",
            "persona = \"pirate\", agentOptions = { model = \"scripted\" }",
        )
        + &tool("capped", "p", "maxDepth = 0")
        + &tool("unsupported", "plain", "persona = \"pirate\"");
    let host = host_with(&toml).await;
    let call = |name: &'static str| {
        let host = host.clone();
        async move {
            host.call_tool(name, caller(), &args("x"), CancellationToken::new())
                .await
                .unwrap()
        }
    };
    let r = call("styled").await;
    assert_eq!(r.text(), "pirate/scripted");
    let r = call("capped").await;
    assert!(r.is_error, "{r:?}");
    assert_eq!(
        r.text(),
        "subagent: DEPTH_EXCEEDED: the child would be at depth 1 but max-depth is 0"
    );
    let r = call("unsupported").await;
    assert!(r.is_error, "{r:?}");
    assert_eq!(
        r.text(),
        "subagent: UNSUPPORTED_CAPABILITY: provider `plain` does not support `persona`"
    );
}

#[tokio::test]
async fn the_host_not_the_tool_says_who_the_caller_is() {
    let toml = mock("p", "reply = \"{parent}@{depth}\"") + &tool("ask", "p", "");
    let host = host_with(&toml).await;
    let mut who = caller();
    who.id = "agent-7".into();
    who.depth = 2;
    let r = host
        .call_tool("ask", who, &args("x"), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(r.text(), "agent-7@2");
}

#[tokio::test]
async fn bad_arguments_are_error_results_not_crashes() {
    let host = host_with(&(mock("p", "") + &tool("ask", "p", ""))).await;
    for bad in [
        "not json",
        "[]",
        r#"{"description":"d"}"#,
        r#"{"description":"d","prompt":""}"#,
        r#"{"description":"d","prompt":"p","provider":"x"}"#,
    ] {
        let r = host
            .call_tool("ask", caller(), bad, CancellationToken::new())
            .await
            .unwrap();
        assert!(r.is_error, "{bad}: {r:?}");
    }
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test]
async fn tool_config_is_validated_at_load() {
    let host = test_host();
    let toml = entry("nop", "subagent_tool", "toolName = \"x\"")
        + &entry("neg", "subagent_tool", "provider = \"p\", maxDepth = -1")
        + &entry(
            "empty",
            "subagent_tool",
            "provider = \"p\", toolFilter = {}",
        )
        + &entry("odd", "subagent_tool", "provider = \"p\", colour = \"red\"");
    let report = host.load(&config(&toml)).await;
    assert_eq!(report.failed.len(), 4, "{:?}", report.failed);
    for (id, key) in [
        ("nop", "provider"),
        ("neg", "maxDepth"),
        ("empty", "toolFilter"),
        ("odd", "colour"),
    ] {
        let e = report
            .failed
            .iter()
            .find(|e| e.id() == id)
            .map(|e| e.to_string())
            .unwrap_or_else(|| panic!("no error for {id}"));
        assert!(e.contains(key), "{id}: {e}");
    }
}

#[tokio::test]
async fn an_unloaded_tool_plugin_is_unmounted_for_good() {
    let with_tool = mock("p", "reply = \"hi\"") + &tool("ask", "p", "");
    let host = host_with(&with_tool).await;
    assert_eq!(host.tool_descriptors().len(), 1);
    let seen = record(&host);
    let report = loaded(
        host.reconfigure(&config(&mock("p", "reply = \"hi\"")))
            .await,
    );
    assert_eq!(report.unloaded, ["ask"]);
    let gone = |host: &seam_host::Host| {
        let host = host.clone();
        async move {
            assert!(host.tool_descriptors().is_empty());
            assert!(
                host.tools().unmounted().await.is_empty(),
                "not even waiting"
            );
            let err = host
                .call_tool("ask", caller(), &args("x"), CancellationToken::new())
                .await
                .unwrap_err();
            assert_eq!(err, seam_host::ToolError::NotMounted("ask".into()));
        }
    };
    gone(&host).await;
    // Its provider leaving and coming back (changed, so reloaded) does not bring it back.
    loaded(
        host.reconfigure(&config(&mock("p", "reply = \"changed\"")))
            .await,
    );
    loaded(host.reconfigure(&config("")).await);
    loaded(host.reconfigure(&config(&mock("p", ""))).await);
    assert!(host.subagents().descriptor("p").is_some());
    gone(&host).await;
    let tool_events: Vec<seam_host::Event> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.name().starts_with("tool/"))
        .cloned()
        .collect();
    assert_eq!(
        tool_events,
        [seam_host::Event::ToolUnmounted {
            name: "ask".into(),
            plugin: "ask".into()
        }]
    );
}

#[tokio::test]
async fn a_provider_that_comes_back_changed_rederives_the_tools_wording() {
    const STANDALONE: &str = "does NOT see this conversation";
    const FORKED: &str = "sees the completed turns";
    let host = test_host();
    let seen = record(&host);
    let prompt_wording = |d: &seam_host::ToolDescriptor| {
        d.parameters["properties"]["prompt"]["description"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for (inherits, wording, not) in [
        (false, STANDALONE, FORKED),
        (true, FORKED, STANDALONE),
        (false, STANDALONE, FORKED),
    ] {
        let toml =
            mock("p", &format!("inheritsParentContext = {inherits}")) + &tool("ask", "p", "");
        let report = loaded(host.reconfigure(&config(&toml)).await);
        let tools = host.tool_descriptors();
        assert_eq!(tools.len(), 1, "{inherits}");
        let d = &tools[0];
        assert!(
            d.description.contains(wording),
            "{inherits}: {}",
            d.description
        );
        assert!(
            !d.description.contains(not),
            "{inherits}: {}",
            d.description
        );
        assert!(
            prompt_wording(d).contains(wording),
            "{inherits}: {}",
            prompt_wording(d)
        );
        assert_eq!(
            host.subagents()
                .descriptor("p")
                .unwrap()
                .inherits_parent_context,
            inherits
        );
        // The tool entry itself never changed: only its provider was reloaded.
        if report.reloaded.is_empty() {
            assert_eq!(report.loaded, ["p", "ask"]);
        } else {
            assert_eq!(report.reloaded, ["p"]);
            assert_eq!(report.kept, ["ask"]);
        }
    }
    let mounts: Vec<&str> = names(&seen)
        .into_iter()
        .filter(|n| n.starts_with("tool/"))
        .collect();
    assert_eq!(
        mounts,
        [
            "tool/mounted",
            "tool/unmounted",
            "tool/mounted",
            "tool/unmounted",
            "tool/mounted"
        ]
    );
}

#[tokio::test]
async fn without_tool_name_the_tool_mounts_as_subagent_with_description_and_prompt() {
    let toml = mock("m", "reply = \"did: {prompt}\"")
        + &entry("plain", "subagent_tool", "provider = \"m\"");
    let host = host_with(&toml).await;
    let tools = host.tool_descriptors();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["subagent"]);
    assert_eq!(host.tools().get("subagent").unwrap().plugin, "plain");
    // Exactly these parameters, the model may add nothing else.
    assert_eq!(
        tools[0].parameters,
        json!({
            "type": "object",
            "properties": {
                "description": tools[0].parameters["properties"]["description"],
                "prompt": tools[0].parameters["properties"]["prompt"],
            },
            "required": ["description", "prompt"],
            "additionalProperties": false,
        }),
        "{:#}",
        tools[0].parameters
    );
    for key in ["description", "prompt"] {
        assert_eq!(
            tools[0].parameters["properties"][key]["type"],
            json!("string"),
            "{key}"
        );
    }
    let r = host
        .call_tool(
            "subagent",
            caller(),
            &args("the task"),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.text(), "did: the task");
    // An extra argument is refused, not passed on.
    let r = host
        .call_tool(
            "subagent",
            caller(),
            &json!({"description": "d", "prompt": "p", "model": "x"}).to_string(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(r.is_error, "{r:?}");
    assert_eq!(host.live_runs(), 0);
}
