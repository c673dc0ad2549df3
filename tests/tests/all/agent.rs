//! CONTRACT section 6 and the child-dependent parts of section 3: the agent runtime and the
//! in-process `spawn` and `fork` provider components.

use std::sync::{Arc, Mutex};

use seam_host::agent::{Session, SessionEvent};
use seam_host::{ContentBlock, Event, Host, StopReason, ToolFilter};
use seam_tests::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Spawn and fork providers, and a `delegate` / `branch` tool on each.
fn providers(tool_extra: &str) -> String {
    let sep = if tool_extra.is_empty() { "" } else { ", " };
    entry("spawn", "spawn_provider", "")
        + &entry("fork", "fork_provider", "")
        + &entry(
            "delegate",
            "subagent_tool",
            &format!("provider = \"spawn\", toolName = \"delegate\", agentOptions = {{ model = \"scripted:child\" }}{sep}{tool_extra}"),
        )
        + &entry(
            "branch",
            "subagent_tool",
            &format!("provider = \"fork\", toolName = \"branch\", agentOptions = {{ model = \"scripted:child\" }}{sep}{tool_extra}"),
        )
}

fn call(tool: &str, prompt: &str) -> String {
    format!(
        "{{ name = \"{tool}\", arguments = {{ description = \"task\", prompt = \"{prompt}\" }} }}"
    )
}

/// Runs one turn of a new top-level agent and disposes it; returns its outcome text and reason.
async fn ask(host: &Host, prompt: &str) -> (String, StopReason) {
    let agent = host.create_agent(None, "/work/project").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text(prompt)]).await;
    host.agents().dispose(agent.id()).await;
    (seam_host::blocks_text(&outcome.output), outcome.stop_reason)
}

/// Snapshots of each child's session taken when its run announced `subagent/start`.
fn child_sessions(host: &Host) -> Arc<Mutex<Vec<(String, u32, Session)>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let agents = host.agents().clone();
    host.events().subscribe(move |e| {
        if let Event::SubagentStart { id, .. } = e {
            // The run id is the child's agent id: it is live in the registry at `started`.
            let child = agents.get(&id).ok_or("child not published at start")?;
            sink.lock()
                .unwrap()
                .push((id, child.spec().depth, child.session()));
        }
        Ok(())
    });
    seen
}

/// A top-level request whose child runs on `model`.
fn on_model(prompt: &str, model: &str) -> seam_host::StartRequest {
    let mut r = request(prompt);
    r.agent_options = Some(seam_host::AgentOptions {
        model: Some(model.into()),
        system_prompt: None,
    });
    r
}

fn assert_quiescent(host: &Host) {
    assert_eq!(host.live_agents(), 0, "agents");
    assert_eq!(host.live_runs(), 0, "runs");
    assert_eq!(host.live_instances(), 0, "instances");
}

#[tokio::test]
async fn spawn_child_has_lineage_an_empty_log_and_returns_only_its_answer() {
    let toml = format!(
        "[agent]\nmodel = \"scripted:parent\"\n\n[models.scripts.parent]\nsteps = [ {{ tool_calls = [{}] }}, {{ text = \"parent got: {{tool_results}}\" }} ]\n\n[models.scripts.child]\nsteps = [ {{ text = \"step one\", tool_calls = [] }} ]\n\n",
        call("delegate", "do the thing")
    ) + &providers("");
    let host = host_with(&toml).await;
    let children = child_sessions(&host);
    let (text, reason) = ask(&host, "go").await;
    assert_eq!(reason, StopReason::Completed);
    assert_eq!(text, "parent got: step one");
    let children = children.lock().unwrap();
    let (_, depth, session) = &children[0];
    assert_eq!(*depth, 1);
    assert_eq!(session.header.working_directory, "/work/project");
    assert!(session
        .header
        .parent_session
        .as_deref()
        .unwrap()
        .starts_with("session-"));
    assert!(
        session.events().is_empty(),
        "fresh child: {:?}",
        session.events()
    );
    drop(children);
    assert_quiescent(&host);
}

