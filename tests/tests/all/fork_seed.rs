//! CONTRACT section 6, `fork`: the child starts from every completed turn of its parent, each
//! tool call followed by its result, in order, and from nothing of the turn in flight. What the
//! child's model was sent is read on the wire (the chat endpoint on loopback), and the child's
//! session as it was created; both are compared with what the parent did, written out here.

use std::sync::{Arc, Mutex};

use seam_host::agent::SessionEvent;
use seam_host::{ContentBlock, Event, StopReason, ToolCall};
use seam_tests::*;
use serde_json::{json, Value};

use super::chat_server::{text_reply, ChatServer};

/// The arguments the parent's script passes to `x` for `prompt`, as the scripted model sends
/// them (the TOML table as compact JSON).
fn args(prompt: &str) -> String {
    format!(r#"{{"description":"task","prompt":"{prompt}"}}"#)
}

/// Turn 1 calls `x` once; turn 2 calls it twice in one reply; turn 3 (in flight when it forks)
/// calls `x`, then `branch`. Script steps are counted across the turns: call ids are
/// `call-STEP-K`.
fn parent_script() -> String {
    let x = |prompt: &str| {
        format!(
            "{{ name = \"x\", arguments = {{ description = \"task\", prompt = \"{prompt}\" }} }}"
        )
    };
    format!(
        "[agent]\nmodel = \"scripted:parent\"\n\n[models.scripts.parent]\nsteps = [ \
         {{ tool_calls = [{}] }}, {{ text = \"turn one done\" }}, \
         {{ text = \"looking twice\", tool_calls = [{}, {}] }}, {{ text = \"turn two done\" }}, \
         {{ tool_calls = [{}] }}, \
         {{ tool_calls = [{{ name = \"branch\", arguments = {{ description = \"task\", prompt = \"look back\" }} }}] }}, \
         {{ text = \"parent got: {{tool_results}}\" }} ]\n\n",
        x("one"),
        x("a"),
        x("b"),
        x("unfinished"),
    )
}

#[tokio::test]
async fn a_fork_child_is_sent_every_completed_turn_with_each_call_then_its_result() {
    let server = ChatServer::start(1, |_| false, |_| text_reply("forked answer")).await;
    let toml = parent_script()
        + &server.models_section()
        + &mock("m", "reply = \"m says {prompt}\"")
        + &entry("x", "subagent_tool", "provider = \"m\", toolName = \"x\"")
        + &entry("fork", "fork_provider", "")
        + &entry(
            "branch",
            "subagent_tool",
            "provider = \"fork\", toolName = \"branch\", agentOptions = { model = \"openai\" }",
        );
    let host = host_with(&toml).await;
    // The child's session as `agent/created` finds it: the seed, before the child's first turn.
    let seeds: Arc<Mutex<Vec<Vec<SessionEvent>>>> = Arc::default();
    {
        let seeds = seeds.clone();
        let agents = host.agents().clone();
        host.events().subscribe(move |e| {
            if let Event::AgentCreated {
                id,
                parent: Some(_),
                ..
            } = e
            {
                let child = agents.get(&id).ok_or("the child is not published")?;
                seeds
                    .lock()
                    .unwrap()
                    .push(child.session().events().to_vec());
            }
            Ok(())
        });
    }
    let parent = host.create_agent(None, "/w").unwrap();
    for (prompt, answer) in [("turn one", "turn one done"), ("turn two", "turn two done")] {
        let outcome = parent.run_turn(vec![ContentBlock::text(prompt)]).await;
        assert_eq!(outcome.stop_reason, StopReason::Completed, "{outcome:?}");
        assert_eq!(seam_host::blocks_text(&outcome.output), answer);
    }
    let third = parent
        .run_turn(vec![ContentBlock::text("turn three")])
        .await;
    assert_eq!(third.stop_reason, StopReason::Completed, "{third:?}");
    assert_eq!(
        seam_host::blocks_text(&third.output),
        "parent got: forked answer"
    );

    // What the parent did in its two completed turns, as the chat wire carries it: each
    // assistant message with its calls, then one tool message per call, in call order.
    let call = |id: &str, prompt: &str| json!({"id": id, "type": "function", "function": {"name": "x", "arguments": args(prompt)}});
    let result =
        |id: &str, text: &str| json!({"role": "tool", "content": text, "tool_call_id": id});
    let completed_turns = vec![
        json!({"role": "user", "content": "turn one"}),
        json!({"role": "assistant", "content": null, "tool_calls": [call("call-0-0", "one")]}),
        result("call-0-0", "m says one"),
        json!({"role": "assistant", "content": "turn one done"}),
        json!({"role": "user", "content": "turn two"}),
        json!({"role": "assistant", "content": "looking twice",
               "tool_calls": [call("call-2-0", "a"), call("call-2-1", "b")]}),
        result("call-2-0", "m says a"),
        result("call-2-1", "m says b"),
        json!({"role": "assistant", "content": "turn two done"}),
    ];
    let mut expected = completed_turns;
    // Then the child's own prompt; nothing of turn three (its prompt, its call to `x` and that
    // call's result, its call to `branch`).
    expected.push(json!({"role": "user", "content": "look back"}));
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "the child made one model call: {seen:#?}");
    assert_eq!(
        seen[0]["messages"],
        Value::Array(expected),
        "what the fork child's model was sent"
    );

    // The child's session began with the same two turns, as session events.
    let event_call = |id: &str, prompt: &str| ToolCall {
        id: id.into(),
        name: "x".into(),
        arguments: args(prompt),
    };
    let event_result = |id: &str, text: &str| SessionEvent::ToolResult {
        call_id: id.into(),
        name: "x".into(),
        content: vec![ContentBlock::text(text)],
        is_error: false,
    };
    let user = |text: &str| SessionEvent::UserMessage {
        content: vec![ContentBlock::text(text)],
    };
    let said = |text: &str, tool_calls: Vec<ToolCall>| SessionEvent::AssistantMessage {
        text: text.into(),
        tool_calls,
    };
    let end = |turn| SessionEvent::TurnEnd {
        turn,
        reason: StopReason::Completed,
        usage: None,
    };
    let expected_seed = vec![
        SessionEvent::TurnStart { turn: 1 },
        user("turn one"),
        said("", vec![event_call("call-0-0", "one")]),
        event_result("call-0-0", "m says one"),
        said("turn one done", vec![]),
        end(1),
        SessionEvent::TurnStart { turn: 2 },
        user("turn two"),
        said(
            "looking twice",
            vec![event_call("call-2-0", "a"), event_call("call-2-1", "b")],
        ),
        event_result("call-2-0", "m says a"),
        event_result("call-2-1", "m says b"),
        said("turn two done", vec![]),
        end(2),
    ];
    // Children of the parent: the mock runs behind `x` create no agent, the fork does.
    let seeds = seeds.lock().unwrap().clone();
    assert_eq!(seeds, [expected_seed], "the fork child's seed");

    host.agents().dispose(parent.id()).await;
    assert_eq!(host.live_agents(), 0);
    assert_eq!(host.live_runs(), 0);
}
