//! Continuable children: listed from the store without resuming anything, sent messages
//! (queued, woken, resumed from the store by a later "process"), interrupted with their inbox
//! kept, reporting to their parent, and announced to it exactly once.

use std::sync::Arc;
use std::time::Duration;

use seam_agent::agent::{Agent, AgentSpec};
use seam_agent::SessionEvent;
use seam_core::store::{SessionStore, StoreLimits};
use seam_core::subagent::SubagentError;
use seam_core::tool::ToolBinding;
use seam_core::{
    AgentScope, AgentStatus, Capabilities, ContentBlock, Delivery, Event, ProviderDescriptor,
    ReportMode, RuntimeFeatures, StartRequest, StopReason,
};
use seam_store_sqlite::SqliteStore;
use serde_json::json;

use crate::support::*;

fn resumable(name: &str) -> ProviderDescriptor {
    ProviderDescriptor {
        features: RuntimeFeatures {
            steering: false,
            resume: true,
        },
        ..descriptor(name, Capabilities::default())
    }
}

/// A core with a resumable `spawn` (children on `scripted:child`) and a `gate` tool.
async fn setup(store: Option<Arc<dyn SessionStore>>) -> (Core, Arc<Gate>) {
    let core = match store {
        Some(store) => Core::with_store(Duration::from_secs(5), store),
        None => Core::new(Duration::from_secs(5)),
    };
    let spawn = Arc::new(Spawn {
        agents: core.agents.clone(),
        model: "scripted:child".into(),
    });
    core.subagents
        .register("test-plugin", resumable("spawn"), spawn)
        .unwrap();
    let gate = Gate::new();
    core.tools
        .add_plugin(
            ToolBinding {
                tool_name: "gate".into(),
                provider: None,
                approve: Default::default(),
            },
            Arc::new(GateTool(gate.clone())),
        )
        .await
        .unwrap();
    (core, gate)
}

/// A core (see [`setup`]) whose `lead` has a background child on `spawn` that is held in its
/// gate call; the child says `then` once the gate opens.
async fn gated(
    then: &str,
    prompt: &str,
    label: &str,
) -> (Core, Arc<Gate>, Arc<Agent>, seam_core::SubagentRun) {
    let (core, gate) = setup(None).await;
    core.scripts(&[
        ("child", vec![call("gate", json!({})), say(then)]),
        ("parent", vec![say("ok")]),
    ]);
    let lead = parent(&core, None);
    let run = background(&core, &lead, "spawn", prompt, label);
    within("the gate", gate.entered.notified()).await;
    (core, gate, lead, run)
}

fn parent(core: &Core, session: Option<&str>) -> Arc<Agent> {
    let mut spec = AgentSpec::top_level("scripted:parent", "/work");
    spec.session_id = session.map(str::to_string);
    core.agents.create(spec, None).unwrap()
}

/// Starts a background run of `lead`'s on `provider`.
fn background(
    core: &Core,
    lead: &Agent,
    provider: &str,
    prompt: &str,
    label: &str,
) -> seam_core::SubagentRun {
    core.subagents
        .start_background(
            lead.id(),
            provider,
            StartRequest::new(prompt, lead.as_parent()),
            label.into(),
        )
        .unwrap()
}

fn text(s: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::text(s)]
}

/// The user messages of a session, as text.
fn user_messages(events: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::UserMessage { content } => Some(seam_core::blocks_text(content)),
            _ => None,
        })
        .collect()
}

/// The stored events of `session`, parsed.
fn stored(core: &Core, session: &str) -> Vec<SessionEvent> {
    core.agents
        .store()
        .events(session)
        .unwrap()
        .iter()
        .map(|e| serde_json::from_str(&e.body).unwrap())
        .collect()
}

/// Waits until `n` `subagent/end` events were emitted.
async fn ends(core: &Core, n: usize) {
    core.log
        .wait_for(&format!("{n} subagent/end"), |events| {
            events
                .iter()
                .filter(|e| matches!(e, Event::SubagentEnd { .. }))
                .count()
                >= n
        })
        .await;
}

