//! `seam a2a CONFIG --http ADDR`, driven by the official A2A SDKs (the Python SDK `a2a-sdk`
//! 1.3.0 and the JavaScript SDK `@a2a-js/sdk` 1.3.0, installed by `make setup-kit`; the
//! fixtures `tests/fixtures/a2a_client.py` and `a2a_client.mjs`) against scripted agents: send,
//! stream, get and list (also after a restart on the same SQLite store), cancel of a tree,
//! resubscribing, steering, approvals, push notifications, and the guards.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// `kind = "a2a"` entries, against the official Python SDK's server.
mod provider;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The toolchain's Python, which must have the A2A SDK.
fn a2a_python() -> PathBuf {
    seam_tests::kit_python("a2a.client, a2a.server, uvicorn")
}

use seam_tests::Served;

/// `seam a2a CONFIG --http 127.0.0.1:0 ARGS`, once it says where it serves: the process, its
/// stderr's lines, and the base URL.
fn serve(config: &Path, args: &[&str]) -> (Served, std::sync::mpsc::Receiver<String>, String) {
    let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    command
        .args(["a2a", config.to_str().unwrap(), "--http", "127.0.0.1:0"])
        .args(args);
    served(command)
}

/// `command` (a `seam a2a`), once it says where it serves, checking the card's URL it gives.
fn served(command: Command) -> (Served, std::sync::mpsc::Receiver<String>, String) {
    let (seam, lines, rest) = seam_tests::serve_until(command, "seam a2a: serving ");
    let (url, card) = rest.split_once(' ').unwrap();
    assert_eq!(
        card,
        format!("(agent card at {url}.well-known/agent-card.json)")
    );
    (seam, lines, url.to_string())
}

/// Stops `seam` as Ctrl-C does: it must wind down and exit 0. Returns what else it printed.
fn stop(seam: Served, lines: std::sync::mpsc::Receiver<String>) -> String {
    assert_eq!(seam.interrupt(), Some(0));
    let mut rest = String::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) {
        rest += &line;
        rest.push('\n');
    }
    rest
}

