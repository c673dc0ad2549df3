//! Record and replay through the real `seam` binary: `seam run --record FILE` writes a
//! cassette, `seam replay FILE` (or `seam replay SESSION` from the store) runs the tree again
//! with the recorded model replies and the components for real, and a change is reported at the
//! run and step where it happens.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `seam` with the test cache, and a state folder of the test's own.
fn seam(state: &Path) -> Command {
    let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    command.env("XDG_STATE_HOME", state);
    command
}

/// The repository's root.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `seam ARGS`; returns its exit code, stdout and stderr.
fn seam_out(state: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    seam_tests::outcome(seam(state).args(args))
}

/// The lead asks `lookup` (a mock provider behind the subagent tool) and `dig` (a spawned
/// child that asks `lookup` itself), then says what it read.
fn config(dir: &Path, reply: &str) -> PathBuf {
    let text = format!(
        r#"
[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "asking", tool_calls = [
        {{ name = "lookup", arguments = {{ description = "d", prompt = "the fact" }} }},
        {{ name = "dig", arguments = {{ description = "d", prompt = "dig it" }} }},
    ] }},
    {{ text = "read: {{tool_results}}" }},
]

[models.scripts.child]
steps = [
    {{ text = "child asks", tool_calls = [{{ name = "lookup", arguments = {{ description = "d", prompt = "deeper" }} }}] }},
    {{ text = "child read: {{tool_results}}" }},
]

