//! Soak test: 100,000 mixed runs (well-behaved, slow, child agents on the spawn provider,
//! trapping, panicking, spinning past their CPU budget, blowing their memory limit, timing out,
//! failing to start, flooding their child past `host_memory_mb`, tool calls that leak their runs
//! or hold more than `max_runs_per_call`, runs steered while they wait on their pollables,
//! background runs that agents start through the subagent tool, steer and read through the
//! control tools and take with them when disposed, progress on every kind that reports it) with
//! random cancels and early disposes, 64 at a time, from a fixed seed. Every
//! outcome must be one the contract allows, and the host must end with no live run, instance or
//! child agent.
//!
//! Its own test binary, so it can run alone: `cargo test -p seam-tests --test soak -- --nocapture`
//! prints the wall time and the peak RSS.

use std::time::{Duration, Instant};

use seam_host::{Host, ParentRef, StopReason};
use seam_tests::*;
use tokio_util::sync::CancellationToken;

const RUNS: usize = 100_000;
const AT_ONCE: usize = 64;
const SEED: u64 = 0x5EA3_50A4;

/// What one soak job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ok,
    Slow,
    Trap,
    Panic,
    Spin,
    Bomb,
    Timeout,
    StartFails,
    LeakyTool,
    Child,
    /// A provider that floods its child with messages until `host_memory_mb` stops it.
    Flood,
    /// A tool that holds more runs than `max_runs_per_call`.
    RunsCap,
    /// A run that reports progress and waits for a steering message, which it is sent.
    Steer,
    /// An agent starts a background run through the subagent tool, steers it and reads it
    /// through the control tools (or is disposed with it still going, when cancelled).
    Background,
}

/// The workload mix, in percent.
const MIX: &[(Kind, usize)] = &[
    (Kind::Ok, 24),
    (Kind::Steer, 4),
    (Kind::Background, 3),
    (Kind::Flood, 3),
    (Kind::RunsCap, 3),
    (Kind::Child, 8),
    (Kind::Slow, 15),
    (Kind::Trap, 8),
    (Kind::Panic, 8),
    (Kind::Spin, 4),
    (Kind::Bomb, 5),
    (Kind::Timeout, 5),
    (Kind::StartFails, 6),
    (Kind::LeakyTool, 4),
];

impl Kind {
    fn provider(self) -> &'static str {
        match self {
            Kind::Ok => "ok",
            Kind::Slow => "slow",
            Kind::Trap => "trap",
            Kind::Panic => "panic",
            Kind::Spin => "spin",
            Kind::Bomb => "bomb",
            Kind::Timeout => "deaf",
            Kind::StartFails => "startfail",
            Kind::LeakyTool => "leak",
            Kind::Child => "spawn",
            Kind::Flood => "flood",
            Kind::RunsCap => "cap",
            Kind::Steer | Kind::Background => "ear",
        }
    }
}

