//! The cluster through real processes: a `nats-server` (pinned, on a loopback port it picks),
//! `seam worker` processes, and front-ends (`seam run`, `seam delegate`) that load no provider
//! of their own. Workers are killed, drained and cut off while runs go; each run ends, and ends
//! as the docs say.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use seam_tests::nats::NatsServer;

/// Heartbeat of the test workers: three missed and a front-end counts a worker gone.
const BEAT_MS: &str = "200";

/// How long a test waits for a line it expects before it fails (a bound on a broken test).
const PATIENCE: Duration = Duration::from_secs(60);

fn seam() -> Command {
    seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
}

/// A worker config serving `researcher`, whose answer names the worker.
fn worker_config(dir: &Path, id: &str, extra: &str) -> PathBuf {
    let path = dir.join(format!("{id}.toml"));
    let text = format!(
        r#"[[plugin]]
id = "researcher"
component = "{mock}"
config = {{ name = "researcher", reply = "{id} answers {{prompt}}"{extra} }}
"#,
        mock = seam_tests::guest("mock_provider").display(),
    );
    std::fs::write(&path, text).expect("the worker's config");
    path
}

/// A front-end config: the subagent tool on `researcher`, which only workers load, and a
/// scripted agent that calls it.
fn front_config(dir: &Path, server: &NatsServer) -> PathBuf {
    let path = dir.join("front.toml");
    let text = format!(
        r#"[cluster]
nats = "{url}"
name = "cli"
heartbeat_ms = {BEAT_MS}

[[plugin]]
id = "research"
component = "{tool}"
config = {{ provider = "researcher", toolName = "research" }}

[agent]
model = "scripted:front"

[models.scripts.front]
steps = [
    {{ tool_calls = [ {{ name = "research", arguments = {{ description = "ask", prompt = "the question" }} }} ] }},
    {{ text = "front-end: {{tool_results}}" }},
]
"#,
        url = server.url,
        tool = seam_tests::guest("subagent_tool").display(),
    );
    std::fs::write(&path, text).expect("the front-end's config");
    path
}

/// A process whose stderr lines are read as they come.
struct Proc {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Proc {
    fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("seam starts");
        let lines = seam_tests::lines_of(child.stderr.take().expect("stderr"));
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stderr line holding `needle`; returns it.
    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {needle:?}; saw:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// Waits for the process to exit, for `bound` at the most (a bound on a hang, not a
    /// timing): its exit code, or a panic with what it printed. The exit is seen as the end of
    /// its stderr (the reader's channel closes), then reaped.
    fn exit_within(&mut self, bound: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!(
                    "still running after {bound:?}; it printed:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
        let status = self.child.wait().expect("the process can be waited on");
        status.code()
    }

    fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill {signal}");
    }

