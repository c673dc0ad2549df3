//! Traces through the real `seam` binary, exported by OTLP/HTTP to a receiver on loopback that
//! decodes them with the official protobuf definitions (`tests/fixtures/otlp_receiver.py`,
//! opentelemetry-proto): the span tree of a run whose spawn child calls an ACP agent (the
//! official ACP Python SDK, `tests/fixtures/acp_agent.py`), the trace id the agent received
//! across the process boundary, and a failed child's error status; and that one command is one
//! trace, its plugin loads and its runs under one root span named for the command.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use seam_tests::otlp::OtlpReceiver;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lead delegates `research` (a spawn child, which asks the ACP agent for the trace
/// context it got), and at once `ask_agent` with a prompt that makes the agent exit mid-run and
/// `ask_http` (a component whose run is one wasi:http request to the receiver's endpoint).
fn config(dir: &Path, port: u16) -> PathBuf {
    let guest = |name: &str| seam_tests::guest(name).display().to_string();
    let text = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "delegating", usage = {{ prompt_tokens = 20, completion_tokens = 4 }}, tool_calls = [
        {{ name = "research", arguments = {{ description = "d", prompt = "dig" }} }},
        {{ name = "ask_agent", arguments = {{ description = "d", prompt = "exit" }} }},
        {{ name = "ask_http", arguments = {{ description = "d", prompt = "hello" }} }},
        {{ name = "gated", arguments = {{ description = "d", prompt = "never" }} }},
    ] }},
    {{ text = "done: {{tool_results}}" }},
]

[models.scripts.researcher]
steps = [
    {{ text = "asking", usage = {{ prompt_tokens = 30, completion_tokens = 7 }}, tool_calls = [
        {{ name = "ask_agent", arguments = {{ description = "d", prompt = "trace" }} }},
    ] }},
    {{ text = "child saw {{tool_results}}" }},
]

[[plugin]]
id = "spawn"
component = "{spawn}"

[[plugin]]
id = "agent"
kind = "acp"
command = ["{python}", "{fixture}"]

[[plugin]]
id = "research"
component = "{tool}"
config = {{ provider = "spawn", toolName = "research", agentOptions = {{ model = "scripted:researcher" }} }}

[[plugin]]
id = "ask-agent"
component = "{tool}"
config = {{ provider = "agent", toolName = "ask_agent" }}

[[plugin]]
id = "endpoint"
component = "{http}"
config = {{ endpoint = "http://127.0.0.1:{port}/llm", model = "m", stream = false }}
[plugin.grants]
http = ["http://127.0.0.1:{port}"]

[[plugin]]
id = "ask-http"
component = "{tool}"
config = {{ provider = "http-agent", toolName = "ask_http" }}

