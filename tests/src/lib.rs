//! Helpers for the integration tests: paths of the built guest components and a host set up
//! for tests. The guests are built by this crate's build script.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seam_host::{Config, EngineOptions, Event, Host, HostOptions, LoadReport};
use tokio::sync::watch;

pub mod browser;
pub mod nats;
pub mod oci;
pub mod otlp;

/// Paths of the built guest components, one `&str` constant per guest that `build.rs` builds,
/// named after its package in upper case (`my-guest` would give `guests::MY_GUEST`).
/// `build.rs` fails when a guest in its list is named by no test: by its constant, its `.wasm`
/// file name or its quoted crate name (as in [`guest`]'s argument). Don't name real guests in
/// comments here: this folder is scanned.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// Folder of the built guest components.
pub fn guest_dir() -> PathBuf {
    PathBuf::from(env!("SEAM_GUEST_DIR"))
}

/// Path of a built guest, by crate name with underscores (`mock_provider`).
pub fn guest(name: &str) -> PathBuf {
    guest_dir().join(format!("{name}.wasm"))
}

/// Host options for tests: a shared compile cache under `target/`, a small pool, a short grace.
pub fn test_options() -> HostOptions {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("seam-test-cache");
    HostOptions {
        engine: EngineOptions {
            cache_dir: Some(cache),
            pool_instances: 1100,
            ..EngineOptions::default()
        },
        cancel_grace: Duration::from_millis(100),
        ..HostOptions::default()
    }
}

/// A fresh host for one test.
pub fn test_host() -> Host {
    Host::new(test_options()).expect("the test host starts")
}

/// Parses config text; relative component paths resolve against the guest folder, so entries can
/// say `component = "mock_provider.wasm"`.
pub fn config(text: &str) -> Config {
    Config::parse(text, Path::new("test.toml"), &guest_dir()).expect("test config parses")
}

/// Records every event the host emits.
pub fn record(host: &Host) -> Arc<Mutex<Vec<Event>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    host.events().subscribe(move |e| {
        sink.lock().unwrap().push(e);
        Ok(())
    });
    seen
}

/// Names of the recorded events, in order.
pub fn names(seen: &Arc<Mutex<Vec<Event>>>) -> Vec<&'static str> {
    seen.lock().unwrap().iter().map(Event::name).collect()
}

/// A `[[plugin]]` entry for a component with an inline config table.
pub fn entry(id: &str, component: &str, config: &str) -> String {
    format!(
        "[[plugin]]\nid = \"{id}\"\ncomponent = \"{component}.wasm\"\nconfig = {{ {config} }}\n\n"
    )
}

/// A mock provider entry named like its id, with extra config.
pub fn mock(id: &str, extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { ", " };
    entry(id, "mock_provider", &format!("name = \"{id}\"{sep}{extra}"))
}

/// Asserts that every entry of a load or reconfigure succeeded, printing each failure (file,
/// entry and cause) otherwise; returns the report.
#[track_caller]
pub fn loaded(report: LoadReport) -> LoadReport {
    assert!(
        report.is_ok(),
        "{} entr{} failed to load:\n{}",
        report.failed.len(),
        if report.failed.len() == 1 { "y" } else { "ies" },
        report.failures()
    );
    report
}

/// A host with `toml` loaded; panics, naming each failure, if any entry failed.
pub async fn host_with(toml: &str) -> Host {
    let host = test_host();
    loaded(host.load(&config(toml)).await);
    host
}

/// A host with `toml` loaded whose cancel grace is [`BARRIER_TIMEOUT`]: a test that tells a
/// cooperative cancel from an enforced one uses it, so that a slow machine cannot turn the
/// child's own answer into an enforced cancel.
pub async fn patient_host_with(toml: &str) -> Host {
    let mut options = test_options();
    options.cancel_grace = BARRIER_TIMEOUT;
    let host = Host::new(options).expect("the test host starts");
    loaded(host.load(&config(toml)).await);
    host
}

/// A top-level request with a text prompt.
pub fn request(prompt: &str) -> seam_host::StartRequest {
    seam_host::StartRequest::new(prompt, seam_host::ParentRef::top_level("parent", "/work"))
}

/// The child's own words, of a run with nothing to diagnose. `answer_text()` shows the
/// diagnostic when the output is empty, so comparing it cannot tell the child's words from
/// the host's; this fails on a diagnostic instead.
#[track_caller]
pub fn words(result: &seam_host::SubagentResult) -> String {
    assert_eq!(
        result.diagnostic, None,
        "the run has a diagnostic: {result:?}"
    );
    result.output_text()
}

