//! `kind = "a2a"` entries against an agent written with the official A2A Python SDK
//! (`tests/fixtures/a2a_agent.py`, `a2a-sdk` installed by `make setup-kit`): its card checked at
//! load, a task streamed as a run (progress, answer, stop reasons), cancel as `CancelTask`, a
//! steer as a follow-up message in the task, an agent that dies mid-task, an answer past
//! `max_output_bytes`, credentials from a granted variable, a task followed again by a later
//! Seam process, and a recorded run replayed with the agent gone.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::{a2a_python, root};
use std::process::{Child, Command, Stdio};

/// The fixture agent on a free loopback port, logging each request it takes.
struct Agent {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Agent {
    fn start(dir: &Path, args: &[&str]) -> Self {
        let log = dir.join(format!("agent-{}.log", args.join("-").replace('/', "_")));
        let mut child = Command::new(a2a_python())
            .arg(root().join("tests/fixtures/a2a_agent.py"))
            .args(["--port", "0", "--log"])
            .arg(&log)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the A2A fixture agent starts");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the agent said {line:?}"))
            .trim_end_matches('/')
            .to_string();
        Self { child, url, log }
    }

    /// The origin, for `grants.http`.
    fn origin(&self) -> &str {
        &self.url
    }

    /// The requests it took, as `METHOD TASK VERSION` lines.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn count(&self, method: &str) -> usize {
        self.requests()
            .iter()
            .filter(|l| l.split(' ').next() == Some(method))
            .count()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn seam(state: &Path) -> Command {
    let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    command.env("XDG_STATE_HOME", state);
    command
}

/// An entry `agent` for the fixture at `url`, with `extra` lines in its table.
fn entry(url: &str, extra: &str) -> String {
    format!(
        "[[plugin]]\nid = \"agent\"\nkind = \"a2a\"\nurl = \"{url}\"\ngrants = {{ http = [\"{url}\"] }}\n{extra}\n"
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `seam delegate` on the entry: exit code, stdout, stderr (with events).
fn delegate(dir: &Path, config: &Path, prompt: &str) -> (Option<i32>, String, String) {
    seam_tests::outcome(seam(&dir.join("state")).arg("delegate").arg(config).args([
        "--provider",
        "agent",
        "--prompt",
        prompt,
        "--events",
    ]))
}

/// The `subagent/end` event's JSON line of `err`.
fn end_event(err: &str) -> serde_json::Value {
    let line = err
        .lines()
        .find(|l| l.contains("\"subagent/end\""))
        .unwrap_or_else(|| panic!("no subagent/end in:\n{err}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn a_task_streams_as_a_run_with_its_progress_answer_and_stop_reason() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let config = write(dir.path(), "a2a.toml", &entry(agent.origin(), ""));
    // `seam check` says what the card said.
    let (code, out, err) =
        seam_tests::outcome(seam(&dir.path().join("state")).arg("check").arg(&config));
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains("A2A agent") && out.contains("`fixture-agent`, streams, skills: echo, slow"),
        "{out}"
    );

    let (code, out, err) = delegate(dir.path(), &config, "hello there");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("a2a says: hello there"), "{out}\n{err}");
    // The status message is the run's progress, before its end.
    let progress = err.find("thinking").expect(&err);
    assert!(progress < err.find("\"subagent/end\"").unwrap(), "{err}");
    assert_eq!(end_event(&err)["stop-reason"], "completed", "{err}");
    // One message, sent once, with A2A 1.0's header; the card fetched at load.
    let sent: Vec<String> = agent
        .requests()
        .into_iter()
        .filter(|l| l.starts_with("SendStreamingMessage"))
        .collect();
    assert_eq!(sent.len(), 1, "{:?}", agent.requests());
    assert!(sent[0].ends_with(" 1.0"), "{sent:?}");

    // Appended artifact chunks make one answer.
    let (code, out, err) = delegate(dir.path(), &config, "chunks please");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("one two three"), "{out}\n{err}");
    // A direct message answers without a task.
    let (code, out, err) = delegate(dir.path(), &config, "message me");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("direct: message me"), "{out}\n{err}");
}

