//! Approvals through the real `seam` binary: a request answered by `seam approvals` from
//! another process on the same store, one left pending by `kill -9` and answered before the
//! session is continued, and a headless run denied at once with its diagnostic.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `seam` with the test cache, and a state folder of the test's own.
fn seam(state: &Path) -> Command {
    let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    command.env("XDG_STATE_HOME", state);
    command
}

/// The lead calls `secret` (a mock behind the subagent tool, `approve = "ask"`), then says what
/// it read; the store is `sessions.db` next to the config.
fn config(dir: &Path, name: &str, approvals: &str) -> PathBuf {
    let guest = |name: &str| seam_tests::guest(name).display().to_string();
    let text = format!(
        r#"
[agent]
model = "scripted:lead"

[sessions]
store = "sqlite:sessions.db"

[approvals]
{approvals}

[models.scripts.lead]
steps = [
    {{ text = "asking", tool_calls = [{{ name = "secret", arguments = {{ description = "d", prompt = "open" }} }}] }},
    {{ text = "read: {{tool_results}}" }},
]

[[plugin]]
id = "vault"
component = "{mock}"
config = {{ name = "vault", reply = "the secret" }}

[[plugin]]
id = "secret"
component = "{tool}"
config = {{ provider = "vault", toolName = "secret", approve = "ask" }}
"#,
        mock = guest("mock_provider"),
        tool = guest("subagent_tool"),
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts `seam run CONFIG go --events --json` (plus `extra`), and waits for its
/// `approval/requested` event; returns the process, the request's id and the event lines' feed.
// The caller waits for (or kills) the process it is given.
#[allow(clippy::zombie_processes)]
fn run_until_asked(
    state: &Path,
    config: &Path,
    extra: &[&str],
) -> (Child, String, std::sync::mpsc::Receiver<String>) {
    let mut child = seam(state)
        .args(["run", config.to_str().unwrap(), "go", "--events", "--json"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = seam_tests::lines_of(child.stderr.take().unwrap());
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(120))
            .expect("seam run asks for approval");
        if line.contains("\"event\":\"approval/requested\"") {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let id = v["id"].as_str().unwrap().to_string();
            return (child, id, lines);
        }
    }
}

/// Runs `seam ARGS`; returns its exit code, stdout and stderr.
fn seam_out(state: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    seam_tests::outcome(seam(state).args(args))
}

#[test]
fn a_request_is_answered_by_seam_approvals_from_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = config(dir.path(), "wait.toml", "from_store = true");
    let cfg = config.to_str().unwrap();
    let (mut child, id, lines) = run_until_asked(&state, &config, &["--tree"]);

    let (code, out, err) = seam_out(&state, &["approvals", "list", "--config", cfg]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&id) && out.contains("pending"), "{out}");
    assert!(out.contains("call tool `secret`"), "{out}");

    let (code, out, err) = seam_out(&state, &["approvals", "allow", &id, "--config", cfg]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("allowed by seam approvals"), "{out}");
    // A second answer is refused, naming the first.
    let (code, _, err) = seam_out(&state, &["approvals", "deny", &id, "--config", cfg]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already answered: allowed"), "{err}");

    let status = child.wait().unwrap();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "{stdout}");
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        answer["output"]
            .as_str()
            .unwrap()
            .contains("read: the secret"),
        "{answer}"
    );
    // Read to the end: the reader stops when the process's stderr closes.
    let rest: Vec<String> = lines.iter().collect();
    let resolved: Vec<&String> = rest
        .iter()
        .filter(|l| l.contains("\"event\":\"approval/resolved\""))
        .collect();
    let tree = rest
        .iter()
        .find(|l| l.contains("? approval"))
        .unwrap_or_else(|| panic!("--tree shows the request: {rest:#?}"));
    assert!(
        tree.contains(&id)
            && tree.contains("call tool `secret`")
            && tree.contains("allowed by seam approvals"),
        "{tree}"
    );
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert!(
        resolved[0].contains("\"by\":\"seam approvals\""),
        "{resolved:?}"
    );
    assert!(resolved[0].contains("\"allowed\":true"), "{resolved:?}");

    let (_, out, _) = seam_out(&state, &["approvals", "list", "--all", "--config", cfg]);
    assert!(out.contains("allowed by seam approvals"), "{out}");
    let session = answer["session"].as_str().unwrap_or_default().to_string();
    let (code, out, err) = seam_out(&state, &["sessions", "tree", &session, "--config", cfg]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("approvals:") && out.contains(&id), "{out}");
    let (code, _, err) = seam_out(&state, &["approvals", "allow", "nope", "--config", cfg]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no request for approval `nope`"), "{err}");
}