[[plugin]]
id = "gated"
component = "{tool}"
config = {{ provider = "spawn", toolName = "gated", approve = "ask" }}
"#,
        http = guest("http_agent_provider"),
        spawn = guest("spawn_provider"),
        tool = guest("subagent_tool"),
        python = seam_tests::acp_python().display(),
        fixture = root().join("tests/fixtures/acp_agent.py").display(),
    );
    let path = dir.join("traced.toml");
    std::fs::write(&path, text).expect("the config");
    path
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[test]
fn a_run_is_exported_as_one_span_tree_whose_trace_reaches_the_acp_agent() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().join("spans.jsonl");
    let receiver = OtlpReceiver::start(&out);
    let output = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .arg("run")
        .arg(config(dir.path(), receiver.port))
        .arg("go")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_SERVICE_NAME", "seam-under-test")
        .output()
        .expect("seam runs");
    let stdout = seam_tests::text(&output.stdout);
    let stderr = seam_tests::text(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // `seam` flushed its spans before it exited, and the receiver wrote them before answering.
    let lines = receiver.lines();
    let text = format!("{lines:#?}");
    let (metrics, lines): (Vec<Value>, Vec<Value>) =
        lines.into_iter().partition(|l| l.get("metric").is_some());
    let (requests, spans): (Vec<Value>, Vec<Value>) =
        lines.into_iter().partition(|l| l.get("request").is_some());
    // The metrics went out the same way, with the last export at the exit.
    let points = |name: &str| -> Vec<Value> {
        metrics
            .iter()
            .filter(|m| m["metric"] == name)
            .flat_map(|m| m["points"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let last = |name: &str, key: &str, value: &str| -> Option<i64> {
        points(name)
            .iter()
            .rev()
            .find(|p| p["attributes"][key] == value)
            .and_then(|p| p["value"].as_i64())
    };
    assert_eq!(
        last("seam.runs.started", "provider", "agent"),
        Some(2),
        "{metrics:#?}"
    );
    assert_eq!(last("seam.runs.started", "provider", "spawn"), Some(1));
    assert_eq!(last("seam.run.duration", "provider", "spawn"), Some(1));
    let ended: Vec<Value> = points("seam.runs.ended");
    assert!(
        ended
            .iter()
            .any(|p| p["attributes"]["provider"] == "agent"
                && p["attributes"]["stop_reason"] == "error"),
        "{ended:#?}"
    );
    // By provider and model: the lead's own calls, and its `spawn` child's.
    let tokens = |provider: &str, model: &str, kind: &str| -> Option<i64> {
        points("seam.model.tokens")
            .iter()
            .rev()
            .find(|p| {
                p["attributes"]["provider"] == provider
                    && p["attributes"]["model"] == model
                    && p["attributes"]["kind"] == kind
            })
            .and_then(|p| p["value"].as_i64())
    };
    assert_eq!(tokens("", "scripted:lead", "input"), Some(20));
    assert_eq!(tokens("", "scripted:lead", "output"), Some(4));
    assert_eq!(tokens("spawn", "scripted:researcher", "input"), Some(30));
    assert_eq!(tokens("spawn", "scripted:researcher", "output"), Some(7));
    assert!(metrics.iter().all(|m| m["service"] == "seam-under-test"));
    let charged: Vec<Value> = points("seam.plugin.host_memory");
    assert!(
        charged.iter().any(|p| p["attributes"]["plugin"] == "spawn"),
        "host memory per plugin: {charged:#?}"
    );
    // Each component's load lies under the command's root, saying where its code came from.
    let (loads, spans): (Vec<Value>, Vec<Value>) =
        spans.into_iter().partition(|s| s["name"] == "plugin.load");
    let command = spans
        .iter()
        .find(|s| s["name"] == "seam run")
        .expect("the command's root span");
    let mut loaded: Vec<&str> = loads
        .iter()
        .map(|l| attr(l, "seam.plugin.id").as_str().unwrap_or(""))
        .collect();
    loaded.sort_unstable();
    assert_eq!(
        loaded,
        [
            "ask-agent",
            "ask-http",
            "endpoint",
            "gated",
            "research",
            "spawn"
        ]
    );
    assert!(loads.iter().all(|l| {
        l["parent-span-id"] == command["span-id"]
            && l["trace-id"] == command["trace-id"]
            && matches!(
                attr(l, "seam.plugin.code").as_str(),
                Some("cache-hit" | "compiled" | "shared")
            )
    }));
    assert!(
        spans.iter().all(|s| s.get("error").is_none()),
        "every request decoded: {text}"
    );
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["span-id"].as_str().expect("an id"), s))
        .collect();
    let named =
        |name: &str| -> Vec<&Value> { spans.iter().filter(|s| s["name"] == name).collect() };
    let parent_of = |span: &Value| -> Option<&Value> {
        let id = span["parent-span-id"].as_str().unwrap_or("");
        by_id.get(id).copied()
    };

    // One trace, one root: the command's, with the lead's turn under it.
    let trace = spans[0]["trace-id"].as_str().expect("a trace id");
    assert!(spans.iter().all(|s| s["trace-id"] == trace), "{text}");
    assert!(spans.iter().all(|s| s["service"] == "seam-under-test"));
    let tops: Vec<&&Value> = by_id.values().filter(|s| parent_of(s).is_none()).collect();
    assert_eq!(tops.len(), 1, "{tops:#?}");
    assert_eq!(tops[0]["name"], "seam run");
    assert_eq!(tops[0]["parent-span-id"], "");
    let lead_turns: Vec<&&Value> = by_id
        .values()
        .filter(|s| parent_of(s).is_some_and(|p| p["span-id"] == tops[0]["span-id"]))
        .collect();
    assert_eq!(lead_turns.len(), 1, "{lead_turns:#?}");
    let roots = lead_turns;
    assert_eq!(roots[0]["name"], "agent.turn");
    assert_eq!(attr(roots[0], "seam.agent.id"), "agent:1");

    // The headless request for `gated`: a span under the lead's turn, denied by nobody.
    let approvals = named("approval");
    assert_eq!(approvals.len(), 1, "{approvals:#?}");
    assert_eq!(attr(approvals[0], "seam.approval.allowed"), false);
    assert_eq!(attr(approvals[0], "seam.approval.by"), "nobody");
    assert!(attr(approvals[0], "seam.approval.subject")
        .as_str()
        .is_some_and(|s| s.contains("`gated`")));
    assert_eq!(
        parent_of(approvals[0]).map(|t| &t["span-id"]),
        Some(&roots[0]["span-id"])
    );

    // research -> spawn run -> the child's turn -> ask_agent -> the ACP run.
    let runs = named("subagent.run");
    assert_eq!(runs.len(), 4, "{runs:#?}");
    let spawn = runs
        .iter()
        .find(|r| attr(r, "seam.provider") == "spawn")
        .expect("the spawn run");
    let call = parent_of(spawn).expect("the run lies under a span");
    assert_eq!(call["name"], "tool.call");
    assert_eq!(
        attr(call, "seam.tool.name"),
        "research",
        "under the call that started it, not the one made beside it"
    );
    assert_eq!(
        parent_of(call).map(|t| &t["span-id"]),
        Some(&roots[0]["span-id"])
    );
    assert_eq!(attr(spawn, "seam.stop_reason"), "completed");
    assert_eq!(attr(spawn, "seam.depth"), 1);
    assert_eq!(
        attr(spawn, "seam.plugin"),
        "spawn",
        "the plugin that registered it"
    );
    let child_turn = named("agent.turn")
        .into_iter()
        .find(|t| parent_of(t).map(|p| &p["span-id"]) == Some(&spawn["span-id"]))
        .expect("the child's turn lies under its run");
    let acp_runs: Vec<&&Value> = runs
        .iter()
        .filter(|r| attr(r, "seam.provider") == "agent")
        .collect();
    assert_eq!(acp_runs.len(), 2);
    let traced = acp_runs
        .iter()
        .find(|r| {
            parent_of(r)
                .and_then(parent_of)
                .is_some_and(|t| t["span-id"] == child_turn["span-id"])
        })
        .expect("the child's ACP run lies under its call, under the child's turn");
    assert_eq!(attr(traced, "seam.depth"), 2);

    // The agent got the trace context of its run across the process boundary.
    let seen = stdout
        .split("traceparent=")
        .nth(1)
        .expect("the agent answered with what it got")
        .split_whitespace()
        .next()
        .unwrap_or("");
    let parts: Vec<&str> = seen.split('-').collect();
    assert_eq!(parts.len(), 4, "{seen}");
    assert_eq!(parts[1], trace, "the same trace");
    assert_eq!(parts[2], traced["span-id"], "the run's own span: {seen}");

    // The agent that exited mid-run: its run has the error status and the diagnostic.
    let failed = acp_runs
        .iter()
        .find(|r| r["span-id"] != traced["span-id"])
        .expect("the failed run");
    assert_eq!(failed["status"], "error", "{failed:#}");
    assert_eq!(attr(failed, "seam.stop_reason"), "error");
    assert!(
        !failed["status-message"].as_str().unwrap_or("").is_empty(),
        "{failed:#}"
    );
    assert_eq!(
        parent_of(failed).map(|c| attr(c, "seam.tool.name")),
        Some(&Value::from("ask_agent"))
    );

    // The component's wasi:http request carried its run's span, added by the host.
    let http_run = runs
        .iter()
        .find(|r| attr(r, "seam.provider") == "http-agent")
        .expect("the http-agent run");
    assert_eq!(attr(http_run, "seam.stop_reason"), "completed");
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let header = requests[0]["traceparent"]
        .as_str()
        .expect("a traceparent header");
    let parts: Vec<&str> = header.split('-').collect();
    assert_eq!(
        (parts[1], parts[2]),
        (trace, http_run["span-id"].as_str().unwrap())
    );

    // Model calls, with their tokens, under the turns that made them.
    let calls = named("model.call");
    assert!(calls.len() >= 4, "{calls:#?}");
    assert!(calls
        .iter()
        .all(|c| parent_of(c).is_some_and(|t| t["name"] == "agent.turn")));
    let child_first = calls
        .iter()
        .find(|c| {
            parent_of(c).map(|t| &t["span-id"]) == Some(&child_turn["span-id"])
                && attr(c, "gen_ai.usage.input_tokens") == 30
        })
        .expect("the child's first model call, with its usage");
    assert_eq!(attr(child_first, "gen_ai.usage.output_tokens"), 7);
    assert_eq!(
        attr(child_first, "gen_ai.request.model"),
        "scripted:researcher"
    );
    // Spans end after they start, and a child's within its parent's.
    for span in &spans {
        let (start, end) = (
            span["start"].as_u64().unwrap(),
            span["end"].as_u64().unwrap(),
        );
        assert!(start <= end, "{span:#}");
    }
    let (run_start, run_end) = (
        spawn["start"].as_u64().unwrap(),
        spawn["end"].as_u64().unwrap(),
    );
    assert!(child_turn["start"].as_u64().unwrap() >= run_start);
    assert!(child_turn["end"].as_u64().unwrap() <= run_end);
}

/// With no OTLP variable set nothing is exported and nothing is asked of the environment;
/// a protocol other than HTTP/protobuf is refused by name before anything runs.
#[test]
fn a_protocol_seam_does_not_speak_is_refused_naming_the_variable() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let output = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .arg("run")
        .arg(config(dir.path(), 9))
        .arg("go")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .output()
        .expect("seam runs");
    let stderr = seam_tests::text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && stderr.contains("http/protobuf"),
        "{stderr}"
    );
}

