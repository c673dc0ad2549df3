//! `seam ui`: the console, driven as a person drives it, in headless Chromium over the DevTools
//! protocol (`seam_tests::browser`), against the built `seam` and real components; and its JSON
//! API and guards over plain HTTP. Screenshots go to `target/ui-screenshots/`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use seam_tests::browser::Browser;
use seam_tests::{entry, guest, Served};
use serde_json::{json, Value};

fn component(name: &str) -> String {
    guest(name).with_extension("").display().to_string()
}

/// A config keeping its sessions in `dir/sessions.db`, with the lead's `steps` and the plugins
/// the tests use: `worker` starts `waiter` (the async provider: `wait` waits for a message or
/// a cancel) in the background; `secret` asks for approval, then runs `vault` (a mock answering
/// `reply`); `lookup` runs `vault` without asking; `digger` starts a child agent on `spawn`
/// (script `child`, given in `extra`) in the background.
fn config(dir: &Path, steps: &str, reply: &str, extra: &str) -> PathBuf {
    let text = format!(
        "[agent]\nmodel = \"scripted:lead\"\n\n[sessions]\nstore = \"sqlite:{db}\"\n\n{extra}\n\n\
         [models.scripts.lead]\nsteps = [\n{steps}\n]\n\n",
        db = dir.join("sessions.db").display(),
    ) + &entry("waiter", &component("async_provider"), "name = \"waiter\"")
        + &entry(
            "vault",
            &component("mock_provider"),
            &format!("name = \"vault\", reply = \"{reply}\""),
        )
        + &entry(
            "secret",
            &component("subagent_tool"),
            "provider = \"vault\", toolName = \"secret\", approve = \"ask\"",
        )
        + &entry(
            "lookup",
            &component("subagent_tool"),
            "provider = \"vault\", toolName = \"lookup\"",
        )
        + &entry(
            "worker",
            &component("subagent_tool"),
            "provider = \"waiter\", toolName = \"worker\", runInBackground = true",
        )
        + &entry("spawn", &component("spawn_provider"), "")
        + &entry(
            "digger",
            &component("subagent_tool"),
            "provider = \"spawn\", toolName = \"digger\", \
             agentOptions = { model = \"scripted:child\" }, runInBackground = true",
        );
    let path = dir.join("ui.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `seam ui CONFIG --http 127.0.0.1:0` (with `args`), once it says where it serves: the
/// process, its stderr's other lines, and its URL.
fn serve(config: &Path, args: &[&str]) -> (Served, std::sync::mpsc::Receiver<String>, String) {
    let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    command
        .args(["ui", config.to_str().unwrap(), "--http", "127.0.0.1:0"])
        .args(args);
    let (seam, lines, url) = seam_tests::serve_until(command, "seam ui: serving ");
    (seam, lines, url)
}

/// Stops `seam ui` as Ctrl-C does: it must wind down and exit 0.
fn stop(seam: Served) {
    assert_eq!(seam.interrupt(), Some(0));
}

/// `config` with its `[sessions] store = "sqlite:..."` replaced by `replacement`.
fn with_store(config: &Path, replacement: &str) -> PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    let start = text.find("store = \"sqlite:").unwrap();
    let end = start + text[start..].find('\n').unwrap();
    let path = config.with_file_name("other-store.toml");
    std::fs::write(
        &path,
        format!("{}{replacement}{}", &text[..start], &text[end..]),
    )
    .unwrap();
    path
}

/// An HTTP/1.1 exchange on its own connection: the status, the head, the body.
fn http(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let authority = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(authority).unwrap();
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    for (k, v) in headers {
        request += &format!("{k}: {v}\r\n");
    }
    request += &format!("Content-Length: {}\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (status, head.to_string(), body.to_string())
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

fn post(url: &str, path: &str, body: Value) -> (u16, Value) {
    let (status, _, body) = http(url, "POST", path, &[JSON], &body.to_string());
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn get(url: &str, path: &str) -> (u16, Value) {
    let (status, _, body) = http(url, "GET", path, &[], "");
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// The console's event stream, followed from now on.
struct Events(BufReader<TcpStream>);

impl Events {
    fn follow(url: &str) -> Self {
        let authority = url.trim_start_matches("http://").trim_end_matches('/');
        let mut stream = TcpStream::connect(authority).unwrap();
        write!(
            stream,
            "GET /api/events HTTP/1.1\r\nHost: {authority}\r\n\r\n"
        )
        .unwrap();
        let mut events = Self(BufReader::new(stream));
        events.until("ready", |_| true);
        events
    }

    /// Reads events until one of `kind` whose data `done` accepts; returns that data.
    /// The next event: its kind and data.
    fn next(&mut self) -> (String, Value) {
        let mut kind = String::new();
        loop {
            let mut line = String::new();
            assert!(
                self.0.read_line(&mut line).unwrap() > 0,
                "the event stream ended"
            );
            let line = line.trim_end();
            if let Some(k) = line.strip_prefix("event: ") {
                kind = k.to_string();
            } else if let Some(data) = line.strip_prefix("data: ") {
                return (kind, serde_json::from_str(data).unwrap_or(Value::Null));
            }
        }
    }

    fn until(&mut self, kind: &str, done: impl Fn(&Value) -> bool) -> Value {
        loop {
            let (k, data) = self.next();
            if k == kind && done(&data) {
                return data;
            }
        }
    }

    /// Reads events until the turn of `session` has ended and `runs` runs of `provider` have
    /// ended (in either order).
    fn turn_and_runs(&mut self, session: &str, provider: &str, runs: usize) {
        let (mut turn, mut ended) = (false, 0);
        while !turn || ended < runs {
            match self.next() {
                (k, d)
                    if k == "console" && d["what"] == "turn-ended" && d["session"] == session =>
                {
                    turn = true
                }
                (k, d)
                    if k == "bus" && d["event"] == "subagent/end" && d["provider"] == provider =>
                {
                    ended += 1
                }
                _ => {}
            }
        }
    }
}

/// The lead of the browser test: two waiting children in the background, then a call that asks
/// for approval, then its answer; a later turn says what it heard.
const LIVE_STEPS: &str = r#"  { text = "delegating", tool_calls = [
      { name = "worker", arguments = { description = "first", prompt = "wait", run_in_background = true } },
      { name = "worker", arguments = { description = "second", prompt = "wait", run_in_background = true } },
  ] },
  { text = "asking", tool_calls = [{ name = "secret", arguments = { description = "d", prompt = "open" } }] },
  { text = "done: {tool_results}" },
  { text = "again: {user_messages}" },"#;

#[test]
fn a_person_watches_a_live_tree_approves_steers_interrupts_and_replays_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), LIVE_STEPS, "the secret", "");
    let (seam, _lines, url) = serve(&config, &[]);
    let mut page = Browser::start();
    page.open(&url);
    page.wait("#live[data-state=\"live\"]");

    // A session whose prompt is markup: it is started from the page and shown as text.
    let prompt =
        "<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">look around";
    page.type_into("#new-prompt", prompt);
    page.click("#new-start");
    page.wait("#detail[data-session]");
    let session = page.eval("document.querySelector('#detail').dataset.session");
    let session = session.as_str().unwrap().to_string();

    // The background children appear while the turn waits for approval.
    page.wait(".run-node[data-label=\"first\"][data-state=\"running\"][data-live=\"true\"]");
    page.wait(".run-node[data-label=\"second\"][data-state=\"running\"][data-live=\"true\"]");
    page.wait("#detail[data-state=\"waiting\"]");
    page.wait_text("#approvals [data-approval]", "call tool `secret`");
    page.screenshot("approval");

    // The running turn is steered: the model reads the message before its next call.
    page.type_into("#steer-text", "also this");
    page.click("#steer-send");
    page.wait_js("document.querySelector('#steer-text').value === ''");

    // Approved: the run goes on, the vault answers, the turn ends.
    page.click("#approvals button[data-answer=\"allow\"]");
    page.wait(".run-node[data-provider=\"vault\"][data-state=\"completed\"]");
    page.wait("#detail[data-state=\"idle\"]");
    page.wait_text("#conversation .result", "the secret");
    // The steering reached the model after the tool's answer, before its next call.
    page.wait_text("#conversation .user .prompt", "also this");
    page.wait_text("#conversation .assistant", "done:");
    assert_eq!(page.count("#approvals-box:not([hidden])"), 0);

    // The prompt is text everywhere: no script ran, no element was made of it.
    page.wait_text(
        &format!("[data-session=\"{session}\"] .prompt"),
        "<script>window.pwned = 1</script>",
    );
    page.wait_text("#conversation .user .prompt", "<img src=x onerror=");
    assert_eq!(page.eval("window.pwned === undefined"), json!(true));
    assert_eq!(
        page.count("#conversation script, #conversation img, #sessions img"),
        0
    );

    // A message to the first child: it answers with it and ends, live.
    page.click(".run-node[data-label=\"first\"] > a.line");
    page.wait("#run-box:not([hidden])[data-state=\"running\"]");
    page.type_into("#run-text", "hello <b>child</b>");
    page.click("#run-send");
    page.wait(".run-node[data-label=\"first\"][data-state=\"completed\"]");
    page.wait_text(
        ".run-node[data-label=\"first\"] .answer",
        "message: hello <b>child</b>",
    );
    page.wait("#run-box[data-state=\"completed\"]");
    assert_eq!(page.count(".run-node b"), 0);

    // The second child is interrupted from its node.
    page.click(".run-node[data-label=\"second\"] button[data-action=\"interrupt\"]");
    page.wait_js(
        "['aborted', 'interrupted'].includes(document.querySelector('.run-node[data-label=\"second\"]')?.dataset.state)",
    );
    page.wait(".run-node[data-label=\"second\"][data-live=\"false\"]");

    // The session goes on with a new prompt.
    page.type_into("#continue-prompt", "and now?");
    page.click("#continue-send");
    page.wait_text("#conversation .assistant", "| and now?");
    page.wait("#detail[data-state=\"idle\"]");
    let shot = page.screenshot("session");
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);

    // Searching: by state, by prompt, and for nothing.
    page.type_into("#search", "look around");
    page.wait(&format!("#sessions [data-session=\"{session}\"]"));
    page.type_into("#search", " and more");
    page.wait("#no-sessions:not([hidden])");
    assert!(page.errors().is_empty(), "{:?}", page.errors());
    drop(page);
    stop(seam);
}

