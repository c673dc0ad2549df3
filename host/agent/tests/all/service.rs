//! The `subagents` service (contract section 2, and the run ids, background runs and steering
//! of section 9): registration, refusals before anything runs, snapshots, removal.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use seam_core::subagent::code;
use seam_core::{
    AgentOptions, Capabilities, ContentBlock, Event, RunState, RuntimeFeatures, StopReason,
    SubagentError, SubagentResult, ToolFilter,
};
use serde_json::json;

use super::support::*;

fn core() -> Core {
    Core::new(Duration::from_millis(100))
}

#[tokio::test]
async fn a_duplicate_provider_is_refused_and_the_first_stays() {
    let core = core();
    core.register("p", Capabilities::default(), Fake::answering("first"));
    let err = core
        .subagents
        .register(
            "other-plugin",
            descriptor("p", all_caps()),
            Fake::answering("second"),
        )
        .unwrap_err();
    assert_eq!(err, SubagentError::DuplicateProvider("p".into()));
    assert_eq!(err.code(), code::DUPLICATE_PROVIDER);
    assert_eq!(
        core.subagents.descriptor("p").unwrap().capabilities,
        Capabilities::default(),
        "the first descriptor stays"
    );
    let run = core.subagents.start("p", request("go")).unwrap();
    assert_eq!(
        within("result", run.result()).await.unwrap().output_text(),
        "first"
    );
    run.dispose().await;
    let added = core
        .log
        .all()
        .iter()
        .filter(|e| matches!(e, Event::ProviderAdded { name } if name == "p"))
        .count();
    assert_eq!(added, 1);
}

#[tokio::test]
async fn malformed_descriptors_are_refused_naming_the_plugin() {
    let core = core();
    let err = core
        .subagents
        .register(
            "bad-plugin",
            descriptor("", all_caps()),
            Fake::answering("x"),
        )
        .unwrap_err();
    assert!(
        matches!(&err, SubagentError::InvalidDescriptor { plugin, .. } if plugin == "bad-plugin"),
        "{err:?}"
    );
    assert!(core.subagents.list().is_empty());
}