#[tokio::test]
async fn a_finished_child_is_ready_then_idle_once_announced_and_a_message_wakes_it_in_its_own_session(
) {
    let (core, _gate) = setup(None).await;
    core.scripts(&[
        ("child", vec![say("first answer"), say("second answer")]),
        ("parent", vec![say("noted"), say("still noted")]),
    ]);
    let lead = parent(&core, None);
    let me = lead.as_parent();
    let run = background(&core, &lead, "spawn", "task one", "worker");
    within("the first result", run.result()).await.unwrap();

    let listed = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let child = &listed[0];
    assert_eq!(child.status, AgentStatus::Ready, "not yet announced");
    assert_eq!(
        (child.run_id.as_str(), child.label.as_str()),
        (run.id(), "worker")
    );
    assert_ne!(child.id, run.id(), "the durable id is the child's session");
    assert_eq!(child.stop_reason, Some(StopReason::Completed));
    assert_eq!(child.parent_session, me.session_id);

    // Two turns of the parent: the end is announced in the first only.
    lead.run_turn(text("carry on")).await;
    lead.run_turn(text("and again")).await;
    let announced: Vec<String> = user_messages(lead.session().events())
        .into_iter()
        .filter(|m| m.contains("has settled"))
        .collect();
    assert_eq!(
        announced,
        [format!(
            "[background run `{}` (worker) on `spawn` has settled: completed]",
            run.id()
        )]
    );
    let idle = core
        .subagents
        .list_agents(&me, AgentScope::Children, Some(AgentStatus::Idle))
        .unwrap();
    assert_eq!(idle.len(), 1, "announced: idle");

    let delivery = core
        .subagents
        .send_to_agent(&me, &child.id, text("task two"))
        .unwrap();
    assert_eq!(delivery, Delivery::Woken);
    ends(&core, 2).await;
    let now = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(now.len(), 1, "one child, two activations: {now:?}");
    assert_eq!(now[0].id, child.id);
    assert_ne!(now[0].run_id, run.id());
    // One session holds both activations, the second seeing the first.
    let session = stored(&core, &child.id);
    let turns = session
        .iter()
        .filter(|e| matches!(e, SessionEvent::TurnStart { .. }))
        .count();
    assert_eq!(turns, 2);
    assert_eq!(user_messages(&session), ["task one", "task two"]);
}

#[tokio::test]
async fn a_message_to_a_running_child_waits_in_its_inbox_and_wakes_it_when_the_turn_ends() {
    let (core, gate) = setup(None).await;
    core.scripts(&[
        (
            "child",
            vec![
                call("gate", json!({})),
                say("gated done"),
                say("inbox done"),
            ],
        ),
        ("parent", vec![say("ok")]),
    ]);
    let lead = parent(&core, None);
    let me = lead.as_parent();
    let run = background(&core, &lead, "spawn", "hold on", "held");
    within("the gate", gate.entered.notified()).await;
    let child = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(child[0].status, AgentStatus::Running);
    let id = child[0].id.clone();
    // The run id names it too.
    let delivery = core
        .subagents
        .send_to_agent(&me, run.id(), text("when you are free"))
        .unwrap();
    assert_eq!(delivery, Delivery::Queued);
    let queued = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(
        (queued[0].queued, queued[0].status),
        (1, AgentStatus::Running)
    );

    gate.open.notify_one();
    // Each activation replays the child's script from its start: the second is gated too.
    within("the second activation's gate", gate.entered.notified()).await;
    gate.open.notify_one();
    ends(&core, 2).await;
    let after = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(after[0].queued, 0, "the inbox was taken");
    assert_eq!(after[0].id, id);
    assert_ne!(
        after[0].run_id,
        run.id(),
        "a second activation ran the inbox"
    );
    let messages = user_messages(&stored(&core, &id));
    assert_eq!(messages, ["hold on", "when you are free"]);
}

#[tokio::test]
async fn an_interrupted_child_keeps_its_inbox_until_the_next_message() {
    let (core, gate) = setup(None).await;
    core.scripts(&[
        ("child", vec![call("gate", json!({})), say("resumed")]),
        ("parent", vec![say("ok")]),
    ]);
    let lead = parent(&core, None);
    let me = lead.as_parent();
    background(&core, &lead, "spawn", "long task", "long");
    within("the gate", gate.entered.notified()).await;
    let id = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap()[0]
        .id
        .clone();
    core.subagents
        .send_to_agent(&me, &id, text("first in the inbox"))
        .unwrap();

    let stopped = within("the interrupt", core.subagents.interrupt_agent(&me, &id))
        .await
        .unwrap();
    assert_eq!(stopped.status, AgentStatus::Interrupted);
    assert_eq!(stopped.stop_reason, Some(StopReason::Aborted));
    assert_eq!(stopped.queued, 1, "the inbox is kept");
    let again = within(
        "a second interrupt",
        core.subagents.interrupt_agent(&me, &id),
    )
    .await;
    assert!(
        matches!(again, Err(SubagentError::InvalidState(_))),
        "{again:?}"
    );

    // Had the inbox woken it, this would be queued behind a live activation.
    let delivery = core
        .subagents
        .send_to_agent(&me, &id, text("now both"))
        .unwrap();
    assert_eq!(delivery, Delivery::Woken);
    within("the second activation's gate", gate.entered.notified()).await;
    gate.open.notify_one();
    ends(&core, 2).await;
    let messages = user_messages(&stored(&core, &id));
    assert_eq!(messages, ["long task", "first in the inbox\nnow both"]);
    let listed = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(
        (listed[0].status, listed[0].queued),
        (AgentStatus::Ready, 0)
    );
}