#[test]
fn a_replay_from_the_page_shows_where_the_tree_now_diverges() {
    let dir = tempfile::tempdir().unwrap();
    let steps = r#"  { text = "asking", tool_calls = [{ name = "lookup", arguments = { description = "d", prompt = "the fact" } }] },
  { text = "read: {tool_results}" },"#;
    let config = config(dir.path(), steps, "forty-two", "");
    let (seam, _lines, url) = serve(&config, &[]);
    let mut events = Events::follow(&url);
    let (status, started) = post(&url, "/api/sessions", json!({"prompt": "what is it?"}));
    assert_eq!(status, 202, "{started}");
    let session = started["session"].as_str().unwrap().to_string();
    events.until("console", |d| {
        d["what"] == "turn-ended" && d["session"] == session.as_str()
    });

    let mut page = Browser::start();
    page.open(&format!("{url}#/s/{session}"));
    page.wait("#detail[data-state=\"idle\"]");
    page.click("#replay");
    page.wait("#replay-report[data-state=\"identical\"]");
    page.wait_text("#replay-report", "2 model steps over 1 of 1 turns");

    // The component answers otherwise now: the replay says where the tree did something else.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("forty-two", "forty-three")).unwrap();
    page.click("#replay");
    page.wait("#replay-report[data-state=\"diverged\"]");
    page.wait_text("#replay-report", "forty-two");
    page.wait_text("#replay-report", "forty-three");
    page.screenshot("replay");
    assert!(page.errors().is_empty(), "{:?}", page.errors());

    // The API says the same, for a script.
    let (status, report) = post(&url, &format!("/api/sessions/{session}/replay"), json!({}));
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["identical"], false, "{report}");
    assert_eq!(report["divergence"]["kind"], "model", "{report}");
    drop(page);
    stop(seam);
}

