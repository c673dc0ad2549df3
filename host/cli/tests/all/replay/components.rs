//! Components replay deterministically through the real `seam` binary: a provider's `wasi:http`
//! responses are recorded and played back with the server gone, its `wasi:random` and wall
//! clock give the same values, a changed recording is reported where it matters, and an entry
//! with `config.record = false` stays live and is named as not replayed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{chat_server, record, replay_json, seam_out};

/// The lead asks `ask` (the HTTP agent provider behind the subagent tool) and `dice` (the
/// hostile provider saying what `wasi:random` and the wall clock gave it), then repeats what
/// both answered: a replay that gives either a different answer diverges at the lead's second
/// step.
fn config(dir: &Path, url: &str, web_extra: &str) -> PathBuf {
    let guest = |name: &str| seam_tests::guest(name).display().to_string();
    let origin = url.trim_end_matches("/v1");
    let text = format!(
        r#"
[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "asking", tool_calls = [
        {{ name = "ask", arguments = {{ description = "d", prompt = "the fact" }} }},
        {{ name = "dice", arguments = {{ description = "d", prompt = "roll" }} }},
    ] }},
    {{ text = "read: {{tool_results}}" }},
]

[[plugin]]
id = "web"
component = "{http}"
config = {{ name = "web", endpoint = "{url}", model = "m", stream = false{web_extra} }}
[plugin.grants]
http = ["{origin}"]

[[plugin]]
id = "ask"
component = "{tool}"
config = {{ provider = "web", toolName = "ask" }}

[[plugin]]
id = "dice-provider"
component = "{hostile}"
config = {{ name = "dice", mode = "clock-random" }}

