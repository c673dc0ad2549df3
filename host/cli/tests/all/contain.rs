//! CONTRACT section 10: no process a provider started outlives the `seam` command, whatever
//! ends it. The agent (`tests/fixtures/acp_stubborn.py`, the official ACP Python SDK) ignores
//! stdin closing and SIGTERM and leaves a `setsid` grandchild and a double-forked daemon; after
//! the command exits, /proc shows none of the three, not even as a zombie.
//!
//! Also: a command's background runs end, with their end events, before it exits; `--json`
//! answers carry the diagnostic; agents start with only descriptors 0-2.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use seam_tests::{left_behind, still_in_proc, stubborn_agent};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn seam() -> Command {
    seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
}

/// Reads `lines` until one contains `needle`; returns everything read.
fn wait_for(lines: &Receiver<String>, needle: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => {
                let found = line.contains(needle);
                seen.push(line);
                if found {
                    return seen;
                }
            }
            Err(e) => panic!("no line with `{needle}` ({e}); saw:\n{seen:#?}"),
        }
    }
}

/// A config with the stubborn agent as provider `agent` (`extra` goes in its entry).
fn config(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("seam.toml");
    std::fs::write(
        &path,
        format!(
            "[[plugin]]\nid = \"agent\"\nkind = \"acp\"\ncommand = [\"{}\", \"{}\"]\n{extra}\n",
            seam_tests::acp_python().display(),
            stubborn_agent().display()
        ),
    )
    .unwrap();
    path
}

