//! Security round two: delegation.
//! Delegation cannot run away or deadlock: a default depth bound for the tree, a cap on live
//! agents, and a start that would wait on its own ancestors fails at once.

use std::time::Duration;

use seam_host::{ContentBlock, Event, Host, StopReason};
use seam_tests::*;

/// Every agent runs the same script: delegate once through `deeper` (bound to `spawn`), then
/// answer with what came back.
fn recursive(agent: &str, spawn_limits: &str) -> String {
    format!(
        "[agent]\nmodel = \"scripted:loop\"\n{agent}\n\n[models.scripts.loop]\nsteps = [ {{ tool_calls = [{{ name = \"deeper\", arguments = {{ description = \"d\", prompt = \"again\" }} }}] }}, {{ text = \"<{{tool_results}}>\" }} ]\n\n"
    ) + &entry("spawn", "spawn_provider", "")
        + spawn_limits
        + "\n"
        + &entry(
            "deeper",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"deeper\"",
        )
}

/// Runs one turn of a top-level agent, bounded so that a hang fails the test instead of
/// stalling it. The bound is far from what the work takes: the slot-filling fan-out starts
/// 1,500-2,000 runs, in 5 s alone and past 60 s beside the other test binaries on two cores
/// (the more the machine is loaded, the more runs it starts before the slots fill).
async fn ask(host: &Host) -> (String, StopReason) {
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = tokio::time::timeout(
        Duration::from_secs(600),
        agent.run_turn(vec![ContentBlock::text("go")]),
    )
    .await
    .expect("the delegation tree ended by itself");
    host.agents().dispose(agent.id()).await;
    (seam_host::blocks_text(&outcome.output), outcome.stop_reason)
}

fn deepest(seen: &std::sync::Arc<std::sync::Mutex<Vec<Event>>>) -> u32 {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::AgentCreated { depth, .. } => Some(*depth),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_keeps_delegating_stops_at_the_default_depth() {
    let host = host_with(&recursive("", "")).await;
    let seen = record(&host);
    let (text, reason) = ask(&host).await;
    assert_eq!(reason, StopReason::Completed);
    assert_eq!(deepest(&seen), 8, "the default [agent] max_depth is 8");
    assert!(text.contains("DEPTH_EXCEEDED"), "{text}");
    assert!(text.contains("depth 9 but max-depth is 8"), "{text}");
    assert_eq!(host.live_agents(), 0);
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_depth_bound_is_set_in_the_agent_section() {
    let host = host_with(&recursive("max_depth = 2", "")).await;
    let seen = record(&host);
    let (text, _) = ask(&host).await;
    assert_eq!(deepest(&seen), 2);
    assert!(text.contains("depth 3 but max-depth is 2"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_agent_cap_refuses_one_more_agent() {
    // The top-level agent and two children fit; the third child is refused.
    let host = host_with(&recursive("max_live_agents = 3", "")).await;
    let seen = record(&host);
    let (text, reason) = ask(&host).await;
    assert_eq!(reason, StopReason::Completed);
    assert_eq!(deepest(&seen), 2);
    assert!(text.contains("max_live_agents"), "{text}");
    assert_eq!(host.live_agents(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_waiting_on_its_own_ancestors_fails_at_once() {
    // Two slots: depth 1 and depth 2 hold them, and depth 3 would wait for depth 2 to end,
    // which waits for depth 3.
    let host = host_with(&recursive("", "[plugin.limits]\nmax_concurrent_runs = 2\n")).await;
    let seen = record(&host);
    let (text, reason) = ask(&host).await;
    assert_eq!(reason, StopReason::Completed);
    assert_eq!(deepest(&seen), 2);
    assert!(text.contains("held by ancestors of the caller"), "{text}");
    assert_eq!(host.live_agents(), 0);
    assert_eq!(host.live_runs(), 0);
}

/// Every agent delegates `fan_out` tasks at once through `deeper`, then answers with what came
/// back.
fn fan_out(fan_out: usize, spawn_limits: &str) -> String {
    let call = "{ name = \"deeper\", arguments = { description = \"d\", prompt = \"again\" } }";
    let calls = vec![call; fan_out].join(", ");
    format!(
        "[agent]\nmodel = \"scripted:fan\"\n\n[models.scripts.fan]\nsteps = [ {{ tool_calls = [{calls}] }}, {{ text = \"<{{tool_results}}>\" }} ]\n\n"
    ) + &entry("spawn", "spawn_provider", "")
        + spawn_limits
        + "\n"
        + &entry(
            "deeper",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"deeper\"",
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_that_fills_every_slot_fails_its_queued_starts_and_unwinds() {
    // With the defaults (64 slots, depth 8), ten children per agent fill the slots with parents
    // that each wait on children queued behind them.
    let host = host_with(&fan_out(10, "")).await;
    let seen = record(&host);
    let (text, reason) = ask(&host).await;
    assert_eq!(reason, StopReason::Completed);
    assert!(
        text.contains("held by runs that each wait on a run queued"),
        "{text}"
    );
    assert!(text.contains("`max_concurrent_runs`"), "{text}");
    let events = seen.lock().unwrap();
    let starts = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentStart { .. }))
        .count();
    let ends = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentEnd { .. }))
        .count();
    assert!(starts > 64, "the slots filled up: {starts} starts");
    eprintln!("fan-out: {starts} runs started and ended");
    assert_eq!(starts, ends, "every start is matched by an end");
    drop(events);
    assert_eq!(host.live_agents(), 0);
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_within_the_slots_is_not_a_deadlock() {
    // Three children per agent, two levels deep, in 64 slots: parents wait on queued children
    // only while other runs, which will finish, hold slots too.
    let host = host_with(
        &fan_out(3, "[plugin.limits]\nmax_concurrent_runs = 5\n")
            .replace("[agent]\n", "[agent]\nmax_depth = 2\n"),
    )
    .await;
    let seen = record(&host);
    let (text, reason) = ask(&host).await;
    assert_eq!(reason, StopReason::Completed);
    assert!(!text.contains("max_concurrent_runs"), "{text}");
    // 3 children, each with 3 of their own: 12 runs, all completed.
    let ends: Vec<StopReason> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentEnd { stop_reason, .. } => Some(stop_reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 12, "{ends:?}");
    assert!(ends.iter().all(|r| *r == StopReason::Completed), "{ends:?}");
}