    /// Waits for the process to exit; returns its code, stdout and every stderr line.
    fn finish(mut self) -> (Option<i32>, String, Vec<String>) {
        let status = self.child.wait().expect("it exits");
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            use std::io::Read as _;
            let _ = stdout.read_to_string(&mut out);
        }
        self.seen.extend(self.lines.iter());
        (status.code(), out, std::mem::take(&mut self.seen))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `seam worker` on `config` and waits until it serves (its heartbeat [`BEAT_MS`],
/// unless `extra` sets one).
fn start_worker(server: &NatsServer, config: &Path, id: &str, extra: &[&str]) -> Proc {
    let mut command = seam();
    command
        .env("RUST_LOG", "warn,seam_cluster=info")
        .arg("worker")
        .arg(config)
        .args(["--nats", &server.url, "--cluster", "cli", "--id", id]);
    if !extra.contains(&"--heartbeat-ms") {
        command.args(["--heartbeat-ms", BEAT_MS]);
    }
    command.args(extra);
    let mut worker = Proc::spawn(command);
    worker.wait_for(&format!("worker `{id}` serving researcher"));
    worker
}

fn delegate(config: &Path, prompt: &str) -> Command {
    let mut command = seam();
    command.arg("delegate").arg(config).args([
        "--provider",
        "researcher",
        "--prompt",
        prompt,
        "--events",
    ]);
    command
}

#[test]
fn seam_run_and_delegate_reach_a_provider_only_workers_load() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let workers: Vec<Proc> = ["w1", "w2", "w3"]
        .iter()
        .map(|id| start_worker(&server, &worker_config(dir.path(), id, ""), id, &[]))
        .collect();
    let front = front_config(dir.path(), &server);

    let out = seam()
        .args(["run"])
        .arg(&front)
        .arg("q")
        .output()
        .expect("seam run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        ["w1", "w2", "w3"]
            .iter()
            .any(|w| stdout.contains(&format!("front-end: {w} answers the question"))),
        "{stdout}"
    );

    // Many delegations share the replicas (a queue group): each answer comes from a worker.
    let mut answered_by = std::collections::BTreeSet::new();
    for i in 0..12 {
        let out = delegate(&front, &format!("task {i}"))
            .output()
            .expect("delegate");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let who = stdout.split(' ').next().unwrap_or_default().to_string();
        assert_eq!(stdout.trim(), format!("{who} answers task {i}"));
        answered_by.insert(who);
    }
    assert!(
        answered_by.len() >= 2,
        "every run went to one replica: {answered_by:?}"
    );
    drop(workers);
}

#[test]
fn a_worker_killed_mid_run_ends_the_run_error_naming_it() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = worker_config(dir.path(), "doomed", ", delayMs = 600000");
    let worker = start_worker(&server, &config, "doomed", &[]);
    let front = front_config(dir.path(), &server);
    let mut run = Proc::spawn(delegate(&front, "never answered"));
    run.wait_for("\"subagent/start\"");
    worker.signal("-KILL");
    let (code, stdout, lines) = run.finish();
    assert_eq!(code, Some(2), "{stdout}\n{}", lines.join("\n"));
    let end = lines
        .iter()
        .find(|l| l.contains("\"subagent/end\""))
        .expect("the run's end");
    assert!(end.contains("\"stop-reason\":\"error\""), "{end}");
    assert!(end.contains("worker `doomed` stopped answering"), "{end}");
}

#[test]
fn sigterm_drains_a_worker_its_live_run_finishes_and_its_provider_goes() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = worker_config(dir.path(), "leaving", ", delayMs = 1500");
    let mut worker = start_worker(&server, &config, "leaving", &["--drain-grace-ms", "60000"]);
    let front = front_config(dir.path(), &server);
    let mut run = Proc::spawn(delegate(&front, "finish me"));
    run.wait_for("\"subagent/start\"");
    worker.signal("-TERM");
    worker.wait_for("worker `leaving` draining");
    let (code, stdout, lines) = run.finish();
    assert_eq!(code, Some(0), "{}", lines.join("\n"));
    assert_eq!(stdout.trim(), "leaving answers finish me");
    let (code, _, worker_lines) = worker.finish();
    // Ended by SIGTERM, as every command is (143), once drained.
    assert_eq!(code, Some(143), "{}", worker_lines.join("\n"));
    // Its adverts are withdrawn: a front-end that joins now has no such provider.
    let out = delegate(&front, "too late").output().expect("delegate");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("researcher"), "{stderr}");
}

