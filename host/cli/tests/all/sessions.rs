//! Durable sessions through the real `seam` binary: `seam run` killed with SIGKILL at points
//! chosen by the events it printed, the store reopened after each kill, `--session` continuing,
//! and the `seam sessions` commands.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use seam_host::session_store::{RunStatus, SessionStore, SqliteStore, StoreLimits};

/// `seam` with the test cache, and a state folder of the test's own.
fn seam(state: &Path) -> Command {
    let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
    command.env("XDG_STATE_HOME", state);
    command
}

/// A turn with two background children (`research`, slow) and a foreground one
/// (`second_opinion`, on `fork`), then an answer; the store is `sessions.db` next to the config.
fn crash_config(dir: &Path) -> PathBuf {
    let guest = |name: &str| seam_tests::guest(name).display().to_string();
    let config = format!(
        r#"
[agent]
model = "scripted:lead"

[sessions]
store = "sqlite:sessions.db"

[models.scripts.lead]
steps = [
    {{ text = "research in the background, twice", tool_calls = [
        {{ name = "research", arguments = {{ description = "d", prompt = "dig", run_in_background = true }} }},
        {{ name = "research", arguments = {{ description = "e", prompt = "dig deeper", run_in_background = true }} }},
    ] }},
    {{ text = "a second opinion", tool_calls = [
        {{ name = "second_opinion", arguments = {{ description = "d", prompt = "doubt" }} }},
    ] }},
    {{ text = "done: {{tool_results}}" }},
]

[models.scripts.researcher]
steps = [{{ text = "research result", delay_ms = 1500 }}]

[models.scripts.critic]
steps = [{{ text = "critic result", delay_ms = 300 }}]

[models.scripts.after]
steps = [{{ text = "continued: {{prompt}}" }}]

[[plugin]]
id = "spawn"
component = "{spawn}"

[[plugin]]
id = "fork"
component = "{fork}"

[[plugin]]
id = "research"
component = "{tool}"
config = {{ provider = "spawn", toolName = "research", agentOptions = {{ model = "scripted:researcher" }}, runInBackground = true }}

[[plugin]]
id = "second-opinion"
component = "{tool}"
config = {{ provider = "fork", toolName = "second_opinion", agentOptions = {{ model = "scripted:critic" }} }}
"#,
        spawn = guest("spawn_provider"),
        fork = guest("fork_provider"),
        tool = guest("subagent_tool"),
    );
    let path = dir.join("crash.toml");
    std::fs::write(&path, config).unwrap();
    path
}