#[tokio::test]
async fn an_unknown_provider_is_no_provider() {
    let core = core();
    let err = core.subagents.start("nobody", request("go")).unwrap_err();
    assert_eq!(err, SubagentError::NoProvider("nobody".into()));
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn capabilities_are_checked_in_order_before_anything_runs() {
    let core = core();
    let fake = Fake::answering("x");
    core.register("bare", Capabilities::default(), fake.clone());
    let mut req = request("go");
    req.output_schema = Some(json!({"type": "object"}));
    req.max_depth = Some(2);
    req.tool_filter = Some(ToolFilter {
        allow: Some(vec!["t".into()]),
        deny: None,
    });
    req.persona = Some("terse".into());
    let missing = |req: &seam_core::StartRequest| match core.subagents.start("bare", req.clone()) {
        Err(SubagentError::UnsupportedCapability {
            provider,
            capability,
        }) => {
            assert_eq!(provider, "bare");
            capability
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(missing(&req), "output-schema");
    req.output_schema = None;
    assert_eq!(missing(&req), "depth-limit");
    req.max_depth = None;
    assert_eq!(missing(&req), "tool-filter");
    req.tool_filter = None;
    assert_eq!(missing(&req), "persona");
    assert_eq!(fake.probe.calls.load(Ordering::SeqCst), 0);
    assert_eq!(core.live.runs(), 0);

    // Malformed requests are refused too, after the capability checks.
    core.register("full", all_caps(), fake.clone());
    for (change, needle) in [
        (
            Box::new(|r: &mut seam_core::StartRequest| r.max_depth = Some(-1))
                as Box<dyn Fn(&mut seam_core::StartRequest)>,
            "max-depth must be 0 or more",
        ),
        (
            Box::new(|r| r.tool_filter = Some(ToolFilter::default())),
            "tool-filter needs",
        ),
        (
            Box::new(|r| r.output_schema = Some(json!({"type": "object", "oneOf": []}))),
            "keyword `oneOf`",
        ),
    ] {
        let mut r = request("go");
        change(&mut r);
        match core.subagents.start("full", r) {
            Err(SubagentError::InvalidRequest(m)) => assert!(m.contains(needle), "{m}"),
            other => panic!("{needle}: {other:?}"),
        }
    }
    // A child deeper than max-depth is refused with both depths.
    let mut r = request("go");
    r.parent.depth = 2;
    r.max_depth = Some(2);
    assert_eq!(
        core.subagents.start("full", r).unwrap_err(),
        SubagentError::DepthExceeded {
            attempted: 3,
            max: 2
        }
    );
    assert_eq!(fake.probe.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_request_is_a_snapshot_taken_at_start() {
    let core = core();
    let fake = Fake::answering("x");
    core.register("p", all_caps(), fake.clone());
    let mut mine = request("the task");
    mine.agent_options = Some(AgentOptions {
        model: Some("scripted:a".into()),
        system_prompt: None,
    });
    let run = core.subagents.start("p", mine.clone()).unwrap();
    mine.prompt = vec![ContentBlock::text("changed")];
    mine.agent_options = None;
    within("result", run.result()).await.unwrap();
    let seen = fake.probe.requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seam_core::blocks_text(&seen[0].prompt), "the task");
    assert_eq!(
        seen[0]
            .agent_options
            .as_ref()
            .and_then(|o| o.model.as_deref()),
        Some("scripted:a")
    );
    run.dispose().await;
}

#[tokio::test]
async fn removing_a_provider_cancels_and_disposes_its_runs_and_it_can_come_back() {
    let core = core();
    let fake = Fake::until_cancelled();
    core.register("p", Capabilities::default(), fake.clone());
    let runs: Vec<_> = (0..3)
        .map(|_| core.subagents.start("p", request("go")).unwrap())
        .collect();
    for run in &runs {
        within("started", run.started()).await.unwrap();
    }
    // A handle the caller dropped is found too.
    drop(core.subagents.start("p", request("dropped")).unwrap());
    assert!(within("unregister", core.subagents.unregister("p")).await);
    for run in &runs {
        assert!(run.is_disposed());
        let result = run.try_result().unwrap().unwrap();
        assert_eq!(result.stop_reason, StopReason::Aborted);
        assert!(
            result
                .diagnostic
                .as_deref()
                .is_some_and(|d| d.contains("provider `p` was removed")),
            "{result:?}"
        );
    }
    assert_eq!((core.live.runs(), fake.probe.alive()), (0, 0));
    // provider-removed comes after every run's end.
    let names: Vec<&str> = core.log.all().iter().map(Event::name).collect();
    let removed = names.iter().position(|n| *n == "subagent/provider-removed");
    let last_end = names.iter().rposition(|n| *n == "subagent/end");
    assert!(removed > last_end, "{names:?}");
    assert!(!within("unregister again", core.subagents.unregister("p")).await);
    assert_eq!(
        core.subagents.start("p", request("go")).unwrap_err().code(),
        code::NO_PROVIDER
    );

    core.register("p", Capabilities::default(), Fake::answering("back"));
    let run = core.subagents.start("p", request("go")).unwrap();
    assert_eq!(
        within("result", run.result()).await.unwrap().output_text(),
        "back"
    );
    run.dispose().await;
}

#[tokio::test]
async fn providers_are_listed_in_registration_order() {
    let core = core();
    for name in ["b", "a", "c"] {
        core.register(name, Capabilities::default(), Fake::answering("x"));
    }
    let names = |core: &Core| -> Vec<String> {
        core.subagents
            .list()
            .iter()
            .map(|d| d.name.clone())
            .collect()
    };
    assert_eq!(names(&core), ["b", "a", "c"]);
    core.subagents.unregister("a").await;
    core.register("a", Capabilities::default(), Fake::answering("x"));
    assert_eq!(names(&core), ["b", "c", "a"]);
}

#[tokio::test]
async fn run_ids_are_unique_when_provider_and_child_ids_repeat() {
    let core = core();
    let mut ids = HashSet::new();
    // Names that end in digits and dashes, so that `name-n` could collide if the numbering
    // were per provider; and a provider that comes back under its old name.
    for round in 0..2 {
        for name in ["a", "a-1", "a-11", "a1"] {
            core.register(name, Capabilities::default(), Fake::answering("x"));
            for _ in 0..12 {
                let run = core.subagents.start(name, request("go")).unwrap();
                assert!(
                    ids.insert(run.id().to_string()),
                    "round {round}: {} twice",
                    run.id()
                );
                within("result", run.result()).await.unwrap();
                run.dispose().await;
            }
            core.subagents.unregister(name).await;
        }
    }
    assert_eq!(ids.len(), 2 * 4 * 12);
}

#[tokio::test]
async fn steering_needs_the_feature_and_a_live_run() {
    let core = core();
    let steerable = Fake::new(|ctx, _| async move {
        ctx.ready();
        ctx.message_waiting().await;
        let heard = ctx.next_message().unwrap_or_default();
        Ok(SubagentResult::text(
            StopReason::Completed,
            format!("heard {}", seam_core::blocks_text(&heard)),
        ))
    });
    let mut d = descriptor("steer", Capabilities::default());
    d.features = RuntimeFeatures {
        steering: true,
        resume: false,
    };
    core.subagents.register("plugin", d, steerable).unwrap();
    core.register("plain", Capabilities::default(), Fake::until_cancelled());

    let plain = core.subagents.start("plain", request("go")).unwrap();
    within("started", plain.started()).await.unwrap();
    let err = plain
        .send_message(vec![ContentBlock::text("hi")])
        .unwrap_err();
    assert!(
        matches!(&err, SubagentError::UnsupportedFeature { feature, .. } if feature == "steering"),
        "{err:?}"
    );
    plain.dispose().await;

    let run = core.subagents.start("steer", request("go")).unwrap();
    within("started", run.started()).await.unwrap();
    run.send_message(vec![ContentBlock::text("hello")]).unwrap();
    let result = within("result", run.result()).await.unwrap();
    assert_eq!(result.output_text(), "heard hello");
    assert_eq!(
        run.send_message(vec![ContentBlock::text("late")])
            .unwrap_err()
            .code(),
        code::INVALID_STATE
    );
    run.dispose().await;
}

#[tokio::test]
async fn background_runs_belong_to_their_owner_and_go_with_it() {
    let core = core();
    let fake = Fake::until_cancelled();
    core.register("p", Capabilities::default(), fake.clone());
    let mine = core
        .subagents
        .start_background("owner", "p", request("go"), "mine".into())
        .unwrap();
    within("started", mine.started()).await.unwrap();
    let listed = core.subagents.background_runs("owner");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].label.as_str(), listed[0].state),
        ("mine", RunState::Running)
    );
    assert!(core.subagents.background_runs("someone-else").is_empty());
    assert!(core
        .subagents
        .background_run("someone-else", mine.id())
        .is_none());
    assert!(core.subagents.settled_background("owner").is_empty());
    mine.cancel(None);
    within("result", mine.result()).await.unwrap();
    let settled = core.subagents.settled_background("owner");
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0].stop_reason, Some(StopReason::Aborted));
    assert!(
        core.subagents.settled_background("owner").is_empty(),
        "told once"
    );

    let other = core
        .subagents
        .start_background("owner", "p", request("go"), "other".into())
        .unwrap();
    within("started", other.started()).await.unwrap();
    core.subagents.dispose_background_of("owner").await;
    assert!(other.is_disposed() && mine.is_disposed());
    assert!(!core.subagents.has_background("owner"));
    assert_eq!((core.live.runs(), fake.probe.alive()), (0, 0));
}
