//! CONTRACT section 4: events.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use seam_host::{
    Capabilities, Event, Provider, ProviderDescriptor, RunContext, RunFailure, RuntimeFeatures,
    StartRequest, StopReason, SubagentResult,
};
use seam_tests::*;

fn ids_in_order(seen: &Arc<Mutex<Vec<Event>>>) -> Vec<(String, &'static str)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentStart { id, .. } => Some((id.clone(), "start")),
            Event::SubagentEnd { id, .. } => Some((id.clone(), "end")),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn start_payload_names_provider_run_and_parent_and_end_carries_the_output() {
    let host = host_with(&mock("m", "reply = \"final answer\"")).await;
    let seen = record(&host);
    let run = host.subagents().start("m", request("x")).unwrap();
    run.result().await.unwrap();
    run.dispose().await;
    let events = seen.lock().unwrap().clone();
    match &events[..] {
        [Event::SubagentStart {
            provider,
            id,
            parent,
        }, Event::SubagentEnd {
            provider: p2,
            id: id2,
            stop_reason,
            last_assistant_message,
            ..
        }] => {
            assert_eq!(provider, "m");
            assert_eq!(p2, "m");
            assert_eq!(id, run.id());
            assert_eq!(id2, run.id());
            assert_eq!(parent.id, "parent");
            assert_eq!(*stop_reason, StopReason::Completed);
            assert_eq!(
                last_assistant_message.as_deref(),
                Some(&[seam_host::ContentBlock::text("final answer")][..])
            );
        }
        other => panic!("unexpected events {other:?}"),
    }
    let json = events[1].to_json();
    assert!(json.contains("\"event\":\"subagent/end\""), "{json}");
    assert!(json.contains("last-assistant-message"), "{json}");
}

/// A native provider that settles without ever declaring readiness.
struct SettlesFirst;

impl Provider for SettlesFirst {
    fn run(
        &self,
        _ctx: RunContext,
        _request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        Box::pin(async { Ok(SubagentResult::text(StopReason::Completed, "early")) })
    }
}

#[tokio::test]
async fn start_precedes_end_even_when_the_result_settles_first() {
    let host = host_with(&mock("m", "")).await;
    host.register_provider(
        ProviderDescriptor {
            name: "early".into(),
            capabilities: Capabilities::default(),
            features: RuntimeFeatures::default(),
            inherits_parent_context: false,
        },
        Arc::new(SettlesFirst),
    )
    .await
    .unwrap();
    let seen = record(&host);
    let runs: Vec<_> = (0..50)
        .map(|i| {
            let name = if i % 2 == 0 { "early" } else { "m" };
            host.subagents().start(name, request("x")).unwrap()
        })
        .collect();
    for run in &runs {
        run.result().await.unwrap();
        run.started()
            .await
            .expect("a settled result implies readiness");
        run.dispose().await;
    }
    let order = ids_in_order(&seen);
    assert_eq!(order.len(), 100);
    for run in &runs {
        let start = order
            .iter()
            .position(|(id, k)| id == run.id() && *k == "start");
        let end = order
            .iter()
            .position(|(id, k)| id == run.id() && *k == "end");
        assert!(start.unwrap() < end.unwrap(), "{}: {order:?}", run.id());
    }
}

#[tokio::test]
async fn a_failing_or_panicking_listener_is_contained() {
    let host = host_with(&mock("m", "")).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    host.events().subscribe(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        Err("listener says no".into())
    });
    host.events().subscribe(|e| {
        if e.name() == "subagent/start" {
            panic!("listener blew up");
        }
        Ok(())
    });
    let seen = record(&host);
    let run = host.subagents().start("m", request("x")).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert!(result.stop_reason.is_success());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(names(&seen), ["subagent/start", "subagent/end"]);
}