/// Runs the crash config and kills `seam` with SIGKILL once it has printed `after` event lines
/// past its turn's start; returns every event line it printed.
fn run_and_kill(config: &Path, state: &Path, after: usize) -> Vec<String> {
    let mut child = seam(state)
        .args(["run", config.to_str().unwrap(), "go", "--events"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = seam_tests::lines_of(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let mut past_start: Option<usize> = None;
    loop {
        if past_start.is_some_and(|n| n >= after) {
            break;
        }
        let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) else {
            panic!("seam printed no more events: {seen:#?}");
        };
        if !line.starts_with('{') {
            continue;
        }
        if let Some(n) = &mut past_start {
            *n += 1;
        } else if line.contains("\"event\":\"agent/turn-start\"") {
            past_start = Some(0);
        }
        seen.push(line);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // What it printed before it died was received by a listener too.
    seen.extend(rx.iter().filter(|l| l.starts_with('{')));
    seen
}

/// Where the kill loop kills: `SEAM_KILLS` points (50 by default) after 0 to 13 event lines,
/// spread by a fixed pseudo-random sequence so that every run of the test kills at the same
/// points.
fn kill_points() -> Vec<usize> {
    let kills: usize = std::env::var("SEAM_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let mut x: u64 = 0x5eed;
    (0..kills)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % 14) as usize
        })
        .collect()
}

#[test]
fn a_run_killed_at_any_point_leaves_a_sound_store_that_continues() {
    let mut interrupted_seen = 0;
    for after in kill_points() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let config = crash_config(dir.path());
        let printed = run_and_kill(&config, &state, after);

        let db = dir.path().join("sessions.db");
        let session = {
            let store = SqliteStore::open(&db, StoreLimits::default()).unwrap();
            assert_eq!(store.integrity_check().unwrap(), "ok", "kill after {after}");
            let journal = store.journal().unwrap();
            for line in &printed {
                assert!(
                    journal.contains(line),
                    "kill after {after}: a printed event is not in the store: {line}"
                );
            }
            let sessions = store.sessions().unwrap();
            let top = sessions
                .iter()
                .find(|s| s.parent.is_none())
                .expect("the top-level session is kept");
            // Every run, at every depth: settled, or interrupted with a diagnostic.
            let mut pending = vec![top.id.clone()];
            while let Some(session) = pending.pop() {
                for run in store.runs_of(&session).unwrap() {
                    match run.status {
                        RunStatus::Ended => assert!(run.stop_reason.is_some(), "{run:?}"),
                        RunStatus::Interrupted => {
                            interrupted_seen += 1;
                            assert!(run.diagnostic.is_some(), "{run:?}");
                            assert!(run.stop_reason.is_none(), "never completed: {run:?}");
                            // Resumable: its child's session is there to continue (one
                            // interrupted before its child existed is listed as failed).
                            if let Some(child) = &run.child_session {
                                assert!(store.session(child).unwrap().is_some(), "{run:?}");
                            }
                        }
                        RunStatus::Running => panic!("kill after {after}: still running: {run:?}"),
                    }
                    pending.extend(run.child_session.clone());
                }
            }
            top.id.clone()
        };

        // The session continues from its completed turns.
        let out = seam(&state)
            .args([
                "run",
                config.to_str().unwrap(),
                "--session",
                &session,
                "--model",
                "scripted:after",
                "--json",
                "again",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answer["session"], session.as_str());
        assert_eq!(answer["output"], "continued: again");
        let store = SqliteStore::open(&db, StoreLimits::default()).unwrap();
        let last = store.events(&session).unwrap();
        assert!(last.last().unwrap().body.contains("turn/end"), "{last:?}");
    }
    assert!(
        interrupted_seen > 0,
        "no kill point caught a run live: the kill points are too late to test anything"
    );
}

#[test]
fn sessions_commands_list_show_tree_remove_and_collect() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = crash_config(dir.path());
    let store = format!("sqlite:{}", dir.path().join("sessions.db").display());
    let out = seam(&state)
        .args(["run", config.to_str().unwrap(), "go", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = answer["session"].as_str().unwrap().to_string();

    let sessions = |args: &[&str]| {
        let out = seam(&state)
            .arg("sessions")
            .args(["--store", &store])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            seam_tests::text(&out.stdout),
            seam_tests::text(&out.stderr),
        )
    };
    let (code, list, _) = sessions(&["list", "--json"]);
    assert_eq!(code, Some(0));
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "children are not listed: {list}"
    );
    assert_eq!(list[0]["id"], id.as_str());

    let (code, show, _) = sessions(&["show", &id, "--json"]);
    assert_eq!(code, Some(0));
    let show: serde_json::Value = serde_json::from_str(&show).unwrap();
    let kinds: Vec<&str> = show
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"turn/start"));
    assert_eq!(kinds.last(), Some(&"turn/end"));
    assert!(kinds.contains(&"tool-result"), "{kinds:?}");

    let (code, tree, _) = sessions(&["tree", &id, "--json"]);
    assert_eq!(code, Some(0));
    let tree: serde_json::Value = serde_json::from_str(&tree).unwrap();
    let runs = tree["runs"].as_array().unwrap();
    let providers: Vec<&str> = runs
        .iter()
        .map(|r| r["provider"].as_str().unwrap())
        .collect();
    assert_eq!(providers, ["spawn", "spawn", "fork"], "{tree}");
    for run in runs {
        assert_eq!(run["stop-reason"], "completed", "{tree}");
        assert!(
            run["ended-ms"].as_u64() >= run["started-ms"].as_u64(),
            "{tree}"
        );
        assert!(
            run["session"].is_string(),
            "each child's session is linked: {tree}"
        );
    }
    let (code, tree_text, _) = sessions(&["tree", &id]);
    assert_eq!(code, Some(0));
    assert!(tree_text.contains("on `spawn`: completed"), "{tree_text}");

    let (code, _, err) = sessions(&["show", "no-such-session"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("no-such-session") && err.contains("sessions.db"),
        "{err}"
    );
    let (code, _, err) = sessions(&["gc", "--older-than", "soon"]);
    assert_eq!(code, Some(1), "{err}");

    let (code, out, _) = sessions(&["gc", "--older-than", "1h"]);
    assert_eq!((code, out.trim()), (Some(0), "removed 0 session(s)"));
    let (code, _, _) = sessions(&["rm", &id]);
    assert_eq!(code, Some(0));
    let (_, list, _) = sessions(&["list", "--json"]);
    assert_eq!(list.trim(), "[]");
    let (code, _, err) = sessions(&["rm", &id]);
    assert_eq!(code, Some(1));
    assert!(err.contains(&id), "{err}");
}