/// The diagnostic of a failed or stopped run, which must contain `needle`; the output must not
/// (what the host says of a run is never the child's words).
#[track_caller]
pub fn diagnosed(result: &seam_host::SubagentResult, needle: &str) -> String {
    let diagnostic = result
        .diagnostic
        .clone()
        .unwrap_or_else(|| panic!("no diagnostic: {result:?}"));
    assert!(diagnostic.contains(needle), "{needle:?} in {result:?}");
    assert!(
        !result.output_text().contains(needle),
        "the output holds {needle:?}: {result:?}"
    );
    diagnostic
}

/// How long a barrier waits before the test fails instead of hanging. Generous: it bounds a
/// broken test, it is not a timing assumption.
pub const BARRIER_TIMEOUT: Duration = Duration::from_secs(60);

/// Every event the host emits, as a watch channel: [`wait_for`] on it is a barrier on an event,
/// not a poll.
pub fn watch_events(host: &Host) -> watch::Receiver<Vec<Event>> {
    let (tx, rx) = watch::channel(Vec::new());
    host.events().subscribe(move |e| {
        tx.send_modify(|seen| seen.push(e));
        Ok(())
    });
    rx
}

/// Waits until `cond` holds for the watched value, woken by each change (no polling); fails
/// the test, naming `what`, if it does not happen within [`BARRIER_TIMEOUT`].
pub async fn wait_for<T>(rx: &mut watch::Receiver<T>, what: &str, cond: impl FnMut(&T) -> bool) {
    match tokio::time::timeout(BARRIER_TIMEOUT, rx.wait_for(cond)).await {
        Ok(Ok(_)) => {}
        Ok(Err(_)) => panic!("waiting for {what}: the sender is gone"),
        Err(_) => panic!("waiting for {what}: it did not happen"),
    }
}

/// Waits until `cond` holds, polling, for at most five seconds. Only for conditions no event
/// announces (a count of live instances or runs going down after the thing that held them
/// settled, the process's memory mappings), each use saying why; prefer [`wait_for`] on
/// [`watch_events`], and for agent processes `Host::unload_all`, which returns once every one
/// has been reaped.
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Collects what a `tracing` fmt subscriber writes, for tests that read the host's log. Each
/// write bumps a watch channel, so a test can wait for a line ([`CapturedLog::wait_for`]).
#[derive(Clone)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>, Arc<watch::Sender<u64>>);

impl Default for CapturedLog {
    fn default() -> Self {
        Self(Arc::default(), Arc::new(watch::channel(0).0))
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        self.1.send_modify(|n| *n += 1);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl CapturedLog {
    /// Captures INFO and above on this thread until the guard drops. Use a current-thread
    /// runtime so that every task logs on this thread.
    pub fn start() -> (Self, tracing::subscriber::DefaultGuard) {
        let log = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(log.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        (log, tracing::subscriber::set_default(subscriber))
    }

    /// The captured lines of `plugin` (its `plugin` field) that contain `needle`.
    pub fn of_plugin(&self, plugin: &str, needle: &str) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| {
                l.contains(&format!("plugin={plugin} "))
                    || l.ends_with(&format!("plugin={plugin}"))
                    || l.contains(&format!("plugin=\"{plugin}\""))
            })
            .filter(|l| l.contains(needle))
            .collect()
    }

    /// The captured lines.
    pub fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits until `cond` holds for the captured lines, woken by each write (no polling); fails
    /// the test with the log if it does not happen within [`BARRIER_TIMEOUT`].
    pub async fn wait_for(&self, what: &str, mut cond: impl FnMut(&[String]) -> bool) {
        let mut rx = self.1.subscribe();
        let log = self.clone();
        let waited =
            tokio::time::timeout(BARRIER_TIMEOUT, rx.wait_for(|_| cond(&log.lines()))).await;
        assert!(
            matches!(waited, Ok(Ok(_))),
            "waiting for {what}: it was never logged:\n{}",
            self.lines().join("\n")
        );
    }
}

/// xorshift64*: a small deterministic generator, so that mixed workloads and mutations are the
/// same on every run.
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// The fixture agent that leaves processes behind (`tests/fixtures/acp_stubborn.py`).
pub fn stubborn_agent() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/acp_stubborn.py")
}

/// The pids the stubborn agent wrote to `file` ("agent", "setsid", "daemon"), by role.
pub fn left_behind(file: &std::path::Path) -> Vec<(String, u32)> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("the agent wrote no pid file {}: {e}", file.display()));
    text.lines()
        .filter_map(|l| {
            let (role, pid) = l.split_once(' ')?;
            Some((role.to_string(), pid.parse().ok()?))
        })
        .collect()
}

/// Those of `pids` that /proc still shows, alive or as zombies, with their state.
pub fn still_in_proc(pids: &[(String, u32)]) -> Vec<String> {
    pids.iter()
        .filter_map(|(role, pid)| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat.rsplit_once(") ")?.1.split(' ').next()?.to_string();
            Some(format!("{role} {pid} (state {state})"))
        })
        .collect()
}