#[tokio::test]
async fn fork_seed_is_the_balanced_completed_prefix_and_the_parent_output_never_returns() {
    let toml = format!(
        "[agent]\nmodel = \"scripted:parent\"\n\n[models.scripts.parent]\nsteps = [ {{ text = \"first answer\" }}, {{ tool_calls = [{}] }}, {{ text = \"{{tool_results}}\" }} ]\n\n[models.scripts.child]\nsteps = [ {{ text = \"child saw: {{prompt}}\" }} ]\n\n",
        call("branch", "second look")
    ) + &providers("");
    let host = host_with(&toml).await;
    let children = child_sessions(&host);
    let agent = host.create_agent(None, "/w").unwrap();
    let first = agent.run_turn(vec![ContentBlock::text("turn one")]).await;
    assert_eq!(seam_host::blocks_text(&first.output), "first answer");
    let prefix = agent.session().completed_prefix();
    let second = agent.run_turn(vec![ContentBlock::text("turn two")]).await;
    assert_eq!(
        seam_host::blocks_text(&second.output),
        "child saw: second look"
    );
    {
        let children = children.lock().unwrap();
        let seed = children[0].2.events();
        assert_eq!(seed, &prefix[..], "exactly the completed prefix");
        assert!(matches!(
            seed.last(),
            Some(SessionEvent::TurnEnd { turn: 1, .. })
        ));
        // The turn in flight (turn two, which made the call) is not in the seed.
        assert!(!seed
            .iter()
            .any(|e| matches!(e, SessionEvent::TurnStart { turn: 2 })));
    }
    host.agents().dispose(agent.id()).await;
    assert_quiescent(&host);
}

#[tokio::test]
async fn fork_without_a_completed_turn_starts_unseeded() {
    let toml = format!(
        "[agent]\nmodel = \"scripted:parent\"\n\n[models.scripts.parent]\nsteps = [ {{ tool_calls = [{}] }}, {{ text = \"{{tool_results}}\" }} ]\n\n[models.scripts.child]\nsteps = [ {{ text = \"forked\" }} ]\n\n",
        call("branch", "x")
    ) + &providers("");
    let host = host_with(&toml).await;
    let children = child_sessions(&host);
    assert_eq!(ask(&host, "go").await.0, "forked");
    assert!(children.lock().unwrap()[0].2.events().is_empty());
}

#[tokio::test]
async fn depth_grows_by_one_and_is_refused_past_max_depth_three_levels_down() {
    // Every level runs the same script: delegate once, then report what came back.
    let toml = format!(
        "[agent]\nmodel = \"scripted:child\"\n\n[models.scripts.child]\nsteps = [ {{ tool_calls = [{}] }}, {{ text = \"<{{tool_results}}>\" }} ]\n\n",
        call("delegate", "go deeper")
    ) + &providers("maxDepth = 3");
    let host = host_with(&toml).await;
    let children = child_sessions(&host);
    let (text, reason) = ask(&host, "start").await;
    assert_eq!(reason, StopReason::Completed);
    // Depths 1, 2 and 3 ran; the fourth level was refused with both depths named.
    let depths: Vec<u32> = children.lock().unwrap().iter().map(|c| c.1).collect();
    assert_eq!(depths, [1, 2, 3]);
    assert!(text.contains("DEPTH_EXCEEDED"), "{text}");
    assert!(text.contains("depth 4 but max-depth is 3"), "{text}");
    assert_eq!(text.matches('<').count(), 4, "four levels answered: {text}");
    assert_quiescent(&host);
}