#[test]
fn a_request_left_pending_by_kill_9_is_answered_and_taken_up_by_session() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let waiting = config(dir.path(), "wait.toml", "from_store = true");
    // The continuing process has no one to ask: it takes the kept answer or is denied.
    let headless = config(dir.path(), "headless.toml", "");
    let cfg = waiting.to_str().unwrap();
    let (mut child, id, _) = run_until_asked(&state, &waiting, &[]);
    child.kill().unwrap();
    child.wait().unwrap();

    let (_, out, _) = seam_out(&state, &["approvals", "list", "--json", "--config", cfg]);
    let pending: Vec<serde_json::Value> = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(pending.len(), 1, "{out}");
    assert_eq!(pending[0]["id"], id.as_str());
    assert_eq!(pending[0]["status"], "pending");
    let session = pending[0]["root"].as_str().unwrap().to_string();

    let (code, _, err) = seam_out(
        &state,
        &["approvals", "allow", &id, "--always", "--config", cfg],
    );
    assert_eq!(code, Some(0), "{err}");

    let (code, out, err) = seam_out(
        &state,
        &[
            "run",
            headless.to_str().unwrap(),
            "go",
            "--session",
            &session,
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        answer["output"]
            .as_str()
            .unwrap()
            .contains("read: the secret"),
        "the kept answer was not taken up: {answer}"
    );
    let (_, out, _) = seam_out(
        &state,
        &["approvals", "list", "--json", "--all", "--config", cfg],
    );
    let all: Vec<serde_json::Value> = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(all.len(), 1, "the same request, not a second one: {out}");
    assert_eq!(all[0]["delivered"], true);
}

#[test]
fn a_headless_run_is_denied_at_once_with_how_to_allow_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let headless = config(dir.path(), "headless.toml", "");
    let (code, out, err) = seam_out(
        &state,
        &[
            "run",
            headless.to_str().unwrap(),
            "go",
            "--json",
            "--events",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let output = answer["output"].as_str().unwrap();
    assert!(output.contains("denied by nobody"), "{output}");
    assert!(
        output.contains("set `approve = \"allow\"` in the `config` of plugin `secret`"),
        "{output}"
    );
    assert!(output.contains("from_store = true"), "{output}");
    assert!(
        !err.contains("\"event\":\"subagent/start\""),
        "the tool ran: {err}"
    );
    assert!(err.contains("\"by\":\"nobody\""), "{err}");
}

/// On a terminal, `seam run` asks: the question names the request and what it asks, and a `y`
/// typed there lets the call go (run under `script`, which gives it a terminal).
#[test]
fn a_person_at_the_terminal_answers_the_question() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = config(dir.path(), "tty.toml", "");
    let line = format!(
        "{} run {} go --json",
        env!("CARGO_BIN_EXE_seam"),
        config.display()
    );
    // `seam`'s own environment (test cache, state folder), for `script` to pass on.
    let env = seam(&state);
    let mut script = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .envs(
            env.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .current_dir(env.get_current_dir().unwrap_or(dir.path()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Typed ahead: the terminal keeps the line until the question reads it.
    std::io::Write::write_all(script.stdin.as_mut().unwrap(), b"y\n").unwrap();
    let out = script.wait_with_output().unwrap();
    let text = seam_tests::text(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("wants to call tool `secret`"), "{text}");
    assert!(text.contains("allow? [y]es, [n]o, [a]lways"), "{text}");
    assert!(text.contains("read: the secret"), "{text}");
}
