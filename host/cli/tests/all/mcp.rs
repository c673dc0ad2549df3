//! `seam mcp`, driven by the official MCP Python SDK (`mcp.Client`, installed by `make
//! setup-kit`) over stdio and streamable HTTP: tools listed with their schemas and the model's
//! wording, a subagent tool called with progress, a failed run as an `isError` result, an
//! unknown tool as a protocol error, a call cancelled with the run under it, and over HTTP the
//! token and the `Origin` check refusing what they should.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The toolchain's Python, which must have the MCP SDK.
fn mcp_python() -> PathBuf {
    seam_tests::kit_python("mcp, fastmcp")
}

/// Six entries: `ask` (a run that reports two progress updates and answers), `wait` (a run
/// that reports progress, then waits until cancelled), `fail` (a provider that refuses to
/// start), each a subagent tool on a mock provider.
fn serve_config(dir: &Path) -> PathBuf {
    let mock = seam_tests::guest("mock_provider");
    let tool = seam_tests::guest("subagent_tool");
    let mut text = String::new();
    for (provider, settings, tool_name) in [
        (
            "mock",
            r#"reply = "answer to {prompt}", progress = ["looking", "found it"]"#,
            "ask",
        ),
        (
            "slow",
            r#"steering = true, progress = ["started"], awaitMessages = 1"#,
            "wait",
        ),
        ("refuse", r#"failBeforeReady = "no child for you""#, "fail"),
    ] {
        text += &format!(
            "[[plugin]]\nid = \"{provider}\"\ncomponent = \"{}\"\nconfig = {{ name = \"{provider}\", {settings} }}\n\n\
             [[plugin]]\nid = \"{tool_name}\"\ncomponent = \"{}\"\nconfig = {{ provider = \"{provider}\", toolName = \"{tool_name}\" }}\n\n",
            mock.display(),
            tool.display()
        );
    }
    let path = dir.join("serve.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn client(args: &[&str]) -> serde_json::Value {
    let out = Command::new(mcp_python())
        .arg(root().join("tests/fixtures/mcp_client.py"))
        .args(args)
        .current_dir(root())
        .env("SEAM_CACHE_DIR", root().join("target/seam-test-cache"))
        .env("XDG_STATE_HOME", root().join("target/seam-test-state"))
        .output()
        .expect("the MCP client runs");
    seam_tests::json_of(&out)
}

/// What every transport must show of the same scenario; `events` is what seam printed.
fn assert_served(out: &serde_json::Value, events: &str) {
    let tools = out["tools"].as_object().unwrap();
    let mut names: Vec<&String> = tools.keys().collect();
    names.sort();
    assert_eq!(names, ["ask", "fail", "wait"], "{out}");
    // The wording and the schema are the subagent tool's own.
    let ask = &tools["ask"];
    assert!(
        ask["description"]
            .as_str()
            .unwrap()
            .starts_with("Delegate a task to a subagent"),
        "{ask}"
    );
    assert_eq!(
        ask["inputSchema"]["required"],
        serde_json::json!(["description", "prompt"])
    );

    assert_eq!(out["ask"]["isError"], false, "{out}");
    assert_eq!(out["ask"]["text"], serde_json::json!(["answer to hello"]));
    let progress: Vec<&str> = out["ask"]["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect();
    assert_eq!(progress, ["looking", "found it"], "{out}");

    assert_eq!(out["fail"]["isError"], true, "{out}");
    assert!(
        out["fail"]["text"][0]
            .as_str()
            .unwrap()
            .contains("no child for you"),
        "{out}"
    );
    assert!(
        out["missing"]["error"]
            .as_str()
            .unwrap()
            .contains("no tool named `no_such_tool`"),
        "{out}"
    );

    // Cancelled after its progress: the run under the call ends aborted, and the server goes
    // on serving.
    assert_eq!(out["wait"]["finished"], false, "{out}");
    assert_eq!(out["wait"]["progress"], serde_json::json!(["started"]));
    let aborted = events.lines().any(|l| {
        l.contains("\"event\":\"subagent/end\"")
            && l.contains("\"provider\":\"slow\"")
            && l.contains("\"stop-reason\":\"aborted\"")
    });
    assert!(aborted, "no aborted end of the `wait` run:\n{events}");
    assert_eq!(out["after_cancel"], serde_json::json!(["answer to again"]));
}

#[test]
fn the_python_sdk_uses_seam_tools_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let config = serve_config(dir.path());
    let events = dir.path().join("stderr.log");
    let out = client(&[
        "stdio",
        env!("CARGO_BIN_EXE_seam"),
        config.to_str().unwrap(),
        events.to_str().unwrap(),
    ]);
    assert_served(&out, &std::fs::read_to_string(&events).unwrap());
}

use seam_tests::Served;

/// `seam mcp CONFIG --http 127.0.0.1:0 ARGS` (with the token `s3cret` in `SEAM_TEST_MCP_TOKEN`
/// for `--token-env`), once it says where it serves: the process, its stderr's lines, and the
/// URL.
fn serve_http(config: &Path, args: &[&str]) -> (Served, std::sync::mpsc::Receiver<String>, String) {
    let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    command
        .args(["mcp", config.to_str().unwrap(), "--http", "127.0.0.1:0"])
        .args(args)
        .env("SEAM_TEST_MCP_TOKEN", "s3cret");
    seam_tests::serve_until(command, "seam mcp: serving on ")
}

/// Stops `seam` as Ctrl-C does; it must exit with 130.
fn interrupt(seam: Served) {
    assert_eq!(seam.interrupt(), Some(130));
}

#[test]
fn the_python_sdk_uses_seam_tools_over_http_with_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = serve_config(dir.path());
    let (seam, lines, url) =
        serve_http(&config, &["--events", "--token-env", "SEAM_TEST_MCP_TOKEN"]);
    let out = client(&["http", &url, "s3cret"]);
    interrupt(seam);
    let mut events = String::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) {
        events += &line;
        events.push('\n');
    }
    assert_served(&out, &events);
    let refused = &out["refused"];
    assert_eq!(refused["no_token"], 401, "{refused}");
    assert_eq!(refused["wrong_token"], 401, "{refused}");
    assert_eq!(refused["foreign_origin"], 403, "{refused}");
    assert_eq!(refused["loopback_origin"], 200, "{refused}");
}