#[test]
fn terminal_states_map_to_stop_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let config = write(dir.path(), "a2a.toml", &entry(agent.origin(), ""));
    for (prompt, stop, said) in [
        ("fail please", "error", "it broke"),
        ("reject this", "refusal", "not doing that"),
        ("ask me", "input-required", "Which colour?"),
    ] {
        let (_, out, err) = delegate(dir.path(), &config, prompt);
        let end = end_event(&err);
        assert_eq!(end["stop-reason"], stop, "{prompt}: {err}");
        assert!(
            out.contains(said) || end.to_string().contains(said),
            "{prompt}: {out}\n{err}"
        );
    }
}

#[test]
fn cards_seam_cannot_honour_fail_the_load_naming_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    for (card, says) in [
        ("v03", "JSONRPC 0.3"),
        ("no-jsonrpc", "no A2A 1.0 JSON-RPC interface"),
        ("not-json", "is not an A2A Agent Card"),
    ] {
        let agent = Agent::start(dir.path(), &["--card", card]);
        let config = write(
            dir.path(),
            &format!("{card}.toml"),
            &entry(agent.origin(), ""),
        );
        let (code, out, err) =
            seam_tests::outcome(seam(&dir.path().join("state")).arg("check").arg(&config));
        assert_ne!(code, Some(0), "{card}: {out}\n{err}");
        let said = format!("{out}{err}");
        assert!(
            said.contains("agent") && said.contains(says),
            "{card}: {said}"
        );
        assert_eq!(agent.count("SendStreamingMessage"), 0);
    }
    // An entry whose URL is not granted is refused before anything is fetched.
    let config = write(
        dir.path(),
        "ungranted.toml",
        "[[plugin]]\nid = \"agent\"\nkind = \"a2a\"\nurl = \"http://127.0.0.1:9\"\n",
    );
    let (code, out, err) =
        seam_tests::outcome(seam(&dir.path().join("state")).arg("check").arg(&config));
    assert_ne!(code, Some(0));
    assert!(
        format!("{out}{err}").contains("grants.http"),
        "{out}\n{err}"
    );
}

#[test]
fn credentials_come_from_a_granted_variable() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &["--token", "s3cret"]);
    let with = entry(
        agent.origin(),
        "grants.env = [\"AGENT_AUTH\"]\nconfig = { headers = { Authorization = \"AGENT_AUTH\" } }",
    );
    let with = with.replace(
        &format!("grants = {{ http = [\"{}\"] }}\n", agent.origin()),
        &format!("grants.http = [\"{}\"]\n", agent.origin()),
    );
    let config = write(dir.path(), "auth.toml", &with);
    let (code, out, err) = seam_tests::outcome(
        seam(&dir.path().join("state"))
            .env("AGENT_AUTH", "Bearer s3cret")
            .arg("delegate")
            .arg(&config)
            .args(["--provider", "agent", "--prompt", "hi"]),
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("a2a says: hi"), "{out}\n{err}");
    // Without it the card is refused, and the load says so.
    let config = write(dir.path(), "noauth.toml", &entry(agent.origin(), ""));
    let (code, out, err) =
        seam_tests::outcome(seam(&dir.path().join("state")).arg("check").arg(&config));
    assert_ne!(code, Some(0));
    assert!(format!("{out}{err}").contains("401"), "{out}\n{err}");
}

#[test]
fn an_answer_past_max_output_bytes_fails_the_run_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let config = write(
        dir.path(),
        "small.toml",
        &entry(agent.origin(), "limits = { max_output_bytes = 4096 }"),
    );
    let (code, out, err) = delegate(dir.path(), &config, "big 100000");
    assert_ne!(code, Some(0), "{out}\n{err}");
    let end = end_event(&err);
    assert_eq!(end["stop-reason"], "error", "{err}");
    assert!(end.to_string().contains("max_output_bytes"), "{end}");
    assert!(
        !out.contains("xxxxxxxx"),
        "nothing of the answer is printed"
    );
}

