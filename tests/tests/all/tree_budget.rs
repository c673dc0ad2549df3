//! Budgets over the delegation tree (contract 16): a fan-out of 10 children with 3
//! grandchildren each, on real components (the spawn provider and the subagent tool) and the
//! scripted model reporting usage as an endpoint does. What a child spends, every ancestor has
//! spent; a call the budget cannot cover is refused before it is made; a run stopped by its
//! budget ends `budget`, and its parent's model reads why.

use seam_host::{ContentBlock, Event, Host, StopReason};
use seam_tests::*;

/// The lead fans out to 10 children through `delegate`; each child fans out to 3 leaves
/// through `leaf`, then answers. Every model call reports 10 prompt tokens and `out` completion
/// tokens (a leaf's, `leaf_out`).
fn fan_out(agent_budget: &str, delegate_budget: &str) -> String {
    let usage = |out: u32| format!("usage = {{ prompt-tokens = 10, completion-tokens = {out} }}");
    let calls = |tool: &str, n: usize| {
        (0..n)
            .map(|i| {
                format!(
                    "{{ name = \"{tool}\", arguments = {{ description = \"d{i}\", prompt = \"p{i}\" }} }}"
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        r#"[agent]
model = "scripted:lead"
{agent_budget}

[models.scripts.lead]
steps = [
    {{ text = "fan out", {u50}, tool_calls = [{lead_calls}] }},
    {{ text = "{{tool_results}}", {u50} }},
]

[models.scripts.child]
steps = [
    {{ text = "split", {u50}, tool_calls = [{child_calls}] }},
    {{ text = "child done", {u50} }},
]

[models.scripts.leaf]
steps = [{{ text = "leaf done", {u40} }}]

"#,
        u50 = usage(50),
        u40 = usage(40),
        lead_calls = calls("delegate", 10),
        child_calls = calls("leaf", 3),
    ) + &entry("spawn", "spawn_provider", "")
        + &entry(
            "delegate",
            "subagent_tool",
            &format!(
                "provider = \"spawn\", toolName = \"delegate\", agentOptions = {{ model = \"scripted:child\" }}{delegate_budget}"
            ),
        )
        + &entry(
            "leaf",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"leaf\", agentOptions = { model = \"scripted:leaf\" }",
        )
}

/// Runs one turn of the top-level agent; returns its text, stop reason, diagnostic and what its
/// tree spent, and disposes it.
async fn turn(host: &Host) -> (String, StopReason, Option<String>, seam_host::spend::Spent) {
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    let spent = agent.account().spent();
    host.agents().dispose(agent.id()).await;
    (
        seam_host::blocks_text(&outcome.output),
        outcome.stop_reason,
        outcome.diagnostic,
        spent,
    )
}

fn ends(seen: &std::sync::Arc<std::sync::Mutex<Vec<Event>>>) -> Vec<(String, StopReason)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentEnd {
                id, stop_reason, ..
            } => Some((id.clone(), stop_reason.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_delegation_is_capped_by_its_entry_and_the_refusal_reaches_the_parents_model() {
    let host = host_with(&fan_out("", ", budget = { output_tokens = 60 }")).await;
    let seen = record(&host);
    let (text, reason, _, spent) = turn(&host).await;
    assert_eq!(
        reason,
        StopReason::Completed,
        "the lead's own budget is unbounded"
    );
    // Each child: 50 for its first call, then the 10 left go to one leaf (cut to 10, as an
    // endpoint cuts at max_tokens); the other leaves and the child's answer are refused.
    assert_eq!(
        text.matches("ended with stop reason `budget`").count(),
        10,
        "{text}"
    );
    assert_eq!(
        text.matches("budget exhausted: output tokens").count(),
        10,
        "the lead's model reads what ran out: {text}"
    );
    assert!(text.contains("allows 60, 60 spent"), "{text}");
    assert_eq!(
        spent.output_tokens,
        50 + 10 * 60 + 50,
        "every child's spend is the lead's too"
    );
    assert_eq!(spent.model_calls, 2 + 10 + 10);
    assert_eq!(spent.runs, 10 + 30);
    let ends = ends(&seen);
    let children: Vec<_> = ends
        .iter()
        .filter(|(_, r)| *r == StopReason::Budget)
        .collect();
    assert_eq!(
        children.len(),
        10 + 20,
        "10 children and 2 leaves of each: {ends:?}"
    );
    assert_eq!(
        ends.iter()
            .filter(|(_, r)| *r == StopReason::MaxTokens)
            .count(),
        10,
        "one leaf of each child was cut at what was left"
    );
    assert_eq!(host.live_runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_never_spends_past_its_budget_and_its_root_ends_budget() {
    let host = host_with(&fan_out("budget = { output_tokens = 300 }", "")).await;
    let seen = record(&host);
    let (_, reason, diagnostic, spent) = turn(&host).await;
    assert_eq!(reason, StopReason::Budget);
    let diagnostic = diagnostic.unwrap_or_default();
    assert!(
        diagnostic.contains("budget exhausted: output tokens") && diagnostic.contains("allows 300"),
        "{diagnostic}"
    );
    // Output is held before each call and each call is sent what it holds as max_tokens: no
    // overshoot at all.
    assert_eq!(spent.output_tokens, 300);
    let usage_told: u64 = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentEnd { usage, parent, .. } if parent.depth == 0 => {
                usage.map(|u| u.completion_tokens)
            }
            _ => None,
        })
        .sum();
    assert_eq!(
        usage_told,
        300 - 50,
        "the children's subagent/end carry what their trees used"
    );
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_agents(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_budget_is_refused_before_it_starts() {
    // 4 runs for the whole tree, children and leaves alike: whichever starts first gets one,
    // and every other start is refused before anything runs.
    let host = host_with(&fan_out("budget = { runs = 4 }", "")).await;
    let seen = record(&host);
    let (text, reason, _, spent) = turn(&host).await;
    assert_eq!(reason, StopReason::Completed);
    assert_eq!(spent.runs, 4);
    let starts: Vec<u32> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::SubagentStart { parent, .. } => Some(parent.depth),
            _ => None,
        })
        .collect();
    assert_eq!(starts.len(), 4, "{starts:?}");
    let children = starts.iter().filter(|d| **d == 0).count();
    assert!(children >= 1, "the lead's first delegation comes first");
    assert_eq!(
        text.matches("BUDGET_EXHAUSTED: budget exhausted: runs started (the budget of `agent:1` allows 4, 4 spent)")
            .count(),
        10 - children,
        "each refused delegation tells the lead's model why: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_past_the_budget_is_refused_and_not_made() {
    let host = host_with(&fan_out("budget = { tool_calls = 3 }", "")).await;
    let seen = record(&host);
    let (text, _, _, spent) = turn(&host).await;
    assert_eq!(spent.tool_calls, 3);
    assert_eq!(
        text.matches("refused: budget exhausted: tool calls")
            .count(),
        7,
        "{text}"
    );
    let called = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, Event::AgentToolCall { .. }))
        .count();
    assert_eq!(called, 3, "a refused call is never made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_budget_needs_a_price_for_every_model() {
    let text = fan_out("budget = { cost_usd = 0.5 }", "");
    let error = seam_host::Config::parse(&text, std::path::Path::new("budget.toml"), &guest_dir())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("[agent.budget] bounds cost_usd")
            && error.contains("[models.scripts.child]")
            && error.contains("[models.scripts.lead]"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_on_a_provider_entry_is_refused_naming_the_key() {
    let host = test_host();
    let report = host
        .load(&config(&entry(
            "spawn",
            "spawn_provider",
            "budget = { runs = 1 }",
        )))
        .await;
    let failure = report.failures();
    assert!(
        failure.contains("config.budget") && failure.contains("provider"),
        "{failure}"
    );
}

/// The same fan-out on an OpenAI-compatible endpoint (the loopback server) that reports usage
/// and cuts a reply at the `max_tokens` it is sent, as a real one does; 3 of the 10 children
/// run in the background. The tree never spends past its budget, every call asks for at most
/// what is left, and what the endpoint reported is what was charged, with its cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_on_an_endpoint_is_charged_what_it_reports_and_never_passes_its_budget() {
    use super::chat_server::{last_user, ChatServer};
    use serde_json::{json, Value};

    fn calls(tool: &str, prompts: &[String], background: usize) -> Value {
        let calls: Vec<Value> = prompts
            .iter()
            .enumerate()
            .map(|(i, prompt)| {
                let mut args = json!({ "description": "d", "prompt": prompt });
                if i < background {
                    args["run_in_background"] = json!(true);
                }
                json!({"id": format!("{tool}-{prompt}"), "type": "function",
                       "function": {"name": tool, "arguments": args.to_string()}})
            })
            .collect();
        json!({"role": "assistant", "content": null, "tool_calls": calls})
    }
    let server = ChatServer::start(
        1,
        |_| false,
        |body: &Value| {
            let max = body["max_tokens"].as_u64().unwrap_or(u64::MAX);
            let out = max.min(50);
            let last_is_tool = body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .is_some_and(|m| m["role"] == "tool");
            let prompt = last_user(body);
            let message = if out < 50 {
                json!({"role": "assistant", "content": "cut"})
            } else if last_is_tool {
                json!({"role": "assistant", "content": "done"})
            } else if prompt == "go" {
                let prompts: Vec<String> = (0..10).map(|i| format!("child {i}")).collect();
                calls("delegate", &prompts, 3)
            } else if prompt.starts_with("child") {
                let prompts: Vec<String> =
                    (0..3).map(|j| format!("leaf of {prompt} {j}")).collect();
                calls("leaf", &prompts, 0)
            } else {
                json!({"role": "assistant", "content": "leaf done"})
            };
            let finish = if out < 50 { "length" } else { "stop" };
            json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": out}})
        },
    )
    .await;
    let models = server.models_section().trim_end().to_string()
        + "\nprices = { input_per_mtok = 1.0, output_per_mtok = 2.0 }\n\n";
    let toml = "[agent]\nmodel = \"openai\"\nbudget = { output_tokens = 600, cost_usd = 1.0 }\n\n"
        .to_string()
        + &models
        + &entry("spawn", "spawn_provider", "")
        + &entry(
            "delegate",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"delegate\", agentOptions = { model = \"openai\" }, runInBackground = true",
        )
        + &entry(
            "leaf",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"leaf\", agentOptions = { model = \"openai\" }",
        );
    let host = host_with(&toml).await;
    let agent = host.create_agent(None, "/work").unwrap();
    let outcome = agent.run_turn(vec![ContentBlock::text("go")]).await;
    // The background children spend from the same pool: wait for each to settle.
    for info in host.subagents().background_runs(agent.id()) {
        let (run, _) = host
            .subagents()
            .background_run(agent.id(), &info.id)
            .expect("the agent's background run");
        run.result().await.expect("it settles");
    }
    let spent = agent.account().spent();
    host.agents().dispose(agent.id()).await;

    assert_eq!(
        outcome.stop_reason,
        StopReason::Budget,
        "{:?}",
        outcome.diagnostic
    );
    assert_eq!(
        spent.output_tokens, 600,
        "exactly the budget: no overshoot on output"
    );
    let seen = server.seen();
    let reported: u64 = seen
        .iter()
        .map(|b| b["max_tokens"].as_u64().unwrap_or(u64::MAX).min(50))
        .sum();
    assert_eq!(
        reported, spent.output_tokens,
        "charged what the endpoint reported"
    );
    assert!(
        seen.iter()
            .all(|b| b["max_tokens"].as_u64().is_some_and(|m| m <= 600)),
        "every call asked for at most what was left"
    );
    assert_eq!(spent.model_calls, seen.len() as u64);
    assert_eq!(spent.input_tokens, 10 * seen.len() as u64);
    // $1 and $2 per million tokens: micro-dollars are tokens times the price.
    assert_eq!(
        spent.cost_micros,
        spent.input_tokens + 2 * spent.output_tokens
    );
    assert_eq!(host.live_runs(), 0);
}

/// Wall time: a child still waiting on its model when the tree's time runs out is stopped, and
/// ends `budget` saying so; so does the top-level agent's turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_out_of_wall_time_stops_its_children_and_ends_budget() {
    let toml = r#"[agent]
model = "scripted:lead"
budget = { wall_ms = 300 }

[models.scripts.lead]
steps = [
    { text = "wait", tool_calls = [{ name = "slow", arguments = { description = "d", prompt = "p" } }] },
    { text = "{tool_results}" },
]

[models.scripts.stuck]
steps = [{ text = "never in time", delay_ms = 600000 }]

"#
    .to_string()
        + &entry("spawn", "spawn_provider", "")
        + &entry(
            "slow",
            "subagent_tool",
            "provider = \"spawn\", toolName = \"slow\", agentOptions = { model = \"scripted:stuck\" }",
        );
    let host = host_with(&toml).await;
    let seen = record(&host);
    let (_, reason, diagnostic, _) = turn(&host).await;
    assert_eq!(reason, StopReason::Budget);
    let diagnostic = diagnostic.unwrap_or_default();
    assert!(
        diagnostic.contains("budget exhausted: wall time") && diagnostic.contains("allows 300 ms"),
        "{diagnostic}"
    );
    let child = ends(&seen);
    assert_eq!(child.len(), 1, "{child:?}");
    assert_eq!(
        child[0].1,
        StopReason::Budget,
        "the child was stopped by the tree's time"
    );
    assert_eq!(host.live_runs(), 0);
}