#[tokio::test]
async fn a_later_process_lists_resumes_and_announces_a_child_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let (session, child_id, first_run) = {
        let store = Arc::new(SqliteStore::open(&path, StoreLimits::default()).unwrap());
        let (core, _gate) = setup(Some(store)).await;
        core.scripts(&[
            ("child", vec![say("from the first process")]),
            ("parent", vec![say("ok")]),
        ]);
        let lead = parent(&core, None);
        let me = lead.as_parent();
        let run = background(&core, &lead, "spawn", "remember this", "memory");
        within("the result", run.result()).await.unwrap();
        let child = core
            .subagents
            .list_agents(&me, AgentScope::Children, None)
            .unwrap();
        core.agents.dispose(lead.id()).await;
        (me.session_id, child[0].id.clone(), run.id().to_string())
    };

    // A second process: another store opening, another service, the parent's session
    // continued.
    let store = Arc::new(SqliteStore::open(&path, StoreLimits::default()).unwrap());
    let (core, _gate) = setup(Some(store)).await;
    core.scripts(&[
        ("child", vec![say("from the second process")]),
        ("parent", vec![say("ok")]),
    ]);
    let lead = parent(&core, Some(&session));
    let me = lead.as_parent();
    let listed = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].id.as_str(), listed[0].status),
        (child_id.as_str(), AgentStatus::Ready),
        "listing resumed nothing"
    );
    assert_eq!(core.live.runs(), 0);

    lead.run_turn(text("what happened?")).await;
    let told: Vec<String> = user_messages(lead.session().events())
        .into_iter()
        .filter(|m| m.contains(&first_run))
        .collect();
    assert_eq!(
        told.len(),
        1,
        "announced once, by the process that saw it: {told:?}"
    );

    let delivery = core
        .subagents
        .send_to_agent(&me, &child_id, text("what did I ask?"))
        .unwrap();
    assert_eq!(delivery, Delivery::Resumed);
    ends(&core, 1).await;
    let messages = user_messages(&stored(&core, &child_id));
    assert_eq!(messages, ["remember this", "what did I ask?"]);
    let listed = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, child_id);
}

#[tokio::test]
async fn only_a_resumable_provider_is_woken_and_only_the_callers_children_are_reachable() {
    let (core, _gate) = setup(None).await;
    core.register("once", Capabilities::default(), Fake::answering("done"));
    core.scripts(&[("parent", vec![say("ok")])]);
    let lead = parent(&core, None);
    let me = lead.as_parent();
    let run = background(&core, &lead, "once", "go", "one-shot");
    within("the result", run.result()).await.unwrap();
    let listed = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(listed[0].id, run.id(), "no session: the run id names it");
    let refused = core
        .subagents
        .send_to_agent(&me, run.id(), text("again"))
        .unwrap_err();
    assert!(
        matches!(&refused, SubagentError::UnsupportedCapability { capability, .. } if capability == "resume"),
        "{refused:?}"
    );
    assert_eq!(
        refused.code(),
        seam_core::subagent::code::UNSUPPORTED_CAPABILITY
    );

    let stranger = parent(&core, None).as_parent();
    assert!(matches!(
        core.subagents
            .send_to_agent(&stranger, run.id(), text("hi")),
        Err(SubagentError::NoRun(_))
    ));
    assert!(core
        .subagents
        .list_agents(&stranger, AgentScope::Children, None)
        .unwrap()
        .is_empty());
    assert!(matches!(
        core.subagents.send_to_agent(&me, "nobody", text("hi")),
        Err(SubagentError::NoRun(_))
    ));
    assert!(matches!(
        core.subagents.send_to_agent(&me, run.id(), Vec::new()),
        Err(SubagentError::InvalidRequest(_))
    ));
}