#[tokio::test]
async fn tool_filter_hides_and_refuses_and_unknown_names_are_errors() {
    let toml = format!(
        "[models.scripts.child]\nsteps = [ {{ text = \"sees [{{tools}}]\", tool_calls = [{}] }}, {{ text = \"{{tool_results}}\" }} ]\n\n",
        call("delegate", "sneaky")
    ) + &providers("");
    let host = host_with(&toml).await;
    let start = |filter: ToolFilter| {
        let mut r = on_model("x", "scripted:child");
        r.tool_filter = Some(filter);
        host.subagents().start("spawn", r).unwrap()
    };
    let run = start(ToolFilter {
        allow: None,
        deny: Some(vec!["delegate".into()]),
    });
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert!(
        result.output_text().contains("not available to this agent"),
        "{result:?}"
    );
    let session = run.child_session().unwrap();
    let first_text = session.iter().find_map(|e| match e {
        SessionEvent::AssistantMessage { text, .. } => Some(text.clone()),
        _ => None,
    });
    assert_eq!(
        first_text.as_deref(),
        Some("sees [branch]"),
        "delegate is hidden"
    );

    let run = start(ToolFilter {
        allow: Some(vec!["nonexistent".into()]),
        deny: None,
    });
    let err = run.started().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("`nonexistent`, which is not a mounted tool"),
        "{err}"
    );
    run.dispose().await;
    assert_quiescent(&host);
}

#[tokio::test]
async fn persona_shadows_the_deployment_persona_for_that_child_only() {
    let toml = format!(
        "[agent]\nmodel = \"scripted:parent\"\npersona = \"formal\"\n\n[models.scripts.parent]\nsteps = [ {{ tool_calls = [{}] }}, {{ text = \"parent [{{system}}] child [{{tool_results}}]\" }} ]\n\n[models.scripts.child]\nsteps = [ {{ text = \"{{system}}\" }} ]\n\n",
        call("delegate", "x")
    ) + &providers("persona = \"pirate\"");
    let host = host_with(&toml).await;
    let (text, _) = ask(&host, "go").await;
    assert_eq!(text, "parent [Persona: formal] child [Persona: pirate]");
}

fn structured_request(model: &str) -> seam_host::StartRequest {
    let mut r = on_model("fill the form", model);
    r.output_schema = Some(json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": false
    }));
    r
}

