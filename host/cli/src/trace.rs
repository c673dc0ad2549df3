//! `--trace FILE` (`seam run`, `seam delegate`, `seam call`): the command's runs, turns and tool
//! calls as Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open.
//!
//! One track (a "thread") per agent: a run's slice (`subagent.run`) sits on the track of the
//! child agent it ran (whose id is the run's), with that agent's turns (`agent.turn`) inside it;
//! tool calls (`tool.call`) are async slices, so that calls made at once do not collide; progress
//! updates are instants on the run's track. A slice still open when the command ended is closed
//! there and says so.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use seam_host::Event;

use crate::recording::Recorded;

/// Tracks by agent id, numbered in the order they appear.
#[derive(Default)]
struct Tracks {
    ids: HashMap<String, u64>,
    meta: Vec<Value>,
}

impl Tracks {
    fn of(&mut self, agent: &str) -> u64 {
        if let Some(tid) = self.ids.get(agent) {
            return *tid;
        }
        let tid = self.ids.len() as u64 + 1;
        self.ids.insert(agent.to_string(), tid);
        self.meta.push(json!({
            "name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
            "args": { "name": agent },
        }));
        self.meta.push(json!({
            "name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid,
            "args": { "sort_index": tid },
        }));
        tid
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// The trace of `recorded`, as trace-event JSON.
pub(crate) fn trace_json(recorded: &Recorded, command: &str) -> Value {
    let mut tracks = Tracks::default();
    let mut out = Vec::new();
    // Open slices: runs by id, turns by (agent, turn), tool calls by (agent, call).
    let mut runs: HashMap<String, (Duration, u64, Value)> = HashMap::new();
    let mut turns: HashMap<(String, u32), Duration> = HashMap::new();
    let mut calls: HashMap<(String, String), String> = HashMap::new();
    for (at, event) in &recorded.events {
        match event {
            Event::AgentCreated { id, .. } => {
                tracks.of(id);
            }
            Event::SubagentStart {
                provider,
                id,
                parent,
            } => {
                tracks.of(&parent.id);
                let tid = tracks.of(id);
                let args = json!({ "provider": provider, "run": id, "parent": parent.id, "depth": parent.depth + 1 });
                runs.insert(id.clone(), (*at, tid, args));
            }
            Event::SubagentProgress { id, seq, .. } => {
                let tid = tracks.of(id);
                out.push(json!({
                    "name": "subagent.progress", "ph": "i", "s": "t", "pid": 1, "tid": tid,
                    "ts": micros(*at), "args": { "seq": seq },
                }));
            }
            Event::SubagentEnd {
                id,
                provider,
                stop_reason,
                diagnostic,
                ..
            } => {
                if let Some((began, tid, mut args)) = runs.remove(id) {
                    args["stop-reason"] = json!(stop_reason.as_str());
                    if let Some(d) = diagnostic {
                        args["diagnostic"] = json!(d);
                    }
                    out.push(json!({
                        "name": format!("subagent.run {provider}"), "cat": "subagent", "ph": "X",
                        "pid": 1, "tid": tid, "ts": micros(began),
                        "dur": micros(at.saturating_sub(began)), "args": args,
                    }));
                }
            }
            Event::AgentTurnStart { id, turn } => {
                turns.insert((id.clone(), *turn), *at);
            }
            Event::AgentTurnEnd {
                id,
                turn,
                stop_reason,
                diagnostic,
                usage,
                cost_usd,
            } => {
                if let Some(began) = turns.remove(&(id.clone(), *turn)) {
                    let tid = tracks.of(id);
                    let mut args = json!({ "turn": turn, "stop-reason": stop_reason.as_str() });
                    if let Some(d) = diagnostic {
                        args["diagnostic"] = json!(d);
                    }
                    if let Some(u) = usage {
                        args["prompt-tokens"] = json!(u.prompt_tokens);
                        args["completion-tokens"] = json!(u.completion_tokens);
                    }
                    if let Some(cost) = cost_usd {
                        args["cost-usd"] = json!(cost);
                    }
                    out.push(json!({
                        "name": "agent.turn", "cat": "agent", "ph": "X", "pid": 1, "tid": tid,
                        "ts": micros(began), "dur": micros(at.saturating_sub(began)), "args": args,
                    }));
                }
            }
            Event::AgentToolCall { id, call, tool } => {
                let tid = tracks.of(id);
                let key = format!("{id}/{call}");
                out.push(json!({
                    "name": format!("tool.call {tool}"), "cat": "tool", "ph": "b", "id2": { "local": key },
                    "pid": 1, "tid": tid, "ts": micros(*at), "args": { "agent": id, "call": call },
                }));
                calls.insert((id.clone(), call.clone()), tool.clone());
            }
            Event::AgentToolResult {
                id,
                call,
                tool,
                is_error,
            } if calls.remove(&(id.clone(), call.clone())).is_some() => {
                let tid = tracks.of(id);
                out.push(json!({
                    "name": format!("tool.call {tool}"), "cat": "tool", "ph": "e",
                    "id2": { "local": format!("{id}/{call}") }, "pid": 1, "tid": tid,
                    "ts": micros(*at), "args": { "is-error": is_error },
                }));
            }
            _ => {}
        }
    }
    // What the command ended with still open is closed at its end, marked.
    let end = recorded.took;
    for (id, (began, tid, mut args)) in runs {
        args["stop-reason"] = json!("did not end");
        let provider = args["provider"].as_str().unwrap_or_default().to_string();
        out.push(json!({
            "name": format!("subagent.run {provider}"), "cat": "subagent", "ph": "X", "pid": 1,
            "tid": tid, "ts": micros(began), "dur": micros(end.saturating_sub(began)),
            "args": args, "id": id,
        }));
    }
    for ((id, turn), began) in turns {
        let tid = tracks.of(&id);
        out.push(json!({
            "name": "agent.turn", "cat": "agent", "ph": "X", "pid": 1, "tid": tid,
            "ts": micros(began), "dur": micros(end.saturating_sub(began)),
            "args": { "turn": turn, "stop-reason": "did not end" },
        }));
    }
    for ((id, call), tool) in calls {
        let tid = tracks.of(&id);
        out.push(json!({
            "name": format!("tool.call {tool}"), "cat": "tool", "ph": "e",
            "id2": { "local": format!("{id}/{call}") }, "pid": 1, "tid": tid, "ts": micros(end),
            "args": { "did-not-end": true },
        }));
    }
    let mut events = vec![json!({
        "name": "process_name", "ph": "M", "pid": 1, "args": { "name": command },
    })];
    events.extend(tracks.meta);
    events.extend(out);
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

/// Writes the trace of `recorded` to `path`.
pub(crate) fn write_trace(recorded: &Recorded, command: &str, path: &Path) -> Result<()> {
    let text =
        serde_json::to_string(&trace_json(recorded, command)).context("cannot encode the trace")?;
    std::fs::write(path, text)
        .with_context(|| format!("cannot write the trace to {}", path.display()))
}