/// The Python fixture's answer to `args`.
fn client(args: &[&str]) -> Value {
    let out = Command::new(a2a_python())
        .arg(root().join("tests/fixtures/a2a_client.py"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the A2A client runs");
    seam_tests::json_of(&out)
}

/// The texts of a task's, event's or message's parts (`parts`, or `status.message.parts`).
fn texts(parts: &Value) -> Vec<String> {
    parts
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|p| p["text"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn state(v: &Value) -> &str {
    v["status"]["state"].as_str().unwrap_or_default()
}

/// A scripted lead whose first turn in a context calls a tool (`lookup`, which is not there:
/// the call fails and the turn goes on) and answers; later turns answer at once.
fn fast_config(dir: &Path) -> PathBuf {
    let answers = [r#"{ text = "answer to {prompt}" }"#; 8].join(", ");
    let text = format!(
        "[agent]\nmodel = \"scripted:lead\"\nsystem_prompt = \"You answer questions.\\nBriefly.\"\n\n\
         [models.scripts.lead]\nsteps = [{{ text = \"looking\", tool_calls = [{{ name = \"lookup\", arguments = {{}} }}] }}, {answers}]\n\n\
         [sessions]\nstore = \"sqlite:{}\"\n\n[a2a]\nname = \"seam-test\"\n",
        dir.join("sessions.db").display()
    );
    let path = dir.join("fast.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_sdks_send_stream_get_and_list_and_tasks_outlive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = fast_config(dir.path());
    let (seam, lines, url) = serve(&config, &["--max-request-bytes", "65536"]);
    let out = client(&["basic", &url]);

    let card = &out["card"];
    assert_eq!(card["name"], "seam-test", "{card}");
    assert_eq!(card["description"], "You answer questions.", "{card}");
    assert_eq!(card["supportedInterfaces"][0]["url"], url.as_str());
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    assert_eq!(card["skills"][0]["id"], "agent");

    // A blocking send returns the completed task, its answer an artifact.
    let first = &out["first"][0];
    assert_eq!(first["kind"], "task");
    assert_eq!(state(first), "TASK_STATE_COMPLETED", "{first}");
    let context = first["contextId"].as_str().unwrap();
    assert_eq!(first["id"], format!("{context}.1"));
    assert_eq!(first["artifacts"][0]["name"], "answer");
    assert_eq!(texts(&first["artifacts"][0]["parts"]), ["answer to hello"]);
    let history: Vec<(&str, Vec<String>)> = first["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), texts(&m["parts"])))
        .collect();
    assert_eq!(
        history,
        [
            ("ROLE_USER", vec!["hello".to_string()]),
            ("ROLE_AGENT", vec!["looking".to_string()]),
            ("ROLE_AGENT", vec!["answer to hello".to_string()]),
        ]
    );
    // The same context: the next turn, the next task.
    let second = &out["second"][0];
    assert_eq!(second["contextId"], context);
    assert_eq!(second["id"], format!("{context}.2"));
    assert_eq!(texts(&second["artifacts"][0]["parts"]), ["answer to again"]);

    // A stream: the task, its tree's doings, the answer, the end; in that order.
    let stream = out["stream"].as_array().unwrap();
    let kinds: Vec<&str> = stream.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["task", "status_update", "artifact_update", "status_update"],
        "{stream:?}"
    );
    assert_eq!(state(&stream[0]), "TASK_STATE_WORKING");
    assert_ne!(stream[0]["contextId"], context, "a new context");
    assert_eq!(state(&stream[1]), "TASK_STATE_WORKING");
    assert_eq!(
        texts(&stream[1]["status"]["message"]["parts"]),
        ["tool `lookup`"]
    );
    assert_eq!(
        texts(&stream[2]["artifact"]["parts"]),
        ["answer to streamed"]
    );
    assert_eq!(state(&stream[3]), "TASK_STATE_COMPLETED");
    let streamed = stream[0]["id"].as_str().unwrap();

    // Get, with the history cut to its last message.
    let got = &out["get"];
    assert_eq!(got["id"], first["id"]);
    assert_eq!(state(got), "TASK_STATE_COMPLETED");
    assert_eq!(got["history"].as_array().unwrap().len(), 1);
    assert_eq!(texts(&got["history"][0]["parts"]), ["answer to hello"]);

    // List: newest first, filtered, paged.
    let ids = |v: &Value| -> Vec<String> {
        v["tasks"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["id"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let newest_first = vec![
        streamed.to_string(),
        format!("{context}.2"),
        format!("{context}.1"),
    ];
    assert_eq!(ids(&out["list_all"]), newest_first);
    assert_eq!(out["list_all"]["totalSize"], 3);
    assert!(out["list_all"]["tasks"][0].get("artifacts").is_none());
    assert_eq!(
        ids(&out["list_context"]),
        [format!("{context}.2"), format!("{context}.1")]
    );
    assert!(out["list_context"]["tasks"][0]["artifacts"].is_array());
    assert!(ids(&out["list_working"]).is_empty());
    let paged: Vec<String> = out["pages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p.as_array().unwrap().iter())
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(paged, newest_first);
    assert_eq!(out["pages"].as_array().unwrap().len(), 3);

    // Errors, as the SDK maps their codes.
    let errors = &out["errors"];
    assert_eq!(
        errors["get_unknown"]["error"], "TaskNotFoundError",
        "{errors}"
    );
    assert_eq!(errors["cancel_ended"]["error"], "TaskNotCancelableError");
    assert_eq!(
        errors["send_to_ended"]["error"],
        "UnsupportedOperationError"
    );
    assert!(errors["send_to_ended"]["message"]
        .as_str()
        .unwrap()
        .contains("send without taskId in its context"));
    assert_eq!(errors["empty"]["error"], "InvalidParamsError");
    assert_eq!(
        errors["subscribe_ended"]["error"],
        "UnsupportedOperationError"
    );

    // Below the SDK: no version header, another version, a body past the cap.
    for key in ["no_version", "old_version"] {
        let error = &out[key]["error"];
        assert_eq!(error["code"], -32009, "{key}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("A2A-Version: 1.0"),
            "{error}"
        );
    }
    assert_eq!(out["too_big"], 413);
    stop(seam, lines);

    // Restarted on the same store: the tasks read back, and the context continues.
    let (seam, lines, url) = serve(&config, &[]);
    let task1 = first["id"].as_str().unwrap();
    let after = client(&["after_restart", &url, task1]);
    assert_eq!(state(&after["get"]), "TASK_STATE_COMPLETED");
    assert_eq!(
        texts(&after["get"]["artifacts"][0]["parts"]),
        ["answer to hello"]
    );
    assert_eq!(ids(&after["list"]), newest_first);
    let continued = &after["continued"][0];
    assert_eq!(continued["id"], format!("{context}.3"));
    assert_eq!(state(continued), "TASK_STATE_COMPLETED");

    // One direction with the JavaScript SDK: it picks the 1.0 interface, sends and streams.
    let js = Command::new("node")
        .arg(root().join("tests/fixtures/a2a_client.mjs"))
        .arg(root().join("target/toolchains/a2a-js/node_modules"))
        .arg(&url)
        .output()
        .expect("node runs");
    assert!(js.status.success(), "{}", seam_tests::text(&js.stderr));
    let js: Value = serde_json::from_slice(&js.stdout).unwrap();
    assert_eq!(js["protocolVersion"], "1.0");
    assert_eq!(js["sent"]["state"], "TASK_STATE_COMPLETED", "{js}");
    assert_eq!(
        js["sent"]["answer"],
        serde_json::json!(["answer to from js"])
    );
    let kinds: Vec<&str> = js["stream"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"],
        "{js}"
    );
    assert_eq!(js["stream"][3]["state"], "TASK_STATE_COMPLETED");
    stop(seam, lines);
}

#[test]
fn a_cancel_ends_the_tree_and_a_resubscription_gets_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tree.toml");
    let text = "[agent]\nmodel = \"scripted:lead\"\n\n[models.scripts.lead]\nsteps = [\n  \
         { text = \"delegating\", tool_calls = [{ name = \"wait\", arguments = { description = \"d\", prompt = \"p\" } }] },\n  \
         { text = \"after: {tool_results}\" },\n]\n\n"
        .to_string()
        + &format!(
            "[sessions]\nstore = \"sqlite:{}\"\n\n",
            dir.path().join("tree.db").display()
        )
        + &seam_tests::entry(
        "slow",
        &seam_tests::guest("mock_provider").with_extension("").display().to_string(),
        "name = \"slow\", steering = true, progress = [\"started\"], awaitMessages = 1",
    ) + &seam_tests::entry(
        "wait",
        &seam_tests::guest("subagent_tool").with_extension("").display().to_string(),
        "provider = \"slow\", toolName = \"wait\"",
    );
    std::fs::write(&config, text).unwrap();
    let (seam, lines, url) = serve(&config, &["--events"]);
    let out = client(&["cancel", &url]);

    // The dropped stream saw the delegation and the child's progress.
    let dropped: Vec<Vec<String>> = out["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| texts(&e["status"]["message"]["parts"]))
        .collect();
    assert!(
        dropped
            .iter()
            .any(|t| t.iter().any(|t| t.starts_with("delegating to `slow`"))),
        "{dropped:?}"
    );
    // Resubscribed: the task as it stands, then the rest, to the end.
    let again = out["resubscribed"].as_array().unwrap();
    assert_eq!(again[0]["kind"], "task", "{again:?}");
    assert_eq!(state(&again[0]), "TASK_STATE_WORKING");
    let last = again.last().unwrap();
    assert_eq!(last["kind"], "status_update");
    assert_eq!(state(last), "TASK_STATE_CANCELED");
    assert_eq!(state(&out["cancelled"]), "TASK_STATE_CANCELED");
    assert_eq!(state(&out["get"]), "TASK_STATE_CANCELED");

    let events = stop(seam, lines);
    let aborted = events.lines().any(|l| {
        l.contains("\"event\":\"subagent/end\"")
            && l.contains("\"provider\":\"slow\"")
            && l.contains("\"stop-reason\":\"aborted\"")
    });
    assert!(aborted, "no aborted end of the delegation:\n{events}");
}

#[test]
fn a_turn_whose_process_died_reads_back_failed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("orphan.db");
    let config = dir.path().join("orphan.toml");
    let text = format!(
        "[agent]\nmodel = \"scripted:lead\"\n\n[models.scripts.lead]\nsteps = [{{ text = \"slow\", delay_ms = 600000 }}]\n\n\
         [sessions]\nstore = \"sqlite:{}\"\n",
        db.display()
    );
    std::fs::write(&config, text).unwrap();
    let (mut seam, lines, url) = serve(&config, &["--events"]);
    let sent = rpc(
        &url,
        "SendMessage",
        serde_json::json!({
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "orphan"}]},
            "configuration": {"returnImmediately": true}
        }),
    );
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        state(&sent["result"]["task"]),
        "TASK_STATE_WORKING",
        "{sent}"
    );
    // The model call has begun: the turn is in the store.
    loop {
        let line = lines
            .recv_timeout(seam_tests::BARRIER_TIMEOUT)
            .expect("the turn starts");
        if line.contains("\"event\":\"agent/turn-start\"") {
            break;
        }
    }
    // Killed: nothing winds down.
    seam.0.kill().unwrap();
    seam.0.wait().unwrap();
    drop(lines);
    let (seam, lines, url) = serve(&config, &[]);
    let got = rpc(&url, "GetTask", serde_json::json!({ "id": task }));
    let task = &got["result"];
    assert_eq!(state(task), "TASK_STATE_FAILED", "{got}");
    let said = texts(&task["status"]["message"]["parts"]).join("");
    assert!(said.contains("ended before the turn did"), "{said}");
    assert!(said.contains("send a new message in its context"), "{said}");
    stop(seam, lines);
}

/// A JSON-RPC request to `url` with std only (A2A-Version 1.0): the response.
fn rpc(url: &str, method: &str, params: Value) -> Value {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        .to_string();
    let authority = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "POST / HTTP/1.1\r\nHost: {authority}\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (_, body) = response.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
}

/// A port free now, for a webhook the config must name before it listens.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on `url`'s server with std only: the body.
fn http_get(url: &str, path: &str) -> String {
    let authority = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

#[test]
fn steering_an_approval_and_push_notifications() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = dir.path().join("approve.toml");
    let text = format!(
        "[agent]\nmodel = \"scripted:lead\"\n\n[models.scripts.lead]\nsteps = [\n  \
         {{ text = \"asking\", tool_calls = [{{ name = \"secret\", arguments = {{ description = \"d\", prompt = \"open\" }} }}] }},\n  \
         {{ text = \"heard: {{user_messages}}\" }},\n]\n\n\
         [a2a]\npush_origins = [\"http://127.0.0.1:{port}\"]\nskills = [\"vault\"]\n\n",
    ) + &seam_tests::entry(
        "vault",
        &seam_tests::guest("mock_provider").with_extension("").display().to_string(),
        "name = \"vault\", reply = \"the secret\"",
    ) + &seam_tests::entry(
        "secret",
        &seam_tests::guest("subagent_tool").with_extension("").display().to_string(),
        "provider = \"vault\", toolName = \"secret\", approve = \"ask\"",
    );
    std::fs::write(&config, text).unwrap();
    let (seam, lines, url) = serve(&config, &[]);

    let card: Value =
        serde_json::from_str(&http_get(&url, "/.well-known/agent-card.json")).unwrap();
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills, ["agent", "vault"], "{card}");

    let out = client(&["steer_approve_push", &url, &port.to_string()]);
    assert_eq!(state(&out["sent"][0]), "TASK_STATE_WORKING", "{out}");
    // Steered while it runs (before or after the approval was asked: it waits there either way).
    assert_eq!(out["steered"][0]["id"], out["sent"][0]["id"]);
    // The approval: the task needs input, its message names the call and the request.
    let approval = out["approval"].as_str().unwrap();
    let waiting = &out["input_required"];
    assert_eq!(state(waiting), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        waiting["status"]["message"]["metadata"]["approval"],
        approval
    );
    let asked = texts(&waiting["status"]["message"]["parts"]).join("");
    assert!(asked.contains("call tool `secret`"), "{asked}");
    // Allowed: the task works again (or has already ended: the answer to `allow` races the
    // rest of the turn), and ends with the steering in what the model saw.
    let after = state(&out["allowed"][0]);
    assert!(
        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"].contains(&after),
        "{after}"
    );
    let events = out["events"].as_array().unwrap();
    assert_eq!(
        state(events.last().unwrap()),
        "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    let said: Vec<String> = events
        .iter()
        .flat_map(|e| texts(&e["status"]["message"]["parts"]))
        .collect();
    assert!(
        said.iter().any(|t| t.starts_with("delegating to `vault`")),
        "{said:?}"
    );
    let final_task = &out["final"];
    assert_eq!(state(final_task), "TASK_STATE_COMPLETED");
    assert_eq!(
        texts(&final_task["artifacts"][0]["parts"]),
        ["heard: go | also this"]
    );

    // The webhook heard each change of state, with the token and the credentials.
    let received = out["received"].as_array().unwrap();
    let states: Vec<&str> = received
        .iter()
        .map(|r| {
            let body = &r["body"];
            body.get("statusUpdate")
                .or_else(|| body.get("task"))
                .map(state)
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        states,
        [
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ],
        "{received:?}"
    );
    assert!(received.last().unwrap()["body"].get("task").is_some());
    for r in received {
        assert_eq!(r["path"], "/hook");
        assert_eq!(r["token"], "tok-123");
        assert_eq!(r["authorization"], "Bearer cred");
    }
    // The context runs a turn: a new one there is refused, naming the task to send to.
    let busy = &out["busy"];
    assert_eq!(busy["error"], "UnsupportedOperationError", "{busy}");
    assert!(
        busy["message"]
            .as_str()
            .unwrap()
            .contains("send to that taskId"),
        "{busy}"
    );
    // The push configs: listed, read, deleted.
    assert_eq!(
        out["configs"]["configs"].as_array().unwrap().len(),
        1,
        "{out}"
    );
    assert_eq!(
        out["config"]["url"],
        format!("http://127.0.0.1:{port}/hook")
    );
    assert_eq!(out["config"]["token"], "tok-123");
    assert!(
        out["configs_after_delete"].get("configs").is_none(),
        "{out}"
    );
    let refused = &out["refused_origin"];
    assert_eq!(refused["error"], "InvalidParamsError", "{refused}");
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .contains("push_origins"));
    stop(seam, lines);
}

#[test]
fn what_cannot_be_served_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = fast_config(dir.path());
    let refused = |config: &Path, addr: &str| {
        let out = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
            .args(["a2a", config.to_str().unwrap(), "--http", addr])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        seam_tests::text(&out.stderr)
    };
    let err = refused(&config, "0.0.0.0:0");
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("--token-env"), "{err}");

    let skill = dir.path().join("skill.toml");
    std::fs::write(&skill, "[a2a]\nskills = [\"nobody\"]\n").unwrap();
    let err = refused(&skill, "127.0.0.1:0");
    assert!(
        err.contains("[a2a]: key `skills`: no provider `nobody`"),
        "{err}"
    );

    let unknown = dir.path().join("unknown.toml");
    std::fs::write(&unknown, "[a2a]\nnmae = \"x\"\n").unwrap();
    let err = refused(&unknown, "127.0.0.1:0");
    assert!(err.contains("[a2a]") && err.contains("nmae"), "{err}");

    let origin = dir.path().join("origin.toml");
    std::fs::write(&origin, "[a2a]\npush_origins = [\"ftp://x\"]\n").unwrap();
    let err = refused(&origin, "127.0.0.1:0");
    assert!(err.contains("[a2a]: key `push_origins`"), "{err}");
}

/// Seam delegating to Seam: a `kind = "a2a"` entry on one `seam` process whose agent is another
/// `seam a2a`. The answer comes back as any provider's; a cancel on the caller's side (Ctrl-C
/// of `seam delegate`) reaches the served turn, which ends aborted.
#[test]
fn seam_delegates_to_seam_over_a2a() {
    let dir = tempfile::tempdir().unwrap();
    let served = |name: &str, step: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!("[agent]\nmodel = \"scripted:remote\"\n\n[models.scripts.remote]\nsteps = [{step}]\n"),
        )
        .unwrap();
        serve(&path, &["--events"])
    };
    let delegate = |url: &str, prompt: &str| {
        let caller = dir.path().join(format!("caller-{prompt}.toml"));
        let origin = url.trim_end_matches('/');
        std::fs::write(
            &caller,
            format!(
                "[[plugin]]\nid = \"remote\"\nkind = \"a2a\"\nurl = \"{url}\"\ngrants = {{ http = [\"{origin}\"] }}\n"
            ),
        )
        .unwrap();
        seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .arg("delegate")
            .arg(&caller)
            .args(["--provider", "remote", "--prompt", prompt, "--events"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    let (seam, lines, url) = served("quick.toml", r#"{ text = "remote answer: {prompt}" }"#);
    let out = delegate(&url, "hello").wait_with_output().unwrap();
    let (stdout, stderr) = (seam_tests::text(&out.stdout), seam_tests::text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("remote answer: hello"),
        "{stdout}\n{stderr}"
    );
    assert!(stderr.contains("\"stop-reason\":\"completed\""), "{stderr}");
    stop(seam, lines);

    // A turn that never ends by itself: Ctrl-C of the caller once the served turn began.
    let (seam, lines, url) = served(
        "slow.toml",
        r#"{ text = "never in time", delay_ms = 600000 }"#,
    );
    let mut child = delegate(&url, "wait");
    let caller_lines = seam_tests::lines_of(child.stderr.take().unwrap());
    let began = lines.iter().find(|l| l.contains("\"agent/turn-start\""));
    assert!(began.is_some(), "the served agent began its turn");
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(!child.wait().unwrap().success());
    let said: Vec<String> = caller_lines.iter().collect();
    assert!(
        said.iter()
            .any(|l| l.contains("\"subagent/end\"") && l.contains("\"stop-reason\":\"aborted\"")),
        "{said:#?}"
    );
    let ended = lines
        .iter()
        .find(|l| l.contains("\"agent/turn-end\""))
        .expect("the served turn ended");
    assert!(ended.contains("\"stop-reason\":\"aborted\""), "{ended}");
    stop(seam, lines);
}

/// Budgets hold for a served task, and a token-guarded `seam a2a` is reached by a Seam entry
/// whose credentials come from a granted variable: the served turn, stopped by its `[agent]`
/// budget after one model call, reads `FAILED` naming the budget, and the calling run ends
/// `error` with that diagnostic. Without the token the card is refused (401) at load.
#[test]
fn a_budget_holds_for_a_served_task_behind_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let budgeted = dir.path().join("budget.toml");
    std::fs::write(
        &budgeted,
        "[agent]\nmodel = \"scripted:remote\"\n\n[agent.budget]\nmodel_calls = 1\n\n\
         [models.scripts.remote]\nsteps = [\n\
         { text = \"looking\", tool_calls = [{ name = \"lookup\", arguments = {} }] },\n\
         { text = \"never reached\" },\n]\n",
    )
    .unwrap();
    let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    command
        .env("A2A_TOKEN", "t0ken")
        .args(["a2a", budgeted.to_str().unwrap(), "--http", "127.0.0.1:0"])
        .args(["--token-env", "A2A_TOKEN"]);
    let (seam, lines, url) = served(command);
    let origin = url.trim_end_matches('/');
    let entry = |headers: &str| {
        format!(
            "[[plugin]]\nid = \"remote\"\nkind = \"a2a\"\nurl = \"{url}\"\n{headers}\
             [plugin.grants]\nhttp = [\"{origin}\"]\nenv = [\"REMOTE_AUTH\"]\n"
        )
    };
    let run = |name: &str, text: String, verb: &[&str]| {
        let config = dir.path().join(name);
        std::fs::write(&config, text).unwrap();
        seam_tests::outcome(
            seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
                .env("XDG_STATE_HOME", dir.path().join("state"))
                .env("REMOTE_AUTH", "Bearer t0ken")
                .arg(verb[0])
                .arg(&config)
                .args(&verb[1..]),
        )
    };
    // Without the header the card is refused.
    let (code, out, err) = run("bare.toml", entry(""), &["check"]);
    assert_ne!(code, Some(0), "{out}\n{err}");
    assert!(format!("{out}{err}").contains("401"), "{out}\n{err}");
    // With it, the task runs, and its budget stops it.
    let (code, out, err) = run(
        "authed.toml",
        entry("config = { headers = { Authorization = \"REMOTE_AUTH\" } }\n"),
        &[
            "delegate",
            "--provider",
            "remote",
            "--prompt",
            "spend",
            "--events",
        ],
    );
    assert_ne!(code, Some(0), "{out}\n{err}");
    let end = err
        .lines()
        .find(|l| l.contains("\"subagent/end\""))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(end.contains("\"stop-reason\":\"error\""), "{end}");
    assert!(
        end.contains("budget"),
        "the served turn's diagnostic: {end}"
    );
    stop(seam, lines);
}

/// A request for approval denied by the client with a data part (`{"approval": "deny"}`): the
/// task goes back to working, the tool is not called (its delegation never starts), and the
/// turn ends with the refusal in what the model saw.
#[test]
fn a_denied_approval_is_answered_with_a_data_part() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("deny.toml");
    let text = "[agent]\nmodel = \"scripted:lead\"\n\n[models.scripts.lead]\nsteps = [\n  \
         { text = \"asking\", tool_calls = [{ name = \"secret\", arguments = { description = \"d\", prompt = \"open\" } }] },\n  \
         { text = \"result: {tool_results}\" },\n]\n\n"
        .to_string()
        + &seam_tests::entry(
            "vault",
            &seam_tests::guest("mock_provider").with_extension("").display().to_string(),
            "name = \"vault\", reply = \"the secret\"",
        )
        + &seam_tests::entry(
            "secret",
            &seam_tests::guest("subagent_tool").with_extension("").display().to_string(),
            "provider = \"vault\", toolName = \"secret\", approve = \"ask\"",
        );
    std::fs::write(&config, text).unwrap();
    let (seam, lines, url) = serve(&config, &["--events"]);
    let out = client(&["deny", &url]);
    assert!(out["approval"].is_string(), "{out}");
    let after = state(&out["answered"][0]);
    assert!(
        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"].contains(&after),
        "{out}"
    );
    let final_task = &out["final"];
    assert_eq!(state(final_task), "TASK_STATE_COMPLETED", "{out}");
    let answer = texts(&final_task["artifacts"][0]["parts"]).join("");
    assert!(
        answer.contains("denied by the A2A client") && answer.contains("was not called"),
        "{answer}"
    );
    assert!(
        !answer.contains("the secret"),
        "the tool was not called: {answer}"
    );
    let printed = stop(seam, lines);
    assert!(
        !printed.contains("\"subagent/start\""),
        "no delegation started: {printed}"
    );
}