#[test]
fn an_agent_that_dies_mid_task_fails_the_run_after_following_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let config = write(
        dir.path(),
        "die.toml",
        &entry(agent.origin(), "config = { reconnects = 2 }"),
    );
    let (code, out, err) = delegate(dir.path(), &config, "die now");
    assert_ne!(code, Some(0), "{out}\n{err}");
    let end = end_event(&err);
    assert_eq!(end["stop-reason"], "error", "{err}");
    let said = end.to_string();
    assert!(
        said.contains("A2A agent `agent`")
            && said.contains("dropped")
            && said.contains("2 retries"),
        "{said}"
    );
    assert!(
        err.contains("about to die"),
        "its progress came first: {err}"
    );
    assert_eq!(agent.count("SendStreamingMessage"), 1, "never sent twice");
}

/// A lead that starts the agent's `slow` task in the background, steers it, and reads it.
fn steering_config(agent: &Agent, store: &str) -> String {
    let tool = seam_tests::guest("subagent_tool").display().to_string();
    let control = seam_tests::guest("subagent_control").display().to_string();
    format!(
        r#"{store}
[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "start it", tool_calls = [
        {{ name = "remote", arguments = {{ description = "d", prompt = "slow please", run_in_background = true }} }},
    ] }},
    {{ text = "steer it", tool_calls = [{{ name = "subagent_send", arguments = {{ id = "agent-1", message = "turn left" }} }}] }},
    {{ text = "read it", tool_calls = [{{ name = "subagent_output", arguments = {{ id = "agent-1", timeout_ms = 60000 }} }}] }},
    {{ text = "{{tool_results}}" }},
]

[models.scripts.later]
steps = [
    {{ text = "wake it", tool_calls = [{{ name = "send_message", arguments = {{ id = "agent-1", message = "turn right" }} }}] }},
    {{ text = "read it", tool_calls = [{{ name = "subagent_output", arguments = {{ id = "agent-1", timeout_ms = 60000 }} }}] }},
    {{ text = "{{tool_results}}" }},
]

{entry}
[[plugin]]
id = "remote"
component = "{tool}"
config = {{ provider = "agent", toolName = "remote", runInBackground = true }}

[[plugin]]
id = "send-message"
component = "{control}"
config = {{ action = "send_message" }}

[[plugin]]
id = "subagent-send"
component = "{control}"
config = {{ action = "send" }}

[[plugin]]
id = "subagent-output"
component = "{control}"
config = {{ action = "output" }}
"#,
        entry = entry(agent.origin(), ""),
    )
}

#[test]
fn a_steer_is_a_follow_up_message_in_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let config = write(dir.path(), "steer.toml", &steering_config(&agent, ""));
    let (code, out, err) = seam_tests::outcome(
        seam(&dir.path().join("state"))
            .arg("run")
            .arg(&config)
            .arg("go"),
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("steered: turn left"), "{out}\n{err}");
    let requests = agent.requests();
    let task = requests
        .iter()
        .find(|l| l.starts_with("SendMessage "))
        .expect("the steer went as SendMessage")
        .split(' ')
        .nth(1)
        .unwrap()
        .to_string();
    assert_ne!(task, "-", "the follow-up names the task: {requests:?}");
}