fn config_text() -> String {
    let h = |id: &str, extra: &str, limits: &str| {
        entry(id, "hostile_provider", &format!("name = \"{id}\", {extra}")) + limits + "\n"
    };
    // The spawn provider's children run on a scripted model that takes 10 ms to answer.
    "[models.scripts.child]\nsteps = [ { text = \"child done\", delay_ms = 10 } ]\n\n\
     [models.scripts.default]\nsteps = [ { text = \"never asked\" } ]\n\n"
        .to_string()
        + &mock("ok", "reply = \"fine\"")
        + &mock("slow", "delayMs = 30")
        + &mock(
            "ear",
            r#"steering = true, progress = ["working"], awaitMessages = 1, reply = "got {messages}""#,
        )
        + &entry(
            "bg",
            "subagent_tool",
            r#"provider = "ear", toolName = "bg", runInBackground = true"#,
        )
        + &entry("send", "subagent_control", r#"action = "send""#)
        + &entry("output", "subagent_control", r#"action = "output""#)
        + &entry("spawn", "spawn_provider", "")
        + &entry(
            "trap",
            "faulty_provider",
            "name = \"trap\", mode = \"trap-after-ready\"",
        )
        + &h(
            "panic",
            "mode = \"fault\", at = \"result\", how = \"panic\"",
            "",
        )
        + &h(
            "spin",
            "mode = \"spin\"",
            "[plugin.limits]\ncpu_ms_per_call = 30",
        )
        + &h(
            "bomb",
            "mode = \"memory-bomb\"",
            "[plugin.limits]\nmemory_mb = 8",
        )
        + &h(
            "deaf",
            "mode = \"ignore-cancel\"",
            "[plugin.limits]\nrun_timeout_ms = 40",
        )
        + &h(
            "startfail",
            "mode = \"fault\", at = \"start\", how = \"trap\"",
            "",
        )
        + &entry(
            "leak",
            "hostile_tool",
            "toolName = \"leak\", mode = \"leak-runs\", provider = \"slow\", count = 2",
        )
        + &h(
            "flood",
            "mode = \"send-flood\", bytes = 100000",
            "[plugin.limits]\nhost_memory_mb = 1",
        )
        + &entry(
            "cap",
            "hostile_tool",
            "toolName = \"cap\", mode = \"leak-runs\", provider = \"slow\", count = 5",
        )
        + "[plugin.limits]\nmax_runs_per_call = 3\n"
}

/// Resident set size now and at its peak, in KiB, from /proc/self/status.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// One job; returns whether it was cancelled and the stop reason it ended with.
async fn job(host: Host, kind: Kind, plan: u64) -> (bool, StopReason) {
    // From `plan`: whether to cancel (1 in 5), after how many ms (0-24), and whether to dispose
    // at once instead of cancelling (1 in 4 of those).
    let cancel = plan % 100 < 20;
    let delay = Duration::from_millis((plan >> 8) % 25);
    let dispose_early = cancel && (plan >> 16).is_multiple_of(4);
    if matches!(kind, Kind::LeakyTool | Kind::RunsCap) {
        let abort = CancellationToken::new();
        if cancel {
            let abort = abort.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                abort.cancel();
            });
        }
        let r = host
            .call_tool(
                kind.provider(),
                ParentRef::top_level("soak", "/"),
                "{}",
                abort.clone(),
            )
            .await
            .expect("the tool is mounted");
        let reason = if r.is_error {
            StopReason::Error
        } else {
            StopReason::Completed
        };
        // Whether the abort came before the call returned is a race: report that it was asked.
        return (cancel, reason);
    }
    if kind == Kind::Background {
        return background_job(&host, cancel).await;
    }
    let mut req = request("soak");
    if kind == Kind::Child {
        req.agent_options = Some(seam_host::AgentOptions {
            model: Some("scripted:child".into()),
            system_prompt: None,
        });
    }
    let run = host
        .subagents()
        .start(kind.provider(), req)
        .expect("start is accepted");
    if kind == Kind::Steer && !cancel {
        run.started().await.expect("the run starts");
        run.send_message(vec![seam_host::ContentBlock::text("go")])
            .expect("a waiting run takes a message");
    }
    if cancel {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if dispose_early {
            run.dispose().await;
        } else {
            run.cancel(Some("soak".into()));
        }
    }
    let result = run.result().await.expect("result never fails");
    run.dispose().await;
    // Cancelled after it settled, a run keeps its outcome; count it as not cancelled.
    let cancelled = cancel && result.stop_reason == StopReason::Aborted;
    (cancelled, result.stop_reason)
}