#[test]
fn http_off_loopback_without_a_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = serve_config(dir.path());
    let out = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(["mcp", config.to_str().unwrap(), "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = seam_tests::text(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("--token-env"), "{err}");
}

/// `seam ARGS` with `env`, which must succeed; its stdout.
fn seam_ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = seam_tests::text(&out.stdout);
    assert!(
        out.status.success(),
        "seam {args:?}: {stdout}{}",
        seam_tests::text(&out.stderr)
    );
    stdout
}

/// The FastMCP fixture server, as an entry's `command` (argv as TOML).
fn fixture_command(mode: &str) -> String {
    format!(
        "[\"{}\", \"{}\", \"{mode}\"]",
        mcp_python().display(),
        root().join("tests/fixtures/mcp_server.py").display()
    )
}

/// A scripted lead that first calls `first` (alone, in a step of its own), then `then` (at
/// once), and answers with the results of `then`.
fn lead(first: &str, then: &str) -> String {
    format!(
        "[agent]\nmodel = \"scripted:lead\"\nprompt = \"go\"\n\n\
         [models.scripts.lead]\nsteps = [\n  {{ text = \"first\", tool_calls = [ {first} ] }},\n  \
         {{ text = \"then\", tool_calls = [ {then} ] }},\n  {{ text = \"results:\\n{{tool_results}}\" }},\n]\n\n"
    )
}

#[test]
fn a_seam_agent_calls_a_fastmcp_server_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mount.toml");
    let text = lead(
        // The server exits mid-call: that call fails, and the next reconnects.
        r#"{ name = "fx__die", arguments = {} }"#,
        r#"{ name = "fx__add", arguments = { a = 2, b = 3 } }, { name = "loud", arguments = { text = "hello" } }, { name = "fx__boom", arguments = {} }, { name = "fx__big", arguments = { n = 5000 } }, { name = "fx__where", arguments = {} }"#,
    ) + &format!(
        "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {}\n\
         config = {{ rename = {{ shout = \"loud\" }}, deny = [\"secret\"], max_output_bytes = 1000 }}\n\
         [plugin.grants]\nenv = [\"SEAM_TEST_GRANTED\"]\n",
        fixture_command("stdio")
    );
    std::fs::write(&config, text).unwrap();

    let listed = seam_ok(&["check", config.to_str().unwrap()], &[]);
    for name in ["fx__add", "loud", "fx__boom", "fx__big", "fx__die"] {
        assert!(
            listed.contains(&format!("  {name} ")),
            "{name} not listed:\n{listed}"
        );
    }
    assert!(
        !listed.contains("secret"),
        "a denied tool is listed:\n{listed}"
    );
    assert!(
        !listed.contains("fx__shout"),
        "a renamed tool keeps its name:\n{listed}"
    );

    let run = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(["run", config.to_str().unwrap()])
        .current_dir(dir.path())
        .env("SEAM_TEST_GRANTED", "yes")
        .env("SEAM_TEST_NOT_GRANTED", "no")
        .output()
        .unwrap();
    let out = seam_tests::text(&run.stdout);
    let err = seam_tests::text(&run.stderr);
    assert!(run.status.success(), "{out}{err}");
    assert!(out.contains("\n5\n"), "{out}");
    // The server runs in the parent's working directory, seeing only the granted variables.
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let line = out
        .lines()
        .find(|l| l.starts_with("cwd "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.starts_with(&format!("cwd {} env ", cwd.display())),
        "{line}"
    );
    let names: Vec<&str> = line.rsplit_once(" env ").unwrap().1.split(' ').collect();
    assert!(names.contains(&"SEAM_TEST_GRANTED"), "{line}");
    for hidden in ["SEAM_TEST_NOT_GRANTED", "PATH", "HOME", "SEAM_CACHE_DIR"] {
        assert!(
            !names.contains(&hidden),
            "{hidden} reached the server: {line}"
        );
    }
    assert!(out.contains("HELLO"), "{out}");
    assert!(out.contains("failed on purpose"), "{out}");
    assert!(
        out.contains("tool `fx__big` (MCP entry `fx`): the result of 5000 bytes is more than `config.max_output_bytes` (1000)"),
        "{out}"
    );
}