#[test]
fn another_process_on_the_same_store_shows_live_and_is_approved_from_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let steps = r#"  { text = "asking", tool_calls = [{ name = "secret", arguments = { description = "d", prompt = "open" } }] },
  { text = "read: {tool_results}" },"#;
    // The other process finds the answer in the store.
    let config = config(dir.path(), steps, "kept", "[approvals]\nfrom_store = true");
    let (seam, _lines, url) = serve(&config, &[]);
    let mut page = Browser::start();
    page.open(&url);
    page.wait("#live[data-state=\"live\"]");

    let mut run = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    let other = run
        .args(["run", config.to_str().unwrap(), "from elsewhere"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    // Its session appears, waiting for the approval it asked for in the store.
    page.wait_text("#sessions .prompt", "from elsewhere");
    page.click("#sessions li:first-child a");
    page.wait("#detail[data-state=\"waiting\"]");
    assert_eq!(
        page.count("#interrupt-turn:not([hidden])"),
        0,
        "not this process's turn"
    );
    page.click("#approvals button[data-answer=\"allow\"]");

    // The other process finds the answer, goes on and ends; the page follows it.
    let out = other.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("read: kept"), "{stdout}");
    page.wait(".run-node[data-provider=\"vault\"][data-state=\"completed\"]");
    page.wait("#detail[data-state=\"idle\"]");
    page.wait_text("#conversation .assistant", "read: kept");
    page.screenshot("other-process");
    assert!(page.errors().is_empty(), "{:?}", page.errors());
    drop(page);
    stop(seam);
}