fn tool_results(session: &[SessionEvent]) -> Vec<(String, bool, String)> {
    session
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult {
                name,
                is_error,
                content,
                ..
            } => Some((name.clone(), *is_error, seam_host::blocks_text(content))),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn structured_output_capture_retry_refusal_and_missing_capture() {
    let toml = "[models.scripts.ok]\nsteps = [ { structured = { answer = \"42\" } } ]\n\n\
        [models.scripts.retry]\nsteps = [ { structured = { answer = 7 } }, { structured = { answer = \"fixed\" } } ]\n\n\
        [models.scripts.after]\nsteps = [ { structured = { answer = \"first\" }, tool_calls = [] }, { text = \"unreachable\" } ]\n\n\
        [models.scripts.greedy]\nsteps = [ { tool_calls = [ { name = \"structured_output\", arguments = { answer = \"a\" } }, { name = \"delegate\", arguments = { description = \"d\", prompt = \"p\" } } ] } ]\n\n\
        [models.scripts.none]\nsteps = [ { text = \"plain words\" } ]\n\n"
        .to_string()
        + &providers("");
    let host = host_with(&toml).await;
    let go = |model: &str| {
        let run = host
            .subagents()
            .start("spawn", structured_request(&format!("scripted:{model}")))
            .unwrap();
        async move {
            let result = run.result().await.unwrap();
            run.dispose().await;
            (result, run.child_session().unwrap_or_default())
        }
    };

    let (r, _) = go("ok").await;
    assert_eq!(r.stop_reason, StopReason::Completed, "{r:?}");
    assert_eq!(r.structured, Some(json!({"answer": "42"})));

    let (r, session) = go("retry").await;
    assert_eq!(r.structured, Some(json!({"answer": "fixed"})));
    let results = tool_results(&session);
    assert!(results[0].1, "invalid arguments come back as an error");
    assert!(
        results[0].2.contains("do not match the schema"),
        "{}",
        results[0].2
    );
    assert!(!results[1].1);

    let (r, session) = go("greedy").await;
    assert_eq!(r.structured, Some(json!({"answer": "a"})));
    let results = tool_results(&session);
    assert_eq!(results[1].0, "delegate");
    assert!(
        results[1].1 && results[1].2.contains("already captured"),
        "{results:?}"
    );

    let (r, _) = go("none").await;
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(r.structured, None);
    assert!(r
        .output_text()
        .contains("without calling structured_output"));
    assert_quiescent(&host);
}

#[tokio::test]
async fn cancel_mid_child_reaches_the_child_and_settles_aborted() {
    let toml = "[models.scripts.slow]\nsteps = [ { text = \"late\", delay_ms = 30000 } ]\n\n"
        .to_string()
        + &providers("");
    let host = host_with(&toml).await;
    let seen = record(&host);
    let run = host
        .subagents()
        .start("spawn", on_model("x", "scripted:slow"))
        .unwrap();
    run.started().await.unwrap();
    assert_eq!(host.live_agents(), 1);
    run.cancel(Some("enough".into()));
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    run.dispose().await;
    let turn_end = seen.lock().unwrap().iter().find_map(|e| match e {
        Event::AgentTurnEnd { stop_reason, .. } => Some(stop_reason.clone()),
        _ => None,
    });
    assert_eq!(
        turn_end,
        Some(StopReason::Aborted),
        "the child's own turn was aborted"
    );
    assert_quiescent(&host);
}

#[tokio::test]
async fn dispose_at_any_point_leaves_no_orphan() {
    let toml = "[models.scripts.slow]\nsteps = [ { text = \"late\", delay_ms = 30000 } ]\n\n"
        .to_string()
        + &providers("");
    let host = host_with(&toml).await;
    for i in 0..40u64 {
        let provider = if i % 2 == 0 { "spawn" } else { "fork" };
        let run = host
            .subagents()
            .start(provider, on_model("x", "scripted:slow"))
            .unwrap();
        // From "right away" (during creation) to "well after the child exists".
        tokio::time::sleep(std::time::Duration::from_micros(i * i * 20)).await;
        run.dispose().await;
        assert_quiescent(&host);
    }
}

#[tokio::test]
async fn parent_teardown_disposes_the_whole_tree() {
    let toml = format!(
        "[agent]\nmodel = \"scripted:parent\"\n\n[models.scripts.parent]\nsteps = [ {{ tool_calls = [{}, {}] }} ]\n\n[models.scripts.child]\nsteps = [ {{ tool_calls = [{}] }} ]\n\n[models.scripts.leaf]\nsteps = [ {{ text = \"never\", delay_ms = 30000 }} ]\n\n",
        call("delegate", "a"),
        call("branch", "b"),
        call("leaf", "c"),
    ) + &providers("")
        + &entry(
            "leaf",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"leaf\", agentOptions = { model = \"scripted:leaf\" }",
        );
    let host = host_with(&toml).await;
    let agent = host.create_agent(None, "/w").unwrap();
    let turn = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run_turn(vec![ContentBlock::text("go")]).await })
    };
    // Parent, two children, two grandchildren.
    assert!(
        eventually(|| host.live_agents() == 5).await,
        "{}",
        host.live_agents()
    );
    assert_eq!(host.live_runs(), 4);
    host.agents().dispose(agent.id()).await;
    let outcome = turn.await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Aborted);
    assert_quiescent(&host);
}

#[tokio::test]
async fn spawn_and_fork_coexist_on_one_parent() {
    let toml = format!(
        "[agent]\nmodel = \"scripted:parent\"\n\n[models.scripts.parent]\nsteps = [ {{ tool_calls = [{}, {}] }}, {{ text = \"{{tool_results}}\" }} ]\n\n[models.scripts.child]\nsteps = [ {{ text = \"did {{prompt}}\" }} ]\n\n",
        call("delegate", "spawned work"),
        call("branch", "forked work"),
    ) + &providers("");
    let host = host_with(&toml).await;
    let (text, reason) = ask(&host, "go").await;
    assert_eq!(reason, StopReason::Completed);
    assert_eq!(text, "did spawned work\ndid forked work");
    assert_quiescent(&host);
}