/// A delegation's `config.scope.tools` narrows the MCP tools below it: the child of a subagent
/// tool whose scope keeps `fx__add` sees and calls only that tool of the server's, a call of
/// another is refused naming the run whose scope removed it and the config line that would
/// allow it, and the lead, above the delegation, still calls the tool its child was refused.
#[test]
fn a_scope_narrows_the_mcp_tools_below_a_delegation() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("scoped.toml");
    let text = format!(
        "[agent]\nmodel = \"scripted:lead\"\nprompt = \"go\"\n\n\
         [models.scripts.lead]\nsteps = [\n  \
         {{ text = \"first\", tool_calls = [ {{ name = \"ask\", arguments = {{ description = \"d\", prompt = \"p\" }} }}, {{ name = \"fx__shout\", arguments = {{ text = \"lead\" }} }} ] }},\n  \
         {{ text = \"results:\\n{{tool_results}}\" }},\n]\n\n\
         [models.scripts.child]\nsteps = [\n  \
         {{ text = \"calling\", tool_calls = [ {{ name = \"fx__add\", arguments = {{ a = 2, b = 3 }} }}, {{ name = \"fx__shout\", arguments = {{ text = \"child\" }} }} ] }},\n  \
         {{ text = \"child sees {{tools}}: {{tool_results}}\" }},\n]\n\n\
         [[plugin]]\nid = \"spawn\"\ncomponent = \"{spawn}\"\n\n\
         [[plugin]]\nid = \"ask\"\ncomponent = \"{tool}\"\n\
         config = {{ provider = \"spawn\", toolName = \"ask\", agentOptions = {{ model = \"scripted:child\" }}, scope = {{ tools = [\"fx__add\"] }} }}\n\n\
         [[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {command}\n",
        spawn = seam_tests::guest("spawn_provider").display(),
        tool = seam_tests::guest("subagent_tool").display(),
        command = fixture_command("stdio"),
    );
    std::fs::write(&config, text).unwrap();
    let out = seam_ok(&["run", config.to_str().unwrap()], &[]);
    // It sees only the tool its scope keeps (not `ask`, nor the server's others), and calls it.
    assert!(out.contains("child sees fx__add: 5\n"), "{out}");
    assert!(
        out.contains("refused: tool `fx__shout` is outside the scope of `spawn-"),
        "{out}"
    );
    assert!(
        out.contains("add \"fx__shout\" (or a pattern matching it) to `tools` in the `config.scope` of the tool entry that delegated to `spawn-"),
        "{out}"
    );
    assert!(!out.contains("CHILD"), "the refused call was made: {out}");
    assert!(out.contains("LEAD"), "the lead keeps the tool: {out}");
}