#[test]
fn the_json_api_refuses_bad_requests_by_name_and_guards_like_the_other_servers() {
    let dir = tempfile::tempdir().unwrap();
    let steps = r#"  { text = "hello" },"#;
    let config = config(dir.path(), steps, "r", "");
    let (seam, _lines, url) = serve(&config, &[]);

    let (status, index) = get(&url, "/api");
    assert_eq!(status, 200);
    assert!(
        index["endpoints"].as_array().unwrap().len() >= 10,
        "{index}"
    );
    // The page: its own files only, under a policy that runs no inline script.
    let (status, head, body) = http(&url, "GET", "/", &[], "");
    assert_eq!(status, 200);
    assert!(body.contains("<script src=\"/app.js\""), "{body}");
    assert!(
        head.to_lowercase()
            .contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{head}"
    );
    for asset in ["/app.js", "/app.css", "/favicon.svg"] {
        assert_eq!(http(&url, "GET", asset, &[], "").0, 200, "{asset}");
    }

    // Bad bodies are refused, naming what is wrong; nothing starts.
    let (status, _, body) = http(
        &url,
        "POST",
        "/api/sessions",
        &[("Content-Type", "text/plain")],
        "{\"prompt\":\"x\"}",
    );
    assert_eq!(status, 415, "{body}");
    for (body, names) in [
        (json!({}), "missing field `prompt`"),
        (json!({"prompt": 1}), "invalid type"),
        (
            json!({"prompt": "x", "extra": true}),
            "unknown field `extra`",
        ),
        (json!({"prompt": "  "}), "`prompt`: the prompt is empty"),
    ] {
        let (status, answer) = post(&url, "/api/sessions", body);
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"]["code"], "bad-request");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(names),
            "{answer}"
        );
    }
    let (status, _, body) = http(&url, "POST", "/api/sessions", &[JSON], "{not json");
    assert_eq!(status, 400, "{body}");
    assert_eq!(get(&url, "/api/sessions").1["sessions"], json!([]));

    // Unknown things are named.
    let (status, answer) = get(&url, "/api/sessions/nope");
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (404, Some("not-found"))
    );
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no session `nope`"));
    let (status, answer) = post(&url, "/api/runs/abc/interrupt", json!({}));
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = post(&url, "/api/runs/12345/interrupt", json!({}));
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = post(&url, "/api/approvals/nope", json!({"answer": "allow"}));
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = post(&url, "/api/approvals/nope", json!({"answer": "maybe"}));
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = post(&url, "/api/sessions/nope/turns", json!({"prompt": "x"}));
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = post(&url, "/api/sessions/nope/interrupt", json!({}));
    assert_eq!(status, 409, "{answer}");
    let (status, answer) = post(&url, "/api/sessions/nope/messages", json!({"text": "hi"}));
    assert_eq!(status, 409, "{answer}");
    let (status, answer) = post(&url, "/api/sessions/nope/messages", json!({"text": " "}));
    assert_eq!(status, 400, "{answer}");
    let (status, _) = get(&url, "/api/nothing");
    assert_eq!(status, 404);
    let (status, _) = post(&url, "/api/sessions/nope", json!({}));
    assert_eq!(status, 405);

    // A turn, then its session, found by id, prompt and state.
    let mut events = Events::follow(&url);
    let (status, started) = post(&url, "/api/sessions", json!({"prompt": "say hello"}));
    assert_eq!(status, 202);
    let session = started["session"].as_str().unwrap().to_string();
    events.until("console", |d| {
        d["what"] == "turn-ended" && d["session"] == session.as_str()
    });
    for q in [session.as_str(), "SAY%20hello", "idle"] {
        let (_, found) = get(&url, &format!("/api/sessions?q={q}"));
        assert_eq!(found["sessions"][0]["id"], session.as_str(), "{q}: {found}");
    }
    assert_eq!(
        get(&url, "/api/sessions?q=running").1["sessions"],
        json!([])
    );
    let (_, view) = get(&url, &format!("/api/sessions/{session}"));
    assert_eq!(view["turns"][0]["answer"], "hello", "{view}");
    assert_eq!(view["turns"][0]["stop-reason"], "completed", "{view}");
    stop(seam);

    // With a token, every request carries it: a script as a bearer token, a browser through
    // the cookie it gets by opening /?token=.
    let (seam, _lines, url) = {
        let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
        command
            .args([
                "ui",
                config.to_str().unwrap(),
                "--http",
                "127.0.0.1:0",
                "--token-env",
                "UI_TOKEN",
            ])
            .env("UI_TOKEN", "s3cret");
        seam_tests::serve_until(command, "seam ui: serving ")
    };
    assert_eq!(http(&url, "GET", "/api/sessions", &[], "").0, 401);
    assert_eq!(http(&url, "GET", "/", &[], "").0, 401);
    assert_eq!(http(&url, "GET", "/?token=wrong", &[], "").0, 401);
    let (status, _) = {
        let (s, _, b) = http(
            &url,
            "GET",
            "/api/sessions",
            &[("Authorization", "Bearer s3cret")],
            "",
        );
        (s, b)
    };
    assert_eq!(status, 200);
    let (status, head, _) = http(&url, "GET", "/?token=s3cret", &[], "");
    assert_eq!(status, 303, "{head}");
    let lower = head.to_lowercase();
    assert!(lower.contains("location: /\r\n"), "{head}");
    assert!(
        lower.contains("set-cookie: seam-ui-token=s3cret; path=/; httponly; samesite=strict"),
        "{head}"
    );
    assert_eq!(
        http(
            &url,
            "GET",
            "/api/sessions",
            &[("Cookie", "seam-ui-token=s3cret")],
            ""
        )
        .0,
        200
    );
    assert_eq!(
        http(
            &url,
            "GET",
            "/api/sessions",
            &[("Cookie", "seam-ui-token=nope")],
            ""
        )
        .0,
        401
    );
    // A page of another origin is refused, with or without the cookie.
    let (status, _, _) = http(
        &url,
        "POST",
        "/api/sessions",
        &[
            JSON,
            ("Cookie", "seam-ui-token=s3cret"),
            ("Origin", "https://evil.example"),
        ],
        "{\"prompt\":\"x\"}",
    );
    assert_eq!(status, 403);
    stop(seam);

    // Off loopback without a token: refused before anything loads, naming the flag.
    let (code, _, err) =
        seam_tests::outcome(seam_tests::seam_command(env!("CARGO_BIN_EXE_seam")).args([
            "ui",
            config.to_str().unwrap(),
            "--http",
            "0.0.0.0:0",
        ]));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--token-env"), "{err}");
    // A config that does not parse is named.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[agent\n").unwrap();
    let (code, _, err) =
        seam_tests::outcome(seam_tests::seam_command(env!("CARGO_BIN_EXE_seam")).args([
            "ui",
            bad.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ]));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("bad.toml"), "{err}");
}

