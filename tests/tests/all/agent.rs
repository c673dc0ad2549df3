//! CONTRACT section 6 and the child-dependent parts of section 3: the agent runtime and the
//! in-process `spawn` and `fork` provider components.

use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use seam_host::agent::{ChildSession, Session, SessionEvent};
use seam_host::tool::{ToolBinding, ToolSource};
use seam_host::{
    ContentBlock, Event, Host, ParentRef, StopReason, SubagentRun, Tool, ToolDescriptor,
    ToolFilter, ToolResult,
};
use seam_tests::*;
use serde_json::json;
use tokio::sync::oneshot;
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

/// A new top-level agent, and its first turn on `prompt` running in a task of its own.
fn start_turn(
    host: &Host,
    prompt: &str,
) -> (
    Arc<seam_host::agent::Agent>,
    tokio::task::JoinHandle<seam_host::agent::TurnOutcome>,
) {
    let agent = host.create_agent(None, "/w").unwrap();
    let turn = {
        let agent = agent.clone();
        let prompt = vec![ContentBlock::text(prompt)];
        tokio::spawn(async move { agent.run_turn(prompt).await })
    };
    (agent, turn)
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
    // The refusal came back to the child as a tool result, which it reported in its words.
    assert!(
        words(&result).contains("not available to this agent"),
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

    // A capture ends the turn: the script's second step ("unreachable") is never asked for.
    let (r, session) = go("after").await;
    assert_eq!(r.stop_reason, StopReason::Completed, "{r:?}");
    assert_eq!(r.structured, Some(json!({"answer": "first"})));
    assert!(!words(&r).contains("unreachable"), "{r:?}");
    let replies = session
        .iter()
        .filter(|e| matches!(e, SessionEvent::AssistantMessage { .. }))
        .count();
    assert_eq!(
        replies, 1,
        "one model call, then the turn ended: {session:?}"
    );
    assert!(
        session.iter().any(|e| matches!(
            e,
            SessionEvent::TurnEnd {
                reason: StopReason::Completed,
                ..
            }
        )),
        "{session:?}"
    );

    let (r, _) = go("none").await;
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(r.structured, None);
    assert!(r
        .diagnostic
        .as_deref()
        .unwrap_or("")
        .contains("without calling structured_output"));
    assert_quiescent(&host);
}

/// Waits until the child agent of run `id` (it has the run's id) has begun a turn.
async fn child_turn_started(events: &mut tokio::sync::watch::Receiver<Vec<Event>>, id: &str) {
    wait_for(events, "the child's turn to start", |seen| {
        seen.iter()
            .any(|e| matches!(e, Event::AgentTurnStart { id: agent, .. } if agent == id))
    })
    .await;
}

#[tokio::test]
async fn cancel_mid_child_reaches_the_child_and_settles_aborted() {
    let toml = "[models.scripts.slow]\nsteps = [ { text = \"late\", delay_ms = 30000 } ]\n\n"
        .to_string()
        + &providers("");
    // Patient: the child's own turn ends `aborted` only when the cancel reaches it before the
    // grace runs out (an enforced cancel drops the turn), which a loaded machine can delay.
    let host = patient_host_with(&toml).await;
    let seen = record(&host);
    let mut events = watch_events(&host);
    let run = host
        .subagents()
        .start("spawn", on_model("x", "scripted:slow"))
        .unwrap();
    run.started().await.unwrap();
    assert_eq!(host.live_agents(), 1);
    // Mid child: its turn has begun (a cancel between readiness and the prompt's send ends
    // the run before the child has any turn to abort).
    child_turn_started(&mut events, run.id()).await;
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
    let mut events = watch_events(&host);
    let (agent, turn) = start_turn(&host, "go");
    // Parent, two children, two grandchildren: four runs announced their start, and a spawn
    // or fork run announces it only once its child agent is live.
    wait_for(&mut events, "four subagent/start", |seen| {
        seen.iter()
            .filter(|e| matches!(e, Event::SubagentStart { .. }))
            .count()
            == 4
    })
    .await;
    assert_eq!(host.live_agents(), 5);
    assert_eq!(host.live_runs(), 4);
    host.agents().dispose(agent.id()).await;
    let outcome = turn.await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Aborted);
    assert_quiescent(&host);
}