#[test]
fn a_seam_agent_calls_a_fastmcp_server_over_http_with_a_granted_header() {
    let mut server = Command::new(mcp_python())
        .arg(root().join("tests/fixtures/mcp_server.py"))
        .arg("http")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = seam_tests::lines_of(server.stdout.take().unwrap());
    let port: u16 = lines
        .recv_timeout(seam_tests::BARRIER_TIMEOUT)
        .expect("the fixture says its port")
        .strip_prefix("port ")
        .unwrap()
        .parse()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mount.toml");
    let entry = |grant: &str| {
        lead(
            r#"{ name = "fx__add", arguments = { a = 20, b = 22 } }"#,
            r#"{ name = "fx__whoami", arguments = {} }"#,
        ) + &format!(
            "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
             config = {{ headers = {{ Authorization = \"FX_AUTH\" }} }}\n\
             [plugin.grants]\nenv = [\"FX_AUTH\"]\nhttp = [{grant}]\n"
        )
    };
    std::fs::write(&config, entry(&format!("\"http://127.0.0.1:{port}\""))).unwrap();
    let out = seam_ok(
        &["run", config.to_str().unwrap()],
        &[("FX_AUTH", "Bearer tok-1")],
    );
    assert!(out.contains("Bearer tok-1"), "{out}");

    // Without the origin in `grants.http`, the entry is refused, naming the key.
    std::fs::write(&config, entry("")).unwrap();
    let check = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(["check", config.to_str().unwrap()])
        .env("FX_AUTH", "Bearer tok-1")
        .output()
        .unwrap();
    let err = seam_tests::text(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{err}");
    assert!(err.contains("plugin `fx`: key `grants.http`"), "{err}");
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn bad_mcp_servers_fail_their_entry_and_the_rest_serves() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    let text = format!(
        "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {}\n\n\
         [[plugin]]\nid = \"stuck\"\nkind = \"mcp\"\ncommand = [\"sleep\", \"600\"]\nconfig = {{ init_timeout_ms = 500 }}\n\n\
         [[plugin]]\nid = \"garbage\"\nkind = \"mcp\"\ncommand = [\"echo\", \"this is not JSON-RPC\"]\n\n\
         [[plugin]]\nid = \"many\"\nkind = \"mcp\"\ncommand = {}\nconfig = {{ init_timeout_ms = 120000 }}\n\n\
         [[plugin]]\nid = \"wide\"\nkind = \"mcp\"\ncommand = {}\nconfig = {{ init_timeout_ms = 120000 }}\n\n\
         [[plugin]]\nid = \"dup\"\nkind = \"mcp\"\ncommand = {}\nconfig = {{ prefix = \"fx\", rename = {{ add = \"dup_add\" }} }}\n",
        fixture_command("stdio"),
        fixture_command("many"),
        fixture_command("bigschema"),
        fixture_command("stdio"),
    );
    std::fs::write(&config, text).unwrap();
    let check = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(["check", config.to_str().unwrap()])
        .output()
        .unwrap();
    let out = seam_tests::text(&check.stdout);
    let err = seam_tests::text(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{out}{err}");
    for needle in [
        "MCP entry `stuck`: the server did not answer `initialize` within 500 ms",
        "MCP entry `garbage`: initialize:",
        // 10,000 and the fixture's own.
        "MCP entry `many`: the server offers 100",
        "tools, more than `config.max_tools` (256)",
        "MCP entry `wide`: tool `wide` has an input schema of",
        // Its second tool would take a name the first entry has: its first (renamed, mounted
        // by then) is unmounted again.
        "MCP entry `dup`: tool name `fx__shout` is already used by plugin `fx`",
    ] {
        assert!(
            err.contains(needle) || out.contains(needle),
            "no `{needle}`:\n{out}{err}"
        );
    }
    // The good entry still mounts, and nothing of the failed ones.
    assert!(out.contains("  fx__add "), "{out}");
    assert!(out.contains("MCP server"), "{out}");
    assert!(!out.contains("dup_add"), "{out}");
    for failed in ["stuck", "garbage", "many", "wide", "dup"] {
        assert!(
            !out.contains(&format!("(plugin `{failed}`")),
            "{failed} mounts:\n{out}"
        );
    }
}

#[test]
fn a_reload_under_watch_tells_the_client_the_tools_changed() {
    // A 2026-07-28 client listens for the change; a handshake-era one hears it unasked.
    for mode in ["auto", "legacy"] {
        let dir = tempfile::tempdir().unwrap();
        let full = serve_config(dir.path());
        let full_text = std::fs::read_to_string(&full).unwrap();
        // The first two entries: the `mock` provider and its `ask` tool.
        let first: String = full_text
            .split("[[plugin]]")
            .filter(|s| !s.trim().is_empty())
            .take(2)
            .map(|s| format!("[[plugin]]{s}"))
            .collect();
        let config = dir.path().join("watched.toml");
        std::fs::write(&config, first).unwrap();
        let stderr = dir.path().join("stderr.log");
        let out = client(&[
            "watch",
            env!("CARGO_BIN_EXE_seam"),
            config.to_str().unwrap(),
            full.to_str().unwrap(),
            stderr.to_str().unwrap(),
            mode,
        ]);
        assert_eq!(out["before"], serde_json::json!(["ask"]), "{mode}: {out}");
        assert_eq!(
            out["after"],
            serde_json::json!(["ask", "fail", "wait"]),
            "{mode}: {out}"
        );
        let legacy = out["protocol"].as_str().unwrap() < "2026";
        assert_eq!(legacy, mode == "legacy", "{out}");
    }
}

#[test]
fn a_call_past_its_timeout_is_cancelled_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cancel.toml");
    // `hang` never answers: past `timeout_ms` the call ends, and the server is sent
    // notifications/cancelled, which `was_cancelled` (waiting for it) then reports.
    let text = lead(
        r#"{ name = "fx__hang", arguments = {} }"#,
        r#"{ name = "fx__was_cancelled", arguments = {} }"#,
    ) + &format!(
        "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {}\nconfig = {{ timeout_ms = 3000 }}\n",
        fixture_command("stdio")
    );
    std::fs::write(&config, text).unwrap();
    let out = seam_ok(&["run", config.to_str().unwrap()], &[]);
    assert!(out.contains("the server saw the call cancelled"), "{out}");
}

#[test]
fn the_example_serves_a_background_delegation_and_its_control_tool() {
    let out = client(&[
        "background",
        env!("CARGO_BIN_EXE_seam"),
        root().join("examples/mcp.toml").to_str().unwrap(),
    ]);
    assert!(
        out["started"]
            .as_str()
            .unwrap()
            .starts_with("started background run"),
        "{out}"
    );
    // A later call of the same client reads the run its earlier call started.
    assert_eq!(out["isError"], false, "{out}");
    let output = out["output"].as_str().unwrap();
    assert!(output.contains("finished: completed"), "{out}");
    assert!(
        output.contains("its own instance and store per run"),
        "{out}"
    );
}

#[test]
fn a_server_that_adds_a_tool_mounts_it_and_seam_mcp_says_so() {
    // Both directions at once: the Python SDK drives `seam mcp`, which serves the tools of a
    // mounted FastMCP server; the server adds a tool mid-session and says its list changed.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("grow.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {}\n",
            fixture_command("stdio")
        ),
    )
    .unwrap();
    let out = client(&["grow", env!("CARGO_BIN_EXE_seam"), config.to_str().unwrap()]);
    let has = |key: &str, name: &str| {
        out[key]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str() == Some(name))
    };
    assert!(
        has("before", "fx__grow") && !has("before", "fx__extra"),
        "{out}"
    );
    assert!(has("after", "fx__extra"), "{out}");
    assert_eq!(out["extra"], "the extra tool answers", "{out}");
}

#[test]
fn a_result_past_the_entry_memory_budget_fails_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("memory.toml");
    // 1.5 MB is within `max_output_bytes` but not within a 1 MiB `host_memory_mb`.
    let text = lead(
        r#"{ name = "fx__add", arguments = { a = 1, b = 1 } }"#,
        r#"{ name = "fx__big", arguments = { n = 1500000 } }"#,
    ) + &format!(
        "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {}\n\
         config = {{ max_output_bytes = 4000000 }}\n[plugin.limits]\nhost_memory_mb = 1\n",
        fixture_command("stdio")
    );
    std::fs::write(&config, text).unwrap();
    let out = seam_ok(&["run", config.to_str().unwrap()], &[]);
    assert!(
        out.contains("tool `fx__big` (MCP entry `fx`): the result of 1500000 bytes is more than is left of `limits.host_memory_mb`"),
        "{out}"
    );
}

/// A handshake-era `initialize`, which opens a session.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}"#;

/// POSTs `body` to `addr`; the HTTP status.
fn post_status(addr: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(seam_tests::BARRIER_TIMEOUT))
        .unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The status line is all that is needed; the rest (an SSE stream, maybe) is left unread.
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

#[test]
fn http_sessions_and_bodies_past_their_caps_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = serve_config(dir.path());
    let (seam, _lines, url) = serve_http(
        &config,
        &["--max-sessions", "1", "--max-request-bytes", "1000"],
    );
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    // A body past the size cap is refused before it is read whole.
    let padded = INITIALIZE.replace("\"probe\"", &format!("\"{}\"", "p".repeat(2000)));
    assert_eq!(post_status(&addr, &padded), 413);
    assert_eq!(post_status(&addr, INITIALIZE), 200);
    assert_eq!(post_status(&addr, INITIALIZE), 503);
    interrupt(seam);
}