/// The Python of the plugin kit's toolchain, with the ACP Python SDK installed by `make
/// setup-kit` (the fixture agents and clients run on it).
pub fn acp_python() -> PathBuf {
    kit_python("acp")
}

/// The Python of the plugin kit's toolchain, which must import `modules` (`"mcp, fastmcp"`):
/// the official SDKs `make setup-kit` installs there, pinned.
pub fn kit_python(modules: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("target/toolchains/python/bin/python");
    let has_sdk = std::process::Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        has_sdk,
        "{} cannot import {modules}: run `make setup-kit`, which installs the pinned SDKs there",
        python.display()
    );
    python
}

/// The `seam` binary at `bin` (a CLI test's `env!("CARGO_BIN_EXE_seam")`), run from the
/// repository's root with the tests' compile cache and, unless the caller sets another, a state
/// folder under `target/` (so `seam run` never writes to the user's). The guests are built.
pub fn seam_command(bin: &str) -> std::process::Command {
    assert!(guest("spawn_provider").is_file());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut command = std::process::Command::new(bin);
    command
        .current_dir(&root)
        .env(
            "SEAM_CACHE_DIR",
            root.join("target").join("seam-test-cache"),
        )
        .env(
            "XDG_STATE_HOME",
            root.join("target").join("seam-test-state"),
        );
    command
}

/// Runs `command` with no stdin; returns its exit code, stdout and stderr as text.
pub fn outcome(command: &mut std::process::Command) -> (Option<i32>, String, String) {
    let out = command
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the command runs");
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Lines a child process prints on `stream`, as they come (a thread reads them).
pub fn lines_of(stream: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stream)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A process's output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The JSON a fixture client printed, after checking that it succeeded (its stderr, or what it
/// printed instead of JSON, is the panic's message otherwise).
pub fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

/// The config of the continuation tests (`host/cli/tests/all/sessions.rs`, `cluster.rs`): after
/// `preamble` (where the sessions are kept), the lead starts `research` (a child on `spawn`,
/// running the script step `researcher`) in the background; the follow-up script wakes it with
/// `send_message` and reads it with `subagent_output`.
pub fn continuation_config(preamble: &str, researcher: &str) -> String {
    let guest = |name: &str| guest(name).display().to_string();
    format!(
        r#"{preamble}

[agent]
model = "scripted:lead"

[models.scripts.lead]
steps = [
    {{ text = "dig in the background", tool_calls = [
        {{ name = "research", arguments = {{ description = "d", prompt = "dig", run_in_background = true }} }},
    ] }},
    {{ text = "left it digging" }},
]

[models.scripts.followup]
steps = [
    {{ text = "wake it", tool_calls = [{{ name = "send_message", arguments = {{ id = "spawn-1", message = "wrap up" }} }}] }},
    {{ text = "read it", tool_calls = [{{ name = "subagent_output", arguments = {{ id = "spawn-1", timeout_ms = 60000 }} }}] }},
    {{ text = "{{tool_results}}" }},
]

[models.scripts.researcher]
steps = [{researcher}]

[[plugin]]
id = "spawn"
component = "{spawn}"

[[plugin]]
id = "research"
component = "{tool}"
config = {{ provider = "spawn", toolName = "research", agentOptions = {{ model = "scripted:researcher" }}, runInBackground = true }}

[[plugin]]
id = "send-message"
component = "{control}"
config = {{ action = "send_message" }}

[[plugin]]
id = "subagent-output"
component = "{control}"
config = {{ action = "output" }}
"#,
        spawn = guest("spawn_provider"),
        tool = guest("subagent_tool"),
        control = guest("subagent_control"),
    )
}

/// A served `seam` process (`seam mcp --http`, `seam a2a`), killed if the test ends before it
/// is stopped (a failed assertion must not leave a server behind).
pub struct Served(pub std::process::Child);

impl Served {
    /// Stops the server as Ctrl-C does (SIGINT) and returns its exit code once it has exited.
    pub fn interrupt(mut self) -> Option<i32> {
        let sent = std::process::Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -INT {}", self.0.id());
        self.0.wait().expect("the server is waited for").code()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` (its stderr piped) and waits for the stderr line that starts with `prefix`
/// (where it says it serves): the process, its stderr's lines, and the rest of that line.
pub fn serve_until(
    mut command: std::process::Command,
    prefix: &str,
) -> (Served, std::sync::mpsc::Receiver<String>, String) {
    let mut seam = Served(
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("seam starts"),
    );
    let lines = lines_of(seam.0.stderr.take().expect("its stderr is piped"));
    let rest = loop {
        let line = lines
            .recv_timeout(BARRIER_TIMEOUT)
            .unwrap_or_else(|_| panic!("seam says `{prefix}`"));
        if let Some(rest) = line.strip_prefix(prefix) {
            break rest.to_string();
        }
    };
    (seam, lines, rest)
}