/// A lead that asks `research` (a mock provider's run) once.
fn small_config(dir: &Path) -> PathBuf {
    let text = format!(
        r#"[agent]
model = "scripted:lead"

[sessions]
store = "memory"

[models.scripts.lead]
steps = [
    {{ text = "asking", tool_calls = [
        {{ name = "research", arguments = {{ description = "d", prompt = "dig" }} }},
    ] }},
    {{ text = "done: {{tool_results}}" }},
]

[[plugin]]
id = "researcher"
component = "{mock}"
config = {{ name = "researcher" }}

[[plugin]]
id = "research"
component = "{tool}"
config = {{ provider = "researcher", toolName = "research" }}
"#,
        mock = seam_tests::guest("mock_provider").display(),
        tool = seam_tests::guest("subagent_tool").display(),
    );
    let path = dir.join("small.toml");
    std::fs::write(&path, text).expect("the config");
    path
}

/// The spans `seam ARGS` exported, with OTLP export on.
fn spans_of(args: &[&str], config: &Path) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().join("spans.jsonl");
    let receiver = OtlpReceiver::start(&out);
    let output = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .arg(args[0])
        .arg(config)
        .args(&args[1..])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_METRICS_EXPORTER", "none")
        .output()
        .expect("seam runs");
    assert!(
        output.status.success(),
        "{}\n{}",
        seam_tests::text(&output.stdout),
        seam_tests::text(&output.stderr)
    );
    // `seam` flushed its spans before it exited, and the receiver wrote them before answering.
    let spans: Vec<Value> = receiver.lines();
    assert!(spans.iter().all(|s| s.get("error").is_none()), "{spans:#?}");
    spans
}