#[test]
fn cancel_sends_cancel_task_and_the_run_ends_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let config = write(dir.path(), "a2a.toml", &entry(agent.origin(), ""));
    let mut child = seam(&dir.path().join("state"))
        .arg("delegate")
        .arg(&config)
        .args(["--provider", "agent", "--prompt", "slow please", "--events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = seam_tests::lines_of(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    // Interrupted once the task is working (its progress printed).
    for line in lines.iter() {
        let working = line.contains("working on it");
        seen.push(line);
        if working {
            break;
        }
    }
    // SIGINT, as Ctrl-C: `seam delegate` cancels its run.
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    seen.extend(lines.iter());
    let status = child.wait().unwrap();
    let err = seen.join("\n");
    assert!(!status.success(), "{err}");
    assert_eq!(end_event(&err)["stop-reason"], "aborted", "{err}");
    assert_eq!(agent.count("CancelTask"), 1, "{:?}", agent.requests());
}

/// A background task left running by a process that let go of it is followed again by a later
/// process: `GetTask` finds it working, the new message joins it, `SubscribeToTask` follows it;
/// the first message was sent once.
#[test]
fn a_later_process_follows_the_same_task() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let config = write(
        dir.path(),
        "later.toml",
        &steering_config(&agent, "[sessions]\nstore = \"sqlite:sessions.db\"\n"),
    )
    .to_str()
    .unwrap()
    .to_string();
    // The lead's first step only: the run is let go of while the task waits.
    let first = config.replace("later.toml", "first.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("model = \"scripted:lead\"", "model = \"scripted:first\"")
        .replace(
            "[models.scripts.later]",
            "[models.scripts.first]\nsteps = [\n    { text = \"start it\", tool_calls = [\n        { name = \"remote\", arguments = { description = \"d\", prompt = \"slow please\", run_in_background = true } },\n    ] },\n    { text = \"left it\" },\n]\n\n[models.scripts.later]",
        );
    std::fs::write(&first, text).unwrap();
    let state = dir.path().join("state");
    // Ctrl-C once the task is working (its progress printed) leaves the child interrupted.
    let mut child = seam(&state)
        .args(["run", &first, "go", "--json", "--events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = seam_tests::lines_of(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    for line in lines.iter() {
        let working = line.contains("working on it");
        seen.push(line);
        if working {
            break;
        }
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    seen.extend(lines.iter());
    child.wait().unwrap();
    let err = seen.join("\n");
    assert!(err.contains("left interrupted"), "{err}");
    let session = serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(agent.count("SendStreamingMessage"), 1);

    let (code, out, err) = seam_tests::outcome(seam(&state).args([
        "run",
        &config,
        "--session",
        &session,
        "--model",
        "scripted:later",
        "again",
    ]));
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains("steered: turn right"),
        "{out}\n{err}\n{:?}",
        agent.requests()
    );
    assert_eq!(
        agent.count("SendStreamingMessage"),
        1,
        "{:?}",
        agent.requests()
    );
    assert!(
        agent.count("GetTask") >= 1 && agent.count("SubscribeToTask") >= 1,
        "{:?}",
        agent.requests()
    );
}

#[test]
fn a_recorded_run_replays_with_the_agent_gone() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let tool = seam_tests::guest("subagent_tool").display().to_string();
    let lead = format!(
        r#"[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "ask it", tool_calls = [{{ name = "remote", arguments = {{ description = "d", prompt = "hello" }} }}] }},
    {{ text = "{{tool_results}}" }},
]

{entry}
[[plugin]]
id = "remote"
component = "{tool}"
config = {{ provider = "agent", toolName = "remote" }}
"#,
        entry = entry(agent.origin(), ""),
    );
    let config = write(dir.path(), "rec.toml", &lead);
    let cassette = dir.path().join("run.cassette");
    let (code, out, err) = seam_tests::outcome(
        seam(&dir.path().join("state"))
            .arg("run")
            .arg(&config)
            .arg("go")
            .arg("--record")
            .arg(&cassette),
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("a2a says: hello"), "{out}\n{err}");
    drop(agent);
    let (code, out, err) = seam_tests::outcome(
        seam(&dir.path().join("state"))
            .arg("replay")
            .arg(&cassette)
            .arg("--config")
            .arg(&config),
    );
    assert_eq!(
        code,
        Some(0),
        "the agent's answer comes from the recording: {out}\n{err}"
    );
}

/// A stream that ends while the task goes on (the agent alive) is followed again with
/// `SubscribeToTask`, and the run gets the rest: the message was sent once.
#[test]
fn a_dropped_stream_is_followed_again_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path(), &[]);
    let config = write(dir.path(), "a2a.toml", &entry(agent.origin(), ""));
    let (code, out, err) = delegate(dir.path(), &config, "drop it");
    assert_eq!(code, Some(0), "{out}\n{err}\n{:?}", agent.requests());
    assert!(out.contains("survived the drop"), "{out}\n{err}");
    assert!(err.contains("dropping the stream"), "{err}");
    assert_eq!(
        agent.count("SendStreamingMessage"),
        1,
        "{:?}",
        agent.requests()
    );
    assert_eq!(agent.count("SubscribeToTask"), 1, "{:?}", agent.requests());
}
