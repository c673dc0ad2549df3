//! CONTRACT section 9: steering, resume, providers that delegate, cancellation as a pollable,
//! and background runs through the subagent tool and the control tools.

use seam_host::agent::SessionEvent;
use seam_host::{ContentBlock, Event, Host, ParentRef, StopReason, ToolResult};
use seam_tests::*;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_component_provider_receives_steering_messages() {
    let host = host_with(
        &(mock(
            "ear",
            r#"steering = true, awaitMessages = 2, reply = "heard: {messages}""#,
        ) + &mock("deaf", "delayMs = 60000")),
    )
    .await;
    let run = host.subagents().start("ear", request("x")).unwrap();
    run.started().await.unwrap();
    run.send_message(vec![ContentBlock::text("left")]).unwrap();
    run.send_message(vec![ContentBlock::text("right")]).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.output_text(), "heard: left | right");
    // Settled: the run cannot be steered any more.
    let err = run
        .send_message(vec![ContentBlock::text("late")])
        .unwrap_err();
    assert_eq!(err.code(), "INVALID_STATE");
    run.dispose().await;

    // Without the feature.
    let run = host.subagents().start("deaf", request("x")).unwrap();
    run.started().await.unwrap();
    let err = run
        .send_message(vec![ContentBlock::text("hello?")])
        .unwrap_err();
    assert_eq!(err.code(), "UNSUPPORTED_FEATURE");
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test]
async fn a_provider_waiting_on_its_pollables_wakes_on_cancel() {
    // A long grace: only the guest waking on its cancel pollable can end the run early, so a
    // busy machine cannot make the host's enforcement look like the guest's doing or the
    // other way round.
    let mut options = test_options();
    options.cancel_grace = std::time::Duration::from_secs(30);
    let host = seam_host::Host::new(options).unwrap();
    loaded(
        host.load(&config(&mock("ear", "steering = true, awaitMessages = 1")))
            .await,
    );
    let run = host.subagents().start("ear", request("x")).unwrap();
    run.started().await.unwrap();
    run.cancel(Some("stop".into()));
    // The guest is parked in `wasi:io/poll.poll` on the message and cancel pollables; it must
    // answer by itself, before the host would enforce the cancel.
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(
        run.aborted(),
        Some(seam_host::subagent::Aborted::Cancelled),
        "the guest saw the cancel: {result:?}"
    );
    run.dispose().await;
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn a_provider_delegates_as_its_own_child_and_is_depth_checked() {
    let host = host_with(
        &(mock(
            "inner",
            r#"reply = "inner saw depth {depth} from {parent}""#,
        ) + &mock(
            "outer",
            r#"delegateTo = "inner", reply = "outer: {delegated}""#,
        ) + &mock("loop", r#"delegateTo = "loop""#)),
    )
    .await;
    let run = host.subagents().start("outer", request("x")).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(
        result.output_text(),
        format!("outer: inner saw depth 1 from {}", run.id())
    );
    run.dispose().await;

    // A provider that delegates to itself stops at the tree's depth bound, and the whole chain
    // unwinds with the refusal named.
    let run = host.subagents().start("loop", request("x")).unwrap();
    let result = tokio::time::timeout(BARRIER_TIMEOUT, run.result())
        .await
        .expect("no hang")
        .unwrap();
    assert_eq!(result.stop_reason, StopReason::Error);
    assert!(
        result
            .diagnostic
            .as_deref()
            .unwrap_or("")
            .contains("DepthExceeded"),
        "{result:?}"
    );
    run.dispose().await;
    // The nested runs the guest started go when its instance's handles are dropped, after its
    // own run settled; no event announces a run's disposal, so this polls the count.
    assert!(eventually(|| host.live_runs() == 0).await);
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn resume_continues_a_settled_child_where_the_provider_declares_it() {
    let toml =
        "[models.scripts.child]\nsteps = [ { text = \"{prompt}, seeing {history} messages\" } ]\n\n"
            .to_string() + &entry("spawn", "spawn_provider", "");
    let host = host_with(&toml).await;
    let mut r = request("go");
    r.agent_options = Some(seam_host::AgentOptions {
        model: Some("scripted:child".into()),
        system_prompt: None,
    });
    let run = host.subagents().start("spawn", r).unwrap();
    assert_eq!(
        run.result().await.unwrap().output_text(),
        "go, seeing 1 messages"
    );
    let again = host
        .subagents()
        .resume(&run, vec![ContentBlock::text("more")])
        .unwrap();
    let result = again.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    // The resumed child starts from the first one's conversation: prompt, answer, new prompt.
    assert_eq!(result.output_text(), "more, seeing 3 messages");
    again.dispose().await;
    run.dispose().await;

    // Through the WIT, from a tool: a background run on `spawn`, finished, then resumed by the
    // control tool, which waits for the new run.
    let host = host_with(
        &(toml_resume_tools()
            + "[models.scripts.child]\nsteps = [ { text = \"{prompt}, seeing {history} messages\" } ]\n\n"),
    )
    .await;
    let owner = host.create_agent(None, "/w").unwrap();
    let me = owner.as_parent();
    let started = call(
        &host,
        "bg",
        &me,
        r#"{"description": "d", "prompt": "go", "run_in_background": true}"#,
    )
    .await;
    let id = run_id(&started);
    let out = call(
        &host,
        "subagent_output",
        &me,
        &format!(r#"{{"id": "{id}", "timeout_ms": 60000}}"#),
    )
    .await;
    assert!(
        out.text().contains("go, seeing 1 messages"),
        "{}",
        out.text()
    );
    let resumed = call(
        &host,
        "subagent_resume",
        &me,
        &format!(r#"{{"id": "{id}", "prompt": "more"}}"#),
    )
    .await;
    assert!(!resumed.is_error, "{}", resumed.text());
    assert!(
        resumed.text().contains("more, seeing 3 messages"),
        "{}",
        resumed.text()
    );
    // Another agent's id is not resumable.
    let stranger = ParentRef::top_level("agent:stranger", "/w");
    let refused = call(
        &host,
        "subagent_resume",
        &stranger,
        &format!(r#"{{"id": "{id}", "prompt": "x"}}"#),
    )
    .await;
    assert!(
        refused.is_error && refused.text().contains("NO_RUN"),
        "{}",
        refused.text()
    );
    host.agents().dispose(owner.id()).await;
    assert_eq!(host.live_runs(), 0);

    // A provider that does not declare it.
    let host = host_with(&mock("m", "")).await;
    let run = host.subagents().start("m", request("x")).unwrap();
    run.result().await.unwrap();
    let err = host
        .subagents()
        .resume(&run, vec![ContentBlock::text("more")])
        .unwrap_err();
    assert_eq!(err.code(), "UNSUPPORTED_FEATURE");
    run.dispose().await;
}

/// A background subagent tool on `spawn` (children on `scripted:child`), and the output and
/// resume control tools.
fn toml_resume_tools() -> String {
    "[agent]\nmodel = \"scripted:idle\"\n\n[models.scripts.idle]\nsteps = [ { text = \"ok\" } ]\n\n"
        .to_string()
        + &entry("spawn", "spawn_provider", "")
        + &entry(
            "bg",
            "subagent_tool",
            r#"provider = "spawn", toolName = "bg", runInBackground = true, agentOptions = { model = "scripted:child" }"#,
        )
        + &entry("output", "subagent_control", r#"action = "output""#)
        + &entry("resume", "subagent_control", r#"action = "resume""#)
}

/// A subagent tool that may run in the background, the four control tools, a slow provider
/// that reports progress and takes steering, and a quick one.
fn background_host_toml() -> String {
    "[agent]\nmodel = \"scripted:idle\"\n\n[models.scripts.idle]\nsteps = [ { text = \"ok\" }, { text = \"ok\" } ]\n\n".to_string()
        + &entry(
        "bg",
        "subagent_tool",
        r#"provider = "slow", toolName = "delegate", runInBackground = true"#,
    ) + &entry(
        "fg",
        "subagent_tool",
        r#"provider = "slow", toolName = "delegate_fg""#,
    ) + &mock(
        "slow",
        r#"steering = true, progress = ["working on it"], awaitMessages = 1, reply = "done: {messages}""#,
    ) + &entry("list", "subagent_control", r#"action = "list""#)
        + &entry("output", "subagent_control", r#"action = "output""#)
        + &entry("stop", "subagent_control", r#"action = "stop""#)
        + &entry("send", "subagent_control", r#"action = "send""#)
}

async fn call(host: &Host, tool: &str, caller: &ParentRef, args: &str) -> ToolResult {
    host.call_tool(tool, caller.clone(), args, CancellationToken::new())
        .await
        .unwrap()
}

fn run_id(started: &ToolResult) -> String {
    let text = started.text();
    let start = text.find('`').expect("the answer names the run") + 1;
    let end = start + text[start..].find('`').unwrap();
    text[start..end].to_string()
}

#[tokio::test]
async fn a_background_run_outlives_its_call_and_is_read_steered_and_listed_by_its_owner() {
    let host = host_with(&background_host_toml()).await;
    let owner = host.create_agent(None, "/w").unwrap();
    let me = owner.as_parent();
    let mut events = watch_events(&host);

    // The foreground tool refuses the argument; the background one answers at once.
    let refused = call(
        &host,
        "delegate_fg",
        &me,
        r#"{"description": "d", "prompt": "p", "run_in_background": true}"#,
    )
    .await;
    assert!(
        refused.is_error && refused.text().contains("unknown argument"),
        "{}",
        refused.text()
    );
    let started = call(
        &host,
        "delegate",
        &me,
        r#"{"description": "survey", "prompt": "p", "run_in_background": true}"#,
    )
    .await;
    assert!(!started.is_error, "{}", started.text());
    let id = run_id(&started);
    // The call is over; the run is not.
    assert_eq!(host.live_runs(), 1);

    let listed = call(&host, "subagent_list", &me, "{}").await;
    assert!(
        listed.text().contains(&id)
            && listed.text().contains("survey")
            && listed.text().contains("running"),
        "{}",
        listed.text()
    );
    // Still waiting for a message: once it has reported, the output is the progress so far.
    wait_for(&mut events, "the run's progress", |seen| {
        seen.iter()
            .any(|e| matches!(e, Event::SubagentProgress { id: run, .. } if *run == id))
    })
    .await;
    let so_far = call(
        &host,
        "subagent_output",
        &me,
        &format!(r#"{{"id": "{id}"}}"#),
    )
    .await;
    assert!(
        so_far.text().contains("still running") && so_far.text().contains("working on it"),
        "{}",
        so_far.text()
    );

    // Another agent cannot see or touch it.
    let stranger = ParentRef::top_level("agent:stranger", "/w");
    for (tool, args) in [
        ("subagent_output", format!(r#"{{"id": "{id}"}}"#)),
        (
            "subagent_send",
            format!(r#"{{"id": "{id}", "message": "hijack"}}"#),
        ),
        ("subagent_stop", format!(r#"{{"id": "{id}"}}"#)),
    ] {
        let r = call(&host, tool, &stranger, &args).await;
        assert!(
            r.is_error && r.text().contains("NO_RUN"),
            "{tool}: {}",
            r.text()
        );
    }
    assert!(call(&host, "subagent_list", &stranger, "{}")
        .await
        .text()
        .contains("no background runs"));

    // Steer it, then wait for its answer.
    let sent = call(
        &host,
        "subagent_send",
        &me,
        &format!(r#"{{"id": "{id}", "message": "go on"}}"#),
    )
    .await;
    assert!(!sent.is_error, "{}", sent.text());
    let out = call(
        &host,
        "subagent_output",
        &me,
        &format!(r#"{{"id": "{id}", "timeout_ms": 60000}}"#),
    )
    .await;
    assert!(
        out.text().contains("finished: completed") && out.text().contains("done: go on"),
        "{}",
        out.text()
    );

    // The owner hears about it once, at the start of its next turn.
    let notices = |agent: &seam_host::agent::Agent| {
        agent
            .session()
            .events()
            .iter()
            .filter(|e| matches!(e, SessionEvent::UserMessage { content } if seam_host::blocks_text(content).contains(&format!("background run `{id}`"))))
            .count()
    };
    owner.run_turn(vec![ContentBlock::text("next")]).await;
    owner.run_turn(vec![ContentBlock::text("and next")]).await;
    assert_eq!(notices(&owner), 1);

    host.agents().dispose(owner.id()).await;
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn an_agent_disposed_takes_its_background_runs_with_it() {
    let host = patient_host_with(&background_host_toml()).await;
    let owner = host.create_agent(None, "/w").unwrap();
    let me = owner.as_parent();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let started = call(
            &host,
            "delegate",
            &me,
            r#"{"description": "d", "prompt": "p", "run_in_background": true}"#,
        )
        .await;
        ids.push(run_id(&started));
    }
    assert_eq!(host.live_runs(), 3);
    // One is stopped by the model.
    let stopped = call(
        &host,
        "subagent_stop",
        &me,
        &format!(r#"{{"id": "{}", "reason": "enough"}}"#, ids[0]),
    )
    .await;
    assert!(!stopped.is_error, "{}", stopped.text());
    assert_eq!(stopped.text(), format!("run `{}` stopped", ids[0]));
    // The stop reached the run, with its reason: it ended `aborted`, cooperatively.
    let read = call(
        &host,
        "subagent_output",
        &me,
        &format!(r#"{{"id": "{}", "timeout_ms": 60000}}"#, ids[0]),
    )
    .await;
    assert!(!read.is_error, "{}", read.text());
    assert_eq!(
        read.text(),
        format!(
            "run `{}` finished: aborted\ncause: cancelled: enough; the provider said: cancelled",
            ids[0]
        )
    );
    // The rest go with their owner.
    host.agents().dispose(owner.id()).await;
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
    assert!(call(&host, "subagent_list", &me, "{}")
        .await
        .text()
        .contains("no background runs"));
}

#[tokio::test]
async fn the_child_agent_tools_describe_themselves_check_their_arguments_and_reach_the_host() {
    let host = host_with(
        &(entry("la", "subagent_control", r#"action = "list_agents""#)
            + &entry("sm", "subagent_control", r#"action = "send_message""#)
            + &entry("ia", "subagent_control", r#"action = "interrupt_agent""#)
            + &entry("rp", "subagent_control", r#"action = "report""#)),
    )
    .await;
    let tools = host.tool_descriptors();
    let schema = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("`{name}` is mounted under its default name: {tools:?}"))
            .parameters
            .clone()
    };
    let list = schema("list_agents");
    assert_eq!(
        list["properties"]["scope"]["enum"],
        serde_json::json!(["children", "descendants"])
    );
    assert_eq!(
        list["properties"]["status"]["enum"],
        serde_json::json!(["running", "idle", "ready", "failed", "interrupted"])
    );
    assert_eq!(
        schema("send_message")["required"],
        serde_json::json!(["id", "message"])
    );
    assert_eq!(
        schema("interrupt_agent")["required"],
        serde_json::json!(["id"])
    );
    let report = schema("report");
    assert_eq!(report["required"], serde_json::json!(["message"]));
    assert_eq!(
        report["properties"]["mode"]["enum"],
        serde_json::json!(["quiet", "next-step"])
    );

    let me = ParentRef::top_level("agent:1", "/w");
    // A bad argument is a tool error naming it, before anything reaches the host.
    for (tool, args, named) in [
        ("list_agents", r#"{"scope": "everyone"}"#, "`scope`"),
        ("list_agents", r#"{"status": "asleep"}"#, "`status`"),
        ("send_message", r#"{"id": "a"}"#, "`message`"),
        ("send_message", r#"{"message": "hi"}"#, "`id`"),
        ("interrupt_agent", r#"{"id": 7}"#, "`id`"),
        ("report", r#"{"message": "m", "mode": "loud"}"#, "`mode`"),
        ("report", r#"{}"#, "`message`"),
    ] {
        let r = call(&host, tool, &me, args).await;
        assert!(
            r.is_error && r.text().contains(named),
            "{tool} {args}: {}",
            r.text()
        );
    }
    // `list-agents` is linked for a 0.3.0 tool: the call answers (whatever the service says)
    // instead of trapping on a missing import.
    let listed = call(&host, "list_agents", &me, r#"{"scope": "descendants"}"#).await;
    assert!(!listed.text().contains("guest fault"), "{}", listed.text());
    assert!(!listed.text().is_empty());
}

/// The child-agent tools end to end, through the built components: a background child on
/// `spawn` reports (`report`, next-step) while it runs; its parent lists it with the report
/// (`list_agents`), queues a message for it (`send_message`), stops its turn
/// (`interrupt_agent`) and has the message kept; the report reaches the parent's next model
/// call, once.
#[tokio::test]
async fn a_child_reports_and_its_parent_lists_queues_for_and_interrupts_it_through_the_tools() {
    let toml = "[agent]\nmodel = \"scripted:idle\"\n\n\
                [models.scripts.idle]\nsteps = [ { text = \"{history} messages\" } ]\n\n\
                [models.scripts.reporter]\nsteps = [ { text = \"reporting\", tool_calls = [ { name = \"report\", arguments = { message = \"halfway there\", mode = \"next-step\" } } ] }, { text = \"late\", delay_ms = 600000 } ]\n\n"
        .to_string()
        + &entry("spawn", "spawn_provider", "")
        + &entry(
            "bg",
            "subagent_tool",
            r#"provider = "spawn", toolName = "bg", runInBackground = true, agentOptions = { model = "scripted:reporter" }"#,
        )
        + &entry("la", "subagent_control", r#"action = "list_agents""#)
        + &entry("sm", "subagent_control", r#"action = "send_message""#)
        + &entry("ia", "subagent_control", r#"action = "interrupt_agent""#)
        + &entry("rp", "subagent_control", r#"action = "report""#);
    let host = host_with(&toml).await;
    let mut events = watch_events(&host);
    let owner = host.create_agent(None, "/w").unwrap();
    let me = owner.as_parent();
    let started = call(
        &host,
        "bg",
        &me,
        r#"{"description": "d", "prompt": "work", "run_in_background": true}"#,
    )
    .await;
    assert!(!started.is_error, "{}", started.text());
    let id = run_id(&started);
    // The child's `report` call answered: its report is kept.
    wait_for(&mut events, "the child's report", |seen| {
        seen.iter().any(|e| {
            matches!(e, Event::AgentToolResult { id: agent, tool, is_error: false, .. }
                if agent == &id && tool == "report")
        })
    })
    .await;

    let listed = call(&host, "list_agents", &me, "{}").await;
    assert!(!listed.is_error, "{}", listed.text());
    let line = listed.text();
    assert!(
        // Listed by its durable id (its session), not the run's.
        !line.contains(&id)
            && line.contains("| spawn | d | running |")
            && line.contains("report: halfway there"),
        "{line}"
    );
    let queued = call(
        &host,
        "send_message",
        &me,
        &format!(r#"{{"id": "{id}", "message": "then stop"}}"#),
    )
    .await;
    assert!(queued.text().starts_with("queued"), "{}", queued.text());
    let stopped = call(
        &host,
        "interrupt_agent",
        &me,
        &format!(r#"{{"id": "{id}"}}"#),
    )
    .await;
    assert!(!stopped.is_error, "{}", stopped.text());
    assert!(
        stopped.text().contains("interrupted") && stopped.text().contains("queued: 1"),
        "the message is kept: {}",
        stopped.text()
    );
    // Not a child: `report` from the parent is refused, naming why.
    let refused = call(&host, "report", &me, r#"{"message": "me too"}"#).await;
    assert!(
        refused.is_error && refused.text().contains("not the child of a run"),
        "{}",
        refused.text()
    );

    owner.run_turn(vec![ContentBlock::text("next")]).await;
    owner.run_turn(vec![ContentBlock::text("and next")]).await;
    let reports = owner
        .session()
        .events()
        .iter()
        .filter(|e| {
            matches!(e, SessionEvent::UserMessage { content }
            if seam_host::blocks_text(content).contains("[report from agent")
                && seam_host::blocks_text(content).contains("halfway there"))
        })
        .count();
    assert_eq!(reports, 1, "delivered once");
    host.agents().dispose(owner.id()).await;
    assert_eq!(host.live_runs(), 0);
}