/// Checks that `spans` are one trace under one root named `root`, with every plugin load and
/// `direct` (the names of the command's own top spans) right under it; returns the root.
fn one_trace<'a>(spans: &'a [Value], root: &str, direct: &[&str]) -> &'a Value {
    let text = format!("{spans:#?}");
    let traces: std::collections::BTreeSet<&str> = spans
        .iter()
        .map(|s| s["trace-id"].as_str().expect("a trace id"))
        .collect();
    assert_eq!(traces.len(), 1, "one command, one trace: {text}");
    let ids: std::collections::HashSet<&str> = spans
        .iter()
        .map(|s| s["span-id"].as_str().expect("an id"))
        .collect();
    let roots: Vec<&Value> = spans
        .iter()
        .filter(|s| !ids.contains(s["parent-span-id"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(roots.len(), 1, "one root: {text}");
    let top = roots[0];
    assert_eq!(top["name"], root, "{text}");
    assert_eq!(top["parent-span-id"], "", "{text}");
    let under: Vec<&str> = spans
        .iter()
        .filter(|s| s["parent-span-id"] == top["span-id"])
        .map(|s| s["name"].as_str().unwrap_or(""))
        .collect();
    let loads = spans.iter().filter(|s| s["name"] == "plugin.load").count();
    assert_eq!(loads, 2, "{text}");
    assert_eq!(
        under.iter().filter(|n| **n == "plugin.load").count(),
        loads,
        "every load under the root: {text}"
    );
    for name in direct {
        assert!(under.contains(name), "`{name}` under the root: {text}");
    }
    // The root spans the whole command.
    for span in spans {
        assert!(span["start"].as_u64() >= top["start"].as_u64(), "{span:#}");
        assert!(span["end"].as_u64() <= top["end"].as_u64(), "{span:#}");
    }
    top
}

#[test]
fn one_command_is_one_trace_under_a_root_named_for_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = small_config(dir.path());

    let spans = spans_of(&["run", "go"], &config);
    one_trace(&spans, "seam run", &["agent.turn"]);
    assert!(
        spans.iter().any(|s| s["name"] == "subagent.run"),
        "{spans:#?}"
    );

    let spans = spans_of(
        &["delegate", "--provider", "researcher", "--prompt", "dig"],
        &config,
    );
    one_trace(&spans, "seam delegate", &["subagent.run"]);
}