[[plugin]]
id = "dice"
component = "{tool}"
config = {{ provider = "dice", toolName = "dice" }}
"#,
        http = guest("http_agent_provider"),
        tool = guest("subagent_tool"),
        hostile = guest("hostile_provider"),
    );
    let path = dir.join("components.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The cassette at `path` with `change` applied to the body of its first entry of `kind` that
/// `pick` accepts (given the entry), written to `to`; returns that entry's key.
fn changed(
    path: &Path,
    to: &Path,
    kind: &str,
    pick: impl Fn(&Value) -> bool,
    change: impl FnOnce(&mut Value),
) -> String {
    let mut key = String::new();
    super::changed(path, to, |cassette| {
        let entry = cassette["entries"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|e| e["kind"] == kind && pick(e))
            .unwrap_or_else(|| panic!("no {kind} entry to change"));
        change(&mut entry["body"]);
        key = entry["key"].as_str().unwrap().to_string();
    });
    key
}

/// `seam replay TARGET --json`: its exit code and report.
fn replay(state: &Path, target: &Path) -> (Option<i32>, Value) {
    replay_json(state, target.to_str().unwrap(), &[])
}

#[test]
fn components_replay_their_http_clock_and_random_with_the_server_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (mut server, url) = chat_server();
    let config = config(dir.path(), &url, "");
    let cassette = dir.path().join("components.json");
    let run = record(&state, &config, "go", &cassette);
    let answer = run["output"].to_string();
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(answer.contains("answer to: the fact"), "{answer}");
    assert!(answer.contains("random "), "{answer}");

    // The web run's response and the dice run's seed and clock are on the tape.
    let recorded = read(&cassette);
    let entries = recorded["entries"].as_array().unwrap();
    let http: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "http").collect();
    assert_eq!(http.len(), 1, "{http:?}");
    assert_eq!(http[0]["body"]["method"], "POST");
    assert_eq!(http[0]["body"]["uri"], format!("{url}/chat/completions"));
    assert_eq!(http[0]["body"]["status"], 200);
    let seeds = entries.iter().filter(|e| e["kind"] == "seed").count();
    assert!(
        seeds >= 4,
        "a seed per store (two runs, two tool calls): {entries:?}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["kind"] == "seed" && e["key"].as_str().unwrap().ends_with(".tool")),
        "a tool call's store is keyed by its call: {entries:?}"
    );

    // With the server gone, the same answers: the HTTP response, the random numbers and the
    // clock come from the recording. Three times, from the file and from the session store.
    let session = PathBuf::from(run["session"].as_str().unwrap());
    for i in 0..3 {
        let target = if i == 1 { &session } else { &cassette };
        let (code, report) = replay(&state, target);
        assert_eq!(code, Some(0), "replay {i}: {report}");
        assert_eq!(report["identical"], true, "replay {i}: {report}");
        assert_eq!(report["steps"], 2, "replay {i}: {report}");
    }

    // Another recorded body: the web run answers otherwise, which the lead's second request
    // shows.
    let other = dir.path().join("body.json");
    changed(
        &cassette,
        &other,
        "http",
        |_| true,
        |body| {
            let text = body["body"]
                .as_str()
                .unwrap()
                .replace("answer to: the fact", "answer to: another fact");
            body["body"] = text.into();
        },
    );
    let (code, report) = replay(&state, &other);
    assert_eq!(code, Some(2), "{report}");
    let d = &report["divergence"];
    assert_eq!(
        (d["key"].as_str(), d["kind"].as_str(), d["step"].as_u64()),
        (Some("root"), Some("model"), Some(2)),
        "{d}"
    );
    assert!(d["now"].as_str().unwrap().contains("another fact"), "{d}");

    // Another recorded URI: the component's request is not the recorded one; the divergence
    // is the web run's, in words.
    let other = dir.path().join("uri.json");
    let key = changed(
        &cassette,
        &other,
        "http",
        |_| true,
        |body| body["uri"] = format!("{url}/elsewhere").into(),
    );
    let (code, report) = replay(&state, &other);
    assert_eq!(code, Some(2), "{report}");
    let d = &report["divergence"];
    assert_eq!(
        (d["key"].as_str(), d["kind"].as_str(), d["step"].as_u64()),
        (Some(key.as_str()), Some("http"), Some(1)),
        "{d}"
    );
    assert_eq!(
        d["what"],
        format!(
            "the component sent POST {url}/chat/completions, the recording has POST \
             {url}/elsewhere"
        ),
        "{d}"
    );

    // Another seed for the dice run: other random numbers, seen at the lead's second step.
    let other = dir.path().join("seed.json");
    changed(
        &cassette,
        &other,
        "seed",
        |e| e["body"]["plugin"] == "dice-provider",
        |body| body["seed"] = format!("{:032x}", 42).into(),
    );
    let (code, report) = replay(&state, &other);
    assert_eq!(code, Some(2), "{report}");
    let d = &report["divergence"];
    assert_eq!(
        (d["key"].as_str(), d["kind"].as_str()),
        (Some("root"), Some("model")),
        "{d}"
    );
    assert!(d["what"].is_string(), "{d}");

    // Another recorded clock read for the dice run: another clock in its answer.
    let dice = entries
        .iter()
        .find(|e| e["kind"] == "seed" && e["body"]["plugin"] == "dice-provider")
        .map(|e| e["key"].clone())
        .unwrap();
    let other = dir.path().join("clock.json");
    changed(
        &cassette,
        &other,
        "seed",
        |e| e["key"] == dice && e["body"].get("seed").is_none(),
        |body| body["wall"] = serde_json::json!([1, 0]),
    );
    let (code, report) = replay(&state, &other);
    assert_eq!(code, Some(2), "{report}");
    assert_eq!(report["divergence"]["key"], "root", "{report}");
}

#[test]
fn an_entry_with_record_false_stays_live_and_is_named_as_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (mut server, url) = chat_server();
    let config = config(dir.path(), &url, ", record = false");
    let cassette = dir.path().join("live.json");
    record(&state, &config, "go", &cassette);
    let recorded = read(&cassette);
    let entries = recorded["entries"].as_array().unwrap();
    assert!(
        !entries.iter().any(|e| e["kind"] == "http"),
        "nothing of `web` is recorded: {entries:?}"
    );
    assert!(
        !entries.iter().any(|e| e["body"]["plugin"] == "web"),
        "{entries:?}"
    );
    let gaps = recorded["gaps"].to_string();
    assert!(gaps.contains("plugin `web`"), "{gaps}");

    // The server is still there: the live request gets the same answer.
    let (code, report) = replay(&state, &cassette);
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["identical"], true, "{report}");
    let gaps = report["gaps"].as_array().unwrap();
    assert!(
        gaps.iter().any(|g| g
            .as_str()
            .unwrap()
            .contains("plugin `web`: its entry says `config.record = false`")),
        "{gaps:?}"
    );
}

#[test]
fn config_record_must_be_true_or_false() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\nid = \"p\"\ncomponent = \"{}\"\nconfig = {{ record = \"no\" }}\n",
            seam_tests::guest("mock_provider").display()
        ),
    )
    .unwrap();
    let (code, _, err) = seam_out(
        &dir.path().join("state"),
        &["check", config.to_str().unwrap()],
    );
    assert_ne!(code, Some(0));
    assert!(
        err.contains("key `config.record` must be true or false"),
        "{err}"
    );
}
