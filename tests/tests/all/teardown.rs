//! CONTRACT section 3 and 9: tearing down a parent ends its whole tree of background runs,
//! however deep. An agent starts a background child, which starts a background grandchild,
//! which starts a background great-grandchild; each then waits in a long model call. Disposing
//! the top agent, or unloading the plugin of the first level's provider, ends every level: each
//! run gets its `subagent/end`, and nothing of the tree is left once the call returns.

use std::collections::BTreeSet;

use seam_host::{Event, Host, StopReason};
use seam_tests::*;
use tokio_util::sync::CancellationToken;

/// A background call of `tool`, as a script's tool call.
fn background_call(tool: &str) -> String {
    format!(
        "{{ name = \"{tool}\", arguments = {{ description = \"level\", prompt = \"go\", run_in_background = true }} }}"
    )
}

/// Level 1 runs on `outer`, levels 2 and 3 on `inner` (the same component twice). Levels 1 and
/// 2 start the next level in the background, then wait; level 3 only waits.
fn tree_config(providers: &str) -> String {
    let wait = "{ text = \"never\", delay_ms = 600000 }";
    format!(
        "[models.scripts.level1]\nsteps = [ {{ tool_calls = [{}] }}, {wait} ]\n\n\
         [models.scripts.level2]\nsteps = [ {{ tool_calls = [{}] }}, {wait} ]\n\n\
         [models.scripts.level3]\nsteps = [ {wait} ]\n\n",
        background_call("bg2"),
        background_call("bg3"),
    ) + providers
        + &entry(
            "bg1",
            "subagent_tool",
            "provider = \"outer\", toolName = \"bg1\", runInBackground = true, agentOptions = { model = \"scripted:level1\" }",
        )
        + &entry(
            "bg2",
            "subagent_tool",
            "provider = \"inner\", toolName = \"bg2\", runInBackground = true, agentOptions = { model = \"scripted:level2\" }",
        )
        + &entry(
            "bg3",
            "subagent_tool",
            "provider = \"inner\", toolName = \"bg3\", runInBackground = true, agentOptions = { model = \"scripted:level3\" }",
        )
}

fn outer() -> String {
    entry("outer", "spawn_provider", "name = \"outer\"")
}

fn inner() -> String {
    entry("inner", "spawn_provider", "name = \"inner\"")
}