/// A refused request leaves its kept-alive connection usable, however its body arrives: the
/// server answers only once it has read the body, so a client reusing the connection (as the
/// Python SDK's pool does) is answered rather than dropped. Each refused request's body is sent
/// apart from its head, after the test has seen that no answer came without it.
#[test]
fn a_refused_request_leaves_its_connection_usable() {
    use std::io::{BufRead, BufReader, Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let config = serve_config(dir.path());
    let (seam, _lines, url) = serve_http(&config, &["--token-env", "SEAM_TEST_MCP_TOKEN"]);
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let head = |extra: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\r\n",
            INITIALIZE.len()
        )
    };
    for (extra, status) in [
        ("", "401"),
        ("Authorization: Bearer wrong\r\n", "401"),
        (
            "Authorization: Bearer s3cret\r\nOrigin: http://evil.example\r\n",
            "403",
        ),
    ] {
        writer.write_all(head(extra).as_bytes()).unwrap();
        // No answer comes before the body: a server that answered here would close the
        // connection under the client whenever the body had not arrived yet.
        reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let early = reader.fill_buf().map(|b| b.len());
        assert!(
            matches!(&early, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
            "answered before the body was sent: {early:?}"
        );
        reader
            .get_ref()
            .set_read_timeout(Some(seam_tests::BARRIER_TIMEOUT))
            .unwrap();
        writer.write_all(INITIALIZE.as_bytes()).unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.starts_with(&format!("HTTP/1.1 {status}")), "{line:?}");
        let mut length = 0;
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let lower = line.to_ascii_lowercase();
            assert!(!lower.starts_with("connection: close"), "{lower:?}");
            if let Some(n) = lower.strip_prefix("content-length:") {
                length = n.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        reader.read_exact(&mut vec![0; length]).unwrap();
    }
    // The same connection serves the request that is allowed.
    writer
        .write_all(
            head("Authorization: Bearer s3cret\r\nOrigin: http://localhost:1\r\n").as_bytes(),
        )
        .unwrap();
    writer.write_all(INITIALIZE.as_bytes()).unwrap();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line:?}");
    interrupt(seam);
}