#[test]
fn a_jetstream_store_is_listed_followed_and_answered_like_a_file() {
    let nats = seam_tests::nats::NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let steps = r#"  { text = "asking", tool_calls = [{ name = "secret", arguments = { description = "d", prompt = "open" } }] },
  { text = "read: {tool_results}" },"#;
    let sqlite = config(dir.path(), steps, "kept", "[approvals]\nfrom_store = true");
    let config = with_store(
        &sqlite,
        &format!(
            "store = \"nats\"\n\n[cluster]\nnats = \"{}\"\nname = \"ui\"",
            nats.url
        ),
    );
    let (seam, _lines, url) = serve(&config, &[]);
    let mut events = Events::follow(&url);

    // Another process runs a session on the same JetStream store; it asks for approval there.
    let other = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(["run", config.to_str().unwrap(), "from another process"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The console sees the store change until the request is there.
    let pending = loop {
        events.until("store", |_| true);
        let (_, listed) = get(&url, "/api/approvals");
        let pending: Vec<String> = listed["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["status"] == "pending")
            .map(|a| a["id"].as_str().unwrap().to_string())
            .collect();
        if let [one] = pending.as_slice() {
            break one.clone();
        }
    };
    let (_, listed) = get(&url, "/api/sessions?q=another");
    let session = &listed["sessions"][0];
    assert_eq!(session["state"], "waiting", "{listed}");
    assert_eq!(session["here"], false, "{listed}");
    let session = session["id"].as_str().unwrap().to_string();
    // Not this process's turn: it can be answered, not interrupted or continued.
    let (status, _) = post(
        &url,
        &format!("/api/sessions/{session}/interrupt"),
        json!({}),
    );
    assert_eq!(status, 409);
    let (status, answer) = post(
        &url,
        &format!("/api/sessions/{session}/turns"),
        json!({"prompt": "x"}),
    );
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another process"),
        "{answer}"
    );

    let (status, answered) = post(
        &url,
        &format!("/api/approvals/{pending}"),
        json!({"answer": "allow"}),
    );
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["approval"]["by"], "seam ui");
    let out = other.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("read: kept"), "{stdout}");
    let (_, view) = get(&url, &format!("/api/sessions/{session}"));
    assert_eq!(view["session"]["state"], "idle", "{view}");
    assert_eq!(view["runs"][0]["provider"], "vault", "{view}");
    // The list read this session while its turn was open: what the other process wrote since
    // moves its row too.
    let (_, listed) = get(&url, "/api/sessions?q=another");
    assert_eq!(listed["sessions"][0]["id"], session.as_str(), "{listed}");
    assert_eq!(listed["sessions"][0]["state"], "idle", "{listed}");
    assert_eq!(listed["sessions"][0]["turns"], 1, "{listed}");
    assert_eq!(view["runs"][0]["stop-reason"], "completed", "{view}");
    // Answered once: a second answer is refused, naming who answered.
    let (status, again) = post(
        &url,
        &format!("/api/approvals/{pending}"),
        json!({"answer": "deny"}),
    );
    assert_eq!(status, 409, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("seam ui"),
        "{again}"
    );
    stop(seam);
}