#[test]
fn the_clients_reconnect_after_the_nats_server_restarts() {
    let mut server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = worker_config(dir.path(), "steady", ", delayMs = 1000");
    let mut worker = start_worker(&server, &config, "steady", &[]);
    let front = front_config(dir.path(), &server);

    // A run going while the server restarts ends, completed or error (as the docs say), and
    // never hangs.
    let mut run = Proc::spawn(delegate(&front, "across the restart"));
    run.wait_for("\"subagent/start\"");
    server.restart();
    worker.wait_for("adverts put again");
    let (code, stdout, lines) = run.finish();
    let end = lines
        .iter()
        .find(|l| l.contains("\"subagent/end\""))
        .unwrap_or_else(|| panic!("no end: {}", lines.join("\n")));
    match code {
        Some(0) => assert_eq!(stdout.trim(), "steady answers across the restart"),
        Some(2) => assert!(end.contains("worker `steady`"), "{end}"),
        other => panic!("exit {other:?}: {}", lines.join("\n")),
    }

    // The same worker process serves a new front-end after the restart.
    let out = delegate(&front, "after").output().expect("delegate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "steady answers after");
    let _ = std::io::stderr().flush();
}

/// A network namespace of this test's own, joined to this one by a veth pair: the host end
/// is `10.213.N.1`, the namespace's `10.213.N.2`. Deleted (with the pair) when dropped.
struct Netns {
    name: String,
    host_end: String,
    host_addr: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("`ip` runs");
    assert!(
        out.status.success(),
        "ip {}: {} (the partition test needs root and network namespaces, as CI has)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    fn new() -> Self {
        let n = std::process::id() % 250 + 1;
        let name = format!("seam-part-{}", std::process::id());
        let (host_end, ns_end) = (format!("sph{n}"), format!("spw{n}"));
        let (host_addr, ns_addr) = (format!("10.213.{n}.1"), format!("10.213.{n}.2"));
        ip(&["netns", "add", &name]);
        let ns = Self {
            name,
            host_end,
            host_addr,
        };
        ip(&[
            "link",
            "add",
            &ns.host_end,
            "type",
            "veth",
            "peer",
            "name",
            &ns_end,
        ]);
        ip(&["link", "set", &ns_end, "netns", &ns.name]);
        ip(&[
            "addr",
            "add",
            &format!("{}/30", ns.host_addr),
            "dev",
            &ns.host_end,
        ]);
        ip(&["link", "set", &ns.host_end, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &ns.name, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{ns_addr}/30"), "dev", &ns_end]);
        inside(&["link", "set", &ns_end, "up"]);
        inside(&["link", "set", "lo", "up"]);
        ns
    }

    /// Cuts the link: nothing passes between the namespace and this one.
    fn partition(&self) {
        ip(&["link", "set", &self.host_end, "down"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_end])
            .status();
    }
}

#[test]
fn a_partition_between_front_end_and_worker_ends_the_run_error_naming_the_worker() {
    let ns = Netns::new();
    let server = NatsServer::start_on(&ns.host_addr, "");
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = worker_config(dir.path(), "far", ", delayMs = 600000");
    // The worker runs in the namespace, reaching the server over the veth pair.
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &ns.name])
        .arg(env!("CARGO_BIN_EXE_seam"))
        .current_dir(seam_tests::guest_dir())
        .env("SEAM_CACHE_DIR", root().join("target/seam-test-cache"))
        .env("RUST_LOG", "warn,seam_cluster=info")
        .arg("worker")
        .arg(&config)
        .args(["--nats", &server.url, "--cluster", "cli", "--id", "far"])
        .args(["--heartbeat-ms", BEAT_MS]);
    let mut worker = Proc::spawn(command);
    worker.wait_for("worker `far` serving researcher");
    let front = front_config(dir.path(), &server);
    let mut run = Proc::spawn(delegate(&front, "across the cut"));
    run.wait_for("\"subagent/start\"");
    ns.partition();
    let (code, stdout, lines) = run.finish();
    assert_eq!(code, Some(2), "{stdout}\n{}", lines.join("\n"));
    let end = lines
        .iter()
        .find(|l| l.contains("\"subagent/end\""))
        .expect("the run's end");
    assert!(end.contains("\"stop-reason\":\"error\""), "{end}");
    assert!(end.contains("worker `far` stopped answering"), "{end}");
    // The worker, cut off as long, ends the run its front-end ended.
    worker.wait_for("cut off from the cluster: cancelling the runs its front-ends have ended");
}

/// Runs a client fixture (the official ACP or MCP Python SDK's, in `tests/fixtures/`) with the
/// tests' cache and a state folder in `dir`; returns the JSON it printed.
fn python_client(fixture: &str, args: &[&str], dir: &Path) -> serde_json::Value {
    let out = Command::new(seam_tests::acp_python())
        .arg(root().join("tests/fixtures").join(fixture))
        .args(args)
        .current_dir(root())
        .env("SEAM_CACHE_DIR", root().join("target/seam-test-cache"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .output()
        .expect("the client runs");
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("its JSON")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn seam_acp_serves_an_agent_that_delegates_to_the_cluster() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let _worker = start_worker(&server, &worker_config(dir.path(), "w1", ""), "w1", &[]);
    let front = front_config(dir.path(), &server);
    // The official ACP Python SDK's client drives `seam acp` on the front-end's config.
    let out = python_client(
        "acp_client.py",
        &[
            env!("CARGO_BIN_EXE_seam"),
            front.to_str().expect("utf-8"),
            "prompt",
            "q",
        ],
        dir.path(),
    );
    assert_eq!(out["stopReason"], "end_turn", "{out}");
    let updates = out["updates"].as_array().expect("updates");
    assert!(
        updates.iter().any(|u| u["sessionUpdate"] == "tool_call"
            && u["title"]
                .as_str()
                .is_some_and(|t| t.contains("`researcher`"))),
        "{out}"
    );
    let last = updates.last().expect("an answer");
    assert!(
        last["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("front-end: w1 answers the question")),
        "{last}"
    );
}

#[test]
fn seam_mcp_serves_a_background_delegation_to_the_cluster_and_its_control_tool_reads_it() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let _worker = start_worker(&server, &worker_config(dir.path(), "w1", ""), "w1", &[]);
    // The subagent tool runs in the background on the worker-only provider; a control tool
    // reads the run in a later call.
    let front = dir.path().join("mcp-front.toml");
    std::fs::write(
        &front,
        format!(
            r#"[cluster]
nats = "{url}"
name = "cli"

[[plugin]]
id = "research"
component = "{tool}"
config = {{ provider = "researcher", toolName = "research", runInBackground = true }}

[[plugin]]
id = "subagent-output"
component = "{control}"
config = {{ action = "output" }}
"#,
            url = server.url,
            tool = seam_tests::guest("subagent_tool").display(),
            control = seam_tests::guest("subagent_control").display(),
        ),
    )
    .expect("the config");
    // The official MCP Python SDK's client drives `seam mcp` on it.
    let out = python_client(
        "mcp_client.py",
        &[
            "background",
            env!("CARGO_BIN_EXE_seam"),
            front.to_str().expect("utf-8"),
        ],
        dir.path(),
    );
    assert!(
        out["started"]
            .as_str()
            .is_some_and(|s| s.starts_with("started background run")),
        "{out}"
    );
    assert_eq!(out["isError"], false, "{out}");
    assert!(
        out["output"]
            .as_str()
            .is_some_and(|s| s.contains("w1 answers How?")),
        "{out}"
    );
}

/// A front-end config whose sessions are kept in the cluster's JetStream: the continuation
/// config (a background child on the local `spawn`, running `researcher`, woken by the
/// follow-up script).
fn store_config(dir: &Path, server: &NatsServer, name: &str, researcher: &str) -> PathBuf {
    let preamble = format!(
        "[cluster]\nnats = \"{url}\"\nname = \"cli\"\nheartbeat_ms = {BEAT_MS}\n\n[sessions]\nstore = \"nats\"",
        url = server.url
    );
    let path = dir.join(name);
    std::fs::write(
        &path,
        seam_tests::continuation_config(&preamble, researcher),
    )
    .expect("the front-end's config");
    path
}

/// `seam sessions ARGS --config CONFIG --json`, parsed.
fn sessions_json(config: &Path, args: &[&str]) -> serde_json::Value {
    let out = seam()
        .arg("sessions")
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--json")
        .output()
        .expect("seam sessions runs");
    let text = seam_tests::text(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        seam_tests::text(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `[sessions] store = "nats"`: a background child started through one front-end, which is
/// then killed with SIGKILL, is listed and read by a second front-end without being resumed,
/// reads as interrupted once the first one's lease runs out, and is continued by a third from
/// its stored session, which every message reached in order.
#[test]
fn a_background_run_of_a_front_end_that_died_is_listed_read_and_continued_from_another() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let slow = store_config(
        dir.path(),
        &server,
        "slow.toml",
        r#"{ text = "never in time", delay_ms = 600000 }"#,
    );
    let quick = store_config(
        dir.path(),
        &server,
        "quick.toml",
        r#"{ text = "picked up: {prompt}" }"#,
    );
    let mut first = {
        let mut command = seam();
        command.arg("run").arg(&slow).args(["go", "--events"]);
        Proc::spawn(command)
    };
    // The lead's turn, then the child's: the child is running its (endless) model call.
    first.wait_for("\"event\":\"agent/turn-start\"");
    first.wait_for("\"event\":\"agent/turn-start\"");
    first.signal("-KILL");
    let (code, _, _) = first.finish();
    assert_eq!(code, None, "killed by a signal");

    let listed = sessions_json(&quick, &["list"]);
    let rows = listed.as_array().expect("a listing");
    assert_eq!(rows.len(), 1, "{listed}");
    let session = rows[0]["id"].as_str().expect("an id").to_string();

    // Interrupted once the dead front-end's lease (three of its heartbeats) has run out. A lease
    // lapses with time, not with anything a process sends (the process is dead): polled, with a
    // deadline.
    let deadline = std::time::Instant::now() + PATIENCE;
    let run = loop {
        let tree = sessions_json(&quick, &["tree", &session]);
        let run = tree["runs"][0].clone();
        if run["status"] == "interrupted" {
            break run;
        }
        assert_eq!(run["status"], "running", "{tree}");
        assert!(
            std::time::Instant::now() < deadline,
            "never interrupted: {tree}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        run["diagnostic"]
            .as_str()
            .is_some_and(|d| d.contains("process running it ended")),
        "{run}"
    );
    let child = run["session"]
        .as_str()
        .expect("the child's session was linked before the kill")
        .to_string();
    let events = sessions_json(&quick, &["show", &child]);
    assert!(events.to_string().contains("dig"), "{events}");

    let out = seam()
        .arg("run")
        .arg(&quick)
        .args([
            "--session",
            &session,
            "--model",
            "scripted:followup",
            "again",
        ])
        .output()
        .expect("seam run runs");
    let (stdout, stderr) = (seam_tests::text(&out.stdout), seam_tests::text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("picked up") && stdout.contains("wrap up"),
        "{stdout}\n{stderr}"
    );
    let tree = sessions_json(&quick, &["tree", &session]);
    let runs = tree["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "two activations: {tree}");
    assert_eq!(runs[1]["session"], child.as_str(), "{tree}");
    assert_eq!(runs[1]["stop-reason"], "completed", "{tree}");
    let said = sessions_json(&quick, &["show", &child]).to_string();
    let (dig, wrap) = (said.find("dig"), said.find("wrap up"));
    assert!(
        dig.is_some() && wrap.is_some() && dig < wrap,
        "every message reached the child, in order: {said}"
    );
}

/// Traces cross the cluster: a front-end's run on a provider only a worker loads, both
/// exporting to one OTLP receiver, is one trace, the worker's run span under the front-end's.
#[test]
fn a_remote_run_continues_the_front_ends_trace_on_the_worker() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let receiver = seam_tests::otlp::OtlpReceiver::start(&dir.path().join("spans.jsonl"));
    let config = worker_config(dir.path(), "w1", "");
    let mut command = seam();
    command
        .env("RUST_LOG", "warn,seam_cluster=info")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_SERVICE_NAME", "worker")
        .arg("worker")
        .arg(&config)
        .args(["--nats", &server.url, "--cluster", "cli", "--id", "w1"])
        .args(["--heartbeat-ms", BEAT_MS]);
    let mut worker = Proc::spawn(command);
    worker.wait_for("worker `w1` serving researcher");
    let front = front_config(dir.path(), &server);
    let out = seam()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_SERVICE_NAME", "front")
        .arg("run")
        .arg(&front)
        .arg("go")
        .output()
        .expect("seam run runs");
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    // The worker exports what it has when it exits (drained: 128 + SIGTERM).
    worker.signal("-TERM");
    let (code, _, lines) = worker.finish();
    assert_eq!(code, Some(143), "{lines:#?}");

    let spans = receiver.lines();
    let run_of = |service: &str| {
        spans
            .iter()
            .find(|s| {
                s["service"] == service
                    && s["name"] == "subagent.run"
                    && s["attributes"]["seam.run.id"]
                        .as_str()
                        .is_some_and(|id| id.starts_with("researcher"))
            })
            .unwrap_or_else(|| panic!("no {service} run span: {spans:#?}"))
    };
    let (front_run, worker_run) = (run_of("front"), run_of("worker"));
    assert_eq!(worker_run["trace-id"], front_run["trace-id"], "one trace");
    assert_eq!(
        worker_run["parent-span-id"], front_run["span-id"],
        "the worker's run lies under the front-end's"
    );
    assert_eq!(worker_run["attributes"]["seam.stop_reason"], "completed");
}

/// `GET path` on `addr` (HTTP/1.0, so the server closes when done); the body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(addr).expect("the metrics server accepts");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("a request");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("a reply");
    let (head, body) = reply.split_once("\r\n\r\n").expect("headers and a body");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    body.to_string()
}

/// `seam worker --metrics ADDR` serves its runs' counters as Prometheus text.
#[test]
fn a_worker_serves_its_metrics_as_prometheus_text() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = worker_config(dir.path(), "w1", "");
    let worker = start_worker(&server, &config, "w1", &["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&worker);
    let front = front_config(dir.path(), &server);
    for _ in 0..2 {
        let out = seam()
            .arg("run")
            .arg(&front)
            .arg("go")
            .output()
            .expect("seam run");
        assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    }
    let text = http_get(&addr, "/metrics");
    assert!(
        text.contains("seam_runs_started_total{provider=\"researcher\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("seam_runs_ended_total{provider=\"researcher\",stop_reason=\"completed\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("seam_run_duration_seconds_count{provider=\"researcher\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("seam_plugin_host_memory_bytes{plugin=\"researcher\"}"),
        "{text}"
    );
    assert!(text.contains("seam_live_runs "), "{text}");
    assert!(
        text.trim_end().ends_with("# EOF"),
        "OpenMetrics text: {text}"
    );
}

/// The address of a worker started with `--metrics 127.0.0.1:0`: printed before it serves, so
/// among the lines `start_worker` read.
fn metrics_addr(worker: &Proc) -> String {
    let line = worker
        .seen
        .iter()
        .find(|l| l.contains("metrics on http://"))
        .expect("the metrics address");
    line.split("http://")
        .nth(1)
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("the address")
        .to_string()
}

/// The value of the sample `name` (with its labels, if any) in Prometheus text.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Reads a worker's metrics until `done` holds (a run's end on a worker is seen nowhere else:
/// polled, with [`PATIENCE`] as the bound on a hang); returns the text that satisfied it.
fn metrics_until(addr: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let text = http_get(addr, "/metrics");
        if done(&text) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {PATIENCE:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const LIVE: &str = "seam_live_runs";
const ABORTED: &str = "seam_runs_ended_total{provider=\"researcher\",stop_reason=\"aborted\"}";
const COMPLETED: &str = "seam_runs_ended_total{provider=\"researcher\",stop_reason=\"completed\"}";

/// A worker serving a long run, with its metrics: the worker and their address.
fn long_run_worker(server: &NatsServer, dir: &Path, id: &str, extra: &[&str]) -> (Proc, String) {
    let config = worker_config(dir, id, ", delayMs = 600000");
    let mut args = vec!["--metrics", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let worker = start_worker(server, &config, id, &args);
    let addr = metrics_addr(&worker);
    (worker, addr)
}

/// A front-end killed mid-run (SIGKILL: it sends neither cancel nor dispose) leaves nothing
/// live on the worker: its leases stop, and the worker cancels the run: ended `aborted`,
/// never `completed`.
#[test]
fn a_worker_cancels_the_run_of_a_front_end_killed_mid_run() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let (mut worker, addr) = long_run_worker(&server, dir.path(), "keeper", &[]);
    let front = front_config(dir.path(), &server);
    let mut run = Proc::spawn(delegate(&front, "nobody waits"));
    run.wait_for("\"subagent/start\"");
    metrics_until(&addr, "the worker holds the run", |t| {
        sample(t, LIVE) == Some(1.0)
    });
    run.signal("-KILL");
    let (code, _, _) = run.finish();
    assert_eq!(code, None, "killed by a signal");

    let text = metrics_until(&addr, "the orphaned run ends on the worker", |t| {
        sample(t, LIVE) == Some(0.0)
    });
    assert_eq!(sample(&text, ABORTED), Some(1.0), "{text}");
    assert_eq!(sample(&text, COMPLETED), None, "{text}");
    worker.wait_for("its front-end's lease ran out");
}

/// The NATS server killed (SIGKILL) mid-run, and the front-end gone while it is down (killed
/// too: its goodbye, had it said one, had no broker to reach the worker), then the server
/// started again. The worker, back before it counted itself cut off (its heartbeat is long
/// enough for that), still ends the run: its front-end's leases stopped. Nothing is left live,
/// nothing is counted completed.
#[test]
fn a_worker_ends_the_run_of_a_front_end_gone_while_the_server_was_down() {
    let mut server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let (mut worker, addr) =
        long_run_worker(&server, dir.path(), "stranded", &["--heartbeat-ms", "1000"]);
    let front = front_config(dir.path(), &server);
    let mut run = Proc::spawn(delegate(&front, "across the outage"));
    run.wait_for("\"subagent/start\"");
    metrics_until(&addr, "the worker holds the run", |t| {
        sample(t, LIVE) == Some(1.0)
    });
    server.stop();
    run.signal("-KILL");
    let (code, _, _) = run.finish();
    assert_eq!(code, None, "killed by a signal");
    server.restart();
    worker.wait_for("adverts put again");

    let text = metrics_until(&addr, "the abandoned run ends on the worker", |t| {
        sample(t, LIVE) == Some(0.0)
    });
    worker.wait_for("its front-end's lease ran out");
    assert_eq!(sample(&text, COMPLETED), None, "{text}");
    assert_eq!(sample(&text, ABORTED), Some(1.0), "{text}");
}

/// SIGTERM while the NATS server is down: the worker drains within its grace all the same
/// (its live run cancelled, nothing waiting on the broker past the grace) and exits 143.
#[test]
fn a_worker_drains_within_its_grace_while_the_server_is_down() {
    let mut server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = worker_config(dir.path(), "unreached", ", delayMs = 600000");
    let mut worker = start_worker(&server, &config, "unreached", &["--drain-grace-ms", "2000"]);
    let front = front_config(dir.path(), &server);
    let mut run = Proc::spawn(delegate(&front, "cut short"));
    run.wait_for("\"subagent/start\"");
    server.stop();
    worker.signal("-TERM");
    worker.wait_for("worker `unreached` draining");
    // Well above the grace: a bound on a hang, not a timing.
    let code = worker.exit_within(Duration::from_secs(30));
    assert_eq!(code, Some(143), "{}", worker.seen.join("\n"));
    // Drained, not cut short some other way.
    assert!(
        worker
            .seen
            .iter()
            .any(|l| l.contains("seam_cluster::worker: drained")),
        "{}",
        worker.seen.join("\n")
    );
    drop(run);
}

/// The first error code (`UPPER_CASE:`) in a command's stderr.
fn error_code(stderr: &str) -> Option<&str> {
    stderr.split_whitespace().find_map(|word| {
        let code = word.strip_suffix(':')?;
        (code.len() > 2 && code.chars().all(|c| c.is_ascii_uppercase() || c == '_')).then_some(code)
    })
}

/// A start a worker's own registry refuses (its `[agent] max_depth` is 0) fails on the
/// front-end with the code the same config gives locally, not a generic `START_FAILED`.
#[test]
fn a_start_a_worker_refuses_fails_with_the_code_a_local_start_gives() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = worker_config(dir.path(), "shallow", "");
    let mut text = std::fs::read_to_string(&config).expect("the worker's config");
    text.push_str("\n[agent]\nmax_depth = 0\n");
    std::fs::write(&config, text).expect("the worker's config");
    let _worker = start_worker(&server, &config, "shallow", &[]);

    let local = seam()
        .arg("delegate")
        .arg(&config)
        .args(["--provider", "researcher", "--prompt", "q"])
        .output()
        .expect("delegate");
    let local_err = seam_tests::text(&local.stderr);
    assert!(!local.status.success(), "{local_err}");
    assert_eq!(
        error_code(&local_err),
        Some("DEPTH_EXCEEDED"),
        "{local_err}"
    );

    let front = front_config(dir.path(), &server);
    let remote = delegate(&front, "q").output().expect("delegate");
    let remote_err = seam_tests::text(&remote.stderr);
    assert!(!remote.status.success(), "{remote_err}");
    assert_eq!(
        error_code(&remote_err),
        error_code(&local_err),
        "local:\n{local_err}\nremote:\n{remote_err}"
    );
    assert!(
        remote_err.contains("a child at depth 1 exceeds max-depth 0"),
        "{remote_err}"
    );
}