#[tokio::test]
async fn steering_reaches_a_live_child_and_resume_continues_a_finished_one() {
    let toml = "[models.scripts.steer]\nsteps = [ { tool_calls = [ { name = \"nothing\", arguments = {} } ], delay_ms = 300 }, { text = \"heard: {prompt}\" } ]\n\n\
        [models.scripts.again]\nsteps = [ { text = \"first: {prompt}\" }, { text = \"second: {prompt}\" } ]\n\n"
        .to_string()
        + &providers("");
    let host = host_with(&toml).await;
    let with_model = |model: &str| on_model("begin", model);
    let run = host
        .subagents()
        .start("spawn", with_model("scripted:steer"))
        .unwrap();
    run.started().await.unwrap();
    run.send_message(vec![ContentBlock::text("turn left")])
        .unwrap();
    assert_eq!(
        run.result().await.unwrap().output_text(),
        "heard: turn left"
    );
    run.dispose().await;

    let first = host
        .subagents()
        .start("spawn", with_model("scripted:again"))
        .unwrap();
    assert_eq!(first.result().await.unwrap().output_text(), "first: begin");
    first.dispose().await;
    let second = host
        .subagents()
        .resume(&first, vec![ContentBlock::text("more")])
        .unwrap();
    let result = second.result().await.unwrap();
    second.dispose().await;
    // A fresh scripted model answers from step one, but over the resumed session.
    assert_eq!(result.output_text(), "first: more");
    let turns = second
        .child_session()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, SessionEvent::TurnEnd { .. }))
        .count();
    assert_eq!(
        turns, 2,
        "the resumed child continued the first one's session"
    );
    assert_quiescent(&host);
}

#[tokio::test]
async fn runtime_features_are_refused_where_not_declared() {
    let host = host_with(&mock("m", "")).await;
    let run = host.subagents().start("m", request("x")).unwrap();
    run.result().await.unwrap();
    let err = run
        .send_message(vec![ContentBlock::text("hi")])
        .unwrap_err();
    assert_eq!(err.code(), "UNSUPPORTED_FEATURE");
    let err = host
        .subagents()
        .resume(&run, vec![ContentBlock::text("again")])
        .unwrap_err();
    assert_eq!(err.code(), "UNSUPPORTED_FEATURE");
    run.dispose().await;
}

#[tokio::test]
async fn a_model_error_ends_the_child_with_error_and_max_turns_bounds_a_turn() {
    let toml = "[models.scripts.broken]\nsteps = [ { error = \"boom\" } ]\n\n\
        [models.scripts.loop]\nsteps = [ { tool_calls = [ { name = \"x\" } ] }, { tool_calls = [ { name = \"x\" } ] }, { tool_calls = [ { name = \"x\" } ] } ]\n\n\
        [models.scripts.tokens]\nsteps = [ { text = \"trunc\", max_tokens = true } ]\n\n\
        [models.scripts.no]\nsteps = [ { text = \"I won't\", refusal = true } ]\n\n\
        [agent]\nmax_turns = 2\n\n"
        .to_string()
        + &providers("");
    let host = host_with(&toml).await;
    for (model, reason, needle) in [
        ("scripted:broken", StopReason::Error, "boom"),
        ("scripted:loop", StopReason::Error, "bound of 2 model calls"),
        ("scripted:tokens", StopReason::MaxTokens, "trunc"),
        ("scripted:no", StopReason::Refusal, "I won't"),
        ("scripted:missing", StopReason::Error, "no script `missing`"),
    ] {
        let run = host
            .subagents()
            .start("spawn", on_model("x", model))
            .unwrap();
        let _ = run.started().await;
        let result = run.result().await.unwrap();
        run.dispose().await;
        assert_eq!(result.stop_reason, reason, "{model}");
        assert!(result.output_text().contains(needle), "{model}: {result:?}");
    }
    assert_quiescent(&host);
}

#[tokio::test]
async fn the_subagent_tool_maps_child_failure_to_an_error_result() {
    let toml = "[models.scripts.child]\nsteps = [ { error = \"model down\" } ]\n\n".to_string()
        + &providers("");
    let host = host_with(&toml).await;
    let r = host
        .call_tool(
            "delegate",
            seam_host::ParentRef::top_level("p", "/w"),
            &json!({"description": "d", "prompt": "p"}).to_string(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(r.is_error);
    assert!(r.text().contains("error"), "{}", r.text());
    assert_quiescent(&host);
}
