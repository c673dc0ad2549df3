//! Run settlement (contract sections 3 and 4): readiness, result, cancel, dispose and the
//! events around them, with fake providers.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use seam_core::subagent::{code, Aborted, RunFailure};
use seam_core::{Capabilities, ContentBlock, Event, StopReason, SubagentError, SubagentResult};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::support::*;

fn core() -> Core {
    Core::new(Duration::from_millis(100))
}

#[tokio::test]
async fn a_run_starts_settles_and_disposes_to_zero_live_runs() {
    let core = core();
    let fake = Fake::answering("done");
    core.register("p", Capabilities::default(), fake.clone());
    let run = core.subagents.start("p", request("go")).unwrap();
    within("started", run.started()).await.unwrap();
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.output_text(), "done");
    assert_eq!(result.diagnostic, None);
    assert_eq!(run.aborted(), None, "it was not aborted");
    assert_eq!(
        core.log.of_run(run.id()),
        ["subagent/start", "subagent/end"]
    );
    assert_eq!(core.live.runs(), 1, "settled is not disposed");
    run.dispose().await;
    assert!(run.is_disposed());
    assert_eq!(core.live.runs(), 0);
    assert_eq!(core.subagents.live_runs_of("p"), 0);
    assert_eq!(fake.probe.alive(), 0);
}

#[tokio::test]
async fn a_result_returned_without_ready_still_announces_start_before_end() {
    let core = core();
    let fake = Fake::new(|_ctx, _| async { Ok(SubagentResult::text(StopReason::Completed, "x")) });
    core.register("quiet", Capabilities::default(), fake);
    let run = core.subagents.start("quiet", request("go")).unwrap();
    within("result", run.result()).await.unwrap();
    within("started", run.started()).await.unwrap();
    assert_eq!(
        core.log.of_run(run.id()),
        ["subagent/start", "subagent/end"]
    );
    match &core.log.all().iter().find(|e| e.name() == "subagent/end") {
        Some(Event::SubagentEnd {
            last_assistant_message,
            ..
        }) => assert_eq!(
            last_assistant_message.as_deref(),
            Some(&[ContentBlock::text("x")][..])
        ),
        other => panic!("{other:?}"),
    }
    run.dispose().await;
}