{plugins}"#,
        plugins = tree_plugins(reply, ""),
    );
    let path = dir.join("lookup.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The plugins of the replay trees: `facts` (a mock provider answering `reply`) behind the
/// subagent tool `lookup`, and `dig` (a child spawned on `scripted:child`, with `dig_extra`
/// keys in its config); and a control tool entry.
fn tree_plugins(reply: &str, dig_extra: &str) -> String {
    let guest = |name: &str| seam_tests::guest(name).display().to_string();
    format!(
        r#"
[[plugin]]
id = "facts"
component = "{mock}"
config = {{ name = "facts", reply = "{reply}" }}

[[plugin]]
id = "lookup"
component = "{tool}"
config = {{ provider = "facts", toolName = "lookup" }}

[[plugin]]
id = "spawn"
component = "{spawn}"

[[plugin]]
id = "dig"
component = "{tool}"
config = {{ provider = "spawn", toolName = "dig", agentOptions = {{ model = "scripted:child" }}{dig_extra} }}
"#,
        mock = guest("mock_provider"),
        tool = guest("subagent_tool"),
        spawn = guest("spawn_provider"),
    )
}

/// A `subagent-control` entry `id` for `action`.
fn control(id: &str, action: &str) -> String {
    format!(
        "\n[[plugin]]\nid = \"{id}\"\ncomponent = \"{}\"\nconfig = {{ action = \"{action}\" }}\n",
        seam_tests::guest("subagent_control").display()
    )
}

/// The lead's call starting child `n` of `dig` in the background.
fn dig_in_background(n: u32) -> String {
    format!("{{ name = \"dig\", arguments = {{ description = \"d{n}\", prompt = \"dig {n}\", run_in_background = true }} }}")
}

// Replaying components (HTTP, clock, random) shares these helpers.
mod components;

/// The python chat endpoint, and its base URL (`http://127.0.0.1:PORT/v1`).
fn chat_server() -> (Child, String) {
    let mut server = Command::new(seam_tests::acp_python())
        .arg(repo().join("tests/fixtures/chat_server.py"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    (server, url.trim().to_string())
}

/// Records `config` answering `prompt` into `cassette`; returns the answer (with its session).
fn record(state: &Path, config: &Path, prompt: &str, cassette: &Path) -> serde_json::Value {
    let (code, out, err) = seam_out(
        state,
        &[
            "run",
            config.to_str().unwrap(),
            prompt,
            "--json",
            "--record",
            cassette.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// The cassette at `path` with `change` applied to its JSON, written to `to`.
fn changed(path: &Path, to: &Path, change: impl FnOnce(&mut serde_json::Value)) {
    let mut cassette: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    change(&mut cassette);
    std::fs::write(to, cassette.to_string()).unwrap();
}

fn replay_json(state: &Path, target: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut args = vec!["replay", target, "--json"];
    args.extend_from_slice(extra);
    let (code, out, err) = seam_out(state, &args);
    let report = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("not a report ({e}): {out}\n{err}"));
    (code, report)
}

#[test]
fn the_demo_replays_identically_from_its_cassette_and_its_session_a_hundred_times() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let cassette = dir.path().join("demo.json");
    let demo = repo().join("examples/demo.toml");
    let (code, out, err) = seam_out(
        &state,
        &[
            "run",
            demo.to_str().unwrap(),
            "--json",
            "--record",
            cassette.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let session = serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 0..100 {
        // Alternately from the self-contained file and from the session in the store.
        let target = if i % 2 == 0 {
            cassette.to_str().unwrap()
        } else {
            session.as_str()
        };
        let (code, report) = replay_json(&state, target, &[]);
        assert_eq!(code, Some(0), "replay {i}: {report}");
        assert_eq!(report["identical"], true, "replay {i}: {report}");
        assert_eq!(report["steps"], 5, "replay {i}: {report}");
    }
}

#[test]
fn a_changed_prompt_component_or_childs_tool_result_is_reported_where_it_happens() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = config(dir.path(), "forty-two");
    let cassette = dir.path().join("lookup.json");
    record(&state, &config, "what is it?", &cassette);
    let (code, report) = replay_json(&state, cassette.to_str().unwrap(), &[]);
    assert_eq!(
        (code, &report["identical"]),
        (Some(0), &serde_json::json!(true)),
        "{report}"
    );
    assert_eq!(
        report["steps"], 4,
        "two steps of the lead, two of the child: {report}"
    );

    // Another prompt: the lead's first request differs.
    let other = dir.path().join("prompt.json");
    changed(&cassette, &other, |c| {
        c["prompts"][0] = "what was it?".into()
    });
    let (code, report) = replay_json(&state, other.to_str().unwrap(), &[]);
    assert_eq!(code, Some(2), "{report}");
    let d = &report["divergence"];
    assert_eq!(
        (d["key"].as_str(), d["kind"].as_str(), d["step"].as_u64()),
        (Some("root"), Some("model"), Some(1)),
        "{d}"
    );
    assert_eq!(d["recorded"], "what is it?");
    assert_eq!(d["now"], "what was it?");

    // Another reply from the component: the child's second request (its tool result) is the
    // first to differ.
    let other = dir.path().join("reply.json");
    changed(&cassette, &other, |c| {
        let text = c["config"]
            .as_str()
            .unwrap()
            .replace("forty-two", "forty-three");
        c["config"] = text.into();
    });
    let (code, report) = replay_json(&state, other.to_str().unwrap(), &[]);
    assert_eq!(code, Some(2), "{report}");
    let d = &report["divergence"];
    assert_eq!(d["kind"], "model", "{d}");
    assert_eq!(d["step"], 2, "{d}");
    // The lead's second step waits for the child's whole run: the child's comes first.
    assert_eq!(d["key"], "root/call-0-1.1", "{d}");
    assert!(d["now"].as_str().unwrap().contains("forty-three"), "{d}");
    assert!(d["recorded"].as_str().unwrap().contains("forty-two"), "{d}");

    // A recorded reply the replay never asks for is a divergence too.
    let (code, out, _) = seam_out(
        &state,
        &["replay", cassette.to_str().unwrap(), "--until", "1"],
    );
    assert_eq!(code, Some(0));
    assert!(out.contains("stopped at step 1"), "{out}");
}

/// A session recorded over the real OpenAI adapter replays with its server gone.
#[test]
fn a_session_over_the_openai_adapter_replays_with_its_server_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (mut server, url) = chat_server();
    let config = dir.path().join("openai.toml");
    std::fs::write(
        &config,
        format!(
            "[agent]\nmodel = \"openai\"\n\n[models.openai]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n",
            url.trim()
        ),
    )
    .unwrap();
    let cassette = dir.path().join("openai.json");
    let session = record(&state, &config, "hello there", &cassette)["session"]
        .as_str()
        .unwrap()
        .to_string();
    server.kill().unwrap();
    server.wait().unwrap();
    for target in [cassette.to_str().unwrap(), session.as_str()] {
        let (code, report) = replay_json(&state, target, &[]);
        assert_eq!(code, Some(0), "{report}");
        assert_eq!(report["identical"], true, "{report}");
        assert_eq!(report["steps"], 1, "{report}");
    }
    // A model the replay cannot reach does not matter: nothing is asked of it.
    let (code, out, err) = seam_out(&state, &["run", config.to_str().unwrap(), "hello there"]);
    assert_ne!(code, Some(0), "the server is gone: {out} {err}");
}

#[test]
fn replay_refuses_what_is_not_a_recording_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (code, _, err) = seam_out(&state, &["replay", "no-such-session"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("`no-such-session` is neither a cassette file nor a session"),
        "{err}"
    );
    // Recording turned off: nothing to write a cassette from, said at once.
    let off = dir.path().join("off.toml");
    std::fs::write(
        &off,
        std::fs::read_to_string(config(dir.path(), "x"))
            .unwrap()
            .replace("[agent]", "[recording]\nenabled = false\n\n[agent]"),
    )
    .unwrap();
    let cassette = dir.path().join("off.json");
    let (code, _, err) = seam_out(
        &state,
        &[
            "run",
            off.to_str().unwrap(),
            "go",
            "--record",
            cassette.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains("--record needs the session to be recorded"),
        "{err}"
    );
    assert!(!cassette.exists());
    let zero = dir.path().join("zero.toml");
    std::fs::write(&zero, "[recording]\nmax_mb = 0\n").unwrap();
    let (code, _, err) = seam_out(&state, &["check", zero.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("[recording]") && err.contains("max_mb"),
        "{err}"
    );
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"not\": \"a cassette\"}").unwrap();
    let (code, _, err) = seam_out(&state, &["replay", junk.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("is not a cassette"), "{err}");
}

/// An answer to a request for approval is an input too: recorded as `seam approvals` gave it,
/// replayed without asking anyone (the replay would otherwise wait for the store).
#[test]
fn an_approval_answered_from_another_process_is_replayed_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = config(dir.path(), "forty-two");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(
            "toolName = \"lookup\" }",
            "toolName = \"lookup\", approve = \"ask\" }",
        )
        .replace("[agent]", "[approvals]\nfrom_store = true\n\n[agent]");
    std::fs::write(&config, text).unwrap();
    let cassette = dir.path().join("asked.json");
    let mut child = seam(&state)
        .args([
            "run",
            config.to_str().unwrap(),
            "what is it?",
            "--events",
            "--record",
            cassette.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = seam_tests::lines_of(child.stderr.take().unwrap());
    // Two requests (the lead's and the child's calls of `lookup`): each is allowed as it comes.
    let mut allowed = 0;
    while allowed < 2 {
        let line = lines
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("seam run asks for approval");
        if line.contains("\"event\":\"approval/requested\"") {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let id = v["id"].as_str().unwrap();
            let (code, _, err) = seam_out(
                &state,
                &[
                    "approvals",
                    "allow",
                    id,
                    "--config",
                    config.to_str().unwrap(),
                ],
            );
            assert_eq!(code, Some(0), "{err}");
            allowed += 1;
        }
    }
    assert!(child.wait().unwrap().success());
    let (code, report) = replay_json(&state, cassette.to_str().unwrap(), &[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["identical"], true, "{report}");
}

/// An ACP agent's run is answered from the recording: the replay does not start the agent
/// (its program may be gone), and says that its internals were not run again.
#[test]
fn an_acp_agents_answer_is_replayed_without_starting_it_and_the_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("acp.toml");
    let text = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "asking", tool_calls = [{{ name = "ask", arguments = {{ description = "d", prompt = "echo from the agent" }} }}] }},
    {{ text = "read: {{tool_results}}" }},
]

[[plugin]]
id = "agent"
kind = "acp"
command = ["{python}", "{fixture}"]

[[plugin]]
id = "ask"
component = "{tool}"
config = {{ provider = "agent", toolName = "ask" }}
"#,
        python = seam_tests::acp_python().display(),
        fixture = repo().join("tests/fixtures/acp_agent.py").display(),
        tool = seam_tests::guest("subagent_tool").display(),
    );
    std::fs::write(&config, &text).unwrap();
    let cassette = dir.path().join("acp.json");
    record(&state, &config, "go", &cassette);
    // The agent's program is gone at replay.
    let gone = dir.path().join("gone.json");
    changed(&cassette, &gone, |c| {
        let text = c["config"]
            .as_str()
            .unwrap()
            .replace("acp_agent.py", "no_such_agent.py");
        c["config"] = text.into();
    });
    let (code, report) = replay_json(&state, gone.to_str().unwrap(), &[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["identical"], true, "{report}");
    let gaps = report["gaps"].to_string();
    assert!(gaps.contains("ACP agent `agent`"), "{gaps}");
}

/// A recording cut by `kill -9` mid-turn, then continued with `--session`: the replay goes up to
/// the cut, and says where it is.
#[test]
fn a_recording_cut_by_kill_9_replays_up_to_the_cut_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let guest = |name: &str| seam_tests::guest(name).display().to_string();
    let text = format!(
        r#"[agent]
model = "scripted:lead"

[sessions]
store = "sqlite:sessions.db"

[models.scripts.lead]
steps = [
    {{ text = "asking", tool_calls = [{{ name = "lookup", arguments = {{ description = "d", prompt = "the fact" }} }}] }},
    {{ text = "never in time", delay_ms = 600000 }},
]

[models.scripts.after]
steps = [{{ text = "continued: {{prompt}}" }}]

[[plugin]]
id = "facts"
component = "{mock}"
config = {{ name = "facts", reply = "forty-two" }}

[[plugin]]
id = "lookup"
component = "{tool}"
config = {{ provider = "facts", toolName = "lookup" }}
"#,
        mock = guest("mock_provider"),
        tool = guest("subagent_tool"),
    );
    let config = dir.path().join("cut.toml");
    std::fs::write(&config, text).unwrap();
    let mut first = seam(&state)
        .args(["run", config.to_str().unwrap(), "go", "--events"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = seam_tests::lines_of(first.stderr.take().unwrap());
    // The barrier: the tool answered, so the second model call (which never ends) began after
    // the first reply was recorded.
    let mut session = String::new();
    loop {
        let line = lines
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the tool answers");
        if line.contains("\"event\":\"subagent/start\"") {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            session = v["parent"]["session-id"].as_str().unwrap().to_string();
        }
        if line.contains("\"event\":\"agent/tool-result\"") {
            break;
        }
    }
    first.kill().unwrap();
    first.wait().unwrap();

    let cassette = dir.path().join("cut.json");
    let (code, _, err) = seam_out(
        &state,
        &[
            "run",
            config.to_str().unwrap(),
            "again",
            "--session",
            &session,
            "--model",
            "scripted:after",
            "--record",
            cassette.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, report) = replay_json(&state, cassette.to_str().unwrap(), &[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["identical"], true, "{report}");
    assert_eq!(report["recorded_turns"], 2, "{report}");
    let cut = &report["cut"];
    assert_eq!(cut["turn"], 1, "{report}");
    assert_eq!(cut["key"], "root", "{report}");
    assert_eq!(
        cut["step"], 2,
        "the second model step was never recorded: {report}"
    );
    let (_, out, _) = seam_out(&state, &["replay", cassette.to_str().unwrap()]);
    assert!(out.contains("identical up to the cut"), "{out}");
}

/// `seam test COMPONENT --replay FILE`: the checklist has a `replay` check, which passes when the
/// cassette replays identically and fails with the diff otherwise; the cassette replays from
/// another working directory (its config's paths are the recorded folder's).
#[test]
fn seam_test_replays_a_cassette_as_one_of_its_checks() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = config(dir.path(), "forty-two");
    let cassette = dir.path().join("lookup.json");
    record(&state, &config, "what is it?", &cassette);
    let mock = seam_tests::guest("mock_provider");
    let test = |cassette: &Path| {
        let out = seam(&state)
            .current_dir(dir.path())
            .args([
                "test",
                mock.to_str().unwrap(),
                "--config",
                r#"{"name": "x"}"#,
                "--replay",
                cassette.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        (out.status.code(), seam_tests::text(&out.stdout))
    };
    let (code, out) = test(&cassette);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("[  ok] replay: identical: 4 model steps"),
        "{out}"
    );
    let other = dir.path().join("other.json");
    changed(&cassette, &other, |c| {
        c["prompts"][0] = "what was it?".into()
    });
    let (code, out) = test(&other);
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains("[FAIL] replay: diverged at `root`, model step 1"),
        "{out}"
    );
}

/// A fan-out of background children, each asking a tool, read back as they finish: each child
/// replays from its own entries whatever order they run and finish in.
#[test]
fn a_fan_out_of_background_children_replays_identically_a_hundred_times() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let start = dig_in_background;
    let output = |n: u32| {
        format!("{{ name = \"subagent_output\", arguments = {{ id = \"spawn-{n}\", timeout_ms = 600000 }} }}")
    };
    let text = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "fanning out", tool_calls = [{s1}, {s2}, {s3}] }},
    {{ text = "reading", tool_calls = [{o1}, {o2}, {o3}] }},
    {{ text = "all: {{tool_results}}" }},
]

[models.scripts.child]
steps = [
    {{ text = "child asks", tool_calls = [{{ name = "lookup", arguments = {{ description = "d", prompt = "{{prompt}}" }} }}] }},
    {{ text = "child read: {{tool_results}}" }},
]
{plugins}{output}"#,
        s1 = start(1),
        s2 = start(2),
        s3 = start(3),
        o1 = output(1),
        o2 = output(2),
        o3 = output(3),
        plugins = tree_plugins("fact about {prompt}", ", runInBackground = true"),
        output = control("output", "output"),
    );
    let config = dir.path().join("fan.toml");
    std::fs::write(&config, text).unwrap();
    let cassette = dir.path().join("fan.json");
    let session = record(&state, &config, "go", &cassette)["session"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 0..100 {
        let target = if i % 2 == 0 {
            cassette.to_str().unwrap()
        } else {
            session.as_str()
        };
        let (code, report) = replay_json(&state, target, &[]);
        assert_eq!(code, Some(0), "replay {i}: {report}");
        assert_eq!(report["identical"], true, "replay {i}: {report}");
        assert_eq!(
            report["steps"], 9,
            "three of the lead, two for each child: {report}"
        );
    }
}

/// Background children that report to their parent mid-run (`next-step`): which of the
/// parent's steps reads which report depends on timing, so the recording keeps it, and every
/// replay tells each step the same reports.
#[test]
fn reports_from_background_children_reach_the_same_steps_on_every_replay() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let guest = |name: &str| seam_tests::guest(name).display().to_string();
    let start = dig_in_background;
    let output = |n: u32| {
        format!("{{ text = \"reading {n}: {{user_messages}}\", tool_calls = [{{ name = \"subagent_output\", arguments = {{ id = \"spawn-{n}\", timeout_ms = 600000 }} }}] }}")
    };
    let text = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "fanning out", tool_calls = [{s1}, {s2}] }},
    {o1},
    {o2},
    {{ text = "all: {{tool_results}}" }},
]