/// `seam delegate` on the agent with `prompt`, events on stderr.
fn delegate(config: &Path, prompt: &str) -> (Child, Receiver<String>) {
    let mut child = seam()
        .args(["delegate", config.to_str().unwrap(), "--provider", "agent"])
        .args(["--prompt", prompt, "--events"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = seam_tests::lines_of(child.stderr.take().unwrap());
    (child, err)
}

/// The agent's "spawned" chunk, as a `subagent/progress` event: its pid file is written.
const SPAWNED: &str = r#""value":"spawned""#;

/// Waits for `child` (bounded), and says what of the agent's tree /proc still shows.
fn exit_and_census(mut child: Child, pidfile: &Path) -> (Option<i32>, Vec<String>, Duration) {
    let start = Instant::now();
    let status = child.wait().unwrap();
    let took = start.elapsed();
    let pids = left_behind(pidfile);
    assert_eq!(pids.len(), 3, "{pids:?}");
    (status.code(), still_in_proc(&pids), took)
}

fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[test]
fn a_signal_to_seam_delegate_ends_the_agents_whole_tree() {
    for (name, code) in [("INT", 130), ("TERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pids");
        let config = config(dir.path(), "");
        let (child, err) = delegate(&config, &format!("spawn {} hang", pidfile.display()));
        wait_for(&err, SPAWNED);
        assert_eq!(still_in_proc(&left_behind(&pidfile)).len(), 3);
        signal(&child, name);
        let (status, left, took) = exit_and_census(child, &pidfile);
        eprintln!("SIG{name}: seam exited {took:?} after the signal");
        assert_eq!(status, Some(code), "SIG{name}");
        assert_eq!(left, Vec::<String>::new(), "SIG{name}: left running");
    }
}

#[test]
fn a_run_timeout_ends_the_agents_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    // Long enough for Python to start under load; the test waits on the chunk, not the clock.
    let config = config(dir.path(), "limits = { run_timeout_ms = 6000 }");
    let (child, err) = delegate(&config, &format!("spawn {} hang", pidfile.display()));
    wait_for(&err, SPAWNED);
    let ended = wait_for(&err, "subagent/end");
    let (status, left, _) = exit_and_census(child, &pidfile);
    assert!(
        ended.last().unwrap().contains("run_timeout_ms") || ended.last().unwrap().contains("time"),
        "{ended:?}"
    );
    assert_eq!(status, Some(2), "{ended:?}");
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn a_normal_end_ends_what_the_agent_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let config = config(dir.path(), "");
    let (child, err) = delegate(&config, &format!("spawn {} end", pidfile.display()));
    wait_for(&err, SPAWNED);
    let (status, left, _) = exit_and_census(child, &pidfile);
    assert_eq!(status, Some(0));
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn seam_acp_ends_the_tree_when_its_stdin_closes_mid_turn() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let prompt = format!("spawn {} hang", pidfile.display());
    let config = config(
        dir.path(),
        &format!(
            "\n[[plugin]]\nid = \"ask\"\ncomponent = \"{}\"\nconfig = {{ provider = \"agent\", toolName = \"ask\" }}\n\n\
             [agent]\nmodel = \"scripted:lead\"\n\n\
             [models.scripts.lead]\nsteps = [ {{ tool_calls = [ {{ name = \"ask\", arguments = {{ description = \"d\", prompt = \"{prompt}\" }} }} ] }} ]\n",
            seam_tests::guest("subagent_tool").display()
        ),
    );
    let mut child = seam()
        .args(["acp", config.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let out = seam_tests::lines_of(child.stdout.take().unwrap());
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    send(r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#);
    let seen = wait_for(&out, r#""id":2"#);
    let answer: serde_json::Value = serde_json::from_str(seen.last().unwrap()).unwrap();
    let session = answer["result"]["sessionId"].as_str().unwrap().to_string();
    send(&format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"go"}}]}}}}"#
    ));
    // The delegation's progress: the agent has spawned what it leaves behind.
    wait_for(&out, "spawned");
    drop(stdin);
    let (status, left, took) = exit_and_census(child, &pidfile);
    eprintln!("seam acp exited {took:?} after its stdin closed");
    assert_eq!(status, Some(0));
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn an_agent_starts_with_only_descriptors_0_to_2() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(
        dir.path(),
        &format!(
            "\n[[plugin]]\nid = \"ask\"\ncomponent = \"{}\"\nconfig = {{ provider = \"agent\", toolName = \"ask\" }}\n\n\
             [agent]\nmodel = \"scripted:lead\"\n\n\
             [models.scripts.lead]\nsteps = [ {{ tool_calls = [ {{ name = \"ask\", arguments = {{ description = \"d\", prompt = \"fds\" }} }} ] }}, {{ text = \"{{tool_results}}\" }} ]\n",
            seam_tests::guest("subagent_tool").display()
        ),
    );
    // `seam run` with descriptor 7 open and inheritable, as a careless parent leaves one.
    let out = Command::new("sh")
        .args(["-c", r#"exec 7</etc/hostname; exec "$@""#, "sh"])
        .arg(env!("CARGO_BIN_EXE_seam"))
        .args(["run", config.to_str().unwrap(), "go", "--json"])
        .current_dir(root())
        .env(
            "SEAM_CACHE_DIR",
            root().join("target").join("seam-test-cache"),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["output"], "0,1,2", "{answer}\n{stderr}");
}

#[test]
fn seam_call_ends_a_background_run_with_its_end_event_before_it_exits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bg.toml");
    std::fs::write(
        &path,
        format!(
            "[models.scripts.slow]\nsteps = [ {{ text = \"late\", delay_ms = 600000 }} ]\n\n\
             [[plugin]]\nid = \"spawn\"\ncomponent = \"{}\"\n\n\
             [[plugin]]\nid = \"ask\"\ncomponent = \"{}\"\nconfig = {{ provider = \"spawn\", toolName = \"ask\", runInBackground = true, agentOptions = {{ model = \"scripted:slow\" }} }}\n",
            seam_tests::guest("spawn_provider").display(),
            seam_tests::guest("subagent_tool").display()
        ),
    )
    .unwrap();
    let out = seam()
        .args(["call", path.to_str().unwrap(), "--tool", "ask", "--events"])
        .args([
            "--args",
            r#"{"description":"d","prompt":"p","run_in_background":true}"#,
        ])
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{events}");
    let starts = events.matches(r#""event":"subagent/start""#).count();
    let ends = events.matches(r#""event":"subagent/end""#).count();
    assert_eq!((starts, ends), (1, 1), "{events}");
    assert!(
        events.contains(r#""stop-reason":"aborted""#),
        "the run was ended, not finished: {events}"
    );
}

#[test]
fn seam_run_json_carries_the_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fail.toml");
    std::fs::write(
        &path,
        "[agent]\nmodel = \"scripted:lead\"\n\n[models.scripts.lead]\nsteps = [ { error = \"the provider is down\" } ]\n",
    )
    .unwrap();
    let out = seam()
        .args(["run", path.to_str().unwrap(), "go", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["stop-reason"], "error");
    let why = answer["diagnostic"].as_str().unwrap_or_default();
    assert!(why.contains("the provider is down"), "{answer}");

    // A run that succeeds has no diagnostic key.
    std::fs::write(
        &path,
        "[agent]\nmodel = \"scripted:lead\"\n\n[models.scripts.lead]\nsteps = [ { text = \"fine\" } ]\n",
    )
    .unwrap();
    let out = seam()
        .args(["run", path.to_str().unwrap(), "go", "--json"])
        .output()
        .unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["output"], "fine");
    assert!(answer.get("diagnostic").is_none(), "{answer}");
}