#[tokio::test]
async fn progress_before_readiness_is_held_and_comes_after_start_in_order() {
    let core = core();
    let fake = Fake::new(|ctx, _| async move {
        ctx.progress(vec![ContentBlock::text("early")]);
        ctx.ready();
        ctx.progress(vec![ContentBlock::text("late")]);
        Ok(SubagentResult::text(StopReason::Completed, "x"))
    });
    core.register("p", Capabilities::default(), fake);
    let run = core.subagents.start("p", request("go")).unwrap();
    within("result", run.result()).await.unwrap();
    assert_eq!(
        core.log.of_run(run.id()),
        [
            "subagent/start",
            "subagent/progress",
            "subagent/progress",
            "subagent/end"
        ]
    );
    let seqs: Vec<(u64, String)> = core
        .log
        .all()
        .into_iter()
        .filter_map(|e| match e {
            Event::SubagentProgress { seq, content, .. } => {
                Some((seq, seam_core::blocks_text(&content)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(seqs, [(1, "early".into()), (2, "late".into())]);
    assert_eq!(seam_core::blocks_text(&run.progress()), "early\nlate");
    run.dispose().await;
}

#[tokio::test]
async fn cancel_before_readiness_rejects_started_leaves_no_child_and_emits_nothing() {
    let core = core();
    let entered = Arc::new(Notify::new());
    let e = entered.clone();
    let fake = Fake::new(move |ctx, _| {
        let entered = e.clone();
        async move {
            entered.notify_one();
            // Never ready: waits for the cancel, as a slow instantiation would.
            ctx.cancelled().await;
            ctx.ready();
            Ok(SubagentResult::text(StopReason::Completed, "too late"))
        }
    });
    core.register("slow", Capabilities::default(), fake.clone());
    let run = core.subagents.start("slow", request("go")).unwrap();
    within("the provider runs", entered.notified()).await;
    run.cancel(Some("changed my mind".into()));
    let started = within("started", run.started()).await;
    assert!(
        matches!(&started, Err(SubagentError::Aborted(Some(r))) if r == "changed my mind"),
        "{started:?}"
    );
    assert_eq!(started.unwrap_err().code(), code::ABORTED);
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(
        result.diagnostic.as_deref(),
        Some("cancelled: changed my mind")
    );
    assert!(core.log.of_run(run.id()).is_empty(), "{:?}", core.log.all());
    run.dispose().await;
    assert_eq!(fake.probe.alive(), 0);
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn cancel_after_readiness_is_aborted_even_when_the_provider_ignores_it() {
    let core = core();
    let ignoring = Fake::new(|ctx, _| async move {
        ctx.ready();
        std::future::pending().await
    });
    core.register("deaf", Capabilities::default(), ignoring.clone());
    let run = core.subagents.start("deaf", request("go")).unwrap();
    within("started", run.started()).await.unwrap();
    run.cancel(None);
    // The host enforces the cancel after its grace period.
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert!(
        result
            .diagnostic
            .as_deref()
            .is_some_and(|d| d.starts_with("cancel enforced")),
        "{result:?}"
    );
    assert_eq!(run.aborted(), Some(Aborted::Enforced));
    assert_eq!(
        ignoring.probe.alive(),
        0,
        "the provider's future was dropped"
    );
    assert_eq!(
        core.log.of_run(run.id()),
        ["subagent/start", "subagent/end"]
    );
    run.dispose().await;

    // A provider that listens ends with its own words kept, after the host's.
    let polite = Fake::until_cancelled();
    core.register("polite", Capabilities::default(), polite);
    let run = core.subagents.start("polite", request("go")).unwrap();
    within("started", run.started()).await.unwrap();
    run.cancel(Some("enough".into()));
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(result.output_text(), "stopped as asked");
    assert_eq!(result.diagnostic.as_deref(), Some("cancelled: enough"));
    assert_eq!(run.aborted(), Some(Aborted::Cancelled));
    run.dispose().await;
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn an_already_aborted_signal_yields_aborted_with_no_child() {
    let core = core();
    let fake = Fake::answering("never");
    core.register("p", Capabilities::default(), fake.clone());
    let mut req = request("go");
    let signal = CancellationToken::new();
    signal.cancel();
    req.signal = Some(signal);
    let run = core.subagents.start("p", req).unwrap();
    let result = run.try_result().expect("settled at once").unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(run.aborted(), Some(Aborted::BeforeStart));
    assert!(matches!(
        within("started", run.started()).await,
        Err(SubagentError::Aborted(_))
    ));
    assert_eq!(fake.probe.calls.load(Ordering::SeqCst), 0, "no child run");
    assert!(core.log.of_run(run.id()).is_empty());
    run.dispose().await;
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn the_callers_signal_cancels_a_live_run() {
    let core = core();
    core.register("p", Capabilities::default(), Fake::until_cancelled());
    let mut req = request("go");
    let signal = CancellationToken::new();
    req.signal = Some(signal.clone());
    let run = core.subagents.start("p", req).unwrap();
    within("started", run.started()).await.unwrap();
    signal.cancel();
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert!(
        result
            .diagnostic
            .as_deref()
            .is_some_and(|d| d.contains("the caller's signal was aborted")),
        "{result:?}"
    );
    run.dispose().await;
}

#[tokio::test]
async fn dispose_is_idempotent_concurrent_and_leaves_nothing_behind() {
    let core = core();
    let fake = Fake::until_cancelled();
    core.register("p", Capabilities::default(), fake.clone());
    let run = core.subagents.start("p", request("go")).unwrap();
    within("started", run.started()).await.unwrap();
    assert_eq!((core.live.runs(), fake.probe.alive()), (1, 1));
    let (a, b) = (run.clone(), run.clone());
    within(
        "dispose",
        futures::future::join3(a.dispose(), b.dispose(), run.dispose()),
    )
    .await;
    // When any dispose returns, the run is quiescent.
    assert!(run.is_disposed());
    assert_eq!(core.live.runs(), 0);
    assert_eq!(fake.probe.alive(), 0);
    assert_eq!(core.subagents.live_runs_of("p"), 0);
    // It settled `aborted`, with its end announced once.
    let result = run.try_result().unwrap().unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(
        core.log.of_run(run.id()),
        ["subagent/start", "subagent/end"]
    );
    run.dispose().await;
    assert_eq!(core.live.runs(), 0, "a later dispose changes nothing");
}

#[tokio::test]
async fn dispose_before_readiness_is_quiescent_too() {
    let core = core();
    let fake = Fake::new(|_ctx, _| std::future::pending());
    core.register("p", Capabilities::default(), fake.clone());
    let run = core.subagents.start("p", request("go")).unwrap();
    run.dispose().await;
    assert_eq!((core.live.runs(), fake.probe.alive()), (0, 0));
    assert!(matches!(
        within("started", run.started()).await,
        Err(SubagentError::Aborted(_))
    ));
    assert_eq!(
        run.try_result().unwrap().unwrap().stop_reason,
        StopReason::Aborted
    );
    assert!(core.log.of_run(run.id()).is_empty());
}

#[tokio::test]
async fn a_failed_child_is_stop_reason_error_not_a_failed_result() {
    let core = core();
    // The child says it failed.
    core.register(
        "says-error",
        Capabilities::default(),
        Fake::new(|ctx, _| async move {
            ctx.ready();
            Ok(SubagentResult::text(StopReason::Error, "I could not"))
        }),
    );
    // The guest faults after its child existed.
    core.register(
        "faults",
        Capabilities::default(),
        Fake::new(|ctx, _| async move {
            ctx.ready();
            Err(RunFailure::GuestFault("wasm trap: unreachable".into()))
        }),
    );
    // The run hits a limit before its child existed.
    core.register(
        "limited",
        Capabilities::default(),
        Fake::new(|_ctx, _| async move {
            Err(RunFailure::LimitHit {
                plugin: "limited-plugin".into(),
                limit: "run_timeout_ms".into(),
                detail: "the run took longer than 5 ms".into(),
            })
        }),
    );

    let run = core.subagents.start("says-error", request("go")).unwrap();
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Error);
    assert_eq!(result.output_text(), "I could not");
    run.dispose().await;

    let run = core.subagents.start("faults", request("go")).unwrap();
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Error);
    assert!(result.output.is_empty(), "no failure text as output");
    // The wording is what users read.
    assert_eq!(
        result.diagnostic.as_deref(),
        Some("provider `faults` failed: guest fault: wasm trap: unreachable")
    );
    assert_eq!(
        core.log.of_run(run.id()),
        ["subagent/start", "subagent/end"]
    );
    run.dispose().await;

    let run = core.subagents.start("limited", request("go")).unwrap();
    let started = within("started", run.started()).await.unwrap_err();
    assert_eq!(started.code(), code::START_FAILED);
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Error);
    assert_eq!(
        result.diagnostic.as_deref(),
        Some(
            "provider `limited` failed: plugin `limited-plugin` hit its limit `run_timeout_ms`: \
             the run took longer than 5 ms"
        )
    );
    assert!(core.log.of_run(run.id()).is_empty(), "never started");
    run.dispose().await;
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn an_infrastructure_fault_fails_result_and_ends_without_a_last_message() {
    let core = core();
    core.register(
        "buggy",
        Capabilities::default(),
        Fake::new(|ctx, _| async move {
            ctx.ready();
            panic!("a bug in the host's provider");
        }),
    );
    let run = core.subagents.start("buggy", request("go")).unwrap();
    within("started", run.started()).await.unwrap();
    let fault = within("result", run.result()).await.unwrap_err();
    assert_eq!(fault.code(), code::INTERNAL);
    assert!(
        matches!(&fault, SubagentError::Internal(m) if m.contains("a bug in the host's provider"))
    );
    let end = core
        .log
        .all()
        .into_iter()
        .find(|e| e.name() == "subagent/end")
        .expect("the end is announced");
    assert!(
        matches!(
            &end,
            Event::SubagentEnd {
                stop_reason: StopReason::Error,
                last_assistant_message: None,
                diagnostic: Some(_),
                ..
            }
        ),
        "{end:?}"
    );
    run.dispose().await;
    assert_eq!(core.live.runs(), 0);

    // Before readiness, `started` rejects with the fault and nothing is emitted.
    core.register(
        "buggier",
        Capabilities::default(),
        Fake::new(|_ctx, _| async move { panic!("at once") }),
    );
    let run = core.subagents.start("buggier", request("go")).unwrap();
    let started = within("started", run.started()).await.unwrap_err();
    assert_eq!(started.code(), code::INTERNAL);
    assert!(within("result", run.result()).await.is_err());
    assert!(core.log.of_run(run.id()).is_empty());
    run.dispose().await;
}

#[tokio::test]
async fn a_listener_that_panics_is_skipped_and_the_run_still_settles() {
    let core = core();
    core.events.subscribe(|e| {
        if e.name() == "subagent/start" {
            panic!("a bad observer");
        }
        Ok(())
    });
    core.events.subscribe(|_| Err("a failing observer".into()));
    core.register("p", Capabilities::default(), Fake::answering("fine"));
    let run = core.subagents.start("p", request("go")).unwrap();
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.output_text(), "fine");
    // The log subscribed first and saw both; listeners after the bad ones still run.
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    core.events.subscribe(move |e| {
        s.lock().unwrap().push(e.name());
        Ok(())
    });
    let run2 = core.subagents.start("p", request("again")).unwrap();
    within("result", run2.result()).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), ["subagent/start", "subagent/end"]);
    run.dispose().await;
    run2.dispose().await;
}

// ---------------------------------------------------------------------------------------------
// Where a run's work happens: its first poll on the caller's thread, the rest on its task.

#[tokio::test]
async fn a_run_with_nothing_to_wait_for_has_settled_when_start_returns() {
    let core = core();
    core.register("p", Capabilities::default(), Fake::answering("done"));
    let run = core.subagents.start("p", request("go")).unwrap();
    // No await yet: on this one-thread runtime no task could have run.
    let settled = run.try_result().expect("settled inside start").unwrap();
    assert_eq!(settled.output_text(), "done");
    assert_eq!(
        core.log.of_run(run.id()),
        ["subagent/start", "subagent/end"]
    );
    run.dispose().await;
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn start_on_task_leaves_all_of_the_work_to_the_runs_task() {
    let core = core();
    let fake = Fake::answering("done");
    core.register("p", Capabilities::default(), fake.clone());
    let run = core.subagents.start_on_task("p", request("go")).unwrap();
    assert!(run.try_result().is_none(), "nothing ran before a yield");
    assert_eq!(fake.probe.calls.load(Ordering::SeqCst), 0);
    assert!(core.log.of_run(run.id()).is_empty());
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.output_text(), "done");
    run.dispose().await;
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn a_run_that_waits_after_its_first_poll_goes_on_on_its_own_task() {
    let core = core();
    let gate = Arc::new(Notify::new());
    let opened = gate.clone();
    let fake = Fake::new(move |ctx, _| {
        let gate = opened.clone();
        async move {
            ctx.ready();
            // Wakes its waker inside the first poll, whose waker goes nowhere: the run's task
            // must poll it again by itself.
            tokio::task::yield_now().await;
            gate.notified().await;
            Ok(SubagentResult::text(
                StopReason::Completed,
                "after the gate",
            ))
        }
    });
    core.register("p", Capabilities::default(), fake.clone());
    let run = core.subagents.start("p", request("go")).unwrap();
    assert_eq!(
        core.log.of_run(run.id()),
        ["subagent/start"],
        "ready in its first poll, announced before start returned"
    );
    assert!(run.try_result().is_none());
    within("started", run.started()).await.unwrap();
    // `notify_one` keeps a permit for a run that does not wait on the gate yet.
    gate.notify_one();
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.output_text(), "after the gate");
    run.dispose().await;
    assert_eq!(fake.probe.alive(), 0);
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn a_run_started_inside_another_runs_first_poll_goes_to_its_own_task() {
    let core = core();
    core.register("inner", Capabilities::default(), Fake::answering("inner"));
    let service = Arc::downgrade(&core.subagents);
    let seen = Arc::new(std::sync::Mutex::new(None));
    let saw = seen.clone();
    let outer = Fake::new(move |ctx, _| {
        let service = service.clone();
        let saw = saw.clone();
        async move {
            ctx.ready();
            let service = service.upgrade().expect("the service lives");
            let child = service.start("inner", request("nested")).expect("starts");
            // The caller's stack carries one run's work at most.
            *saw.lock().unwrap() = Some(child.try_result().is_some());
            let answer = child.result().await.expect("settles");
            child.dispose().await;
            Ok(SubagentResult::text(
                StopReason::Completed,
                format!("outer saw {}", answer.output_text()),
            ))
        }
    });
    core.register("outer", Capabilities::default(), outer);
    let run = core.subagents.start("outer", request("go")).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        Some(false),
        "the nested run was not run inline"
    );
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.output_text(), "outer saw inner");
    run.dispose().await;
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_callers_on_many_threads_each_see_their_runs_settle_and_dispose() {
    let core = core();
    core.register("p", Capabilities::default(), Fake::answering("done"));
    let slow = Fake::new(|ctx, _| async move {
        ctx.ready();
        tokio::task::yield_now().await;
        Ok(SubagentResult::text(StopReason::Completed, "slow"))
    });
    core.register("slow", Capabilities::default(), slow);
    let callers = (0..8).map(|i| {
        let subagents = core.subagents.clone();
        tokio::spawn(async move {
            for _ in 0..50 {
                let name = if i % 2 == 0 { "p" } else { "slow" };
                let run = subagents.start(name, request("go")).unwrap();
                run.started().await.unwrap();
                let result = run.result().await.unwrap();
                assert_eq!(result.stop_reason, StopReason::Completed);
                run.dispose().await;
            }
        })
    });
    for caller in futures::future::join_all(callers).await {
        caller.expect("a caller panicked");
    }
    assert_eq!(core.live.runs(), 0);
    assert_eq!(
        core.subagents.live_runs_of("p") + core.subagents.live_runs_of("slow"),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_removed_during_a_runs_first_poll_is_disposed_once_that_poll_ends() {
    let core = core();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
    let fake = Fake::new(move |ctx, _| {
        let entered = entered_tx.clone();
        let release = release_rx.clone();
        async move {
            ctx.ready();
            // Holds the caller's thread inside `start` until the test lets it go.
            entered.send(()).unwrap();
            release.lock().unwrap().recv().unwrap();
            Ok(SubagentResult::text(
                StopReason::Completed,
                "finished its poll",
            ))
        }
    });
    core.register("p", Capabilities::default(), fake.clone());
    let subagents = core.subagents.clone();
    let runtime = tokio::runtime::Handle::current();
    let starter = std::thread::spawn(move || {
        let _in_runtime = runtime.enter();
        let run = subagents.start("p", request("go")).unwrap();
        run.id().to_string()
    });
    entered_rx.recv().unwrap();
    let removal = core.subagents.unregister("p");
    let mut removal = std::pin::pin!(removal);
    assert!(
        futures::poll!(removal.as_mut()).is_pending(),
        "the removal's dispose waits for the first poll"
    );
    release_tx.send(()).unwrap();
    assert!(within("the removal", removal).await);
    assert_eq!(
        fake.probe.alive(),
        0,
        "the run's future ended before its dispose returned"
    );
    let id = starter.join().unwrap();
    assert_eq!(core.live.runs(), 0);
    assert_eq!(
        core.log.of_run(&id).first().copied(),
        Some("subagent/start")
    );
}

#[tokio::test]
async fn a_caller_looping_on_runs_that_settle_in_start_still_gives_way_to_other_tasks() {
    let core = core();
    core.register("p", Capabilities::default(), Fake::answering("done"));
    let other_ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = other_ran.clone();
    tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
    // One thread: the spawned task runs only if this loop yields.
    for _ in 0..10_000 {
        if other_ran.load(Ordering::SeqCst) {
            return;
        }
        let run = core.subagents.start("p", request("go")).unwrap();
        run.started().await.unwrap();
        run.result().await.unwrap();
        run.dispose().await;
    }
    panic!("10,000 runs went by without the caller giving way once");
}