/// An `https://` entry speaks TLS: what reaches the server first is a TLS handshake record
/// (0x16), not plain HTTP. (A loopback listener stands in for the server: no certificate
/// this machine trusts is needed to see the client try.)
#[test]
fn an_https_entry_speaks_tls() {
    /// Ended with the test, passed or failed.
    struct Listener(std::process::Child);
    impl Drop for Listener {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut listener = Listener(
        Command::new("python3")
            .args([
                "-c",
                "import socket,sys\n\
             s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1)\n\
             print('port', s.getsockname()[1], flush=True)\n\
             c,_=s.accept(); b=c.recv(1)\n\
             print('first', b[0] if b else -1, flush=True)",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = seam_tests::lines_of(listener.0.stdout.take().unwrap());
    let port: u16 = lines
        .recv_timeout(seam_tests::BARRIER_TIMEOUT)
        .expect("the listener says its port")
        .strip_prefix("port ")
        .unwrap()
        .parse()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tls.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\nurl = \"https://127.0.0.1:{port}/mcp\"\n\
             config = {{ init_timeout_ms = 5000 }}\n[plugin.grants]\nhttp = [\"https://127.0.0.1:{port}\"]\n"
        ),
    )
    .unwrap();
    let check = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(["check", config.to_str().unwrap()])
        .output()
        .unwrap();
    // The entry fails (the listener is no server), naming it.
    assert_eq!(check.status.code(), Some(1));
    assert!(seam_tests::text(&check.stderr).contains("MCP entry `fx`"));
    let first = lines
        .recv_timeout(seam_tests::BARRIER_TIMEOUT)
        .expect("the listener saw the client");
    assert_eq!(first, "first 22", "a TLS handshake record starts with 0x16");
}

/// A mounted server's progress on a call becomes progress of the calling agent's run: a spawn
/// child calls `fx__count`, whose steps show as its run's `subagent/progress` (the server waits
/// for the test to see one before it goes on), in increasing order (the SDK hands
/// notifications over concurrently: one overtaken by a later one is dropped, not reordered),
/// and a flood of 100 more is cut at 64 per call.
#[test]
fn a_mounted_servers_progress_becomes_the_calling_runs_progress() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("progress.toml");
    let release = dir.path().join("release");
    let text = format!(
        "[agent]\nmodel = \"scripted:lead\"\n\n\
         [models.scripts.lead]\nsteps = [ {{ text = \"asking\", tool_calls = [ {{ name = \"ask\", arguments = {{ description = \"d\", prompt = \"p\" }} }} ] }}, {{ text = \"done: {{tool_results}}\" }} ]\n\n\
         [models.scripts.child]\nsteps = [ {{ text = \"counting\", tool_calls = [ {{ name = \"fx__count\", arguments = {{ n = 3, release = \"{}\" }} }} ] }}, {{ text = \"child: {{tool_results}}\" }} ]\n\n\
         [[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {}\n\n\
         [[plugin]]\nid = \"spawn\"\ncomponent = \"{}\"\n\n\
         [[plugin]]\nid = \"ask\"\ncomponent = \"{}\"\nconfig = {{ provider = \"spawn\", toolName = \"ask\", agentOptions = {{ model = \"scripted:child\" }} }}\n",
        release.display(),
        fixture_command("stdio"),
        seam_tests::guest("spawn_provider").display(),
        seam_tests::guest("subagent_tool").display(),
    );
    std::fs::write(&config, text).unwrap();
    let mut run = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(["run", config.to_str().unwrap(), "go", "--events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = seam_tests::lines_of(run.stderr.take().unwrap());
    let mut seen = Vec::new();
    // The server holds its flood until a step of its has shown as the run's progress.
    loop {
        let line = stderr
            .recv_timeout(seam_tests::BARRIER_TIMEOUT)
            .unwrap_or_else(|_| panic!("no progress of the server's: {}", seen.join("\n")));
        let shown = line.contains("\"subagent/progress\"") && line.contains("tool `fx__count`: ");
        seen.push(line);
        if shown {
            break;
        }
    }
    std::fs::write(&release, "").unwrap();
    seen.extend(stderr.iter());
    let status = run.wait().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut run.stdout.take().unwrap(), &mut out).unwrap();
    let err = seen.join("\n");
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("child: counted"), "{out}");
    let texts: Vec<String> = seen
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "subagent/progress")
        .map(|e| {
            e["content"][0]["value"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .filter(|t| t.starts_with("tool `fx__count`: "))
        .collect();
    let values: Vec<u32> = texts
        .iter()
        .map(|t| {
            let amount = t["tool `fx__count`: ".len()..]
                .split([':', '/'])
                .next()
                .unwrap();
            amount.trim().parse().unwrap()
        })
        .collect();
    assert!(values[0] <= 3 && texts[0].contains(": step "), "{texts:?}");
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{texts:?}");
    assert!(values.len() <= 64, "the flood is cut at 64: {texts:?}");
}

/// A traced run hands an MCP server the W3C trace context of the tool call, in `_meta` of
/// `tools/call`: the span the receiver got for that call.
#[test]
fn a_traced_call_hands_the_mcp_server_its_trace_context() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = seam_tests::otlp::OtlpReceiver::start(&dir.path().join("spans.jsonl"));
    let config = dir.path().join("traced.toml");
    let text = lead(
        r#"{ name = "fx__add", arguments = { a = 1, b = 1 } }"#,
        r#"{ name = "fx__trace", arguments = {} }"#,
    ) + &format!(
        "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {}\n",
        fixture_command("stdio")
    );
    std::fs::write(&config, text).unwrap();
    let out = seam_ok(
        &["run", config.to_str().unwrap()],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint())],
    );
    let seen = out
        .split("traceparent=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the server answered with what it got: {out}"));
    let parts: Vec<&str> = seen.split('-').collect();
    assert_eq!(parts.len(), 4, "{seen}");
    let spans = receiver.lines();
    let call = spans
        .iter()
        .find(|s| s["name"] == "tool.call" && s["attributes"]["seam.tool.name"] == "fx__trace")
        .unwrap_or_else(|| panic!("no span of the call: {spans:#?}"));
    assert_eq!(call["trace-id"], parts[1], "the same trace");
    assert_eq!(call["span-id"], parts[2], "the call's own span");
}