#[tokio::test]
async fn descendants_are_listed_level_by_level() {
    let (core, gate, lead, run) = gated("done", "delegate", "middle").await;
    let me = lead.as_parent();
    // The child delegates in turn, as itself.
    let middle = core
        .agents
        .get(run.id())
        .expect("the child agent")
        .as_parent();
    let grandchild = core
        .subagents
        .start_background(
            &middle.id,
            "once",
            StartRequest::new("below", middle.clone()),
            "bottom".into(),
        )
        .err();
    assert!(
        matches!(grandchild, Some(SubagentError::NoProvider(_))),
        "no `once` yet: {grandchild:?}"
    );
    core.register("once", Capabilities::default(), Fake::answering("deep"));
    let deep = core
        .subagents
        .start_background(
            &middle.id,
            "once",
            StartRequest::new("below", middle.clone()),
            "bottom".into(),
        )
        .unwrap();
    within("the grandchild", deep.result()).await.unwrap();
    let children = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    let all = core
        .subagents
        .list_agents(&me, AgentScope::Descendants, None)
        .unwrap();
    assert_eq!(children.len(), 1);
    let labels: Vec<&str> = all.iter().map(|a| a.label.as_str()).collect();
    assert_eq!(labels, ["middle", "bottom"]);
    assert_eq!(all[1].parent_session, middle.session_id);
    let running = core
        .subagents
        .list_agents(&me, AgentScope::Descendants, Some(AgentStatus::Running))
        .unwrap();
    assert_eq!(running.len(), 1);
    gate.open.notify_one();
}

#[tokio::test]
async fn a_next_step_report_reaches_the_parent_before_its_next_model_call_and_a_quiet_one_is_listed(
) {
    let (core, gate) = setup(None).await;
    core.register("held", Capabilities::default(), Fake::until_cancelled());
    core.scripts(&[(
        "parent",
        vec![call("gate", json!({})), say("{history} messages seen")],
    )]);
    let lead = parent(&core, None);
    let me = lead.as_parent();
    let run = background(&core, &lead, "held", "work", "reporter");
    within("started", run.started()).await.unwrap();
    let as_child = seam_core::ParentRef {
        id: run.id().to_string(),
        ..me.clone()
    };
    core.subagents
        .report(&as_child, ReportMode::Quiet, text("quietly halfway"))
        .unwrap();
    let turn = {
        let lead = lead.clone();
        tokio::spawn(async move { lead.run_turn(text("wait for the gate")).await })
    };
    within("the parent's gate", gate.entered.notified()).await;
    core.subagents
        .report(&as_child, ReportMode::NextStep, text("loudly done"))
        .unwrap();
    gate.open.notify_one();
    within("the parent's turn", turn).await.unwrap();

    let session = lead.session();
    let events = session.events();
    let reports: Vec<(usize, String)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            SessionEvent::UserMessage { content } => {
                let t = seam_core::blocks_text(content);
                t.contains("[report from").then_some((i, t))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        reports.len(),
        1,
        "the quiet report is not delivered: {reports:?}"
    );
    assert!(reports[0].1.contains("loudly done"), "{reports:?}");
    let result_at = events
        .iter()
        .position(|e| matches!(e, SessionEvent::ToolResult { .. }))
        .unwrap();
    assert!(
        reports[0].0 > result_at,
        "delivered at the step after the gate"
    );
    let listed = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(listed[0].report.as_deref(), Some("loudly done"));

    let not_a_child = core.subagents.report(&me, ReportMode::Quiet, text("hi"));
    assert!(matches!(not_a_child, Err(SubagentError::InvalidState(_))));
    run.cancel(None);
}

#[tokio::test]
async fn a_detached_child_is_left_interrupted_and_can_be_continued() {
    let (core, gate, lead, run) = gated("picked up", "keep going", "detached").await;
    let me = lead.as_parent();
    let let_go = core
        .subagents
        .detach_background_of(lead.id(), "interrupted: detached");
    assert_eq!(let_go.len(), 1);
    assert_eq!(let_go[0].id, run.id());
    core.subagents.dispose_background_of(lead.id()).await;
    let listed = core
        .subagents
        .list_agents(&me, AgentScope::Children, None)
        .unwrap();
    assert_eq!(listed[0].status, AgentStatus::Interrupted);
    assert_eq!(
        listed[0].diagnostic.as_deref(),
        Some("interrupted: detached")
    );
    let delivery = core
        .subagents
        .send_to_agent(&me, &listed[0].id, text("carry on"))
        .unwrap();
    assert_eq!(delivery, Delivery::Resumed, "no live run holds it any more");
    within("the second gate", gate.entered.notified()).await;
    gate.open.notify_one();
    ends(&core, 2).await;
}
