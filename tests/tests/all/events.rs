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
    // The first listener vandalises its copy; nobody else may notice.
    host.events().subscribe(|mut e| {
        if let Event::SubagentEnd {
            stop_reason,
            last_assistant_message,
            ..
        } = &mut e
        {
            *stop_reason = StopReason::Error;
            *last_assistant_message = None;
        }
        Ok(())
    });
    let seen = record(&host);
    let run = host.subagents().start("m", request("x")).unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await;
    assert_eq!(result.answer_text(), "truth");
    assert!(result.stop_reason.is_success());
    let events = seen.lock().unwrap();
    match &events[1] {
        Event::SubagentEnd {
            stop_reason,
            last_assistant_message,
            ..
        } => {
            assert_eq!(*stop_reason, StopReason::Completed);
            assert!(last_assistant_message.is_some());
        }
        e => panic!("{e:?}"),
    }
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