/// A call is never sent twice: the server of an entry killed (`kill -9`) while a call of its
/// runs, the call fails naming the entry, the tool started once (the server logs each start),
/// and the next call is answered by a new server. Through `seam mcp`, driven by the Python SDK,
/// which kills the server once the tool has logged its start, and only then creates the file
/// that lets a (wrongly) repeated call answer.
#[test]
fn a_call_in_flight_when_its_server_dies_fails_and_is_not_sent_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("replay.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\nid = \"fx\"\nkind = \"mcp\"\ncommand = {}\n",
            fixture_command("stdio")
        ),
    )
    .unwrap();
    let log = dir.path().join("starts.log");
    let release = dir.path().join("release");
    let out = client(&[
        "replay",
        env!("CARGO_BIN_EXE_seam"),
        config.to_str().unwrap(),
        log.to_str().unwrap(),
        release.to_str().unwrap(),
    ]);
    let killed = out["killed"].as_u64().unwrap();
    assert_eq!(
        out["starts"],
        serde_json::json!([format!("started {killed}")]),
        "the tool started more than once: {out}"
    );
    assert_eq!(out["slow"]["isError"], true, "{out}");
    let text = out["slow"]["text"][0].as_str().unwrap_or_default();
    assert!(
        text.contains("tool `fx__slow` (MCP entry `fx`)")
            && text.contains("closed during the call"),
        "{out}"
    );
    // The next call reconnects: a new server answers.
    assert_eq!(out["after"]["isError"], false, "{out}");
    let pid: u64 = out["after"]["text"][0].as_str().unwrap().parse().unwrap();
    assert_ne!(pid, killed, "{out}");
}

/// Nothing is sent for a request once it is cancelled: `flood` reports progress without end
/// (and ignores cancellation until the host ends it), the Python SDK cancels the call once its
/// progress comes, then lists the tools. Progress sent before the server read the cancel may
/// still be on its way when the cancel is sent, but the listing's answer is sent after the server
/// read the cancel (it came after it on the same pipe): no progress of the cancelled request may
/// follow that answer. (Before the fix, queued and
/// newly reported progress went on after the cancel, until the run under the call had ended.)
#[test]
fn no_progress_follows_a_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("flood.toml");
    let call_tool = seam_tests::guest("subagent_tool");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\nid = \"flooding\"\ncomponent = \"{}\"\n\
             config = {{ name = \"flooding\", mode = \"progress-flood\", count = 1000000000, bytes = 0 }}\n\
             [plugin.limits]\ncpu_ms_per_call = 600000\n\n\
             [[plugin]]\nid = \"flood\"\ncomponent = \"{}\"\nconfig = {{ provider = \"flooding\", toolName = \"flood\" }}\n\n\
             [[plugin]]\nid = \"mock\"\ncomponent = \"{}\"\nconfig = {{ name = \"mock\", reply = \"answer to {{prompt}}\" }}\n\n\
             [[plugin]]\nid = \"ask\"\ncomponent = \"{}\"\nconfig = {{ provider = \"mock\", toolName = \"ask\" }}\n",
            seam_tests::guest("hostile_provider").display(),
            call_tool.display(),
            seam_tests::guest("mock_provider").display(),
            call_tool.display(),
        ),
    )
    .unwrap();
    let stderr = dir.path().join("stderr.log");
    let out = client(&[
        "cancel",
        env!("CARGO_BIN_EXE_seam"),
        config.to_str().unwrap(),
        stderr.to_str().unwrap(),
    ]);
    assert!(
        !out["token"].is_null(),
        "the call carried a progress token: {out}"
    );
    let (cancelled, pong) = (out["cancelled_at"].as_u64(), out["pong_at"].as_u64());
    assert!(
        cancelled.is_some() && pong.is_some() && cancelled < pong,
        "the cancel went before the listing's answer: {out}"
    );
    assert!(out["progress"].as_u64().unwrap() >= 1, "{out}");
    assert_eq!(
        out["after_pong"], 0,
        "progress of the cancelled request came after the server read the cancel: {out}"
    );
    assert_eq!(
        out["after"],
        serde_json::json!(["answer to again"]),
        "{out}"
    );
}

/// `seam mcp --http` answers a session's `DELETE` with a status the Python SDK takes as done
/// (200 or 204: it warns "Session termination failed" on anything else, 405 aside).
#[test]
fn an_http_session_delete_is_answered_as_the_sdk_expects() {
    let dir = tempfile::tempdir().unwrap();
    let config = serve_config(dir.path());
    let (seam, _lines, url) = serve_http(&config, &[]);
    let out = client(&["delete", &url]);
    interrupt(seam);
    assert_eq!(
        out["tools"],
        serde_json::json!(["ask", "fail", "wait"]),
        "{out}"
    );
    assert_eq!(out["warnings"], serde_json::json!([]), "{out}");
    let status = out["delete"].as_u64().unwrap();
    assert!(status == 200 || status == 204, "{out}");
}