/// A new top-level agent with the three-level tree of background runs below it, every level
/// live and its background start returned; returns the agent and the events so far.
async fn grow_tree(
    host: &Host,
) -> (
    std::sync::Arc<seam_host::agent::Agent>,
    tokio::sync::watch::Receiver<Vec<Event>>,
) {
    let mut events = watch_events(host);
    // The owner takes no turn: its model is never called.
    let owner = host.create_agent(Some("scripted:level3"), "/w").unwrap();
    let started = host
        .call_tool(
            "bg1",
            owner.as_parent(),
            r#"{"description": "level", "prompt": "go", "run_in_background": true}"#,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!started.is_error, "{}", started.text());
    // Three children announced, and levels 1 and 2 got their background start's answer (so
    // each run below them is one of their background runs).
    wait_for(&mut events, "three levels of background runs", |seen| {
        let starts = seen
            .iter()
            .filter(|e| matches!(e, Event::SubagentStart { .. }))
            .count();
        let answered = |tool: &str| {
            seen.iter().any(|e| {
                matches!(e, Event::AgentToolResult { tool: t, is_error: false, .. } if t == tool)
            })
        };
        starts == 3 && answered("bg2") && answered("bg3")
    })
    .await;
    assert_eq!(host.live_runs(), 3);
    assert_eq!(host.live_agents(), 4, "the owner and three children");
    assert_eq!(host.subagents().running_background(), 3);
    (owner, events)
}

/// Every run that started has exactly one `subagent/end`, `aborted`, on its own provider; returns
/// the run ids by provider.
fn every_run_ended_aborted(events: &[Event]) -> Vec<(String, String)> {
    let starts: BTreeSet<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentStart { provider, id, .. } => Some((provider.clone(), id.clone())),
            _ => None,
        })
        .collect();
    let ends: Vec<(String, String, StopReason)> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentEnd {
                provider,
                id,
                stop_reason,
                ..
            } => Some((provider.clone(), id.clone(), stop_reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(starts.len(), 3, "{events:#?}");
    assert_eq!(ends.len(), 3, "one end per run: {ends:?}");
    for (provider, id, reason) in &ends {
        assert!(
            starts.contains(&(provider.clone(), id.clone())),
            "{provider} {id}"
        );
        assert_eq!(*reason, StopReason::Aborted, "{provider} {id}");
    }
    let providers: Vec<&str> = starts.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(providers, ["inner", "inner", "outer"]);
    starts.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposing_the_top_agent_ends_every_level_of_background_runs() {
    let host = host_with(&tree_config(&(outer() + &inner()))).await;
    let (owner, events) = grow_tree(&host).await;
    host.agents().dispose(owner.id()).await;
    // Once dispose returned, every level has ended and gone.
    every_run_ended_aborted(&events.borrow());
    assert_eq!(host.live_runs(), 0, "runs");
    assert_eq!(host.live_agents(), 0, "agents");
    assert_eq!(host.live_instances(), 0, "instances");
    assert_eq!(host.subagents().running_background(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unloading_the_first_levels_provider_ends_the_levels_below_on_another() {
    let host = host_with(&tree_config(&(outer() + &inner()))).await;
    let (owner, events) = grow_tree(&host).await;
    let report = loaded(host.reconfigure(&config(&tree_config(&inner()))).await);
    assert_eq!(report.unloaded, ["outer"]);
    // Levels 2 and 3 run on `inner`, which stays: they end because level 1's child went.
    every_run_ended_aborted(&events.borrow());
    assert_eq!(host.live_runs(), 0, "runs");
    assert_eq!(host.subagents().live_runs_of("inner"), 0);
    assert_eq!(host.live_agents(), 1, "only the owner is left");
    assert_eq!(host.live_instances(), 0, "instances");
    assert_eq!(host.subagents().running_background(), 0);
    assert!(host.subagents().descriptor("inner").is_some());
    host.agents().dispose(owner.id()).await;
    assert_eq!(host.live_agents(), 0);
}

/// With a cancel grace of a millisecond or less a run's cancel is enforced while its child is
/// winding down: the run's future, with its store and the child agent in it, is dropped midway,
/// maybe halfway through disposing the level below. Unloading still returns only once every
/// level has ended and gone: it once returned with the deepest run still live, its dispose left
/// to a task nobody waited for. Where the cut falls is the host's timing, so this sweeps the
/// grace over many trees (before the fix, about one sweep in five caught it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unloading_ends_every_level_even_when_the_cancel_is_enforced_midway() {
    for round in 0..100u64 {
        let mut options = test_options();
        options.cancel_grace = std::time::Duration::from_micros((round % 50) * 20);
        let host = Host::new(options).unwrap();
        loaded(
            host.load(&config(&tree_config(&(outer() + &inner()))))
                .await,
        );
        let (owner, events) = grow_tree(&host).await;
        let report = loaded(host.reconfigure(&config(&tree_config(&inner()))).await);
        assert_eq!(report.unloaded, ["outer"], "round {round}");
        every_run_ended_aborted(&events.borrow());
        assert_eq!(host.live_runs(), 0, "runs, round {round}");
        assert_eq!(host.live_agents(), 1, "agents, round {round}");
        assert_eq!(host.subagents().running_background(), 0, "round {round}");
        host.agents().dispose(owner.id()).await;
        assert_eq!(host.live_instances(), 0, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unloading_everything_ends_every_level_of_background_runs() {
    let host = host_with(&tree_config(&(outer() + &inner()))).await;
    let (owner, events) = grow_tree(&host).await;
    host.unload_all().await;
    every_run_ended_aborted(&events.borrow());
    assert_eq!(host.live_runs(), 0, "runs");
    assert_eq!(host.live_instances(), 0, "instances");
    assert_eq!(host.subagents().running_background(), 0);
    assert_eq!(
        host.live_agents(),
        1,
        "only the owner, which is no plugin's, is left"
    );
    host.agents().dispose(owner.id()).await;
    assert_eq!(host.live_agents(), 0);
}
