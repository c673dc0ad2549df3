//! Security round two: budget.
//! What a plugin can make the host hold through its imports is bounded by `host_memory_mb`
//! and by count caps, each naming the limit; a call forgets the runs it disposed.

use seam_host::StopReason;
use seam_tests::*;

use super::hostile::{assert_limit_hit, assert_quiescent, call, good, hostile, hostile_tool};

/// The flooding providers create a child on the default model; it never runs a turn.
const MODEL: &str = "[models.scripts.default]\nsteps = [{ text = \"never asked\" }]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_flooded_with_small_messages_hits_the_queue_cap() {
    let toml = good()
        + &hostile("sendsmall", "mode = \"send-flood\", bytes = 16", "")
        + &hostile("steersmall", "mode = \"steer-flood\", bytes = 16", "")
        + MODEL;
    let host = host_with(&toml).await;
    assert_limit_hit(&host, "sendsmall", "max_queued_messages").await;
    assert_limit_hit(&host, "steersmall", "max_queued_messages").await;
    assert_eq!(host.live_agents(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_flooded_with_large_messages_hits_the_host_memory_budget() {
    // 1 MiB messages: the 32 MiB default budget is spent long before 64 are queued.
    let toml = good()
        + &hostile("sendbig", "mode = \"send-flood\"", "")
        + &hostile("steerbig", "mode = \"steer-flood\"", "")
        + MODEL;
    let host = host_with(&toml).await;
    assert_limit_hit(&host, "sendbig", "host_memory_mb").await;
    assert_limit_hit(&host, "steerbig", "host_memory_mb").await;
    assert_eq!(host.live_agents(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_is_an_entry_limit_and_is_given_back() {
    // A smaller budget than the default, and the same attack twice: the first run's charges
    // were released when its child went, so the second hits the same limit at the same point
    // rather than at once.
    let toml = good()
        + &hostile(
            "flood",
            "mode = \"send-flood\", bytes = 1000000",
            "[plugin.limits]\nhost_memory_mb = 4\nmax_queued_messages = 1000\n",
        )
        + MODEL;
    let host = host_with(&toml).await;
    for _ in 0..2 {
        let run = host.subagents().start("flood", request("x")).unwrap();
        let result = run.result().await.unwrap();
        run.dispose().await;
        assert_eq!(result.stop_reason, StopReason::Error);
        diagnosed(&result, "`host_memory_mb`");
        diagnosed(&result, "at most 4 MiB");
    }
    assert_quiescent(&host);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_starting_runs_in_a_loop_hits_the_runs_per_call_cap() {
    let toml = good()
        + &mock("slow", "delayMs = 60000")
        + &hostile_tool(
            "loop",
            "mode = \"leak-runs\", provider = \"slow\", count = 1000000",
            "",
        );
    let host = host_with(&toml).await;
    let r = call(&host, "loop").await;
    assert!(r.is_error, "{r:?}");
    assert!(
        r.text()
            .contains("plugin `loop` hit its limit `max_runs_per_call`"),
        "{r:?}"
    );
    assert_quiescent(&host);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_disposes_its_runs_forgets_them() {
    // Far more runs than `max_runs_per_call`, one after another: each is disposed before the
    // next starts, so the call's table and budget hold one at a time.
    let toml = good()
        + &mock("quick", "reply = \"done\"")
        + &hostile_tool(
            "churn",
            "mode = \"churn\", provider = \"quick\", count = 300",
            "[plugin.limits]\nmax_runs_per_call = 2\nhost_memory_mb = 1\n",
        );
    let host = host_with(&toml).await;
    let r = call(&host, "churn").await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.text(), "completed 300");
    assert_quiescent(&host);
}