/// `secret`: a mock behind the subagent tool whose entry says `approve = "ask"`; `down`: a run
/// whose model calls `secret`, then says what it read.
fn approval_config(dir: &Path) -> PathBuf {
    let path = dir.join("approve.toml");
    std::fs::write(
        &path,
        format!(
            "[models.scripts.child]\nsteps = [ {{ text = \"asking\", tool_calls = [ {{ name = \"secret\", arguments = {{ description = \"d\", prompt = \"open\" }} }} ] }}, {{ text = \"child read: {{tool_results}}\" }} ]\n\n\
             [[plugin]]\nid = \"vault\"\ncomponent = \"{mock}\"\nconfig = {{ name = \"vault\", reply = \"the secret\" }}\n\n\
             [[plugin]]\nid = \"secret\"\ncomponent = \"{tool}\"\nconfig = {{ provider = \"vault\", toolName = \"secret\", approve = \"ask\" }}\n\n\
             [[plugin]]\nid = \"spawn\"\ncomponent = \"{spawn}\"\n\n\
             [[plugin]]\nid = \"down\"\ncomponent = \"{tool}\"\nconfig = {{ provider = \"spawn\", toolName = \"down\", agentOptions = {{ model = \"scripted:child\" }} }}\n",
            mock = seam_tests::guest("mock_provider").display(),
            tool = seam_tests::guest("subagent_tool").display(),
            spawn = seam_tests::guest("spawn_provider").display(),
        ),
    )
    .unwrap();
    path
}

/// The `approve` scenario of the fixture client answering `answer`: what it saw, and how many
/// runs of the `vault` provider seam started.
fn approve(answer: &str) -> (serde_json::Value, usize) {
    let dir = tempfile::tempdir().unwrap();
    let config = approval_config(dir.path());
    let events = dir.path().join("stderr.log");
    let out = client(&[
        "approve",
        env!("CARGO_BIN_EXE_seam"),
        config.to_str().unwrap(),
        events.to_str().unwrap(),
        answer,
    ]);
    let events = std::fs::read_to_string(&events).unwrap();
    let vault = events
        .lines()
        .filter(|l| {
            l.contains("\"event\":\"subagent/start\"") && l.contains("\"provider\":\"vault\"")
        })
        .count();
    (out, vault)
}

/// A call through `seam mcp` that needs a yes, the served tool's own or one a run under the
/// call makes, is asked of the client with `elicitation/create` (the official SDK's client with
/// an elicitation callback): accepted, the tool runs; declined, the client reads a denial and
/// the tool never runs.
#[test]
fn seam_mcp_asks_the_client_for_approval_with_elicitation() {
    let (out, vault) = approve("accept");
    assert_eq!(out["secret"]["isError"], false, "{out}");
    assert_eq!(out["secret"]["text"], "the secret", "{out}");
    assert!(
        out["down"]["text"]
            .as_str()
            .unwrap()
            .contains("child read: the secret"),
        "{out}"
    );
    assert_eq!(vault, 2, "{out}");
    let asked = out["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{out}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(message.contains("call tool `secret`"), "{message}");
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["allow"]["type"],
        "boolean"
    );
    // The run's request names the run that asks.
    assert!(
        asked[1]["message"].as_str().unwrap().contains("): spawn-"),
        "{out}"
    );

    let (out, vault) = approve("decline");
    assert_eq!(out["secret"]["isError"], true, "{out}");
    let text = out["secret"]["text"].as_str().unwrap();
    assert!(
        text.contains("denied by mcp") && text.contains("declined"),
        "{text}"
    );
    let down = out["down"]["text"].as_str().unwrap();
    assert!(
        down.contains("denied by mcp") && !down.contains("the secret"),
        "{down}"
    );
    assert_eq!(vault, 0, "a declined tool ran: {out}");
    assert_eq!(out["asked"].as_array().unwrap().len(), 2, "{out}");
}

/// A client that did not declare elicitation cannot be asked, nor can one on 2026-07-28 (a
/// server may not send it requests): the call is denied at once, and the result says how to
/// allow it.
#[test]
fn seam_mcp_denies_at_once_what_a_client_without_elicitation_cannot_answer() {
    for answer in ["none", "modern"] {
        let (out, vault) = approve(answer);
        assert_eq!(out["secret"]["isError"], true, "{out}");
        let text = out["secret"]["text"].as_str().unwrap();
        assert!(text.contains("denied by nobody"), "{text}");
        assert!(text.contains("approve = \"allow\""), "{text}");
        let down = out["down"]["text"].as_str().unwrap();
        assert!(down.contains("denied by nobody"), "{down}");
        assert_eq!(vault, 0, "{out}");
        assert!(out["asked"].as_array().unwrap().is_empty(), "{out}");
        if answer == "modern" {
            assert_eq!(out["protocol"], "2026-07-28", "{out}");
        }
    }
}
