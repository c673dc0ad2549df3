//! The agent runtime (contract section 6) on the scripted model: turns, tool calls, tool-filter
//! masking, structured output, fork seeding; and in-process children through the service.

use std::sync::Arc;
use std::time::Duration;

use seam_agent::agent::{AgentError, AgentSpec, ChildSession, SessionEvent};
use seam_agent::model::ScriptStep;
use seam_core::{ContentBlock, Event, StopReason, ToolFilter};
use serde_json::json;

use super::support::*;

fn core() -> Core {
    Core::new(Duration::from_millis(100))
}

fn prompt(text: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::text(text)]
}

async fn with_echo(core: &Core, name: &str) -> Arc<Echo> {
    let echo = Echo::new(&format!("{name}-plugin"), name);
    core.tools
        .add_plugin(echo.binding(None), echo.clone())
        .await
        .unwrap();
    echo
}

#[tokio::test]
async fn turns_run_tool_calls_and_record_everything_in_the_session() {
    let core = core();
    let echo = with_echo(&core, "echo").await;
    core.scripts(&[(
        "s",
        vec![
            call("echo", json!({"n": 1})),
            say("saw {tool_results}"),
            say("second turn: {prompt}"),
        ],
    )]);
    let agent = core
        .agents
        .create(AgentSpec::top_level("scripted:s", "/work"), None)
        .unwrap();
    let first = agent.run_turn(prompt("hello")).await;
    assert_eq!(first.stop_reason, StopReason::Completed);
    assert_eq!(seam_core::blocks_text(&first.output), "saw echo: {\"n\":1}");
    assert_eq!(echo.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let second = agent.run_turn(prompt("again")).await;
    assert_eq!(seam_core::blocks_text(&second.output), "second turn: again");

    let session = agent.session();
    assert_eq!(session.turns(), 2);
    let kinds: Vec<&str> = session
        .events()
        .iter()
        .map(|e| match e {
            SessionEvent::TurnStart { .. } => "start",
            SessionEvent::UserMessage { .. } => "user",
            SessionEvent::AssistantMessage { .. } => "assistant",
            SessionEvent::ToolResult { .. } => "tool",
            SessionEvent::TurnEnd { .. } => "end",
            SessionEvent::RemoteTask { .. } => "remote-task",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "start",
            "user",
            "assistant",
            "tool",
            "assistant",
            "end",
            "start",
            "user",
            "assistant",
            "end"
        ]
    );
    let names: Vec<&str> = core
        .log
        .all()
        .iter()
        .map(Event::name)
        .filter(|n| n.starts_with("agent/"))
        .collect();
    assert_eq!(
        names,
        [
            "agent/created",
            "agent/turn-start",
            "agent/tool-call",
            "agent/tool-result",
            "agent/turn-end",
            "agent/turn-start",
            "agent/turn-end"
        ]
    );
    core.agents.dispose(agent.id()).await;
    assert_eq!(core.agents.live(), 0);
}

#[tokio::test]
async fn model_errors_and_the_turn_bound_end_a_turn_error() {
    let core = core();
    let looping: Vec<ScriptStep> = (0..5).map(|_| call("nothing", json!({}))).collect();
    core.scripts(&[
        (
            "fails",
            vec![ScriptStep {
                error: Some("the endpoint is down".into()),
                ..ScriptStep::default()
            }],
        ),
        ("loops", looping),
    ]);
    let agent = core
        .agents
        .create(AgentSpec::top_level("scripted:fails", "/"), None)
        .unwrap();
    let out = agent.run_turn(prompt("go")).await;
    assert_eq!(out.stop_reason, StopReason::Error);
    assert_eq!(
        out.diagnostic.as_deref(),
        Some("model error: scripted model: the endpoint is down")
    );
    let mut spec = AgentSpec::top_level("scripted:loops", "/");
    spec.max_turns = 3;
    let agent = core.agents.create(spec, None).unwrap();
    let out = agent.run_turn(prompt("go")).await;
    assert_eq!(out.stop_reason, StopReason::Error);
    assert_eq!(
        out.diagnostic.as_deref(),
        Some("the agent hit its bound of 3 model calls in one turn")
    );
    // An unknown tool is an error result the model sees, not a failed turn.
    let session = agent.session();
    let results: Vec<bool> = session
        .events()
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult { is_error, .. } => Some(*is_error),
            _ => None,
        })
        .collect();
    assert_eq!(results, [true, true, true]);
}