/// The scripted model's rule for a cancelled turn: a step is taken when a model call starts, so a
/// turn cancelled before its first model call (`cancel_turn` between the request and the turn's
/// start, as `seam acp` does for a `session/cancel` that overtakes its prompt) takes none, and
/// the next turn gets that step.
#[tokio::test]
async fn a_turn_cancelled_before_its_model_call_leaves_the_step_for_the_next() {
    let host = host_with(
        "[agent]\nmodel = \"scripted:lead\"\n\n[models.scripts.lead]\nsteps = [ { text = \"first step\" } ]\n",
    )
    .await;
    let agent = host.create_agent(None, "/").unwrap();
    agent.cancel_turn();
    let cancelled = agent.run_turn(vec![ContentBlock::text("go")]).await;
    assert_eq!(cancelled.stop_reason, StopReason::Aborted);
    assert_eq!(
        cancelled.diagnostic.as_deref(),
        Some("the turn was cancelled")
    );
    let next = agent.run_turn(vec![ContentBlock::text("again")]).await;
    assert_eq!(
        next.stop_reason,
        StopReason::Completed,
        "{:?}",
        next.diagnostic
    );
    assert_eq!(seam_host::blocks_text(&next.output), "first step");
    host.agents().dispose(agent.id()).await;
    assert_quiescent(&host);
}

/// `cancel_turn` ends the turn in progress and the runs it started, but not the agent: its next
/// turn runs as usual (what an ACP `session/cancel` needs), where `abort` ends every turn.
#[tokio::test]
async fn a_cancelled_turn_ends_its_runs_and_the_agent_takes_the_next_turn() {
    let toml = format!(
        "[agent]\nmodel = \"scripted:parent\"\n\n[models.scripts.parent]\nsteps = [ {{ tool_calls = [{}] }}, {{ text = \"next turn\" }} ]\n\n[models.scripts.leaf]\nsteps = [ {{ text = \"never\", delay_ms = 600000 }} ]\n\n",
        call("leaf", "c"),
    ) + &entry("spawn", "spawn_provider", "")
        + &entry(
            "leaf",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"leaf\", agentOptions = { model = \"scripted:leaf\" }",
        );
    let host = host_with(&toml).await;
    let mut events = watch_events(&host);
    let (agent, turn) = start_turn(&host, "go");
    wait_for(&mut events, "the child's subagent/start", |seen| {
        seen.iter()
            .any(|e| matches!(e, Event::SubagentStart { .. }))
    })
    .await;
    agent.cancel_turn();
    let outcome = turn.await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Aborted);
    assert_eq!(
        outcome.diagnostic.as_deref(),
        Some("the turn was cancelled")
    );
    assert!(!agent.is_aborted());
    assert_eq!(host.live_runs(), 0, "the turn's delegation ended with it");

    let next = agent.run_turn(vec![ContentBlock::text("again")]).await;
    assert_eq!(
        next.stop_reason,
        StopReason::Completed,
        "{:?}",
        next.diagnostic
    );
    assert_eq!(seam_host::blocks_text(&next.output), "next turn");

    agent.abort();
    let after = agent.run_turn(vec![ContentBlock::text("more")]).await;
    assert_eq!(after.stop_reason, StopReason::Aborted);
    assert_eq!(after.diagnostic.as_deref(), Some("the agent was aborted"));
    host.agents().dispose(agent.id()).await;
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

/// A native tool that holds each call until the test opens it: the child's first call tells
/// the test it is in flight (`entered`), then waits for `open`.
struct Gate {
    entered: Mutex<Option<oneshot::Sender<()>>>,
    open: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Gate {
    /// Mounts a gate tool named `gate`; returns (entered, open).
    async fn mount(host: &Host) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (entered_tx, entered_rx) = oneshot::channel();
        let (open_tx, open_rx) = oneshot::channel();
        let gate = Gate {
            entered: Mutex::new(Some(entered_tx)),
            open: Mutex::new(Some(open_rx)),
        };
        host.tools()
            .add_plugin(
                ToolBinding {
                    tool_name: "gate".into(),
                    provider: None,
                    approve: Default::default(),
                },
                Arc::new(gate),
            )
            .await
            .unwrap();
        (entered_rx, open_tx)
    }
}