[models.scripts.child]
steps = [
    {{ text = "reporting", tool_calls = [{{ name = "report", arguments = {{ message = "halfway through {{prompt}}", mode = "next-step" }} }}] }},
    {{ text = "done with {{prompt}}" }},
]

[[plugin]]
id = "spawn"
component = "{spawn}"

[[plugin]]
id = "dig"
component = "{tool}"
config = {{ provider = "spawn", toolName = "dig", agentOptions = {{ model = "scripted:child" }}, runInBackground = true }}

[[plugin]]
id = "output"
component = "{control}"
config = {{ action = "output" }}

[[plugin]]
id = "report"
component = "{control}"
config = {{ action = "report" }}
"#,
        s1 = start(1),
        s2 = start(2),
        o1 = output(1),
        o2 = output(2),
        tool = guest("subagent_tool"),
        spawn = guest("spawn_provider"),
        control = guest("subagent_control"),
    );
    let config = dir.path().join("reports.toml");
    std::fs::write(&config, text).unwrap();
    let cassette = dir.path().join("reports.json");
    record(&state, &config, "go", &cassette);
    for i in 0..100 {
        let (code, report) = replay_json(&state, cassette.to_str().unwrap(), &[]);
        assert_eq!(code, Some(0), "replay {i}: {report}");
        assert_eq!(report["identical"], true, "replay {i}: {report}");
    }
}