#[tokio::test]
async fn a_tool_filter_masks_tools_and_refuses_hidden_ones() {
    let core = core();
    let shown = with_echo(&core, "shown").await;
    let hidden = with_echo(&core, "hidden").await;
    core.scripts(&[(
        "s",
        vec![
            ScriptStep {
                text: Some("tools: {tools}".into()),
                ..call("hidden", json!({}))
            },
            say("{tool_results}"),
        ],
    )]);
    let mut spec = AgentSpec::top_level("scripted:s", "/");
    spec.tool_filter = Some(ToolFilter {
        allow: None,
        deny: Some(vec!["hidden".into()]),
    });
    let agent = core.agents.create(spec, None).unwrap();
    let out = agent.run_turn(prompt("go")).await;
    let session = agent.session();
    let first_text = session.events().iter().find_map(|e| match e {
        SessionEvent::AssistantMessage { text, .. } => Some(text.clone()),
        _ => None,
    });
    assert_eq!(first_text.as_deref(), Some("tools: shown"));
    assert_eq!(
        seam_core::blocks_text(&out.output),
        "tool `hidden` is not available to this agent"
    );
    assert_eq!(hidden.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(shown.calls.load(std::sync::atomic::Ordering::SeqCst), 0);

    // A name that is no mounted tool is an error at creation.
    let mut spec = AgentSpec::top_level("scripted:s", "/");
    spec.tool_filter = Some(ToolFilter {
        allow: Some(vec!["nonexistent".into()]),
        deny: None,
    });
    match core.agents.create(spec, None) {
        Err(AgentError::Invalid(m)) => {
            assert!(
                m.contains("`nonexistent`") && m.contains("hidden, shown")
                    || m.contains("shown, hidden"),
                "{m}"
            )
        }
        other => panic!("{:?}", other.map(|a| a.id().to_string())),
    }
}

#[tokio::test]
async fn structured_output_is_captured_retried_when_invalid_and_ends_the_turn() {
    let core = core();
    core.scripts(&[
        (
            "retry",
            vec![
                capture(json!({"answer": 3})),
                capture(json!({"answer": "yes"})),
            ],
        ),
        ("none", vec![say("no capture")]),
    ]);
    let schema = json!({"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}});
    let agent_on = |script: &str| {
        let mut spec = AgentSpec::top_level(format!("scripted:{script}"), "/");
        spec.output_schema = Some(schema.clone());
        core.agents.create(spec, None).unwrap()
    };

    let agent = agent_on("retry");
    let out = agent.run_turn(prompt("go")).await;
    assert_eq!(out.stop_reason, StopReason::Completed);
    assert_eq!(out.structured, Some(json!({"answer": "yes"})));
    let errors: Vec<String> = agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult {
                is_error: true,
                content,
                ..
            } => Some(seam_core::blocks_text(content)),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("/answer"), "{}", errors[0]);

    let agent = agent_on("none");
    let out = agent.run_turn(prompt("go")).await;
    assert_eq!(out.stop_reason, StopReason::Error);
    assert_eq!(out.structured, None);
    assert_eq!(
        out.diagnostic.as_deref(),
        Some("the agent finished without calling structured_output")
    );
}

#[tokio::test]
async fn calls_after_a_capture_in_one_reply_are_refused() {
    let core = core();
    let echo = with_echo(&core, "echo").await;
    // One reply: a capture, then another capture and an echo call after it.
    let step = capture(json!({"answer": "second"}));
    core.scripts(&[(
        "twice",
        vec![ScriptStep {
            tool_calls: vec![
                seam_agent::model::config::ScriptToolCall {
                    name: "structured_output".into(),
                    arguments: json!({"answer": "first"}),
                },
                seam_agent::model::config::ScriptToolCall {
                    name: "echo".into(),
                    arguments: json!({}),
                },
            ],
            ..step
        }],
    )]);
    let mut spec = AgentSpec::top_level("scripted:twice", "/");
    spec.output_schema = Some(json!({"type": "object", "required": ["answer"]}));
    let agent = core.agents.create(spec, None).unwrap();
    let out = agent.run_turn(prompt("go")).await;
    assert_eq!(out.stop_reason, StopReason::Completed);
    assert_eq!(out.structured, Some(json!({"answer": "first"})));
    let results: Vec<(bool, String)> = agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult {
                is_error, content, ..
            } => Some((*is_error, seam_core::blocks_text(content))),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 3);
    assert!(!results[0].0);
    for refused in &results[1..] {
        assert!(refused.0 && refused.1.starts_with("refused"), "{results:?}");
    }
    assert_eq!(echo.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_fork_seed_is_every_completed_turn_with_balanced_calls_and_results() {
    let core = core();
    let gate = Gate::new();
    core.tools
        .add_plugin(
            seam_core::tool::ToolBinding {
                tool_name: "gate".into(),
                provider: None,
                approve: Default::default(),
            },
            Arc::new(GateTool(gate.clone())),
        )
        .await
        .unwrap();
    let echo = with_echo(&core, "echo").await;
    core.scripts(&[
        (
            "parent",
            vec![
                call("echo", json!({"turn": 1})),
                say("one"),
                call("echo", json!({"turn": 2})),
                say("two"),
                // The third turn is in flight while the child is forked.
                call("gate", json!({})),
                say("three"),
            ],
        ),
        ("child", vec![say("child sees {history} messages")]),
    ]);
    let parent = core
        .agents
        .create(AgentSpec::top_level("scripted:parent", "/"), None)
        .unwrap();
    parent.run_turn(prompt("first")).await;
    parent.run_turn(prompt("second")).await;
    let p = parent.clone();
    let third = tokio::spawn(async move { p.run_turn(prompt("third")).await });
    within("the gate is entered", gate.entered.notified()).await;

    let seed = parent.session().completed_prefix();
    let turn_ends = seed
        .iter()
        .filter(|e| matches!(e, SessionEvent::TurnEnd { .. }))
        .count();
    assert_eq!(turn_ends, 2, "every completed turn, not the one in flight");
    assert!(matches!(
        seed.last(),
        Some(SessionEvent::TurnEnd { turn: 2, .. })
    ));
    let calls: Vec<String> = seed
        .iter()
        .flat_map(|e| match e {
            SessionEvent::AssistantMessage { tool_calls, .. } => {
                tool_calls.iter().map(|c| c.id.clone()).collect()
            }
            _ => Vec::new(),
        })
        .collect();
    let answered: Vec<String> = seed
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls, answered, "each call has its result");

    let mut spec = AgentSpec::top_level("scripted:child", "/");
    spec.seed = seed;
    let child = core.agents.create(spec, None).unwrap();
    let out = child.run_turn(prompt("go")).await;
    // 2 turns x (user, assistant, tool, assistant) + its own prompt.
    assert_eq!(seam_core::blocks_text(&out.output), "child sees 9 messages");

    gate.open.notify_waiters();
    let third = within("the third turn", third).await.unwrap();
    assert_eq!(seam_core::blocks_text(&third.output), "three");
    assert_eq!(echo.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn two_concurrent_structured_children_each_see_their_own_schema() {
    let core = core();
    // One script for both: each child keeps only the capture its own schema accepts.
    core.scripts(&[(
        "both",
        vec![capture(json!({"a": "x"})), capture(json!({"b": 1}))],
    )]);
    let spawn = Arc::new(Spawn {
        agents: core.agents.clone(),
        model: "scripted:both".into(),
    });
    core.register("spawn", all_caps(), spawn);
    let schema_a =
        json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}});
    let schema_b =
        json!({"type": "object", "required": ["b"], "properties": {"b": {"type": "integer"}}});
    let mut ra = request("a");
    ra.output_schema = Some(schema_a);
    let mut rb = request("b");
    rb.output_schema = Some(schema_b);
    let a = core.subagents.start("spawn", ra).unwrap();
    let b = core.subagents.start("spawn", rb).unwrap();
    let (ra, rb) = within(
        "both results",
        futures::future::join(a.result(), b.result()),
    )
    .await;
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.stop_reason, StopReason::Completed, "{ra:?}");
    assert_eq!(rb.stop_reason, StopReason::Completed, "{rb:?}");
    assert_eq!(ra.structured, Some(json!({"a": "x"})));
    assert_eq!(rb.structured, Some(json!({"b": 1})));
    // The children were torn down with their runs, and left their sessions for resume.
    assert_eq!(
        a.child_session().map(|s| s
            .iter()
            .filter(|e| matches!(e, SessionEvent::TurnEnd { .. }))
            .count()),
        Some(1)
    );
    a.dispose().await;
    b.dispose().await;
    assert_eq!(core.agents.live(), 0);
    assert_eq!(core.live.runs(), 0);
}

#[tokio::test]
async fn disposing_a_parent_disposes_its_children_first() {
    let core = core();
    core.scripts(&[("s", vec![say("x")])]);
    let parent = core
        .agents
        .create(AgentSpec::top_level("scripted:s", "/"), None)
        .unwrap();
    let mut spec = AgentSpec::top_level("scripted:s", "/");
    spec.parent = Some(parent.id().to_string());
    spec.depth = 1;
    let child = core.agents.create(spec, None).unwrap();
    assert_eq!(core.agents.lineage(child.id()), [child.id(), parent.id()]);
    core.agents.dispose(parent.id()).await;
    assert!(child.is_aborted());
    assert_eq!(core.agents.live(), 0);
    let disposed: Vec<String> = core
        .log
        .all()
        .into_iter()
        .filter_map(|e| match e {
            Event::AgentDisposed { id } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(disposed, [child.id().to_string(), parent.id().to_string()]);
}