/// An agent's background run: started through the subagent tool, steered and read through the
/// control tools; cancelled jobs dispose the agent with the run still going. Returns the run's
/// stop reason as the agent saw it (`aborted` for one disposed with its agent).
async fn background_job(host: &Host, cancel: bool) -> (bool, StopReason) {
    let agent = host.create_agent(None, "/").expect("an agent");
    let me = agent.as_parent();
    let call = |tool: &'static str, args: String| {
        let host = host.clone();
        let me = me.clone();
        async move {
            host.call_tool(tool, me, &args, CancellationToken::new())
                .await
                .expect("the tool is mounted")
        }
    };
    let started = call(
        "bg",
        r#"{"description": "soak", "prompt": "p", "run_in_background": true}"#.into(),
    )
    .await;
    assert!(!started.is_error, "{}", started.text());
    let text = started.text();
    let id = text
        .split('`')
        .nth(1)
        .expect("the answer names the run")
        .to_string();
    if cancel {
        host.agents().dispose(agent.id()).await;
        return (true, StopReason::Aborted);
    }
    let sent = call(
        "subagent_send",
        format!(r#"{{"id": "{id}", "message": "go"}}"#),
    )
    .await;
    assert!(!sent.is_error, "{}", sent.text());
    let out = call(
        "subagent_output",
        format!(r#"{{"id": "{id}", "timeout_ms": 60000}}"#),
    )
    .await;
    host.agents().dispose(agent.id()).await;
    let reason = if out.text().contains("finished: completed") && out.text().contains("got go") {
        StopReason::Completed
    } else {
        StopReason::Error
    };
    (false, reason)
}

/// Whether `reason` is an outcome the contract allows for `kind`.
fn allowed(kind: Kind, cancelled: bool, reason: &StopReason) -> bool {
    if kind == Kind::LeakyTool {
        // A tool call completes, or, aborted, reports an error result.
        return *reason == StopReason::Completed || (cancelled && *reason == StopReason::Error);
    }
    if kind == Kind::RunsCap {
        // Past `max_runs_per_call`, or aborted: an error result either way.
        return *reason == StopReason::Error;
    }
    if cancelled {
        return *reason == StopReason::Aborted;
    }
    match kind {
        Kind::Ok | Kind::Slow | Kind::Child | Kind::Steer | Kind::Background => {
            *reason == StopReason::Completed
        }
        _ => *reason == StopReason::Error,
    }
}

#[test]
fn a_hundred_thousand_mixed_runs_leave_the_host_quiescent() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let host = host_with(&config_text()).await;
        let mut rng = Rng(SEED);
        let t = Instant::now();
        let mut counts = std::collections::BTreeMap::<String, usize>::new();
        let mut warm_rss = 0;
        let mut done = 0;
        while done < RUNS {
            let batch: Vec<_> = (0..AT_ONCE.min(RUNS - done))
                .map(|_| {
                    let mut pick = rng.below(100);
                    let kind = MIX
                        .iter()
                        .find(|(_, weight)| {
                            let hit = pick < *weight;
                            pick = pick.saturating_sub(*weight);
                            hit
                        })
                        .map(|(k, _)| *k)
                        .unwrap_or(Kind::Ok);
                    let plan = rng.next_u64();
                    let host = host.clone();
                    tokio::spawn(async move { (kind, job(host, kind, plan).await) })
                })
                .collect();
            for outcome in futures::future::join_all(batch).await {
                let (kind, (cancelled, reason)) = outcome.expect("no job panics");
                assert!(
                    allowed(kind, cancelled, &reason),
                    "{kind:?} cancelled={cancelled}: {reason:?}"
                );
                *counts
                    .entry(format!("{kind:?}/{}", reason.as_str()))
                    .or_default() += 1;
            }
            done += AT_ONCE.min(RUNS - done);
            if done == 2048 {
                warm_rss = rss().0;
            }
        }
        let wall = t.elapsed();
        assert_eq!(host.live_runs(), 0, "live runs at the end");
        assert_eq!(host.live_instances(), 0, "live instances at the end");
        assert_eq!(host.live_agents(), 0, "live child agents at the end");
        let (now_rss, peak_rss) = rss();
        eprintln!(
            "soak: {RUNS} runs in {:.1} s (seed {SEED:#x}, {AT_ONCE} at a time); RSS after 2048 \
             runs {} MiB, at the end {} MiB, peak (VmHWM) {} MiB; live runs {}, instances {}, \
             child agents {}",
            wall.as_secs_f64(),
            warm_rss / 1024,
            now_rss / 1024,
            peak_rss / 1024,
            host.live_runs(),
            host.live_instances(),
            host.live_agents()
        );
        eprintln!("soak outcomes: {counts:?}");
        // Memory does not grow with the number of runs: the last 98,000 runs cost no more
        // resident memory than a generous margin over the first 2,000.
        assert!(
            now_rss <= warm_rss * 3 / 2 + 64 * 1024,
            "RSS grew from {warm_rss} KiB to {now_rss} KiB"
        );
        host.unload_all().await;
    });
}