/// Checks that `stored` holds the events of `printed`, each once, and in the order `printed`
/// has them for each emitter: the events of one agent (or one of its tool calls) and those of
/// one run. Emitters going at once commit in one order and may print in another (each prints
/// after its own commit), so their events may interleave differently.
fn same_stream(stored: &[String], printed: &[String]) {
    let mut sorted_stored = stored.to_vec();
    let mut sorted_printed = printed.to_vec();
    sorted_stored.sort();
    sorted_printed.sort();
    assert_eq!(
        sorted_stored, sorted_printed,
        "not the same events:\nstored {stored:#?}\nprinted {printed:#?}"
    );
    let emitter = |line: &String| {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let event = v["event"].as_str().unwrap_or_default();
        let family = event.split('/').next().unwrap_or_default().to_string();
        (family, v["id"].to_string(), v["call"].to_string())
    };
    let by_emitter = |lines: &[String]| {
        let mut map: std::collections::BTreeMap<_, Vec<String>> = Default::default();
        for line in lines {
            map.entry(emitter(line)).or_default().push(line.clone());
        }
        map
    };
    assert_eq!(by_emitter(stored), by_emitter(printed));
}

/// Runs the crash config twice in `dir` (once, then continuing its session) with `--events`,
/// and checks that `seam sessions STORE_ARGS events ID` prints what both printed, in order: the
/// stream the store journaled for the session's processes. `store_args` say where the store is;
/// `store_name` is how an error names it.
fn check_the_event_stream(dir: &Path, config: &Path, store_args: &[&str], store_name: &str) {
    let state = dir.join("state");
    let config = config.to_str().unwrap();
    let events_of = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(str::to_string)
            .collect()
    };
    let (code, out, err) = run(&state, &[config, "go", "--events", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let id = answer["session"].as_str().unwrap().to_string();
    let mut printed = events_of(&err);
    assert!(
        printed
            .iter()
            .any(|l| l.contains("\"event\":\"subagent/end\"")),
        "{err}"
    );
    // A second process continues the session: its stream follows the first one's.
    let (_, _, err) = run(&state, &[config, "again", "--session", &id, "--events"]);
    let second = events_of(&err);
    assert!(
        second
            .iter()
            .any(|l| l.contains("\"event\":\"agent/created\"")),
        "{err}"
    );
    printed.extend(second);

    let sessions = |args: &[&str]| {
        seam(&state)
            .arg("sessions")
            .args(store_args)
            .args(args)
            .output()
            .unwrap()
    };
    let out = sessions(&["events", &id]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let stored: Vec<String> = seam_tests::text(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    same_stream(&stored, &printed);

    let out = sessions(&["events", "no-such-session"]);
    assert_eq!(out.status.code(), Some(1));
    let err = seam_tests::text(&out.stderr);
    assert!(
        err.contains("no-such-session") && err.contains(store_name),
        "{err}"
    );
}

/// `seam sessions events ID` prints what `seam run --events` printed, in order, across a
/// continuation, from the SQLite store.
#[test]
fn sessions_events_prints_the_event_stream_run_events_printed() {
    let dir = tempfile::tempdir().unwrap();
    let config = crash_config(dir.path());
    let store = format!("sqlite:{}", dir.path().join("sessions.db").display());
    check_the_event_stream(dir.path(), &config, &["--store", &store], "sessions.db");
}

/// The same from the JetStream store of a `[cluster]`.
#[test]
fn sessions_events_prints_the_event_stream_kept_in_jetstream() {
    let server = seam_tests::nats::NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = crash_config(dir.path());
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "store = \"sqlite:sessions.db\"",
        &format!(
            "store = \"nats\"\n\n[cluster]\nnats = \"{}\"\nname = \"events\"",
            server.url
        ),
    );
    assert!(text.contains("[cluster]"));
    std::fs::write(&config, text).unwrap();
    let config_arg = config.to_str().unwrap();
    check_the_event_stream(dir.path(), &config, &["--config", config_arg], &server.url);
}

#[test]
fn a_store_that_cannot_be_opened_fails_the_run_at_its_start_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-folder");
    std::fs::write(&blocker, "").unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        "[agent]\nmodel = \"scripted:x\"\n[sessions]\nstore = \"sqlite:not-a-folder/s.db\"\n\
         [models.scripts.x]\nsteps = [{ text = \"hi\" }]\n",
    )
    .unwrap();
    let out = seam(&dir.path().join("state"))
        .args(["run", config.to_str().unwrap(), "go", "--events"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = seam_tests::text(&out.stderr);
    assert!(err.contains("not-a-folder/s.db"), "{err}");
    assert!(!err.contains("agent/turn-start"), "nothing ran: {err}");

    // A bad `[sessions] store` names the key.
    std::fs::write(&config, "[sessions]\nstore = \"postgres://x\"\n").unwrap();
    let out = seam(&dir.path().join("state"))
        .args(["run", config.to_str().unwrap(), "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = seam_tests::text(&out.stderr);
    assert!(
        err.contains("[sessions]") && err.contains("`store`"),
        "{err}"
    );

    // Without `[sessions] store`, the default file is under XDG_STATE_HOME.
    std::fs::write(
        &config,
        "[agent]\nmodel = \"scripted:x\"\n[models.scripts.x]\nsteps = [{ text = \"hi\" }]\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let out = seam(&state)
        .args(["run", config.to_str().unwrap(), "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    assert!(state.join("seam").join("sessions.db").is_file());
}

/// The repository's root (the examples' component paths are relative to `examples/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The user messages of a stored session, as text.
fn user_messages(store: &SqliteStore, session: &str) -> Vec<String> {
    store
        .events(session)
        .unwrap()
        .iter()
        .filter(|e| e.kind == "user-message")
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(&e.body).unwrap();
            v["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["value"].as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// Runs `seam run` to its end; returns (exit code, stdout, stderr).
fn run(state: &Path, args: &[&str]) -> (i32, String, String) {
    let out = seam(state).arg("run").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        seam_tests::text(&out.stdout),
        seam_tests::text(&out.stderr),
    )
}

/// `examples/continue.toml`, as documented: a background child started by one process is
/// listed by a later one without being resumed, then resumed from the store in its own
/// session by `send_message`, and read with `subagent_output`.
#[test]
fn a_background_child_is_continued_by_a_later_process() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = root().join("examples/continue.toml");
    let config = config.to_str().unwrap();
    let (code, out, err) = run(&state, &[config, "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let first: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let session = first["session"].as_str().unwrap().to_string();

    let (code, out, err) = run(
        &state,
        &[
            config,
            "--session",
            &session,
            "--model",
            "scripted:followup",
            "Anything new?",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("researcher (seeing"), "{out}\n{err}");

    let store = SqliteStore::open(&state.join("seam/sessions.db"), StoreLimits::default()).unwrap();
    let runs = store.runs_of(&session).unwrap();
    assert_eq!(runs.len(), 2, "two activations: {runs:#?}");
    let child = runs[0]
        .child_session
        .clone()
        .expect("the child keeps a session");
    assert_eq!(runs[1].child_session.as_deref(), Some(child.as_str()));
    assert!(runs
        .iter()
        .all(|r| r.stop_reason.as_deref() == Some("completed")));
    assert_eq!(
        user_messages(&store, &child),
        [
            "How do Wasm hosts isolate plugins?",
            "Now the weakest point, briefly."
        ]
    );
    // Listed from the store by the second process, after the end was announced to it once.
    let lead = user_messages(&store, &session);
    let announced = lead.iter().filter(|m| m.contains("has settled")).count();
    assert_eq!(announced, 1, "{lead:#?}");
    let listing = store
        .events(&session)
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "tool-result" && e.body.contains("list_agents"))
        .expect("the list_agents result");
    assert!(
        listing.body.contains(&child) && listing.body.contains("idle"),
        "{}",
        listing.body
    );
}

/// The config of the `--detach` test: `researcher` is the child's script, and the store is
/// `sessions.db` in `dir`, shared by every config written there.
fn detach_config(dir: &Path, name: &str, researcher: &str) -> PathBuf {
    let config =
        seam_tests::continuation_config("[sessions]\nstore = \"sqlite:sessions.db\"", researcher);
    let path = dir.join(name);
    std::fs::write(&path, config).unwrap();
    path
}

/// `--detach` leaves a running background child `interrupted`; a later process (whose config
/// gives the child a script that ends) resumes it with `send_message` and reads its answer.
/// Whether or not the first activation began its turn before it was let go of, nothing sent
/// to the child is lost.
#[test]
fn a_detached_child_is_left_interrupted_and_a_later_process_continues_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let slow = detach_config(
        dir.path(),
        "slow.toml",
        r#"{ text = "never in time", delay_ms = 600000 }"#,
    );
    let quick = detach_config(
        dir.path(),
        "quick.toml",
        r#"{ text = "picked up: {prompt}" }"#,
    );

    let (code, out, err) = run(
        &state,
        &[slow.to_str().unwrap(), "go", "--detach", "--json"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("1 background run left interrupted"), "{err}");
    let session = serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    let db = dir.path().join("sessions.db");
    {
        let store = SqliteStore::open(&db, StoreLimits::default()).unwrap();
        let runs = store.runs_of(&session).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].status, RunStatus::Interrupted);
        assert!(
            runs[0].child_session.is_some(),
            "let go of once its child existed"
        );
        assert!(
            runs[0]
                .diagnostic
                .as_deref()
                .unwrap_or_default()
                .contains("--detach"),
            "{runs:#?}"
        );
    }

    let (code, out, err) = run(
        &state,
        &[
            quick.to_str().unwrap(),
            "--session",
            &session,
            "--model",
            "scripted:followup",
            "again",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("picked up") && out.contains("wrap up"),
        "{out}\n{err}"
    );
    let store = SqliteStore::open(&db, StoreLimits::default()).unwrap();
    let runs = store.runs_of(&session).unwrap();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let child = runs[0].child_session.clone().unwrap();
    assert_eq!(runs[1].child_session.as_deref(), Some(child.as_str()));
    assert_eq!(runs[1].stop_reason.as_deref(), Some("completed"));
    let said = user_messages(&store, &child).join("\n");
    let (dig, wrap) = (said.find("dig"), said.find("wrap up"));
    assert!(
        dig.is_some() && wrap.is_some() && dig < wrap,
        "every message reached the child, in order: {said:?}"
    );
    // The interrupted first activation was announced to the second process once, with how to
    // continue it.
    let lead = user_messages(&store, &session);
    let told: Vec<&String> = lead
        .iter()
        .filter(|m| m.contains("was interrupted"))
        .collect();
    assert_eq!(told.len(), 1, "{lead:#?}");
    assert!(told[0].contains(&child), "{told:?}");
}

/// Ctrl-C while `seam run` waits for a background child leaves the child `interrupted`, to be
/// continued: the wait names the child first (the barrier), then SIGINT ends the command.
#[test]
fn ctrl_c_while_waiting_leaves_the_child_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let slow = detach_config(
        dir.path(),
        "slow.toml",
        r#"{ text = "never in time", delay_ms = 600000 }"#,
    );
    let mut child = seam(&state)
        .args(["run", slow.to_str().unwrap(), "go", "--events"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = seam_tests::lines_of(child.stderr.take().unwrap());
    // Both barriers: the child exists (its `subagent/start`), and the wait names it.
    let (mut started, mut waiting) = (false, false);
    while !(started && waiting) {
        let line = err
            .recv_timeout(Duration::from_secs(60))
            .expect("seam run starts the child and names what it waits for");
        started |= line.contains("\"event\":\"subagent/start\"");
        if line.contains("waiting for 1 background run") {
            assert!(line.contains("spawn-1"), "{line}");
            waiting = true;
        }
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let rest: Vec<String> = err.iter().collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("1 background run left interrupted")),
        "{rest:#?}"
    );
    let store = SqliteStore::open(&dir.path().join("sessions.db"), StoreLimits::default()).unwrap();
    let top = store
        .sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.parent.is_none())
        .unwrap();
    let runs = store.runs_of(&top.id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Interrupted, "{runs:#?}");
    assert!(runs[0].child_session.is_some());
}

/// Waits until `seam run --events` has printed its second `agent/turn-start` (the child's, once
/// the top-level agent's came first): `what` says what failed to happen otherwise.
fn second_turn_started(lines: &std::sync::mpsc::Receiver<String>, what: &str) {
    let mut turns = 0;
    while turns < 2 {
        let line = lines.recv_timeout(Duration::from_secs(60)).expect(what);
        if line.contains("\"event\":\"agent/turn-start\"") {
            turns += 1;
        }
    }
}

/// `kill -9` while a background child's turn is in flight (its task taken, its model call
/// going): a later process's `send_message` continues the child, which sees the task of the
/// turn the kill cut short, then the new message (contract section 12).
#[test]
fn a_child_killed_mid_turn_sees_its_task_again_when_it_is_continued() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let slow = detach_config(
        dir.path(),
        "slow.toml",
        r#"{ text = "never in time", delay_ms = 600000 }"#,
    );
    let quick = detach_config(
        dir.path(),
        "quick.toml",
        r#"{ text = "saw: {user_messages}" }"#,
    );
    let mut first = seam(&state)
        .args(["run", slow.to_str().unwrap(), "go", "--events"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = seam_tests::lines_of(first.stderr.take().unwrap());
    // The barrier: the child's turn began (its `agent/turn-start`, the second one printed),
    // so its task is in the store, in a turn that will never end.
    second_turn_started(&lines, "seam run starts the child's turn");
    first.kill().unwrap();
    first.wait().unwrap();

    let db = dir.path().join("sessions.db");
    let session = {
        let store = SqliteStore::open(&db, StoreLimits::default()).unwrap();
        let top = store
            .sessions()
            .unwrap()
            .into_iter()
            .find(|s| s.parent.is_none())
            .unwrap();
        let runs = store.runs_of(&top.id).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].status, RunStatus::Interrupted, "{runs:#?}");
        let child = runs[0].child_session.clone().expect("the child's session");
        let kinds: Vec<String> = store
            .events(&child)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, ["turn/start", "user-message"], "a turn cut short");
        top.id
    };

    let (code, out, err) = run(
        &state,
        &[
            quick.to_str().unwrap(),
            "--session",
            &session,
            "--model",
            "scripted:followup",
            "again",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // Its task (`dig`, the cut turn's prompt) and then the message, each once.
    assert!(out.contains("saw: dig | wrap up"), "{out}\n{err}");
}

/// A small tmpfs in a mount namespace of its own, held by a process of the test's (the mount
/// goes when that process ends, also if the test dies first). Programs run inside the namespace
/// through `nsenter`; the test reaches its files through `/proc/PID/root`. (SQLite cannot open a
/// database through that link: it resolves it to `/`, outside the namespace.)
struct SmallDisk {
    holder: std::process::Child,
    at: PathBuf,
}

impl SmallDisk {
    /// Mounts `size` of tmpfs on `at` (a folder), or `None` where mounting is not allowed (it
    /// needs root, as in CI).
    fn mount(at: &Path, size: &str) -> Option<Self> {
        use std::io::BufRead as _;
        let mut holder = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount -t tmpfs -o size="$1" seam-test "$0" && echo mounted && exec cat >/dev/null"#)
            .arg(at)
            .arg(size)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut line = String::new();
        let stdout = holder.stdout.take().unwrap();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        if line.trim() == "mounted" {
            return Some(Self {
                holder,
                at: at.to_path_buf(),
            });
        }
        let _ = holder.kill();
        let _ = holder.wait();
        None
    }

    /// `command`, run inside the namespace (where `at` is the tmpfs).
    fn inside(&self, command: &Command) -> Command {
        let mut inside = Command::new("nsenter");
        inside
            .arg(format!("--target={}", self.holder.id()))
            .arg("--mount");
        if let Some(dir) = command.get_current_dir() {
            inside.arg(format!("--wd={}", dir.display()));
        }
        inside
            .arg("--")
            .arg(command.get_program())
            .args(command.get_args());
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => inside.env(key, value),
                None => inside.env_remove(key),
            };
        }
        inside
    }

    /// A file of the tmpfs, as the test reaches it.
    fn file(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.holder.id()))
            .join(self.at.strip_prefix("/").unwrap())
            .join(name)
    }

    /// Fills the disk to its last byte.
    fn fill(&self) {
        use std::io::Write as _;
        let mut file = std::fs::File::create(self.file("filler")).unwrap();
        let block = vec![0u8; 4096];
        loop {
            match file.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(28), "ENOSPC: {e}");
                    break;
                }
            }
        }
    }

    /// Frees what [`SmallDisk::fill`] took.
    fn free(&self) {
        std::fs::remove_file(self.file("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// The session store's disk fills up while `seam run --events` runs (contract section 12): no
/// event is printed that the store does not hold, the command fails naming the store's file,
/// and the runs the store lists agree with what was printed (none printed `completed` is listed
/// interrupted). The disk fills early (the lead's turn still going) and late (only background
/// children left).
#[test]
fn a_full_disk_mid_run_prints_nothing_the_store_lacks_and_fails_naming_the_file() {
    // Fill once the lead's turn has started its children, and once it has ended.
    for fill_after in ["subagent/start", "agent/turn-end"] {
        let dir = tempfile::tempdir().unwrap();
        let mountpoint = dir.path().join("disk");
        std::fs::create_dir(&mountpoint).unwrap();
        let Some(disk) = SmallDisk::mount(&mountpoint, "16m") else {
            eprintln!("skipped: this test mounts a tmpfs (unshare --mount), which needs root");
            return;
        };
        let db = mountpoint.join("sessions.db");
        let state = dir.path().join("state");
        let config = crash_config(dir.path());
        let text = std::fs::read_to_string(&config).unwrap().replace(
            "store = \"sqlite:sessions.db\"",
            &format!("store = \"sqlite:{}\"", db.display()),
        );
        std::fs::write(&config, text).unwrap();

        let mut run = seam(&state);
        run.args(["run", config.to_str().unwrap(), "go", "--events"]);
        let mut child = disk
            .inside(&run)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = seam_tests::lines_of(child.stderr.take().unwrap());
        let mut printed = Vec::new();
        let mut other = Vec::new();
        // The lead's id, for its turn's end: the first turn to start is the lead's.
        let mut lead: Option<String> = None;
        let mut filled = false;
        while let Ok(line) = lines.recv_timeout(Duration::from_secs(120)) {
            if !line.starts_with('{') {
                other.push(line);
                continue;
            }
            let event: serde_json::Value = serde_json::from_str(&line).unwrap();
            if lead.is_none() && event["event"] == "agent/turn-start" {
                lead = event["id"].as_str().map(str::to_string);
            }
            let here = event["event"] == fill_after
                && (fill_after == "subagent/start" || event["id"].as_str() == lead.as_deref());
            printed.push(line);
            if here && !filled {
                disk.fill();
                filled = true;
            }
        }
        let status = child.wait().unwrap();
        assert!(filled, "fill after {fill_after}: {printed:#?}");
        let err = other.join("\n");
        assert_eq!(status.code(), Some(1), "fill after {fill_after}: {err}");
        assert!(
            err.contains(&db.display().to_string()) && err.contains("full"),
            "fill after {fill_after}: the diagnostic names the file: {err}"
        );

        // What the store holds, read from a copy outside the namespace.
        disk.free();
        let copy = dir.path().join("copy");
        std::fs::create_dir(&copy).unwrap();
        for file in ["sessions.db", "sessions.db-wal"] {
            if disk.file(file).exists() {
                std::fs::copy(disk.file(file), copy.join(file)).unwrap();
            }
        }
        let store = SqliteStore::open(&copy.join("sessions.db"), StoreLimits::default()).unwrap();
        assert_eq!(store.integrity_check().unwrap(), "ok");
        let journal = store.journal().unwrap();
        for line in &printed {
            assert!(
                journal.contains(line),
                "fill after {fill_after}: printed, not in the store: {line}\n{err}"
            );
        }
        // The runs it lists agree with what was printed: a run printed `completed` is completed
        // in it, and one whose end was not printed did not end there.
        let ended: Vec<(String, String)> = printed
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| e["event"] == "subagent/end")
            .map(|e| {
                (
                    e["id"].as_str().unwrap().to_string(),
                    e["stop-reason"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let top = store
            .sessions()
            .unwrap()
            .into_iter()
            .find(|s| s.parent.is_none())
            .expect("the top-level session");
        let mut pending = vec![top.id.clone()];
        let mut runs = 0;
        while let Some(session) = pending.pop() {
            for run in store.runs_of(&session).unwrap() {
                runs += 1;
                match ended.iter().find(|(id, _)| *id == run.start.run_id) {
                    Some((_, reason)) => {
                        assert_eq!(run.status, RunStatus::Ended, "{fill_after}: {run:#?}");
                        assert_eq!(run.stop_reason.as_deref(), Some(reason.as_str()));
                    }
                    None => assert_eq!(
                        run.status,
                        RunStatus::Interrupted,
                        "{fill_after}: its end was not printed: {run:#?}"
                    ),
                }
                pending.extend(run.child_session.clone());
            }
        }
        assert!(runs > 0, "{fill_after}: the runs were kept");
    }
}

/// The budget test's config: the tree may spend 200 output tokens in all, over every process
/// that continues its session; `delegate` runs a child whose one reply uses 60.
fn budget_config(dir: &Path) -> PathBuf {
    let guest = |name: &str| seam_tests::guest(name).display().to_string();
    let usage = |out: u32| format!("usage = {{ prompt-tokens = 5, completion-tokens = {out} }}");
    let delegate =
        r#"tool_calls = [{ name = "delegate", arguments = { description = "d", prompt = "p" } }]"#;
    let stuck =
        r#"tool_calls = [{ name = "stuck", arguments = { description = "d", prompt = "p" } }]"#;
    let config = format!(
        r#"
[agent]
model = "scripted:lead"
prompt = "go"
budget = {{ output_tokens = 200 }}

[sessions]
store = "sqlite:sessions.db"

[models.scripts.lead]
steps = [{{ text = "delegating", {u50}, {delegate} }}, {{ text = "done", {u40} }}]

[models.scripts.slow]
steps = [{{ text = "again", {u30}, {stuck} }}]

[models.scripts.final]
steps = [{{ text = "a long answer", {u50} }}]

[models.scripts.child]
steps = [{{ text = "child done", {u60} }}]

[models.scripts.stuck]
steps = [{{ text = "never in time", delay_ms = 600000 }}]

[[plugin]]
id = "spawn"
component = "{spawn}"

[[plugin]]
id = "delegate"
component = "{tool}"
config = {{ provider = "spawn", toolName = "delegate", agentOptions = {{ model = "scripted:child" }} }}

[[plugin]]
id = "delegate_stuck"
component = "{tool}"
config = {{ provider = "spawn", toolName = "stuck", agentOptions = {{ model = "scripted:stuck" }} }}
"#,
        u50 = usage(50),
        u40 = usage(40),
        u30 = usage(30),
        u60 = usage(60),
        spawn = guest("spawn_provider"),
        tool = guest("subagent_tool"),
    );
    let path = dir.join("budget.toml");
    std::fs::write(&path, config).unwrap();
    path
}

/// Contract 16: spend is durable. A session continued with `--session`, after a process that
/// spent part of the budget and one killed with SIGKILL mid-tree, goes on with what is left,
/// never with a fresh budget; `--json` says what was spent and what is left.
#[test]
fn a_continued_session_goes_on_with_what_its_budget_has_left_across_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = budget_config(dir.path());
    let config = config.to_str().unwrap();
    let (code, out, err) = run(&state, &[config, "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let first: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let session = first["session"].as_str().unwrap().to_string();
    assert_eq!(first["spent"]["output_tokens"], 50 + 60 + 40, "{first}");
    assert_eq!(first["spent"]["runs"], 1, "{first}");
    assert_eq!(first["budget"]["output_tokens"], 200, "{first}");
    assert_eq!(first["remaining"]["output_tokens"], 50, "{first}");
    // The same, read from the store: the tree's spend and budget, and its child's.
    let out = seam(&state)
        .args(["sessions", "--config", config, "--json", "tree", &session])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let tree: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tree["spent"]["output_tokens"], 150, "{tree}");
    assert_eq!(tree["budget"]["output_tokens"], 200, "{tree}");
    assert_eq!(tree["runs"][0]["spent"]["output_tokens"], 60, "{tree}");
    let out = seam(&state)
        .args(["sessions", "--config", config, "tree", &session])
        .output()
        .unwrap();
    let text = seam_tests::text(&out.stdout);
    assert!(text.contains("165 tokens (15 in, 150 out)"), "{text}");

    // Killed once its child's turn began (a child that never answers): the lead's call (30
    // tokens) was made and kept.
    let mut killed = seam(&state)
        .args([
            "run",
            config,
            "--session",
            &session,
            "--model",
            "scripted:slow",
            "--events",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = seam_tests::lines_of(killed.stderr.take().unwrap());
    second_turn_started(&lines, "the continued run delegates");
    killed.kill().unwrap();
    killed.wait().unwrap();
    {
        let store =
            SqliteStore::open(&dir.path().join("sessions.db"), StoreLimits::default()).unwrap();
        let record = store.spend(&session).unwrap().expect("the spend is kept");
        assert!(
            record.spent.output_tokens >= 150 + 30,
            "the killed process's model call is kept: {record:?}"
        );
        assert_eq!(record.budget.and_then(|b| b.output_tokens), Some(200));
    }

    // What is left now is at most 20: the answer is cut there, and the budget is spent.
    let (code, out, err) = run(
        &state,
        &[
            config,
            "--session",
            &session,
            "--model",
            "scripted:final",
            "--json",
        ],
    );
    let third: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(third["stop-reason"], "max-tokens", "{out}\n{err}");
    assert_eq!(code, 2, "an unsuccessful stop reason");
    assert_eq!(third["spent"]["output_tokens"], 200, "{third}");
    assert_eq!(third["remaining"]["output_tokens"], 0, "{third}");

    // Nothing left: the next call is refused before it is made, saying what ran out.
    let (code, out, err) = run(
        &state,
        &[config, "--session", &session, "--model", "scripted:final"],
    );
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("stop reason `budget`")
            && err.contains("budget exhausted: output tokens")
            && err.contains("allows 200, 200 spent"),
        "{err}"
    );
}
