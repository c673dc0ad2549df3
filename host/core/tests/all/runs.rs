//! Run settlement (contract sections 3 and 4): readiness, result, cancel, dispose and the
//! events around them, with fake providers.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use seam_core::subagent::{code, RunFailure};
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
