//! CONTRACT section 3: run lifecycle and ownership (the parts that need no child agent).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use seam_host::{
    Capabilities, Event, Provider, ProviderDescriptor, RunContext, RunFailure, RuntimeFeatures,
    StartRequest, StopReason, SubagentError, SubagentResult, SubagentRun,
};
use seam_tests::*;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_run_becomes_ready_then_completes() {
    let host = host_with(&mock("m", "reply = \"done: {prompt}\"")).await;
    let run = host.subagents().start("m", request("task")).unwrap();
    run.started().await.unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(words(&result), "done: task");
    assert_eq!(result.structured, None, "no schema requested");
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn guest_faults_resolve_error_and_the_host_keeps_serving() {
    let toml = entry(
        "trap",
        "faulty_provider",
        "name = \"trap\", mode = \"trap-after-ready\"",
    ) + &entry(
        "panic",
        "faulty_provider",
        "name = \"panic\", mode = \"panic-after-ready\"",
    ) + &mock("good", "");
    let host = host_with(&toml).await;
    let seen = record(&host);
    for name in ["trap", "panic"] {
        let run = host.subagents().start(name, request("x")).unwrap();
        run.started().await.unwrap();
        let result = run
            .result()
            .await
            .expect("result never fails on a guest fault");
        assert_eq!(result.stop_reason, StopReason::Error, "{name}");
        diagnosed(&result, &format!("provider `{name}` failed"));
        run.dispose().await;
        let good = host.subagents().start("good", request("x")).unwrap();
        assert!(good.result().await.unwrap().stop_reason.is_success());
        good.dispose().await;
    }
    let ends = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| {
            matches!(
                e,
                seam_host::Event::SubagentEnd {
                    stop_reason: StopReason::Error,
                    ..
                }
            )
        })
        .count();
    assert_eq!(ends, 2);
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn readiness_failures_reject_started_and_emit_nothing() {
    let toml = entry(
        "trap",
        "faulty_provider",
        "name = \"trap\", mode = \"trap-before-ready\"",
    ) + &mock("refuse", "failBeforeReady = \"no child for you\"");
    let host = host_with(&toml).await;
    let seen = record(&host);
    for name in ["trap", "refuse"] {
        let run = host.subagents().start(name, request("x")).unwrap();
        let err = run.started().await.unwrap_err();
        assert_eq!(err.code(), "START_FAILED", "{name}: {err}");
        let result = run.result().await.unwrap();
        assert_eq!(result.stop_reason, StopReason::Error);
        run.dispose().await;
    }
    assert!(
        names(&seen).iter().all(|n| !n.starts_with("subagent/")),
        "{:?}",
        names(&seen)
    );
    let err = {
        let run = host.subagents().start("refuse", request("x")).unwrap();
        let e = run.started().await.unwrap_err();
        run.dispose().await;
        e
    };
    assert!(err.to_string().contains("no child for you"), "{err}");
}

#[tokio::test]
async fn cancel_before_readiness_leaves_nothing() {
    let host = host_with(&mock("m", "readyDelayMs = 10000")).await;
    let seen = record(&host);
    let run = host.subagents().start("m", request("x")).unwrap();
    // No event announces an instance (readiness is what this test keeps from happening), so
    // this one waits by polling the count.
    assert!(eventually(|| host.live_instances() == 1).await);
    run.cancel(Some("changed my mind".into()));
    let err = run.started().await.unwrap_err();
    assert_eq!(err, SubagentError::Aborted(Some("changed my mind".into())));
    assert_eq!(run.result().await.unwrap().stop_reason, StopReason::Aborted);
    run.dispose().await;
    assert_eq!(host.live_instances(), 0);
    assert_eq!(host.live_runs(), 0);
    assert!(names(&seen).is_empty(), "{:?}", names(&seen));
}

// Where a component's run does its work (`start` polls it once on the caller's thread). The
// tests run on one thread, so nothing of a run's task happens before the test awaits.
#[tokio::test]
async fn a_component_run_that_waits_for_nothing_has_settled_when_start_returns() {
    let host = host_with(&mock("m", "reply = \"done: {prompt}\"")).await;
    let seen = record(&host);
    let run = host.subagents().start("m", request("task")).unwrap();
    let result = run.try_result().expect("settled inside start").unwrap();
    assert_eq!(words(&result), "done: task");
    assert_eq!(names(&seen), ["subagent/start", "subagent/end"]);
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn a_component_run_that_sleeps_goes_on_on_its_task_and_start_on_task_defers_it_all() {
    let host = host_with(&mock("m", "delayMs = 600000")).await;
    let seen = record(&host);
    let run = host.subagents().start("m", request("task")).unwrap();
    assert!(run.try_result().is_none(), "it waits in its sleep");
    assert_eq!(names(&seen), ["subagent/start"], "ready in its first poll");
    assert_eq!(
        host.live_instances(),
        1,
        "its instance lives on in the run's task"
    );
    run.cancel(Some("enough".into()));
    assert_eq!(run.result().await.unwrap().stop_reason, StopReason::Aborted);
    run.dispose().await;
    assert_eq!(names(&seen), ["subagent/start", "subagent/end"]);
    assert_eq!(host.live_instances(), 0);

    let seen = record(&host);
    let run = host
        .subagents()
        .start_on_task("m", request("task"))
        .unwrap();
    assert_eq!(host.live_instances(), 0, "nothing of it ran before a yield");
    // So a cancel now comes before its readiness: no child, no event.
    run.cancel(Some("enough".into()));
    assert!(run.started().await.is_err());
    assert_eq!(run.result().await.unwrap().stop_reason, StopReason::Aborted);
    run.dispose().await;
    assert!(names(&seen).is_empty(), "{:?}", names(&seen));
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}

#[tokio::test]
async fn cancel_after_readiness_reaches_the_run_at_once() {
    let host = patient_host_with(&mock("m", "delayMs = 10000")).await;
    let seen = record(&host);
    let run = host.subagents().start("m", request("x")).unwrap();
    run.started().await.unwrap();
    run.cancel(Some("enough".into()));
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    // The mock saw the cancel through its sleep and answered itself: the diagnostic is the
    // host's reason then the mock's own word, where a cancel the host had to enforce after the
    // grace says `cancel enforced`.
    assert_eq!(
        result.diagnostic.as_deref(),
        Some("cancelled: enough; the provider said: cancelled"),
        "{result:?}"
    );
    assert!(result.output.is_empty(), "{result:?}");
    run.dispose().await;
    assert_eq!(names(&seen), ["subagent/start", "subagent/end"]);
}

#[tokio::test]
async fn a_provider_that_ignores_cancel_is_stopped_by_the_host() {
    let toml = entry(
        "spin",
        "faulty_provider",
        "name = \"spin\", mode = \"spin-after-ready\"",
    ) + &entry(
        "deaf",
        "faulty_provider",
        "name = \"deaf\", mode = \"ignore-cancel\"",
    ) + &mock("good", "");
    let host = host_with(&toml).await;
    for name in ["spin", "deaf"] {
        let run = host.subagents().start(name, request("x")).unwrap();
        run.started().await.unwrap();
        // The well-behaved provider is served while the bad one burns its slice.
        let good = host.subagents().start("good", request("x")).unwrap();
        assert!(good.result().await.unwrap().stop_reason.is_success());
        good.dispose().await;
        run.cancel(Some("stop".into()));
        let result = run.result().await.unwrap();
        assert_eq!(result.stop_reason, StopReason::Aborted, "{name}");
        diagnosed(&result, "enforced");
        assert_eq!(
            run.aborted(),
            Some(seam_host::subagent::Aborted::Enforced),
            "{name}"
        );
        run.dispose().await;
    }
    assert_eq!(host.live_instances(), 0);
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test]
async fn an_already_aborted_signal_yields_aborted_with_no_child() {
    let host = host_with(&mock("m", "")).await;
    let seen = record(&host);
    let signal = CancellationToken::new();
    signal.cancel();
    let mut r = request("x");
    r.signal = Some(signal);
    let run = host.subagents().start("m", r).unwrap();
    assert_eq!(host.live_instances(), 0, "nothing was instantiated");
    assert_eq!(run.started().await.unwrap_err().code(), "ABORTED");
    assert_eq!(run.result().await.unwrap().stop_reason, StopReason::Aborted);
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
    assert!(names(&seen).is_empty());
}

#[tokio::test]
async fn the_callers_signal_cancels_a_live_run() {
    let host = host_with(&mock("m", "delayMs = 10000")).await;
    let signal = CancellationToken::new();
    let mut r = request("x");
    r.signal = Some(signal.clone());
    let run = host.subagents().start("m", r).unwrap();
    run.started().await.unwrap();
    signal.cancel();
    assert_eq!(run.result().await.unwrap().stop_reason, StopReason::Aborted);
    run.dispose().await;
}

#[tokio::test]
async fn dispose_is_idempotent_and_concurrent_safe() {
    let host = host_with(&mock("m", "delayMs = 10000")).await;
    let seen = record(&host);
    let run = host.subagents().start("m", request("x")).unwrap();
    run.started().await.unwrap();
    let (a, b) = (run.clone(), run.clone());
    tokio::join!(a.dispose(), b.dispose(), run.dispose());
    run.dispose().await;
    assert!(run.is_disposed());
    assert_eq!(run.result().await.unwrap().stop_reason, StopReason::Aborted);
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
    // Disposing mid-run settles it, so start is still paired with exactly one end.
    assert_eq!(names(&seen), ["subagent/start", "subagent/end"]);
}

#[tokio::test]
async fn a_thousand_runs_leave_the_host_quiescent() {
    let host = host_with(&(mock("m", "") + &mock("slow", "delayMs = 10000"))).await;
    let runs: Vec<_> = (0..1000)
        .map(|i| {
            let name = if i % 10 == 0 { "slow" } else { "m" };
            host.subagents().start(name, request("x")).unwrap()
        })
        .collect();
    for (i, run) in runs.iter().enumerate() {
        if i % 10 == 0 {
            run.cancel(None);
        }
        let result = run.result().await.unwrap();
        let expected = if i % 10 == 0 {
            StopReason::Aborted
        } else {
            StopReason::Completed
        };
        assert_eq!(result.stop_reason, expected);
    }
    assert_eq!(host.live_runs(), 1000, "settled but not yet disposed");
    futures::future::join_all(runs.iter().map(|r| r.dispose())).await;
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
    assert_eq!(host.subagents().live_runs_of("m"), 0);
}

#[tokio::test]
async fn unloading_everything_disposes_runs_of_every_provider() {
    let host = host_with(&(mock("a", "delayMs = 10000") + &mock("b", "delayMs = 10000"))).await;
    let a = host.subagents().start("a", request("x")).unwrap();
    let b = host.subagents().start("b", request("x")).unwrap();
    a.started().await.unwrap();
    b.started().await.unwrap();
    host.unload_all().await;
    assert!(a.is_disposed() && b.is_disposed());
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
    assert!(host.subagents().list().is_empty());
}

/// A native provider whose run, once ready, disposes its own run from inside its future (on the
/// run's own driver task), then goes on to return a result.
struct DisposesItself {
    handle: Mutex<Option<oneshot::Receiver<SubagentRun>>>,
    /// Whether its own dispose returned, with the run disposed, inside the run.
    returned: Arc<AtomicBool>,
}

impl Provider for DisposesItself {
    fn run(
        &self,
        ctx: RunContext,
        _request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let handle = self.handle.lock().unwrap().take();
        let returned = self.returned.clone();
        Box::pin(async move {
            ctx.ready();
            let run = handle
                .expect("one run")
                .await
                .map_err(|_| RunFailure::Refused("no handle".into()))?;
            run.dispose().await;
            returned.store(run.is_disposed(), Ordering::SeqCst);
            Ok(SubagentResult::text(
                StopReason::Completed,
                "after my own dispose",
            ))
        })
    }
}

#[tokio::test]
async fn dispose_from_inside_the_runs_own_task_returns_and_leaves_nothing() {
    let host = host_with(&mock("m", "")).await;
    let (tx, rx) = oneshot::channel();
    let returned = Arc::new(AtomicBool::new(false));
    host.register_provider(
        ProviderDescriptor {
            name: "selfish".into(),
            capabilities: Capabilities::default(),
            features: RuntimeFeatures::default(),
            inherits_parent_context: false,
        },
        Arc::new(DisposesItself {
            handle: Mutex::new(Some(rx)),
            returned: returned.clone(),
        }),
    )
    .await
    .unwrap();
    let seen = record(&host);
    let run = host.subagents().start("selfish", request("x")).unwrap();
    tx.send(run.clone()).unwrap();
    let result = tokio::time::timeout(BARRIER_TIMEOUT, run.result())
        .await
        .expect("the run settles: its own dispose did not wait for itself")
        .unwrap();
    // Disposed before it could return its answer: `aborted`, and the later answer is ignored.
    assert_eq!(result.stop_reason, StopReason::Aborted, "{result:?}");
    diagnosed(&result, "disposed before it settled");
    assert!(run.is_disposed());
    assert!(
        returned.load(Ordering::SeqCst),
        "dispose returned inside the run"
    );
    // Disposing again from outside is a no-op that returns at once.
    tokio::time::timeout(BARRIER_TIMEOUT, run.dispose())
        .await
        .expect("idempotent");
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.subagents().live_runs_of("selfish"), 0);
    let events = seen.lock().unwrap().clone();
    match &events[..] {
        [Event::SubagentStart { id: a, .. }, Event::SubagentEnd {
            id: b, stop_reason, ..
        }] => {
            assert_eq!((a.as_str(), b.as_str()), (run.id(), run.id()));
            assert_eq!(*stop_reason, StopReason::Aborted);
        }
        other => panic!("{other:?}"),
    }
    // The host keeps serving.
    let good = host.subagents().start("m", request("x")).unwrap();
    assert!(good.result().await.unwrap().stop_reason.is_success());
    good.dispose().await;
}

// `settle` emits `subagent/end` while holding the run's phase lock; a listener can only dispose
// synchronously (it is a plain `Fn`), so disposing its own run from `subagent/end` must not wait
// for that lock (it once deadlocked the run's driver thread). Runs on a thread of its own so that the deadlock fails the test instead of hanging the suite.
#[test]
fn dispose_from_a_listener_as_the_run_ends_returns() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let host = host_with(&mock("m", "")).await;
            let slot: Arc<std::sync::OnceLock<SubagentRun>> = Arc::default();
            let listener_slot = slot.clone();
            host.events().subscribe(move |e| {
                if let Event::SubagentEnd { id, .. } = e {
                    if let Some(run) = listener_slot.get().filter(|r| r.id() == id) {
                        use futures::FutureExt;
                        // The run is settling on this very task: dispose must not wait for it.
                        let _ = run.dispose().now_or_never();
                    }
                }
                Ok(())
            });
            // On its task, so that the listener has the handle when the run ends.
            let run = host.subagents().start_on_task("m", request("x")).unwrap();
            slot.set(run.clone()).unwrap();
            assert!(run.result().await.unwrap().stop_reason.is_success());
            run.dispose().await;
            assert!(run.is_disposed());
            assert_eq!(host.live_runs(), 0);
        });
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(BARRIER_TIMEOUT).is_ok(),
        "the run's driver deadlocked"
    );
}