#[test]
fn a_turn_and_a_child_are_interrupted_and_messaged_through_the_api() {
    // A turn whose model takes its time: steered, then interrupted, it ends, and then takes no
    // message.
    let dir = tempfile::tempdir().unwrap();
    let slow = config(
        dir.path(),
        r#"  { text = "slow", delay_ms = 600000 },"#,
        "r",
        "",
    );
    let (seam, _lines, url) = serve(&slow, &[]);
    let mut events = Events::follow(&url);
    let (_, started) = post(&url, "/api/sessions", json!({"prompt": "take your time"}));
    let session = started["session"].as_str().unwrap().to_string();
    events.until("console", |d| d["what"] == "turn-started");
    let (status, steered) = post(
        &url,
        &format!("/api/sessions/{session}/messages"),
        json!({"text": "hurry"}),
    );
    assert_eq!(status, 200, "{steered}");
    let (status, interrupted) = post(
        &url,
        &format!("/api/sessions/{session}/interrupt"),
        json!({}),
    );
    assert_eq!(status, 200, "{interrupted}");
    assert_eq!(interrupted["interrupted"], true, "{interrupted}");
    events.until("console", |d| d["what"] == "turn-ended");
    let (_, view) = get(&url, &format!("/api/sessions/{session}"));
    assert_eq!(view["session"]["state"], "idle", "{view}");
    assert_eq!(view["turns"][0]["stop-reason"], "aborted", "{view}");
    let (status, _) = post(
        &url,
        &format!("/api/sessions/{session}/messages"),
        json!({"text": "late"}),
    );
    assert_eq!(status, 409);
    stop(seam);

    // A child agent in the background: once it has answered, a message wakes it through its
    // parent, open here, and its new activation answers with it.
    let dir = tempfile::tempdir().unwrap();
    let steps = r#"  { text = "digging", tool_calls = [{ name = "digger", arguments = { description = "d", prompt = "dig", run_in_background = true } }] },
  { text = "left it digging" },"#;
    let child = "[models.scripts.child]\nsteps = [{ text = \"found: {user_messages}\" }]";
    let config = config(dir.path(), steps, "r", child);
    let (seam, _lines, url) = serve(&config, &[]);
    let mut events = Events::follow(&url);
    let (_, started) = post(&url, "/api/sessions", json!({"prompt": "go dig"}));
    let session = started["session"].as_str().unwrap().to_string();
    events.turn_and_runs(&session, "spawn", 1);
    let (_, view) = get(&url, &format!("/api/sessions/{session}"));
    let first = view["runs"][0].clone();
    assert_eq!(first["stop-reason"], "completed", "{view}");
    assert_eq!(first["live"], false, "{view}");
    assert_eq!(first["answer"], "found: dig", "{view}");
    let key = first["key"].as_i64().unwrap();

    // Without its session, a child that no longer runs cannot be reached, and it says how.
    let (status, refused) = post(
        &url,
        &format!("/api/runs/{key}/messages"),
        json!({"text": "again"}),
    );
    assert_eq!(status, 404, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`session`"),
        "{refused}"
    );
    let (status, sent) = post(
        &url,
        &format!("/api/runs/{key}/messages"),
        json!({"text": "again", "session": session}),
    );
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["delivery"], "woken", "{sent}");
    events.until("bus", |d| {
        d["event"] == "subagent/end" && d["provider"] == "spawn"
    });
    let (_, view) = get(&url, &format!("/api/sessions/{session}"));
    let runs = view["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "a second activation: {view}");
    assert_eq!(
        runs[1]["session"], first["session"],
        "the same child: {view}"
    );
    assert!(
        runs[1]["answer"].as_str().unwrap().contains("again"),
        "{view}"
    );
    // The child's session is a session of its own, its parent and root named.
    let child_session = first["session"].as_str().unwrap();
    let (_, child) = get(&url, &format!("/api/sessions/{child_session}"));
    assert_eq!(child["session"]["parent"], session.as_str(), "{child}");
    assert_eq!(child["root"], session.as_str(), "{child}");
    stop(seam);
}