#[tokio::test]
async fn each_listener_gets_its_own_copy() {
    let host = host_with(&mock("m", "reply = \"truth\"")).await;
    // Listeners before and after the vandal, which rewrites its copy of the end in place (the
    // answer's blocks, the reason, the diagnostic): nobody else may notice.
    let before = record(&host);
    let vandalised = Arc::new(AtomicUsize::new(0));
    let v = vandalised.clone();
    host.events().subscribe(move |mut e| {
        if let Event::SubagentEnd {
            stop_reason,
            last_assistant_message,
            diagnostic,
            ..
        } = &mut e
        {
            *stop_reason = StopReason::Error;
            let blocks = last_assistant_message
                .as_mut()
                .ok_or("no message to vandalise")?;
            blocks[0] = seam_host::ContentBlock::text("lies");
            blocks.push(seam_host::ContentBlock::text("more lies"));
            *diagnostic = Some("vandalised".into());
            v.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    let after = record(&host);
    let run = host.subagents().start("m", request("x")).unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(
        vandalised.load(Ordering::SeqCst),
        1,
        "the vandal saw the end"
    );
    let original = Event::SubagentEnd {
        provider: "m".into(),
        id: run.id().into(),
        parent: request("x").parent,
        stop_reason: StopReason::Completed,
        last_assistant_message: Some(vec![seam_host::ContentBlock::text("truth")]),
        diagnostic: None,
        usage: None,
        cost_usd: None,
    };
    for (who, seen) in [("before", &before), ("after", &after)] {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{who}: {seen:?}");
        assert_eq!(seen[1], original, "the listener {who} the vandal");
    }
    // The caller's result, read twice, is the child's.
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.output, [seam_host::ContentBlock::text("truth")]);
    assert_eq!(result.diagnostic, None);
    assert_eq!(run.try_result().unwrap().unwrap(), result);
    run.dispose().await;
}

#[tokio::test]
async fn provider_added_and_removed_follow_load_and_unload() {
    let host = test_host();
    let seen = record(&host);
    loaded(host.load(&config(&mock("m", ""))).await);
    host.unload_all().await;
    let names = names(&seen);
    assert_eq!(
        names,
        [
            "subagent/provider-added",
            "plugin/loaded",
            "subagent/provider-removed",
            "plugin/unloaded"
        ]
    );
    let first = seen.lock().unwrap()[0].clone();
    assert_eq!(first, Event::ProviderAdded { name: "m".into() });
}

#[tokio::test]
async fn unsubscribed_listeners_hear_nothing_more() {
    let host = host_with(&mock("m", "")).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let id = host.events().subscribe(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    assert!(host.events().unsubscribe(id));
    let run = host.subagents().start("m", request("x")).unwrap();
    run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

/// Log lines of `plugin`'s observer that contain `needle`.
fn observed(log: &CapturedLog, plugin: &str, needle: &str) -> Vec<String> {
    log.lines()
        .into_iter()
        .filter(|l| {
            l.contains(&format!("plugin=\"{plugin}\"")) || l.contains(&format!("plugin={plugin}"))
        })
        .filter(|l| l.contains(needle))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn observer_components_see_every_event_in_order_and_faulty_ones_are_contained() {
    let (log, _guard) = CapturedLog::start();
    let toml = entry("watch", "observer_probe", "mode = \"log\"")
        + &entry("trapper", "observer_probe", "mode = \"trap\"")
        + &entry("panicker", "observer_probe", "mode = \"panic\"")
        + &entry("grump", "observer_probe", "mode = \"error\"")
        + &mock("m", "");
    let host = host_with(&toml).await;
    let seen = record(&host);
    let run = host.subagents().start("m", request("x")).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert!(result.stop_reason.is_success());
    assert_eq!(names(&seen), ["subagent/start", "subagent/end"]);
    // Delivery is asynchronous: wait for the well-behaved observer's log line.
    log.wait_for("`watch` observing subagent/end", |_| {
        observed(&log, "watch", "observed subagent/end").len() == 1
    })
    .await;
    let order: Vec<String> = observed(&log, "watch", "observed subagent/")
        .into_iter()
        .filter(|l| l.contains("subagent/start") || l.contains("subagent/end"))
        .collect();
    assert_eq!(order.len(), 2, "{order:#?}");
    assert!(
        order[0].contains("subagent/start") && order[1].contains("subagent/end"),
        "{order:#?}"
    );
    for (faulty, cause) in [
        ("trapper", "unreachable"),
        ("panicker", "observer panics on"),
        ("grump", "refusing"),
    ] {
        log.wait_for(&format!("`{faulty}` failing"), |_| {
            !observed(&log, faulty, "observer failed").is_empty()
        })
        .await;
        let failures = observed(&log, faulty, "observer failed");
        assert!(
            failures.iter().any(|l| l.contains(cause)),
            "{faulty} should fail with `{cause}`: {failures:#?}"
        );
    }

    // Unloaded observers hear nothing more. A second logging observer, loaded after the unload,
    // is the barrier: once it has logged the new run's `subagent/end`, every event of the new
    // load and run has been emitted, and `watch` (subscribed before it, on this one thread)
    // would have been handed each of them first.
    host.unload_all().await;
    let before = observed(&log, "watch", "observed").len();
    loaded(
        host.load(&config(
            &(entry("witness", "observer_probe", "mode = \"log\"") + &mock("again", "")),
        ))
        .await,
    );
    let run = host.subagents().start("again", request("x")).unwrap();
    run.result().await.unwrap();
    run.dispose().await;
    log.wait_for("`witness` observing subagent/end", |_| {
        !observed(&log, "witness", "observed subagent/end").is_empty()
    })
    .await;
    assert!(
        observed(&log, "witness", "observed plugin/loaded").len() >= 2,
        "the witness heard the load: {:#?}",
        log.lines()
    );
    assert_eq!(
        observed(&log, "watch", "observed").len(),
        before,
        "{:#?}",
        log.lines()
    );
    assert!(
        observed(&log, "watch", "")
            .iter()
            .all(|l| !l.contains("queue full")),
        "an unloaded observer's listener is gone, not just its task"
    );
    host.unload_all().await;
    assert_eq!(host.live_instances(), 0);
}

/// A native provider whose future panics once its child exists: a bug on the host's side, the
/// one infrastructure fault a run can meet (no guest can cause it: a guest's trap or panic is
/// `stop-reason: error`).
struct PanicsAfterReady;

impl Provider for PanicsAfterReady {
    fn run(
        &self,
        ctx: RunContext,
        _request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        Box::pin(async move {
            ctx.ready();
            panic!("a bug in a host-side provider");
        })
    }
}

// seam-core's tests cover this with a fake; here it goes through the host, and through the
// subagent tool component, which sees `result` fail over the WIT interface.
#[tokio::test]
async fn an_infrastructure_fault_fails_result_and_ends_without_a_last_message() {
    let host = host_with(&entry(
        "ask",
        "subagent_tool",
        "provider = \"buggy\", toolName = \"ask\"",
    ))
    .await;
    host.register_provider(
        ProviderDescriptor {
            name: "buggy".into(),
            capabilities: Capabilities::default(),
            features: RuntimeFeatures::default(),
            inherits_parent_context: false,
        },
        Arc::new(PanicsAfterReady),
    )
    .await
    .unwrap();
    let seen = record(&host);
    let run = host.subagents().start("buggy", request("x")).unwrap();
    run.started().await.unwrap();
    let fault = run.result().await.unwrap_err();
    assert_eq!(fault.code(), "INTERNAL", "{fault}");
    assert!(
        fault.to_string().contains("a bug in a host-side provider"),
        "{fault}"
    );
    run.dispose().await;
    let events = seen.lock().unwrap().clone();
    match &events[..] {
        [Event::SubagentStart { id: a, .. }, Event::SubagentEnd {
            id: b,
            stop_reason,
            last_assistant_message,
            diagnostic,
            ..
        }] => {
            assert_eq!((a.as_str(), b.as_str()), (run.id(), run.id()));
            assert_eq!(*stop_reason, StopReason::Error);
            assert_eq!(*last_assistant_message, None, "no last message on a fault");
            assert!(
                diagnostic
                    .as_deref()
                    .is_some_and(|d| d.contains("a bug in a host-side provider")),
                "{diagnostic:?}"
            );
        }
        other => panic!("{other:?}"),
    }

    // The tool component's `result` call fails; it answers an error result and does not trap.
    let r = host
        .call_tool(
            "ask",
            seam_host::ParentRef::top_level("p", "/w"),
            &serde_json::json!({"description": "d", "prompt": "p"}).to_string(),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(r.is_error, "{r:?}");
    assert!(r.text().contains("a bug in a host-side provider"), "{r:?}");
    let ends: Vec<Option<Vec<seam_host::ContentBlock>>> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentEnd {
                last_assistant_message,
                ..
            } => Some(last_assistant_message.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [None, None]);
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
}