impl Tool for Gate {
    fn execute(
        &self,
        _caller: ParentRef,
        _arguments: String,
        _abort: CancellationToken,
    ) -> BoxFuture<'static, ToolResult> {
        let entered = self.entered.lock().unwrap().take();
        let open = self.open.lock().unwrap().take();
        Box::pin(async move {
            if let Some(entered) = entered {
                let _ = entered.send(());
            }
            if let Some(open) = open {
                let _ = open.await;
            }
            ToolResult {
                content: vec![ContentBlock::text("gate passed")],
                is_error: false,
            }
        })
    }
}

impl ToolSource for Gate {
    fn plugin(&self) -> &str {
        "gate"
    }

    fn describe(
        &self,
        _provider: Option<Arc<seam_host::ProviderDescriptor>>,
    ) -> BoxFuture<'static, Result<ToolDescriptor, seam_host::tool::DescribeError>> {
        Box::pin(async {
            Ok(ToolDescriptor {
                name: "gate".into(),
                description: "waits until the test opens it".into(),
                parameters: json!({"type": "object"}),
            })
        })
    }
}

#[tokio::test]
async fn steering_reaches_a_live_child_and_resume_continues_a_finished_one() {
    let toml = "[models.scripts.steer]\nsteps = [ { tool_calls = [ { name = \"gate\", arguments = {} } ] }, { text = \"heard: {prompt}\" } ]\n\n\
        [models.scripts.again]\nsteps = [ { text = \"first: {prompt}\" }, { text = \"second: {prompt}\" } ]\n\n"
        .to_string()
        + &providers("");
    let host = host_with(&toml).await;
    let (entered, open) = Gate::mount(&host).await;
    let with_model = |model: &str| on_model("begin", model);
    let run = host
        .subagents()
        .start("spawn", with_model("scripted:steer"))
        .unwrap();
    run.started().await.unwrap();
    // The child is inside its first tool call: steer it, then let the call return. The message
    // must reach the model's next call, within the same turn.
    tokio::time::timeout(BARRIER_TIMEOUT, entered)
        .await
        .expect("the child called the gate")
        .unwrap();
    run.send_message(vec![ContentBlock::text("turn left")])
        .unwrap();
    open.send(()).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(words(&result), "heard: turn left");
    // Settled: there is no live child to steer any more, disposed or not.
    for _ in 0..2 {
        let err = run
            .send_message(vec![ContentBlock::text("too late")])
            .unwrap_err();
        assert_eq!(err.code(), "INVALID_STATE", "{err}");
        run.dispose().await;
    }

    let first = host
        .subagents()
        .start("spawn", with_model("scripted:again"))
        .unwrap();
    assert_eq!(words(&first.result().await.unwrap()), "first: begin");
    first.dispose().await;
    let second = host
        .subagents()
        .resume(&first, vec![ContentBlock::text("more")])
        .unwrap();
    let result = second.result().await.unwrap();
    second.dispose().await;
    // A fresh scripted model answers from step one, but over the resumed session.
    assert_eq!(words(&result), "first: more");
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
    // Where each needle is: the host's words in the diagnostic, the model's in the output.
    for (model, reason, in_diagnostic, needle) in [
        ("scripted:broken", StopReason::Error, true, "boom"),
        (
            "scripted:loop",
            StopReason::Error,
            true,
            "bound of 2 model calls",
        ),
        ("scripted:tokens", StopReason::MaxTokens, false, "trunc"),
        ("scripted:no", StopReason::Refusal, false, "I won't"),
        (
            "scripted:missing",
            StopReason::Error,
            true,
            "no script `missing`",
        ),
    ] {
        let run = host
            .subagents()
            .start("spawn", on_model("x", model))
            .unwrap();
        let _ = run.started().await;
        let result = run.result().await.unwrap();
        run.dispose().await;
        assert_eq!(result.stop_reason, reason, "{model}");
        if in_diagnostic {
            diagnosed(&result, needle);
        } else {
            assert_eq!(words(&result), needle, "{model}");
        }
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
    assert!(
        r.text()
            .starts_with("subagent `delegate` ended with stop reason `error`"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("model down"), "{}", r.text());
    assert_quiescent(&host);
}

/// The model each child agent was created on, by agent id, from `agent/created`.
fn created_models(seen: &Arc<Mutex<Vec<Event>>>) -> Vec<(String, String)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::AgentCreated {
                id,
                parent: Some(_),
                model,
                ..
            } => Some((id.clone(), model.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_child_inherits_the_parents_model_unless_agent_options_name_one() {
    // Three scripts whose replies say which one ran. The deployment default is `fallback`;
    // the parent runs on `lead`.
    let toml = "[agent]\nmodel = \"scripted:fallback\"\n\n\
        [models.scripts.lead]\nsteps = [ { text = \"lead ran: {prompt}\" } ]\n\n\
        [models.scripts.fallback]\nsteps = [ { text = \"fallback ran: {prompt}\" } ]\n\n\
        [models.scripts.named]\nsteps = [ { text = \"named ran: {prompt}\" } ]\n\n"
        .to_string()
        + &entry("spawn", "spawn_provider", "")
        + &entry("fork", "fork_provider", "")
        + &entry(
            "plain",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"plain\", agentOptions = { systemPrompt = \"no model named\" }",
        );
    let host = host_with(&toml).await;
    let seen = record(&host);
    let parent = host.create_agent(Some("scripted:lead"), "/w").unwrap();
    let ask = |provider: &'static str, options: Option<seam_host::AgentOptions>| {
        let mut r = seam_host::StartRequest::new("task", parent.as_parent());
        r.agent_options = options;
        let run = host.subagents().start(provider, r).unwrap();
        async move {
            let result = run.result().await.unwrap();
            run.dispose().await;
            (run.id().to_string(), words(&result))
        }
    };
    for provider in ["spawn", "fork"] {
        // No agent options at all, and options without a model: both inherit.
        for options in [
            None,
            Some(seam_host::AgentOptions {
                model: None,
                system_prompt: Some("be brief".into()),
            }),
        ] {
            let (id, text) = ask(provider, options.clone()).await;
            assert_eq!(text, "lead ran: task", "{provider} {options:?}");
            let models = created_models(&seen);
            assert!(
                models.contains(&(id.clone(), "scripted:lead".into())),
                "{provider}: {models:?}"
            );
        }
        // A named model wins over the parent's.
        let (_, text) = ask(
            provider,
            Some(seam_host::AgentOptions {
                model: Some("scripted:named".into()),
                system_prompt: None,
            }),
        )
        .await;
        assert_eq!(text, "named ran: task", "{provider}");
    }
    // Through the tool, whose `agentOptions` name no model: the calling agent's model.
    let r = host
        .call_tool(
            "plain",
            parent.as_parent(),
            &json!({"description": "d", "prompt": "via tool"}).to_string(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.text(), "lead ran: via tool");
    // A parent that is not a live agent has no model to hand down: the deployment default.
    let run = host.subagents().start("spawn", request("orphan")).unwrap();
    assert_eq!(words(&run.result().await.unwrap()), "fallback ran: orphan");
    run.dispose().await;
    host.agents().dispose(parent.id()).await;
    assert_quiescent(&host);
}

#[tokio::test]
async fn tool_filter_from_the_tool_config_reaches_the_child_and_allow_shows_only_those() {
    // The child lists what it was offered, calls a tool it may not see and one it may, then
    // reports both results.
    let toml = "[models.scripts.child]\nsteps = [ \
            { text = \"\", tool_calls = [ { name = \"other\", arguments = { description = \"d\", prompt = \"o\" } }, { name = \"x\", arguments = { description = \"d\", prompt = \"hi\" } } ] }, \
            { text = \"sees [{tools}]: {tool_results}\" } ]\n\n"
        .to_string()
        + &entry("spawn", "spawn_provider", "")
        + &mock("m", "reply = \"m says {prompt}\"")
        + &entry("x", "subagent_tool", "provider = \"m\", toolName = \"x\"")
        + &entry("other", "subagent_tool", "provider = \"m\", toolName = \"other\"")
        + &entry(
            "narrow",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"narrow\", agentOptions = { model = \"scripted:child\" }, toolFilter = { allow = [\"x\"] }",
        )
        + &entry(
            "wide",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"wide\", agentOptions = { model = \"scripted:child\" }, toolFilter = { deny = [\"x\"] }",
        );
    let host = host_with(&toml).await;
    let call = |tool: &'static str| {
        let host = host.clone();
        async move {
            let r = host
                .call_tool(
                    tool,
                    ParentRef::top_level("p", "/w"),
                    &json!({"description": "d", "prompt": "go"}).to_string(),
                    CancellationToken::new(),
                )
                .await
                .unwrap();
            assert!(!r.is_error, "{tool}: {r:?}");
            r.text()
        }
    };
    // allow = ["x"]: x is the only tool offered; `other` is refused, x runs.
    assert_eq!(
        call("narrow").await,
        "sees [x]: tool `other` is not available to this agent\nm says hi"
    );
    // deny = ["x"]: everything but x is offered; x is refused, `other` runs.
    let text = call("wide").await;
    let offered = text
        .strip_prefix("sees [")
        .and_then(|t| t.split_once(']'))
        .map(|(names, _)| names.split(',').collect::<Vec<_>>())
        .unwrap_or_else(|| panic!("{text}"));
    let mut sorted = offered.clone();
    sorted.sort();
    assert_eq!(sorted, ["narrow", "other", "wide"], "{text}");
    assert!(
        text.ends_with("m says o\ntool `x` is not available to this agent"),
        "{text}"
    );
    assert_quiescent(&host);
}

#[tokio::test]
async fn a_fork_child_that_writes_nothing_never_returns_the_parents_output() {
    let toml = format!(
        "[agent]\nmodel = \"scripted:parent\"\n\n[models.scripts.parent]\nsteps = [ {{ text = \"parent secret\" }}, {{ tool_calls = [{}] }}, {{ text = \"[{{tool_results}}]\" }} ]\n\n[models.scripts.child]\nsteps = [ {{ text = \"\" }} ]\n\n",
        call("branch", "say nothing")
    ) + &providers("");
    let host = host_with(&toml).await;
    let children = child_sessions(&host);
    let seen = record(&host);
    let agent = host.create_agent(None, "/w").unwrap();
    let first = agent.run_turn(vec![ContentBlock::text("one")]).await;
    assert_eq!(seam_host::blocks_text(&first.output), "parent secret");
    let second = agent.run_turn(vec![ContentBlock::text("two")]).await;
    assert_eq!(second.stop_reason, StopReason::Completed);
    // The tool result is the child's own (empty) answer, not the parent's last words.
    assert_eq!(seam_host::blocks_text(&second.output), "[]");
    // The child's session did hold the parent's answer (so it could have leaked)...
    let seed = children.lock().unwrap()[0].2.events().to_vec();
    assert!(
        seed.iter().any(|e| matches!(
            e,
            SessionEvent::AssistantMessage { text, .. } if text == "parent secret"
        )),
        "{seed:?}"
    );
    // ...and neither the result nor `subagent/end` carries it.
    let ends: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentEnd {
                stop_reason,
                last_assistant_message,
                ..
            } => Some((stop_reason.clone(), last_assistant_message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0].0, StopReason::Completed);
    let last = seam_host::blocks_text(ends[0].1.as_deref().unwrap_or_default());
    assert!(!last.contains("parent secret"), "{last:?}");
    assert_eq!(last, "");
    host.agents().dispose(agent.id()).await;
    assert_quiescent(&host);
}

// The cancel lands between the child's capture-less finish and the run's settlement: the
// listener on the child's `agent/turn-end` runs synchronously inside the child's turn, which is
// inside the provider's future, so the run cannot have settled yet. On a current-thread runtime
// the handle is in the slot before the driver task first runs.
#[tokio::test(flavor = "current_thread")]
async fn cancel_after_a_capture_less_finish_is_aborted() {
    let toml = "[models.scripts.none]\nsteps = [ { text = \"plain words\" } ]\n\n".to_string()
        + &providers("");
    let host = host_with(&toml).await;
    let slot: Arc<OnceLock<SubagentRun>> = Arc::default();
    // (the child's turn-end reason, whether the run had settled when it was cancelled)
    let at_cancel: Arc<Mutex<Option<(StopReason, bool)>>> = Arc::default();
    {
        let slot = slot.clone();
        let at_cancel = at_cancel.clone();
        host.events().subscribe(move |e| {
            if let Event::AgentTurnEnd {
                id, stop_reason, ..
            } = e
            {
                if let Some(run) = slot.get().filter(|r| r.id() == id) {
                    *at_cancel.lock().unwrap() = Some((stop_reason, run.try_result().is_some()));
                    run.cancel(Some("changed my mind".into()));
                }
            }
            Ok(())
        });
    }
    // On its task: the listener needs the handle before any of the run's work happens (`start`
    // would finish this scripted child before it returns).
    let run = host
        .subagents()
        .start_on_task("spawn", structured_request("scripted:none"))
        .unwrap();
    slot.set(run.clone()).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(
        *at_cancel.lock().unwrap(),
        Some((StopReason::Error, false)),
        "the child finished without a capture, and the run had not settled"
    );
    assert_eq!(result.stop_reason, StopReason::Aborted, "{result:?}");
    assert_eq!(result.structured, None);
    assert_quiescent(&host);

    // The same run left alone is `error`: the cancel is what made it `aborted`.
    let run = host
        .subagents()
        .start("spawn", structured_request("scripted:none"))
        .unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(result.stop_reason, StopReason::Error, "{result:?}");
    assert_quiescent(&host);
}

#[tokio::test]
async fn unloading_an_in_process_provider_mid_run_aborts_and_disposes_its_runs() {
    let scripts = "[models.scripts.slow]\nsteps = [ { text = \"late\", delay_ms = 30000 } ]\n\n\
        [models.scripts.quick]\nsteps = [ { text = \"still here\" } ]\n\n";
    for (provider, component, other) in [
        ("spawn", "spawn_provider", "fork_provider"),
        ("fork", "fork_provider", "spawn_provider"),
    ] {
        let remaining = format!("{scripts}{}", entry("stays", other, "name = \"stays\""));
        // Patient, for the child's own `aborted` turn end (as in
        // `cancel_mid_child_reaches_the_child_and_settles_aborted`).
        let host = patient_host_with(&(remaining.clone() + &entry(provider, component, ""))).await;
        let seen = record(&host);
        let mut events = watch_events(&host);
        let run = host
            .subagents()
            .start(provider, on_model("x", "scripted:slow"))
            .unwrap();
        run.started().await.unwrap();
        assert_eq!(host.live_agents(), 1, "{provider}");
        child_turn_started(&mut events, run.id()).await;
        let report = loaded(host.reconfigure(&config(&remaining)).await);
        assert_eq!(report.unloaded, [provider]);
        // Unloading returned only after the run was cancelled, settled and disposed.
        assert!(run.is_disposed(), "{provider}");
        let result = run.try_result().expect("settled").unwrap();
        assert_eq!(result.stop_reason, StopReason::Aborted, "{provider}");
        assert_quiescent(&host);
        assert_eq!(host.subagents().live_runs_of(provider), 0);
        assert!(host.subagents().descriptor(provider).is_none());
        let events = seen.lock().unwrap().clone();
        let child_turn = events.iter().find_map(|e| match e {
            Event::AgentTurnEnd {
                id, stop_reason, ..
            } if id == run.id() => Some(stop_reason.clone()),
            _ => None,
        });
        assert_eq!(child_turn, Some(StopReason::Aborted), "{provider}");
        let order: Vec<&str> = events.iter().map(Event::name).collect();
        let end = order.iter().position(|n| *n == "subagent/end");
        let disposed = events
            .iter()
            .position(|e| matches!(e, Event::AgentDisposed { id } if id == run.id()));
        let removed = order.iter().position(|n| *n == "subagent/provider-removed");
        assert!(
            end.is_some() && disposed.is_some() && removed.is_some(),
            "{provider}: {order:?}"
        );
        assert!(end < removed && disposed < removed, "{provider}: {order:?}");
        // The provider that stayed still serves.
        let run = host
            .subagents()
            .start("stays", on_model("x", "scripted:quick"))
            .unwrap();
        assert_eq!(words(&run.result().await.unwrap()), "still here");
        run.dispose().await;
        assert_quiescent(&host);
    }
}