// The first `dispose` marks the run `Disposing` and takes its task; if that future is dropped
// before it completes (a timeout, a `select!`, an aborted caller), the run must still end up
// disposed (it once stayed `Disposing` forever, counted, with every later `dispose` waiting).
#[tokio::test]
async fn a_dispose_dropped_midway_does_not_wedge_the_run() {
    let host = host_with(&entry(
        "deaf",
        "faulty_provider",
        "name = \"deaf\", mode = \"ignore-cancel\"",
    ))
    .await;
    let run = host.subagents().start("deaf", request("x")).unwrap();
    run.started().await.unwrap();
    // Shorter than the cancel grace: this dispose is still waiting for the run when dropped.
    let dropped = tokio::time::timeout(Duration::from_millis(10), run.dispose()).await;
    assert!(dropped.is_err(), "the first dispose was still waiting");
    tokio::time::timeout(BARRIER_TIMEOUT, run.dispose())
        .await
        .expect("a later dispose completes");
    assert!(run.is_disposed());
    assert_eq!(run.result().await.unwrap().stop_reason, StopReason::Aborted);
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}

/// A run started while the host's instance pool is full fails to start, saying that the pool is
/// full and what to raise; the live runs go on, and a run started once one is gone starts.
#[tokio::test]
async fn a_full_instance_pool_refuses_the_next_run_and_names_what_to_raise() {
    let mut options = test_options();
    options.engine.pool_instances = 2;
    let host = seam_host::Host::new(options).unwrap();
    loaded(host.load(&config(&mock("m", "delayMs = 600000"))).await);
    let live: Vec<SubagentRun> = (0..2)
        .map(|_| host.subagents().start("m", request("x")).unwrap())
        .collect();
    for run in &live {
        run.started().await.unwrap();
    }
    let refused = host.subagents().start("m", request("x")).unwrap();
    let err = refused.started().await.unwrap_err().to_string();
    assert!(
        err.contains("instance pool is full") && err.contains("SEAM_POOL_INSTANCES"),
        "{err}"
    );
    refused.dispose().await;
    assert_eq!(host.live_instances(), 2, "the live runs go on");

    let [first, second] = <[SubagentRun; 2]>::try_from(live).ok().unwrap();
    first.dispose().await;
    let next = host.subagents().start("m", request("x")).unwrap();
    next.started().await.unwrap();
    for run in [second, next] {
        run.dispose().await;
    }
    assert_eq!(host.live_instances(), 0);
}
